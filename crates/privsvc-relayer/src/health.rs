//! The beacon: heartbeats (docs/PROTOCOL.md §4) and the health record (docs/PROTOCOL.md §7),
//! and the housekeeping tasks beside them (status retention, the timeline's anchor).
//!
//! The [`Beacon`] owns the figures of its background reads (the latest heartbeat, the balance,
//! the double-spend count) and publishes them through a `watch`; the [`HealthView`] puts the
//! health record together from them, the batcher's figures and the live counts, without a
//! ledger call.
//!
//! No `/healthz` request makes a ledger call: the balance read (the record's ledger check) is
//! refreshed by a background task every [`LEDGER_CHECK_REFRESH`] (10 s), the double-spend
//! count at most once a minute ([`DOUBLE_SPEND_REFRESH`]). The ledger's view of the relayer's
//! calls does not follow requests, and polling `/healthz` costs the ledger nothing.
//!
//! n-1 (docs/PROTOCOL.md §7): the public `/healthz` ([`HealthView::public_health`]) reports
//! `queue` rounded up to a multiple of [`PUBLIC_QUEUE_STEP`] (0 reads 100). An exact, real-time
//! queue length lets a party that holds a victim's submission (the OHTTP relay) send it exactly
//! when the queue is empty and surround it with its own records. The exact figures are served
//! only on `METRICS_BIND` (`/metrics` and `/healthz` there) and in-process
//! ([`crate::Relayer::health`]).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::{Address, B256, U256};
use privsvc_ledger::{
    query_all, LedgerError, LedgerReader, LedgerWriter, Operation, Revert, Select,
};
use rand::Rng;
use serde::Serialize;
use tokio::sync::watch;

use crate::batcher::{BatchFigures, Unrecorded};
use crate::clock::{Anchor, Timeline, ANCHOR_EVERY};
use crate::diskspace::DiskFloor;
use crate::entities::heartbeat_create;
use crate::identity::Identity;
use crate::metrics::Metrics;
use crate::occupancy::Occupancy;
use crate::retry::{ledger_error_kind, LedgerHealth};
use crate::store::Store;
use crate::writer::SerializedWriter;

/// What the beacon's background reads found, for the health record.
#[derive(Debug, Default, Clone)]
pub struct BeaconFigures {
    /// Key of the latest heartbeat.
    pub heartbeat: Option<B256>,
    /// Time of the latest heartbeat, epoch ms.
    pub last_beat_ms: u64,
    /// Double spends found by the last background count ([`Beacon::run_double_spends`]).
    pub double_spends: u64,
    /// The last background count failed (the ledger or the store did not answer).
    pub double_spends_failed: bool,
    /// The balance of the last background read ([`Beacon::run_ledger_check`]); `None` before
    /// the first one answered.
    pub balance_wei: Option<U256>,
    /// The last background balance read failed.
    pub balance_failed: bool,
}

/// The beacon: publishes heartbeats through the serialized writer, reads the balance and
/// counts double spends in the background, and publishes what it found ([`BeaconFigures`]).
pub(crate) struct Beacon {
    /// The relayer's URL, account, chain and OHTTP key (what a heartbeat announces).
    pub(crate) identity: Arc<Identity>,
    /// The one serialized writer (heartbeats queue behind batches).
    pub(crate) writer: SerializedWriter,
    /// The ledger reader (retried calls).
    pub(crate) ledger: Arc<dyn LedgerReader>,
    /// The store: the heartbeat kept across restarts, the tokens spent here.
    pub(crate) store: Arc<Store>,
    /// Counters.
    pub(crate) metrics: Arc<Metrics>,
    /// The relayer's time.
    pub(crate) time: Timeline,
    /// `HEARTBEAT_MS`.
    pub(crate) heartbeat_interval: Duration,
    /// Publishes the figures.
    pub(crate) figures: watch::Sender<BeaconFigures>,
}

