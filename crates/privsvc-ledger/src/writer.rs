//! The `LedgerWriter` trait: how a relayer (or issuer) sends one `execute()` batch.

use std::time::Duration;

use alloy_primitives::{Address, Bytes, B256};
use async_trait::async_trait;

use crate::error::LedgerError;
use crate::ops::Operation;

/// A signed, not yet broadcast `execute()` transaction. Persist it before broadcasting so that a
/// restart can resend exactly the same transaction (same nonce, same hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedTx {
    /// The transaction hash.
    pub hash: B256,
    /// The sender's account nonce used.
    pub nonce: u64,
    /// The signed, RLP/EIP-2718 encoded transaction.
    pub raw: Bytes,
}

/// An entity created by a batch (from its `EntityCreated` log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedEntity {
    /// The new entity's key.
    pub key: B256,
    /// Its owner at creation (the sender).
    pub owner: Address,
    /// Resolved expiry block.
    pub expires_at: u64,
}

/// An ownership transfer made by a batch (from its `OwnershipTransferred` log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferredEntity {
    /// The entity key.
    pub key: B256,
    /// Previous owner.
    pub from: Address,
    /// New owner.
    pub to: Address,
}

/// The decoded receipt of one batch transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchReceipt {
    /// Transaction hash.
    pub tx_hash: B256,
    /// Block that included it.
    pub block_number: u64,
    /// True when the batch was applied; false when it reverted (nothing applied).
    pub success: bool,
    /// Gas used.
    pub gas_used: u64,
    /// Entities created, in operation order.
    pub created: Vec<CreatedEntity>,
    /// Ownership transfers, in operation order.
    pub transfers: Vec<TransferredEntity>,
    /// The decoded revert error when `success` is false (e.g. `NotOwner(0x.., 0x.., 0x..)`).
    pub revert_reason: Option<String>,
}

/// Write access to an Arkiv ledger with one signing account.
///
/// Every create from the account must go through one writer so that entity keys predicted from
/// the entity nonce stay valid.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait LedgerWriter: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// The signing account.
    fn address(&self) -> Address;
    /// Estimate gas and fees, then sign one `execute()` transaction with `nonce` (the account's
    /// pending nonce when `None`). Fails with the decoded revert error when simulation reverts.
    async fn prepare(
        &self,
        ops: &[Operation],
        nonce: Option<u64>,
    ) -> Result<PreparedTx, LedgerError>;
    /// Broadcast a prepared transaction. Sending one that is already known is not an error.
    async fn broadcast(&self, tx: &PreparedTx) -> Result<(), LedgerError>;
    /// The receipt of a transaction, or `None` while it is not mined.
    async fn receipt(&self, tx_hash: B256) -> Result<Option<BatchReceipt>, LedgerError>;

    /// The account's nonce as of the head block (transactions mined so far), or `None` when
    /// this writer cannot tell (then callers sign with the pending nonce). A transaction signed
    /// with this nonce never waits behind a gap.
    async fn mined_nonce(&self) -> Result<Option<u64>, LedgerError> {
        Ok(None)
    }

    /// Poll for the receipt until `timeout`.
    async fn wait_receipt(
        &self,
        tx_hash: B256,
        timeout: Duration,
    ) -> Result<BatchReceipt, LedgerError> {
        let deadline = privsvc_rt::Instant::now() + timeout;
        loop {
            if let Some(r) = self.receipt(tx_hash).await? {
                return Ok(r);
            }
            if privsvc_rt::Instant::now() >= deadline {
                return Err(LedgerError::Timeout {
                    tx_hash,
                    waited: timeout,
                });
            }
            privsvc_rt::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Prepare, broadcast and wait (60 s) for one batch.
    async fn execute(&self, ops: &[Operation]) -> Result<BatchReceipt, LedgerError> {
        let tx = self.prepare(ops, None).await?;
        self.broadcast(&tx).await?;
        self.wait_receipt(tx.hash, Duration::from_secs(60)).await
    }
}
