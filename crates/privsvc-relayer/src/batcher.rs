//! Batch transactions, the effects of the batcher: the driver ([`crate::driver`]) decides when
//! to flush (with [`crate::planner`]); this module sends each batch as ONE `execute()` through
//! the serialized writer, follows it to its receipt (each step decided by
//! [`planner::on_tx`]) and applies a revert's verdict ([`planner::after_revert`]).
//!
//! A batch: records already on the ledger (owner holds an entity with the same envelope) are
//! marked written and left out; when the store cannot mark one, it goes back to the queue, never
//! into the batch (docs/PROTOCOL.md §7: a store error requeues a record, never writes it twice).
//! (Their txHash is read from the entity's `EntityCreated` log,
//! [`LedgerReader::creation_tx`](privsvc_ledger::LedgerReader::creation_tx); the zero hash only
//! when the node cannot tell.) The rest get a create (random 128-bit salt) and a transfer to their
//! owner, addressed by keys predicted from the relayer's entity nonce; tokens add one spends entity
//! per epoch.
//!
//! Order (docs/PROTOCOL.md §7): every transaction puts its records (creates with their transfers)
//! in a uniformly random order drawn from the OS RNG, and each spends entity lists its token ids in
//! another random order, so that whoever saw the submissions arrive (an OHTTP relay, an onlooker)
//! cannot map arrival order to ledger order. Keys are predicted in that order. A batch never holds
//! two records with the same envelope: a second copy (only possible with a database from before
//! envelope digests were unique) waits for the next batch, which finds it written. The signed
//! transaction is stored before it is broadcast; it is then rebroadcast unchanged until a receipt
//! appears (so at most one transaction with its nonce can land). A revert fails the records that
//! revert on their own and retries the rest.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::{Address, B256};
use privsvc_ledger::{
    predict_entity_keys, ArkivValue, AttributeSelect, BatchReceipt, LedgerError, LedgerReader,
    Operation, PreparedTx, QueryOptions, Select,
};
use rand::rngs::OsRng;
use rand::seq::SliceRandom;
use rand::Rng;
use tokio::sync::{mpsc, watch};

use crate::clock::Timeline;
use crate::config::Batching;
use crate::entities::{record_create, spends_creates};
use crate::identity::Identity;
use crate::lab_leaks::LabLeaks;
use crate::metrics::Metrics;
use crate::occupancy::Occupancy;
use crate::planner::{self, TxDecision, TxObservation};
use crate::queue::{PlanParams, Queue};
use crate::retry::ledger_error_kind;
use crate::store::{envelope_sha256, BatchMember, Store, StoredRecord, StoredState, WrittenInfo};
use crate::writer::{SerializedWriter, WriterTurn};

/// What the batcher publishes for the health record and the planner's interval rule.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchFigures {
    /// Batches written (persisted across restarts).
    pub batches: u64,
    /// Block of the last batch receipt (written or reverted).
    pub last_flush_block: Option<u64>,
}

/// Records known to be on the ledger whose written state the store has not recorded yet (it
/// could not write), as the batcher publishes them: their statuses answer `written` from here.
pub type Unrecorded = Arc<HashMap<String, WrittenInfo>>;

/// The settings the batcher uses.
#[derive(Debug, Clone)]
pub(crate) struct BatchSettings {
    /// `MIN_BATCH`, `MAX_WAIT_MS`, `MIN_INTERVAL_BLOCKS`, `MAX_BATCH`, `FLUSH_JITTER_MS`,
    /// `DECOYS_MAX`.
    pub(crate) batching: Batching,
    /// The ledger's block time (how often a wait for a block looks again).
    pub(crate) block_time: Duration,
    /// The lab's leaky settings (all off in a deployment).
    pub(crate) leaks: LabLeaks,
}

