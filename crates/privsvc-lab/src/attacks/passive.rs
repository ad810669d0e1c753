//! Passive attacks: each party watches the simulated day and guesses.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use alloy_primitives::Address;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::Value;

use super::{pick, AttackResult, Score};
use crate::stats::Trial;
use crate::views::{LedgerRecord, Ms, RelayRequest, RpcCall, Views};

/// A batch: `(block, creator)`.
pub(super) type Batch = (u64, Address);

/// Fetch calls of one source closer than this belong to one burst (one scan's fetch).
const BURST_GAP_MS: Ms = 2_000.0;
/// Timestamp reads up to this long after a burst count as the burst's.
const TIMESTAMP_LAG_MS: Ms = 3_000.0;
/// How long before its tokens ripen an issue request of an on-demand fetch reaches the issuer
/// (the answer's round trip and the ripeness check's 100 ms step).
const ISSUE_LEAD_MS: Ms = 300.0;
/// A listing this soon after a batch appeared is "right after it landed".
const LANDING_LAG_MS: Ms = 1_500.0;
/// Sources that list the app this close to a landing are the sessions live at that moment: each
/// live session lists at least once a tail interval (at most 4.5 s in the lab's schedule).
const LISTING_WINDOW_MS: Ms = 5_000.0;
/// Sources with a request this close to an event count as active at that moment.
const ACTIVE_WINDOW_MS: Ms = 30_000.0;
/// The smallest encapsulated OHTTP request of the 32 KiB class: its padded plaintext alone is
/// 32 KiB (a 4 KiB-class request is 4 KiB plus the encapsulation's header and tag).
const BIG_REQUEST_BYTES: usize = 32_768;
/// The envelope size from which a submission no longer fits the 4 KiB request class.
const BIG_ENVELOPE: usize = 4_096;

pub(super) fn all(
    views: &Views,
    score: &Score,
    min_age_ms: u64,
    delay_ms_max: u64,
    seed: u64,
) -> Vec<AttackResult> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let bursts = fetch_bursts(&views.rpc);
    let mut results = Vec::from(issue_to_spend(views, score, min_age_ms, delay_ms_max));
    results.extend([
        timestamps(&bursts, views, score, &mut rng),
        wallet_named(views, score, &mut rng),
        landing_listing(views, score, &mut rng),
        polls_stop(views, score, true),
        polls_stop(views, score, false),
        size_class(views, score, true),
        size_class(views, score, false),
        cover_intersection(&bursts, score, &mut rng),
        arrival_order(views, score),
        onlooker_relayer_timing(views, score),
        issuer_onlooker_wallet(views, score),
    ]);
    results
}

/// The batches named by a fetch expression: `($creator = addr(0x…) AND $createdAt = u64(N))`.
pub(crate) fn batches_in(expression: &str) -> Vec<Batch> {
    let mut out = Vec::new();
    let mut rest = expression;
    while let Some(i) = rest.find("$creator = addr(") {
        rest = &rest[i + "$creator = addr(".len()..];
        let Some(end) = rest.find(')') else { break };
        let creator = rest[..end].parse::<Address>().ok();
        rest = &rest[end..];
        let Some(j) = rest.find("$createdAt = u64(") else {
            break;
        };
        let after = &rest[j + "$createdAt = u64(".len()..];
        let Some(close) = after.find(')') else { break };
        if let (Some(c), Ok(block)) = (creator, after[..close].parse::<u64>()) {
            out.push((block, c));
        }
        rest = &after[close..];
    }
    out
}

pub(super) fn expression(call: &RpcCall) -> Option<&str> {
    (call.method == "arkiv_query")
        .then(|| call.params.get(0).and_then(|e| e.as_str()))
        .flatten()
}

/// A scan's batch fetch as the RPC sees it.
#[derive(Debug, Clone)]
pub(crate) struct Burst {
    pub(crate) source: IpAddr,
    pub(crate) start: Ms,
    pub(crate) end: Ms,
    pub(crate) batches: BTreeSet<Batch>,
    /// How often each block's timestamp was read around the burst.
    pub(crate) timestamps_read: BTreeMap<u64, usize>,
}

