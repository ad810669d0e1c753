//! The lab's stand-ins for leaky settings that act around the real client, from the user's own
//! address (`crate::Leaks`): each repeats, from outside the client, a read the client once made
//! itself, so that the attack on it can be watched winning whatever the client does now.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use alloy_primitives::{Address, B256};
use privsvc_client::BatchId;
use privsvc_ledger::{query_all, LedgerReader, Select};
use privsvc_testkit::LocalStack;
use rand::seq::SliceRandom;
use sha2::{Digest, Sha256};

use crate::scenario::APP;

/// Covers the stand-ins fetch with each of the user's batches (the client's default).
pub const COVERS: usize = 2;
/// The smallest window covers are taken from, in blocks (the client's).
const WINDOW_BLOCKS: u64 = privsvc_client::COVER_WINDOW_BLOCKS;

/// The app's live batches, as the lab's own (unobserved) reader lists them now, with their
/// record counts.
async fn live_batches(stack: &LocalStack) -> BTreeMap<BatchId, usize> {
    let mut out = BTreeMap::new();
    if let Ok(listing) = privsvc_client::list_app(stack.reader().as_ref(), APP, None, None).await {
        for e in &listing.entities {
            if let Some(b) = privsvc_client::batch_of(e) {
                *out.entry(b).or_default() += 1;
            }
        }
    }
    out
}

/// The other batches of the smallest aligned window around `anchor` (16 blocks, doubled) that
/// holds at least `want` of them, `skip` left out.
fn window_of(
    batches: &BTreeMap<BatchId, usize>,
    anchor: BatchId,
    want: usize,
    skip: &BTreeSet<BatchId>,
) -> Vec<BatchId> {
    let (Some(first), Some(last)) = (batches.keys().next(), batches.keys().next_back()) else {
        return Vec::new();
    };
    let mut span = WINDOW_BLOCKS;
    loop {
        let start = anchor.block / span * span;
        let end = start.saturating_add(span);
        let found: Vec<BatchId> = batches
            .keys()
            .copied()
            .filter(|b| b.block >= start && b.block < end)
            .filter(|b| *b != anchor && !skip.contains(b))
            .collect();
        let everything = start <= first.block && end > last.block;
        if found.len() >= want || everything || span > 1 << 40 {
            return found;
        }
        span *= 2;
    }
}

/// `k` covers of `anchor` ranked by `SHA-256(key || block || creator)` among the batches of its
/// window listed now: the same for one key as long as the window's batches live, others once
/// some of them expired (the rule of covers before their lifetime was considered).
fn keyed_covers(
    batches: &BTreeMap<BatchId, usize>,
    anchor: BatchId,
    skip: &BTreeSet<BatchId>,
    key: &[u8],
    k: usize,
) -> Vec<BatchId> {
    ranked(window_of(batches, anchor, k, skip), anchor, skip, key, k)
}

/// The `k` of `candidates` (`anchor` and `skip` left out) ranked first by
/// `SHA-256(key || anchor || candidate)`.
fn ranked(
    candidates: impl IntoIterator<Item = BatchId>,
    anchor: BatchId,
    skip: &BTreeSet<BatchId>,
    key: &[u8],
    k: usize,
) -> Vec<BatchId> {
    let mut ranked: Vec<([u8; 32], BatchId)> = candidates
        .into_iter()
        .filter(|b| *b != anchor && !skip.contains(b))
        .map(|b| {
            let mut h = Sha256::new();
            h.update(key);
            h.update(anchor.block.to_be_bytes());
            h.update(anchor.creator.as_slice());
            h.update(b.block.to_be_bytes());
            h.update(b.creator.as_slice());
            (h.finalize().into(), b)
        })
        .collect();
    ranked.sort_unstable();
    ranked.into_iter().take(k).map(|(_, b)| b).collect()
}

/// The batches of `keys` (records of the app), read by the lab's own reader.
pub async fn batches_of(stack: &LocalStack, keys: &[B256]) -> Vec<BatchId> {
    let reader = stack.reader();
    let mut out = BTreeSet::new();
    for key in keys {
        if let Ok(Some(e)) = reader.entity(*key, None).await {
            out.extend(privsvc_client::batch_of(&e));
        }
    }
    out.into_iter().collect()
}

/// `own` with [`COVERS`] covers of each ranked by `key` among the batches listed now: among
/// those of its window, or with `anywhere` among every live batch of the app.
pub async fn keyed_group(
    stack: &LocalStack,
    own: &[BatchId],
    key: &[u8],
    anywhere: bool,
) -> Vec<BatchId> {
    let live = live_batches(stack).await;
    let own_set: BTreeSet<BatchId> = own.iter().copied().collect();
    let mut group = own_set.clone();
    for b in own {
        if anywhere {
            group.extend(ranked(live.keys().copied(), *b, &own_set, key, COVERS));
        } else {
            group.extend(keyed_covers(&live, *b, &own_set, key, COVERS));
        }
    }
    group.into_iter().collect()
}

