//! The in-memory view of the queued records and the batching decision (DESIGN 7).
//!
//! Policy, evaluated whenever something changes:
//! 1. A held record (minAnonymity k > 1) whose maxHoldMs has passed fails: no batch of k formed.
//! 2. The candidate batch takes queued records oldest first, at most MAX_BATCH, then drops every
//!    record whose k exceeds the number of records of ITS project (`project` attribute) in the
//!    batch, until that is stable (DESIGN 9: k counts the record's peers, not records of other
//!    projects). Per project this keeps the records with k <= m, m the largest count such that
//!    m of the project's records have k <= m: one sort, no repeated passes.
//! 3. The target size is max(minBatch, the largest k among queued records), at most MAX_BATCH,
//!    so that a held record gets its chance: batches wait for it, but never longer than
//!    maxWaitMs for their oldest member.
//! 4. Flush when the candidate reaches the target, or when its oldest member has waited
//!    maxWaitMs. The scheduler adds the minIntervalBlocks rule and the flush jitter.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::store::StoredRecord;

/// The queue (ordered by arrival sequence), with indexes that keep [`Queue::plan`] cheap:
/// held records by deadline and the multiset of their k.
#[derive(Debug, Default)]
pub struct Queue {
    by_seq: BTreeMap<u64, StoredRecord>,
    seq_of: HashMap<String, u64>,
    held: BTreeSet<(u64, u64)>,
    held_k: BTreeMap<u32, usize>,
}

/// Batching settings used by [`Queue::plan`].
#[derive(Debug, Clone, Copy)]
pub struct PlanParams {
    /// Flush as soon as this many records can be batched.
    pub min_batch: usize,
    /// Flush when the oldest batchable record has waited this long.
    pub max_wait_ms: u64,
    /// At most this many records per batch.
    pub max_batch: usize,
}

/// What to do now.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Held records past their maxHoldMs: fail them (id, k).
    pub expired: Vec<(String, u32)>,
    /// Records to flush now, oldest first (empty: nothing to flush). The batcher puts them in a
    /// random order on the ledger.
    pub batch: Vec<String>,
    /// When to look again if nothing arrives (epoch ms).
    pub wake_at_ms: Option<u64>,
}

fn deadline(rec: &StoredRecord) -> u64 {
    rec.accepted_ms.saturating_add(rec.max_hold_ms)
}

/// Records of `batch` whose project holds enough of them in `batch`: per project, the largest
/// m such that m of its records have k <= m; records with k <= m stay. Only allocates when
/// some record has k > 1.
fn keep_met_peers(batch: &mut Vec<&StoredRecord>) {
    if batch.iter().all(|r| r.min_anonymity <= 1) {
        return;
    }
    let mut ks: HashMap<&str, Vec<u32>> = HashMap::new();
    for r in batch.iter() {
        ks.entry(r.project.as_str())
            .or_default()
            .push(r.min_anonymity.max(1));
    }
    let met: HashMap<&str, u32> = ks
        .into_iter()
        .map(|(project, mut k)| {
            k.sort_unstable();
            let m = k
                .iter()
                .enumerate()
                .rev()
                .find(|(i, k)| **k as usize <= i + 1)
                .map_or(0, |(i, _)| i as u32 + 1);
            (project, m)
        })
        .collect();
    batch.retain(|r| r.min_anonymity.max(1) <= met.get(r.project.as_str()).copied().unwrap_or(0));
}

impl Queue {
    /// Add a record.
    pub fn push(&mut self, rec: StoredRecord) {
        if rec.min_anonymity > 1 {
            self.held.insert((deadline(&rec), rec.seq));
            *self.held_k.entry(rec.min_anonymity).or_insert(0) += 1;
        }
        self.seq_of.insert(rec.id.clone(), rec.seq);
        self.by_seq.insert(rec.seq, rec);
    }

