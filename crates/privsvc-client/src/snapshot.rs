//! The plaintext form of a persisted listing (docs/PROTOCOL.md §8.7): the project's records
//! created up to a resume block, with what the session learned of their tags. `scan_cache.rs`
//! seals it; this module only encodes and decodes it.
//!
//! Layout (integers are LEB128 varints unless a width is given):
//! `with_attributes u8 || resume || own || pairs || creators || groups || records`, where
//! - `own` = what this device knows of the user's records, whatever their block: `mine` =
//!   count, then per record: key (32 bytes), verified (u8), ref (16 bytes), owner (20),
//!   creator (20), created block, expiry block, lifetime seconds, encrypted (u8), app,
//!   content type, payload, envelope, attributes (wire JSON) (texts and bytes length-prefixed);
//!   `verified batches` = count, then per batch: block, creator (20 bytes); `covers` = count,
//!   then per batch of the user's: block, creator (20), and its covers (count, then block and
//!   creator each);
//! - `pairs` = count, then per interned attribute pair: name length, name, value kind (u8:
//!   0 str, 1 i32, 2 u64, 3 u256), value (str: length and bytes; i32: zigzag varint; u64:
//!   varint; u256: 32 bytes big-endian);
//! - `creators` = count, then 20 bytes each;
//! - `groups` = count, then per group of records that are not the user's: creator index,
//!   created block, lifetime (expiry minus creation; `u64::MAX` expiry is lifetime 0), how
//!   many, attribute-pair ids (count, ids): the records are kept as counts, without keys;
//! - `records` = count, then per record not opened yet or the user's: key (32 bytes), creator
//!   index, created block, lifetime, class (u8: 0 not opened, 2 the user's, then its ref, 16
//!   bytes), tag (44 bytes, zeros for none), attribute-pair ids. (Version 2 had the owner,
//!   20 bytes, before the tag: listings no longer select it.)
//!
//! A million records of other users in a few thousand batches take a few hundred kilobytes.

use std::collections::{BTreeMap, HashMap};

use alloy_primitives::{Address, B256, U256};
use privsvc_attributes::AttrValue;
use privsvc_vault::{RecordRef, Tag, TAG_BYTES};

use crate::cache::{EntityCache, Listed, Settled, TagClass};
use crate::read::BatchId;
use crate::record::MyRecord;

/// Encodes the records of `cache` created at or before `resume`.
pub(crate) fn encode(cache: &EntityCache, resume: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(1024);
    out.push(u8::from(cache.with_attributes));
    put(&mut out, resume);
    encode_own(&mut out, cache);
    let pairs = cache.interned_pairs();
    put(&mut out, pairs.len() as u64);
    for (name, value) in pairs {
        put_bytes(&mut out, name.as_bytes());
        match value {
            AttrValue::Str(s) => {
                out.push(0);
                put_bytes(&mut out, s.as_bytes());
            }
            AttrValue::I32(x) => {
                out.push(1);
                put(&mut out, zigzag(*x));
            }
            AttrValue::U64(x) => {
                out.push(2);
                put(&mut out, *x);
            }
            AttrValue::U256(x) => {
                out.push(3);
                out.extend_from_slice(&x.to_be_bytes::<32>());
            }
        }
    }
    // Records not the user's become counts by (batch, expiry, attributes); the others are kept
    // one by one.
    let mut groups: BTreeMap<(BatchId, u64, &[u32]), u32> = BTreeMap::new();
    let mut kept: Vec<(&B256, &Listed)> = Vec::new();
    for (key, e) in cache.entries.iter().filter(|(_, e)| e.created_at <= resume) {
        match e.class {
            TagClass::Other => {
                *groups
                    .entry((e.batch(), e.expires_at, &e.attrs))
                    .or_default() += 1
            }
            _ => kept.push((key, e)),
        }
    }
    for (expires_at, list) in &cache.settled {
        for g in list.iter().filter(|g| g.batch.block <= resume) {
            *groups.entry((g.batch, *expires_at, &g.attrs)).or_default() += g.count;
        }
    }
    let mut creators: HashMap<Address, u64> = HashMap::new();
    let mut order = Vec::new();
    let every_creator = groups
        .keys()
        .map(|(b, _, _)| b.creator)
        .chain(kept.iter().map(|(_, e)| e.creator));
    for c in every_creator {
        creators.entry(c).or_insert_with(|| {
            order.push(c);
            order.len() as u64 - 1
        });
    }
    put(&mut out, order.len() as u64);
    for c in &order {
        out.extend_from_slice(c.as_slice());
    }
    put(&mut out, groups.len() as u64);
    for ((batch, expires_at, attrs), count) in &groups {
        put(&mut out, creators[&batch.creator]);
        put(&mut out, batch.block);
        put(&mut out, lifetime(batch.block, *expires_at));
        put(&mut out, u64::from(*count));
        put_ids(&mut out, attrs);
    }
    put(&mut out, kept.len() as u64);
    for (key, e) in kept {
        out.extend_from_slice(key.as_slice());
        put(&mut out, creators[&e.creator]);
        put(&mut out, e.created_at);
        put(&mut out, lifetime(e.created_at, e.expires_at));
        match e.class {
            TagClass::Mine(r) => {
                out.push(2);
                out.extend_from_slice(r.as_bytes());
            }
            _ => out.push(0),
        }
        out.extend_from_slice(e.tag.as_ref().unwrap_or(&[0; TAG_BYTES]));
        put_ids(&mut out, &e.attrs);
    }
    out
}

