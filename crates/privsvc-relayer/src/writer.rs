//! The relayer's ONE serialized writer: every create from the relayer account (batches,
//! heartbeats, issuer-key publications) runs while holding one FIFO lock, from the entity nonce
//! read to the receipt, so that keys predicted from the entity nonce stay valid (DESIGN 7).
//!
//! [`SerializedWriter`] implements [`LedgerWriter`] itself, so the token issuer can be handed one
//! as its writer: its `execute()` queues behind the batches. Its `prepare`/`broadcast` pass
//! through without the lock (they do not wait for inclusion); callers that create entities must
//! use `execute()`.

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use privsvc_ledger::{BatchReceipt, LedgerError, LedgerWriter, Operation, PreparedTx};
use tokio::sync::{watch, Mutex, MutexGuard};

/// The shared, serialized writer of the relayer account.
#[derive(Clone)]
pub struct SerializedWriter {
    inner: Arc<dyn LedgerWriter>,
    lock: Arc<Mutex<()>>,
    receipt_timeout: Duration,
    ready: watch::Receiver<bool>,
}

/// Proof of holding the writer lock; every create from the account happens under one.
pub struct WriterTurn<'a> {
    _guard: MutexGuard<'a, ()>,
    /// The underlying writer.
    pub writer: &'a dyn LedgerWriter,
}

impl SerializedWriter {
    /// Wrap a writer; receipts are awaited up to `receipt_timeout`. `execute()` waits until
    /// `ready` turns true (the relayer sets it once stored batches are reconciled, so that no
    /// new transaction can take the nonce of a stored one).
    pub fn new(
        inner: Arc<dyn LedgerWriter>,
        receipt_timeout: Duration,
        ready: watch::Receiver<bool>,
    ) -> Self {
        Self {
            inner,
            lock: Arc::new(Mutex::new(())),
            receipt_timeout,
            ready,
        }
    }

    /// Wait for the writer's turn (FIFO).
    pub async fn turn(&self) -> WriterTurn<'_> {
        WriterTurn {
            _guard: self.lock.lock().await,
            writer: self.inner.as_ref(),
        }
    }

    /// The receipt timeout.
    pub fn receipt_timeout(&self) -> Duration {
        self.receipt_timeout
    }
}

#[async_trait]
impl LedgerWriter for SerializedWriter {
    fn address(&self) -> Address {
        self.inner.address()
    }

    async fn prepare(
        &self,
        ops: &[Operation],
        nonce: Option<u64>,
    ) -> Result<PreparedTx, LedgerError> {
        self.inner.prepare(ops, nonce).await
    }

    async fn broadcast(&self, tx: &PreparedTx) -> Result<(), LedgerError> {
        self.inner.broadcast(tx).await
    }

    async fn receipt(&self, tx_hash: B256) -> Result<Option<BatchReceipt>, LedgerError> {
        self.inner.receipt(tx_hash).await
    }

    async fn execute(&self, ops: &[Operation]) -> Result<BatchReceipt, LedgerError> {
        let mut ready = self.ready.clone();
        ready
            .wait_for(|r| *r)
            .await
            .map_err(|_| LedgerError::Invalid("the relayer has stopped".into()))?;
        let turn = self.turn().await;
        let tx = turn.writer.prepare(ops, None).await?;
        turn.writer.broadcast(&tx).await?;
        turn.writer
            .wait_receipt(tx.hash, self.receipt_timeout)
            .await
    }
}