impl Beacon {
    /// Publish one heartbeat through the serialized writer and record its key and time.
    pub(crate) async fn beat(&self) -> Result<(), LedgerError> {
        let id = &self.identity;
        let create = heartbeat_create(
            &id.public_url,
            id.address,
            id.chain_id,
            id.ohttp_key.as_deref(),
            rand::thread_rng().gen(),
        )
        .map_err(LedgerError::invalid)?;
        let receipt = self.writer.execute(&[Operation::Create(create)]).await?;
        if !receipt.success {
            return Err(LedgerError::Reverted(Revert::from_reason(
                receipt
                    .revert_reason
                    .unwrap_or_else(|| "heartbeat reverted".into()),
            )));
        }
        let key = receipt
            .created
            .first()
            .map(|c| c.key)
            .ok_or_else(|| LedgerError::Decode(privsvc_ledger::AnswerError::NoCreatedEntity))?;
        // Shown to users: the wall clock.
        let now = self.time.wall_ms();
        self.figures.send_modify(|f| {
            f.heartbeat = Some(key);
            f.last_beat_ms = now;
        });
        let _ = self.store.set_meta("heartbeat", &key.to_string()).await;
        let _ = self.store.set_meta("last_beat", &now.to_string()).await;
        self.metrics.heartbeat();
        tracing::info!(block = receipt.block_number, "heartbeat published");
        Ok(())
    }

