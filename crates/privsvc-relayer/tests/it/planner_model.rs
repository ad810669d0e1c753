//! Property test of the batcher's state machine ([`privsvc_relayer::testing::planner`]): random
//! interleavings of submissions, clock ticks, blocks, reverts, ledger faults (calls refused, and
//! broadcasts applied whose answer is lost), a node losing its pool, heartbeats and relayer
//! crashes with restarts, run against a model: an in-memory store (what survives a crash), a
//! simulated chain (nonces, a pool where the first transaction of a nonce wins, entity-nonce key
//! prediction, receipts) and a driver that applies the planner's actions the way
//! `driver.rs`, `batcher.rs`, `reconcile.rs` and `writer.rs` do.
//!
//! After every interleaving the ledger answers again and the model drains; then:
//! - no record is written twice, and every accepted record is either written exactly once or
//!   failed for a stated reason (a hold that expired, or at least three reverted batches);
//!   none is left behind (progress whenever the ledger answers);
//! - every written batch holds, for each of its records, at least minAnonymity records of
//!   that record's project;
//! - written batches are at least minIntervalBlocks apart.
//!
//! And at every step (docs/PROTOCOL.md §7, the planner): records with unmet holds from many
//! projects (each alone in its project, so never met) never keep an eligible record waiting.
//! Whatever they are, the batch planned is exactly the one planned for the same queue without them.

use std::collections::{BTreeMap, HashMap};

use alloy_primitives::Address;
use privsvc_relayer::testing::planner::{
    self, after_revert, Action, ChainView, TxDecision, TxObservation, MAX_REVERT_ATTEMPTS,
};
use privsvc_relayer::testing::StoredRecord;
use privsvc_relayer::testing::SETTLE_ROUNDS;
use privsvc_relayer::testing::{PlanParams, Queue};
use proptest::prelude::*;

/// A signed transaction of the relayer account.
#[derive(Debug, Clone)]
struct Tx {
    hash: u64,
    nonce: u64,
    /// Entity nonce its keys were predicted from (batches only).
    predicted: u64,
    /// Records it creates (empty: a heartbeat, one create).
    records: Vec<String>,
}

#[derive(Debug, Clone)]
struct Receipt {
    success: bool,
    block: u64,
    reason: Option<String>,
}

/// A batch that landed.
#[derive(Debug, Clone)]
struct Landed {
    block: u64,
    records: Vec<String>,
}

#[derive(Debug, Default)]
struct Chain {
    head: u64,
    /// The account's next nonce (mined transactions).
    mined_nonce: u64,
    /// Creates that landed (keys are predicted from it).
    entity_nonce: u64,
    /// Pending transactions by nonce (the first of a nonce wins).
    pool: BTreeMap<u64, Tx>,
    receipts: HashMap<u64, Receipt>,
    landed: Vec<Landed>,
    /// Times each record was written.
    written: HashMap<String, u32>,
    /// Reverted batches each record was in.
    reverts: HashMap<String, u32>,
    /// The next calls that fail.
    faults: u32,
    /// The next mined batch reverts.
    revert_next: bool,
}

impl Chain {
    /// One ledger call: false when it fails.
    fn answers(&mut self) -> bool {
        if self.faults > 0 {
            self.faults -= 1;
            false
        } else {
            true
        }
    }

    fn receipt(&mut self, hash: u64) -> Result<Option<Receipt>, ()> {
        if !self.answers() {
            return Err(());
        }
        Ok(self.receipts.get(&hash).cloned())
    }

    fn mined_nonce(&mut self) -> Result<u64, ()> {
        if self.answers() {
            Ok(self.mined_nonce)
        } else {
            Err(())
        }
    }

