//! The session's scans (docs/PROTOCOL.md §8.4): on the session's own timer, never because the
//! app asked or a write landed, each scan brings the listing up to date, opens the tags of the
//! new records, and makes ONE fetch of `cover_batches + 1` batches of one closed window:
//!
//! - when a batch holding the user's unverified records has reached its fetch age (drawn once
//!   per batch, uniformly in [`crate::SessionSchedule::fetch_age_blocks`]), that batch and its
//!   covers (kept in the cache, so they never change);
//! - otherwise `cover_batches + 1` batches of a closed window drawn with the session's own
//!   randomness at an age drawn from the same range (the user's own batches neither preferred
//!   nor excluded): every scan of every user looks alike.
//!
//! A batch verified on this device is never fetched again (the scan cache keeps it).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use alloy_primitives::{Address, B256};
use privsvc_attributes::AttrValue;
use privsvc_ledger::{Entity, LedgerReader};
use privsvc_vault::{RecordRef, Tag, Vault};
use rand::seq::SliceRandom;
use rand::Rng;
use tokio::sync::Mutex;

use crate::cache::{EntityCache, ScanStats, TagClass};
use crate::covers::{covers_final, covers_of, idle_window, COVER_WINDOW_BLOCKS};
use crate::error::PrivsvcError;
use crate::read::{fetch_batches, BatchId};
use crate::record::MyRecord;
use crate::relayer_api::RelayerStatus;
use crate::rng::ClientRng;
use crate::scan_cache::ScanCache;
use crate::session::{Lister, Ticks};
use crate::verify::{verify_record, VerifyOptions};

/// What a scan needs, shared by the client and the session's scan task.
pub(crate) struct Scanner {
    pub(crate) vault: Arc<dyn Vault>,
    pub(crate) reader: Arc<dyn LedgerReader>,
    pub(crate) lister: Lister,
    pub(crate) cache: Arc<Mutex<EntityCache>>,
    pub(crate) relayers: Arc<std::sync::Mutex<Vec<RelayerStatus>>>,
    pub(crate) scan_cache: Option<ScanCache>,
    pub(crate) app: String,
    pub(crate) cover_batches: usize,
    pub(crate) trusted_relayers_only: bool,
    /// The fetch ages, in blocks (low end at least the cover window).
    pub(crate) fetch_age_blocks: (u64, u64),
    /// The randomness of scans (windows, ages, the order of a burst's reads).
    pub(crate) rng: ClientRng,
    /// Scans started and finished.
    pub(crate) ticks: Ticks,
}

/// One read of a scan's burst.
enum Read {
    /// A payload fetch of one batch.
    Batch(BatchId),
    /// A block's timestamp.
    Timestamp(u64),
}

/// What one read of a burst answered.
enum Answer {
    /// The batches' records, with payloads.
    Rows(Vec<Entity>),
    /// A block and its timestamp (`None`: no such block yet).
    Time(u64, Option<u64>),
}

/// The creators a copy check may trust: the trusted relayers when set, else the session's.
fn trusted_or_known(trusted: Option<&[Address]>, known: &[Address]) -> Vec<Address> {
    trusted.map_or_else(|| known.to_vec(), <[_]>::to_vec)
}

impl Scanner {
    /// The session's scans: one at a random moment of every `interval`, drawn from `timer`
    /// (a stream of its own, so that what a scan finds never moves the next one). Runs until
    /// aborted.
    pub(crate) async fn run(
        self: Arc<Self>,
        interval: (std::time::Duration, std::time::Duration),
        timer: ClientRng,
    ) {
        let mut next = privsvc_rt::Instant::now() + timer.between(interval);
        loop {
            timer.tick(&mut next, interval).await;
            if let Err(e) = self.tick().await {
                tracing::warn!(error = %e, "the session's scan failed");
            }
        }
    }

