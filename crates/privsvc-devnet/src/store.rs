//! Versioned entity storage with equality indexes; answers queries at any retained block.
//!
//! Every entity has an internal id (`eid`, assigned at creation, used by cursors and ordering) and
//! a list of versions, each valid for blocks `[from, to)`. An entity is live at block `b` when a
//! version is valid at `b` and its `expires_at > b`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use alloy_primitives::{Address, B256};

use crate::entity::EntityData;
use crate::query::{AttrRef, CmpOp, Expr, Predicate};
use crate::value::{order_key, type_id};

/// An open version's `to`.
pub const OPEN: u64 = u64::MAX;

/// One version of an entity.
#[derive(Debug, Clone)]
pub struct Version {
    /// Version id (global, increasing).
    pub vid: u64,
    /// First block where this version is current.
    pub from: u64,
    /// First block where it no longer is ([`OPEN`] while current).
    pub to: u64,
    /// The state.
    pub data: Arc<EntityData>,
}

/// All versions of one entity.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// Versions in increasing `from` order.
    pub versions: Vec<Version>,
}

type IndexKey = (String, u8, Vec<u8>);

/// A version write produced by [`EntityStore::apply`] (for persistence).
#[derive(Debug, Clone)]
pub struct VersionRow {
    /// Entity id.
    pub eid: u64,
    /// The version.
    pub version: Version,
}

/// The entity store.
#[derive(Debug, Default)]
pub struct EntityStore {
    records: BTreeMap<u64, Record>,
    by_key: HashMap<B256, u64>,
    eq_index: HashMap<IndexKey, BTreeSet<(u64, u64)>>,
    owner_index: HashMap<Address, BTreeSet<(u64, u64)>>,
    creator_index: HashMap<Address, BTreeSet<(u64, u64)>>,
    /// `$createdAt` to the versions of the entities created in that block (range queries on the
    /// creation block, such as a client's incremental listing, visit only those).
    created_index: BTreeMap<u64, BTreeSet<(u64, u64)>>,
    /// `$createdAt` to the smallest and largest eid created in that block.
    created_span: BTreeMap<u64, (u64, u64)>,
    /// Some entity with a larger eid was created in an earlier block (a genesis list out of
    /// order): eids then say nothing about creation blocks and scans cannot be bounded by them.
    created_unordered: bool,
    next_eid: u64,
    next_vid: u64,
}

enum Candidates<'a> {
    Set(&'a BTreeSet<(u64, u64)>),
    /// Sorted, distinct `(eid, vid)` pairs gathered from several index entries.
    Many(Vec<(u64, u64)>),
    One(u64),
    Empty,
    All,
}

impl EntityStore {
    /// The current (latest, open) state of an entity, expired or not.
    pub fn current(&self, key: &B256) -> Option<&Arc<EntityData>> {
        let eid = self.by_key.get(key)?;
        let v = self.records.get(eid)?.versions.last()?;
        (v.to == OPEN).then_some(&v.data)
    }

    fn version_at(&self, eid: u64, block: u64) -> Option<&Version> {
        let rec = self.records.get(&eid)?;
        let i = rec.versions.partition_point(|v| v.from <= block);
        let v = rec.versions.get(i.checked_sub(1)?)?;
        (v.to > block).then_some(v)
    }

    fn live_at(&self, eid: u64, block: u64) -> Option<&Arc<EntityData>> {
        self.version_at(eid, block)
            .map(|v| &v.data)
            .filter(|d| d.expires_at > block)
    }

    /// The state of `key` valid at `block` (expired or not), `None` if absent or deleted then.
    pub fn state_at(&self, key: &B256, block: u64) -> Option<&Arc<EntityData>> {
        let eid = *self.by_key.get(key)?;
        self.version_at(eid, block).map(|v| &v.data)
    }

    /// The entity with `key` if live at `block`.
    pub fn get_live(&self, key: &B256, block: u64) -> Option<&Arc<EntityData>> {
        let eid = *self.by_key.get(key)?;
        self.live_at(eid, block)
    }

    fn index_version(&mut self, eid: u64, v: &Version) {
        let e = (eid, v.vid);
        for a in &v.data.attrs {
            self.eq_index
                .entry((a.name.clone(), a.type_id, a.value.to_vec()))
                .or_default()
                .insert(e);
        }
        self.owner_index.entry(v.data.owner).or_default().insert(e);
        self.creator_index
            .entry(v.data.creator)
            .or_default()
            .insert(e);
        self.created_index
            .entry(v.data.created_at)
            .or_default()
            .insert(e);
        self.note_creation(eid, v.data.created_at);
    }