/// The user's records, the verified batches and the covers: kept whatever their block.
fn encode_own(out: &mut Vec<u8>, cache: &EntityCache) {
    let mut mine: Vec<&MyRecord> = cache.mine.values().collect();
    mine.sort_by_key(|r| r.entity_key);
    put(out, mine.len() as u64);
    for r in mine {
        out.extend_from_slice(r.entity_key.as_slice());
        out.push(u8::from(r.verified));
        out.extend_from_slice(r.record_ref.as_bytes());
        out.extend_from_slice(r.owner.as_slice());
        out.extend_from_slice(r.creator.as_slice());
        put(out, r.created_at);
        put(out, r.expires_at);
        put(out, r.exp_seconds);
        out.push(u8::from(r.encrypted));
        put_bytes(out, r.app.as_bytes());
        put_bytes(out, r.content_type.as_bytes());
        put_bytes(out, &r.data);
        put_bytes(out, r.envelope.as_bytes());
        put_bytes(out, r.attributes.to_wire().to_string().as_bytes());
    }
    put(out, cache.verified_batches.len() as u64);
    for b in &cache.verified_batches {
        put_batch(out, b);
    }
    put(out, cache.covers.len() as u64);
    for (anchor, covers) in &cache.covers {
        put_batch(out, anchor);
        put(out, covers.len() as u64);
        for c in covers {
            put_batch(out, c);
        }
    }
}

fn put_batch(out: &mut Vec<u8>, b: &BatchId) {
    put(out, b.block);
    out.extend_from_slice(b.creator.as_slice());
}

/// Decodes the `own` part into `cache`.
fn decode_own(r: &mut Reader<'_>, cache: &mut EntityCache) -> Option<()> {
    for _ in 0..r.count()? {
        let key = B256::from(r.array::<32>()?);
        let verified = match r.byte()? {
            0 => false,
            1 => true,
            _ => return None,
        };
        let record_ref = RecordRef(r.array()?);
        let owner = Address::from(r.array::<20>()?);
        let creator = Address::from(r.array::<20>()?);
        let created_at = r.varint()?;
        let expires_at = r.varint()?;
        let exp_seconds = r.varint()?;
        let encrypted = match r.byte()? {
            0 => false,
            1 => true,
            _ => return None,
        };
        let app = r.text()?;
        let content_type = r.text()?;
        let n = r.count()?;
        let data = r.take(n)?.to_vec();
        let envelope = r.text()?;
        let attributes =
            privsvc_attributes::Attributes::from_wire_json(r.text()?.as_bytes()).ok()?;
        let record = MyRecord {
            key,
            entity_key: key,
            owner,
            creator,
            app,
            content_type,
            data,
            encrypted,
            attributes,
            created_at,
            expires_at,
            exp_seconds,
            envelope,
            record_ref,
            verified,
        };
        if cache.mine.insert(key, record).is_some() {
            return None;
        }
    }
    for _ in 0..r.count()? {
        let b = r.batch()?;
        if !cache.verified_batches.insert(b) {
            return None;
        }
    }
    for _ in 0..r.count()? {
        let anchor = r.batch()?;
        let covers = (0..r.count()?)
            .map(|_| r.batch())
            .collect::<Option<Vec<_>>>()?;
        if cache.covers.insert(anchor, covers).is_some() {
            return None;
        }
    }
    Some(())
}

/// Expiry as a lifetime from `created` (0 for a record that never expires).
fn lifetime(created: u64, expires_at: u64) -> u64 {
    if expires_at == u64::MAX {
        0
    } else {
        expires_at.saturating_sub(created).max(1)
    }
}

