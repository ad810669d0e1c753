//! Passive attacks on what an app's sessions do besides writing on schedule: fetches after a
//! landing, fetch sets that repeat across addresses, reads made on demand, and the device
//! clock in the envelope.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use alloy_primitives::Address;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::passive::{active_sources, expression, fetch_bursts, landed_batches, Batch, Burst};
use super::{pick, AttackResult, Known, Score};
use crate::stats::Trial;
use crate::views::{Ms, RpcCall, Views};

/// A fetch this soon after a batch appeared follows its landing: the writer's write resolves
/// a status poll after the landing, and the app shows its list at once.
const FETCH_LAG_MS: Ms = 5_000.0;
/// Sources with an RPC call this close to a moment are the sessions live then (each lists at
/// least once a tail interval, at most 4.5 s in the lab's schedule).
const LIVE_WINDOW_MS: Ms = 5_000.0;
/// A scan that starts this soon after its source's listing followed that listing (a refresh,
/// or a page that opens).
const LISTING_LEAD_MS: Ms = 700.0;
/// Listing calls of one source closer than this are pages of one listing.
const PAGE_GAP_MS: Ms = 300.0;
/// A key read this soon before an issue request prepared it.
const KEY_READ_LAG_MS: Ms = 1_500.0;
/// The `kind` of issuer-key entities, as it appears in a query for them.
const ISSUER_KEY_KIND: &str = "issuer-key";

pub(super) fn all(views: &Views, score: &Score, known: Known, seed: u64) -> Vec<AttackResult> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xa99);
    let bursts = fetch_bursts(&views.rpc);
    vec![
        landing_fetch(views, &bursts, score, &mut rng),
        address_link(&bursts, score, false, &mut rng),
        address_link(&bursts, score, true, &mut rng),
        rarity_on_demand(views, score, known),
        key_read_to_issue(views, score, &mut rng),
        verify_own(views, score),
        clock_hour(views, score, &mut rng),
    ]
}

/// The sources with an RPC call within [`LIVE_WINDOW_MS`] of `at`.
fn live_sources(views: &Views, at: Ms) -> Vec<IpAddr> {
    views
        .rpc
        .iter()
        .filter(|c| (c.at - at).abs() <= LIVE_WINDOW_MS)
        .map(|c| c.source)
        .collect::<BTreeSet<IpAddr>>()
        .into_iter()
        .collect()
}

/// How many of `candidates` belong to one of `users`.
fn honest(score: &Score, candidates: &[IpAddr], users: &BTreeSet<usize>) -> usize {
    candidates
        .iter()
        .filter(|s| score.user(s).is_some_and(|u| users.contains(&u)))
        .count()
}

/// RPC: the source whose fetch burst starts first within [`FETCH_LAG_MS`] after a batch landed
/// wrote a record of it (its write resolved, and its app showed the list, which scanned).
/// Only a burst with no listing of its source just before it counts: a scan the app asked for
/// with `refresh` starts right after the session's own listing, on the session's timer, and so
/// does the scan of a page that opens; a burst with none was made at the moment the app asked
/// for its list. With no such burst, one of the sessions live at the landing (the candidates).
fn landing_fetch(views: &Views, bursts: &[Burst], score: &Score, rng: &mut StdRng) -> AttackResult {
    let listed = listings(views);
    let after_listing = |b: &Burst| {
        listed.get(&b.source).is_some_and(|times| {
            times
                .iter()
                .any(|t| *t <= b.start && b.start - t <= LISTING_LEAD_MS)
        })
    };
    let mut trials = Vec::new();
    for (_, landed, writers) in landed_batches(views, score) {
        let candidates = live_sources(views, landed);
        let honest = honest(score, &candidates, &writers);
        if honest == 0 {
            continue;
        }
        let first = bursts
            .iter()
            .filter(|b| b.start > landed && b.start <= landed + FETCH_LAG_MS)
            .filter(|b| !after_listing(b))
            .min_by(|a, b| a.start.total_cmp(&b.start))
            .map(|b| b.source);
        let guess = first.or_else(|| pick(&candidates, rng));
        trials.push(Trial {
            success: guess
                .and_then(|g| score.user(&g))
                .is_some_and(|u| writers.contains(&u)),
            chance: honest as f64 / candidates.len() as f64,
        });
    }
    AttackResult::new(
        "landing-fetch",
        "RPC",
        "who wrote a batch (a fetch burst right after it landed)",
        &trials,
    )
}