    /// Records that `eid` was created in `block`, and whether eids still grow with creation
    /// blocks (they do for everything a block creates after genesis).
    fn note_creation(&mut self, eid: u64, block: u64) {
        let span = self.created_span.entry(block).or_insert((eid, eid));
        span.0 = span.0.min(eid);
        span.1 = span.1.max(eid);
        let (lo, hi) = *span;
        let before = self.created_span.range(..block).next_back();
        let after = self.created_span.range(block + 1..).next();
        if before.is_some_and(|(_, s)| s.1 >= lo) || after.is_some_and(|(_, s)| s.0 <= hi) {
            self.created_unordered = true;
        }
    }

    /// The eids `[lo, hi]` that can hold entities created within the blocks `[from, to]`, when
    /// eids grow with creation blocks; `Some(None)` when no entity was created there, `None`
    /// when eids cannot tell.
    fn created_eids(&self, from: u64, to: u64) -> Option<Option<(u64, u64)>> {
        if self.created_unordered {
            return None;
        }
        if from > to {
            return Some(None);
        }
        let mut spans = self.created_span.range(from..=to);
        let first = spans.next().map(|(_, s)| *s);
        let last = spans.next_back().map(|(_, s)| *s).or(first);
        Some(first.zip(last).map(|(f, l)| (f.0, l.1)))
    }

