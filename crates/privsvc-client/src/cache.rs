//! What a client remembers between scans: the project's listing (kept up to date by incremental
//! listings), the user's records (verified ones, and the ones this device wrote, shown at once),
//! the batches this device verified and the covers it chose.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use alloy_primitives::map::B256Map;
use alloy_primitives::{Address, B256};
use privsvc_attributes::{AttrValue, Attributes};
#[cfg(test)]
use privsvc_ledger::Entity;
use privsvc_ledger::{ArkivValue, TAG_ATTRIBUTE};
use privsvc_vault::{tag_from_text, RecordRef, Tag};

use crate::read::{BatchId, PageRows};
use crate::record::MyRecord;

/// What one scan fetched (exposed for tests and benchmarks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Records listed by this scan at its pinned block: every live record of the project the
    /// first time, then only those created since the previous listing.
    pub listed: usize,
    /// Live records of the project the client knows after this scan.
    pub known: usize,
    /// Tags opened (records not seen before).
    pub tags_opened: usize,
    /// Records whose tag opened.
    pub matched: usize,
    /// Batches fetched with payloads, cover batches included.
    pub batches_fetched: usize,
    /// Of those, cover batches.
    pub cover_batches: usize,
    /// Matched records that failed verification or decryption.
    pub rejected: usize,
}

/// What the client knows of a listed record's tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TagClass {
    /// Not opened yet.
    Unopened,
    /// Not the user's (no tag, a tag that does not open, or a record that failed verification).
    Other,
    /// The tag opened to this ref.
    Mine(RecordRef),
}

/// One listed record, in compact form (a million of them must fit comfortably in memory).
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    /// Creator (the relayer).
    pub(crate) creator: Address,
    /// Creation block.
    pub(crate) created_at: u64,
    /// First block at which it is gone.
    pub(crate) expires_at: u64,
    /// Its tag, when it has a well-formed one.
    pub(crate) tag: Option<Tag>,
    /// Interned `(name, value)` ids of its other attributes (`project` and `tag` left out).
    pub(crate) attrs: Box<[u32]>,
    /// What the tag says.
    pub(crate) class: TagClass,
}

// A tag row keeps tags of the length the vault writes.
const _: () = assert!(privsvc_ledger::TAG_TEXT_LEN == privsvc_vault::TAG_TEXT_LEN);

impl Listed {
    /// The batch it belongs to.
    pub(crate) fn batch(&self) -> BatchId {
        BatchId {
            block: self.created_at,
            creator: self.creator,
        }
    }
}

/// Records that are not the user's, restored from a scan cache as counts: `count` records of
/// `batch` that expire at one block and carry the attribute pairs `attrs`. They need no key:
/// nothing is ever fetched, verified or looked up by key for them; they count in batch sizes
/// and the rarity check until they expire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settled {
    /// Their batch.
    pub(crate) batch: BatchId,
    /// Their interned attribute pairs (sorted).
    pub(crate) attrs: Box<[u32]>,
    /// How many.
    pub(crate) count: u32,
}

/// What a listing knew of its records' tags, for a listing of the same project from the start
/// ([`EntityCache::known_classes`]): it need not open them again.
#[derive(Debug, Default)]
pub(crate) struct KnownClasses {
    /// The records whose tag opened to one of the user's.
    mine: HashMap<B256, RecordRef>,
    /// Listed records whose tag was not opened yet.
    unopened: std::collections::HashSet<B256>,
    /// The block of that listing: a record created after it was not listed then.
    block: Option<u64>,
}

/// What [`KnownClasses`] says of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KnownClass {
    /// Its tag opened to this reference.
    Mine(RecordRef),
    /// Listed before, and its tag did not open (or it has none).
    Other,
    /// Not listed before, or its tag was not opened: open it.
    Unknown,
}

impl KnownClasses {
    /// What is known of the record `key` created at block `created_at`.
    pub(crate) fn class_of(&self, key: &B256, created_at: u64) -> KnownClass {
        if let Some(r) = self.mine.get(key) {
            return KnownClass::Mine(*r);
        }
        match self.block {
            Some(b) if created_at <= b && !self.unopened.contains(key) => KnownClass::Other,
            _ => KnownClass::Unknown,
        }
    }
}

