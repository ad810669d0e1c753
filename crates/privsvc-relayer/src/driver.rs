//! The batcher's loop: observes the queue, the timeline (monotonic: a step of the wall clock
//! moves no batch window, hold or wait; [`crate::clock`]) and the chain, asks [`crate::planner`]
//! what to do, and applies the answer (reconcile stored batches, fail expired holds, read the
//! head, wait, or send a batch through [`crate::batcher`]). It holds no decision of its own.
//!
//! Records accepted by the intake arrive over a channel; the loop takes them into the queue
//! before each plan, and a sleeping loop wakes for the next one.
//!
//! Flush jitter: every flush is delayed by a uniform random 0..=FLUSH_JITTER_MS ms (default
//! 1000), so that batch times do not mirror arrival times.

use std::time::Duration;

use rand::Rng;
use tokio::sync::watch;

use crate::batcher::{sleep_or_stop, Batcher, Outcome};
use crate::planner::{self, Action, ChainView};
use crate::store::StoredState;

impl Batcher {
    /// Run until `stop` turns true: reconcile stored batches, then schedule.
    pub(crate) async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut reconciled = false;
        // A head read is good for the one plan that asked for it.
        let mut head = None;
        loop {
            if *stop.borrow() {
                return;
            }
            self.take_incoming();
            let chain = ChainView {
                reconciled,
                last_flush_block: self.figures.borrow().last_flush_block,
                min_interval_blocks: self.settings.batching.min_interval_blocks,
                head: head.take(),
            };
            let now = self.time.now_ms();
            match planner::plan(&self.queue, now, &self.plan_params(), &chain) {
                Action::Reconcile => {
                    self.reconcile(&mut stop).await;
                    if *stop.borrow() {
                        return;
                    }
                    let _ = self.reconciled.send(true);
                    reconciled = true;
                }
                Action::FailExpired(expired) => self.fail_expired(expired).await,
                Action::ReadHead => match self.ledger.block_number().await {
                    Ok(h) => head = Some(h),
                    Err(_) => {
                        self.metrics.ledger_error();
                        if sleep_or_stop(Duration::from_secs(1), &mut stop).await {
                            return;
                        }
                    }
                },
                Action::WaitForBlock => {
                    let poll = (self.settings.block_time / 4).max(Duration::from_millis(50));
                    if sleep_or_stop(poll, &mut stop).await {
                        return;
                    }
                }
                Action::Flush(_) => {
                    let jitter = self.settings.batching.flush_jitter;
                    if !jitter.is_zero() {
                        let j = rand::thread_rng().gen_range(Duration::ZERO..=jitter);
                        if sleep_or_stop(j, &mut stop).await {
                            return;
                        }
                    }
                    // The queue may have grown during the jitter: take the batch planned now.
                    self.take_incoming();
                    let plan = self.queue.plan(self.time.now_ms(), &self.plan_params());
                    let records: Vec<_> = plan
                        .batch
                        .iter()
                        .filter_map(|id| self.queue.remove(id))
                        .collect();
                    if records.is_empty() {
                        continue;
                    }
                    match self.send_batch(records, &mut stop).await {
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
                        Some(rec) = self.incoming.recv() => self.queue.push(rec),
                        _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
                        _ = stop.changed() => return,
                    }
                }
            }
        }
    }

    /// Fail held records whose maxHoldMs passed (the planner's [`Action::FailExpired`]).
    async fn fail_expired(&mut self, expired: Vec<(String, u32)>) {
        let now = self.time.now_ms();
        for (id, k) in expired {
            let Some(hold) = self.queue.remove(&id).map(|r| r.max_hold_ms) else {
                continue;
            };
            let reason = format!(
                "no batch of {k} records formed within {hold} ms (minAnonymity {k}); nothing was written"
            );
            if self
                .store
                .set_record(&id, StoredState::Failed(reason), now)
                .await
                .is_ok()
            {
                self.metrics.failed(1);
                self.occupancy.release(1);
            }
        }
    }
}
