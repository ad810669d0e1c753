//! Per-call retries of ledger calls and the ledger's health as the relayer sees it.
//!
//! Every ledger call of the relayer goes through [`RetryingReader`] / [`RetryingWriter`]: a call
//! that fails for a transient reason (transport error, timeout, undecodable answer: a 500, a
//! dropped connection, a slow node) is retried up to [`ATTEMPTS`] times with jittered
//! exponential backoff, so that one failed call costs one retry, not the restart of a whole batch
//! cycle. Retrying is safe for every call: reads have no effect, `prepare` only signs, and
//! `broadcast` sends the same signed bytes again (the node answers "already known").
//!
//! [`LedgerHealth`] counts consecutive failed calls; `/healthz` (`ledgerFailing`,
//! `ledgerConsecutiveFailures`) and `/metrics` report it.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::{Address, B256, U256};
use async_trait::async_trait;
use futures::stream::{FuturesUnordered, StreamExt};
use privsvc_ledger::{
    BatchReceipt, Entity, LedgerError, LedgerReader, LedgerWriter, Operation, PageQuery,
    PreparedTx, QueryOptions, QueryPage, TagPage,
};
use rand::Rng;

/// Tries per ledger call (the first one included).
pub const ATTEMPTS: u32 = 4;
/// Backoff before the first retry; doubled for each further one, then jittered by ×0.5..1.5.
pub const BASE_BACKOFF: Duration = Duration::from_millis(50);
/// A call without an answer after this long gets a concurrent twin (see [`with_retries`]).
pub const HEDGE_AFTER: Duration = Duration::from_millis(200);
/// Consecutive failed calls from which the ledger counts as failing.
pub const FAILING_AFTER: u64 = 3;

/// The ledger's health as seen by the relayer's calls.
#[derive(Debug, Default)]
pub struct LedgerHealth {
    consecutive: AtomicU64,
    failed_calls: AtomicU64,
    retries: AtomicU64,
}

impl LedgerHealth {
    /// Record the outcome of one call.
    pub fn record(&self, ok: bool) {
        if ok {
            self.consecutive.store(0, Ordering::Relaxed);
        } else {
            self.consecutive.fetch_add(1, Ordering::Relaxed);
            self.failed_calls.fetch_add(1, Ordering::Relaxed);
        }
    }
    /// Failed calls in a row up to now (0 after any success).
    pub fn consecutive_failures(&self) -> u64 {
        self.consecutive.load(Ordering::Relaxed)
    }
    /// Whether the last [`FAILING_AFTER`] calls or more all failed.
    pub fn failing(&self) -> bool {
        self.consecutive_failures() >= FAILING_AFTER
    }
    /// Failed calls so far (each try counts).
    pub fn failed_calls(&self) -> u64 {
        self.failed_calls.load(Ordering::Relaxed)
    }
    /// Retries so far.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }
}

/// Whether an error may go away when the same call is made again.
pub fn transient(e: &LedgerError) -> bool {
    matches!(
        e,
        LedgerError::Transport(_)
            | LedgerError::Http { .. }
            | LedgerError::Timeout { .. }
            | LedgerError::Decode(_)
    )
}

/// The kind of a ledger error, for logs. Log lines carry only allowlisted fields (status,
/// batch_size, block, tx, attempt, batches, url = the relayer's own URL, error kind); ledger
/// messages are not logged because revert reasons can name owners.
#[allow(unreachable_patterns)]
pub fn ledger_error_kind(e: &LedgerError) -> &'static str {
    use LedgerError as E;
    match e {
        E::Transport(_) | E::Http { .. } => "transport",
        E::Rpc { .. } => "rpc",
        E::NonceTooLow { .. } => "nonce_too_low",
        E::ExceedsBlockGasLimit { .. } => "exceeds_block_gas_limit",
        E::ReplacementUnderpriced { .. } => "replacement_underpriced",
        E::AlreadyKnown => "already_known",
        E::Reverted(_) => "reverted",
        E::Decode(_) => "decode",
        E::Invalid(_) => "invalid",
        E::Timeout { .. } => "timeout",
        _ => "other",
    }
}

