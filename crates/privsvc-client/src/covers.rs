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
use privsvc_vault::{BatchBytes, Vault};
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
/// batches that `keep` accepts (or the whole listing): only those are counted and returned.
fn window(
    batches: &BTreeMap<BatchId, u32>,
    block: u64,
    want: usize,
    keep: &dyn Fn(&BatchId) -> bool,
) -> Vec<BatchId> {
    let (Some(first), Some(last)) = (batches.keys().next(), batches.keys().next_back()) else {
        return Vec::new();
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
            .filter(|b| keep(b))
            .collect();
        let everything = start <= first.block && end > last.block;
        if found.len() >= want || everything || span > u64::MAX / 2 {
            return found;
        }
        span *= 2;
    }
}

/// Whether the covers of `anchor` are final at `head`: they are chosen among batches created
/// at most [`COVER_WINDOW_BLOCKS`] blocks after it, so once `head` is past that no later batch
/// can change them. A batch is fetched only then: covers that change from one scan to the next
/// would let intersecting the scans find the user's batch.
pub(crate) fn covers_final(anchor: BatchId, head: u64) -> bool {
    head >= anchor.block.saturating_add(COVER_WINDOW_BLOCKS)
}

/// The `k` covers of the user's batch `anchor`: deterministic for the vault, `anchor` and the
/// listed batches; never one of `exclude` (the batches fetched for the user's own records).
/// Only batches that `lives` accepts (those that live at least as long as the user's record)
/// and that were created at most [`COVER_WINDOW_BLOCKS`] blocks after `anchor` are counted and
/// chosen, so the covers stay the same for as long as the user's record lives.
pub(crate) async fn covers_of(
    vault: &dyn Vault,
    batches: &BTreeMap<BatchId, u32>,
    lives: &(dyn Fn(&BatchId) -> bool + Sync),
    anchor: BatchId,
    exclude: &BTreeSet<BatchId>,
    k: usize,
) -> Result<Vec<BatchId>, PrivsvcError> {
    if k == 0 {
        return Ok(Vec::new());
    }
    let cap = anchor.block.saturating_add(COVER_WINDOW_BLOCKS);
    let keep = |b: &BatchId| *b != anchor && !exclude.contains(b) && b.block <= cap && lives(b);
    let candidates = window(batches, anchor.block, k, &keep);
    let bytes: Vec<BatchBytes> = candidates.iter().map(batch_bytes).collect();
    let scores = vault.cover_scores(&batch_bytes(&anchor), &bytes).await?;
    let mut ranked: Vec<([u8; 32], BatchId)> = scores.into_iter().zip(candidates).collect();
    ranked.sort_unstable();
    Ok(ranked.into_iter().take(k).map(|(_, b)| b).collect())
}

/// What a scan fetches when no batch of the user's is due: `want` batches drawn uniformly at
/// random from the closed window (every batch in it final for covers at `head`) of the newest
/// batch created at or before `head - age` (or, on a young listing, of the oldest closed batch).
/// The user's own batches are neither preferred nor excluded: the same draw for every user.
pub(crate) fn idle_window(
    batches: &BTreeMap<BatchId, u32>,
    head: u64,
    age: u64,
    want: usize,
    rng: &mut impl rand::Rng,
) -> Vec<BatchId> {
    if want == 0 {
        return Vec::new();
    }
    let closed = |b: &BatchId| b.block.saturating_add(COVER_WINDOW_BLOCKS) <= head;
    let target = head.saturating_sub(age);
    let before = batches
        .keys()
        .rev()
        .find(|b| b.block <= target && closed(b));
    let anchor = match before {
        Some(b) => *b,
        None => match batches.keys().find(|b| closed(b)) {
            Some(b) => *b,
            None => return Vec::new(),
        },
    };
    let mut found = window(batches, anchor.block, want, &closed);
    found.shuffle(rng);
    found.truncate(want);
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
        let all = |_: &BatchId| true;
        let a = covers_of(&v1, &batches, &all, anchor, &none, 2)
            .await
            .unwrap();
        let b = covers_of(&v1, &batches, &all, anchor, &none, 2)
            .await
            .unwrap();
        assert_eq!(a, b, "the same covers every time");
        assert_eq!(a.len(), 2);
        let start = anchor.block / COVER_WINDOW_BLOCKS * COVER_WINDOW_BLOCKS;
        for c in &a {
            assert_ne!(*c, anchor);
            assert!((start..start + COVER_WINDOW_BLOCKS).contains(&c.block));
        }
        // New batches after the window do not change its covers.
        let more = listing(1..400);
        assert_eq!(
            covers_of(&v1, &more, &all, anchor, &none, 2).await.unwrap(),
            a
        );
        // Another key chooses other covers (at least once over several anchors).
        let mut differ = false;
        for anchor in batches.keys().skip(20).take(10) {
            differ |= covers_of(&v1, &batches, &all, *anchor, &none, 2)
                .await
                .unwrap()
                != covers_of(&v2, &batches, &all, *anchor, &none, 2)
                    .await
                    .unwrap();
        }
        assert!(differ);
    }

    #[test]
    fn sparse_windows_widen_aligned() {
        let batches = listing([3, 40, 70, 500]);
        let w = window(&batches, 40, 2, &|_| true);
        // 16-block window [32, 48) holds one, [0, 64) two: 3 and 40.
        assert_eq!(w.iter().map(|b| b.block).collect::<Vec<_>>(), vec![3, 40]);
    }

    #[tokio::test]
    async fn covers_count_only_batches_up_to_the_anchor_plus_16_that_live_as_long() {
        // The anchor's window [96, 112) holds one other batch; widening must not count the
        // batches after block 116 (they appear later and would move the window), nor the
        // batches that expire before the user's record.
        let batches = listing((90..140).step_by(3));
        let anchor = *batches.keys().find(|b| b.block == 99).unwrap();
        let (v, _) = KeyVault::random("a");
        let none = BTreeSet::new();
        let short_lived: BTreeSet<u64> = [93, 102].into_iter().collect();
        let lives = |b: &BatchId| !short_lived.contains(&b.block);
        let c = covers_of(&v, &batches, &lives, anchor, &none, 3)
            .await
            .unwrap();
        assert_eq!(c.len(), 3);
        for b in &c {
            assert!(b.block <= 115, "{c:?}");
            assert!(!short_lived.contains(&b.block), "{c:?}");
        }
        // Batches added after the anchor's window closed change nothing.
        let later = listing((90..400).step_by(3));
        assert_eq!(
            covers_of(&v, &later, &lives, anchor, &none, 3)
                .await
                .unwrap(),
            c
        );
    }

    #[test]
    fn idle_windows_are_closed_and_of_the_drawn_age() {
        let batches = listing(1..200);
        let mut rng = rand::thread_rng();
        for _ in 0..50 {
            let w = idle_window(&batches, 200, 40, 3, &mut rng);
            assert_eq!(w.len(), 3);
            for b in &w {
                // The window of block 160: [160, 176).
                assert!((160..176).contains(&b.block), "{w:?}");
            }
        }
        // Nothing closed yet: nothing to fetch.
        assert!(idle_window(&listing(190..200), 200, 40, 3, &mut rng).is_empty());
        // Too young for the age: the oldest closed window.
        let w = idle_window(&listing(150..200), 200, 900, 2, &mut rng);
        assert!(w.iter().all(|b| b.block < 160), "{w:?}");
    }
}
