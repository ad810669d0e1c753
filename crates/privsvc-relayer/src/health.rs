//! Heartbeats (docs/PROTOCOL.md §4), status retention, and the health record
//! (docs/PROTOCOL.md §7).
//!
//! No `/healthz` request makes a ledger call: the balance read (the record's ledger check) is
//! refreshed by a background task every [`LEDGER_CHECK_REFRESH`] (10 s), the double-spend
//! count at most once a minute ([`DOUBLE_SPEND_REFRESH`]). The ledger's view of the relayer's
//! calls does not follow requests, and polling `/healthz` costs the ledger nothing.
//!
//! n-1 (docs/PROTOCOL.md §7): the public `/healthz` ([`public_health`]) reports `queue` rounded up
//! to a multiple of [`PUBLIC_QUEUE_STEP`] (0 reads 100). An exact, real-time queue length lets a
//! party that holds a victim's submission (the OHTTP relay) send it exactly when the queue is empty
//! and surround it with its own records. The exact figures are served only on `METRICS_BIND`
//! (`/metrics` and `/healthz` there) and in-process ([`crate::Relayer::health`]).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::U256;
use privsvc_ledger::{query_all, LedgerError, LedgerWriter, Operation, Select};
use rand::Rng;
use serde::Serialize;
use tokio::sync::watch;

use crate::clock::{Anchor, ANCHOR_EVERY};
use crate::entities::heartbeat_create;
use crate::state::RelayerState;

/// Publish one heartbeat through the serialized writer and record its key and time.
pub async fn beat(shared: &RelayerState) -> Result<(), LedgerError> {
    let create = heartbeat_create(
        &shared.public_url,
        shared.address,
        shared.chain_id,
        shared.ohttp_key.as_deref(),
        rand::thread_rng().gen(),
    )
    .map_err(LedgerError::Invalid)?;
    let receipt = shared.writer.execute(&[Operation::Create(create)]).await?;
    if !receipt.success {
        return Err(LedgerError::Reverted(
            receipt
                .revert_reason
                .unwrap_or_else(|| "heartbeat reverted".into()),
        ));
    }
    let key = receipt
        .created
        .first()
        .map(|c| c.key)
        .ok_or_else(|| LedgerError::Decode("heartbeat receipt has no created entity".into()))?;
    // Shown to users: the wall clock.
    let now = shared.time.wall_ms();
    {
        let mut live = shared.live.lock().unwrap_or_else(|p| p.into_inner());
        live.heartbeat = Some(key);
        live.last_beat_ms = now;
    }
    let _ = shared.store.set_meta("heartbeat", &key.to_string()).await;
    let _ = shared.store.set_meta("last_beat", &now.to_string()).await;
    shared.metrics.heartbeat();
    tracing::info!(block = receipt.block_number, "heartbeat published");
    Ok(())
}