/// The backoff before retry number `retry` (1-based), jittered.
pub fn backoff(retry: u32) -> Duration {
    let base = BASE_BACKOFF.as_millis() as f64 * f64::from(1u32 << retry.saturating_sub(1).min(6));
    let jitter: f64 = rand::thread_rng().gen_range(0.5..1.5);
    Duration::from_millis((base * jitter) as u64)
}

/// Run `call` up to [`ATTEMPTS`] times while it fails transiently. A call without an answer
/// after [`HEDGE_AFTER`] gets one concurrent twin (a hedge) and the first answer wins, so a
/// slow or stuck answer costs [`HEDGE_AFTER`], not the request timeout. Hedging is safe for
/// every ledger call: reads have no effect, `prepare` only signs, `broadcast` sends the same
/// bytes (the node answers "already known").
pub async fn with_retries<T, F, Fut>(health: &LedgerHealth, mut call: F) -> Result<T, LedgerError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, LedgerError>>,
{
    let mut inflight = FuturesUnordered::new();
    inflight.push(call());
    let mut launched = 1u32;
    let mut failures = 0u32;
    loop {
        // At most two copies in flight, at most 2 × ATTEMPTS in all; a hedge only while no
        // more than one call is pending.
        let may_launch = failures < ATTEMPTS && launched < 2 * ATTEMPTS && inflight.len() < 2;
        tokio::select! {
            r = inflight.next() => match r {
                Some(Ok(v)) => {
                    health.record(true);
                    return Ok(v);
                }
                Some(Err(e)) if transient(&e) => {
                    health.record(false);
                    failures += 1;
                    if failures >= ATTEMPTS || launched >= 2 * ATTEMPTS {
                        if inflight.is_empty() {
                            return Err(e);
                        }
                        continue;
                    }
                    health.retries.fetch_add(1, Ordering::Relaxed);
                    if inflight.is_empty() {
                        tokio::time::sleep(backoff(failures)).await;
                    }
                    inflight.push(call());
                    launched += 1;
                }
                Some(Err(e)) => {
                    // The node answered (an RPC error, a revert): it is reachable.
                    health.record(true);
                    return Err(e);
                }
                None => unreachable!("a call is always in flight here"),
            },
            _ = tokio::time::sleep(HEDGE_AFTER), if may_launch => {
                health.retries.fetch_add(1, Ordering::Relaxed);
                inflight.push(call());
                launched += 1;
            }
        }
    }
}

/// A [`LedgerReader`] that retries each call ([`with_retries`]).
pub struct RetryingReader {
    inner: Arc<dyn LedgerReader>,
    health: Arc<LedgerHealth>,
}

impl RetryingReader {
    /// Wrap `inner`, recording into `health`.
    pub fn new(inner: Arc<dyn LedgerReader>, health: Arc<LedgerHealth>) -> Self {
        Self { inner, health }
    }
}

