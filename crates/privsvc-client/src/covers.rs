//! Cover batches: which other batches a scan fetches with each batch that holds the user's
//! records (docs/PROTOCOL.md §8.4).
//!
//! The covers of a batch are taken from its creation window: the aligned block range
//! `[floor(block / span) * span, ... + span)` with `span` = [`COVER_WINDOW_BLOCKS`], doubled
//! (still aligned) until the window holds enough other batches. Among them the vault's keyed
//! score `HMAC(cover key, "privsvc cover v1" || batch || candidate)` picks the best
//! `cover_batches`: the same covers in every session for as long as the window's batches live,
//! so intersecting the fetch sets of many scans keeps the covers; and to anyone without the key,
//! the covers are random members of the same window as the user's batch.

use std::collections::{BTreeMap, BTreeSet};

use alloy_primitives::Address;
use privsvc_vault::{kdf::BatchBytes, Vault};
use rand::seq::SliceRandom;

use crate::error::PrivsvcError;
use crate::read::BatchId;

/// Blocks in the smallest cover window (32 s at 2 s a block).
pub const COVER_WINDOW_BLOCKS: u64 = 16;

/// A batch as cover scores name it: u64 big-endian block || creator.
pub(crate) fn batch_bytes(b: &BatchId) -> BatchBytes {
    let mut out = [0u8; 28];
    out[..8].copy_from_slice(&b.block.to_be_bytes());
    out[8..].copy_from_slice(b.creator.as_slice());
    out
}

/// The batches of the smallest aligned window around `block` that holds at least `want`
/// batches not in `exclude` (or the whole listing), `exclude` left out.
fn window(
    batches: &BTreeMap<BatchId, u32>,
    block: u64,
    want: usize,
    exclude: &BTreeSet<BatchId>,
) -> Vec<BatchId> {
    window_and_end(batches, block, want, exclude).0
}

/// Whether the covers of `anchor` are final at `head`: they are chosen among batches created
/// at most [`COVER_WINDOW_BLOCKS`] blocks after it, so once `head` is past that no later batch
/// can change them. A batch is fetched only then: covers that change from one scan to the next
/// would let intersecting the scans find the user's batch.
pub(crate) fn covers_final(anchor: BatchId, head: u64) -> bool {
    head >= anchor.block.saturating_add(COVER_WINDOW_BLOCKS)
}

/// [`window`] and the end (exclusive) of the window it chose.
fn window_and_end(
    batches: &BTreeMap<BatchId, u32>,
    block: u64,
    want: usize,
    exclude: &BTreeSet<BatchId>,
) -> (Vec<BatchId>, u64) {
    let (Some(first), Some(last)) = (batches.keys().next(), batches.keys().next_back()) else {
        return (Vec::new(), 0);
    };
    let mut span = COVER_WINDOW_BLOCKS;
    loop {
        let start = block / span * span;
        let end = start.saturating_add(span);
        let low = BatchId {
            block: start,
            creator: Address::ZERO,
        };
        let found: Vec<BatchId> = batches
            .range(low..)
            .map(|(b, _)| *b)
            .take_while(|b| b.block < end)
            .filter(|b| !exclude.contains(b))
            .collect();
        let everything = start <= first.block && end > last.block;
        if found.len() >= want || everything || span > u64::MAX / 2 {
            return (found, end);
        }
        span *= 2;
    }
}

/// The `k` covers of the user's batch `anchor`: deterministic for the vault, `anchor` and the
/// listed batches; never one of `exclude` (the batches fetched for the user's own records).
pub(crate) async fn covers_of(
    vault: &dyn Vault,
    batches: &BTreeMap<BatchId, u32>,
    anchor: BatchId,
    exclude: &BTreeSet<BatchId>,
    k: usize,
) -> Result<Vec<BatchId>, PrivsvcError> {
    if k == 0 {
        return Ok(Vec::new());
    }
    let mut skip = exclude.clone();
    skip.insert(anchor);
    let cap = anchor.block.saturating_add(COVER_WINDOW_BLOCKS);
    let candidates: Vec<BatchId> = window(batches, anchor.block, k, &skip)
        .into_iter()
        .filter(|b| b.block <= cap)
        .collect();
    let bytes: Vec<BatchBytes> = candidates.iter().map(batch_bytes).collect();
    let scores = vault.cover_scores(&batch_bytes(&anchor), &bytes).await?;
    let mut ranked: Vec<([u8; 32], BatchId)> = scores.into_iter().zip(candidates).collect();
    ranked.sort_unstable();
    Ok(ranked.into_iter().take(k).map(|(_, b)| b).collect())
}

