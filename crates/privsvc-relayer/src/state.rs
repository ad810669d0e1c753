//! State shared by the HTTP handlers and the background tasks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use alloy_primitives::{Address, B256};
use privsvc_ledger::LedgerReader;
use tokio::sync::Notify;

use crate::clock::Timeline;
use crate::config::RelayerConfig;
use crate::metrics::Metrics;
use crate::queue::{PlanParams, Queue};
use crate::ratelimit::RateLimiter;
use crate::store::{Store, StoredRecord, WrittenInfo};
use crate::tokencheck::IssuerKeys;
use crate::writer::SerializedWriter;

/// What `/healthz` reports besides counters.
#[derive(Debug, Default, Clone)]
pub struct HealthFigures {
    /// Batches written (persisted across restarts).
    pub batches: u64,
    /// Block of the last batch.
    pub last_flush_block: Option<u64>,
    /// Key of the latest heartbeat.
    pub heartbeat: Option<B256>,
    /// Time of the latest heartbeat, epoch ms.
    pub last_beat_ms: u64,
    /// Double spends found by the last background count ([`crate::health::run_double_spends`]).
    pub double_spends: u64,
    /// The last background count failed (the ledger or the store did not answer).
    pub double_spends_failed: bool,
    /// The balance of the last background read ([`crate::health::run_ledger_check`]); `None`
    /// before the first one answered.
    pub balance_wei: Option<alloy_primitives::U256>,
    /// The last background balance read failed.
    pub balance_failed: bool,
}

/// Everything the relayer's tasks share.
pub struct RelayerState {
    /// Configuration.
    pub cfg: RelayerConfig,
    /// The relayer's account.
    pub address: Address,
    /// The ledger's chain id.
    pub chain_id: u64,
    /// Public base URL.
    pub public_url: String,
    /// Issuer accepted for tokens.
    pub issuer: Option<Address>,
    /// Issuer URL published in info.
    pub issuer_url: Option<String>,
    /// The OHTTP gateway key (hex), when on.
    pub ohttp_key: Option<String>,
    /// Durable queue.
    pub store: Store,
    /// In-memory queue.
    pub queue: Mutex<Queue>,
    /// Wakes the scheduler.
    pub notify: Notify,
    /// Counters.
    pub metrics: Metrics,
    /// Per-address limiter (tokens off).
    pub limiter: RateLimiter,
    /// Ledger reader.
    pub ledger: Arc<dyn LedgerReader>,
    /// The one serialized writer.
    pub writer: SerializedWriter,
    /// Next arrival sequence number.
    pub seq: AtomicU64,
    /// Accepted and not finished records (queued, in flight, being stored).
    pub occupancy: AtomicUsize,
    /// Issuer key cache.
    pub issuer_keys: IssuerKeys,
    /// Health values.
    pub live: Mutex<HealthFigures>,
    /// Set to true once stored batches are reconciled (gates `SerializedWriter::execute`).
    pub reconciled: tokio::sync::watch::Sender<bool>,
    /// Batch attempts per record that ended in a revert without an identified offender.
    pub attempts: Mutex<HashMap<String, u32>>,
    /// The relayer's time: the monotonic timeline for every wait, deadline and retry, the wall
    /// clock only for the protocol's wall times ([`crate::clock`]).
    pub time: Timeline,
    /// Records known to be on the ledger whose written state the store has not recorded yet
    /// (it could not write): their statuses answer `written` from here until it has.
    pub unrecorded: Mutex<HashMap<String, WrittenInfo>>,
}

impl RelayerState {
    /// Batching parameters.
    pub fn plan_params(&self) -> PlanParams {
        PlanParams {
            min_batch: self.cfg.batching.min_batch,
            max_wait_ms: u64::try_from(self.cfg.batching.max_wait.as_millis()).unwrap_or(u64::MAX),
            max_batch: self.cfg.batching.max_batch,
        }
    }

    /// Put records back into the in-memory queue and wake the scheduler.
    pub fn requeue(&self, records: Vec<StoredRecord>) {
        if records.is_empty() {
            return;
        }
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        for r in records {
            q.push(r);
        }
        drop(q);
        self.notify.notify_one();
    }

    /// Remember that these records are on the ledger while the store cannot record it.
    pub fn known_written(&self, records: impl IntoIterator<Item = (String, WrittenInfo)>) {
        self.unrecorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(records);
    }

    /// The store has recorded these records' written state.
    pub fn recorded(&self, ids: impl IntoIterator<Item = impl AsRef<str>>) {
        let mut unrecorded = self.unrecorded.lock().unwrap_or_else(|p| p.into_inner());
        if unrecorded.is_empty() {
            return;
        }
        for id in ids {
            unrecorded.remove(id.as_ref());
        }
    }

    /// Records that left the relayer (written or failed).
    pub fn finished(&self, n: usize) {
        let _ = self
            .occupancy
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                Some(v.saturating_sub(n))
            });
    }
}

/// The kind of a ledger error, for logs. Log lines carry only allowlisted fields (status,
/// batch_size, block, tx, attempt, batches, url = the relayer's own URL, error kind); ledger
/// messages are not logged because revert reasons can name owners.
#[allow(unreachable_patterns)]
pub fn ledger_error_kind(e: &privsvc_ledger::LedgerError) -> &'static str {
    use privsvc_ledger::LedgerError as E;
    match e {
        E::Transport(_) | E::Http { .. } => "transport",
        E::Rpc { .. } => "rpc",
        E::Reverted(_) => "reverted",
        E::Decode(_) => "decode",
        E::Invalid(_) => "invalid",
        E::Timeout(_) => "timeout",
        _ => "other",
    }
}