    /// The session's first scan, at its start: like [`Scanner::tick`], with the session's
    /// relayers contacted (`contact`) while its listing is on its way; the scan, which trusts
    /// their accounts, starts once both are done. A listing or contact that fails fails the
    /// start (the session has nothing to show or nowhere to write without it), while a scan
    /// that fails after them is only warned about (the next one runs on the schedule).
    pub(crate) async fn first_tick(
        &self,
        contact: impl std::future::Future<Output = Result<Vec<RelayerStatus>, PrivsvcError>>,
    ) -> Result<(), PrivsvcError> {
        self.ticks.starting();
        let result = async {
            let mut cache = self.cache.lock().await;
            let (contacted, listed) = futures::join!(contact, self.lister.update(&mut cache));
            let contacted = contacted?;
            listed?;
            if let Ok(mut relayers) = self.relayers.lock() {
                *relayers = contacted;
            }
            if let Err(e) = self.scan(&mut cache).await {
                tracing::warn!(error = %e, "the session's first scan failed; the next one runs on the schedule");
            }
            Ok(())
        }
        .await;
        self.ticks.ran();
        result
    }

    /// One scheduled scan: the listing brought up to date, then [`Scanner::scan`].
    pub(crate) async fn tick(&self) -> Result<ScanStats, PrivsvcError> {
        self.ticks.starting();
        let result = async {
            let mut cache = self.cache.lock().await;
            self.lister.update(&mut cache).await?;
            self.scan(&mut cache).await
        }
        .await;
        self.ticks.ran();
        result
    }

    /// The creators a copy check trusts to break a tie within one block (the write path's
    /// too): the session's relayers.
    pub(crate) fn copy_check_creators(&self) -> Vec<Address> {
        self.known_relayer_addresses()
    }

    /// Addresses of every known relayer, bad or not (the trusted creator set).
    fn known_relayer_addresses(&self) -> Vec<Address> {
        self.relayers
            .lock()
            .map(|r| r.iter().map(|r| r.address).collect())
            .unwrap_or_default()
    }

    /// The fetch age of a new batch of the user's, in blocks.
    fn draw_age(&self) -> u64 {
        let (low, high) = self.age_range();
        self.rng.with(|r| r.gen_range(low..=high))
    }

    fn age_range(&self) -> (u64, u64) {
        let low = self.fetch_age_blocks.0.max(COVER_WINDOW_BLOCKS);
        (low, self.fetch_age_blocks.1.max(low))
    }

    /// Fetches `wanted` with payloads and the timestamps of all their blocks: every read (one
    /// query per batch, one per block) sent at once, in one random order.
    async fn fetch_burst(
        &self,
        wanted: &[BatchId],
        block: u64,
    ) -> Result<(Vec<Entity>, HashMap<u64, u64>), PrivsvcError> {
        let mut batches = wanted.to_vec();
        self.rng.with(|r| batches.shuffle(r));
        // One query per batch: their pages are followed side by side, not one after the other
        // (a batch of a busy relayer is many pages of payloads).
        let mut reads: Vec<Read> = batches.into_iter().map(Read::Batch).collect();
        let blocks: BTreeSet<u64> = wanted.iter().map(|b| b.block).collect();
        reads.extend(blocks.into_iter().map(Read::Timestamp));
        self.rng.with(|r| reads.shuffle(r));
        // `try_join_all` polls the reads in order: each is sent in the shuffled order.
        let answers = futures::future::try_join_all(reads.into_iter().map(|read| async move {
            match read {
                Read::Batch(batch) => fetch_batches(
                    self.reader.as_ref(),
                    &self.lister.project,
                    &[batch],
                    Some(block),
                )
                .await
                .map(Answer::Rows),
                Read::Timestamp(b) => self
                    .reader
                    .block_timestamp(b)
                    .await
                    .map(|t| Answer::Time(b, t)),
            }
        }))
        .await?;
        let mut full = Vec::new();
        let mut times = HashMap::new();
        for answer in answers {
            match answer {
                Answer::Rows(rows) => full.extend(rows),
                Answer::Time(b, Some(t)) => {
                    times.insert(b, t);
                }
                Answer::Time(_, None) => {}
            }
        }
        Ok((full, times))
    }

