//! The batcher's decisions as pure functions: plain data in, plain actions out. No store, no
//! ledger, no clock, no timer: the driver ([`crate::driver`]) observes those, asks here what to
//! do, applies the answer and feeds the result back. The model test
//! (`tests/it/planner_model.rs`) drives the same functions against an in-memory store and a
//! simulated chain.
//!
//! Three decisions (docs/RELIABILITY.md, "The batcher as a state machine"):
//! - [`plan`]: what the scheduler does next, from the queue, the clock and what it knows of the
//!   chain (the minIntervalBlocks rule);
//! - [`on_tx`]: what to do with a stored batch transaction of unknown fate, from what the node
//!   said about it (written, reverted, superseded, too big, or broadcast and wait again);
//! - [`after_revert`]: after a revert, which records are retried and which have failed.

use std::collections::HashMap;

use crate::queue::{PlanParams, Queue};

/// Give up on a record after this many reverted batches without an identified offender.
pub const MAX_REVERT_ATTEMPTS: u32 = 3;

/// What the scheduler knows of the chain when it plans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainView {
    /// Stored batches of a previous run are settled (reconciliation done).
    pub reconciled: bool,
    /// Block of the last batch receipt (written or reverted), if any.
    pub last_flush_block: Option<u64>,
    /// minIntervalBlocks.
    pub min_interval_blocks: u64,
    /// The head block, when it was read for this plan (`None`: not asked yet).
    pub head: Option<u64>,
}

/// One step for the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Settle every stored batch of a previous run before anything else is signed.
    Reconcile,
    /// Fail these held records (id, k): no batch of k formed within their maxHoldMs.
    FailExpired(Vec<(String, u32)>),
    /// A batch is due but minIntervalBlocks needs the head block: read it and plan again.
    ReadHead,
    /// A batch is due but would land within minIntervalBlocks of the last one: wait for a
    /// block and plan again.
    WaitForBlock,
    /// Build and send one batch with these records (oldest first; the batch puts them in a
    /// random order), after the flush jitter.
    Flush(Vec<String>),
    /// Nothing to do until this time (timeline ms, `clock::Timeline`; `None`: until a
    /// record arrives).
    Sleep(Option<u64>),
}

/// What the scheduler does next at `now_ms` on the relayer's timeline (monotonic, never the
/// wall clock). Costs what [`Queue::plan`] costs.
pub fn plan(queue: &Queue, now_ms: u64, params: &PlanParams, chain: &ChainView) -> Action {
    if !chain.reconciled {
        return Action::Reconcile;
    }
    let p = queue.plan(now_ms, params);
    if !p.expired.is_empty() {
        return Action::FailExpired(p.expired);
    }
    if p.batch.is_empty() {
        return Action::Sleep(p.wake_at_ms);
    }
    match (chain.last_flush_block, chain.min_interval_blocks) {
        (None, _) | (_, 0) => Action::Flush(p.batch),
        (Some(last), min) => match chain.head {
            None => Action::ReadHead,
            // The next transaction lands at head + 1 at the earliest.
            Some(head) if head + 1 >= last + min => Action::Flush(p.batch),
            Some(_) => Action::WaitForBlock,
        },
    }
}

/// What the node said about a stored batch transaction in one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxObservation {
    /// A receipt: mined in `block`, reverted when `success` is false.
    Receipt {
        /// The transaction succeeded.
        success: bool,
        /// Block it was mined in.
        block: u64,
        /// Revert reason, when it reverted.
        revert_reason: Option<String>,
    },
    /// No receipt; the account's mined nonce (`None`: unknown or the node did not answer).
    Pending {
        /// The account's mined nonce.
        mined_nonce: Option<u64>,
    },
    /// The node refused the transaction for good: it exceeds the block gas limit.
    RefusedTooBig,
    /// The node refused it with "nonce too low" and has no receipt for it: another
    /// transaction took its nonce.
    NonceTaken,
}

/// What to do with a stored batch transaction after one observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxDecision {
    /// Mined: mark its records written at `block`.
    Written {
        /// Block of the receipt.
        block: u64,
    },
    /// Reverted: drop the batch and isolate offenders ([`after_revert`]).
    Reverted {
        /// Revert reason.
        reason: String,
        /// Block of the receipt.
        block: u64,
    },
    /// It can never land (its nonce is taken, or a predecessor vanished): drop the batch and
    /// queue its records again. Nothing lands twice: the next batch's keys are predicted from
    /// an entity nonce this transaction would move, so if it landed after all, the next batch
    /// would revert on stale keys, and the already-written check finds its records.
    Replan,
    /// Too big for a block: drop it and split the batch.
    Split,
    /// Unknown yet: broadcast the same signed bytes again and wait one round for a receipt.
    Rebroadcast,
}

