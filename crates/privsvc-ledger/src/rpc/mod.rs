//! The Arkiv JSON-RPC implementation of [`LedgerReader`] ([`RpcLedger`]) and [`LedgerWriter`]
//! ([`RpcWriter`]), plus [`query_all`] (pagination pinned to one block).
//!
//! Only the method name is logged (debug level); request and response bodies, addresses and
//! keys are never logged.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use alloy_consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{Address, Bytes, Signature, TxKind, B256, U256};
use alloy_sol_types::SolCall;
use async_trait::async_trait;
use k256::ecdsa::SigningKey;
use serde_json::{json, Value};

use crate::abi::{self, check_operations, decode_log, encode_operations, ArkivEvents};
use crate::answer::AnswerError;
use crate::codec::parse_hex;
use crate::entity::{Entity, PageQuery, QueryOptions, QueryPage, Select};
use crate::error::{ChannelError, LedgerError};
use crate::keys::predict_entity_keys;
use crate::listing::TagPage;
use crate::ops::Operation;
use crate::query::Expr;
use crate::reader::LedgerReader;
use crate::wire::{self, parse_quantity, quantity};
use crate::writer::{BatchReceipt, CreatedEntity, LedgerWriter, PreparedTx, TransferredEntity};

mod batch;
mod channel;
mod fast;
mod node_error;
pub(crate) mod tag_rows;

pub use batch::{decode_query_batch_answer, query_batch_body};
use channel::HttpChannel;
pub use channel::RpcChannel;

/// Largest page `arkiv_query` serves.
pub const MAX_PAGE_SIZE: u32 = 200;
/// Gas margin added to `eth_estimateGas`, in percent.
pub const GAS_MARGIN_PERCENT: u64 = 20;

/// A JSON-RPC client of an Arkiv node (native protocol) implementing [`LedgerReader`]: over
/// HTTP ([`RpcLedger::new`]), or over any [`RpcChannel`] ([`RpcLedger::with_channel`], the wasm
/// client's JavaScript ledger reader).
pub struct RpcLedger {
    channel: Box<dyn RpcChannel>,
    /// The node's URL, or what the channel says it is.
    url: String,
    next_id: AtomicU64,
    /// Whether pages are asked for in JSON-RPC batches (until the node answers one as no
    /// batch, or the channel sends none: then page by page).
    batches: AtomicBool,
}

impl std::fmt::Debug for RpcLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcLedger").field("url", &self.url).finish()
    }
}

/// Time limit of one call by [`RpcLedger::new`] and [`RpcLedger::with_client`] (30 s).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

fn hex_bytes(b: &[u8]) -> Value {
    Value::String(format!("0x{}", hex::encode(b)))
}

fn addr_json(a: &Address) -> Value {
    Value::String(format!("0x{}", hex::encode(a)))
}

fn parse_u256(v: &Value, what: &'static str) -> Result<U256, LedgerError> {
    v.as_str()
        .and_then(crate::codec::parse_uint)
        .ok_or_else(|| {
            LedgerError::Decode(AnswerError::NotA {
                field: what,
                expected: "a quantity",
            })
        })
}

fn parse_data(v: &Value, what: &'static str) -> Result<Vec<u8>, LedgerError> {
    v.as_str()
        .and_then(parse_hex)
        .ok_or(LedgerError::Decode(AnswerError::NotHex(what)))
}

impl RpcLedger {
    /// The timestamp of the block `tag` (a number or `"latest"`), `None` when there is none.
    async fn timestamp_of(&self, tag: serde_json::Value) -> Result<Option<u64>, LedgerError> {
        let block = self
            .call("eth_getBlockByNumber", json!([tag, false]))
            .await?;
        if block.is_null() {
            return Ok(None);
        }
        let ts = block
            .get("timestamp")
            .ok_or(LedgerError::Decode(AnswerError::Missing(
                "a block's timestamp",
            )))?;
        parse_quantity(ts).map(Some)
    }

    /// A client of the node at `url` (HTTP), with a 30 s request timeout.
    pub fn new(url: impl Into<String>) -> Result<Self, LedgerError> {
        Self::with_timeout(url, DEFAULT_TIMEOUT)
    }