/// RPC: a scan fetches the user's batches each with the same covers every time, from whatever
/// address. For an address of a user who sends from two (the second address of a device,
/// `second_device` false: `session-link`; a second device, true: `device-link`), the other
/// source with which it shares the most rarely fetched batches is guessed to be the same
/// user's: the sum, over the batches both fetched, of `ln(sources / sources that fetched it)`
/// squared (a batch that many sources fetched says little). Candidates are every other source
/// that fetched.
fn address_link(
    bursts: &[Burst],
    score: &Score,
    second_device: bool,
    rng: &mut StdRng,
) -> AttackResult {
    let mut fetched: BTreeMap<IpAddr, BTreeSet<Batch>> = BTreeMap::new();
    for b in bursts {
        fetched
            .entry(b.source)
            .or_default()
            .extend(b.batches.iter().copied());
    }
    let mut fetchers: BTreeMap<Batch, usize> = BTreeMap::new();
    for set in fetched.values() {
        for b in set {
            *fetchers.entry(*b).or_default() += 1;
        }
    }
    let sources = fetched.len() as f64;
    let weight: BTreeMap<Batch, f64> = fetchers
        .into_iter()
        .map(|(b, n)| (b, (sources / n as f64).ln().powi(2)))
        .collect();
    let asked = if second_device {
        &score.second_device_ips
    } else {
        &score.roaming_ips
    };
    let mut trials = Vec::new();
    for source in asked {
        let (Some(user), Some(mine)) = (score.user(source), fetched.get(source)) else {
            continue;
        };
        let others: Vec<(IpAddr, f64)> = fetched
            .iter()
            .filter(|(s, _)| *s != source)
            .map(|(s, set)| (*s, mine.intersection(set).map(|b| weight[b]).sum::<f64>()))
            .collect();
        let same = others
            .iter()
            .filter(|(s, _)| score.user(s) == Some(user))
            .count();
        if same == 0 {
            continue;
        }
        let best = others.iter().map(|(_, v)| *v).fold(0.0f64, f64::max);
        let closest: Vec<IpAddr> = others
            .iter()
            .filter(|(_, v)| *v >= best)
            .map(|(s, _)| *s)
            .collect();
        let guess = pick(&closest, rng);
        trials.push(Trial {
            success: guess.and_then(|g| score.user(&g)) == Some(user),
            chance: same as f64 / others.len() as f64,
        });
    }
    if second_device {
        AttackResult::new(
            "device-link",
            "RPC",
            "which address is the same user's (a second device, without a scan cache, by the batches it fetches)",
            &trials,
        )
    } else {
        AttackResult::new(
            "session-link",
            "RPC",
            "which address is the same user's (a session of the same device from another address, by the batches it fetches)",
            &trials,
        )
    }
}

/// Whether `call` is a listing of the app (no batch named, not a system entity).
fn is_listing(call: &RpcCall) -> bool {
    expression(call).is_some_and(|e| {
        e.starts_with("project = ")
            && super::batches_in(e).is_empty()
            && !e.contains("privsvc")
            && !e.contains("$owner")
    })
}

/// The listings of each source, one time per listing (its pages grouped).
fn listings(views: &Views) -> BTreeMap<IpAddr, Vec<Ms>> {
    let mut by_source: BTreeMap<IpAddr, Vec<Ms>> = BTreeMap::new();
    for c in views.rpc.iter().filter(|c| is_listing(c)) {
        by_source.entry(c.source).or_default().push(c.at);
    }
    for times in by_source.values_mut() {
        times.sort_by(f64::total_cmp);
        let mut grouped: Vec<Ms> = Vec::new();
        for t in times.iter() {
            match grouped.last() {
                Some(last) if t - last <= PAGE_GAP_MS => {}
                _ => grouped.push(*t),
            }
        }
        *times = grouped;
    }
    by_source
}