    /// `Err(None)`: failed; with an odd fault count the node took it although the answer was
    /// lost. `Err(Some(msg))`: refused.
    fn broadcast(&mut self, tx: &Tx) -> Result<(), Option<&'static str>> {
        let lost_answer = self.faults % 2 == 1;
        if !self.answers() {
            if lost_answer {
                let _ = self.take(tx);
            }
            return Err(None);
        }
        self.take(tx)
    }

    fn take(&mut self, tx: &Tx) -> Result<(), Option<&'static str>> {
        if self.receipts.contains_key(&tx.hash) {
            return Ok(());
        }
        if tx.nonce < self.mined_nonce {
            return Err(Some("nonce too low"));
        }
        match self.pool.get(&tx.nonce) {
            Some(p) if p.hash == tx.hash => Ok(()),
            Some(_) => Err(Some("replacement transaction underpriced")),
            None => {
                self.pool.insert(tx.nonce, tx.clone());
                Ok(())
            }
        }
    }

    /// Mine one block with every pending transaction that is next in nonce order.
    fn mine(&mut self) {
        self.head += 1;
        while let Some(tx) = self.pool.remove(&self.mined_nonce) {
            self.mined_nonce += 1;
            let receipt = if tx.records.is_empty() {
                self.entity_nonce += 1;
                Receipt {
                    success: true,
                    block: self.head,
                    reason: None,
                }
            } else if tx.predicted != self.entity_nonce || self.revert_next {
                let reason = if tx.predicted != self.entity_nonce {
                    "EntityNotFound"
                } else {
                    "boom"
                };
                self.revert_next = false;
                for r in &tx.records {
                    *self.reverts.entry(r.clone()).or_insert(0) += 1;
                }
                Receipt {
                    success: false,
                    block: self.head,
                    reason: Some(reason.into()),
                }
            } else {
                self.entity_nonce += tx.records.len() as u64;
                for r in &tx.records {
                    let n = self.written.entry(r.clone()).or_insert(0);
                    *n += 1;
                    assert_eq!(*n, 1, "record {r} written twice");
                }
                self.landed.push(Landed {
                    block: self.head,
                    records: tx.records.clone(),
                });
                Receipt {
                    success: true,
                    block: self.head,
                    reason: None,
                }
            };
            self.receipts.insert(tx.hash, receipt);
        }
        self.pool.retain(|n, _| *n >= self.mined_nonce);
    }
}

#[derive(Debug, Clone, PartialEq)]
enum RecState {
    Queued,
    Sending(u64),
    Written,
    Failed(String),
}

#[derive(Debug, Clone)]
struct StoredBatch {
    tx: Tx,
    pending: bool,
}

/// What survives a crash.
#[derive(Debug, Default)]
struct Store {
    records: BTreeMap<String, (StoredRecord, RecState)>,
    batches: BTreeMap<u64, StoredBatch>,
    last_flush_block: Option<u64>,
}

impl Store {
    fn set(&mut self, id: &str, state: RecState) {
        if let Some(r) = self.records.get_mut(id) {
            r.1 = state;
        }
    }

    /// A dropped batch's records are queued again.
    fn drop_batch(&mut self, id: u64) -> Vec<StoredRecord> {
        let b = self.batches.get_mut(&id).expect("batch");
        b.pending = false;
        let members = b.tx.records.clone();
        let mut back = Vec::new();
        for m in members {
            if let Some((rec, state)) = self.records.get_mut(&m) {
                if *state == RecState::Sending(id) {
                    *state = RecState::Queued;
                    back.push(rec.clone());
                }
            }
        }
        back
    }
}

/// A batch transaction followed to its receipt (holds the writer's turn).
#[derive(Debug)]
struct InFlight {
    batch_id: u64,
    fresh: bool,
}

/// The relayer: durable store plus what a crash loses.
struct Model {
    params: PlanParams,
    min_interval_blocks: u64,
    now: u64,
    seq: u64,
    next_hash: u64,
    chain: Chain,
    store: Store,
    // In memory.
    queue: Queue,
    attempts: HashMap<String, u32>,
    last_flush_block: Option<u64>,
    reconciled: bool,
    head_read: Option<u64>,
    outstanding: Option<Tx>,
    inflight: Option<InFlight>,
}

impl Model {
    fn new(params: PlanParams, min_interval_blocks: u64) -> Self {
        Model {
            params,
            min_interval_blocks,
            now: 1_000,
            seq: 0,
            next_hash: 1,
            chain: Chain::default(),
            store: Store::default(),
            queue: Queue::default(),
            attempts: HashMap::new(),
            last_flush_block: None,
            reconciled: false,
            head_read: None,
            outstanding: None,
            inflight: None,
        }
    }