    /// A client of the node at `url` (HTTP) whose requests give up after `timeout` (connecting
    /// included).
    pub fn with_timeout(url: impl Into<String>, timeout: Duration) -> Result<Self, LedgerError> {
        #[cfg(not(target_arch = "wasm32"))]
        let builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout);
        // In wasm32 (fetch) the limit is put on each request instead (`privsvc_rt::send`).
        #[cfg(target_arch = "wasm32")]
        let builder = reqwest::Client::builder();
        let client = builder.build().map_err(|e| LedgerError::Http {
            method: "connect",
            source: e.into(),
        })?;
        Ok(Self::over_http(client, url.into(), timeout))
    }

    /// A client using a caller-configured `reqwest::Client`.
    pub fn with_client(client: reqwest::Client, url: impl Into<String>) -> Self {
        Self::over_http(client, url.into(), DEFAULT_TIMEOUT)
    }

    fn over_http(client: reqwest::Client, url: String, timeout: Duration) -> Self {
        let channel = HttpChannel {
            client,
            url: url.clone(),
            timeout,
        };
        Self::with_channel(Box::new(channel), url)
    }

    /// A reader whose calls go through `channel`; `name` is what [`RpcLedger::url`] returns
    /// (for a channel that is not a URL, a description of where it leads).
    pub fn with_channel(channel: Box<dyn RpcChannel>, name: impl Into<String>) -> Self {
        RpcLedger {
            channel,
            url: name.into(),
            next_id: AtomicU64::new(1),
            batches: AtomicBool::new(true),
        }
    }

    /// The node URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One JSON-RPC call; a JSON-RPC error becomes [`LedgerError::Rpc`].
    pub async fn call(&self, method: &'static str, params: Value) -> Result<Value, LedgerError> {
        decode_answer(method, &self.answer(method, &params).await?)
    }

    /// The bytes of the answer to one JSON-RPC call.
    async fn answer(&self, method: &'static str, params: &Value) -> Result<Vec<u8>, LedgerError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.channel.call(id, method, params).await
    }

    /// The pages of `queries` asked for in one JSON-RPC batch; `None` when the node answered
    /// the batch as no batch (it does not take them) or the channel sends no batches.
    /// The answer to `queries` sent as one JSON-RPC batch, with the id of its first query;
    /// `None` when the channel or the node takes no batches.
    async fn batch_answer(
        &self,
        queries: &[PageQuery],
    ) -> Result<Option<(Vec<u8>, u64)>, LedgerError> {
        let first_id = self
            .next_id
            .fetch_add(queries.len() as u64, Ordering::Relaxed);
        let body = query_batch_body(queries, first_id);
        Ok(self
            .channel
            .batch("arkiv_query", body)
            .await?
            .map(|answer| (answer, first_id)))
    }

    async fn query_batch(
        &self,
        queries: &[PageQuery],
    ) -> Result<Option<Vec<QueryPage>>, LedgerError> {
        match self.batch_answer(queries).await? {
            Some((answer, first_id)) => decode_query_batch_answer(&answer, first_id, queries.len()),
            None => Ok(None),
        }
    }

    /// [`RpcLedger::query_batch`] for a tags-only listing: the rows decoded straight from the
    /// answer when it has the usual shape, else through the general decoder.
    async fn tag_batch(&self, queries: &[PageQuery]) -> Result<Option<Vec<TagPage>>, LedgerError> {
        let Some((answer, first_id)) = self.batch_answer(queries).await? else {
            return Ok(None);
        };
        if let Some(pages) = tag_rows::tag_pages(&answer, first_id, queries.len()) {
            return Ok(Some(pages));
        }
        Ok(decode_query_batch_answer(&answer, first_id, queries.len())?
            .map(|pages| pages.into_iter().map(TagPage::from).collect()))
    }

    /// The params of an `arkiv_query` call (the key always selected: every entity is
    /// identified by it).
    fn query_params(expression: &str, options: &QueryOptions) -> Value {
        let mut options = options.clone();
        options.select.key = true;
        json!([expression, wire::query_options_to_json(&options)])
    }

    async fn quantity_call(&self, method: &'static str, params: Value) -> Result<u64, LedgerError> {
        parse_quantity(&self.call(method, params).await?)
    }

    /// `eth_call` to the Arkiv address at `block` ("latest" when `None`); a revert is
    /// [`LedgerError::Reverted`] with the decoded error.
    pub async fn eth_call(
        &self,
        from: Option<Address>,
        data: &[u8],
        block: Option<u64>,
    ) -> Result<Vec<u8>, LedgerError> {
        let mut tx = json!({"to": addr_json(&abi::ARKIV_ADDRESS), "data": hex_bytes(data)});
        if let Some(f) = from {
            tx["from"] = addr_json(&f);
        }
        let tag = block.map(quantity).unwrap_or_else(|| json!("latest"));
        let r = self.call("eth_call", json!([tx, tag])).await?;
        parse_data(&r, "eth_call result")
    }

    /// `eth_estimateGas` of an `execute()` call from `from`; a revert becomes
    /// [`LedgerError::Reverted`].
    pub async fn estimate_gas(&self, from: Address, data: &[u8]) -> Result<u64, LedgerError> {
        let tx = json!({
            "from": addr_json(&from),
            "to": addr_json(&abi::ARKIV_ADDRESS),
            "data": hex_bytes(data),
            "value": "0x0",
        });
        let r = self.call("eth_estimateGas", json!([tx])).await?;
        parse_quantity(&r)
    }

    /// The account nonce of `address` (`pending` includes queued transactions).
    pub async fn transaction_count(
        &self,
        address: Address,
        pending: bool,
    ) -> Result<u64, LedgerError> {
        let tag = if pending { "pending" } else { "latest" };
        self.quantity_call("eth_getTransactionCount", json!([addr_json(&address), tag]))
            .await
    }

    /// Current fees: `(max_fee_per_gas, max_priority_fee_per_gas)` from the latest block's
    /// base fee and `eth_maxPriorityFeePerGas` (falling back to `eth_gasPrice − baseFee`).
    /// `max_fee = 2 × baseFee + priority`.
    pub async fn fees(&self) -> Result<(u128, u128), LedgerError> {
        // Both asked at once: one round trip, not two.
        let (block, priority) = tokio::join!(
            self.call("eth_getBlockByNumber", json!(["latest", false])),
            self.call("eth_maxPriorityFeePerGas", json!([]))
        );
        let block = block?;
        let base = match block.get("baseFeePerGas") {
            Some(v) if !v.is_null() => u128::try_from(parse_u256(v, "baseFeePerGas")?)
                .map_err(|_| AnswerError::OutOfRange("baseFeePerGas"))?,
            _ => 0,
        };
        let priority = match priority {
            Ok(v) => u128::try_from(parse_u256(&v, "maxPriorityFeePerGas")?)
                .map_err(|_| AnswerError::OutOfRange("maxPriorityFeePerGas"))?,
            Err(LedgerError::Rpc { .. }) => {
                let gp = self.call("eth_gasPrice", json!([])).await?;
                let gp = u128::try_from(parse_u256(&gp, "gasPrice")?)
                    .map_err(|_| AnswerError::OutOfRange("gasPrice"))?;
                gp.saturating_sub(base)
            }
            Err(e) => return Err(e),
        };
        Ok((base.saturating_mul(2).saturating_add(priority), priority))
    }

    /// Decode a receipt object (`eth_getTransactionReceipt`) into a [`BatchReceipt`]; the
    /// revert reason is left empty.
    pub fn parse_receipt(r: &Value) -> Result<BatchReceipt, LedgerError> {
        let tx_hash = wire::parse_b256(&r["transactionHash"], "transactionHash")?;
        let block_number = parse_quantity(&r["blockNumber"])?;
        let success = parse_quantity(&r["status"])? == 1;
        let gas_used = parse_quantity(&r["gasUsed"])?;
        let mut created = Vec::new();
        let mut transfers = Vec::new();
        for log in r["logs"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let Some(topics) = arkiv_log_topics(log)? else {
                continue;
            };
            let data = parse_data(&log["data"], "log data")?;
            match decode_log(&topics, &data) {
                Some(ArkivEvents::EntityCreated(e)) => created.push(CreatedEntity {
                    key: e.entityKey,
                    owner: e.owner,
                    expires_at: e.expiresAt,
                }),
                Some(ArkivEvents::OwnershipTransferred(e)) => transfers.push(TransferredEntity {
                    key: e.entityKey,
                    from: e.previousOwner,
                    to: e.newOwner,
                }),
                _ => {}
            }
        }
        Ok(BatchReceipt {
            tx_hash,
            block_number,
            success,
            gas_used,
            created,
            transfers,
            revert_reason: None,
        })
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl LedgerReader for RpcLedger {
    async fn chain_id(&self) -> Result<u64, LedgerError> {
        self.quantity_call("eth_chainId", json!([])).await
    }

    async fn block_number(&self) -> Result<u64, LedgerError> {
        self.quantity_call("eth_blockNumber", json!([])).await
    }

    async fn query(
        &self,
        expression: &str,
        options: &QueryOptions,
    ) -> Result<QueryPage, LedgerError> {
        let params = Self::query_params(expression, options);
        decode_query_answer(&self.answer("arkiv_query", &params).await?)
    }

    async fn query_many(&self, queries: &[PageQuery]) -> Result<Vec<QueryPage>, LedgerError> {
        if queries.len() > 1 && self.batches.load(Ordering::Relaxed) {
            match self.query_batch(queries).await? {
                Some(pages) => return Ok(pages),
                None => self.batches.store(false, Ordering::Relaxed),
            }
        }
        crate::reader::query_each(self, queries).await
    }

    async fn query_tags_many(&self, queries: &[PageQuery]) -> Result<Vec<TagPage>, LedgerError> {
        if queries.len() > 1 && self.batches.load(Ordering::Relaxed) {
            match self.tag_batch(queries).await? {
                Some(pages) => return Ok(pages),
                None => self.batches.store(false, Ordering::Relaxed),
            }
        }
        futures::future::try_join_all(queries.iter().map(|q| async move {
            let params = Self::query_params(&q.expression, &q.options);
            let answer = self.answer("arkiv_query", &params).await?;
            match tag_rows::tag_page(&answer) {
                Some(page) => Ok(page),
                None => decode_query_answer(&answer).map(TagPage::from),
            }
        }))
        .await
    }

    async fn entity(
        &self,
        key: B256,
        at_block: Option<u64>,
    ) -> Result<Option<Entity>, LedgerError> {
        // As the 0.8 SDK does: a query by $key with everything selected.
        let options = QueryOptions {
            at_block,
            select: wire::select_all(),
            limit: Some(1),
            cursor: None,
        };
        let page = self.query(&Expr::key_is(key).to_string(), &options).await?;
        Ok(page.entities.into_iter().next())
    }

    async fn block_timestamp(&self, number: u64) -> Result<Option<u64>, LedgerError> {
        self.timestamp_of(json!(format!("{number:#x}"))).await
    }

    /// One `eth_getBlockByNumber("latest", false)`.
    async fn head_timestamp(&self) -> Result<Option<u64>, LedgerError> {
        self.timestamp_of(json!("latest")).await
    }

    async fn code_at(&self, address: Address) -> Result<Vec<u8>, LedgerError> {
        let r = self
            .call("eth_getCode", json!([addr_json(&address), "latest"]))
            .await?;
        parse_data(&r, "eth_getCode result")
    }

    async fn entity_nonce(&self, address: Address) -> Result<u64, LedgerError> {
        let out = self
            .eth_call(None, &abi::entity_nonce_calldata(address), None)
            .await?;
        abi::entityNonceCall::abi_decode_returns(&out).map_err(|source| {
            LedgerError::Decode(AnswerError::Abi {
                what: "entityNonce result",
                source: Box::new(source),
            })
        })
    }

    async fn balance(&self, address: Address) -> Result<U256, LedgerError> {
        let r = self
            .call("eth_getBalance", json!([addr_json(&address), "latest"]))
            .await?;
        parse_u256(&r, "balance")
    }

    /// `eth_getLogs` for the `EntityCreated` log of `key` (topic0 `EntityCreated`, topic1 the
    /// key) from the Arkiv address in block `created_at` only; `None` when there is none.
    async fn creation_tx(&self, key: B256, created_at: u64) -> Result<Option<B256>, LedgerError> {
        let filter = json!({
            "address": addr_json(&abi::ARKIV_ADDRESS),
            "fromBlock": quantity(created_at),
            "toBlock": quantity(created_at),
            "topics": [entity_created_topic(), key],
        });
        let logs = self.call("eth_getLogs", json!([filter])).await?;
        let logs = logs
            .as_array()
            .ok_or(LedgerError::Decode(AnswerError::NotA {
                field: "eth_getLogs result",
                expected: "an array",
            }))?;
        creation_tx_of(logs, key)
    }
}

/// The `result` of the JSON-RPC answer `body` to `method`: a JSON-RPC error as the node's
/// error says (`rpc/node_error.rs`), [`LedgerError::Transport`] for a body that is not JSON-RPC.
pub fn decode_answer(method: &str, body: &[u8]) -> Result<Value, LedgerError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| LedgerError::Transport(ChannelError::NotJsonRpc(e)))?;
    result_of(method, v)
}