/// RPC: a session lists on its own timer, never twice within the shortest tail interval; a
/// listing closer than that to the session's previous or next one was made on demand (the
/// rarity check right before a write). Records leave for the ledger about in the order they
/// were checked, so the batches, in landing order, take the pending on-demand listings first in,
/// first out: each takes as many of the earliest untaken ones of the window before it landed
/// (the random delay, a batching round, two blocks) as it holds records, and the earliest's
/// source is guessed to have written a record of it. With none pending, it abstains.
/// Candidates are the sessions live at the landing.
fn rarity_on_demand(views: &Views, score: &Score, known: Known) -> AttackResult {
    let by_source = listings(views);
    let tail_min = known.tail_min_ms as f64;
    let mut off_schedule: Vec<(Ms, IpAddr)> = Vec::new();
    for (source, times) in &by_source {
        for (i, t) in times.iter().enumerate() {
            let before = i.checked_sub(1).map(|j| t - times[j]);
            let after = times.get(i + 1).map(|n| n - t);
            if before.is_some_and(|d| d < tail_min) || after.is_some_and(|d| d < tail_min) {
                off_schedule.push((*t, *source));
            }
        }
    }
    off_schedule.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut taken = vec![false; off_schedule.len()];
    let window = (known.delay_ms_max + known.max_wait_ms) as f64 + 3_000.0;
    let mut records_in: BTreeMap<Batch, usize> = BTreeMap::new();
    for r in &views.ledger.records {
        *records_in.entry((r.block, r.creator)).or_default() += 1;
    }
    let mut landed = landed_batches(views, score);
    landed.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut trials = Vec::new();
    for (batch, landed, writers) in landed {
        let pending: Vec<usize> = (0..off_schedule.len())
            .filter(|i| !taken[*i])
            .filter(|i| {
                let t = off_schedule[*i].0;
                t < landed - 500.0 && t >= landed - window
            })
            .collect();
        let Some(first) = pending.first() else {
            continue;
        };
        let guess = off_schedule[*first].1;
        for i in pending
            .iter()
            .take(records_in.get(&batch).copied().unwrap_or(1))
        {
            taken[*i] = true;
        }
        let candidates: Vec<IpAddr> = by_source
            .iter()
            .filter(|(_, times)| times.iter().any(|t| (t - landed).abs() <= LIVE_WINDOW_MS))
            .map(|(s, _)| *s)
            .collect();
        let honest = honest(score, &candidates, &writers);
        if honest == 0 {
            continue;
        }
        trials.push(Trial {
            success: score.user(&guess).is_some_and(|u| writers.contains(&u)),
            chance: honest as f64 / candidates.len() as f64,
        });
    }
    AttackResult::new(
        "rarity-on-demand",
        "RPC",
        "who wrote a batch (a listing made on demand just before a submission)",
        &trials,
    )
}

/// RPC with the issuer: an issue request (which names the wallet) follows, by one round trip,
/// the read of the issuer's key that prepared it. The source of the latest issuer-key read in
/// the [`KEY_READ_LAG_MS`] before an issue request is guessed to be the wallet's; else one of
/// the sources live then.
fn key_read_to_issue(views: &Views, score: &Score, rng: &mut StdRng) -> AttackResult {
    let mut trials = Vec::new();
    let Some(seen) = views.issuer.as_deref().and_then(|i| views.relayers.get(i)) else {
        return AttackResult::new(
            "key-read-to-issue",
            "RPC + issuer",
            "which address is which wallet (an issuer-key read right before an issue request)",
            &trials,
        );
    };
    let key_reads: Vec<&RpcCall> = views
        .rpc
        .iter()
        .filter(|c| expression(c).is_some_and(|e| e.contains(ISSUER_KEY_KIND)))
        .collect();
    for r in seen
        .iter()
        .filter(|r| r.method == "POST" && r.path.starts_with("/v1/tokens/issue"))
    {
        let Some(wallet) = r
            .json()
            .and_then(|b| b["wallet"].as_str().and_then(|w| w.parse::<Address>().ok()))
        else {
            continue;
        };
        let candidates = live_sources(views, r.at);
        let owners: BTreeSet<usize> = score
            .wallets
            .iter()
            .enumerate()
            .filter(|(_, w)| **w == wallet)
            .map(|(u, _)| u)
            .collect();
        let honest = honest(score, &candidates, &owners);
        if honest == 0 {
            continue;
        }
        let latest = key_reads
            .iter()
            .filter(|c| c.at <= r.at && c.at >= r.at - KEY_READ_LAG_MS)
            .max_by(|a, b| a.at.total_cmp(&b.at))
            .map(|c| c.source);
        let guess = latest.or_else(|| pick(&candidates, rng));
        trials.push(Trial {
            success: guess
                .and_then(|g| score.user(&g))
                .is_some_and(|u| owners.contains(&u)),
            chance: honest as f64 / candidates.len() as f64,
        });
    }
    AttackResult::new(
        "key-read-to-issue",
        "RPC + issuer",
        "which address is which wallet (an issuer-key read right before an issue request)",
        &trials,
    )
}