    /// Remove a record by id.
    pub fn remove(&mut self, id: &str) -> Option<StoredRecord> {
        let seq = self.seq_of.remove(id)?;
        let rec = self.by_seq.remove(&seq)?;
        if rec.min_anonymity > 1 {
            self.held.remove(&(deadline(&rec), rec.seq));
            if let Some(n) = self.held_k.get_mut(&rec.min_anonymity) {
                *n -= 1;
                if *n == 0 {
                    self.held_k.remove(&rec.min_anonymity);
                }
            }
        }
        Some(rec)
    }

    /// Records queued ahead of `id`, or `None` when it is not queued.
    pub fn position(&self, id: &str) -> Option<usize> {
        let seq = *self.seq_of.get(id)?;
        Some(self.by_seq.range(..seq).count())
    }

    /// Queued records.
    pub fn len(&self) -> usize {
        self.by_seq.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }

    /// Decide what to do at `now_ms`. Costs O(expired) when holds expired, otherwise at most
    /// O(MAX_BATCH), independent of the queue length.
    pub fn plan(&self, now_ms: u64, p: &PlanParams) -> Plan {
        let mut plan = Plan::default();
        for (d, seq) in &self.held {
            if *d > now_ms {
                break;
            }
            if let Some(rec) = self.by_seq.get(seq) {
                plan.expired.push((rec.id.clone(), rec.min_anonymity));
            }
        }
        if !plan.expired.is_empty() {
            // Fail those first; the caller plans again.
            return plan;
        }
        let mut wake = self.held.first().map(|(d, _)| *d);
        let max_batch = p.max_batch.max(1);
        let max_k = self.held_k.keys().next_back().copied().unwrap_or(1) as usize;
        let target = p.min_batch.max(1).max(max_k).min(max_batch);
        let Some(oldest) = self.by_seq.values().next().map(|r| r.accepted_ms) else {
            plan.wake_at_ms = wake;
            return plan;
        };
        let due = oldest.saturating_add(p.max_wait_ms);
        if self.by_seq.len() < target && due > now_ms {
            plan.wake_at_ms = min_opt(wake, due);
            return plan;
        }
        let mut batch: Vec<&StoredRecord> = self.by_seq.values().take(max_batch).collect();
        if !self.held_k.is_empty() {
            keep_met_peers(&mut batch);
        }
        if let Some(oldest_in) = batch.iter().map(|r| r.accepted_ms).min() {
            let due = oldest_in.saturating_add(p.max_wait_ms);
            if batch.len() >= target || due <= now_ms {
                plan.batch = batch.iter().map(|r| r.id.clone()).collect();
            } else {
                wake = min_opt(wake, due);
            }
        }
        plan.wake_at_ms = wake;
        plan
    }
}