pub(crate) fn fetch_bursts(rpc: &[RpcCall]) -> Vec<Burst> {
    let mut by_source: BTreeMap<IpAddr, Vec<&RpcCall>> = BTreeMap::new();
    for c in rpc {
        by_source.entry(c.source).or_default().push(c);
    }
    let mut bursts = Vec::new();
    for (source, mut calls) in by_source {
        calls.sort_by(|a, b| a.at.total_cmp(&b.at));
        let mut current: Option<Burst> = None;
        for c in &calls {
            let Some(e) = expression(c) else { continue };
            let batches = batches_in(e);
            if batches.is_empty() {
                continue;
            }
            match &mut current {
                Some(b) if c.at - b.end <= BURST_GAP_MS => {
                    b.end = c.at;
                    b.batches.extend(batches);
                }
                _ => {
                    if let Some(b) = current.take() {
                        bursts.push(b);
                    }
                    current = Some(Burst {
                        source,
                        start: c.at,
                        end: c.at,
                        batches: batches.into_iter().collect(),
                        timestamps_read: BTreeMap::new(),
                    });
                }
            }
        }
        if let Some(b) = current {
            bursts.push(b);
        }
        for b in bursts.iter_mut().filter(|b| b.source == source) {
            for c in &calls {
                if c.method == "eth_getBlockByNumber"
                    && c.at >= b.start - 500.0
                    && c.at <= b.end + TIMESTAMP_LAG_MS
                {
                    if let Some(n) = c
                        .params
                        .get(0)
                        .and_then(|v| v.as_str())
                        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
                    {
                        *b.timestamps_read.entry(n).or_default() += 1;
                    }
                }
            }
        }
    }
    bursts.sort_by(|a, b| a.start.total_cmp(&b.start));
    bursts
}

/// The users whose record is in `batch`.
pub(super) fn writers(score: &Score, batch: &Batch) -> BTreeSet<usize> {
    score
        .writers_of_batch
        .get(batch)
        .cloned()
        .unwrap_or_default()
}