/// Records seen so far and the listing they come from.
#[derive(Debug, Default)]
pub(crate) struct EntityCache {
    /// The block of the last listing (`None`: never listed).
    pub(crate) block: Option<u64>,
    /// Whether the listing carries every attribute (needed by the rarity check) or only tags.
    pub(crate) with_attributes: bool,
    /// The project's live records at `block` (a hasher made for 32-byte keys: a first listing
    /// of a large app inserts a million of them).
    pub(crate) entries: B256Map<Listed>,
    /// Records per batch among `entries` (the project's records that relayer created in that
    /// block): the batch sizes the client reports.
    pub(crate) batches: BTreeMap<BatchId, u32>,
    /// Interned `(name, value)` pairs of the listed attributes (by name, then value, so that a
    /// lookup allocates nothing).
    interned: HashMap<String, HashMap<AttrValue, u32>>,
    /// How many pairs are interned.
    interned_count: u32,
    /// Listed keys by expiry block (so that dropping the expired costs what expired).
    expiry: BTreeMap<u64, Vec<B256>>,
    /// Records not the user's restored from a scan cache, as counts, by expiry block.
    pub(crate) settled: BTreeMap<u64, Vec<Settled>>,
    /// How many records `settled` counts.
    settled_count: usize,
    /// Keys listed since the last tag opening, their tags not opened yet.
    pending: Vec<B256>,
    /// Keys listed since the last scan whose tag the listing opened to one of the user's
    /// records: the scan classifies them (trusted creators, copies).
    opened: Vec<(B256, RecordRef)>,
    /// Records listed since the last scan, and how many of their tags the listing opened.
    since_scan: (usize, usize),
    /// Records of the listing under way known not to be the user's, as counts by batch, expiry
    /// block and attribute pairs: they join `settled` when the listing finishes, and are
    /// forgotten when it fails (the next listing names them again).
    settling: HashMap<(BatchId, u64, Box<[u32]>), u32>,
    /// The user's listed records (tag opened) not verified yet.
    pub(crate) unverified: HashMap<B256, RecordRef>,
    /// A full scan (listing, tags, fetch) has run.
    pub(crate) scanned: bool,
    /// The user's records: verified ones, and the ones written on this device (shown at once,
    /// `verified: false` until a scan verifies them).
    pub(crate) mine: HashMap<B256, MyRecord>,
    /// Batches this device fetched and verified the user's records of: never fetched again.
    pub(crate) verified_batches: BTreeSet<BatchId>,
    /// The covers chosen for each of the user's batches (kept, so that they never change).
    pub(crate) covers: BTreeMap<BatchId, Vec<BatchId>>,
    /// The latest expiry among each batch's listed records: covers must live as long as the
    /// user's record.
    pub(crate) batch_expiry: BTreeMap<BatchId, u64>,
    /// The block from which each of the user's pending batches may be fetched (its fetch age,
    /// drawn once).
    pub(crate) fetch_due: BTreeMap<BatchId, u64>,
    /// The timestamp (Unix seconds) of the newest block the session read, and when (on the
    /// session's monotonic clock) it was read: the envelope's `hour` comes from it, not from the
    /// device clock.
    pub(crate) head_time: Option<(u64, privsvc_rt::Instant)>,
    /// Counts the changes to `mine`, `verified_batches` and `covers` (the scan cache saves
    /// when it moved).
    pub(crate) records_generation: u64,
    /// What the latest scan did.
    pub(crate) last_scan: Option<ScanStats>,
}

impl EntityCache {
    /// What the listing knows of its records' tags: the records whose tag opened to one of the
    /// user's (the copies dropped are not among them), those not opened yet, and its block.
    pub(crate) fn known_classes(&self) -> KnownClasses {
        let mut known = KnownClasses {
            block: self.block,
            ..KnownClasses::default()
        };
        known.mine.extend(self.opened.iter().copied());
        for (key, e) in &self.entries {
            match e.class {
                TagClass::Mine(r) => {
                    known.mine.insert(*key, r);
                }
                TagClass::Unopened if !known.mine.contains_key(key) => {
                    known.unopened.insert(*key);
                }
                _ => {}
            }
        }
        known
    }