    fn submit(&mut self, project: u8, k: u32, hold_ms: u64) {
        self.submit_in(format!("P{project}"), k, hold_ms);
    }

    /// A held record alone in a project of its own: its hold is never met.
    fn submit_lone(&mut self, k: u32, hold_ms: u64) {
        self.submit_in(format!("{LONE}{}", self.seq + 1), k.max(2), hold_ms);
    }

    fn submit_in(&mut self, project: String, k: u32, hold_ms: u64) {
        self.seq += 1;
        let rec = StoredRecord {
            id: format!("r{}", self.seq),
            seq: self.seq,
            app: "app".into(),
            project,
            envelope_digest: [0; 32],
            owner: Address::ZERO,
            envelope: self.seq.to_be_bytes().to_vec(),
            attributes: "{}".into(),
            exp_seconds: 3600,
            min_anonymity: k,
            max_hold_ms: if k > 1 { hold_ms } else { 0 },
            token: None,
            accepted_ms: self.now,
        };
        self.store
            .records
            .insert(rec.id.clone(), (rec.clone(), RecState::Queued));
        self.queue.push(rec);
    }

    /// kill -9 and start again on the same store.
    fn crash_and_restart(&mut self) {
        self.queue = Queue::default();
        for (rec, state) in self.store.records.values() {
            if *state == RecState::Queued {
                self.queue.push(rec.clone());
            }
        }
        self.attempts.clear();
        self.last_flush_block = self.store.last_flush_block;
        self.reconciled = false;
        self.head_read = None;
        self.outstanding = None;
        self.inflight = None;
    }

    fn requeue(&mut self, records: Vec<StoredRecord>) {
        for r in records {
            self.queue.push(r);
        }
    }

    /// The writer's settle: resolve the outstanding transaction, then the mined nonce.
    fn settle(&mut self) -> Result<u64, ()> {
        let mut rounds = 0;
        while let Some(tx) = self.outstanding.clone() {
            if rounds >= SETTLE_ROUNDS {
                self.outstanding = None;
                break;
            }
            rounds += 1;
            if let Ok(Some(_)) = self.chain.receipt(tx.hash) {
                self.outstanding = None;
                break;
            }
            match self.chain.mined_nonce() {
                Ok(m) if m > tx.nonce => {
                    self.outstanding = None;
                    break;
                }
                Err(()) => continue,
                Ok(_) => {}
            }
            let _ = self.chain.broadcast(&tx);
            if let Ok(Some(_)) = self.chain.receipt(tx.hash) {
                self.outstanding = None;
            }
        }
        self.chain.mined_nonce()
    }

    fn sign(&mut self, nonce: u64, predicted: u64, records: Vec<String>) -> Tx {
        self.next_hash += 1;
        Tx {
            hash: self.next_hash,
            nonce,
            predicted,
            records,
        }
    }

    /// A heartbeat through the serialized writer (only when no batch holds it).
    fn heartbeat(&mut self) {
        if self.inflight.is_some() || !self.reconciled {
            return;
        }
        let Ok(nonce) = self.settle() else { return };
        let tx = self.sign(nonce, 0, Vec::new());
        self.outstanding = Some(tx.clone());
        // Refused by the node: it cannot land.
        if let Err(Some(_)) = self.chain.broadcast(&tx) {
            self.outstanding = None;
        }
    }

    /// The planner's batch is the same with and without the records with unmet holds.
    fn assert_unmet_holds_block_nothing(&self) {
        let full = self.queue.plan(self.now, &self.params);
        if !full.expired.is_empty() {
            return;
        }
        let mut honest = Queue::default();
        for rec in self.queue.records() {
            if !rec.project.starts_with(LONE) {
                honest.push(rec.clone());
            }
        }
        let plain = honest.plan(self.now, &self.params);
        assert_eq!(
            full.batch, plain.batch,
            "records with unmet holds changed the batch at {}",
            self.now
        );
    }