/// Decide on a stored batch transaction signed with `nonce`.
pub fn on_tx(nonce: u64, obs: TxObservation) -> TxDecision {
    match obs {
        TxObservation::Receipt {
            success: true,
            block,
            ..
        } => TxDecision::Written { block },
        TxObservation::Receipt {
            success: false,
            block,
            revert_reason,
        } => TxDecision::Reverted {
            reason: revert_reason.unwrap_or_else(|| "the batch transaction reverted".into()),
            block,
        },
        // A predecessor vanished (a gap below it): re-plan, do not wait.
        TxObservation::Pending {
            mined_nonce: Some(m),
        } if m < nonce => TxDecision::Replan,
        // A taken nonce (m > nonce) shows up as "nonce too low" on the broadcast.
        TxObservation::Pending { .. } => TxDecision::Rebroadcast,
        TxObservation::RefusedTooBig => TxDecision::Split,
        TxObservation::NonceTaken => TxDecision::Replan,
    }
}

/// Whether a revert reason is the ledger not finding an entity the batch transfers: when no
/// record reverts alone, the batch's keys (predicted from the entity nonce) were stale.
pub fn stale_prediction(reason: &str) -> bool {
    reason.contains("EntityNotFound")
}

/// The records of a reverted batch that did not revert alone, split into those retried and
/// those that failed (after [`MAX_REVERT_ATTEMPTS`] reverts without an identified offender).
#[derive(Debug, PartialEq, Eq)]
pub struct RevertVerdict<R> {
    /// Queue these again.
    pub retry: Vec<R>,
    /// Fail these: the batch reverted repeatedly.
    pub give_up: Vec<R>,
}