#[async_trait]
impl LedgerReader for RetryingReader {
    async fn chain_id(&self) -> Result<u64, LedgerError> {
        with_retries(&self.health, || self.inner.chain_id()).await
    }
    async fn block_number(&self) -> Result<u64, LedgerError> {
        with_retries(&self.health, || self.inner.block_number()).await
    }
    async fn query(
        &self,
        expression: &str,
        options: &QueryOptions,
    ) -> Result<QueryPage, LedgerError> {
        with_retries(&self.health, || self.inner.query(expression, options)).await
    }
    async fn query_many(&self, queries: &[PageQuery]) -> Result<Vec<QueryPage>, LedgerError> {
        with_retries(&self.health, || self.inner.query_many(queries)).await
    }
    async fn query_tags_many(&self, queries: &[PageQuery]) -> Result<Vec<TagPage>, LedgerError> {
        with_retries(&self.health, || self.inner.query_tags_many(queries)).await
    }
    async fn entity(
        &self,
        key: B256,
        at_block: Option<u64>,
    ) -> Result<Option<Entity>, LedgerError> {
        with_retries(&self.health, || self.inner.entity(key, at_block)).await
    }
    async fn code_at(&self, address: Address) -> Result<Vec<u8>, LedgerError> {
        with_retries(&self.health, || self.inner.code_at(address)).await
    }
    async fn entity_nonce(&self, address: Address) -> Result<u64, LedgerError> {
        with_retries(&self.health, || self.inner.entity_nonce(address)).await
    }
    async fn balance(&self, address: Address) -> Result<U256, LedgerError> {
        with_retries(&self.health, || self.inner.balance(address)).await
    }
    async fn block_timestamp(&self, number: u64) -> Result<Option<u64>, LedgerError> {
        with_retries(&self.health, || self.inner.block_timestamp(number)).await
    }
    async fn creation_tx(&self, key: B256, created_at: u64) -> Result<Option<B256>, LedgerError> {
        with_retries(&self.health, || self.inner.creation_tx(key, created_at)).await
    }
}

/// A [`LedgerWriter`] that retries each call ([`with_retries`]); `execute` is the trait's
/// default (prepare, broadcast, wait), made of retried calls.
pub struct RetryingWriter {
    inner: Arc<dyn LedgerWriter>,
    health: Arc<LedgerHealth>,
}

impl RetryingWriter {
    /// Wrap `inner`, recording into `health`.
    pub fn new(inner: Arc<dyn LedgerWriter>, health: Arc<LedgerHealth>) -> Self {
        Self { inner, health }
    }
}

#[async_trait]
impl LedgerWriter for RetryingWriter {
    fn address(&self) -> Address {
        self.inner.address()
    }
    async fn prepare(
        &self,
        ops: &[Operation],
        nonce: Option<u64>,
    ) -> Result<PreparedTx, LedgerError> {
        with_retries(&self.health, || self.inner.prepare(ops, nonce)).await
    }
    async fn broadcast(&self, tx: &PreparedTx) -> Result<(), LedgerError> {
        with_retries(&self.health, || self.inner.broadcast(tx)).await
    }
    async fn receipt(&self, tx_hash: B256) -> Result<Option<BatchReceipt>, LedgerError> {
        with_retries(&self.health, || self.inner.receipt(tx_hash)).await
    }
    async fn mined_nonce(&self) -> Result<Option<u64>, LedgerError> {
        with_retries(&self.health, || self.inner.mined_nonce()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[tokio::test]
    async fn a_transient_failure_is_retried_and_a_refusal_is_not() {
        let health = LedgerHealth::default();
        let calls = AtomicU32::new(0);
        let v = with_retries(&health, || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(LedgerError::Transport(privsvc_ledger::ChannelError::Host(
                    "reset".into(),
                )))
            } else {
                Ok(7)
            }
        })
        .await
        .unwrap();
        assert_eq!((v, calls.load(Ordering::SeqCst)), (7, 3));
        assert_eq!(health.consecutive_failures(), 0);
        assert_eq!(health.failed_calls(), 2);

        let calls = AtomicU32::new(0);
        let r: Result<(), _> = with_retries(&health, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(LedgerError::Reverted(privsvc_ledger::Revert::from_reason(
                "NotOwner",
            )))
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let r: Result<(), _> = with_retries(&health, || async {
            Err(LedgerError::Timeout {
                tx_hash: Default::default(),
                waited: std::time::Duration::from_secs(60),
            })
        })
        .await;
        assert!(r.is_err());
        assert_eq!(health.consecutive_failures(), u64::from(ATTEMPTS));
        assert!(health.failing());
    }
}