    /// One iteration of the driver's loop (or one round of the batch it follows).
    fn step(&mut self) {
        if self.inflight.is_some() {
            self.follow();
            return;
        }
        self.assert_unmet_holds_block_nothing();
        let chain = ChainView {
            reconciled: self.reconciled,
            last_flush_block: self.last_flush_block,
            min_interval_blocks: self.min_interval_blocks,
            head: self.head_read.take(),
        };
        match planner::plan(&self.queue, self.now, &self.params, &chain) {
            Action::Reconcile => {
                let pending = self
                    .store
                    .batches
                    .iter()
                    .find(|(_, b)| b.pending)
                    .map(|(id, _)| *id);
                match pending {
                    Some(batch_id) => {
                        self.inflight = Some(InFlight {
                            batch_id,
                            fresh: false,
                        })
                    }
                    None => self.reconciled = true,
                }
            }
            Action::FailExpired(expired) => {
                for (id, k) in expired {
                    if self.queue.remove(&id).is_some() {
                        self.store
                            .set(&id, RecState::Failed(format!("hold expired (k {k})")));
                    }
                }
            }
            Action::ReadHead => {
                if self.chain.answers() {
                    self.head_read = Some(self.chain.head);
                }
            }
            Action::WaitForBlock | Action::Sleep(_) => {}
            Action::Flush(_) => {
                let batch = self.queue.plan(self.now, &self.params).batch;
                let records: Vec<StoredRecord> = batch
                    .iter()
                    .filter_map(|id| self.queue.remove(id))
                    .collect();
                self.send(records);
            }
        }
    }

    /// `send_batch` and `build_and_send`.
    fn send(&mut self, records: Vec<StoredRecord>) {
        // Already written? One lookup per record; any failure puts the batch back.
        let mut unwritten = Vec::new();
        for rec in &records {
            if !self.chain.answers() {
                self.requeue(records);
                return;
            }
            if self.chain.written.contains_key(&rec.id) {
                self.store.set(&rec.id, RecState::Written);
            } else {
                unwritten.push(rec.clone());
            }
        }
        if unwritten.is_empty() {
            return;
        }
        let Ok(nonce) = self.settle() else {
            return self.requeue(unwritten);
        };
        if !self.chain.answers() {
            return self.requeue(unwritten); // entity nonce
        }
        let predicted = self.chain.entity_nonce;
        if !self.chain.answers() {
            return self.requeue(unwritten); // prepare
        }
        let ids: Vec<String> = unwritten.iter().map(|r| r.id.clone()).collect();
        let tx = self.sign(nonce, predicted, ids.clone());
        let batch_id = tx.hash;
        self.store
            .batches
            .insert(batch_id, StoredBatch { tx, pending: true });
        for id in &ids {
            self.store.set(id, RecState::Sending(batch_id));
        }
        self.inflight = Some(InFlight {
            batch_id,
            fresh: true,
        });
    }

    /// One round of `finish_batch` (receipt, broadcast, one receipt check).
    fn follow(&mut self) {
        let InFlight { batch_id, fresh } = self.inflight.take().expect("in flight");
        let tx = self.store.batches[&batch_id].tx.clone();
        if !fresh {
            let obs = match self.chain.receipt(tx.hash) {
                Ok(Some(r)) => observation(r),
                _ => TxObservation::Pending {
                    mined_nonce: self.chain.mined_nonce().ok(),
                },
            };
            if self.decide(batch_id, &tx, obs) {
                return;
            }
        }
        if let Err(Some("nonce too low")) = self.chain.broadcast(&tx) {
            let obs = match self.chain.receipt(tx.hash) {
                Ok(Some(r)) => Some(observation(r)),
                Ok(None) => Some(TxObservation::NonceTaken),
                Err(()) => None,
            };
            if let Some(obs) = obs {
                if self.decide(batch_id, &tx, obs) {
                    return;
                }
            }
        }
        if let Ok(Some(r)) = self.chain.receipt(tx.hash) {
            if self.decide(batch_id, &tx, observation(r)) {
                return;
            }
        }
        self.inflight = Some(InFlight {
            batch_id,
            fresh: false,
        });
    }