/// `k` random batches of the newest window: what a scan fetches when it has no batch of the
/// user's to fetch, so that a scan's fetches do not tell whether the user has new records.
/// Never one of `own` (the user's batches whose covers are not final yet): fetched now and again
/// later with its covers, it would be all the two fetch sets share.
pub(crate) fn newest_window(
    batches: &BTreeMap<BatchId, u32>,
    k: usize,
    own: &BTreeSet<BatchId>,
) -> Vec<BatchId> {
    let Some(newest) = batches.keys().next_back() else {
        return Vec::new();
    };
    if k == 0 {
        return Vec::new();
    }
    let mut found = window(batches, newest.block, k, own);
    found.shuffle(&mut rand::thread_rng());
    found.truncate(k);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use privsvc_vault::KeyVault;

    fn listing(blocks: impl IntoIterator<Item = u64>) -> BTreeMap<BatchId, u32> {
        blocks
            .into_iter()
            .map(|b| {
                (
                    BatchId {
                        block: b,
                        creator: Address::repeat_byte((b % 3) as u8 + 1),
                    },
                    5,
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn covers_are_deterministic_in_the_window_and_keyed() {
        let batches = listing(1..200);
        let anchor = *batches.keys().nth(100).unwrap();
        let (v1, _) = KeyVault::random("a");
        let (v2, _) = KeyVault::random("a");
        let none = BTreeSet::new();
        let a = covers_of(&v1, &batches, anchor, &none, 2).await.unwrap();
        let b = covers_of(&v1, &batches, anchor, &none, 2).await.unwrap();
        assert_eq!(a, b, "the same covers every time");
        assert_eq!(a.len(), 2);
        let start = anchor.block / COVER_WINDOW_BLOCKS * COVER_WINDOW_BLOCKS;
        for c in &a {
            assert_ne!(*c, anchor);
            assert!((start..start + COVER_WINDOW_BLOCKS).contains(&c.block));
        }
        // New batches after the window do not change its covers.
        let more = listing(1..400);
        assert_eq!(covers_of(&v1, &more, anchor, &none, 2).await.unwrap(), a);
        // Another key chooses other covers (at least once over several anchors).
        let mut differ = false;
        for anchor in batches.keys().skip(20).take(10) {
            differ |= covers_of(&v1, &batches, *anchor, &none, 2).await.unwrap()
                != covers_of(&v2, &batches, *anchor, &none, 2).await.unwrap();
        }
        assert!(differ);
    }

    #[test]
    fn sparse_windows_widen_aligned_and_newest_window_is_recent() {
        let batches = listing([3, 40, 70, 500]);
        let w = window(&batches, 40, 2, &BTreeSet::new());
        // 16-block window [32, 48) holds one, [0, 64) two: 3 and 40.
        assert_eq!(w.iter().map(|b| b.block).collect::<Vec<_>>(), vec![3, 40]);
        let n = newest_window(&listing(1..100), 2, &BTreeSet::new());
        assert_eq!(n.len(), 2);
        assert!(n.iter().all(|b| b.block >= 96));
        assert!(newest_window(&BTreeMap::new(), 2, &BTreeSet::new()).is_empty());
        // The user's own batches of the newest window are never among them.
        let all = listing(90..100);
        let own: BTreeSet<BatchId> = all.keys().copied().filter(|b| b.block >= 95).collect();
        for _ in 0..50 {
            let n = newest_window(&all, 2, &own);
            assert_eq!(n.len(), 2);
            assert!(n.iter().all(|b| !own.contains(b)), "{n:?}");
        }
    }
}
