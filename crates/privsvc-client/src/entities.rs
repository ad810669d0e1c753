//! `my_entities` (find, verify and decrypt the user's records) and `prove_ownership`.

use std::collections::{BTreeSet, HashMap};

use alloy_primitives::B256;
use privsvc_attributes::AttrValue;
use privsvc_ledger::Entity;
use privsvc_vault::{RecordRef, Tag};
use rand::seq::SliceRandom;

use crate::cache::{EntityCache, ScanStats, TagClass};
use crate::client::PrivateClient;
use crate::covers::{covers_final, covers_of, newest_window};
use crate::error::PrivsvcError;
use crate::proof::{sign_ownership_proof, OwnershipProof, ProofParams};
use crate::read::{fetch_batches, BatchId};
use crate::record::MyRecord;
use crate::verify::{verify_record, VerifyOptions};

/// Options of [`PrivateClient::my_entities`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntitiesQuery {
    /// Wait for the first tail (the session's incremental listing, every 15 to 45 s by
    /// default) that starts after the call to finish, then scan what it listed: everything on
    /// the ledger before the call is seen. The client never lists because the app asked: a listing
    /// right after a write would tell the RPC when the write landed.
    pub refresh: bool,
    /// Keep only records whose attributes have these values (filtered locally).
    pub where_: Vec<(String, AttrValue)>,
}

impl EntitiesQuery {
    /// Every record, from the cache when it is current.
    pub fn new() -> Self {
        Self::default()
    }

    /// Wait for the session's next tail, then scan what it listed (see
    /// [`EntitiesQuery::refresh`]).
    pub fn refresh(mut self) -> Self {
        self.refresh = true;
        self
    }

    /// Keep only records with attribute `name` equal to `value`.
    pub fn where_eq(mut self, name: impl Into<String>, value: impl Into<AttrValue>) -> Self {
        self.where_.push((name.into(), value.into()));
        self
    }
}

/// Parameters of [`PrivateClient::prove_ownership`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProveParams {
    /// The verifier's challenge.
    pub challenge: String,
    /// The verifier's name.
    pub verifier: String,
    /// Validity in seconds (default 300).
    pub ttl_seconds: Option<u64>,
}

/// The creators a copy check may trust: the trusted relayers when set, else the session's.
fn trusted_or_known(
    trusted: Option<&[alloy_primitives::Address]>,
    known: &[alloy_primitives::Address],
) -> Vec<alloy_primitives::Address> {
    trusted.map_or_else(|| known.to_vec(), <[_]>::to_vec)
}

/// One read of a scan's burst.
enum Read {
    /// A payload fetch of up to 16 batches.
    Batches(Vec<BatchId>),
    /// A block's timestamp.
    Timestamp(u64),
}

impl PrivateClient {
    /// Fetches `wanted` with payloads and the timestamps of all their blocks, every read in one
    /// random order.
    async fn fetch_burst(
        &self,
        project: &str,
        wanted: &[BatchId],
        block: u64,
    ) -> Result<(Vec<Entity>, HashMap<u64, u64>), PrivsvcError> {
        let mut batches = wanted.to_vec();
        self.scan_rng.with(|r| batches.shuffle(r));
        let mut reads: Vec<Read> = batches
            .chunks(crate::read::BATCHES_PER_QUERY)
            .map(|c| Read::Batches(c.to_vec()))
            .collect();
        let blocks: BTreeSet<u64> = wanted.iter().map(|b| b.block).collect();
        reads.extend(blocks.into_iter().map(Read::Timestamp));
        self.scan_rng.with(|r| reads.shuffle(r));
        let mut full = Vec::new();
        let mut times = HashMap::new();
        for read in reads {
            match read {
                Read::Batches(chunk) => {
                    full.extend(
                        fetch_batches(self.reader.as_ref(), project, &chunk, Some(block)).await?,
                    );
                }
                Read::Timestamp(b) => {
                    if let Some(t) = self.reader.block_timestamp(b).await? {
                        times.insert(b, t);
                    }
                }
            }
        }
        Ok((full, times))
    }