/// Issuer: a spend comes `minAgeMs` after the issue request that the write caused; guess the
/// wallet whose latest issue request before `spend - minAgeMs` is the most recent. One attack,
/// scored in two parts: the spends of returning users on a store of their own
/// (`issue-to-spend`, which revision 3 closes) and first spends (`first-spend`, a stated
/// residual): those of new wallets, whose tokens come from the first issue request they ever
/// made, and those of sessions on the default stores, which can spend only tokens they
/// fetched themselves.
fn issue_to_spend(
    views: &Views,
    score: &Score,
    min_age_ms: u64,
    delay_ms_max: u64,
) -> [AttackResult; 2] {
    let mut returning = Vec::new();
    let mut new_wallets = Vec::new();
    let results = |returning: &[Trial], new_wallets: &[Trial]| {
        [
            AttackResult::new(
                "issue-to-spend",
                "issuer",
                "which wallet spent this token (issue-to-spend timing)",
                returning,
            ),
            AttackResult::new(
                "first-spend",
                "issuer",
                "which wallet spent this token (a first spend: a new wallet, or a session on the default stores)",
                new_wallets,
            ),
        ]
    };
    let Some(issuer) = views.issuer.as_deref() else {
        return results(&returning, &new_wallets);
    };
    let seen = views.relayers.get(issuer).cloned().unwrap_or_default();
    // Issue requests: (time, wallet).
    let mut issues: Vec<(Ms, Address)> = seen
        .iter()
        .filter(|r| r.method == "POST" && r.path.starts_with("/v1/tokens/issue"))
        .filter_map(|r| {
            let wallet = r.json()?["wallet"].as_str()?.parse::<Address>().ok()?;
            Some((r.at, wallet))
        })
        .collect();
    issues.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Spends the issuer sees: redemptions at its own relayer (arrival), other relayers' spends
    // entities (the batch's time). Scored through the submissions' owners.
    let mut owner_of_token: BTreeMap<[u8; 32], Address> = BTreeMap::new();
    for reqs in views.relayers.values() {
        for r in reqs
            .iter()
            .filter(|r| r.method == "POST" && r.path == "/v1/records")
        {
            let Some(body) = r.json() else { continue };
            let (Some(owner), Ok(token)) = (
                body["owner"]
                    .as_str()
                    .and_then(|o| o.parse::<Address>().ok()),
                serde_json::from_value::<privsvc_tokens::TokenRedemption>(body["token"].clone()),
            ) else {
                continue;
            };
            if let Ok(id) = token.token_id(crate::scenario::APP) {
                owner_of_token.insert(id, owner);
            }
        }
    }
    // Each spend with the width of its window: arrival at the issuer's own relayer follows the
    // token's ripening by the client's random delay; another relayer's spends entity lands up
    // to a batching round later.
    let arrival_window = delay_ms_max as f64 + 1_000.0;
    let ledger_window = arrival_window + 6_000.0;
    let mut spends: Vec<(Ms, [u8; 32], Ms)> = Vec::new();
    for r in seen
        .iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/records")
    {
        if let Some(body) = r.json() {
            if let Ok(token) =
                serde_json::from_value::<privsvc_tokens::TokenRedemption>(body["token"].clone())
            {
                if let Ok(id) = token.token_id(crate::scenario::APP) {
                    spends.push((r.at, id, arrival_window));
                }
            }
        }
    }
    let issuer_address = views.relayer_addresses.get(issuer).copied();
    for s in views
        .ledger
        .spends
        .iter()
        .filter(|s| Some(s.creator) != issuer_address)
    {
        if let Some(t) = views.ledger.time_of(s.block) {
            spends.extend(s.ids.iter().map(|id| (t, *id, ledger_window)));
        }
    }
    for (at, id, window) in spends {
        let Some(owner) = owner_of_token.get(&id) else {
            continue;
        };
        let Some(writer) = score.writer_of_owner.get(owner) else {
            continue;
        };
        let before: Vec<&(Ms, Address)> = issues.iter().filter(|(t, _)| *t < at).collect();
        let candidates: BTreeSet<Address> = before.iter().map(|(_, w)| *w).collect();
        // The attacker guesses only when an issue request falls where a token fetched for this
        // very write would: `minAgeMs` before the spend, within the window. A spend with no
        // such request tells it nothing, and it abstains.
        let ripe = at - min_age_ms as f64;
        // Nearest first to where a token fetched for this write was asked for: a round trip
        // and the ripeness check's step before it ripened.
        let mut in_window: Vec<(Ms, Address)> = before
            .iter()
            .filter(|(t, _)| *t <= ripe + 500.0 && *t >= ripe - window)
            .map(|(t, w)| (*t, *w))
            .collect();
        in_window.sort_by(|a, b| {
            ((a.0 - (ripe - ISSUE_LEAD_MS)).abs()).total_cmp(&(b.0 - (ripe - ISSUE_LEAD_MS)).abs())
        });
        let in_window: Vec<Address> = in_window.into_iter().map(|(_, w)| w).collect();
        // Another relayer's spends entity lands a batching round after the spend: in that wider
        // window the attacker guesses only when one issue request alone falls there.
        if window > arrival_window && in_window.len() != 1 {
            continue;
        }
        let Some(guess) = in_window.first().copied() else {
            continue;
        };
        let trial = Trial {
            success: Some(guess) == score.wallets.get(*writer).copied(),
            chance: 1.0 / candidates.len() as f64,
        };
        if score.first_spend(owner) {
            new_wallets.push(trial);
        } else {
            returning.push(trial);
        }
    }
    results(&returning, &new_wallets)
}

/// RPC: the block timestamps a scan reads (only some of the fetched blocks, or some more often
/// than the others) pick the user's batches among the fetched ones.
fn timestamps(bursts: &[Burst], _views: &Views, score: &Score, rng: &mut StdRng) -> AttackResult {
    let mut trials = Vec::new();
    for b in bursts {
        let Some(user) = score.user(&b.source) else {
            continue;
        };
        let all: Vec<Batch> = b.batches.iter().copied().collect();
        let own = all
            .iter()
            .filter(|x| writers(score, x).contains(&user))
            .count();
        if own == 0 {
            continue;
        }
        // The blocks read most often (read at all, when every read block is read alike).
        let most = b
            .timestamps_read
            .iter()
            .filter(|(n, _)| all.iter().any(|x| x.0 == **n))
            .map(|(_, c)| *c)
            .max()
            .unwrap_or(0);
        let read: Vec<Batch> = all
            .iter()
            .copied()
            .filter(|x| most > 0 && b.timestamps_read.get(&x.0) == Some(&most))
            .collect();
        let guess = pick(if read.is_empty() { &all } else { &read }, rng);
        trials.push(Trial {
            success: guess.is_some_and(|g| writers(score, &g).contains(&user)),
            chance: own as f64 / all.len() as f64,
        });
    }
    AttackResult::new(
        "timestamps",
        "RPC",
        "which fetched batch is the user's (block timestamps read)",
        &trials,
    )
}