    /// Candidates of `$createdAt <op> n` from the creation-block index, when the range holds
    /// at most `limit` blocks' worth of index entries (else `None`: a full scan is as good).
    fn created_candidates(&self, op: CmpOp, n: u64) -> Option<Candidates<'_>> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let range = match op {
            CmpOp::Eq => {
                return Some(
                    self.created_index
                        .get(&n)
                        .map_or(Candidates::Empty, Candidates::Set),
                )
            }
            CmpOp::Gt => (Excluded(n), Unbounded),
            CmpOp::Gte => (Included(n), Unbounded),
            _ => return None,
        };
        if !self.created_unordered {
            // The scan bounds the eids by the creation range already; gathering (and sorting)
            // up to the limit for every page would cost more than it saves.
            return None;
        }
        let mut out: Vec<(u64, u64)> = Vec::new();
        for set in self.created_index.range(range).map(|(_, s)| s) {
            out.extend(set.iter().copied());
            if out.len() > CREATED_RANGE_LIMIT {
                return None;
            }
        }
        out.sort_unstable();
        Some(Candidates::Many(out))
    }

    /// Write the new state of `key` as of `block` (None = deleted). Returns the rows to persist:
    /// the closed previous version (if any) and the new one (if any).
    pub fn apply(&mut self, block: u64, key: B256, data: Option<EntityData>) -> Vec<VersionRow> {
        let mut rows = Vec::new();
        let eid = match self.by_key.get(&key) {
            Some(e) => *e,
            None => {
                if data.is_none() {
                    return rows;
                }
                let e = self.next_eid;
                self.next_eid += 1;
                self.by_key.insert(key, e);
                e
            }
        };
        let rec = self.records.entry(eid).or_default();
        if let Some(last) = rec.versions.last_mut() {
            if last.to == OPEN {
                last.to = block;
                rows.push(VersionRow {
                    eid,
                    version: last.clone(),
                });
            }
        }
        if let Some(d) = data {
            let v = Version {
                vid: self.next_vid,
                from: block,
                to: OPEN,
                data: Arc::new(d),
            };
            self.next_vid += 1;
            self.records
                .entry(eid)
                .or_default()
                .versions
                .push(v.clone());
            self.index_version(eid, &v);
            rows.push(VersionRow { eid, version: v });
        }
        rows
    }

    /// Re-insert a persisted version (startup).
    pub fn load_row(&mut self, row: VersionRow) {
        let VersionRow { eid, version } = row;
        self.by_key.insert(version.data.key, eid);
        self.next_eid = self.next_eid.max(eid + 1);
        self.next_vid = self.next_vid.max(version.vid + 1);
        self.index_version(eid, &version);
        let rec = self.records.entry(eid).or_default();
        let i = rec.versions.partition_point(|v| {
            v.from < version.from || (v.from == version.from && v.vid < version.vid)
        });
        rec.versions.insert(i, version);
    }

    /// Number of live entities at `block`.
    pub fn count_all(&self, block: u64) -> u64 {
        self.records
            .keys()
            .filter(|&&e| self.live_at(e, block).is_some())
            .count() as u64
    }

    fn candidates(&self, e: &Expr) -> Candidates<'_> {
        match e {
            Expr::Pred(p) if p.op == CmpOp::Eq => match &p.attr {
                AttrRef::User(n) => self
                    .eq_index
                    .get(&(n.clone(), p.value.type_id, p.value.bytes.clone()))
                    .map_or(Candidates::Empty, Candidates::Set),
                AttrRef::Owner => self
                    .owner_index
                    .get(&Address::from_slice(&p.value.bytes[12..]))
                    .map_or(Candidates::Empty, Candidates::Set),
                AttrRef::Creator => self
                    .creator_index
                    .get(&Address::from_slice(&p.value.bytes[12..]))
                    .map_or(Candidates::Empty, Candidates::Set),
                AttrRef::Key => self
                    .by_key
                    .get(&B256::from_slice(&p.value.bytes))
                    .map_or(Candidates::Empty, |e| Candidates::One(*e)),
                AttrRef::CreatedAt => created_value(p)
                    .and_then(|n| self.created_candidates(p.op, n))
                    .unwrap_or(Candidates::All),
                _ => Candidates::All,
            },
            Expr::Pred(p) if p.attr == AttrRef::CreatedAt => created_value(p)
                .and_then(|n| self.created_candidates(p.op, n))
                .unwrap_or(Candidates::All),
            Expr::Or(a, b) => {
                // A union of two index lookups (a client's fetch of several batches).
                let (ca, cb) = (self.candidates(a), self.candidates(b));
                let list = |c: Candidates<'_>| -> Option<Vec<(u64, u64)>> {
                    match c {
                        Candidates::Empty => Some(Vec::new()),
                        Candidates::Set(s) => Some(s.iter().copied().collect()),
                        Candidates::Many(v) => Some(v),
                        Candidates::One(_) | Candidates::All => None,
                    }
                };
                match (list(ca), list(cb)) {
                    (Some(mut x), Some(y)) if x.len() + y.len() <= CREATED_RANGE_LIMIT => {
                        x.extend(y);
                        x.sort_unstable();
                        x.dedup();
                        Candidates::Many(x)
                    }
                    _ => Candidates::All,
                }
            }
            Expr::And(a, b) => {
                let (ca, cb) = (self.candidates(a), self.candidates(b));
                let size = |c: &Candidates<'_>| match c {
                    Candidates::Empty => 0,
                    Candidates::One(_) => 1,
                    Candidates::Set(s) => s.len(),
                    Candidates::Many(v) => v.len(),
                    Candidates::All => usize::MAX,
                };
                if size(&ca) <= size(&cb) {
                    ca
                } else {
                    cb
                }
            }
            _ => Candidates::All,
        }
    }

    /// Visit live entities matching `expr` at `block` in increasing eid order, starting after
    /// `after` (exclusive). `visit` returns false to stop.
    pub fn scan(
        &self,
        expr: &Expr,
        block: u64,
        after: Option<u64>,
        mut visit: impl FnMut(u64, &Arc<EntityData>) -> bool,
    ) {
        let mut start = after.map_or(0, |a| a.saturating_add(1));
        if after == Some(u64::MAX) {
            return;
        }
        // A `$createdAt` range in the conjunction bounds the eids to visit (a client's listing
        // in parallel block ranges then visits only its range).
        let mut end = u64::MAX;
        let (from, to) = created_range(expr);
        if (from, to) != (0, u64::MAX) {
            match self.created_eids(from, to) {
                Some(None) => return,
                Some(Some((lo, hi))) => {
                    start = start.max(lo);
                    end = hi;
                }
                None => {}
            }
        }
        if start > end {
            return;
        }
        let mut check = |eid: u64| -> bool {
            if eid > end {
                return false;
            }
            match self.live_at(eid, block) {
                Some(d) if eval(expr, d) => visit(eid, d),
                _ => true,
            }
        };
        match self.candidates(expr) {
            Candidates::Empty => {}
            Candidates::One(e) => {
                if e >= start {
                    check(e);
                }
            }
            Candidates::Set(s) => {
                let mut last = None;
                for &(eid, vid) in s.range((start, 0)..) {
                    if eid > end {
                        return;
                    }
                    if last == Some(eid) {
                        continue;
                    }
                    // Only the version valid at `block` counts for this entity.
                    if self.version_at(eid, block).is_some_and(|v| v.vid == vid) {
                        last = Some(eid);
                        if !check(eid) {
                            return;
                        }
                    }
                }
            }
            Candidates::Many(v) => {
                let first = v.partition_point(|&(eid, _)| eid < start);
                let mut last = None;
                for &(eid, vid) in &v[first..] {
                    if eid > end {
                        return;
                    }
                    if last == Some(eid) {
                        continue;
                    }
                    if self.version_at(eid, block).is_some_and(|v| v.vid == vid) {
                        last = Some(eid);
                        if !check(eid) {
                            return;
                        }
                    }
                }
            }
            Candidates::All => {
                for &eid in self.records.range(start..=end).map(|(k, _)| k) {
                    if !check(eid) {
                        return;
                    }
                }
            }
        }
    }
}