fn min_opt(a: Option<u64>, b: u64) -> Option<u64> {
    Some(a.map_or(b, |a| a.min(b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::Address;

    fn rec(seq: u64, accepted_ms: u64, k: u32, hold: u64) -> StoredRecord {
        rec_in("p", seq, accepted_ms, k, hold)
    }

    fn rec_in(project: &str, seq: u64, accepted_ms: u64, k: u32, hold: u64) -> StoredRecord {
        StoredRecord {
            id: format!("r{seq}"),
            seq,
            app: "a".into(),
            project: project.into(),
            envelope_digest: [seq as u8; 32],
            owner: Address::ZERO,
            envelope: vec![],
            attributes: "{}".into(),
            exp_seconds: 3600,
            min_anonymity: k,
            max_hold_ms: hold,
            token: None,
            accepted_ms,
        }
    }

    const P: PlanParams = PlanParams {
        min_batch: 3,
        max_wait_ms: 1000,
        max_batch: 4,
    };

    #[test]
    fn flushes_on_min_batch_or_max_wait_and_caps_at_max_batch() {
        let mut q = Queue::default();
        q.push(rec(1, 100, 1, 0));
        q.push(rec(2, 200, 1, 0));
        let plan = q.plan(500, &P);
        assert!(plan.batch.is_empty());
        assert_eq!(plan.wake_at_ms, Some(1100));
        assert_eq!(q.plan(1100, &P).batch, vec!["r1", "r2"]);
        for s in 3..=6 {
            q.push(rec(s, 300, 1, 0));
        }
        assert_eq!(q.plan(400, &P).batch, vec!["r1", "r2", "r3", "r4"]);
        assert_eq!(q.position("r5"), Some(4));
        assert_eq!(q.position("nope"), None);
    }

    #[test]
    fn held_records_join_only_large_enough_batches_and_expire() {
        let mut q = Queue::default();
        q.push(rec(1, 100, 4, 5000));
        q.push(rec(2, 100, 1, 0));
        q.push(rec(3, 100, 1, 0));
        // Target is 4 because of r1: min_batch 3 is not enough to flush before max wait.
        assert!(q.plan(200, &P).batch.is_empty());
        // At max wait the batch of 2 leaves r1 out.
        assert_eq!(q.plan(1100, &P).batch, vec!["r2", "r3"]);
        q.push(rec(4, 150, 1, 0));
        assert_eq!(q.plan(200, &P).batch, vec!["r1", "r2", "r3", "r4"]);
        q.remove("r2");
        q.remove("r3");
        q.remove("r4");
        let plan = q.plan(5100, &P);
        assert_eq!(plan.expired, vec![("r1".to_string(), 4)]);
        assert!(plan.batch.is_empty());
    }

    #[test]
    fn k_counts_only_records_of_the_same_project() {
        let mut q = Queue::default();
        // A P-record with k = 3 among many records of other projects.
        q.push(rec_in("P", 1, 100, 3, 60_000));
        for s in 2..=10 {
            q.push(rec_in(&format!("other{}", s % 3), s, 100, 1, 0));
        }
        // The oldest four are taken; the P-record has no peer among them and stays.
        assert_eq!(q.plan(200, &P).batch, vec!["r2", "r3", "r4"]);
        for s in 2..=10 {
            q.remove(&format!("r{s}"));
        }
        // Alone, it is never flushed, even past maxWaitMs.
        let plan = q.plan(5000, &P);
        assert!(plan.batch.is_empty(), "{plan:?}");
        assert_eq!(plan.wake_at_ms, Some(60_100));
        // Two more P-records: now the P-record has two peers plus itself.
        q.push(rec_in("P", 11, 150, 1, 0));
        assert!(!q.plan(5000, &P).batch.contains(&"r1".to_string()));
        q.push(rec_in("P", 12, 150, 2, 60_000));
        let plan = q.plan(5000, &P);
        for id in ["r1", "r11", "r12"] {
            assert!(plan.batch.contains(&id.to_string()), "{plan:?}");
        }
    }

    #[test]
    fn keep_met_peers_is_the_fixpoint_of_dropping_unmet_records() {
        // Compare with the obvious quadratic rule on many random queues.
        use rand::Rng;
        let mut rng = rand::thread_rng();
        for _ in 0..2000 {
            let n = rng.gen_range(1..40);
            let recs: Vec<StoredRecord> = (0..n)
                .map(|i| {
                    let project = ["A", "B", "C"][rng.gen_range(0..3)];
                    rec_in(project, i, 0, rng.gen_range(1..12), 1000)
                })
                .collect();
            let mut fast: Vec<&StoredRecord> = recs.iter().collect();
            keep_met_peers(&mut fast);
            let mut slow: Vec<&StoredRecord> = recs.iter().collect();
            loop {
                let before = slow.len();
                let counts: Vec<usize> = slow
                    .iter()
                    .map(|r| slow.iter().filter(|o| o.project == r.project).count())
                    .collect();
                let mut i = 0;
                slow.retain(|r| {
                    i += 1;
                    r.min_anonymity as usize <= counts[i - 1]
                });
                if slow.len() == before {
                    break;
                }
            }
            let ids = |v: &[&StoredRecord]| v.iter().map(|r| r.seq).collect::<Vec<_>>();
            assert_eq!(ids(&fast), ids(&slow));
        }
    }
}