/// RPC: a request that names the wallet's address maps the source to the wallet.
fn wallet_named(views: &Views, score: &Score, rng: &mut StdRng) -> AttackResult {
    let mut params_by_source: BTreeMap<IpAddr, String> = BTreeMap::new();
    for c in &views.rpc {
        params_by_source
            .entry(c.source)
            .or_default()
            .push_str(&c.params.to_string().to_lowercase());
    }
    let mut trials = Vec::new();
    for (source, params) in &params_by_source {
        let Some(user) = score.user(source) else {
            continue;
        };
        let named: Vec<Address> = score
            .wallets
            .iter()
            .copied()
            .filter(|w| params.contains(&format!("{w:#x}")))
            .collect();
        let guess = pick(
            if named.is_empty() {
                &score.wallets
            } else {
                &named
            },
            rng,
        );
        trials.push(Trial {
            success: guess == score.wallets.get(user).copied(),
            chance: 1.0 / score.wallets.len().max(1) as f64,
        });
    }
    AttackResult::new(
        "wallet-named",
        "RPC",
        "which address is which wallet (the wallet named in a request)",
        &trials,
    )
}

/// Sources with a request within [`ACTIVE_WINDOW_MS`] of `at`.
pub(super) fn active_sources<'a>(
    times: impl Iterator<Item = (&'a IpAddr, Ms)>,
    at: Ms,
) -> BTreeSet<IpAddr> {
    times
        .filter(|(_, t)| (t - at).abs() <= ACTIVE_WINDOW_MS)
        .map(|(s, _)| *s)
        .collect()
}

/// The batches of the app with at least one simulated user's record, with their landing time.
pub(super) fn landed_batches(views: &Views, score: &Score) -> Vec<(Batch, Ms, BTreeSet<usize>)> {
    score
        .writers_of_batch
        .iter()
        .filter_map(|(b, w)| views.ledger.time_of(b.0).map(|t| (*b, t, w.clone())))
        .collect()
}

/// RPC: the source that lists the app right after a batch landed wrote a record of it.
fn landing_listing(views: &Views, score: &Score, rng: &mut StdRng) -> AttackResult {
    let listings: Vec<&RpcCall> = views
        .rpc
        .iter()
        .filter(|c| {
            expression(c).is_some_and(|e| {
                e.starts_with("project = ") && batches_in(e).is_empty() && !e.contains("privsvc")
            })
        })
        .collect();
    // Every session that counts rarity lists the project from the start once, at its first
    // tail, whatever the app does (its attribute listing: the scheduled listings' select with
    // every attribute, every page at one block): the RPC knows it as the source's first such
    // listing with no `$createdAt >` bound, and it confirms nothing.
    let select = |c: &RpcCall, field: &str| {
        c.params
            .get(1)
            .and_then(|o| o.pointer(&format!("/select/{field}")))
            .cloned()
    };
    let unbounded_all = |c: &RpcCall| {
        expression(c).is_some_and(|e| !e.contains("$createdAt >"))
            && select(c, "attributes") == Some(Value::Bool(true))
            && select(c, "updatedAt") == Some(Value::Bool(false))
            && select(c, "contentType") == Some(Value::Bool(false))
            && c.params.get(1).and_then(|o| o.get("atBlock")).is_some()
    };
    let mut attribute_listings: BTreeMap<IpAddr, (Ms, Option<&Value>)> = BTreeMap::new();
    for c in listings.iter().filter(|c| unbounded_all(c)) {
        let block = c.params.get(1).and_then(|o| o.get("atBlock"));
        let first = attribute_listings.entry(c.source).or_insert((c.at, block));
        if c.at < first.0 {
            *first = (c.at, block);
        }
    }
    let is_attribute_listing = |c: &RpcCall| {
        attribute_listings.get(&c.source).is_some_and(|(_, b)| {
            b.is_some() && *b == c.params.get(1).and_then(|o| o.get("atBlock"))
        })
    };
    let mut trials = Vec::new();
    for (_, landed, writers) in landed_batches(views, score) {
        // The candidates are the live sessions (a writer's session is live): sources whose
        // listings surround the landing. Every RPC source of the last half-minute would count
        // sessions already closed, which never list, and understate chance.
        let candidates: Vec<IpAddr> = listings
            .iter()
            .filter(|c| (c.at - landed).abs() <= LISTING_WINDOW_MS)
            .map(|c| c.source)
            .collect::<BTreeSet<IpAddr>>()
            .into_iter()
            .collect();
        let honest = candidates
            .iter()
            .filter(|s| score.user(s).is_some_and(|u| writers.contains(&u)))
            .count();
        if honest == 0 {
            continue;
        }
        // A full listing (no `$createdAt >` bound: not a session's incremental tail) right
        // after the landing is the likeliest confirmation; else the first listing at all.
        let after: Vec<&&RpcCall> = listings
            .iter()
            .filter(|c| c.at > landed && c.at <= landed + LANDING_LAG_MS)
            .collect();
        let earliest = |full: bool| {
            after
                .iter()
                .filter(|c| {
                    !full
                        || (expression(c).is_some_and(|e| !e.contains("$createdAt >"))
                            && !is_attribute_listing(c))
                })
                .min_by(|a, b| a.at.total_cmp(&b.at))
                .map(|c| c.source)
        };
        let first = earliest(true).or_else(|| earliest(false));
        let guess = first.or_else(|| pick(&candidates, rng));
        trials.push(Trial {
            success: guess
                .and_then(|g| score.user(&g))
                .is_some_and(|u| writers.contains(&u)),
            chance: honest as f64 / candidates.len() as f64,
        });
    }
    AttackResult::new(
        "landing-listing",
        "RPC",
        "who wrote a batch (a listing right after it landed)",
        &trials,
    )
}