    /// An empty cache for a listing with every attribute (the session's attribute listing).
    pub(crate) fn for_attribute_listing() -> Self {
        EntityCache {
            with_attributes: true,
            ..EntityCache::default()
        }
    }

    /// Puts `listing` in place of this cache's listing: a listing from the start made beside
    /// this cache (the session's attribute listing), while the session kept using this one.
    /// Keeps, as they are now, the user's records, what the device verified, the covers and
    /// what the latest scan did (a new listing does not undo a scan), and the newer chain time.
    pub(crate) fn adopt_listing(&mut self, listing: EntityCache) {
        let old = std::mem::replace(self, listing);
        self.mine = old.mine;
        self.verified_batches = old.verified_batches;
        self.covers = old.covers;
        self.records_generation = old.records_generation;
        self.last_scan = old.last_scan;
        // On a tie, the adopted listing's (`max_by_key` keeps the last of equal ones).
        self.head_time = old
            .head_time
            .into_iter()
            .chain(self.head_time)
            .max_by_key(|t| t.1);
    }

    /// The chain's time now (Unix seconds): the newest block's timestamp the session read, plus
    /// the time elapsed since; `None` before the first read.
    pub(crate) fn chain_now(&self) -> Option<u64> {
        let (t, read_at) = self.head_time?;
        Some(t.saturating_add(read_at.elapsed().as_secs()))
    }

    /// Adds a record this device wrote: shown at once, unverified until a scan verifies it.
    /// A record already known (verified by a scan) is left as it is.
    pub(crate) fn add_own_write(&mut self, record: MyRecord) {
        if let std::collections::hash_map::Entry::Vacant(v) = self.mine.entry(record.entity_key) {
            v.insert(record);
            self.records_changed();
        }
    }

    /// Notes a change to the user's records, the verified batches or the covers.
    pub(crate) fn records_changed(&mut self) {
        self.records_generation = self.records_generation.wrapping_add(1);
    }

    /// Merges a listing made at `block` of the records created after the previous listing, and
    /// drops every record expired at `block`. Returns how many records were added.
    #[cfg(test)]
    pub(crate) fn merge(&mut self, block: u64, listed: Vec<Entity>) -> usize {
        let added = self.add(listed);
        self.finish_listing(block);
        added
    }

    /// Ends a listing made at `block` whose pages went to [`EntityCache::add`]: drops every
    /// record expired at `block` and remembers the block.
    pub(crate) fn finish_listing(&mut self, block: u64) {
        self.flush_settling();
        self.drop_expired(block);
        self.block = Some(self.block.map_or(block, |b| b.max(block)));
    }

    /// Adds one page of a listing, every tag left for the next scan to open (records already
    /// known are skipped). Returns how many records were added.
    #[cfg(test)]
    pub(crate) fn add(&mut self, listed: Vec<Entity>) -> usize {
        let rows = self.stage(PageRows::Entities(listed));
        self.place(rows, None)
    }

    /// The compact rows of one page of a listing, not placed yet: records already listed, and
    /// those without a creator or a creation block, are left out; attribute pairs are interned.
    pub(crate) fn stage(&mut self, listed: PageRows) -> Vec<(B256, Listed)> {
        match listed {
            PageRows::Tags(rows) => rows
                .into_iter()
                .filter_map(|r| {
                    let tag = r.tag_text().and_then(tag_from_text);
                    self.compact(
                        r.key,
                        r.creator,
                        r.created_at,
                        r.expires_at,
                        tag,
                        Vec::new(),
                    )
                })
                .collect(),
            PageRows::Entities(entities) => {
                let mut rows = Vec::with_capacity(entities.len());
                for e in entities {
                    let mut tag = None;
                    let mut attrs = Vec::new();
                    for a in e.attributes.into_iter().flatten() {
                        if a.name == TAG_ATTRIBUTE {
                            tag = match &a.value {
                                ArkivValue::Str(s) => tag_from_text(s),
                                _ => None,
                            };
                        } else if a.name != "project" {
                            if let Some(v) = attr_value(a.value) {
                                attrs.push(self.intern(a.name, v));
                            }
                        }
                    }
                    rows.extend(self.compact(
                        e.key,
                        e.creator,
                        e.created_at,
                        e.expires_at,
                        tag,
                        attrs,
                    ));
                }
                rows
            }
        }
    }