/// The page of the JSON-RPC answer `body` to `arkiv_query`, decoded as `RpcLedger` decodes it:
/// straight from the bytes into entities (borrowed strings, no `Value` tree) when the answer
/// has the usual shape, else through the general decoder with its errors.
pub fn decode_query_answer(body: &[u8]) -> Result<QueryPage, LedgerError> {
    match fast::query_page(body) {
        Some(page) => Ok(page),
        None => query_page_from_json(&decode_answer("arkiv_query", body)?),
    }
}

/// The `result` member of the parsed answer `v`, or its `error` as the node's error says
/// ([`node_error`]).
fn result_of(method: &str, mut v: Value) -> Result<Value, LedgerError> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(node_error::from_error_object(method, err));
    }
    v.get_mut("result")
        .map(Value::take)
        .ok_or(LedgerError::Decode(AnswerError::Missing(
            "the answer's result",
        )))
}

/// Decode the `result` of `arkiv_query` (`{data: [RpcEntity], blockNumber, cursor?}`).
pub(crate) fn query_page_from_json(r: &Value) -> Result<QueryPage, LedgerError> {
    let entities = r["data"]
        .as_array()
        .ok_or(LedgerError::Decode(AnswerError::Missing(
            "arkiv_query result's data",
        )))?
        .iter()
        .map(wire::entity_from_json)
        .collect::<Result<Vec<_>, _>>()?;
    let block_number = parse_quantity(&r["blockNumber"])?;
    let cursor = r.get("cursor").and_then(Value::as_str).map(str::to_owned);
    Ok(QueryPage {
        entities,
        block_number,
        cursor,
    })
}