/// Relay (`by_target`) or onlooker: the source whose requests stop right after a batch
/// landed wrote a record of it.
fn polls_stop(views: &Views, score: &Score, by_target: bool) -> AttackResult {
    let requests: Vec<&RelayRequest> = views.relay.iter().filter(|r| !r.injected).collect();
    let mut trials = Vec::new();
    for ((block, creator), landed, writers) in landed_batches(views, score) {
        let _ = block;
        let target = views
            .relayer_addresses
            .iter()
            .find(|(_, a)| **a == creator)
            .and_then(|(n, _)| views.relayer_urls.get(n))
            .cloned();
        let relevant: Vec<&&RelayRequest> = requests
            .iter()
            .filter(|r| !by_target || target.as_deref() == Some(r.target.as_str()))
            .collect();
        let active = active_sources(relevant.iter().map(|r| (&r.source, r.at)), landed);
        let honest = active
            .iter()
            .filter(|s| score.user(s).is_some_and(|u| writers.contains(&u)))
            .count();
        if honest == 0 {
            continue;
        }
        // For each active source: the end of its run of requests (no request within 3 s after).
        let mut best: Option<(Ms, IpAddr)> = None;
        for s in &active {
            let times: Vec<Ms> = relevant
                .iter()
                .filter(|r| r.source == *s)
                .map(|r| r.at)
                .collect();
            for (i, t) in times.iter().enumerate() {
                let last_of_run = times.get(i + 1).is_none_or(|n| n - t > 3_000.0);
                if last_of_run && *t >= landed - 500.0 && *t <= landed + 3_000.0 {
                    let d = (t - landed).abs();
                    if best.is_none_or(|(bd, _)| d < bd) {
                        best = Some((d, *s));
                    }
                }
            }
        }
        trials.push(Trial {
            success: best
                .and_then(|(_, s)| score.user(&s))
                .is_some_and(|u| writers.contains(&u)),
            chance: honest as f64 / active.len() as f64,
        });
    }
    if by_target {
        AttackResult::new(
            "polls-stop-relay",
            "OHTTP relay",
            "who wrote a batch (status polls stop when it lands)",
            &trials,
        )
    } else {
        AttackResult::new(
            "polls-stop-onlooker",
            "onlooker",
            "who wrote a batch (requests stop when it lands)",
            &trials,
        )
    }
}