    /// One listed record as a compact row; `None` when it is listed already or has no creator
    /// or creation block.
    fn compact(
        &self,
        key: B256,
        creator: Option<Address>,
        created_at: Option<u64>,
        expires_at: Option<u64>,
        tag: Option<Tag>,
        mut attrs: Vec<u32>,
    ) -> Option<(B256, Listed)> {
        let (Some(creator), Some(created_at)) = (creator, created_at) else {
            return None;
        };
        if self.entries.contains_key(&key) {
            return None;
        }
        attrs.sort_unstable();
        Some((
            key,
            Listed {
                creator,
                created_at,
                expires_at: expires_at.unwrap_or(u64::MAX),
                tag,
                attrs: attrs.into_boxed_slice(),
                class: TagClass::Unopened,
            },
        ))
    }

    /// Places rows from [`EntityCache::stage`]. With `opened` (one per row, in order: what its
    /// tag opened to, `None` for no tag or a tag that did not open), a row that is not the
    /// user's becomes a count at once (a listing of a million records never holds a million
    /// rows) and one whose tag opened waits for the next scan to classify it; without it every
    /// row waits for the next scan to open its tag. Returns how many rows were placed.
    pub(crate) fn place(
        &mut self,
        rows: Vec<(B256, Listed)>,
        opened: Option<&[Option<RecordRef>]>,
    ) -> usize {
        let placed = rows.len();
        self.since_scan.0 += placed;
        for (i, (key, entry)) in rows.into_iter().enumerate() {
            match opened.map(|o| o.get(i).copied().flatten()) {
                Some(None) => {
                    *self
                        .settling
                        .entry((entry.batch(), entry.expires_at, entry.attrs))
                        .or_default() += 1;
                    continue;
                }
                Some(Some(r)) => self.opened.push((key, r)),
                None => self.pending.push(key),
            }
            *self.batches.entry(entry.batch()).or_default() += 1;
            self.note_expiry(entry.batch(), entry.expires_at);
            self.expiry.entry(entry.expires_at).or_default().push(key);
            self.entries.insert(key, entry);
        }
        placed
    }

    /// Moves the counts of the listing just finished into the settled counts.
    fn flush_settling(&mut self) {
        for ((batch, expires_at, attrs), count) in std::mem::take(&mut self.settling) {
            self.settle(
                expires_at,
                Settled {
                    batch,
                    attrs,
                    count,
                },
            );
        }
    }

    /// Forgets the counts of a listing that failed: the next listing names those records again.
    pub(crate) fn abandon_listing(&mut self) {
        self.settling.clear();
    }

    /// The keys whose tag the listing opened since the last scan, with what they opened to.
    pub(crate) fn take_opened(&mut self) -> Vec<(B256, RecordRef)> {
        std::mem::take(&mut self.opened)
    }

    /// Notes that the listing had the vault open `n` tags.
    pub(crate) fn note_tags_opened(&mut self, n: usize) {
        self.since_scan.1 += n;
    }

    /// Records listed since the last scan, and how many of their tags the listing opened; both
    /// start again from zero.
    pub(crate) fn take_since_scan(&mut self) -> (usize, usize) {
        std::mem::take(&mut self.since_scan)
    }

    /// Turns the listed records known not to be the user's into counts (their keys, owners and
    /// tags are never needed again): a scan does it once it opened their tags, so that a
    /// session's memory is what the user's records and the counts take, not a million rows.
    pub(crate) fn settle_others(&mut self) {
        let others: Vec<B256> = self
            .entries
            .iter()
            .filter(|(_, e)| e.class == TagClass::Other)
            .map(|(k, _)| *k)
            .collect();
        if others.is_empty() {
            return;
        }
        let mut groups: HashMap<(BatchId, u64, Box<[u32]>), u32> = HashMap::new();
        for key in others {
            if let Some(e) = self.entries.remove(&key) {
                *groups
                    .entry((e.batch(), e.expires_at, e.attrs))
                    .or_default() += 1;
            }
        }
        for ((batch, expires_at, attrs), count) in groups {
            // Counted in `batches` already, as listed records.
            self.settled_count += count as usize;
            self.settled.entry(expires_at).or_default().push(Settled {
                batch,
                attrs,
                count,
            });
        }
        let mut expiry: BTreeMap<u64, Vec<B256>> = BTreeMap::new();
        for (key, e) in &self.entries {
            expiry.entry(e.expires_at).or_default().push(*key);
        }
        self.expiry = expiry;
        self.entries.shrink_to_fit();
    }