    /// Publish a heartbeat now and every HEARTBEAT_MS until stopped.
    pub(crate) async fn run_heartbeats(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let every = self.heartbeat_interval;
        loop {
            // Heartbeats never starve batches: a beat gives way while a batch waits for the
            // writer, for at most one interval.
            let deadline = tokio::time::Instant::now() + every;
            while self.writer.batches_waiting() > 0 && tokio::time::Instant::now() < deadline {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                    _ = stop.changed() => return,
                }
            }
            let next = match self.beat().await {
                Ok(()) => every,
                Err(e) => {
                    self.metrics.ledger_error();
                    tracing::warn!(error = ledger_error_kind(&e), "heartbeat failed");
                    every.min(Duration::from_secs(5))
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(next) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// Read the balance now and keep it (and whether the read worked) for the health record.
    pub(crate) async fn refresh_ledger_check(&self) {
        let balance = self.ledger.balance(self.identity.address).await;
        if balance.is_err() {
            self.metrics.ledger_error();
        }
        self.figures.send_modify(|f| match balance {
            Ok(wei) => {
                f.balance_wei = Some(wei);
                f.balance_failed = false;
            }
            Err(_) => f.balance_failed = true,
        });
    }

    /// Re-read the balance every [`LEDGER_CHECK_REFRESH`] until stopped (the first read is
    /// made at start, before the relayer serves).
    pub(crate) async fn run_ledger_check(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(LEDGER_CHECK_REFRESH) => {}
                _ = stop.changed() => return,
            }
            self.refresh_ledger_check().await;
        }
    }

    /// Count the local spent tokens of the acceptable epochs that other relayers' spends
    /// entities also list.
    async fn double_spends(&self) -> Result<u64, LedgerError> {
        let epochs = privsvc_tokens::acceptable_epochs(self.time.wall_ms());
        let local: HashSet<[u8; 32]> = self
            .store
            .spent_tokens(&epochs.iter().map(|e| *e as u64).collect::<Vec<_>>())
            .map_err(|e| LedgerError::Invalid(Box::new(e)))?
            .into_iter()
            .collect();
        if local.is_empty() {
            return Ok(0);
        }
        let select = Select {
            key: true,
            creator: true,
            payload: true,
            ..Select::default()
        };
        let mut seen: HashSet<[u8; 32]> = HashSet::new();
        for epoch in epochs {
            let expr = privsvc_ledger::spends_query(u64::from(epoch));
            for e in query_all(self.ledger.as_ref(), &expr, &select, None).await? {
                if e.creator == Some(self.identity.address) {
                    continue;
                }
                for chunk in e.payload.unwrap_or_default().chunks_exact(32) {
                    let id: [u8; 32] = chunk.try_into().expect("32-byte chunk");
                    if local.contains(&id) {
                        seen.insert(id);
                    }
                }
            }
        }
        Ok(seen.len() as u64)
    }

    /// Count double spends now and keep the result for `/healthz`.
    pub(crate) async fn refresh_double_spends(&self) {
        let result = self.double_spends().await;
        if result.is_err() {
            self.metrics.ledger_error();
        }
        self.figures.send_modify(|f| match result {
            Ok(n) => {
                f.double_spends = n;
                f.double_spends_failed = false;
            }
            Err(_) => f.double_spends_failed = true,
        });
    }

    /// Recount double spends at start and every [`DOUBLE_SPEND_REFRESH`] until stopped.
    pub(crate) async fn run_double_spends(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        loop {
            self.refresh_double_spends().await;
            tokio::select! {
                _ = tokio::time::sleep(DOUBLE_SPEND_REFRESH) => {}
                _ = stop.changed() => return,
            }
        }
    }
}

/// Delete finished statuses after `retention` (on the timeline: a step of the wall clock
/// prunes nothing early or late), and spent tokens of past epochs (token epochs are wall time).
pub(crate) async fn run_pruning(
    store: Arc<Store>,
    time: Timeline,
    retention: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let every = (retention / 4).clamp(Duration::from_millis(200), Duration::from_secs(60));
    let retention_ms = u64::try_from(retention.as_millis()).unwrap_or(u64::MAX);
    loop {
        let min_epoch = privsvc_tokens::acceptable_epochs(time.wall_ms())
            .iter()
            .copied()
            .min()
            .unwrap_or(0) as u64;
        let before = time.now_ms().saturating_sub(retention_ms);
        if let Err(e) = store.prune(before, min_epoch).await {
            tracing::warn!(error = %e, "pruning failed");
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
    }
}

/// The `meta` key of the timeline's anchor ([`crate::clock::Anchor`]).
pub const ANCHOR_KEY: &str = "timeline_anchor";

/// Store the timeline's anchor every [`ANCHOR_EVERY`] (so that a restart resumes the
/// timeline), and log a step of the wall clock when one happened since the last, and when
/// `DATA_DIR` goes below or back above its free-space floor. The write also probes the store:
/// it clears the store's failure once writing works again.
pub(crate) async fn run_anchor(
    store: Arc<Store>,
    time: Timeline,
    floor: DiskFloor,
    mut stop: watch::Receiver<bool>,
) {
    let mut last: Option<Anchor> = None;
    let mut below_floor = false;
    loop {
        if let Some(step) = last.as_ref().and_then(|a| time.step_since(a)) {
            tracing::warn!(
                step_ms = step,
                "the wall clock stepped; waits, holds and retention run on the monotonic clock"
            );
        }
        let below = floor.below();
        match (&below, below_floor) {
            (Some(why), false) => tracing::warn!("{why}: new records are refused (503)"),
            (None, true) => tracing::info!("DATA_DIR is above MIN_FREE_BYTES again"),
            _ => {}
        }
        below_floor = below.is_some();
        let anchor = time.anchor();
        if let Err(e) = store.set_meta(ANCHOR_KEY, &anchor.encode()).await {
            tracing::warn!(error = %e, "cannot store the timeline anchor");
        }
        last = Some(anchor);
        tokio::select! {
            _ = tokio::time::sleep(ANCHOR_EVERY) => {}
            _ = stop.changed() => return,
        }
    }
}

/// How often the background task reads the balance for the health record: `/healthz` causes
/// at most one ledger call per this period, and never one per request.
pub const LEDGER_CHECK_REFRESH: Duration = Duration::from_secs(10);

/// How often the background task recounts double spends.
pub const DOUBLE_SPEND_REFRESH: Duration = Duration::from_secs(60);

/// The public `/healthz` reports the queue rounded up to a multiple of this (0 reads 100).
pub const PUBLIC_QUEUE_STEP: u64 = 100;

/// The queue length as the public `/healthz` shows it: `exact` rounded up to a multiple of
/// [`PUBLIC_QUEUE_STEP`], never 0 (an empty queue reads 100, like one of 1 to 100).
pub fn public_queue(exact: u64) -> u64 {
    exact
        .div_ceil(PUBLIC_QUEUE_STEP)
        .max(1)
        .saturating_mul(PUBLIC_QUEUE_STEP)
}

/// What the health record is read from: the beacon's and the batcher's published figures, the
/// live counts and the store's state. Reading it makes no ledger call.
#[derive(Clone)]
pub(crate) struct HealthView {
    /// The relayer's account.
    pub(crate) address: Address,
    /// The beacon's figures.
    pub(crate) beacon: watch::Receiver<BeaconFigures>,
    /// The batcher's figures.
    pub(crate) batches: watch::Receiver<BatchFigures>,
    /// The records on the ledger the store has not recorded yet.
    pub(crate) unrecorded: watch::Receiver<Unrecorded>,
    /// Records held.
    pub(crate) occupancy: Arc<Occupancy>,
    /// The ledger's health as the relayer's calls see it.
    pub(crate) ledger: Arc<LedgerHealth>,
    /// The store (whether its last write failed).
    pub(crate) store: Arc<Store>,
    /// `DATA_DIR` and `MIN_FREE_BYTES`.
    pub(crate) floor: DiskFloor,
}

impl HealthView {
    /// Why the store cannot take the relayer's writes now, if it cannot: its last write failed
    /// (disk full, I/O error, read-only file), records on the ledger wait to be recorded, or
    /// `DATA_DIR` is below its free-space floor.
    pub(crate) fn store_problem(&self) -> Option<String> {
        if let Some(why) = self.store.write_failure() {
            return Some(format!("the queue database cannot write: {why}"));
        }
        let unrecorded = self.unrecorded.borrow().len();
        if unrecorded > 0 {
            return Some(format!(
                "{unrecorded} records on the ledger are not recorded in the queue database yet"
            ));
        }
        self.floor.below()
    }

    /// The health record with exact figures, for `METRICS_BIND` and in-process callers. It
    /// makes no ledger call: the balance and the double-spend count are the background tasks'
    /// last.
    pub(crate) fn health(&self) -> Health {
        let beacon = self.beacon.borrow().clone();
        let batches = self.batches.borrow().clone();
        let ledger = &self.ledger;
        let store = self.store_problem();
        let reason = if ledger.failing() {
            Some(format!(
                "the ledger is failing ({} calls failed in a row)",
                ledger.consecutive_failures()
            ))
        } else if beacon.balance_wei.is_none() || beacon.balance_failed {
            Some("the last balance read from the ledger failed".into())
        } else if beacon.double_spends_failed {
            Some("the last double-spend count failed".into())
        } else {
            store.clone()
        };
        Health {
            ok: reason.is_none(),
            reason,
            store_failing: store.is_some(),
            ledger_failing: ledger.failing(),
            ledger_consecutive_failures: ledger.consecutive_failures(),
            address: self.address.to_checksum(None),
            queue: self.occupancy.get() as u64,
            batches: batches.batches,
            last_flush_block: batches.last_flush_block.unwrap_or(0).to_string(),
            heartbeat: beacon.heartbeat.map(|k| k.to_string()).unwrap_or_default(),
            last_beat: beacon.last_beat_ms,
            balance_native: beacon.balance_wei.map(wei_to_native).unwrap_or(0.0),
            double_spends_detected: beacon.double_spends,
        }
    }

    /// The health record of the public `/healthz`: [`HealthView::health`] with `queue` rounded
    /// up ([`public_queue`]) and without its reason.
    pub(crate) fn public_health(&self) -> Health {
        let mut h = self.health();
        h.queue = public_queue(h.queue);
        h.reason = None;
        h
    }
}

/// The health record (docs/PROTOCOL.md §7).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// The ledger answered (`ledgerFailing` false, the background reads worked) and the store
    /// takes writes (`storeFailing` false).
    pub ok: bool,
    /// Why `ok` is false: only in the exact record (`METRICS_BIND`, in-process), absent from
    /// the public `/healthz`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The relayer's address.
    pub address: String,
    /// Records accepted and not yet finished: exact in-process and on `METRICS_BIND`, rounded
    /// up to a multiple of `PUBLIC_QUEUE_STEP` on the public `/healthz`.
    pub queue: u64,
    /// Batches written.
    pub batches: u64,
    /// Block of the last batch (decimal; "0" before the first).
    pub last_flush_block: String,
    /// Key of the latest heartbeat (hex; empty before the first).
    pub heartbeat: String,
    /// Time of the latest heartbeat (epoch ms; 0 before the first).
    pub last_beat: u64,
    /// Balance in the native currency (ether units), as of the last background read (at most
    /// `LEDGER_CHECK_REFRESH` old).
    pub balance_native: f64,
    /// Tokens spent here that other relayers' spends entities also list (as of the last
    /// background count, at most a minute old).
    pub double_spends_detected: u64,
    /// The last calls to the ledger all failed (at least `crate::retry::FAILING_AFTER`).
    pub ledger_failing: bool,
    /// Failed ledger calls in a row (0 after any success).
    pub ledger_consecutive_failures: u64,
    /// The store cannot take the relayer's writes: its last write failed, records on the
    /// ledger wait to be recorded, or `DATA_DIR` is below `MIN_FREE_BYTES`.
    pub store_failing: bool,
}

fn wei_to_native(wei: U256) -> f64 {
    let s = wei.to_string();
    s.parse::<f64>().unwrap_or(0.0) / 1e18
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_queue_is_rounded_up_to_hundreds_and_never_empty() {
        assert_eq!(public_queue(0), 100);
        assert_eq!(public_queue(1), 100);
        assert_eq!(public_queue(100), 100);
        assert_eq!(public_queue(101), 200);
        assert_eq!(public_queue(9_999), 10_000);
        assert_eq!(public_queue(u64::MAX), u64::MAX);
    }
}