/// Relay (`by_target`) or onlooker: a record in the 4 KiB-or-larger envelope class was sent as a
/// 32 KiB-class request. Records leave a relayer's queue in arrival order, so the attacker
/// matches first in, first out: each large record, in landing order, takes the earliest large
/// request (to its relayer, for the relay) of the 20 s before it landed that no earlier record
/// took.
fn size_class(views: &Views, score: &Score, by_target: bool) -> AttackResult {
    let requests: Vec<&RelayRequest> = views.relay.iter().filter(|r| !r.injected).collect();
    let mut big_records: Vec<(Ms, &LedgerRecord)> = views
        .ledger
        .records
        .iter()
        .filter(|r| r.envelope_len >= BIG_ENVELOPE)
        .filter_map(|r| Some((views.ledger.time_of(r.block)?, r)))
        .collect();
    big_records.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Whatever the sizes show, the relay knows who sent to the relayer before a batch landed:
    // the baseline is one of the batch's writers (`Score::writers_of_batch`).
    let mut taken: BTreeSet<usize> = BTreeSet::new();
    let mut trials = Vec::new();
    for (landed, r) in big_records {
        let target = views
            .relayer_addresses
            .iter()
            .find(|(_, a)| **a == r.creator)
            .and_then(|(n, _)| views.relayer_urls.get(n))
            .cloned();
        let in_view = |x: &RelayRequest| {
            (!by_target || target.as_deref() == Some(x.target.as_str()))
                && x.at <= landed
                && x.at >= landed - 20_000.0
        };
        let guess = requests
            .iter()
            .enumerate()
            .filter(|(i, x)| {
                x.request_bytes >= BIG_REQUEST_BYTES && in_view(x) && !taken.contains(i)
            })
            .min_by(|a, b| a.1.at.total_cmp(&b.1.at))
            .map(|(i, x)| (i, x.source));
        if let Some((i, _)) = guess {
            taken.insert(i);
        }
        let Some(writer) = score.writer_of_entity.get(&r.key) else {
            continue;
        };
        let active: BTreeSet<IpAddr> = requests
            .iter()
            .filter(|x| in_view(x))
            .map(|x| x.source)
            .collect();
        if active.is_empty() {
            continue;
        }
        let writers = score
            .writers_of_batch
            .get(&(r.block, r.creator))
            .map_or(1, BTreeSet::len)
            .max(1);
        trials.push(Trial {
            success: guess.and_then(|(_, g)| score.user(&g)) == Some(*writer),
            chance: if by_target {
                1.0 / writers as f64
            } else {
                1.0 / active.len() as f64
            },
        });
    }
    if by_target {
        AttackResult::new(
            "size-class-relay",
            "OHTTP relay",
            "who wrote a large record (request size class)",
            &trials,
        )
    } else {
        AttackResult::new(
            "size-class-onlooker",
            "onlooker",
            "who wrote a large record (request size class)",
            &trials,
        )
    }
}

/// RPC: intersect one source's fetch sets across its scans and sessions; what remains is the
/// user's.
fn cover_intersection(bursts: &[Burst], score: &Score, rng: &mut StdRng) -> AttackResult {
    let mut by_source: BTreeMap<IpAddr, Vec<&Burst>> = BTreeMap::new();
    for b in bursts {
        by_source.entry(b.source).or_default().push(b);
    }
    let mut trials = Vec::new();
    for (source, bs) in by_source {
        let Some(user) = score.user(&source) else {
            continue;
        };
        if bs.len() < 2 {
            continue;
        }
        let union: BTreeSet<Batch> = bs.iter().flat_map(|b| b.batches.iter().copied()).collect();
        let own = union
            .iter()
            .filter(|x| writers(score, x).contains(&user))
            .count();
        if own == 0 {
            continue;
        }
        // Intersect the sets that overlap the running intersection (scans of the same batches).
        let mut inter: Option<BTreeSet<Batch>> = None;
        for b in &bs {
            inter = Some(match inter {
                None => b.batches.clone(),
                Some(i) => {
                    let next: BTreeSet<Batch> = i.intersection(&b.batches).copied().collect();
                    if next.is_empty() {
                        i
                    } else {
                        next
                    }
                }
            });
        }
        let candidates: Vec<Batch> = inter.unwrap_or_default().into_iter().collect();
        let guess = pick(&candidates, rng);
        trials.push(Trial {
            success: guess.is_some_and(|g| writers(score, &g).contains(&user)),
            chance: own as f64 / union.len() as f64,
        });
    }
    AttackResult::new(
        "cover-intersection",
        "RPC",
        "which batch is the user's (fetch sets intersected across scans)",
        &trials,
    )
}