    /// Live records known: listed ones and settled counts.
    pub(crate) fn known(&self) -> usize {
        self.entries.len() + self.settled_count
    }

    /// Remembers that `batch` lives at least until `expires_at`.
    fn note_expiry(&mut self, batch: BatchId, expires_at: u64) {
        let e = self.batch_expiry.entry(batch).or_default();
        *e = (*e).max(expires_at);
    }

    /// The latest expiry among `batch`'s listed records (0 when none is listed).
    pub(crate) fn batch_expires_at(&self, batch: &BatchId) -> u64 {
        self.batch_expiry.get(batch).copied().unwrap_or(0)
    }

    /// Adds `group` of records that expire at `expires_at` (from a scan cache).
    pub(crate) fn settle(&mut self, expires_at: u64, group: Settled) {
        self.note_expiry(group.batch, expires_at);
        *self.batches.entry(group.batch).or_default() += group.count;
        self.settled_count += group.count as usize;
        self.settled.entry(expires_at).or_default().push(group);
    }

    /// Drops the records no longer live at `block`.
    fn drop_expired(&mut self, block: u64) {
        let live = self.settled.split_off(&block.saturating_add(1));
        for group in std::mem::replace(&mut self.settled, live)
            .into_values()
            .flatten()
        {
            self.settled_count = self.settled_count.saturating_sub(group.count as usize);
            if let Some(n) = self.batches.get_mut(&group.batch) {
                *n = n.saturating_sub(group.count);
                if *n == 0 {
                    self.forget_batch(&group.batch);
                }
            }
        }
        let live = self.expiry.split_off(&block.saturating_add(1));
        let gone = std::mem::replace(&mut self.expiry, live);
        for key in gone.into_values().flatten() {
            if let Some(e) = self.entries.remove(&key) {
                let batch = e.batch();
                if let Some(n) = self.batches.get_mut(&batch) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        self.forget_batch(&batch);
                    }
                }
            }
            self.unverified.remove(&key);
        }
        // The user's records (own writes not listed yet included) leave with their lifetime.
        let before = self.mine.len();
        self.mine.retain(|_, r| r.expires_at > block);
        if self.mine.len() != before {
            self.records_changed();
        }
    }

    /// Forgets a batch whose records all expired.
    fn forget_batch(&mut self, batch: &BatchId) {
        self.batches.remove(batch);
        self.batch_expiry.remove(batch);
        self.verified_batches.remove(batch);
        self.covers.remove(batch);
        self.fetch_due.remove(batch);
    }

    fn intern(&mut self, name: String, value: AttrValue) -> u32 {
        if let Some(id) = self.interned_id(&name, &value) {
            return id;
        }
        let id = self.interned_count;
        self.interned_count += 1;
        self.interned.entry(name).or_default().insert(value, id);
        id
    }

    /// The interned `(name, value)` pairs in id order (a snapshot writes them so).
    pub(crate) fn interned_pairs(&self) -> Vec<(&String, &AttrValue)> {
        let mut pairs: Vec<(u32, &String, &AttrValue)> = self
            .interned
            .iter()
            .flat_map(|(n, values)| values.iter().map(move |(v, id)| (*id, n, v)))
            .collect();
        pairs.sort_unstable_by_key(|(id, _, _)| *id);
        pairs.into_iter().map(|(_, n, v)| (n, v)).collect()
    }

    /// Interns the next pair of a snapshot (it takes the next id); `None` for a pair seen before.
    pub(crate) fn intern_pair(&mut self, name: String, value: AttrValue) -> Option<u32> {
        if self.interned_id(&name, &value).is_some() {
            return None;
        }
        Some(self.intern(name, value))
    }

    /// Adds a record of a snapshot as it was: the user's go to `unverified` unless this device
    /// verified them before (`mine`, restored first), those not opened to `pending`. `false` for a key seen before.
    pub(crate) fn restore(&mut self, key: B256, entry: Listed) -> bool {
        if self.entries.contains_key(&key) {
            return false;
        }
        match entry.class {
            TagClass::Unopened => self.pending.push(key),
            TagClass::Mine(r) => {
                // Verified on this device before: kept as it is, never fetched again.
                if !self.mine.get(&key).is_some_and(|m| m.verified) {
                    self.unverified.insert(key, r);
                }
            }
            TagClass::Other => {}
        }
        *self.batches.entry(entry.batch()).or_default() += 1;
        self.note_expiry(entry.batch(), entry.expires_at);
        self.expiry.entry(entry.expires_at).or_default().push(key);
        self.entries.insert(key, entry);
        true
    }

    /// The id of an interned `(name, value)` pair.
    fn interned_id(&self, name: &str, value: &AttrValue) -> Option<u32> {
        self.interned.get(name)?.get(value).copied()
    }

    /// For each `(name, value)` of `attributes` (`project` and `tag` left out), how many listed
    /// records carry it; and how many carry all of them. `None` before the first listing.
    pub(crate) fn rarity_counts(&self, attributes: &Attributes) -> Option<(Vec<usize>, usize)> {
        self.block?;
        let ids: Vec<Option<u32>> = attributes
            .iter()
            .filter(|(n, _)| n.as_str() != "project" && n.as_str() != "tag")
            .map(|(n, v)| self.interned_id(n, v))
            .collect();
        let mut each = vec![0usize; ids.len()];
        let mut all = 0usize;
        let listed = self.entries.values().map(|e| (&e.attrs, 1usize));
        let settled = self
            .settled
            .values()
            .flatten()
            .map(|g| (&g.attrs, g.count as usize));
        for (attrs, n) in listed.chain(settled) {
            let mut every = true;
            for (i, id) in ids.iter().enumerate() {
                if id.is_some_and(|id| attrs.binary_search(&id).is_ok()) {
                    each[i] += n;
                } else {
                    every = false;
                }
            }
            if every {
                all += n;
            }
        }
        Some((each, all))
    }

    /// Whether a listed record's attributes (other than `project` and `tag`) are exactly
    /// `attributes`.
    pub(crate) fn same_attributes(&self, entry: &Listed, attributes: &Attributes) -> bool {
        let mut ids = Vec::new();
        for (n, v) in attributes.iter() {
            if n == "project" || n == "tag" {
                continue;
            }
            match self.interned_id(n, v) {
                Some(id) => ids.push(id),
                None => return false,
            }
        }
        ids.sort_unstable();
        *entry.attrs == *ids
    }

    /// The record among `keys`, listed entities with one tag (a record and its copies): the
    /// earliest; when several share its block, the one a creator in `trusted` (the session's
    /// relayers) made, when exactly one of them is; else none, since a copy made in the
    /// same block cannot be told from the record.
    pub(crate) fn original_among(&self, keys: &[B256], trusted: &[Address]) -> Option<B256> {
        let first = keys
            .iter()
            .filter_map(|k| self.entries.get(k).map(|e| e.created_at))
            .min()?;
        let earliest: Vec<B256> = keys
            .iter()
            .copied()
            .filter(|k| self.entries.get(k).is_some_and(|e| e.created_at == first))
            .collect();
        match earliest.as_slice() {
            [only] => Some(*only),
            several => {
                let by_relayer: Vec<B256> = several
                    .iter()
                    .copied()
                    .filter(|k| {
                        self.entries
                            .get(k)
                            .is_some_and(|e| trusted.contains(&e.creator))
                    })
                    .collect();
                (by_relayer.len() == 1).then(|| by_relayer[0])
            }
        }
    }

    /// Drops the user's copies: of the user's listed records (tag opened) that share a tag,
    /// only the earliest is the record (a later one is an entity anyone created with
    /// a copied envelope and transferred to the owner). Within one block the one created by a
    /// relayer of `trusted` is kept when it is the only such; otherwise none of them is, since
    /// the listing cannot tell which came first. Dropped copies become `Other`: never fetched,
    /// verified or returned ([`EntityCache::original_among`] picks the record).
    pub(crate) fn drop_copies(&mut self, trusted: &[Address]) {
        // Grouped by tag alone: the owner a listing saw may be stale (a copy listed before its
        // transfer to the user is never listed again), and a tag belongs to one record.
        let mut groups: HashMap<Vec<u8>, Vec<B256>> = HashMap::new();
        for (key, e) in self.entries.iter() {
            if let (TagClass::Mine(_), Some(tag)) = (e.class, e.tag) {
                groups
                    .entry(tag.as_slice().to_vec())
                    .or_default()
                    .push(*key);
            }
        }
        for keys in groups.into_values().filter(|k| k.len() > 1) {
            let keep = self.original_among(&keys, trusted);
            for key in keys.into_iter().filter(|k| Some(*k) != keep) {
                tracing::warn!(entity = %key, "ignoring a copy of one of the user's records");
                if let Some(e) = self.entries.get_mut(&key) {
                    e.class = TagClass::Other;
                }
                self.unverified.remove(&key);
                self.mine.remove(&key);
            }
        }
    }

    /// Records listed since the last tag opening.
    #[cfg(test)]
    pub(crate) fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// The listed records whose tag was not opened yet, with their tags; those without a
    /// tag are marked as not the user's.
    pub(crate) fn take_unopened(&mut self) -> Vec<(B256, Tag)> {
        let mut out = Vec::new();
        for key in std::mem::take(&mut self.pending) {
            if let Some(e) = self.entries.get_mut(&key) {
                if e.class != TagClass::Unopened {
                    continue;
                }
                match e.tag {
                    Some(t) => out.push((key, t)),
                    None => e.class = TagClass::Other,
                }
            }
        }
        out
    }
}