    /// Opens the tags of the records listed since the last scan, drops copies, and fetches one
    /// group of batches (see the module documentation); verifies the user's records in it.
    pub(crate) async fn scan(&self, cache: &mut EntityCache) -> Result<ScanStats, PrivsvcError> {
        let trusted = self
            .trusted_relayers_only
            .then(|| self.known_relayer_addresses());
        let (listed, opened_by_listing) = cache.take_since_scan();
        let mut stats = ScanStats {
            listed,
            ..ScanStats::default()
        };
        let Some(head) = cache.block else {
            return Ok(stats);
        };
        stats.known = cache.known();

        // Open the tags the listing left unopened; classify those and the ones it opened to one
        // of the user's records.
        let fresh = cache.take_unopened();
        stats.tags_opened = opened_by_listing + fresh.len();
        let tags: Vec<Tag> = fresh.iter().map(|(_, t)| *t).collect();
        let refs = if tags.is_empty() {
            Vec::new()
        } else {
            self.vault.open_tags(&tags).await?
        };
        let opened: Vec<(B256, Option<RecordRef>)> = fresh
            .iter()
            .map(|(key, _)| *key)
            .zip(refs)
            .chain(cache.take_opened().into_iter().map(|(k, r)| (k, Some(r))))
            .collect();
        for (key, r) in &opened {
            let (key, r) = (key, *r);
            let verified_before = cache.mine.get(key).is_some_and(|m| m.verified);
            if let Some(e) = cache.entries.get_mut(key) {
                e.class = match r {
                    Some(r) if trusted.as_ref().is_none_or(|t| t.contains(&e.creator)) => {
                        if !verified_before {
                            cache.unverified.insert(*key, r);
                        }
                        TagClass::Mine(r)
                    }
                    _ => TagClass::Other,
                };
            }
        }

        // A record is (owner, envelope): a later entity with the owner and tag of one of the
        // user's is a copy (anyone can create one and transfer it to the owner). The earliest
        // is kept; copies are never fetched, so nobody learns who owns them by who fetches.
        cache.drop_copies(&trusted_or_known(
            trusted.as_deref(),
            &self.known_relayer_addresses(),
        ));

        // The user's batches with records not verified yet; each gets its fetch age once.
        let k = self.cover_batches;
        let pending: BTreeSet<BatchId> = cache
            .unverified
            .keys()
            .filter_map(|key| cache.entries.get(key).map(|e| e.batch()))
            .collect();
        for b in &pending {
            if !cache.fetch_due.contains_key(b) {
                let due = b.block.saturating_add(self.draw_age());
                cache.fetch_due.insert(*b, due);
            }
        }
        let ready: BTreeSet<BatchId> = pending
            .iter()
            .copied()
            .filter(|b| k == 0 || covers_final(*b, head))
            .filter(|b| cache.fetch_due.get(b).is_none_or(|due| head >= *due))
            .collect();
        let mut matched: HashMap<B256, RecordRef> = cache
            .unverified
            .iter()
            .filter(|(key, _)| {
                cache
                    .entries
                    .get(*key)
                    .is_some_and(|e| ready.contains(&e.batch()))
            })
            .map(|(key, r)| (*key, *r))
            .collect();
        stats.matched = matched.len();

        let mut covers: BTreeSet<BatchId> = BTreeSet::new();
        if ready.is_empty() {
            // Nothing of the user's is due: batches of one closed window of a random age,
            // drawn the same way for every user.
            let age = self.draw_age();
            let window = self
                .rng
                .with(|r| idle_window(&cache.batches, head, age, k + 1, r));
            covers.extend(window);
        } else {
            for b in &ready {
                let chosen = match cache.covers.get(b) {
                    Some(kept) => kept.clone(),
                    None => {
                        // Covers live as long as the user's record: a lifetime (expiry minus
                        // creation) at least the record's. By lifetime, not by expiry block: a
                        // cover created a few blocks before the user's batch with the same
                        // lifetime expires a few blocks earlier, and comparing expiry blocks
                        // would leave only newer covers, making the user's batch the oldest.
                        let lifetime = own_expiry(cache, b).saturating_sub(b.block);
                        let view: &EntityCache = cache;
                        let chosen = covers_of(
                            self.vault.as_ref(),
                            &view.batches,
                            &|c: &BatchId| {
                                view.batch_expires_at(c).saturating_sub(c.block) >= lifetime
                            },
                            *b,
                            &ready,
                            k,
                        )
                        .await?;
                        cache.covers.insert(*b, chosen.clone());
                        cache.records_changed();
                        chosen
                    }
                };
                covers.extend(chosen.into_iter().filter(|c| !ready.contains(c)));
            }
        }
        stats.cover_batches = covers.len();
        let wanted: Vec<BatchId> = ready.iter().copied().chain(covers).collect();
        stats.batches_fetched = wanted.len();
        // The batches and the timestamps of all their blocks (covers included), in one shuffled
        // burst: the RPC sees the same reads for the user's batches as for their covers.
        let (full, times) = if wanted.is_empty() {
            (Vec::new(), HashMap::new())
        } else {
            self.fetch_burst(&wanted, head).await?
        };
        for entity in full {
            let Some(record_ref) = matched.remove(&entity.key) else {
                continue;
            };
            cache.unverified.remove(&entity.key);
            let created = entity.created_at.and_then(|b| times.get(&b).copied());
            match self
                .open_record(&entity, record_ref, trusted.as_deref(), created)
                .await
            {
                Ok(record) => {
                    cache.mine.insert(entity.key, record);
                }
                Err(reason) => {
                    stats.rejected += 1;
                    tracing::warn!(entity = %entity.key, %reason, "ignoring a record whose tag opened but which does not verify");
                    cache.mine.remove(&entity.key);
                    if let Some(e) = cache.entries.get_mut(&entity.key) {
                        e.class = TagClass::Other;
                    }
                }
            }
        }
        for b in &ready {
            cache.verified_batches.insert(*b);
            cache.fetch_due.remove(b);
        }
        if !ready.is_empty() {
            cache.records_changed();
        }
        cache.settle_others();
        cache.scanned = true;
        cache.last_scan = Some(stats.clone());
        if let Some(store) = &self.scan_cache {
            store.save(cache).await;
        }
        Ok(stats)
    }