fn put_ids(out: &mut Vec<u8>, ids: &[u32]) {
    put(out, ids.len() as u64);
    for id in ids {
        put(out, u64::from(*id));
    }
}

/// A listing decoded from `bytes`: the cache (its block is the resume block, the user's
/// records as this device knew them, the others are counts). `None` for bytes that are not a
/// well-formed snapshot.
pub(crate) fn decode(bytes: &[u8]) -> Option<EntityCache> {
    let mut r = Reader { bytes, at: 0 };
    let with_attributes = match r.byte()? {
        0 => false,
        1 => true,
        _ => return None,
    };
    let resume = r.varint()?;
    let mut cache = EntityCache::default();
    cache.with_attributes = with_attributes;
    decode_own(&mut r, &mut cache)?;
    let pairs = r.count()?;
    for _ in 0..pairs {
        let name = r.text()?;
        let value = match r.byte()? {
            0 => AttrValue::Str(r.text()?),
            1 => AttrValue::I32(unzigzag(r.varint()?)?),
            2 => AttrValue::U64(r.varint()?),
            3 => AttrValue::U256(U256::from_be_bytes::<32>(r.array()?)),
            _ => return None,
        };
        cache.intern_pair(name, value)?;
    }
    let creators: Vec<Address> = (0..r.count()?)
        .map(|_| r.array::<20>().map(Address::from))
        .collect::<Option<_>>()?;
    let creator = |r: &mut Reader<'_>| -> Option<Address> {
        creators.get(usize::try_from(r.varint()?).ok()?).copied()
    };
    let blocks = |r: &mut Reader<'_>| -> Option<(u64, u64)> {
        let created = r.varint()?;
        let expires_at = match r.varint()? {
            0 => u64::MAX,
            lifetime => created.checked_add(lifetime)?,
        };
        (created <= resume).then_some((created, expires_at))
    };
    let ids = |r: &mut Reader<'_>| -> Option<Box<[u32]>> {
        (0..r.count()?)
            .map(|_| {
                u32::try_from(r.varint()?)
                    .ok()
                    .filter(|id| (*id as usize) < pairs)
            })
            .collect()
    };
    for _ in 0..r.count()? {
        let creator = creator(&mut r)?;
        let (block, expires_at) = blocks(&mut r)?;
        let count = u32::try_from(r.varint()?).ok().filter(|n| *n > 0)?;
        let attrs = ids(&mut r)?;
        let batch = BatchId { block, creator };
        cache.settle(
            expires_at,
            Settled {
                batch,
                attrs,
                count,
            },
        );
    }
    for _ in 0..r.count()? {
        let key = B256::from(r.array::<32>()?);
        let creator = creator(&mut r)?;
        let (created_at, expires_at) = blocks(&mut r)?;
        let class = match r.byte()? {
            0 => TagClass::Unopened,
            2 => TagClass::Mine(RecordRef(r.array()?)),
            _ => return None,
        };
        let tag: Tag = r.array()?;
        let attrs = ids(&mut r)?;
        let entry = Listed {
            creator,
            created_at,
            expires_at,
            tag: (tag != [0; TAG_BYTES]).then_some(tag),
            attrs,
            class,
        };
        if !cache.restore(key, entry) {
            return None;
        }
    }
    if r.at != bytes.len() {
        return None;
    }
    cache.finish_listing(resume);
    Some(cache)
}

fn zigzag(x: i32) -> u64 {
    u64::from(((x << 1) ^ (x >> 31)) as u32)
}