/// The batcher: the one owner of the queue, the revert attempts, the records on the ledger not
/// recorded yet, and the batch rows it writes through the serialized writer. It runs as one task
/// ([`crate::driver`]); records reach it from the intake over a channel, and it publishes its
/// figures and the unrecorded records through `watch` channels.
pub(crate) struct Batcher {
    /// The in-memory queue.
    pub(crate) queue: Queue,
    /// Records accepted by the intake, in order.
    pub(crate) incoming: mpsc::UnboundedReceiver<StoredRecord>,
    /// Batch attempts per record that ended in a revert without an identified offender.
    pub(crate) attempts: HashMap<String, u32>,
    /// Records on the ledger whose written state the store could not record yet.
    pub(crate) unrecorded: HashMap<String, WrittenInfo>,
    /// Publishes `unrecorded` (statuses and the health record read it).
    pub(crate) unrecorded_out: watch::Sender<Unrecorded>,
    /// Publishes the batch figures.
    pub(crate) figures: watch::Sender<BatchFigures>,
    /// Set to true once stored batches are reconciled (gates `SerializedWriter::execute`).
    pub(crate) reconciled: watch::Sender<bool>,
    /// The one serialized writer of the account.
    pub(crate) writer: SerializedWriter,
    /// The durable queue.
    pub(crate) store: Arc<Store>,
    /// The ledger reader (retried calls).
    pub(crate) ledger: Arc<dyn LedgerReader>,
    /// The relayer's account and chain (batch keys are predicted from them).
    pub(crate) identity: Arc<Identity>,
    /// Settings.
    pub(crate) settings: BatchSettings,
    /// Records held; freed here when written or failed.
    pub(crate) occupancy: Arc<Occupancy>,
    /// Counters.
    pub(crate) metrics: Arc<Metrics>,
    /// The relayer's time.
    pub(crate) time: Timeline,
}

/// How a batch ended.
pub(crate) enum Outcome {
    /// Mined and recorded.
    Written,
    Reverted(String),
    /// The transaction cannot fit in a block: split the batch.
    TooBig,
    /// Another transaction took its nonce: it can never land; its records are queued again.
    Superseded,
    NotSent,
    Shutdown,
}

/// Sleep `d`; true when `stop` turned true meanwhile.
pub(crate) async fn sleep_or_stop(d: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stop.changed() => true,
    }
}

/// Owners named in one lookup query: a flat `OR` of owner equalities (each an indexed lookup on
/// the node), well inside the query limits (64 predicates, 8 KiB, no nesting).
const OWNERS_PER_LOOKUP: usize = 32;

/// Lookup queries in flight at once.
const LOOKUPS_IN_FLIGHT: usize = 4;

/// The records already on the ledger (their owner holds an entity with their envelope), by id.
/// One query per 32 owners (`$owner = addr(a) OR $owner = addr(b) ...`), a
/// few at a time: a batch of 100 costs 4 queries, not 100.
pub async fn already_written(
    ledger: &dyn LedgerReader,
    metrics: &Metrics,
    records: &[StoredRecord],
) -> Result<HashMap<String, WrittenInfo>, LedgerError> {
    use futures::stream::{FuturesUnordered, StreamExt};
    // A sliding window, not chunks: one slow lookup does not hold up the others.
    let mut rest = records.chunks(OWNERS_PER_LOOKUP);
    let mut inflight = FuturesUnordered::new();
    for chunk in rest.by_ref().take(LOOKUPS_IN_FLIGHT) {
        inflight.push(written_on_ledger(ledger, metrics, chunk));
    }
    let mut found = HashMap::new();
    while let Some(hits) = inflight.next().await {
        found.extend(hits?);
        if let Some(chunk) = rest.next() {
            inflight.push(written_on_ledger(ledger, metrics, chunk));
        }
    }
    Ok(found)
}

/// The records of `records` (at most [`OWNERS_PER_LOOKUP`]) already on the ledger.
async fn written_on_ledger(
    ledger: &dyn LedgerReader,
    metrics: &Metrics,
    records: &[StoredRecord],
) -> Result<Vec<(String, WrittenInfo)>, LedgerError> {
    let Some(expr) = owners_query(records) else {
        return Ok(Vec::new());
    };
    let mut options = QueryOptions::new(Select {
        key: true,
        owner: true,
        creator: true,
        created_at: true,
        payload: true,
        ..Select::default()
    });
    options.limit = Some(200);
    let mut pending: Vec<&StoredRecord> = records.iter().collect();
    let mut hits = Vec::new();
    loop {
        let page = query_patiently(ledger, metrics, &expr, &options).await?;
        for e in &page.entities {
            // Every pending record this entity carries (twins share an owner and envelope).
            let (on_ledger, still): (Vec<_>, Vec<_>) = pending.into_iter().partition(|rec| {
                Some(rec.owner) == e.owner && e.payload.as_deref() == Some(rec.envelope.as_slice())
            });
            pending = still;
            let Some(first) = on_ledger.first() else {
                continue;
            };
            let block = e.created_at.unwrap_or(0);
            let batch_size = match e.creator {
                Some(c) => batch_size(ledger, c, block, first).await,
                None => 1,
            };
            let info = WrittenInfo {
                entity_key: e.key,
                tx_hash: creation_tx(ledger, metrics, e.key, block).await,
                block,
                batch_size,
            };
            hits.extend(on_ledger.iter().map(|rec| (rec.id.clone(), info.clone())));
        }
        match page.cursor {
            Some(c) if !pending.is_empty() => {
                options.cursor = Some(c);
                options.at_block = Some(page.block_number);
            }
            _ => return Ok(hits),
        }
    }
}