/// The topics of `log` when the Arkiv contract emitted it, `None` for another contract's log.
fn arkiv_log_topics(log: &Value) -> Result<Option<Vec<B256>>, LedgerError> {
    let address = log["address"].as_str().and_then(parse_hex);
    if address.as_deref() != Some(abi::ARKIV_ADDRESS.as_slice()) {
        return Ok(None);
    }
    log["topics"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|t| wire::parse_b256(t, "topic"))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// topic0 of the `EntityCreated` event.
fn entity_created_topic() -> B256 {
    <abi::EntityCreated as alloy_sol_types::SolEvent>::SIGNATURE_HASH
}

/// The transaction hash of the `EntityCreated` log of `key` among `logs` (a node ignoring part
/// of the filter is tolerated: address and topics are checked again here).
pub(crate) fn creation_tx_of(logs: &[Value], key: B256) -> Result<Option<B256>, LedgerError> {
    for log in logs {
        let Some(topics) = arkiv_log_topics(log)? else {
            continue;
        };
        if topics.first() == Some(&entity_created_topic()) && topics.get(1) == Some(&key) {
            return wire::parse_b256(&log["transactionHash"], "transactionHash").map(Some);
        }
    }
    Ok(None)
}

/// Every entity matching `expression`, page by page (200 per page), all pages evaluated at the
/// same block: `at_block`, or the block the first page reports.
pub async fn query_all(
    reader: &dyn LedgerReader,
    expression: &str,
    select: &Select,
    at_block: Option<u64>,
) -> Result<Vec<Entity>, LedgerError> {
    query_all_pinned(reader, expression, select, at_block)
        .await
        .map(|(_, entities)| entities)
}

/// Like [`query_all`], and also returns the block every page was evaluated at.
pub async fn query_all_pinned(
    reader: &dyn LedgerReader,
    expression: &str,
    select: &Select,
    at_block: Option<u64>,
) -> Result<(u64, Vec<Entity>), LedgerError> {
    let mut options = QueryOptions {
        at_block,
        select: select.clone(),
        limit: Some(MAX_PAGE_SIZE),
        cursor: None,
    };
    let mut out = Vec::new();
    loop {
        let page = reader.query(expression, &options).await?;
        out.extend(page.entities);
        match page.cursor {
            Some(c) if options.cursor.as_deref() == Some(c.as_str()) => {
                return Err(AnswerError::RepeatedCursor.into());
            }
            Some(c) => {
                options.at_block = Some(options.at_block.unwrap_or(page.block_number));
                options.cursor = Some(c);
            }
            None => return Ok((options.at_block.unwrap_or(page.block_number), out)),
        }
    }
}

/// A [`LedgerWriter`] that signs EIP-1559 `execute()` transactions with one secp256k1 key and
/// sends them through an [`RpcLedger`]. The key is zeroized when the writer is dropped.
pub struct RpcWriter {
    ledger: RpcLedger,
    key: SigningKey,
    address: Address,
    chain_id: u64,
}

impl std::fmt::Debug for RpcWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcWriter")
            .field("url", &self.ledger.url)
            .field("chain_id", &self.chain_id)
            .finish_non_exhaustive()
    }
}