/// The address in an `$owner = addr(0x…)` query.
fn owner_queried(call: &RpcCall) -> Option<Address> {
    let e = expression(call)?;
    let rest = e.strip_prefix("$owner = addr(")?;
    rest.split(')').next()?.parse().ok()
}

/// RPC: a source that asks for the entities of a record's one-time owner (the copy check of a
/// verification) wrote it. One guess per record whose owner was asked for (the first asking
/// source); candidates are the sources live then. It abstains when nobody asks.
fn verify_own(views: &Views, score: &Score) -> AttackResult {
    let mut first_asked: BTreeMap<Address, (Ms, IpAddr)> = BTreeMap::new();
    for c in &views.rpc {
        if let Some(owner) = owner_queried(c) {
            first_asked.entry(owner).or_insert((c.at, c.source));
        }
    }
    let mut trials = Vec::new();
    for (owner, (at, source)) in first_asked {
        let Some(writer) = score.writer_of_owner.get(&owner).copied() else {
            continue;
        };
        let candidates: Vec<IpAddr> =
            active_sources(views.rpc.iter().map(|c| (&c.source, c.at)), at)
                .into_iter()
                .collect();
        let honest = honest(score, &candidates, &BTreeSet::from([writer]));
        if honest == 0 {
            continue;
        }
        trials.push(Trial {
            success: score.user(&source) == Some(writer),
            chance: honest as f64 / candidates.len() as f64,
        });
    }
    AttackResult::new(
        "verify-own",
        "RPC",
        "who wrote a record (a query for its one-time owner, from the writer's address)",
        &trials,
    )
}

/// Another user, from the ledger: a record whose envelope `hour` is off its block's hour was
/// sealed on a device whose clock is off; records off by the same number of hours are guessed
/// to be one writer's. For each such record, one of the others off by as much is guessed;
/// chance is the share of the writer's other records among every other record. It abstains
/// when every record's hour is its block's.
fn clock_hour(views: &Views, score: &Score, rng: &mut StdRng) -> AttackResult {
    let records: Vec<(usize, Option<i64>)> = views
        .ledger
        .records
        .iter()
        .filter_map(|r| {
            let writer = *score.writer_of_entity.get(&r.key)?;
            let offset = match (r.hour, r.block_timestamp) {
                (Some(h), Some(t)) => Some(h as i64 - (t / 3_600) as i64),
                _ => None,
            };
            Some((writer, offset))
        })
        .collect();
    let mut trials = Vec::new();
    for (i, (writer, offset)) in records.iter().enumerate() {
        let Some(offset) = offset.filter(|o| *o != 0) else {
            continue;
        };
        let alike: Vec<usize> = records
            .iter()
            .enumerate()
            .filter(|(j, (_, o))| *j != i && *o == Some(offset))
            .map(|(_, (w, _))| *w)
            .collect();
        if alike.is_empty() {
            continue;
        }
        let others = records.len() - 1;
        let own = records
            .iter()
            .enumerate()
            .filter(|(j, (w, _))| *j != i && w == writer)
            .count();
        trials.push(Trial {
            success: pick(&alike, rng) == Some(*writer),
            chance: own as f64 / others.max(1) as f64,
        });
    }
    AttackResult::new(
        "clock-hour",
        "another user",
        "which records have one writer (envelope hours off their blocks' by the same amount)",
        &trials,
    )
}