/// Largest candidate list gathered from the creation-block index (beyond it, a full scan).
const CREATED_RANGE_LIMIT: usize = 50_000;

/// The creation blocks `[from, to]` the `$createdAt` predicates of the top-level conjunction
/// of `e` allow (`(0, u64::MAX)` when they say nothing).
fn created_range(e: &Expr) -> (u64, u64) {
    match e {
        Expr::And(a, b) => {
            let (x, y) = (created_range(a), created_range(b));
            (x.0.max(y.0), x.1.min(y.1))
        }
        Expr::Pred(p) if p.attr == AttrRef::CreatedAt => match (p.op, created_value(p)) {
            (CmpOp::Eq, Some(n)) => (n, n),
            (CmpOp::Gt, Some(n)) => (
                n.saturating_add(1),
                if n == u64::MAX { 0 } else { u64::MAX },
            ),
            (CmpOp::Gte, Some(n)) => (n, u64::MAX),
            (CmpOp::Lt, Some(0)) => (1, 0),
            (CmpOp::Lt, Some(n)) => (0, n - 1),
            (CmpOp::Lte, Some(n)) => (0, n),
            _ => (0, u64::MAX),
        },
        _ => (0, u64::MAX),
    }
}

/// The block of a `$createdAt` predicate with a u64 literal.
fn created_value(p: &Predicate) -> Option<u64> {
    (p.value.type_id == type_id::U64 && p.value.bytes.len() == 32)
        .then(|| u64::from_be_bytes(p.value.bytes[24..].try_into().unwrap_or([0; 8])))
}

/// Evaluate an expression on one (live) entity.
pub fn eval(e: &Expr, d: &EntityData) -> bool {
    match e {
        Expr::All => true,
        Expr::And(a, b) => eval(a, d) && eval(b, d),
        Expr::Or(a, b) => eval(a, d) || eval(b, d),
        Expr::Not(a) => !eval(a, d),
        Expr::Pred(p) => eval_pred(p, d),
    }
}

fn word_u64(v: u64) -> [u8; 32] {
    let mut w = [0u8; 32];
    w[24..].copy_from_slice(&v.to_be_bytes());
    w
}

fn word_addr(a: &Address) -> [u8; 32] {
    let mut w = [0u8; 32];
    w[12..].copy_from_slice(a.as_slice());
    w
}

fn compare(op: CmpOp, t: u8, have: &[u8], want: &[u8]) -> bool {
    match op {
        CmpOp::Eq => have == want,
        CmpOp::StartsWith => t == type_id::STR && have.starts_with(want),
        _ => {
            let (h, w) = (order_key(t, have), order_key(t, want));
            match op {
                CmpOp::Lt => h < w,
                CmpOp::Lte => h <= w,
                CmpOp::Gt => h > w,
                CmpOp::Gte => h >= w,
                _ => false,
            }
        }
    }
}