impl RpcWriter {
    /// A writer for the 32-byte secret key `secret`; reads the chain id from the node.
    pub async fn connect(ledger: RpcLedger, secret: &[u8; 32]) -> Result<Self, LedgerError> {
        let key = SigningKey::from_slice(secret)
            .map_err(|_| LedgerError::invalid("the signing key is not a valid secp256k1 scalar"))?;
        let chain_id = ledger.chain_id().await?;
        Ok(Self::new(ledger, key, chain_id))
    }

    /// A writer for `key` on chain `chain_id` (no network access).
    pub fn new(ledger: RpcLedger, key: SigningKey, chain_id: u64) -> Self {
        let address = Address::from_public_key(key.verifying_key());
        RpcWriter {
            ledger,
            key,
            address,
            chain_id,
        }
    }

    /// The reader side.
    pub fn ledger(&self) -> &RpcLedger {
        &self.ledger
    }

    /// The chain id transactions are signed for.
    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// The keys the next creates from this account will get, one per salt, from the current
    /// `entityNonce`. Valid only while no other create from this account lands first.
    pub async fn predict_keys(&self, salts: &[u128]) -> Result<Vec<B256>, LedgerError> {
        let nonce = self.ledger.entity_nonce(self.address).await?;
        Ok(predict_entity_keys(
            self.chain_id,
            self.address,
            nonce,
            salts,
        ))
    }

    /// Sign `tx` and return it as a [`PreparedTx`].
    pub fn sign(&self, tx: TxEip1559) -> Result<PreparedTx, LedgerError> {
        let hash = tx.signature_hash();
        let (sig, recid) = self
            .key
            .sign_prehash_recoverable(hash.as_slice())
            .map_err(|e| LedgerError::invalid(format!("signing failed: {e}")))?;
        let signed = tx.into_signed(Signature::from((sig, recid)));
        let tx_hash = *signed.hash();
        let nonce = signed.tx().nonce;
        let raw = TxEnvelope::Eip1559(signed).encoded_2718();
        Ok(PreparedTx {
            hash: tx_hash,
            nonce,
            raw: raw.into(),
        })
    }

