//! The batcher's loop: observes the queue, the timeline (monotonic: a step of the wall clock
//! moves no batch window, hold or wait; [`crate::clock`]) and the chain, asks [`crate::planner`]
//! what to do, and applies the answer (reconcile stored batches, fail expired holds, read the
//! head, wait, or send a batch through [`crate::batcher`]). It holds no decision of its own.
//!
//! Flush jitter: every flush is delayed by a uniform random 0..=FLUSH_JITTER_MS ms (default
//! 1000), so that batch times do not mirror arrival times.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::sync::watch;

use crate::batcher::{send_batch, sleep_or_stop, Outcome};
use crate::planner::{self, Action, ChainView};
use crate::state::RelayerState;
use crate::store::StoredState;

/// Run until `stop` turns true: reconcile stored batches, then schedule.
pub async fn run(shared: Arc<RelayerState>, mut stop: watch::Receiver<bool>) {
    let mut reconciled = false;
    // A head read is good for the one plan that asked for it.
    let mut head = None;
    loop {
        if *stop.borrow() {
            return;
        }
        let chain = ChainView {
            reconciled,
            last_flush_block: shared
                .live
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .last_flush_block,
            min_interval_blocks: shared.cfg.batching.min_interval_blocks,
            head: head.take(),
        };
        let now = shared.time.now_ms();
        let action = {
            let q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
            planner::plan(&q, now, &shared.plan_params(), &chain)
        };
        match action {
            Action::Reconcile => {
                crate::reconcile::reconcile(&shared, &mut stop).await;
                if *stop.borrow() {
                    return;
                }
                let _ = shared.reconciled.send(true);
                reconciled = true;
            }
            Action::FailExpired(expired) => fail_expired(&shared, expired).await,
            Action::ReadHead => match shared.ledger.block_number().await {
                Ok(h) => head = Some(h),
                Err(_) => {
                    shared.metrics.ledger_error();
                    if sleep_or_stop(Duration::from_secs(1), &mut stop).await {
                        return;
                    }
                }
            },
            Action::WaitForBlock => {
                let poll = (shared.cfg.block_time / 4).max(Duration::from_millis(50));
                if sleep_or_stop(poll, &mut stop).await {
                    return;
                }
            }
            Action::Flush(_) => {
                if !shared.cfg.batching.flush_jitter.is_zero() {
                    let j = rand::thread_rng()
                        .gen_range(Duration::ZERO..=shared.cfg.batching.flush_jitter);
                    if sleep_or_stop(j, &mut stop).await {
                        return;
                    }
                }
                // The queue may have grown during the jitter: take the batch planned now.
                let records = {
                    let mut q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
                    let plan = q.plan(shared.time.now_ms(), &shared.plan_params());
                    plan.batch
                        .iter()
                        .filter_map(|id| q.remove(id))
                        .collect::<Vec<_>>()
                };
                if records.is_empty() {
                    continue;
                }
                match send_batch(&shared, records, &mut stop).await {
                    Outcome::Shutdown => return,
                    Outcome::NotSent
                        if sleep_or_stop(Duration::from_millis(500), &mut stop).await =>
                    {
                        return;
                    }
                    _ => {}
                }
            }
            Action::Sleep(wake_at_ms) => {
                let wait = wake_at_ms
                    .map(|w| w.saturating_sub(now).max(1))
                    .unwrap_or(60_000);
                tokio::select! {
                    _ = shared.notify.notified() => {}
                    _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    }
}

/// Fail held records whose maxHoldMs passed (the planner's [`Action::FailExpired`]).
async fn fail_expired(shared: &RelayerState, expired: Vec<(String, u32)>) {
    let now = shared.time.now_ms();
    for (id, k) in expired {
        let hold = {
            let mut q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
            q.remove(&id).map(|r| r.max_hold_ms)
        };
        let Some(hold) = hold else { continue };
        let reason = format!(
            "no batch of {k} records formed within {hold} ms (minAnonymity {k}); nothing was written"
        );
        if shared
            .store
            .set_record(&id, StoredState::Failed(reason), now)
            .await
            .is_ok()
        {
            shared.metrics.failed(1);
            shared.finished(1);
        }
    }
}