/// The attribute value of a ledger value of a user type.
fn attr_value(v: ArkivValue) -> Option<AttrValue> {
    match v {
        ArkivValue::Str(s) => Some(AttrValue::Str(s)),
        ArkivValue::I32(x) => Some(AttrValue::I32(x)),
        ArkivValue::U64(x) => Some(AttrValue::U64(x)),
        ArkivValue::U256(x) => Some(AttrValue::U256(x)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use privsvc_ledger::Attribute;

    fn entity(k: u8, block: u64, exp: u64, kind: &str) -> Entity {
        Entity {
            key: B256::repeat_byte(k),
            owner: Some(Address::repeat_byte(k)),
            creator: Some(Address::repeat_byte(1)),
            created_at: Some(block),
            expires_at: Some(exp),
            attributes: Some(vec![
                Attribute {
                    name: "kind".into(),
                    value: ArkivValue::Str(kind.into()),
                },
                Attribute {
                    name: "project".into(),
                    value: ArkivValue::Str("p".into()),
                },
            ]),
            ..Default::default()
        }
    }

    #[test]
    fn an_adopted_listing_replaces_the_listing_but_not_what_the_session_did_meanwhile() {
        // The session's attribute listing, made beside the cache from its first tail, may end
        // after scans: `last_scan`, what the device verified and the newer chain time stay.
        let mut c = EntityCache::default();
        c.merge(10, vec![entity(1, 5, 100, "a")]);
        let mut listing = EntityCache::for_attribute_listing();
        listing.merge(9, vec![entity(2, 6, 100, "b")]);
        listing.head_time = Some((1_000, privsvc_rt::Instant::now()));
        c.last_scan = Some(ScanStats {
            listed: 1,
            matched: 1,
            ..ScanStats::default()
        });
        let verified = BatchId {
            block: 5,
            creator: Address::repeat_byte(1),
        };
        c.verified_batches.insert(verified);
        c.records_generation = 3;
        c.head_time = Some((2_000, privsvc_rt::Instant::now()));
        c.adopt_listing(listing);
        assert!(c.with_attributes);
        assert_eq!(c.block, Some(9), "the adopted listing's block");
        assert!(
            c.entries.contains_key(&entity(2, 6, 100, "b").key)
                && !c.entries.contains_key(&entity(1, 5, 100, "a").key),
            "the adopted listing's rows only"
        );
        assert_eq!(
            c.last_scan.as_ref().map(|s| (s.listed, s.matched)),
            Some((1, 1))
        );
        assert!(
            c.verified_batches.contains(&verified),
            "what the device verified stays"
        );
        assert_eq!(c.records_generation, 3);
        assert_eq!(
            c.head_time.map(|t| t.0),
            Some(2_000),
            "the newer chain time"
        );
    }

    #[test]
    fn merge_counts_batches_drops_expired_and_counts_rarity() {
        let mut c = EntityCache::default();
        assert!(c.rarity_counts(&Attributes::new()).is_none());
        let added = c.merge(
            10,
            vec![
                entity(1, 5, 100, "a"),
                entity(2, 5, 100, "a"),
                entity(3, 7, 12, "b"),
            ],
        );
        assert_eq!(added, 3);
        assert_eq!(c.batches.len(), 2);
        // A second listing repeating a record does not count it twice.
        assert_eq!(c.merge(11, vec![entity(1, 5, 100, "a")]), 0);
        let mut want = Attributes::new();
        want.insert("kind", "a").unwrap();
        assert_eq!(c.rarity_counts(&want), Some((vec![2], 2)));
        let e = &c.entries[&B256::repeat_byte(1)];
        assert!(c.same_attributes(e, &want));
        // Block 12: record 3 expired, its batch is gone.
        c.merge(12, Vec::new());
        assert_eq!(c.entries.len(), 2);
        assert_eq!(c.batches.len(), 1);
        assert_eq!(c.block, Some(12));
    }

    #[test]
    fn a_copy_listed_under_another_owner_is_dropped_by_its_tag() {
        let tag_text = privsvc_vault::tag_to_text(&[7u8; privsvc_vault::TAG_BYTES]);
        let with_tag = |k: u8, block: u64| {
            let mut e = entity(k, block, 100, "a");
            if let Some(attrs) = e.attributes.as_mut() {
                attrs.push(Attribute {
                    name: "tag".into(),
                    value: ArkivValue::Str(tag_text.clone()),
                });
            }
            e
        };
        let mut c = EntityCache::default();
        // The record (owner 2, block 5) and a copy listed at block 6 while still owned by the
        // copier (owner 3): the owners differ, the tag is the same.
        c.merge(10, vec![with_tag(2, 5), with_tag(3, 6)]);
        for e in c.entries.values_mut() {
            e.class = TagClass::Mine(RecordRef([1; 16]));
        }
        c.drop_copies(&[]);
        assert!(matches!(
            c.entries[&B256::repeat_byte(2)].class,
            TagClass::Mine(_)
        ));
        assert!(matches!(
            c.entries[&B256::repeat_byte(3)].class,
            TagClass::Other
        ));
    }

    #[test]
    fn records_not_the_users_become_counts_that_still_count() {
        let mut c = EntityCache::default();
        c.merge(
            10,
            vec![
                entity(1, 5, 100, "a"),
                entity(2, 5, 100, "a"),
                entity(3, 7, 12, "b"),
            ],
        );
        let mut want = Attributes::new();
        want.insert("kind", "a").unwrap();
        let before = (c.rarity_counts(&want), c.batches.clone(), c.known());
        for (k, e) in c.entries.iter_mut() {
            e.class = if *k == B256::repeat_byte(2) {
                TagClass::Mine(RecordRef([1; 16]))
            } else {
                TagClass::Other
            };
        }
        c.settle_others();
        assert_eq!(c.entries.len(), 1, "only the user's record keeps its row");
        assert_eq!(
            (c.rarity_counts(&want), c.batches.clone(), c.known()),
            before
        );
        // Record 3's count expires with it at block 12; the others at 100.
        c.merge(12, Vec::new());
        assert_eq!(c.known(), 2);
        assert_eq!(c.batches.len(), 1);
        c.merge(100, Vec::new());
        assert_eq!(c.known(), 0);
        assert!(c.batches.is_empty() && c.entries.is_empty());
    }
}