    /// Apply the planner's decision; true when the batch is finished.
    fn decide(&mut self, batch_id: u64, tx: &Tx, obs: TxObservation) -> bool {
        match planner::on_tx(tx.nonce, obs) {
            TxDecision::Rebroadcast => false,
            TxDecision::Replan | TxDecision::Split => {
                let back = self.store.drop_batch(batch_id);
                self.requeue(back);
                true
            }
            TxDecision::Written { block } => {
                self.store
                    .batches
                    .get_mut(&batch_id)
                    .expect("batch")
                    .pending = false;
                for id in &tx.records {
                    self.store.set(id, RecState::Written);
                }
                self.store.last_flush_block = Some(block);
                self.last_flush_block = Some(block);
                true
            }
            TxDecision::Reverted { reason, block } => {
                let back = self.store.drop_batch(batch_id);
                self.last_flush_block = Some(block);
                // The model's records never revert alone: no offender.
                let verdict = after_revert(&reason, 0, back, &mut self.attempts, |r| r.id.as_str());
                for rec in verdict.give_up {
                    self.store.set(
                        &rec.id,
                        RecState::Failed(format!("the batch reverted repeatedly: {reason}")),
                    );
                }
                self.requeue(verdict.retry);
                true
            }
        }
    }

    fn all_settled(&self) -> bool {
        self.inflight.is_none()
            && self
                .store
                .records
                .values()
                .all(|(_, s)| matches!(s, RecState::Written | RecState::Failed(_)))
    }
}

fn observation(r: Receipt) -> TxObservation {
    TxObservation::Receipt {
        success: r.success,
        block: r.block,
        revert_reason: r.reason,
    }
}

/// Project prefix of the records whose holds are never met.
const LONE: &str = "lone";

#[derive(Debug, Clone)]
enum Op {
    Submit { project: u8, k: u32, hold_ms: u64 },
    SubmitLone { k: u32, hold_ms: u64 },
    Step,
    Tick(u64),
    Mine,
    Revert,
    Faults(u32),
    NodeLosesPool,
    Heartbeat,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..2, 1u32..=3, 500u64..4000)
            .prop_map(|(project, k, hold_ms)| Op::Submit { project, k, hold_ms }),
        3 => (2u32..=8, 500u64..20_000).prop_map(|(k, hold_ms)| Op::SubmitLone { k, hold_ms }),
        6 => Just(Op::Step),
        2 => (1u64..1500).prop_map(Op::Tick),
        3 => Just(Op::Mine),
        1 => Just(Op::Revert),
        1 => (1u32..12).prop_map(Op::Faults),
        1 => Just(Op::NodeLosesPool),
        1 => Just(Op::Heartbeat),
        1 => Just(Op::Crash),
    ]
}

