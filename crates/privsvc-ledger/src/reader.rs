//! The `LedgerReader` trait: how anything in privsvc reads the ledger.

use alloy_primitives::{Address, B256, U256};
use async_trait::async_trait;

use crate::entity::{Entity, PageQuery, QueryOptions, QueryPage};
use crate::error::LedgerError;
use crate::listing::TagPage;

/// Read access to an Arkiv ledger. Object safe: use it as `Arc<dyn LedgerReader>`.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait LedgerReader: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// The ledger's chain id.
    async fn chain_id(&self) -> Result<u64, LedgerError>;
    /// The current head block number.
    async fn block_number(&self) -> Result<u64, LedgerError>;
    /// One page of an `arkiv_query` in the typed grammar.
    async fn query(
        &self,
        expression: &str,
        options: &QueryOptions,
    ) -> Result<QueryPage, LedgerError>;
    /// Several `arkiv_query` pages at once, answered in the order asked. A reader over
    /// JSON-RPC sends them as one batch (one HTTP request: a listing of thousands of pages
    /// pays the request overhead once per batch, not per page); the default asks
    /// [`LedgerReader::query`] for each, concurrently. One failed page fails them all.
    async fn query_many(&self, queries: &[PageQuery]) -> Result<Vec<QueryPage>, LedgerError> {
        query_each(self, queries).await
    }
    /// [`LedgerReader::query_many`] for the pages of a tags-only listing (queries that select
    /// the key, creator, creation and expiry blocks and the `tag` attribute), answered as
    /// compact [`crate::TagRow`]s. [`crate::RpcLedger`] decodes them straight from the answer
    /// (no allocation per row); the default converts what `query_many` answers.
    async fn query_tags_many(&self, queries: &[PageQuery]) -> Result<Vec<TagPage>, LedgerError> {
        Ok(self
            .query_many(queries)
            .await?
            .into_iter()
            .map(TagPage::from)
            .collect())
    }
    /// A full entity (all fields) at `at_block` (head if `None`), or `None` when not live.
    async fn entity(&self, key: B256, at_block: Option<u64>)
        -> Result<Option<Entity>, LedgerError>;
    /// The code at an address (empty for an ordinary account).
    async fn code_at(&self, address: Address) -> Result<Vec<u8>, LedgerError>;
    /// The per-creator entity nonce (`entityNonce(address)` view).
    async fn entity_nonce(&self, address: Address) -> Result<u64, LedgerError>;
    /// The native-currency balance of an account, in wei.
    async fn balance(&self, address: Address) -> Result<U256, LedgerError>;
    /// The timestamp (unix seconds) of block `number`, or `None` when the ledger has no such
    /// block yet. Verifiers use it to check when an entity was created (`$createdAt` is a block
    /// number).
    async fn block_timestamp(&self, number: u64) -> Result<Option<u64>, LedgerError>;
    /// The timestamp (unix seconds) of the newest block: the chain's time. The default reads
    /// the head's number, then its block.
    async fn head_timestamp(&self) -> Result<Option<u64>, LedgerError> {
        let head = self.block_number().await?;
        self.block_timestamp(head).await
    }
    /// The hash of the transaction that created entity `key` in block `created_at` (the
    /// entity's `$createdAt`), or `None` when the ledger cannot tell (no such creation in that
    /// block, or logs no longer served). Entities do not carry their creating transaction;
    /// the default implementation knows nothing and answers `None`.
    async fn creation_tx(&self, key: B256, created_at: u64) -> Result<Option<B256>, LedgerError> {
        let _ = (key, created_at);
        Ok(None)
    }
}

/// `queries` asked one by one through [`LedgerReader::query`], concurrently, answered in the
/// order asked: the default `query_many`, and the fallback of a reader whose node refuses
/// JSON-RPC batches.
pub async fn query_each<R: LedgerReader + ?Sized>(
    reader: &R,
    queries: &[PageQuery],
) -> Result<Vec<QueryPage>, LedgerError> {
    futures::future::try_join_all(
        queries
            .iter()
            .map(|q| reader.query(&q.expression, &q.options)),
    )
    .await
}