/// `$owner = addr(a) OR $owner = addr(b) ...` over the distinct owners of `records`.
fn owners_query(records: &[StoredRecord]) -> Option<String> {
    let mut owners: Vec<_> = records.iter().map(|r| r.owner).collect();
    owners.sort_unstable();
    owners.dedup();
    let terms: Vec<String> = owners
        .iter()
        .map(|o| format!("$owner = addr({o})"))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

/// Rounds of (already retried) calls an "already written?" lookup makes before the batch is
/// put back: one failed call is retried, it does not send the whole batch back to the queue.
const LOOKUP_ROUNDS: u32 = 3;

/// One query page, retried up to [`LOOKUP_ROUNDS`] times (each a retried call).
async fn query_patiently(
    ledger: &dyn LedgerReader,
    metrics: &Metrics,
    expr: &str,
    options: &QueryOptions,
) -> Result<privsvc_ledger::QueryPage, LedgerError> {
    let mut round = 0;
    loop {
        match ledger.query(expr, options).await {
            Err(e) if crate::retry::transient(&e) && round + 1 < LOOKUP_ROUNDS => {
                round += 1;
                metrics.ledger_error();
                tokio::time::sleep(crate::retry::backoff(round + 1)).await;
            }
            other => return other,
        }
    }
}

/// The transaction that created `key` in `block` (the entity does not carry it; the ledger's
/// `EntityCreated` log does). The zero hash when the node cannot tell (no log found, logs not
/// served, or an error): the record is on the ledger either way and must not be written again.
async fn creation_tx(ledger: &dyn LedgerReader, metrics: &Metrics, key: B256, block: u64) -> B256 {
    match ledger.creation_tx(key, block).await {
        Ok(Some(tx)) => tx,
        Ok(None) => B256::ZERO,
        Err(_) => {
            metrics.ledger_error();
            B256::ZERO
        }
    }
}

/// The `project` value of a record as the ledger stores it.
fn ledger_project(rec: &StoredRecord) -> Option<ArkivValue> {
    record_create(rec, 0)
        .ok()?
        .attributes
        .into_iter()
        .find(|a| a.name == privsvc_ledger::PROJECT_ATTRIBUTE)
        .map(|a| a.value)
}

/// Records of `rec`'s project in the batch `{block, creator}` (docs/PROTOCOL.md §7: batchSize
/// counts the record's peers); 1 when unknown.
async fn batch_size(
    ledger: &dyn LedgerReader,
    creator: alloy_primitives::Address,
    block: u64,
    rec: &StoredRecord,
) -> u64 {
    let expr = format!(
        "$creator = addr({creator}) AND $createdAt = u64({block}) AND NOT project = str('{}')",
        crate::entities::SYSTEM_PROJECT
    );
    let mut options = QueryOptions::new(Select {
        key: true,
        attributes: AttributeSelect::Named(vec![privsvc_ledger::PROJECT_ATTRIBUTE.into()]),
        ..Select::default()
    });
    options.limit = Some(200);
    let Some(project) = ledger_project(rec) else {
        return 1;
    };
    match ledger.query(&expr, &options).await {
        Ok(p) => p
            .entities
            .iter()
            .filter(|e| {
                e.attributes
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .any(|a| a.name == privsvc_ledger::PROJECT_ATTRIBUTE && a.value == project)
            })
            .count()
            .max(1) as u64,
        Err(_) => 1,
    }
}

/// How long before its envelope's bound (`(hour + 4) x 3600`, by the ledger's newest block) a
/// record may still be written: an hour, the protocol's margin, plus five minutes for the batch
/// to land.
pub const WRITE_MARGIN_SECS: u64 = 3_600 + 300;

/// The ledger's time: the timestamp of its newest block (unix seconds) and that block.
async fn ledger_time(ledger: &dyn LedgerReader) -> Result<(u64, u64), LedgerError> {
    let head = ledger.block_number().await?;
    let ts = ledger
        .block_timestamp(head)
        .await?
        .ok_or(LedgerError::Decode(privsvc_ledger::AnswerError::NoBlock(
            head,
        )))?;
    Ok((ts, head))
}

fn random_salt() -> u128 {
    rand::thread_rng().gen()
}

/// The operations of a batch starting at entity nonce `nonce`, with the members' keys. The
/// records go in a uniformly random order (OS RNG), never the order of `batch`; the members
/// (and their predicted keys) follow the order of the creates.
fn batch_ops(
    account: (u64, Address),
    shuffle: bool,
    batch: &[StoredRecord],
    decoys: &[StoredRecord],
    nonce: u64,
) -> Result<(Vec<Operation>, Vec<BatchMember>), (usize, String)> {
    // Decoys (`crate::decoys`) go among the records; only the records are members.
    let mut order: Vec<(&StoredRecord, bool)> = batch
        .iter()
        .map(|r| (r, false))
        .chain(decoys.iter().map(|d| (d, true)))
        .collect();
    if shuffle {
        order.shuffle(&mut OsRng);
    }
    let salts: Vec<u128> = order.iter().map(|_| random_salt()).collect();
    let (chain_id, address) = account;
    let keys = predict_entity_keys(chain_id, address, nonce, &salts);
    let mut ops = Vec::with_capacity(order.len() * 2 + 2);
    let mut members = Vec::with_capacity(batch.len());
    for (i, (rec, decoy)) in order.into_iter().enumerate() {
        let create = record_create(rec, salts[i]).map_err(|e| (i, e))?;
        ops.push(Operation::Create(create));
        ops.push(Operation::Transfer {
            key: keys[i],
            new_owner: rec.owner,
        });
        if decoy {
            continue;
        }
        members.push(BatchMember {
            record_id: rec.id.clone(),
            salt: salts[i],
            entity_key: keys[i],
        });
    }
    for c in spends_creates(batch.iter().chain(decoys), random_salt).map_err(|e| (0, e))? {
        ops.push(Operation::Create(c));
    }
    Ok((ops, members))
}

/// First wait before recording a mined batch again, doubled after each failure up to
/// [`RECORD_RETRY_MAX`].
const RECORD_RETRY_FIRST: Duration = Duration::from_millis(200);

/// Longest wait between two tries to record a mined batch.
const RECORD_RETRY_MAX: Duration = Duration::from_secs(5);

impl Batcher {
    /// The queue's batching parameters.
    pub(crate) fn plan_params(&self) -> PlanParams {
        let b = &self.settings.batching;
        PlanParams {
            min_batch: b.min_batch,
            max_wait_ms: u64::try_from(b.max_wait.as_millis()).unwrap_or(u64::MAX),
            max_batch: b.max_batch,
        }
    }

    /// The chain id and account batch keys are predicted for.
    fn account(&self) -> (u64, Address) {
        (self.identity.chain_id, self.identity.address)
    }

    /// Takes the records the intake accepted since the last look into the queue.
    pub(crate) fn take_incoming(&mut self) {
        while let Ok(rec) = self.incoming.try_recv() {
            self.queue.push(rec);
        }
    }

    /// Put records back into the queue.
    pub(crate) fn requeue(&mut self, records: Vec<StoredRecord>) {
        for r in records {
            self.queue.push(r);
        }
    }

    /// Remember that these records are on the ledger while the store cannot record it (and
    /// publish them: their statuses answer `written`).
    fn known_written(&mut self, records: impl IntoIterator<Item = (String, WrittenInfo)>) {
        self.unrecorded.extend(records);
        self.unrecorded_out
            .send_replace(Arc::new(self.unrecorded.clone()));
    }

    /// The store has recorded these records' written state.
    fn recorded(&mut self, ids: impl IntoIterator<Item = impl AsRef<str>>) {
        if self.unrecorded.is_empty() {
            return;
        }
        for id in ids {
            self.unrecorded.remove(id.as_ref());
        }
        self.unrecorded_out
            .send_replace(Arc::new(self.unrecorded.clone()));
    }

    /// Records that left the relayer (written or failed).
    fn finished(&self, n: usize) {
        self.occupancy.release(n);
    }

    pub(crate) async fn send_batch(
        &mut self,
        records: Vec<StoredRecord>,
        stop: &mut watch::Receiver<bool>,
    ) -> Outcome {
        // From here to its receipt, heartbeats give way to this batch.
        let _in_progress = self.writer.batch_in_progress();
        // Nothing damaged is written: each stored envelope against its digest and signature.
        let (records, hours) = match self.verified(records).await {
            Ok(checked) => checked,
            Err(records) => {
                self.requeue(records);
                return Outcome::NotSent;
            }
        };
        if records.is_empty() {
            return Outcome::Written;
        }
        let written = if self.settings.leaks.resubmissions_stored_again {
            // The lab's leaky setting: no envelope idempotence, on the ledger either.
            Ok(HashMap::new())
        } else {
            already_written(self.ledger.as_ref(), &self.metrics, &records).await
        };
        let written = match written {
            Ok(w) => w,
            Err(_) => {
                // Without the check a record could be written twice: retry later.
                self.metrics.ledger_error();
                self.requeue(records);
                return Outcome::NotSent;
            }
        };
        let mut batch = Vec::with_capacity(records.len());
        // Records on the ledger whose written state could not be stored: never in a batch.
        let mut unmarked = Vec::new();
        for rec in records {
            match written.get(&rec.id) {
                Some(info) => {
                    match self
                        .store
                        .set_record(
                            &rec.id,
                            StoredState::Written(info.clone()),
                            self.time.now_ms(),
                        )
                        .await
                    {
                        Ok(()) => {
                            self.recorded([&rec.id]);
                            self.metrics.written(1);
                            self.finished(1);
                        }
                        Err(e) => {
                            // It is on the ledger: writing it again would make a second entity.
                            // Back to the queue; the next batch finds it again and retries the
                            // store. Its status says written meanwhile.
                            tracing::error!(error = %e, "cannot mark a record found on the ledger as written; requeued");
                            self.known_written([(rec.id.clone(), info.clone())]);
                            unmarked.push(rec);
                        }
                    }
                }
                None => batch.push(rec),
            }
        }
        // The ledger's time decides whether each envelope is still far enough from its bound.
        let batch = match self.within_margin(batch, &hours).await {
            Ok(batch) => batch,
            Err(batch) => {
                self.metrics.ledger_error();
                self.requeue(batch);
                self.requeue(unmarked);
                return Outcome::NotSent;
            }
        };
        // One copy of an envelope per batch; a second copy waits for the next batch, whose
        // already-written check finds the first on the ledger.
        let mut seen = HashSet::with_capacity(batch.len());
        let (batch, twins): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .partition(|rec| seen.insert(envelope_sha256(&rec.envelope)));
        // Records left out above may leave a held record short of its k peers: it waits.
        let (batch, short) = crate::queue::split_met(batch);
        self.requeue(short);
        if batch.is_empty() && !unmarked.is_empty() {
            // Only store failures: the driver backs off before it tries again.
            self.requeue(twins);
            self.requeue(unmarked);
            return Outcome::NotSent;
        }
        let outcome = self.send_unique(batch, stop).await;
        self.requeue(twins);
        self.requeue(unmarked);
        outcome
    }

    /// The records whose stored copy checks out ([`crate::validate::verify_stored`], on a blocking
    /// thread: one signature recovery each) and their envelopes' hours; the others are failed with
    /// the reason, never written. `Err(records)` when the check could not run.
    async fn verified(
        &mut self,
        records: Vec<StoredRecord>,
    ) -> Result<(Vec<StoredRecord>, HashMap<String, u64>), Vec<StoredRecord>> {
        let copies = records.clone();
        // The lab's leaky setting stores a random digest (no deduplication): the check takes
        // the envelope's own.
        let random_digests = self.settings.leaks.resubmissions_stored_again;
        let verdicts = match tokio::task::spawn_blocking(move || {
            copies
                .into_iter()
                .map(|mut rec| {
                    if random_digests {
                        rec.envelope_digest = crate::store::envelope_sha256(&rec.envelope);
                    }
                    crate::validate::verify_stored(&rec)
                })
                .collect::<Vec<_>>()
        })
        .await
        {
            Ok(v) => v,
            Err(_) => return Err(records),
        };
        let mut good = Vec::with_capacity(records.len());
        let mut hours = HashMap::with_capacity(records.len());
        let mut damaged = 0usize;
        for (rec, verdict) in records.into_iter().zip(verdicts) {
            match verdict {
                Ok(hour) => {
                    hours.insert(rec.id.clone(), hour);
                    good.push(rec);
                }
                Err(why) => {
                    damaged += 1;
                    let error = format!(
                        "the relayer's stored copy of this record is damaged ({why}); it was not written"
                    );
                    self.fail_record(&rec.id, error).await;
                }
            }
        }
        if damaged > 0 {
            tracing::error!(
                batch_size = damaged,
                "stored records failed their envelope check (damaged store): failed, not written"
            );
        }
        Ok((good, hours))
    }

    /// The records of `batch` that may still be written by the ledger's time: at least
    /// [`WRITE_MARGIN_SECS`] before their envelope's bound. The others fail with the reason (the
    /// relayer's own clock may be wrong; the ledger's time decides). `Err(batch)` when the ledger's
    /// time cannot be read.
    async fn within_margin(
        &mut self,
        batch: Vec<StoredRecord>,
        hours: &HashMap<String, u64>,
    ) -> Result<Vec<StoredRecord>, Vec<StoredRecord>> {
        if batch.is_empty() {
            return Ok(batch);
        }
        let (ledger_now, head) = match ledger_time(self.ledger.as_ref()).await {
            Ok(t) => t,
            Err(_) => return Err(batch),
        };
        let mut keep = Vec::with_capacity(batch.len());
        let mut late = 0usize;
        for rec in batch {
            let hour = hours.get(&rec.id).copied().unwrap_or(0);
            let bound = privsvc_envelope::republish_deadline(hour);
            if ledger_now.saturating_add(WRITE_MARGIN_SECS) <= bound {
                keep.push(rec);
                continue;
            }
            late += 1;
            let error = format!(
                "too late to write: the envelope (hour {hour}) may appear on the ledger only before \
                 {bound} (unix seconds), and the ledger's newest block ({head}, at {ledger_now}) \
                 leaves less than the hour an honest relayer keeps before that bound; it was not \
                 written"
            );
            self.fail_record(&rec.id, error).await;
        }
        if late > 0 {
            tracing::warn!(
                batch_size = late,
                block = head,
                "records too close to their envelope's bound by the ledger's time: failed, not written"
            );
        }
        Ok(keep)
    }

    /// Send a batch whose records all have distinct envelopes.
    async fn send_unique(
        &mut self,
        mut batch: Vec<StoredRecord>,
        stop: &mut watch::Receiver<bool>,
    ) -> Outcome {
        if batch.is_empty() {
            return Outcome::Written;
        }
        // A handle of the writer's own: the turn borrows it, not the batcher.
        let writer = self.writer.clone();
        let mut turn = writer.turn().await;
        let mut outcome = self.build_and_send(&mut turn, &batch, stop).await;
        // docs/PROTOCOL.md §7: a batch too large for a block is split; the rest goes back to the queue.
        while matches!(outcome, Outcome::TooBig) && batch.len() > 1 {
            let rest = batch.split_off(batch.len() / 2);
            tracing::info!(
                batch_size = batch.len(),
                "batch split to fit the block gas limit"
            );
            self.requeue(rest);
            outcome = self.build_and_send(&mut turn, &batch, stop).await;
        }
        match outcome {
            Outcome::TooBig => {
                let reason = "the record alone exceeds the block gas limit";
                self.isolate(&turn, batch, reason).await;
                Outcome::Reverted(reason.into())
            }
            Outcome::Reverted(reason) => {
                self.isolate(&turn, batch, &reason).await;
                Outcome::Reverted(reason)
            }
            Outcome::NotSent | Outcome::Superseded => {
                // Queued again in the store (never stored as a batch, or dropped): the
                // already-written check of the next batch covers any that landed elsewhere.
                self.requeue(batch);
                Outcome::NotSent
            }
            other => other,
        }
    }

    async fn build_and_send(
        &mut self,
        turn: &mut WriterTurn<'_>,
        batch: &[StoredRecord],
        stop: &mut watch::Receiver<bool>,
    ) -> Outcome {
        // Resolve any transaction of unknown fate first: nothing is signed over a gap, and the
        // entity nonce read below then counts every create the account can still land.
        let tx_nonce = match turn.settle(Some(stop)).await {
            Ok(n) => n,
            Err(_) => {
                self.metrics.ledger_error();
                return if *stop.borrow() {
                    Outcome::Shutdown
                } else {
                    Outcome::NotSent
                };
            }
        };
        let nonce = match self.ledger.entity_nonce(self.identity.address).await {
            Ok(n) => n,
            Err(_) => {
                self.metrics.ledger_error();
                return Outcome::NotSent;
            }
        };
        let decoys = crate::decoys::for_batch(self.settings.batching.decoys_max, batch);
        let (ops, members) = match batch_ops(
            self.account(),
            !self.settings.leaks.arrival_order,
            batch,
            &decoys,
            nonce,
        ) {
            Ok(v) => v,
            Err((_, reason)) => return Outcome::Reverted(reason),
        };
        let tx = match turn.writer.prepare(&ops, tx_nonce).await {
            Ok(tx) => tx,
            Err(LedgerError::Reverted(revert)) => return Outcome::Reverted(revert.into_reason()),
            Err(LedgerError::ExceedsBlockGasLimit { .. }) => return Outcome::TooBig,
            Err(e) => {
                self.metrics.ledger_error();
                tracing::warn!(error = ledger_error_kind(&e), "batch preparation failed");
                return Outcome::NotSent;
            }
        };
        let batch_id = match self
            .store
            .save_batch(
                tx.nonce,
                tx.hash,
                tx.raw.to_vec(),
                members,
                self.time.now_ms(),
            )
            .await
        {
            Ok(id) => id,
            Err(e) => {
                tracing::error!(error = %e, "cannot store the batch before sending it");
                return Outcome::NotSent;
            }
        };
        let outcome = self
            .finish_batch(turn, batch_id, &tx, batch.len(), true, stop)
            .await;
        if matches!(outcome, Outcome::Written) {
            self.metrics.decoys_written(decoys.len());
        }
        outcome
    }

    /// Broadcast a stored batch transaction until its receipt appears, then record the result.
    /// `fresh`: signed just now at the settled nonce (not from the store). Each round's
    /// observation is decided by [`planner::on_tx`].
    pub(crate) async fn finish_batch(
        &mut self,
        turn: &WriterTurn<'_>,
        batch_id: i64,
        tx: &PreparedTx,
        size: usize,
        fresh: bool,
        stop: &mut watch::Receiver<bool>,
    ) -> Outcome {
        let mut attempt = 0u32;
        // A transaction just signed at the settled nonce has no receipt and no gap below it yet:
        // its first round goes straight to the broadcast.
        let mut fresh = fresh;
        let decision = loop {
            if *stop.borrow() {
                return Outcome::Shutdown;
            }
            let mut observed = None;
            if !std::mem::take(&mut fresh) {
                observed = Some(match turn.writer.receipt(tx.hash).await {
                    Ok(Some(r)) => receipt_observation(r),
                    other => {
                        if other.is_err() {
                            self.metrics.ledger_error();
                        }
                        let mined_nonce = turn.writer.mined_nonce().await.unwrap_or_else(|_| {
                            self.metrics.ledger_error();
                            None
                        });
                        TxObservation::Pending { mined_nonce }
                    }
                });
            }
            if let Some(obs) = observed {
                match planner::on_tx(tx.nonce, obs) {
                    TxDecision::Rebroadcast => {}
                    TxDecision::Replan => {
                        self.drop_batch(batch_id).await;
                        tracing::warn!(batch_size = size, "batch above a nonce gap re-planned");
                        return Outcome::Superseded;
                    }
                    TxDecision::Split => {
                        self.drop_batch(batch_id).await;
                        return Outcome::TooBig;
                    }
                    done => break done,
                }
            }
            if let Err(e) = turn.writer.broadcast(tx).await {
                self.metrics.ledger_error();
                let refusal = match &e {
                    // The node refuses it for good: it can never be included, so its nonce stays
                    // free and dropping it cannot lead to a double write.
                    LedgerError::ExceedsBlockGasLimit { .. } => Some(TxObservation::RefusedTooBig),
                    // Another transaction of the account has this nonce. Unless it is this one
                    // (mined meanwhile), this transaction can never land.
                    LedgerError::NonceTooLow { .. } => match turn.writer.receipt(tx.hash).await {
                        Ok(Some(r)) => Some(receipt_observation(r)),
                        Ok(None) => Some(TxObservation::NonceTaken),
                        Err(_) => {
                            self.metrics.ledger_error();
                            None
                        }
                    },
                    _ => None,
                };
                match refusal.map(|obs| planner::on_tx(tx.nonce, obs)) {
                    Some(TxDecision::Split) => {
                        self.drop_batch(batch_id).await;
                        return Outcome::TooBig;
                    }
                    Some(TxDecision::Replan) => {
                        self.drop_batch(batch_id).await;
                        tracing::warn!(batch_size = size, "stored batch superseded; requeued");
                        return Outcome::Superseded;
                    }
                    Some(TxDecision::Rebroadcast) | None => {}
                    Some(done) => break done,
                }
                tracing::warn!(
                    error = ledger_error_kind(&e),
                    attempt,
                    "batch broadcast failed"
                );
            }
            let wait = tokio::select! {
                r = turn.writer.wait_receipt(tx.hash, self.writer.round()) => r,
                _ = stop.changed() => return Outcome::Shutdown,
            };
            match wait {
                Ok(r) => break planner::on_tx(tx.nonce, receipt_observation(r)),
                Err(_) => {
                    self.metrics.ledger_error();
                    attempt += 1;
                    if sleep_or_stop(crate::retry::backoff(attempt.min(4)), stop).await {
                        return Outcome::Shutdown;
                    }
                }
            }
        };
        let now = self.time.now_ms();
        match decision {
            TxDecision::Written { block } => {
                if self.record_mined(batch_id, tx.hash, block, now, stop).await {
                    // Stopped before the store took it: it stays pending in the store and the
                    // next start's reconciliation marks it.
                    return Outcome::Shutdown;
                }
                self.figures.send_modify(|f| {
                    f.batches += 1;
                    f.last_flush_block = Some(block);
                });
                self.metrics.batch(size);
                self.metrics.written(size);
                self.finished(size);
                tracing::info!(
                    batch_size = size,
                    block,
                    tx = %tx.hash,
                    "batch written"
                );
                Outcome::Written
            }
            TxDecision::Reverted { reason, block } => {
                if let Err(e) = self.store.batch_dropped(batch_id, now).await {
                    tracing::error!(error = %e, "cannot record a reverted batch");
                }
                self.figures
                    .send_modify(|f| f.last_flush_block = Some(block));
                tracing::warn!(batch_size = size, "batch reverted");
                Outcome::Reverted(reason)
            }
            // `on_tx` ends the loop only with a receipt.
            _ => Outcome::NotSent,
        }
    }

    /// Record mined batch `batch_id` in the store, trying again until the store takes it (a full
    /// disk, an I/O error): no restart is needed. Meanwhile its records' statuses answer `written`
    /// (from the unrecorded records the batcher publishes), never `queued`. True when `stop` turned true first.
    async fn record_mined(
        &mut self,
        batch_id: i64,
        tx_hash: B256,
        block: u64,
        now: u64,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        let mut wait = RECORD_RETRY_FIRST;
        let mut members: Vec<String> = Vec::new();
        loop {
            match self
                .store
                .batch_written(batch_id, tx_hash, block, now)
                .await
            {
                Ok(()) => {
                    self.recorded(&members);
                    return false;
                }
                Err(e) => {
                    if members.is_empty() {
                        tracing::error!(error = %e, block, "cannot record a mined batch; trying again until the store takes it");
                        // Reads work on a full disk: the statuses say written meanwhile.
                        match self.store.mined_members(batch_id, tx_hash, block) {
                            Ok(written) => {
                                members = written.iter().map(|(id, _)| id.clone()).collect();
                                self.known_written(written);
                            }
                            Err(e) => {
                                tracing::error!(error = %e, "cannot read a mined batch's members")
                            }
                        }
                    }
                    if sleep_or_stop(wait, stop).await {
                        return true;
                    }
                    wait = (wait * 2).min(RECORD_RETRY_MAX);
                }
            }
        }
    }

    /// Record a batch that can never land as dropped (its records are queued again in the store).
    async fn drop_batch(&self, batch_id: i64) {
        if let Err(e) = self.store.batch_dropped(batch_id, self.time.now_ms()).await {
            tracing::error!(error = %e, "cannot record a dropped batch");
        }
    }

    /// Mark a record failed with `error` (best effort: a store error leaves it to recovery) and
    /// count it.
    pub(crate) async fn fail_record(&self, id: &str, error: String) {
        let _ = self
            .store
            .set_record(id, StoredState::Failed(error), self.time.now_ms())
            .await;
        self.metrics.failed(1);
        self.finished(1);
    }

    /// After a revert: fail the records that revert alone, retry the others.
    pub(crate) async fn isolate(
        &mut self,
        turn: &WriterTurn<'_>,
        batch: Vec<StoredRecord>,
        reason: &str,
    ) {
        let mut keep = Vec::new();
        let mut offenders = 0usize;
        for rec in batch {
            let verdict = match self.ledger.entity_nonce(self.identity.address).await {
                Ok(nonce) => match batch_ops(
                    self.account(),
                    !self.settings.leaks.arrival_order,
                    std::slice::from_ref(&rec),
                    &[],
                    nonce,
                ) {
                    Err((_, why)) => Some(why),
                    Ok((ops, _)) => match turn.writer.prepare(&ops, None).await {
                        Err(LedgerError::Reverted(why)) => Some(why.into_reason()),
                        _ => None,
                    },
                },
                Err(_) => None,
            };
            match verdict {
                Some(why) => {
                    offenders += 1;
                    let error = format!("the ledger refused this record: {why}");
                    self.fail_record(&rec.id, error).await;
                }
                None => keep.push(rec),
            }
        }
        if offenders == 0 && planner::stale_prediction(reason) {
            // No record reverts alone, and the ledger did not find an entity the batch transfers:
            // our own key prediction was stale (a create of the account landed first). Nothing is
            // wrong with the records; the try does not count against them.
            tracing::warn!(
                batch_size = keep.len(),
                "batch reverted on stale keys; requeued"
            );
        }
        let verdict = {
            planner::after_revert(reason, offenders, keep, &mut self.attempts, |r| {
                r.id.as_str()
            })
        };
        for rec in verdict.give_up {
            let error = format!("the batch reverted repeatedly: {reason}");
            self.fail_record(&rec.id, error).await;
        }
        let retry = verdict.retry;
        // The store has them as queued (never sent, or their batch was dropped).
        for rec in &retry {
            let _ = self
                .store
                .set_record(&rec.id, StoredState::Queued, self.time.now_ms())
                .await;
        }
        self.requeue(retry);
    }
}

/// The planner's view of a receipt.
fn receipt_observation(r: BatchReceipt) -> TxObservation {
    TxObservation::Receipt {
        success: r.success,
        block: r.block_number,
        revert_reason: r.revert_reason,
    }
}