/// After a revert with `reason`, in which `offenders` records reverted alone (they fail on
/// their own), decide on the rest (`keep`). A stale key prediction does not count against the
/// records; a revert with an identified offender does not either (the offender explains it);
/// otherwise each record's count in `attempts` goes up, and at [`MAX_REVERT_ATTEMPTS`] it
/// fails.
pub fn after_revert<R>(
    reason: &str,
    offenders: usize,
    keep: Vec<R>,
    attempts: &mut HashMap<String, u32>,
    id: impl Fn(&R) -> &str,
) -> RevertVerdict<R> {
    if offenders > 0 || stale_prediction(reason) {
        return RevertVerdict {
            retry: keep,
            give_up: Vec::new(),
        };
    }
    let mut verdict = RevertVerdict {
        retry: Vec::new(),
        give_up: Vec::new(),
    };
    for rec in keep {
        let n = attempts.entry(id(&rec).to_string()).or_insert(0);
        *n += 1;
        if *n >= MAX_REVERT_ATTEMPTS {
            attempts.remove(id(&rec));
            verdict.give_up.push(rec);
        } else {
            verdict.retry.push(rec);
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_rule_reads_the_head_then_waits_or_flushes() {
        use crate::store::StoredRecord;
        let mut q = Queue::default();
        q.push(StoredRecord {
            id: "r1".into(),
            seq: 1,
            app: "a".into(),
            project: "p".into(),
            envelope_digest: [1; 32],
            owner: alloy_primitives::Address::ZERO,
            envelope: vec![],
            attributes: "{}".into(),
            exp_seconds: 3600,
            min_anonymity: 1,
            max_hold_ms: 0,
            token: None,
            accepted_ms: 0,
        });
        let p = PlanParams {
            min_batch: 1,
            max_wait_ms: 1000,
            max_batch: 10,
        };
        let mut chain = ChainView {
            reconciled: false,
            last_flush_block: Some(10),
            min_interval_blocks: 3,
            head: None,
        };
        assert_eq!(plan(&q, 0, &p, &chain), Action::Reconcile);
        chain.reconciled = true;
        assert_eq!(plan(&q, 0, &p, &chain), Action::ReadHead);
        chain.head = Some(11);
        assert_eq!(plan(&q, 0, &p, &chain), Action::WaitForBlock);
        chain.head = Some(12);
        assert_eq!(plan(&q, 0, &p, &chain), Action::Flush(vec!["r1".into()]));
        chain.min_interval_blocks = 0;
        chain.head = None;
        assert_eq!(plan(&q, 0, &p, &chain), Action::Flush(vec!["r1".into()]));
        q.remove("r1");
        assert_eq!(plan(&q, 0, &p, &chain), Action::Sleep(None));
    }

    fn record(
        id: &str,
        seq: u64,
        accepted_ms: u64,
        k: u32,
        hold: u64,
    ) -> crate::store::StoredRecord {
        crate::store::StoredRecord {
            id: id.into(),
            seq,
            app: "a".into(),
            project: "p".into(),
            envelope_digest: [seq as u8; 32],
            owner: alloy_primitives::Address::ZERO,
            envelope: vec![],
            attributes: "{}".into(),
            exp_seconds: 3600,
            min_anonymity: k,
            max_hold_ms: hold,
            token: None,
            accepted_ms,
        }
    }

    #[test]
    fn a_step_of_the_wall_clock_moves_no_batch_window_and_no_hold() {
        use crate::clock::{Clock, Timeline};
        const HOUR: i64 = 3_600_000;
        let clock = Clock::system();
        let time = Timeline::start(clock.clone(), None);
        let p = PlanParams {
            min_batch: 5,
            max_wait_ms: 30_000,
            max_batch: 10,
        };
        let chain = ChainView {
            reconciled: true,
            ..ChainView::default()
        };
        let mut q = Queue::default();
        let t0 = time.now_ms();
        q.push(record("free", 1, t0, 1, 0));
        q.push(record("held", 2, t0, 5, 600_000));
        // What the driver waits for: the plan's wake time minus now, on the relayer's time.
        let wait = |q: &Queue| match plan(q, time.now_ms(), &p, &chain) {
            Action::Sleep(Some(wake)) => wake.saturating_sub(time.now_ms()),
            other => panic!("{other:?}"),
        };
        assert!(wait(&q) <= 30_000);
        // NTP corrections, a VM restore: back 2 hours, forward 2 hours, forward 1 more.
        for step in [-2 * HOUR, 2 * HOUR, HOUR, -HOUR] {
            clock.step_wall(step);
            let w = wait(&q);
            assert!(
                (29_000..=30_000).contains(&w),
                "step {step}: the wait is {w} ms"
            );
        }
        // The batch window passes on the monotonic clock alone.
        clock.advance(30_000);
        assert_eq!(
            plan(&q, time.now_ms(), &p, &chain),
            Action::Flush(vec!["free".into()])
        );
        q.remove("free");
        // The hold: still waiting after a step forward of 2 hours, expired after its 10 minutes.
        clock.step_wall(2 * HOUR);
        assert!(matches!(
            plan(&q, time.now_ms(), &p, &chain),
            Action::Sleep(Some(_))
        ));
        clock.advance(570_000);
        assert_eq!(
            plan(&q, time.now_ms(), &p, &chain),
            Action::FailExpired(vec![("held".into(), 5)])
        );
    }

    #[test]
    fn a_gap_below_replans_and_a_taken_nonce_replans() {
        let pending = |m| TxObservation::Pending { mined_nonce: m };
        assert_eq!(on_tx(5, pending(Some(4))), TxDecision::Replan);
        assert_eq!(on_tx(5, pending(Some(5))), TxDecision::Rebroadcast);
        assert_eq!(on_tx(5, pending(Some(6))), TxDecision::Rebroadcast);
        assert_eq!(on_tx(5, pending(None)), TxDecision::Rebroadcast);
        assert_eq!(on_tx(5, TxObservation::NonceTaken), TxDecision::Replan);
        assert_eq!(on_tx(5, TxObservation::RefusedTooBig), TxDecision::Split);
        let reverted = TxObservation::Receipt {
            success: false,
            block: 9,
            revert_reason: None,
        };
        assert!(matches!(
            on_tx(5, reverted),
            TxDecision::Reverted { block: 9, .. }
        ));
    }

    #[test]
    fn records_fail_after_three_reverts_without_an_offender() {
        let mut attempts = HashMap::new();
        for _ in 1..MAX_REVERT_ATTEMPTS {
            let v = after_revert(
                "boom",
                0,
                vec!["a".to_string()],
                &mut attempts,
                String::as_str,
            );
            assert_eq!(v.retry, vec!["a".to_string()]);
        }
        // Stale keys and identified offenders do not count.
        let v = after_revert(
            "EntityNotFound",
            0,
            vec!["a".into()],
            &mut attempts,
            String::as_str,
        );
        assert!(v.give_up.is_empty());
        let v = after_revert("boom", 1, vec!["a".into()], &mut attempts, String::as_str);
        assert!(v.give_up.is_empty());
        let v = after_revert(
            "boom",
            0,
            vec!["a".to_string()],
            &mut attempts,
            String::as_str,
        );
        assert_eq!(v.give_up, vec!["a".to_string()]);
        assert!(attempts.is_empty());
    }
}