    async fn revert_reason(&self, tx_hash: B256, block: u64) -> String {
        let tx = match self
            .ledger
            .call("eth_getTransactionByHash", json!([tx_hash]))
            .await
        {
            Ok(t) if !t.is_null() => t,
            _ => return "reverted (transaction not found for re-simulation)".into(),
        };
        let Some(input) = tx.get("input").and_then(Value::as_str).and_then(parse_hex) else {
            return "reverted (transaction input unavailable)".into();
        };
        let from = tx
            .get("from")
            .and_then(Value::as_str)
            .and_then(parse_hex)
            .filter(|b| b.len() == 20)
            .map(|b| Address::from_slice(&b));
        // Re-run the call on the state the transaction saw, then on the head.
        let mut last = String::new();
        for at in [Some(block.saturating_sub(1)), None] {
            match self.ledger.eth_call(from, &input, at).await {
                Err(LedgerError::Reverted(revert)) => return revert.into_reason(),
                Err(e) => last = e.to_string(),
                Ok(_) => last = "re-simulation succeeded".into(),
            }
        }
        format!("reverted (no revert data: {last}; possibly out of gas)")
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl LedgerWriter for RpcWriter {
    fn address(&self) -> Address {
        self.address
    }

    async fn prepare(
        &self,
        ops: &[Operation],
        nonce: Option<u64>,
    ) -> Result<PreparedTx, LedgerError> {
        check_operations(ops)?;
        let data: Bytes = encode_operations(ops);
        let nonce = match nonce {
            Some(n) => n,
            None => self.ledger.transaction_count(self.address, true).await?,
        };
        // Gas and fees asked at once: one round trip, not two.
        let (estimate, fees) = tokio::join!(
            self.ledger.estimate_gas(self.address, &data),
            self.ledger.fees()
        );
        let estimate = estimate?;
        let gas_limit = estimate.saturating_add(estimate * GAS_MARGIN_PERCENT / 100);
        let (max_fee_per_gas, max_priority_fee_per_gas) = fees?;
        self.sign(TxEip1559 {
            chain_id: self.chain_id,
            nonce,
            gas_limit,
            max_fee_per_gas,
            max_priority_fee_per_gas,
            to: TxKind::Call(abi::ARKIV_ADDRESS),
            value: U256::ZERO,
            access_list: Default::default(),
            input: data,
        })
    }

    async fn broadcast(&self, tx: &PreparedTx) -> Result<(), LedgerError> {
        match self
            .ledger
            .call("eth_sendRawTransaction", json!([hex_bytes(&tx.raw)]))
            .await
        {
            Ok(_) | Err(LedgerError::AlreadyKnown) => Ok(()),
            Err(
                e @ (LedgerError::NonceTooLow { .. }
                | LedgerError::ReplacementUnderpriced { .. }
                | LedgerError::ExceedsBlockGasLimit { .. }
                | LedgerError::Rpc { .. }),
            ) => {
                // A refusal ("nonce too low") of a transaction that was already mined is not
                // an error.
                let known = self
                    .ledger
                    .call("eth_getTransactionByHash", json!([tx.hash]))
                    .await
                    .map(|v| !v.is_null())
                    .unwrap_or(false);
                if known {
                    Ok(())
                } else {
                    Err(e)
                }
            }
            Err(e) => Err(e),
        }
    }

    async fn receipt(&self, tx_hash: B256) -> Result<Option<BatchReceipt>, LedgerError> {
        let r = self
            .ledger
            .call("eth_getTransactionReceipt", json!([tx_hash]))
            .await?;
        if r.is_null() {
            return Ok(None);
        }
        let mut receipt = RpcLedger::parse_receipt(&r)?;
        if !receipt.success {
            receipt.revert_reason = Some(self.revert_reason(tx_hash, receipt.block_number).await);
        }
        Ok(Some(receipt))
    }

    async fn mined_nonce(&self) -> Result<Option<u64>, LedgerError> {
        Ok(Some(
            self.ledger.transaction_count(self.address, false).await?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_consensus::transaction::SignerRecoverable;
    use alloy_eips::eip2718::Decodable2718;
    use alloy_sol_types::SolEvent;

    /// A channel that answers from a script, sends no batches, and records the methods asked.
    struct Scripted {
        asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    }

    #[async_trait]
    impl RpcChannel for Scripted {
        async fn call(
            &self,
            id: u64,
            method: &'static str,
            _: &Value,
        ) -> Result<Vec<u8>, LedgerError> {
            self.asked.lock().unwrap().push(method.to_string());
            let answer = match method {
                "eth_blockNumber" => json!({"jsonrpc": "2.0", "id": id, "result": "0x2a"}),
                "arkiv_query" => json!({"jsonrpc": "2.0", "id": id,
                    "result": {"data": [], "blockNumber": "0x2a"}}),
                _ => json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": "no such method"}}),
            };
            Ok(answer.to_string().into_bytes())
        }

        async fn batch(&self, _: &'static str, _: String) -> Result<Option<Vec<u8>>, LedgerError> {
            Ok(None)
        }
    }

    #[tokio::test]
    async fn every_read_goes_through_the_channel_and_a_channel_without_batches_is_asked_page_by_page(
    ) {
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let ledger = RpcLedger::with_channel(
            Box::new(Scripted {
                asked: asked.clone(),
            }),
            "a script",
        );
        assert_eq!(ledger.url(), "a script");
        assert_eq!(ledger.block_number().await.unwrap(), 42);
        let page = PageQuery {
            expression: "project = str('p')".into(),
            options: QueryOptions::default(),
        };
        let pages = ledger
            .query_many(&[page.clone(), page.clone(), page])
            .await
            .unwrap();
        assert_eq!(pages.len(), 3);
        assert!(pages.iter().all(|p| p.block_number == 42));
        let err = ledger.code_at(Address::ZERO).await.unwrap_err();
        assert!(
            matches!(err, LedgerError::Rpc(crate::RpcError { code: -32601, .. })),
            "{err:?}"
        );
        assert_eq!(
            *asked.lock().unwrap(),
            [
                "eth_blockNumber",
                "arkiv_query",
                "arkiv_query",
                "arkiv_query",
                "eth_getCode"
            ]
        );
    }

    #[tokio::test]
    async fn an_unreachable_node_is_an_http_error_that_keeps_its_source() {
        // A port nothing listens on: the connection is refused.
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", free.local_addr().unwrap());
        drop(free);
        let ledger = RpcLedger::with_timeout(url.clone(), Duration::from_secs(2)).unwrap();
        let err = ledger.block_number().await.unwrap_err();
        let LedgerError::Http { method, source } = &err else {
            panic!("expected LedgerError::Http, got {err:?}");
        };
        assert_eq!(*method, "eth_blockNumber");
        assert!(
            matches!(source, privsvc_rt::HttpError::Client(e) if e.is_connect()),
            "{source:?}"
        );
        // The client's error is the source, and no message of the chain names the URL.
        let chain = std::iter::successors(std::error::Error::source(&err), |e| e.source())
            .map(|e| e.to_string())
            .collect::<Vec<_>>();
        assert!(!chain.is_empty());
        assert!(chain.iter().all(|m| !m.contains(&url)), "{chain:?}");
    }

    #[test]
    fn an_answer_that_is_not_json_keeps_the_parsers_error() {
        match decode_answer("eth_chainId", b"<html>bad gateway</html>") {
            Err(LedgerError::Transport(ChannelError::NotJsonRpc(e))) => {
                assert!(e.is_syntax(), "{e}")
            }
            other => panic!("{other:?}"),
        }
        match decode_answer("eth_chainId", br#"{"jsonrpc":"2.0","id":1}"#) {
            Err(LedgerError::Decode(AnswerError::Missing(what))) => {
                assert_eq!(what, "the answer's result")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn signs_a_recoverable_eip1559_transaction() {
        let key = SigningKey::from_slice(&[7u8; 32]).unwrap();
        let w = RpcWriter::new(RpcLedger::new("http://127.0.0.1:9").unwrap(), key, 1337);
        let data = encode_operations(&[Operation::Delete {
            key: B256::repeat_byte(1),
        }]);
        let p = w
            .sign(TxEip1559 {
                chain_id: 1337,
                nonce: 4,
                gas_limit: 100_000,
                max_fee_per_gas: 2_000_000_000,
                max_priority_fee_per_gas: 1_000_000_000,
                to: TxKind::Call(abi::ARKIV_ADDRESS),
                value: U256::ZERO,
                access_list: Default::default(),
                input: data.clone(),
            })
            .unwrap();
        assert_eq!(p.nonce, 4);
        let env = TxEnvelope::decode_2718(&mut p.raw.as_ref()).unwrap();
        assert_eq!(*env.tx_hash(), p.hash);
        assert_eq!(env.recover_signer().unwrap(), w.address());
        let TxEnvelope::Eip1559(s) = env else {
            panic!("not EIP-1559")
        };
        assert_eq!(s.tx().input, data);
        assert_eq!(s.tx().chain_id, 1337);
    }

    #[test]
    fn parses_receipts_of_the_five_events() {
        let key = B256::repeat_byte(9);
        let relayer = Address::repeat_byte(0xaa);
        let owner = Address::repeat_byte(0xbb);
        let created = abi::EntityCreated {
            entityKey: key,
            owner: relayer,
            expiresAt: 77,
            creationFlags: 0,
        }
        .encode_log_data();
        let moved = abi::OwnershipTransferred {
            entityKey: key,
            previousOwner: relayer,
            newOwner: owner,
        }
        .encode_log_data();
        let log = |d: &alloy_primitives::LogData, address: Address| {
            json!({
                "address": addr_json(&address),
                "topics": d.topics().iter().map(|t| t.to_string()).collect::<Vec<_>>(),
                "data": hex_bytes(&d.data),
            })
        };
        let r = json!({
            "transactionHash": B256::repeat_byte(5).to_string(),
            "blockNumber": "0x10",
            "status": "0x1",
            "gasUsed": "0x5208",
            "logs": [
                log(&created, abi::ARKIV_ADDRESS),
                log(&created, Address::repeat_byte(1)),
                log(&moved, abi::ARKIV_ADDRESS),
            ],
        });
        let b = RpcLedger::parse_receipt(&r).unwrap();
        assert!(b.success);
        assert_eq!(b.block_number, 16);
        assert_eq!(b.gas_used, 21000);
        assert_eq!(
            b.created,
            vec![CreatedEntity {
                key,
                owner: relayer,
                expires_at: 77
            }]
        );
        assert_eq!(
            b.transfers,
            vec![TransferredEntity {
                key,
                from: relayer,
                to: owner
            }]
        );
    }

    /// A reader serving `n` entities in pages, recording the options of every call.
    struct Paged {
        n: usize,
        head: u64,
        seen: std::sync::Mutex<Vec<QueryOptions>>,
    }

    #[async_trait]
    impl LedgerReader for Paged {
        async fn chain_id(&self) -> Result<u64, LedgerError> {
            Ok(1)
        }
        async fn block_number(&self) -> Result<u64, LedgerError> {
            Ok(self.head)
        }
        async fn query(&self, _: &str, o: &QueryOptions) -> Result<QueryPage, LedgerError> {
            self.seen.lock().unwrap().push(o.clone());
            let start: usize = o.cursor.as_deref().map_or(0, |c| c.parse().unwrap());
            let end = (start + o.limit.unwrap() as usize).min(self.n);
            Ok(QueryPage {
                entities: (start..end)
                    .map(|i| Entity {
                        key: B256::with_last_byte(i as u8),
                        ..Entity::default()
                    })
                    .collect(),
                block_number: o.at_block.unwrap_or(self.head),
                cursor: (end < self.n).then(|| end.to_string()),
            })
        }
        async fn entity(&self, _: B256, _: Option<u64>) -> Result<Option<Entity>, LedgerError> {
            Ok(None)
        }
        async fn block_timestamp(&self, _: u64) -> Result<Option<u64>, LedgerError> {
            Ok(Some(0))
        }
        async fn code_at(&self, _: Address) -> Result<Vec<u8>, LedgerError> {
            Ok(vec![])
        }
        async fn entity_nonce(&self, _: Address) -> Result<u64, LedgerError> {
            Ok(0)
        }
        async fn balance(&self, _: Address) -> Result<U256, LedgerError> {
            Ok(U256::ZERO)
        }
    }

    #[tokio::test]
    async fn query_all_pins_every_page_to_the_first_block() {
        let r = Paged {
            n: 450,
            head: 77,
            seen: Default::default(),
        };
        let all = query_all(&r, "*", &Select::default(), None).await.unwrap();
        assert_eq!(all.len(), 450);
        let seen = r.seen.lock().unwrap();
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0].at_block, None);
        assert!(seen[1..].iter().all(|o| o.at_block == Some(77)));
        assert!(seen.iter().all(|o| o.limit == Some(MAX_PAGE_SIZE)));
    }

    #[tokio::test]
    async fn query_all_pinned_returns_the_block_every_page_was_evaluated_at() {
        let paged = |n| Paged {
            n,
            head: 77,
            seen: Default::default(),
        };
        let (block, all) = query_all_pinned(&paged(450), "*", &Select::default(), None)
            .await
            .unwrap();
        assert_eq!((block, all.len()), (77, 450));
        let (block, all) = query_all_pinned(&paged(10), "*", &Select::default(), Some(5))
            .await
            .unwrap();
        assert_eq!((block, all.len()), (5, 10));
    }

    #[test]
    fn creation_tx_is_the_entity_created_log_of_the_key() {
        let key = B256::repeat_byte(9);
        let other = B256::repeat_byte(8);
        let created = |k: B256| {
            abi::EntityCreated {
                entityKey: k,
                owner: Address::repeat_byte(0xaa),
                expiresAt: 77,
                creationFlags: 0,
            }
            .encode_log_data()
        };
        let log = |d: &alloy_primitives::LogData, address: Address, tx: u8| {
            json!({
                "address": addr_json(&address),
                "topics": d.topics().iter().map(|t| t.to_string()).collect::<Vec<_>>(),
                "data": hex_bytes(&d.data),
                "transactionHash": B256::repeat_byte(tx).to_string(),
            })
        };
        let logs = vec![
            log(&created(key), Address::repeat_byte(1), 1),
            log(&created(other), abi::ARKIV_ADDRESS, 2),
            log(&created(key), abi::ARKIV_ADDRESS, 3),
        ];
        assert_eq!(
            creation_tx_of(&logs, key).unwrap(),
            Some(B256::repeat_byte(3))
        );
        assert_eq!(creation_tx_of(&logs[..2], key).unwrap(), None);
        assert_eq!(creation_tx_of(&[], key).unwrap(), None);
    }

    #[test]
    fn the_fast_page_decoder_agrees_with_the_general_one() {
        use crate::entity::{ArkivValue, Attribute, CreationFlags};
        let full = Entity {
            key: B256::repeat_byte(0x11),
            owner: Some(Address::repeat_byte(0x22)),
            creator: Some(Address::repeat_byte(0x33)),
            created_at: Some(7),
            updated_at: Some(9),
            expires_at: Some(43_207),
            creation_flags: Some(CreationFlags::default()),
            content_type: Some("text/\"x\"".into()),
            payload: Some(b"a\x00b".to_vec()),
            attributes: Some(vec![
                Attribute {
                    name: "kind".into(),
                    value: ArkivValue::Str("it's \u{20ac}".into()),
                },
                Attribute {
                    name: "n".into(),
                    value: ArkivValue::U64(12),
                },
            ]),
        };
        let sparse = Entity {
            key: B256::repeat_byte(0x44),
            ..Default::default()
        };
        let answer = |data: Value, cursor: Option<&str>| {
            let mut result = json!({"data": data, "blockNumber": "0x2a"});
            if let Some(c) = cursor {
                result["cursor"] = json!(c);
            }
            json!({"jsonrpc": "2.0", "id": 1, "result": result}).to_string()
        };
        let general = |text: &str| {
            query_page_from_json(&decode_answer("arkiv_query", text.as_bytes()).unwrap()).unwrap()
        };
        let rows = json!([
            wire::entity_to_json(&full, true),
            wire::entity_to_json(&sparse, false)
        ]);
        for cursor in [None, Some("b64:abc")] {
            let text = answer(rows.clone(), cursor);
            let fast = fast::query_page(text.as_bytes()).expect("the usual shape decodes fast");
            assert_eq!(fast, general(&text));
            assert_eq!(fast.entities, vec![full.clone(), sparse.clone()]);
        }
        // Other shapes are left to the general decoder: numbers as quantities, bad rows, errors.
        let numeric = answer(json!([{"key": B256::ZERO, "createdAt": 7}]), None);
        assert!(fast::query_page(numeric.as_bytes()).is_none());
        assert_eq!(general(&numeric).entities[0].created_at, Some(7));
        let bad_key = answer(json!([{"key": "0x12"}]), None);
        assert!(fast::query_page(bad_key.as_bytes()).is_none());
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"cursor"}}"#;
        assert!(fast::query_page(error.as_bytes()).is_none());
    }
}
