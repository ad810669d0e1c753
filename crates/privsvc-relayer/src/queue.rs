//! The in-memory view of the queued records and the batching decision (docs/PROTOCOL.md §7).
//!
//! Policy, evaluated whenever something changes:
//! 1. A held record (minAnonymity k > 1) whose maxHoldMs has passed fails: no batch of k formed.
//! 2. Eligible records (docs/PROTOCOL.md §7): per project (`project` attribute), m is the largest
//!    count such that m of the project's queued records have k <= m; the records with k <= m are
//!    eligible (their holds can be met now: k counts the record's peers, not records of other
//!    projects). A record whose hold cannot be met is skipped: it never blocks, and never takes the
//!    place of, the records behind it. The per-project counts are kept up to date on every push and
//!    remove.
//! 3. The candidate batch takes eligible records oldest first, at most MAX_BATCH. When that cut
//!    leaves a project short of a record's k, the record is dropped (the fixpoint of dropping
//!    unmet records, one sort per project) and the batch is filled up with eligible records
//!    without a hold (which only add peers).
//! 4. Flush when the candidate holds minBatch records, unless it holds records of a project
//!    with an unmet hold (they are that hold's only possible peers: flushing them would take
//!    its chance away), or when its oldest member has waited maxWaitMs. So a held record gets
//!    its chance, for at most maxWaitMs, from the records of its own project only: holds never
//!    delay records of other projects (a flood of holds that can never be met, each in its own
//!    project, changes no batch), never take their places, and never delay anything beyond
//!    maxWaitMs. The scheduler adds the minIntervalBlocks rule and the flush jitter.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::store::StoredRecord;

/// The queue (ordered by arrival sequence), with indexes that keep [`Queue::plan`] cheap:
/// held records by deadline, and per project the records without a hold and the multiset of
/// the holds' k.
#[derive(Debug, Default)]
pub struct Queue {
    by_seq: BTreeMap<u64, StoredRecord>,
    seq_of: HashMap<String, u64>,
    held: BTreeSet<(u64, u64)>,
    projects: HashMap<String, ProjectCounts>,
    /// The lab's leaky setting `LabLeaks::planner_oldest_only`.
    oldest_only: bool,
}

/// The queued records of one project, as [`met_count`] needs them.
#[derive(Debug, Default)]
struct ProjectCounts {
    /// Records without a hold (k <= 1).
    unheld: usize,
    /// Held records: k -> how many.
    held_k: BTreeMap<u32, usize>,
}

impl ProjectCounts {
    fn is_empty(&self) -> bool {
        self.unheld == 0 && self.held_k.is_empty()
    }
}