/// Publish a heartbeat now and every HEARTBEAT_MS until stopped.
pub async fn run_heartbeats(shared: Arc<RelayerState>, mut stop: watch::Receiver<bool>) {
    let every = shared.cfg.heartbeat_interval;
    loop {
        // Heartbeats never starve batches: a beat gives way while a batch waits for the
        // writer, for at most one interval.
        let deadline = tokio::time::Instant::now() + every;
        while shared.writer.batches_waiting() > 0 && tokio::time::Instant::now() < deadline {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = stop.changed() => return,
            }
        }
        let next = match beat(&shared).await {
            Ok(()) => every,
            Err(e) => {
                shared.metrics.ledger_error();
                tracing::warn!(
                    error = crate::state::ledger_error_kind(&e),
                    "heartbeat failed"
                );
                every.min(Duration::from_secs(5))
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(next) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Delete finished statuses after the retention time (on the timeline: a step of the wall
/// clock prunes nothing early or late), and spent tokens of past epochs (token epochs are wall
/// time).
pub async fn run_pruning(shared: Arc<RelayerState>, mut stop: watch::Receiver<bool>) {
    let every = (shared.cfg.status_retention / 4)
        .clamp(Duration::from_millis(200), Duration::from_secs(60));
    let retention_ms = u64::try_from(shared.cfg.status_retention.as_millis()).unwrap_or(u64::MAX);
    loop {
        let min_epoch = privsvc_tokens::acceptable_epochs(shared.time.wall_ms())
            .iter()
            .copied()
            .min()
            .unwrap_or(0) as u64;
        let before = shared.time.now_ms().saturating_sub(retention_ms);
        if let Err(e) = shared.store.prune(before, min_epoch).await {
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
pub async fn run_anchor(shared: Arc<RelayerState>, mut stop: watch::Receiver<bool>) {
    let mut last: Option<Anchor> = None;
    let mut below_floor = false;
    loop {
        if let Some(step) = last.as_ref().and_then(|a| shared.time.step_since(a)) {
            tracing::warn!(
                step_ms = step,
                "the wall clock stepped; waits, holds and retention run on the monotonic clock"
            );
        }
        let floor =
            crate::diskspace::below_floor(&shared.cfg.data_dir, shared.cfg.limits.min_free_bytes);
        match (&floor, below_floor) {
            (Some(why), false) => tracing::warn!("{why}: new records are refused (503)"),
            (None, true) => tracing::info!("DATA_DIR is above MIN_FREE_BYTES again"),
            _ => {}
        }
        below_floor = floor.is_some();
        let anchor = shared.time.anchor();
        if let Err(e) = shared.store.set_meta(ANCHOR_KEY, &anchor.encode()).await {
            tracing::warn!(error = %e, "cannot store the timeline anchor");
        }
        last = Some(anchor);
        tokio::select! {
            _ = tokio::time::sleep(ANCHOR_EVERY) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Why the store cannot take the relayer's writes now, if it cannot: its last write failed
/// (disk full, I/O error, read-only file), records on the ledger wait to be recorded, or
/// `DATA_DIR` is below its free-space floor.
pub fn store_problem(shared: &RelayerState) -> Option<String> {
    if let Some(why) = shared.store.write_failure() {
        return Some(format!("the queue database cannot write: {why}"));
    }
    let unrecorded = shared
        .unrecorded
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .len();
    if unrecorded > 0 {
        return Some(format!(
            "{unrecorded} records on the ledger are not recorded in the queue database yet"
        ));
    }
    crate::diskspace::below_floor(&shared.cfg.data_dir, shared.cfg.limits.min_free_bytes)
}

/// How often the background task reads the balance for the health record: `/healthz` causes
/// at most one ledger call per this period, and never one per request.
pub const LEDGER_CHECK_REFRESH: Duration = Duration::from_secs(10);

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

/// Read the balance now and keep it (and whether the read worked) for the health record.
pub async fn refresh_ledger_check(shared: &RelayerState) {
    let balance = shared.ledger.balance(shared.address).await;
    if balance.is_err() {
        shared.metrics.ledger_error();
    }
    let mut live = shared.live.lock().unwrap_or_else(|p| p.into_inner());
    match balance {
        Ok(wei) => {
            live.balance_wei = Some(wei);
            live.balance_failed = false;
        }
        Err(_) => live.balance_failed = true,
    }
}

/// Re-read the balance every [`LEDGER_CHECK_REFRESH`] until stopped (the first read is made
/// at start, before the relayer serves).
pub async fn run_ledger_check(shared: Arc<RelayerState>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(LEDGER_CHECK_REFRESH) => {}
            _ = stop.changed() => return,
        }
        refresh_ledger_check(&shared).await;
    }
}

/// How often the background task recounts double spends.
pub const DOUBLE_SPEND_REFRESH: Duration = Duration::from_secs(60);

/// Count double spends now and keep the result for `/healthz`.
pub async fn refresh_double_spends(shared: &RelayerState) {
    let result = double_spends(shared).await;
    if result.is_err() {
        shared.metrics.ledger_error();
    }
    let mut live = shared.live.lock().unwrap_or_else(|p| p.into_inner());
    match result {
        Ok(n) => {
            live.double_spends = n;
            live.double_spends_failed = false;
        }
        Err(_) => live.double_spends_failed = true,
    }
}

/// Recount double spends at start and every [`DOUBLE_SPEND_REFRESH`] until stopped.
pub async fn run_double_spends(shared: Arc<RelayerState>, mut stop: watch::Receiver<bool>) {
    loop {
        refresh_double_spends(&shared).await;
        tokio::select! {
            _ = tokio::time::sleep(DOUBLE_SPEND_REFRESH) => {}
            _ = stop.changed() => return,
        }
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

/// Count the local spent tokens of the acceptable epochs that other relayers' spends entities
/// also list.
pub async fn double_spends(shared: &RelayerState) -> Result<u64, LedgerError> {
    let epochs = privsvc_tokens::acceptable_epochs(shared.time.wall_ms());
    let local: HashSet<[u8; 32]> = shared
        .store
        .spent_tokens(&epochs.iter().map(|e| *e as u64).collect::<Vec<_>>())
        .map_err(|e| LedgerError::Invalid(e.to_string()))?
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
        let expr = privsvc_ledger::system::spends_query(u64::from(epoch));
        for e in query_all(shared.ledger.as_ref(), &expr, &select, None).await? {
            if e.creator == Some(shared.address) {
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

/// The health record with exact figures, for `METRICS_BIND` and in-process callers. It makes
/// no ledger call: the balance and the double-spend count are the background tasks' last.
pub async fn health(shared: &RelayerState) -> Health {
    let live = shared
        .live
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let ledger = &shared.metrics.ledger;
    let store = store_problem(shared);
    let reason = if ledger.failing() {
        Some(format!(
            "the ledger is failing ({} calls failed in a row)",
            ledger.consecutive_failures()
        ))
    } else if live.balance_wei.is_none() || live.balance_failed {
        Some("the last balance read from the ledger failed".into())
    } else if live.double_spends_failed {
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
        address: shared.address.to_checksum(None),
        queue: shared.occupancy.load(std::sync::atomic::Ordering::SeqCst) as u64,
        batches: live.batches,
        last_flush_block: live.last_flush_block.unwrap_or(0).to_string(),
        heartbeat: live.heartbeat.map(|k| k.to_string()).unwrap_or_default(),
        last_beat: live.last_beat_ms,
        balance_native: live.balance_wei.map(wei_to_native).unwrap_or(0.0),
        double_spends_detected: live.double_spends,
    }
}

/// The health record of the public `/healthz`: [`health`] with `queue` rounded up
/// ([`public_queue`]) and without its reason.
pub async fn public_health(shared: &RelayerState) -> Health {
    let mut h = health(shared).await;
    h.queue = public_queue(h.queue);
    h.reason = None;
    h
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
