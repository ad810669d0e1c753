//! The relayer's ONE serialized writer: every create from the relayer account (batches,
//! heartbeats, issuer-key publications) runs while holding one FIFO lock, from the entity nonce
//! read to the receipt, so that keys predicted from the entity nonce stay valid
//! (docs/PROTOCOL.md §4.1 and §7).
//!
//! No nonce gap, ever: a transaction whose fate is unknown (its broadcast or its receipt wait
//! failed, although the node may have taken it) stays *outstanding* in the writer, and the next
//! turn resolves it before anything else is signed: by its receipt, or by rebroadcasting the
//! same signed bytes (which heals a node that lost it) until it is mined, or, after
//! [`SETTLE_ROUNDS`] rounds without an answer, by a replacement: the next transaction is signed
//! with the same nonce, so at most one of the two lands. New transactions are signed with the
//! account's *mined* nonce ([`LedgerWriter::mined_nonce`]), never the pending one, so nothing is
//! signed above a transaction that may vanish, and the entity nonce read after settling counts
//! every create the account can still land.
//!
//! [`SerializedWriter`] implements [`LedgerWriter`] itself, so the token issuer can be handed one
//! as its writer: its `execute()` queues behind the batches. Its `prepare`/`broadcast` pass
//! through without the lock (they do not wait for inclusion); callers that create entities must
//! use `execute()`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use privsvc_ledger::{BatchReceipt, LedgerError, LedgerWriter, Operation, PreparedTx};
use tokio::sync::{watch, Mutex, MutexGuard};

/// Rounds (receipt check, rebroadcast, bounded receipt wait) spent resolving an outstanding
/// transaction before the next one replaces it at the same nonce.
pub const SETTLE_ROUNDS: u32 = 10;

/// What the writer remembers between turns.
#[derive(Debug, Default)]
pub struct WriterState {
    /// A signed transaction (heartbeat, issuer key) whose fate is unknown.
    outstanding: Option<PreparedTx>,
}

/// The shared, serialized writer of the relayer account.
#[derive(Clone)]
pub struct SerializedWriter {
    inner: Arc<dyn LedgerWriter>,
    lock: Arc<Mutex<WriterState>>,
    receipt_timeout: Duration,
    round: Duration,
    ready: watch::Receiver<bool>,
    batches_waiting: Arc<AtomicUsize>,
}

/// A batch in preparation (see [`SerializedWriter::batch_in_progress`]).
pub struct BatchInProgress(Arc<AtomicUsize>);

impl Drop for BatchInProgress {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Proof of holding the writer lock; every create from the account happens under one.
pub struct WriterTurn<'a> {
    state: MutexGuard<'a, WriterState>,
    round: Duration,
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
            lock: Arc::new(Mutex::new(WriterState::default())),
            receipt_timeout,
            round: receipt_timeout,
            ready,
            batches_waiting: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Wait at most `round` for a receipt before rebroadcasting (at most the receipt timeout).
    pub fn with_round(mut self, round: Duration) -> Self {
        self.round = round
            .min(self.receipt_timeout)
            .max(Duration::from_millis(50));
        self
    }

    /// Wait for the writer's turn (FIFO).
    pub async fn turn(&self) -> WriterTurn<'_> {
        WriterTurn {
            state: self.lock.lock().await,
            round: self.round,
            writer: self.inner.as_ref(),
        }
    }

    /// Mark a batch in preparation until the guard is dropped: [`Self::batches_waiting`] counts
    /// it, and heartbeats give way to it.
    pub fn batch_in_progress(&self) -> BatchInProgress {
        self.batches_waiting.fetch_add(1, Ordering::SeqCst);
        BatchInProgress(self.batches_waiting.clone())
    }

    /// Batches in preparation or waiting for the writer now.
    pub fn batches_waiting(&self) -> usize {
        self.batches_waiting.load(Ordering::SeqCst)
    }

    /// The receipt timeout.
    pub fn receipt_timeout(&self) -> Duration {
        self.receipt_timeout
    }

    /// How long one receipt wait lasts before a rebroadcast.
    pub fn round(&self) -> Duration {
        self.round
    }
}

impl WriterTurn<'_> {
    /// The transaction whose fate is still unknown, if any.
    pub fn outstanding(&self) -> Option<&PreparedTx> {
        self.state.outstanding.as_ref()
    }

    /// Resolve the outstanding transaction (see the module doc), then return the nonce the next
    /// transaction must be signed with (`None`: this writer cannot tell; sign with the pending
    /// nonce). Returns early with `Err` when `stop` turns true or the node cannot be asked.
    pub async fn settle(
        &mut self,
        stop: Option<&watch::Receiver<bool>>,
    ) -> Result<Option<u64>, LedgerError> {
        let mut rounds = 0;
        while let Some(tx) = self.state.outstanding.clone() {
            if stop.is_some_and(|s| *s.borrow()) {
                return Err(LedgerError::invalid("the relayer is stopping"));
            }
            if rounds >= SETTLE_ROUNDS {
                // Replace it: the next transaction takes the same nonce, so at most one lands.
                tracing::warn!(attempt = rounds, "outstanding transaction replaced");
                self.state.outstanding = None;
                break;
            }
            rounds += 1;
            if let Ok(Some(_)) = self.writer.receipt(tx.hash).await {
                self.state.outstanding = None;
                break;
            }
            match self.writer.mined_nonce().await {
                // Its nonce is taken (by it: a receipt we missed; or by another transaction):
                // it is settled either way.
                Ok(Some(m)) if m > tx.nonce => {
                    self.state.outstanding = None;
                    break;
                }
                // This writer cannot tell: do not hold the account for long.
                Ok(None) if rounds >= 2 => {
                    self.state.outstanding = None;
                    break;
                }
                Err(_) => {
                    tokio::time::sleep(crate::retry::backoff(rounds)).await;
                    continue;
                }
                _ => {}
            }
            // Same bytes again: heals a node that lost it; "already known" otherwise.
            let _ = self.writer.broadcast(&tx).await;
            if self.writer.wait_receipt(tx.hash, self.round).await.is_ok() {
                self.state.outstanding = None;
            }
        }
        self.writer.mined_nonce().await
    }

    /// Sign `ops` with the settled nonce, broadcast, and wait for the receipt. A transaction
    /// whose broadcast or receipt wait failed stays outstanding (resolved by the next turn).
    pub async fn execute_settled(
        &mut self,
        ops: &[Operation],
        receipt_timeout: Duration,
    ) -> Result<BatchReceipt, LedgerError> {
        let nonce = self.settle(None).await?;
        let tx = self.writer.prepare(ops, nonce).await?;
        self.state.outstanding = Some(tx.clone());
        if let Err(e) = self.writer.broadcast(&tx).await {
            if !crate::retry::transient(&e) {
                // The node answered and refused it: it cannot land.
                self.state.outstanding = None;
            }
            return Err(e);
        }
        let receipt = self
            .writer
            .wait_receipt(tx.hash, receipt_timeout.min(self.round * 2))
            .await?;
        self.state.outstanding = None;
        Ok(receipt)
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

    async fn mined_nonce(&self) -> Result<Option<u64>, LedgerError> {
        self.inner.mined_nonce().await
    }

    async fn execute(&self, ops: &[Operation]) -> Result<BatchReceipt, LedgerError> {
        let mut ready = self.ready.clone();
        ready
            .wait_for(|r| *r)
            .await
            .map_err(|_| LedgerError::invalid("the relayer has stopped"))?;
        let mut turn = self.turn().await;
        turn.execute_settled(ops, self.receipt_timeout).await
    }
}