fn run(params: PlanParams, min_interval_blocks: u64, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut m = Model::new(params, min_interval_blocks);
    for op in ops {
        match op {
            Op::Submit {
                project,
                k,
                hold_ms,
            } => m.submit(project, k, hold_ms),
            Op::SubmitLone { k, hold_ms } => m.submit_lone(k, hold_ms),
            Op::Step => m.step(),
            Op::Tick(ms) => m.now += ms,
            Op::Mine => m.chain.mine(),
            Op::Revert => m.chain.revert_next = true,
            Op::Faults(n) => m.chain.faults += n,
            Op::NodeLosesPool => m.chain.pool.clear(),
            Op::Heartbeat => m.heartbeat(),
            Op::Crash => m.crash_and_restart(),
        }
    }
    // The ledger answers again: everything must finish.
    m.chain.faults = 0;
    m.chain.revert_next = false;
    let mut rounds = 0;
    while !m.all_settled() {
        rounds += 1;
        prop_assert!(rounds < 5_000, "no progress although the ledger answers");
        for _ in 0..4 {
            m.step();
        }
        m.chain.mine();
        m.now += 250;
    }
    // No record lost or written twice.
    for (id, (rec, state)) in &m.store.records {
        let on_chain = m.chain.written.get(id).copied().unwrap_or(0);
        match state {
            RecState::Written => prop_assert_eq!(on_chain, 1, "{} marked written", id),
            RecState::Failed(why) => {
                prop_assert_eq!(on_chain, 0, "{} failed but is on the ledger", id);
                if why.starts_with("hold expired") {
                    prop_assert!(rec.min_anonymity > 1);
                    prop_assert!(m.now >= rec.accepted_ms + rec.max_hold_ms);
                } else {
                    let reverts = m.chain.reverts.get(id).copied().unwrap_or(0);
                    prop_assert!(reverts >= MAX_REVERT_ATTEMPTS, "{id}: {why}");
                }
            }
            other => prop_assert!(false, "{} left {:?}", id, other),
        }
    }
    // minAnonymity per project, minIntervalBlocks between written batches.
    let by_id: HashMap<&str, &StoredRecord> = m
        .store
        .records
        .values()
        .map(|(r, _)| (r.id.as_str(), r))
        .collect();
    for batch in &m.chain.landed {
        for id in &batch.records {
            let rec = by_id[id.as_str()];
            let peers = batch
                .records
                .iter()
                .filter(|o| by_id[o.as_str()].project == rec.project)
                .count();
            prop_assert!(
                peers >= rec.min_anonymity as usize,
                "{} (k {}) written with {} records of its project",
                id,
                rec.min_anonymity,
                peers
            );
        }
    }
    for pair in m.chain.landed.windows(2) {
        prop_assert!(
            pair[1].block >= pair[0].block + min_interval_blocks,
            "batches in blocks {} and {} (minIntervalBlocks {})",
            pair[0].block,
            pair[1].block,
            min_interval_blocks
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn no_loss_no_duplicate_k_and_interval_kept_under_any_interleaving(
        min_batch in 1usize..4,
        max_batch in 2usize..6,
        max_wait_ms in 0u64..2000,
        min_interval_blocks in 0u64..3,
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let params = PlanParams { min_batch, max_wait_ms, max_batch };
        run(params, min_interval_blocks, ops)?;
    }
}

/// A fixed interleaving: the node takes a heartbeat but its answer is lost (the heartbeat stays
/// outstanding), then a record arrives. The batch is signed only after the heartbeat is settled
/// (replaced at its nonce), so one of the two lands at that nonce; the record is written
/// exactly once and nothing stalls. (Mutating the planner, e.g. rebroadcasting instead of
/// re-planning a batch whose nonce was taken, makes this family of tests fail.)
#[test]
fn a_lost_heartbeat_answer_neither_duplicates_nor_stalls() {
    let params = PlanParams {
        min_batch: 1,
        max_wait_ms: 0,
        max_batch: 4,
    };
    let mut ops = vec![Op::Step]; // reconcile (nothing stored)
    ops.push(Op::Faults(1)); // odd: the heartbeat is taken, its answer lost
    ops.push(Op::Heartbeat);
    ops.push(Op::Submit {
        project: 0,
        k: 1,
        hold_ms: 0,
    });
    ops.extend([Op::Step, Op::Step, Op::Mine, Op::Step, Op::Step, Op::Mine]);
    run(params, 0, ops).expect("invariants hold");
}

/// A fixed interleaving: more held records than MAX_BATCH, each alone in its project (never
/// met, a long hold), then one honest record. The honest record is written at the next flush,
/// long before the holds expire (on the planner that took the oldest MAX_BATCH records and
/// dropped the unmet ones, nothing was written until the holds expired).
#[test]
fn unmet_holds_from_many_projects_never_delay_an_eligible_record() {
    let params = PlanParams {
        min_batch: 1,
        max_wait_ms: 0,
        max_batch: 4,
    };
    let mut m = Model::new(params, 0);
    m.step(); // reconcile (nothing stored)
    for _ in 0..10 {
        m.submit_lone(2, 600_000);
    }
    m.submit(0, 1, 0);
    let honest = format!("r{}", m.seq);
    for _ in 0..4 {
        m.step();
        m.chain.mine();
        m.now += 10;
    }
    assert_eq!(m.chain.written.get(&honest), Some(&1), "not written");
    assert_eq!(m.queue.len(), 10, "the held records stay queued");
    // Everything still ends: the holds expire and fail.
    run(
        params,
        0,
        (0..30)
            .map(|i| Op::SubmitLone {
                k: 2 + i % 5,
                hold_ms: 5_000,
            })
            .chain([
                Op::Submit {
                    project: 1,
                    k: 1,
                    hold_ms: 0,
                },
                Op::Step,
                Op::Step,
                Op::Mine,
            ])
            .collect(),
    )
    .expect("invariants hold");
}