    /// The user's verified records of this project, newest first.
    ///
    /// Works on the session's listing (made at session start and kept up to date by the tail;
    /// with `refresh`, after the next tail): opens the tags of the records not seen before,
    /// drops copies, fetches the batches holding the user's new records once their cover
    /// window has closed, each with its `cover_batches` deterministic covers from that window
    /// (with nothing new, the group of the user's newest batch again, or batches of the newest
    /// window for a user with none), with the timestamps of all their blocks, in one shuffled
    /// order, verifies each of the user's records (owner = the vault's address for the ref,
    /// signature, app, attributes, lifetime, creation before (hour + 4) x 3600; with
    /// `trusted_relayers_only`, a known creator),
    /// decrypts encrypted payloads and filters `where_` locally. Results are cached; a call
    /// scans again only after a write in this session or with `refresh`.
    pub async fn my_entities(&self, query: &EntitiesQuery) -> Result<Vec<MyRecord>, PrivsvcError> {
        if query.refresh {
            self.next_tail().await;
        }
        let mut cache = self.cache.lock().await;
        if query.refresh || !cache.scanned || cache.stale {
            self.scan(&mut cache).await?;
        }
        let head = cache.block.unwrap_or_default();
        let mut out: Vec<MyRecord> = cache
            .mine
            .values()
            .filter(|r| r.expires_at > head)
            .filter(|r| {
                query
                    .where_
                    .iter()
                    .all(|(n, v)| r.attributes.get(n) == Some(v))
            })
            .cloned()
            .collect();
        out.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| b.entity_key.cmp(&a.entity_key))
        });
        Ok(out)
    }

    /// What the latest scan (by `my_entities`, `scan_new` or `prove_ownership`) listed, opened
    /// and fetched; `None` before the first scan.
    pub async fn last_scan(&self) -> Option<ScanStats> {
        self.cache.lock().await.last_scan.clone()
    }

    /// Scans the ledger for records not seen before and returns what it fetched.
    /// Waits for the session's next tail (see [`EntitiesQuery::refresh`]), then scans.
    pub async fn scan_new(&self) -> Result<ScanStats, PrivsvcError> {
        self.next_tail().await;
        let mut cache = self.cache.lock().await;
        self.scan(&mut cache).await
    }

    /// Waits until a tail that started after this call has listed (at most one tail interval
    /// and 30 s).
    async fn next_tail(&self) {
        // The longest wait for the next tail to start, plus time for its listing to answer
        // (a slow RPC; the tail itself gives up on a call after the reader's timeout).
        let bound = self
            .options
            .schedule
            .tail
            .1
            .saturating_add(std::time::Duration::from_secs(30));
        self.tail.next_started_after_now(bound).await;
    }

    async fn scan(&self, cache: &mut EntityCache) -> Result<ScanStats, PrivsvcError> {
        let project = self.project().to_string();
        let trusted = self
            .options
            .trusted_relayers_only
            .then(|| self.known_relayer_addresses());
        // No listing here: the session's tail lists on its own timer (a listing made when the
        // app asks, right after a write, would tell the RPC when the write landed).
        let mut stats = ScanStats {
            listed: cache.pending_count(),
            ..ScanStats::default()
        };
        let Some(block) = cache.block else {
            return Ok(stats);
        };
        stats.known = cache.known();

        // Open the tags of records not classified yet.
        let fresh = cache.take_unopened();
        stats.tags_opened = fresh.len();
        let tags: Vec<Tag> = fresh.iter().map(|(_, t)| *t).collect();
        let refs = if tags.is_empty() {
            Vec::new()
        } else {
            self.vault.open_tags(&tags).await?
        };
        for ((key, _), r) in fresh.iter().zip(refs) {
            if let Some(e) = cache.entries.get_mut(key) {
                e.class = match r {
                    Some(r) if trusted.as_ref().is_none_or(|t| t.contains(&e.creator)) => {
                        cache.unverified.insert(*key, r);
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

        // The user's records not verified yet, and their batches: only those whose covers are
        // final, 16 blocks after the batch (the others wait for a later scan, so that their
        // covers never change from one scan to the next).
        let k = self.options.cover_batches;
        let pending: BTreeSet<BatchId> = cache
            .unverified
            .keys()
            .filter_map(|key| cache.entries.get(key).map(|e| e.batch()))
            .collect();
        let mine: BTreeSet<BatchId> = pending
            .iter()
            .copied()
            .filter(|b| k == 0 || covers_final(*b, block))
            .collect();
        let mut matched: HashMap<B256, RecordRef> = cache
            .unverified
            .iter()
            .filter(|(key, _)| {
                cache
                    .entries
                    .get(*key)
                    .is_some_and(|e| mine.contains(&e.batch()))
            })
            .map(|(key, r)| (*key, *r))
            .collect();
        stats.matched = matched.len();

        // Covers: the same ones for a batch in every session; from the newest window when
        // there is no batch of the user's to fetch.
        let mut covers: BTreeSet<BatchId> = BTreeSet::new();
        if mine.is_empty() {
            // Nothing new of the user's: fetch again the group of the user's newest batch (the
            // batch and its covers, all fetched before), or, with none, the newest window's
            // batches. Never the newest batches when the user has some: the user's own latest
            // batch is often among them, and intersecting scans would find it.
            let newest_own = cache
                .mine
                .values()
                .filter(|r| {
                    cache.batches.contains_key(&BatchId {
                        block: r.created_at,
                        creator: r.creator,
                    })
                })
                .map(|r| BatchId {
                    block: r.created_at,
                    creator: r.creator,
                })
                .max();
            match newest_own {
                Some(own) => {
                    let group = BTreeSet::from([own]);
                    covers.extend(
                        covers_of(self.vault.as_ref(), &cache.batches, own, &group, k).await?,
                    );
                    covers.insert(own);
                }
                None => covers.extend(newest_window(&cache.batches, k, &pending)),
            }
        } else {
            for b in &mine {
                let chosen = covers_of(self.vault.as_ref(), &cache.batches, *b, &mine, k).await?;
                covers.extend(chosen);
            }
        }
        stats.cover_batches = covers.len();
        let wanted: Vec<BatchId> = mine.into_iter().chain(covers).collect();
        stats.batches_fetched = wanted.len();
        // The batches and the timestamps of all their blocks (covers included), in one shuffled
        // burst: the RPC sees the same reads for the user's batches as for their covers.
        let (full, times) = self.fetch_burst(&project, &wanted, block).await?;
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
                    if let Some(e) = cache.entries.get_mut(&entity.key) {
                        e.class = TagClass::Other;
                    }
                }
            }
        }
        cache.settle_others();
        cache.scanned = true;
        cache.stale = false;
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
        trusted: Option<&[alloy_primitives::Address]>,
        created_timestamp: Option<u64>,
    ) -> Result<MyRecord, String> {
        let owner = self
            .vault
            .address_of(&record_ref)
            .await
            .map_err(|e| e.to_string())?;
        let v = verify_record(
            entity,
            &VerifyOptions {
                app: Some(self.app()),
                relayers: trusted,
                owner: Some(owner),
                created_timestamp,
            },
        )
        .map_err(|e| e.to_string())?;
        if v.attributes.get("project") != Some(&AttrValue::Str(self.project().to_string())) {
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
        })
    }

    /// An ownership proof for one of the user's records (found in the cache, among the records
    /// written in this session, or by a scan). Fails with `UnknownRecord` for any other key.
    pub async fn prove_ownership(
        &self,
        entity_key: B256,
        params: &ProveParams,
    ) -> Result<OwnershipProof, PrivsvcError> {
        let mut record_ref = self.known_ref(entity_key).await;
        if record_ref.is_none() {
            // Perhaps written by another session since the last scan.
            self.scan_new().await?;
            record_ref = self.known_ref(entity_key).await;
        }
        let Some(record_ref) = record_ref else {
            return Err(PrivsvcError::UnknownRecord {
                entity_key: entity_key.to_string(),
            });
        };
        sign_ownership_proof(
            self.vault.as_ref(),
            &record_ref,
            &ProofParams {
                entity_key,
                challenge: params.challenge.clone(),
                verifier: params.verifier.clone(),
                ttl_seconds: params.ttl_seconds,
                chain_id: Some(self.chain_id),
                now: None,
            },
        )
        .await
    }

    async fn known_ref(&self, key: B256) -> Option<RecordRef> {
        let cache = self.cache.lock().await;
        cache
            .mine
            .get(&key)
            .map(|r| r.record_ref)
            .or_else(|| cache.written.get(&key).copied())
    }
}