fn eval_pred(p: &Predicate, d: &EntityData) -> bool {
    let t = p.value.type_id;
    let want = &p.value.bytes[..];
    match &p.attr {
        AttrRef::User(n) => d
            .attr(n)
            .is_some_and(|a| a.type_id == t && compare(p.op, t, &a.value, want)),
        AttrRef::Key => compare(p.op, t, d.key.as_slice(), want),
        AttrRef::Owner => compare(p.op, t, &word_addr(&d.owner), want),
        AttrRef::Creator => compare(p.op, t, &word_addr(&d.creator), want),
        AttrRef::ExpiresAt => compare(p.op, t, &word_u64(d.expires_at), want),
        AttrRef::CreatedAt => compare(p.op, t, &word_u64(d.created_at), want),
        AttrRef::ContentType => compare(p.op, t, d.content_type.as_bytes(), want),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::parse;

    fn entity(i: u8, block: u64, creator: u8) -> EntityData {
        EntityData {
            key: B256::repeat_byte(i),
            owner: Address::repeat_byte(i),
            creator: Address::repeat_byte(creator),
            created_at: block,
            updated_at: block,
            expires_at: 1_000,
            flags: 0,
            content_type: "application/json".into(),
            payload: Default::default(),
            attrs: Vec::new(),
        }
    }

    fn keys(store: &EntityStore, q: &str, after: Option<u64>) -> Vec<u64> {
        let mut out = Vec::new();
        store.scan(&parse(q).unwrap(), 100, after, |eid, _| {
            out.push(eid);
            true
        });
        out
    }

    #[test]
    fn created_at_ranges_and_unions_use_the_index_and_match_a_full_scan() {
        let mut store = EntityStore::default();
        // Genesis-like order: keys not in block order.
        for (i, block) in [(1u8, 7u64), (2, 3), (3, 9), (4, 3), (5, 12)] {
            store.apply(block, B256::repeat_byte(i), Some(entity(i, block, i % 2)));
        }
        // Entity 2 updated later: only its current version counts, once.
        store.apply(20, B256::repeat_byte(2), Some(entity(2, 3, 0)));
        assert_eq!(keys(&store, "$createdAt > u64(5)", None), vec![0, 2, 4]);
        assert_eq!(keys(&store, "$createdAt >= u64(9)", None), vec![2, 4]);
        assert_eq!(keys(&store, "$createdAt = u64(3)", None), vec![1, 3]);
        assert_eq!(keys(&store, "$createdAt > u64(5)", Some(0)), vec![2, 4]);
        let union = format!(
            "($creator = addr({c1}) AND $createdAt = u64(7)) OR ($creator = addr({c0}) AND $createdAt = u64(3))",
            c1 = Address::repeat_byte(1).to_checksum(None),
            c0 = Address::repeat_byte(0).to_checksum(None),
        );
        assert_eq!(keys(&store, &union, None), vec![0, 1, 3]);
        // The same answers as the full scan of an expression the index cannot serve.
        assert_eq!(
            keys(&store, "$createdAt > u64(5) AND $expiresAt > u64(0)", None),
            keys(&store, "NOT ($createdAt <= u64(5))", None)
        );
    }

    #[test]
    fn created_at_ranges_bound_the_scan_and_match_a_full_scan() {
        let mut store = EntityStore::default();
        // Blocks in order, several entities a block, some blocks empty.
        let mut i = 0u8;
        for block in [2u64, 2, 3, 5, 5, 5, 8, 9, 9, 12] {
            i += 1;
            store.apply(block, B256::repeat_byte(i), Some(entity(i, block, i % 2)));
        }
        assert!(!store.created_unordered);
        for (a, b) in [
            (0u64, 20u64),
            (2, 5),
            (3, 8),
            (5, 5),
            (6, 7),
            (12, 30),
            (0, 1),
        ] {
            let bounded = format!("$createdAt > u64({a}) AND $createdAt <= u64({b})");
            let full = format!("NOT ($createdAt <= u64({a})) AND NOT ($createdAt > u64({b}))");
            assert_eq!(
                keys(&store, &bounded, None),
                keys(&store, &full, None),
                "{bounded}"
            );
            for after in 0..10 {
                assert_eq!(
                    keys(&store, &bounded, Some(after)),
                    keys(&store, &full, Some(after)),
                    "{bounded} after {after}"
                );
            }
        }
        assert_eq!(
            keys(&store, "$createdAt >= u64(5) AND $createdAt < u64(9)", None),
            vec![3, 4, 5, 6]
        );
        // An entity created out of order (as a genesis list may hold) turns the bounds off.
        store.apply(1, B256::repeat_byte(0xee), Some(entity(0xee, 1, 0)));
        assert!(store.created_unordered);
        assert_eq!(
            keys(&store, "$createdAt > u64(0) AND $createdAt <= u64(2)", None),
            vec![0, 1, 10]
        );
    }
}