/// Relay with the public ledger: the first submission of a batch to arrive is its first create
/// (one guess per batch, among the records whose arrival the relayer saw).
fn arrival_order(views: &Views, score: &Score) -> AttackResult {
    let mut trials = Vec::new();
    for (name, address) in &views.relayer_addresses {
        let Some(seen) = views.relayers.get(name) else {
            continue;
        };
        // Arrival time of each owner's first submission.
        let mut arrival: BTreeMap<Address, Ms> = BTreeMap::new();
        for r in seen
            .iter()
            .filter(|r| r.method == "POST" && r.path == "/v1/records")
        {
            if let Some(owner) = r
                .json()
                .and_then(|b| b["owner"].as_str().and_then(|o| o.parse::<Address>().ok()))
            {
                arrival.entry(owner).or_insert(r.at);
            }
        }
        for ((_, creator, _), keys) in &views.ledger.batch_order {
            if creator != address || keys.len() < 2 {
                continue;
            }
            let owners: Vec<Option<Address>> = keys
                .iter()
                .map(|k| {
                    views
                        .ledger
                        .records
                        .iter()
                        .find(|r| r.key == *k)
                        .map(|r| r.owner)
                })
                .collect();
            let mut by_arrival: Vec<(Ms, usize)> = owners
                .iter()
                .enumerate()
                .filter_map(|(i, o)| o.and_then(|o| arrival.get(&o)).map(|t| (*t, i)))
                .collect();
            if by_arrival.len() < 2 {
                continue;
            }
            // Same-time arrivals in the order of their entity keys, which say nothing of where
            // they sit in the batch (a stable sort would keep them in ledger order, the
            // attack's answer).
            by_arrival.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| keys[a.1].cmp(&keys[b.1])));
            // One guess per batch (the records of a batch are not independent trials): the
            // first submission to arrive sits first among the seen records in the ledger.
            let (_, first) = by_arrival[0];
            if !score.writer_of_entity.contains_key(&keys[first]) {
                continue;
            }
            let first_seen_position = by_arrival.iter().map(|(_, p)| *p).min();
            // What each batch was, so that a run far from chance can be read: the ledger
            // positions of the seen records in the order they arrived, with the arrival times
            // relative to the first.
            let t0 = by_arrival[0].0;
            eprintln!(
                "  arrival order: relayer {name}: {} creates, seen by arrival (position, ms after \
                 the first): {:?}",
                keys.len(),
                by_arrival
                    .iter()
                    .map(|(t, p)| (*p, (t - t0).round()))
                    .collect::<Vec<_>>()
            );
            trials.push(Trial {
                success: first_seen_position == Some(first),
                chance: 1.0 / by_arrival.len() as f64,
            });
        }
    }
    AttackResult::new(
        "arrival-order",
        "OHTTP relay + ledger",
        "which record of a batch arrived when (ledger order = arrival order)",
        &trials,
    )
}

/// The source whose request reached the relay last before `at` (within 1 s), and the sources
/// active in the 5 s before.
fn last_relay_source_before(views: &Views, at: Ms) -> (Option<IpAddr>, BTreeSet<IpAddr>) {
    let before: Vec<&RelayRequest> = views
        .relay
        .iter()
        .filter(|r| !r.injected && r.at <= at && r.at >= at - 5_000.0)
        .collect();
    let last = before
        .iter()
        .filter(|r| r.at >= at - 1_000.0)
        .max_by(|a, b| a.at.total_cmp(&b.at))
        .map(|r| r.source);
    (last, before.iter().map(|r| r.source).collect())
}

/// Onlooker with a relayer: the submission arrives at the relayer just after the client's
/// request reached the relay.
fn onlooker_relayer_timing(views: &Views, score: &Score) -> AttackResult {
    let mut trials = Vec::new();
    for seen in views.relayers.values() {
        for r in seen
            .iter()
            .filter(|r| r.encapsulated && r.method == "POST" && r.path == "/v1/records")
        {
            let Some(writer) = r
                .json()
                .and_then(|b| b["owner"].as_str().and_then(|o| o.parse::<Address>().ok()))
                .and_then(|o| score.writer_of_owner.get(&o).copied())
            else {
                continue;
            };
            let (guess, active) = last_relay_source_before(views, r.at);
            if active.is_empty() {
                continue;
            }
            trials.push(Trial {
                success: guess.and_then(|g| score.user(&g)) == Some(writer),
                chance: 1.0 / active.len() as f64,
            });
        }
    }
    AttackResult::new(
        "onlooker-relayer-timing",
        "onlooker + relayer",
        "which address sent this submission (arrival times)",
        &trials,
    )
}