fn unzigzag(v: u64) -> Option<i32> {
    let v = u32::try_from(v).ok()?;
    Some(((v >> 1) as i32) ^ -((v & 1) as i32))
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A cursor over snapshot bytes; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    /// A count, no larger than the bytes left (every counted item takes at least one byte).
    fn count(&mut self) -> Option<usize> {
        let n = usize::try_from(self.varint()?).ok()?;
        (n <= self.bytes.len() - self.at).then_some(n)
    }

    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(s)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn batch(&mut self) -> Option<BatchId> {
        let block = self.varint()?;
        let creator = Address::from(self.array::<20>()?);
        Some(BatchId { block, creator })
    }

    fn text(&mut self) -> Option<String> {
        let n = self.count()?;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use privsvc_ledger::{ArkivValue, Attribute, Entity};

    fn entity(k: u8, block: u64, kind: ArkivValue) -> Entity {
        Entity {
            key: B256::repeat_byte(k),
            owner: Some(Address::repeat_byte(k)),
            creator: Some(Address::repeat_byte(block as u8 % 3)),
            created_at: Some(block),
            expires_at: Some(block + 1000),
            attributes: Some(vec![
                Attribute {
                    name: "kind".into(),
                    value: kind,
                },
                Attribute {
                    name: "tag".into(),
                    value: ArkivValue::Str(privsvc_vault::tag_to_text(&[k; TAG_BYTES])),
                },
            ]),
            ..Default::default()
        }
    }

    #[test]
    fn a_snapshot_keeps_the_records_up_to_the_resume_block_and_their_classes() {
        let mut c = EntityCache::default();
        c.with_attributes = true;
        c.merge(
            50,
            vec![
                entity(1, 10, ArkivValue::Str("a".into())),
                entity(2, 20, ArkivValue::U64(7)),
                entity(3, 30, ArkivValue::I32(-5)),
                entity(4, 45, ArkivValue::U256(U256::from(9))),
            ],
        );
        let _ = c.take_unopened();
        c.entries.get_mut(&B256::repeat_byte(1)).unwrap().class = TagClass::Other;
        c.entries.get_mut(&B256::repeat_byte(2)).unwrap().class =
            TagClass::Mine(RecordRef([5; 16]));
        // Record 3 stays not opened (as when the session ended before its scan).
        c.entries.get_mut(&B256::repeat_byte(3)).unwrap().class = TagClass::Unopened;

        let back = decode(&encode(&c, 40)).expect("a snapshot decodes");
        assert_eq!(back.block, Some(40));
        assert!(back.with_attributes);
        assert_eq!(
            back.known(),
            3,
            "record 4 (block 45) is after the resume block"
        );
        assert_eq!(
            back.entries.len(),
            2,
            "record 1, not the user's, is a count"
        );
        let one: Vec<&Settled> = back.settled.values().flatten().collect();
        assert_eq!(one.len(), 1);
        assert_eq!((one[0].batch.block, one[0].count), (10, 1));
        let two = &back.entries[&B256::repeat_byte(2)];
        assert_eq!(two.class, TagClass::Mine(RecordRef([5; 16])));
        assert_eq!(two.tag, Some([2; TAG_BYTES]));
        assert_eq!(two.expires_at, 1020);
        assert_eq!(
            back.unverified.get(&B256::repeat_byte(2)),
            Some(&RecordRef([5; 16])),
            "the user's records are verified again"
        );
        assert_eq!(
            back.pending_count(),
            1,
            "record 3 is opened by the next scan"
        );
        let mut want = privsvc_attributes::Attributes::new();
        want.insert("kind", -5i32).unwrap();
        assert_eq!(back.rarity_counts(&want), Some((vec![1], 1)));
        let mut first = privsvc_attributes::Attributes::new();
        first.insert("kind", "a").unwrap();
        assert_eq!(
            back.rarity_counts(&first),
            Some((vec![1], 1)),
            "counts count"
        );
        assert_eq!(back.batches.len(), 3);
        // Saved again, the count stays a count.
        let again = decode(&encode(&back, 40)).expect("decodes again");
        assert_eq!(again.known(), 3);
        assert_eq!(again.settled.values().flatten().count(), 1);
    }

    #[test]
    fn many_records_of_other_users_are_a_few_counts() {
        let mut c = EntityCache::default();
        c.with_attributes = true;
        let many: Vec<Entity> = (0..10_000u32)
            .map(|i| {
                let mut e = entity(
                    0,
                    10 + u64::from(i % 50),
                    ArkivValue::Str(["a", "b"][i as usize % 2].into()),
                );
                let mut key = [0u8; 32];
                key[..4].copy_from_slice(&i.to_le_bytes());
                e.key = B256::from(key);
                e
            })
            .collect();
        c.merge(100, many);
        for (_, e) in c.entries.iter_mut() {
            e.class = TagClass::Other;
        }
        let _ = c.take_unopened();
        let bytes = encode(&c, 100);
        assert!(
            bytes.len() < 2_000,
            "{} bytes for 10,000 records",
            bytes.len()
        );
        let back = decode(&bytes).unwrap();
        assert_eq!(back.known(), 10_000);
        assert_eq!(
            back.batches.values().map(|n| *n as usize).sum::<usize>(),
            10_000
        );
        // They expire with their batch: at block 1,059 the last ones (created at 59) are gone.
        let mut back = back;
        back.finish_listing(1_059);
        assert_eq!(back.known(), 0);
        assert!(back.batches.is_empty());
    }

    #[test]
    fn truncated_or_altered_bytes_do_not_decode() {
        let mut c = EntityCache::default();
        c.merge(50, vec![entity(1, 10, ArkivValue::Str("a".into()))]);
        let bytes = encode(&c, 50);
        assert!(decode(&bytes).is_some());
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_none());
    }
}