/// The largest m such that m of the project's records have k <= m (0 when none): every record
/// of the project with k <= m can be batched now.
fn met_count(counts: &ProjectCounts) -> usize {
    let mut have = counts.unheld;
    let mut met = have;
    for (k, n) in &counts.held_k {
        have += n;
        if *k as usize <= have {
            met = have;
        }
    }
    met
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
    /// When to look again if nothing arrives (timeline ms).
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

/// Splits `batch` into the records whose project holds at least their k records in it (in
/// their order) and the others: what is left of a planned batch after records were taken out
/// of it (found on the ledger, failed) must still meet every member's hold.
pub fn split_met(batch: Vec<StoredRecord>) -> (Vec<StoredRecord>, Vec<StoredRecord>) {
    if batch.iter().all(|r| r.min_anonymity <= 1) {
        return (batch, Vec::new());
    }
    let kept: std::collections::HashSet<u64> = {
        let mut refs: Vec<&StoredRecord> = batch.iter().collect();
        keep_met_peers(&mut refs);
        refs.iter().map(|r| r.seq).collect()
    };
    batch.into_iter().partition(|r| kept.contains(&r.seq))
}

impl Queue {
    /// Add a record (a record with the id of a queued one replaces it).
    pub fn push(&mut self, rec: StoredRecord) {
        self.remove(&rec.id);
        let counts = self.projects.entry(rec.project.clone()).or_default();
        if rec.min_anonymity > 1 {
            self.held.insert((deadline(&rec), rec.seq));
            *counts.held_k.entry(rec.min_anonymity).or_insert(0) += 1;
        } else {
            counts.unheld += 1;
        }
        self.seq_of.insert(rec.id.clone(), rec.seq);
        self.by_seq.insert(rec.seq, rec);
    }

    /// Remove a record by id.
    pub fn remove(&mut self, id: &str) -> Option<StoredRecord> {
        let seq = self.seq_of.remove(id)?;
        let rec = self.by_seq.remove(&seq)?;
        if let Some(counts) = self.projects.get_mut(&rec.project) {
            if rec.min_anonymity > 1 {
                self.held.remove(&(deadline(&rec), rec.seq));
                if let Some(n) = counts.held_k.get_mut(&rec.min_anonymity) {
                    *n -= 1;
                    if *n == 0 {
                        counts.held_k.remove(&rec.min_anonymity);
                    }
                }
            } else {
                counts.unheld = counts.unheld.saturating_sub(1);
            }
            if counts.is_empty() {
                self.projects.remove(&rec.project);
            }
        }
        Some(rec)
    }

    /// The attack lab's leaky setting ([`crate::lab_leaks::LabLeaks::planner_oldest_only`]): a
    /// batch is looked for among the oldest `MAX_BATCH` records only.
    pub fn set_oldest_only(&mut self, on: bool) {
        self.oldest_only = on;
    }

    /// The queued records, oldest first.
    pub fn records(&self) -> impl Iterator<Item = &StoredRecord> {
        self.by_seq.values()
    }

    /// Records queued ahead of `id`, or `None` when it is not queued (tests only: no answer
    /// reports it, and its cost grows with the position).
    #[cfg(test)]
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

    /// Decide what to do at `now_ms` (the relayer's timeline, as `accepted_ms`). Costs
    /// O(expired) when holds expired, otherwise the records scanned: at most MAX_BATCH eligible
    /// ones plus the records with unmet holds among them (one hash lookup each).
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
        let target = p.min_batch.max(1).min(max_batch);
        let Some(oldest) = self.by_seq.values().next().map(|r| r.accepted_ms) else {
            plan.wake_at_ms = wake;
            return plan;
        };
        let due = oldest.saturating_add(p.max_wait_ms);
        if self.by_seq.len() < target && due > now_ms {
            plan.wake_at_ms = min_opt(wake, due);
            return plan;
        }
        let batch = self.eligible_batch(max_batch);
        if let Some(oldest_in) = batch.iter().map(|r| r.accepted_ms).min() {
            let due = oldest_in.saturating_add(p.max_wait_ms);
            let ready = batch.len() >= target && !self.peers_of_unmet_holds(&batch);
            if ready || due <= now_ms {
                plan.batch = batch.iter().map(|r| r.id.clone()).collect();
            } else {
                wake = min_opt(wake, due);
            }
        }
        plan.wake_at_ms = wake;
        plan
    }

    /// Whether `rec` can be batched now (its project's m is at least its k); `met` memoises m
    /// per project.
    fn eligible<'q>(&'q self, rec: &'q StoredRecord, met: &mut HashMap<&'q str, usize>) -> bool {
        if rec.min_anonymity <= 1 {
            return true;
        }
        let m = *met
            .entry(rec.project.as_str())
            .or_insert_with(|| self.projects.get(&rec.project).map_or(0, met_count));
        rec.min_anonymity as usize <= m
    }

    /// Whether `batch` holds a record of a project with an unmet hold (policy 4).
    fn peers_of_unmet_holds(&self, batch: &[&StoredRecord]) -> bool {
        let mut seen: HashMap<&str, bool> = HashMap::new();
        batch.iter().any(|r| {
            *seen.entry(r.project.as_str()).or_insert_with(|| {
                self.projects.get(&r.project).is_some_and(|c| {
                    c.held_k
                        .keys()
                        .next_back()
                        .is_some_and(|k| *k as usize > met_count(c))
                })
            })
        })
    }

    /// At most `max_batch` eligible records, oldest first, every one with at least its k
    /// records of its project in the batch (policy 2 and 3).
    fn eligible_batch(&self, max_batch: usize) -> Vec<&StoredRecord> {
        // m of each project with holds, computed when first needed.
        let mut met: HashMap<&str, usize> = HashMap::new();
        let window = if self.oldest_only {
            max_batch
        } else {
            usize::MAX
        };
        let mut rest = self.by_seq.values().take(window);
        let mut batch: Vec<&StoredRecord> = Vec::new();
        for rec in rest.by_ref() {
            if self.eligible(rec, &mut met) {
                batch.push(rec);
                if batch.len() == max_batch {
                    break;
                }
            }
        }
        if batch.iter().any(|r| r.min_anonymity > 1) {
            // The cut at MAX_BATCH may leave a project short of a record's k.
            keep_met_peers(&mut batch);
            // Records without a hold only add peers: they cannot unmeet anyone.
            let room = max_batch - batch.len();
            batch.extend(rest.filter(|r| r.min_anonymity <= 1).take(room));
        }
        batch
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
        // The P-record has no peer: it is skipped and takes no place in the batch.
        assert_eq!(q.plan(200, &P).batch, vec!["r2", "r3", "r4", "r5"]);
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
    fn unmet_holds_ahead_never_block_or_delay_the_records_behind_them() {
        // MAX_BATCH (and more) held records first, each alone in its project: never met.
        let mut q = Queue::default();
        for s in 1..=10 {
            q.push(rec_in(&format!("lone{s}"), s, 100, 2, 600_000));
        }
        // Then three honest records: min_batch is reached, they go at once, all of them.
        for s in 11..=13 {
            q.push(rec_in("honest", s, 150, 1, 0));
        }
        let plan = q.plan(200, &P);
        assert_eq!(plan.batch, vec!["r11", "r12", "r13"]);
        assert!(plan.expired.is_empty());
        // One honest record alone: it waits maxWaitMs for its own sake, not the holds'.
        let mut q = Queue::default();
        for s in 1..=10 {
            q.push(rec_in(&format!("lone{s}"), s, 100, 50, 600_000));
        }
        q.push(rec_in("honest", 11, 150, 1, 0));
        let plan = q.plan(200, &P);
        assert!(plan.batch.is_empty());
        assert_eq!(plan.wake_at_ms, Some(1150));
        assert_eq!(q.plan(1150, &P).batch, vec!["r11"]);
    }

    #[test]
    fn an_unmet_hold_holds_back_its_own_project_for_at_most_max_wait() {
        let p = PlanParams {
            min_batch: 1,
            max_wait_ms: 1000,
            max_batch: 10,
        };
        let mut q = Queue::default();
        q.push(rec_in("P", 1, 100, 3, 20_000));
        q.push(rec_in("P", 2, 200, 1, 0));
        // Its only possible peer waits for a third P-record, at most maxWaitMs.
        let plan = q.plan(300, &p);
        assert!(plan.batch.is_empty());
        assert_eq!(plan.wake_at_ms, Some(1200));
        // Records of other projects do not wait for it.
        q.push(rec_in("Q", 3, 300, 1, 0));
        assert!(q.plan(300, &p).batch.is_empty(), "the P-record still waits");
        let mut other = Queue::default();
        other.push(rec_in("P", 1, 100, 3, 20_000));
        other.push(rec_in("Q", 3, 300, 1, 0));
        assert_eq!(other.plan(300, &p).batch, vec!["r3"]);
        // The third P-record meets the hold: all go.
        q.push(rec_in("P", 4, 400, 1, 0));
        assert_eq!(q.plan(400, &p).batch, vec!["r1", "r2", "r3", "r4"]);
        // Or maxWaitMs passes: the peers go without it.
        q.remove("r4");
        assert_eq!(q.plan(1200, &p).batch, vec!["r2", "r3"]);
    }

    #[test]
    fn a_cut_at_max_batch_drops_short_projects_and_fills_with_free_records() {
        // Project A's three k=3 records straddle the MAX_BATCH cut (4): the two inside cannot
        // go without the third; free records behind take their places.
        let mut q = Queue::default();
        q.push(rec_in("B", 1, 100, 1, 0));
        q.push(rec_in("B", 2, 100, 1, 0));
        q.push(rec_in("A", 3, 100, 3, 60_000));
        q.push(rec_in("A", 4, 100, 3, 60_000));
        q.push(rec_in("A", 5, 100, 3, 60_000));
        q.push(rec_in("C", 6, 100, 1, 0));
        q.push(rec_in("C", 7, 100, 1, 0));
        assert_eq!(q.plan(200, &P).batch, vec!["r1", "r2", "r6", "r7"]);
        for id in ["r1", "r2", "r6", "r7"] {
            q.remove(id);
        }
        // Now A's three are at the head: they go together.
        assert_eq!(q.plan(200, &P).batch, vec!["r3", "r4", "r5"]);
    }

    #[test]
    fn a_batch_thinned_below_a_hold_keeps_only_the_met_records() {
        // P's k=3 record lost one of its two peers (found on the ledger): it waits.
        let batch = vec![
            rec_in("P", 1, 100, 3, 60_000),
            rec_in("P", 2, 100, 1, 0),
            rec_in("Q", 3, 100, 1, 0),
        ];
        let (kept, short) = split_met(batch);
        let seqs = |v: &[StoredRecord]| v.iter().map(|r| r.seq).collect::<Vec<_>>();
        assert_eq!(seqs(&kept), vec![2, 3]);
        assert_eq!(seqs(&short), vec![1]);
        let (kept, short) = split_met(vec![rec(1, 0, 1, 0), rec(2, 0, 1, 0)]);
        assert_eq!((kept.len(), short.len()), (2, 0));
    }

    #[test]
    fn met_count_is_the_largest_m_with_m_records_of_k_at_most_m() {
        let counts = |unheld: usize, held: &[(u32, usize)]| ProjectCounts {
            unheld,
            held_k: held.iter().copied().collect(),
        };
        assert_eq!(met_count(&counts(0, &[])), 0);
        assert_eq!(met_count(&counts(2, &[])), 2);
        assert_eq!(met_count(&counts(0, &[(2, 1)])), 0);
        assert_eq!(met_count(&counts(1, &[(2, 1)])), 2);
        assert_eq!(met_count(&counts(1, &[(3, 1)])), 1);
        assert_eq!(met_count(&counts(0, &[(2, 2), (5, 1)])), 2);
        assert_eq!(met_count(&counts(2, &[(2, 2), (5, 1)])), 5);
        // Removing and re-adding keeps the counts exact.
        let mut q = Queue::default();
        q.push(rec_in("P", 1, 0, 2, 1000));
        q.push(rec_in("P", 2, 0, 1, 0));
        q.push(rec_in("P", 2, 0, 1, 0));
        assert_eq!(met_count(&q.projects["P"]), 2);
        q.remove("r2");
        assert_eq!(met_count(&q.projects["P"]), 0);
        q.remove("r1");
        assert!(q.projects.is_empty());
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