/// Issuer with an onlooker: the issue request reaches the issuer just after the client's request
/// reached the relay: address and wallet linked.
fn issuer_onlooker_wallet(views: &Views, score: &Score) -> AttackResult {
    let mut trials = Vec::new();
    if let Some(seen) = views.issuer.as_deref().and_then(|i| views.relayers.get(i)) {
        for r in seen.iter().filter(|r| {
            r.encapsulated && r.method == "POST" && r.path.starts_with("/v1/tokens/issue")
        }) {
            let Some(wallet) = r
                .json()
                .and_then(|b| b["wallet"].as_str().and_then(|w| w.parse::<Address>().ok()))
            else {
                continue;
            };
            let (guess, active) = last_relay_source_before(views, r.at);
            if active.is_empty() {
                continue;
            }
            let guessed_wallet = guess
                .and_then(|g| score.user(&g))
                .and_then(|u| score.wallets.get(u).copied());
            trials.push(Trial {
                success: guessed_wallet == Some(wallet),
                chance: 1.0 / active.len() as f64,
            });
        }
    }
    AttackResult::new(
        "issuer-onlooker-wallet",
        "issuer + onlooker",
        "which address is which wallet (issue request timing)",
        &trials,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::RelayerRequest;
    use alloy_primitives::B256;

    /// A relayer's view and the ledger of one batch of four: the submissions of the owners of
    /// positions 0 to 3 arrived at `times[position]`; the key of position `i` is `keys[i]`.
    fn one_batch(times: [Ms; 4], keys: [u8; 4]) -> (Views, Score) {
        let relayer = Address::repeat_byte(0xaa);
        let owner = |i: usize| Address::repeat_byte(i as u8 + 1);
        let key = |i: usize| B256::repeat_byte(keys[i]);
        let mut views = Views::default();
        views.relayer_addresses.insert("a".into(), relayer);
        let seen = (0..4)
            .map(|i| RelayerRequest {
                at: times[i],
                source: IpAddr::from([127, 0, 0, 1]),
                encapsulated: true,
                method: "POST".into(),
                path: "/v1/records".into(),
                body: serde_json::to_vec(&serde_json::json!({ "owner": owner(i).to_string() }))
                    .unwrap(),
                wire_bytes: 0,
                status: 200,
                response_bytes: 0,
            })
            .collect();
        views.relayers.insert("a".into(), seen);
        views
            .ledger
            .batch_order
            .insert((7, relayer, B256::ZERO), (0..4).map(key).collect());
        let mut score = Score::default();
        for i in 0..4 {
            views.ledger.records.push(LedgerRecord {
                key: key(i),
                owner: owner(i),
                creator: relayer,
                block: 7,
                envelope_len: 0,
                tag: None,
                hour: None,
                block_timestamp: None,
            });
            score.writer_of_entity.insert(key(i), i);
        }
        (views, score)
    }

    /// Submissions that arrived at the same time tell the relayer nothing of their order: the
    /// attack's guess among them must not be the ledger's first (a stable sort kept them in
    /// ledger order, a win for every tie).
    #[test]
    fn arrival_order_ties_are_not_broken_by_ledger_position() {
        // Position 0 has the largest key: a tie broken by key puts it last.
        let (views, score) = one_batch([5.0; 4], [9, 3, 2, 1]);
        let tied = arrival_order(&views, &score);
        assert_eq!(tied.measured.trials, 1);
        assert_eq!(tied.measured.wins, 0, "a tie was read as ledger order");
        // When the first in the ledger arrived first, the leak is real and the attack wins.
        let (views, score) = one_batch([1.0, 2.0, 3.0, 4.0], [9, 3, 2, 1]);
        assert_eq!(arrival_order(&views, &score).measured.wins, 1);
    }

    #[test]
    fn batches_are_parsed_from_fetch_expressions() {
        let e = "project = str('lab') AND (($creator = addr(0x52908400098527886E0F7030069857D2E4169EE7) AND $createdAt = u64(12)) OR ($creator = addr(0x52908400098527886E0F7030069857D2E4169EE7) AND $createdAt = u64(15)))";
        let b = batches_in(e);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].0, 12);
        assert_eq!(b[1].0, 15);
        assert!(batches_in("project = str('lab') AND $createdAt > u64(4)").is_empty());
    }
}