    /// Verifies and decrypts one of the user's records.
    async fn open_record(
        &self,
        entity: &Entity,
        record_ref: RecordRef,
        trusted: Option<&[Address]>,
        created_timestamp: Option<u64>,
    ) -> Result<MyRecord, String> {
        let owner = self
            .vault
            .address_of(&record_ref)
            .await
            .map_err(|e| e.to_string())?;
        // The scan read the creation block's time with the batch: without it, no verdict.
        if created_timestamp.is_none() {
            return Err(crate::verify::RejectReason::CreationTimeUnknown.to_string());
        }
        let v = verify_record(
            entity,
            &VerifyOptions {
                app: Some(&self.app),
                relayers: trusted,
                owner: Some(owner),
                created_timestamp,
            },
        )
        .map_err(|e| e.to_string())?;
        if v.attributes.get("project") != Some(&AttrValue::Str(self.lister.project.clone())) {
            return Err("the record's project attribute is not this project".into());
        }
        let stored = v.body.data.clone();
        let data = if v.body.enc {
            self.vault
                .decrypt(&record_ref, &stored)
                .await
                .map_err(|e| format!("cannot decrypt: {e}"))?
        } else {
            stored
        };
        Ok(MyRecord {
            key: v.key,
            entity_key: v.key,
            owner: v.owner,
            creator: v.creator,
            app: v.body.app.clone(),
            content_type: v.body.ct.clone(),
            data,
            encrypted: v.body.enc,
            attributes: v.attributes,
            created_at: v.created_at.unwrap_or_default(),
            expires_at: v.expires_at.unwrap_or_default(),
            exp_seconds: v.body.exp,
            envelope: v.envelope,
            record_ref,
            verified: true,
        })
    }
}

/// The latest expiry among the user's listed records in `batch`: its covers must live as long.
fn own_expiry(cache: &EntityCache, batch: &BatchId) -> u64 {
    cache
        .unverified
        .keys()
        .filter_map(|k| cache.entries.get(k))
        .filter(|e| e.batch() == *batch)
        .map(|e| e.expires_at)
        .max()
        .unwrap_or(0)
}