/// `fetch_on_landing`: fetches `batch` (the user's record just landed there) and two other
/// batches of its window, from the user's address.
pub async fn fetch_with_neighbours(stack: &LocalStack, rpc: &dyn LedgerReader, batch: BatchId) {
    let live = live_batches(stack).await;
    let mut group = window_of(&live, batch, COVERS, &BTreeSet::new());
    group.shuffle(&mut rand::thread_rng());
    group.truncate(COVERS);
    group.push(batch);
    let _ = privsvc_client::fetch_batches(rpc, APP, &group, None).await;
}

/// `fixed_fetch_sets`: fetches the batches of the user's records `keys` with covers ranked by
/// the wallet's address among every live batch, from the session's address: every session and
/// device of the user fetches the same set.
pub async fn fetch_fixed_group(
    stack: &LocalStack,
    rpc: &dyn LedgerReader,
    keys: &[B256],
    wallet: Address,
) {
    let own = batches_of(stack, keys).await;
    if own.is_empty() {
        return;
    }
    let group = keyed_group(stack, &own, wallet.as_slice(), true).await;
    let _ = privsvc_client::fetch_batches(rpc, APP, &group, None).await;
}

/// `owner_query_on_verify`: asks the ledger, from the user's address, for every entity of the
/// one-time owner of the user's record `key` (the copy check of a verification).
pub async fn query_owner_of(stack: &LocalStack, rpc: &dyn LedgerReader, key: B256) {
    let Ok(Some(e)) = stack.reader().entity(key, None).await else {
        return;
    };
    let Some(owner) = e.owner else { return };
    let expression = format!("$owner = {}", privsvc_client::addr_literal(&owner));
    let select = Select {
        key: true,
        created_at: true,
        payload: true,
        ..Select::default()
    };
    let _ = query_all(rpc, &expression, &select, None).await;
}

/// The token issuer the `key_read_before_issue` stand-in asks: relayer A's, through the relay.
#[derive(Debug, Clone)]
pub struct Issuer {
    /// The OHTTP relay's URL.
    pub relay: String,
    /// The issuer's account.
    pub address: Address,
    /// The issuer's URL.
    pub url: String,
}

/// `key_read_before_issue`: reads the issuer's key of today from the user's address (`http`,
/// the user's client), then at once asks the issuer for a full request of tokens through the
/// relay, signed by `wallet` (the tokens go to a store of their own: the stand-in only repeats
/// the pattern, the user's store is untouched).
pub async fn key_read_then_issue(
    issuer: &Issuer,
    wallet: Arc<privsvc_client::LocalWallet>,
    http: reqwest::Client,
    rpc: Arc<dyn LedgerReader>,
) {
    let epoch = privsvc_tokens::epoch_of(privsvc_tokens::now_ms());
    let _ = privsvc_tokens::fetch_issuer_key_entity(rpc.as_ref(), issuer.address, APP, epoch).await;
    let Ok(transport) = privsvc_ohttp::OhttpTransport::new(&issuer.relay, rpc.clone()) else {
        return;
    };
    let transport = transport.with_fetch(Arc::new(privsvc_rt::ReqwestFetch::with_client(http)));
    let mut o =
        privsvc_tokens::TokenWalletOptions::new(wallet, rpc, issuer.address, issuer.url.clone());
    o.transport = Arc::new(transport);
    o.store = privsvc_tokens::memory_store();
    let _ = privsvc_tokens::TokenWallet::new(o)
        .acquire(APP, privsvc_tokens::MAX_TOKENS_PER_REQUEST, None)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(blocks: &[u64]) -> BTreeMap<BatchId, usize> {
        blocks
            .iter()
            .map(|b| {
                (
                    BatchId {
                        block: *b,
                        creator: Address::repeat_byte(1),
                    },
                    3,
                )
            })
            .collect()
    }

    #[test]
    fn keyed_covers_are_fixed_by_the_key_and_move_when_their_batches_expire() {
        let all = listing(&[16, 18, 20, 22, 24, 26]);
        let anchor = BatchId {
            block: 20,
            creator: Address::repeat_byte(1),
        };
        let none = BTreeSet::new();
        let a = keyed_covers(&all, anchor, &none, b"user a", 2);
        assert_eq!(a, keyed_covers(&all, anchor, &none, b"user a", 2));
        assert_eq!(a.len(), 2);
        assert!(!a.contains(&anchor));
        // Once the chosen covers expired, others are chosen: the window's remaining batches.
        let mut later = all.clone();
        for b in &a {
            later.remove(b);
        }
        let b = keyed_covers(&later, anchor, &none, b"user a", 2);
        assert_eq!(b.len(), 2);
        assert!(b.iter().all(|x| !a.contains(x)));
    }

    #[test]
    fn a_sparse_window_widens() {
        let all = listing(&[3, 40, 70]);
        let anchor = BatchId {
            block: 40,
            creator: Address::repeat_byte(1),
        };
        let w = window_of(&all, anchor, 2, &BTreeSet::new());
        assert_eq!(w.iter().map(|b| b.block).collect::<Vec<_>>(), vec![3, 70]);
    }
}
