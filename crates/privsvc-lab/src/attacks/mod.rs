//! The attacks. Each is a small function from one party's view (or an allowed pair's) to
//! guesses, scored against the truth by the lab. The `Score` index is built from the truth and
//! is only ever read to score.

mod active;
mod app_channels;
mod passive;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use alloy_primitives::{Address, B256};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::stats::{Measured, Trial, Verdict};
use crate::truth::Truth;
use crate::views::Views;

pub use active::ActiveOutcomes;
pub(crate) use passive::batches_in;

/// One attack's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AttackResult {
    /// Stable identifier (used by tests and by the residual list).
    pub id: &'static str,
    /// The party (or allowed pair) whose view the attack uses.
    pub party: &'static str,
    /// What the attack guesses, in a few words.
    pub attack: &'static str,
    /// The figures.
    pub measured: Measured,
    /// The verdict.
    pub verdict: Verdict,
    /// Whether the design accepts this channel (a residual, stated in docs/PRIVACY.md).
    pub residual: bool,
}

impl AttackResult {
    pub(crate) fn new(
        id: &'static str,
        party: &'static str,
        attack: &'static str,
        trials: &[Trial],
    ) -> Self {
        let measured = Measured::of(trials);
        AttackResult {
            id,
            party,
            attack,
            verdict: measured.verdict(),
            measured,
            residual: RESIDUALS.contains(&id),
        }
    }
}

/// Attacks that guess only when they see their signal: with none (an honest run), they score no
/// guess, which is the result, not a gap in the lab.
pub const ABSTAINING: &[&str] = &[
    "issue-to-spend",
    "first-spend",
    "rarity-on-demand",
    "verify-own",
    "clock-hour",
    // Its victims write with `minAnonymity` 6 at B; on a loaded machine a session's tails may
    // not show the batch in time and the write fails (the record is written all the same), so
    // no victim's batch is known to score.
    "cover-drift",
];

/// Attacks the design cannot stop: measured and stated, not held to chance.
pub const RESIDUALS: &[&str] = &[
    // Timing across the relay: the relay forwards at once unless it runs rounds (`ROUND_MS`),
    // which shrink these without closing them (docs/PRIVACY.md, "What a network watcher sees").
    "onlooker-relayer-timing",
    "issuer-onlooker-wallet",
    "n-minus-one-flood",
    // A new wallet's first tokens come from its first session's refill, the only issue request
    // it ever made: a spend soon after can be matched to it where few wallets are new.
    "first-spend",
    // A device without a scan cache fetches the user's batches again, with their covers: the
    // same set as the user's other device fetched.
    "device-link",
    // A session that ends a few seconds after its write resolves stops all its requests then,
    // status polls included: at chance among a few dozen users, above it among 200.
    "polls-stop-relay",
    "polls-stop-onlooker",
];

/// The truth, indexed for scoring.
#[derive(Default)]
pub(crate) struct Score {
    /// Source address to user.
    pub(crate) user_of_ip: BTreeMap<IpAddr, usize>,
    /// One-time owner to writer.
    pub(crate) writer_of_owner: BTreeMap<Address, usize>,
    /// Entity key to writer.
    pub(crate) writer_of_entity: BTreeMap<B256, usize>,
    /// Batch `(block, creator)` to the users with a record in it.
    pub(crate) writers_of_batch: BTreeMap<(u64, Address), BTreeSet<usize>>,
    /// Wallet of each user.
    pub(crate) wallets: Vec<Address>,
    /// Whether each user came back from an earlier day (otherwise a new wallet).
    pub(crate) returning: Vec<bool>,
    /// One-time owner to the session that wrote its record.
    pub(crate) session_of_owner: BTreeMap<Address, usize>,
    /// The sessions that ran on the client's default stores.
    pub(crate) default_store_sessions: BTreeSet<usize>,
    /// The second addresses of the users' devices.
    pub(crate) roaming_ips: BTreeSet<IpAddr>,
    /// The addresses of the users' second devices.
    pub(crate) second_device_ips: BTreeSet<IpAddr>,
}

impl Score {
    pub(crate) fn new(truth: &Truth, views: &Views) -> Score {
        let writer_of_entity = truth.writer_of_entity();
        let mut writers_of_batch: BTreeMap<(u64, Address), BTreeSet<usize>> = BTreeMap::new();
        for r in &views.ledger.records {
            if let Some(u) = writer_of_entity.get(&r.key) {
                writers_of_batch
                    .entry((r.block, r.creator))
                    .or_default()
                    .insert(*u);
            }
        }
        Score {
            user_of_ip: truth
                .users
                .iter()
                .flat_map(|u| u.addresses().map(move |a| (a, u.index)))
                .collect(),
            writer_of_owner: truth.writer_of_owner(),
            writer_of_entity,
            writers_of_batch,
            wallets: truth.users.iter().map(|u| u.wallet).collect(),
            returning: truth.users.iter().map(|u| u.returning).collect(),
            session_of_owner: truth.session_of_owner(),
            default_store_sessions: truth
                .sessions
                .iter()
                .enumerate()
                .filter(|(_, s)| s.default_stores)
                .map(|(i, _)| i)
                .collect(),
            roaming_ips: truth.users.iter().filter_map(|u| u.roaming_ip).collect(),
            second_device_ips: truth
                .users
                .iter()
                .filter_map(|u| u.second_device_ip)
                .collect(),
        }
    }

    /// Whether the record of `owner` was paid with a first spend: its writer is a new wallet,
    /// or its session ran on the default stores (tokens of its own fetching only).
    pub(crate) fn first_spend(&self, owner: &Address) -> bool {
        let new_wallet = self
            .writer_of_owner
            .get(owner)
            .is_some_and(|u| !self.returning.get(*u).copied().unwrap_or(false));
        let default_stores = self
            .session_of_owner
            .get(owner)
            .is_some_and(|s| self.default_store_sessions.contains(s));
        new_wallet || default_stores
    }

    pub(crate) fn user(&self, ip: &IpAddr) -> Option<usize> {
        self.user_of_ip.get(ip).copied()
    }
}

/// Picks one of `items` at random (the attacker's coin).
pub(crate) fn pick<T: Clone>(items: &[T], rng: &mut StdRng) -> Option<T> {
    items.choose(rng).cloned()
}

/// What the attackers know of the clients' and relayers' settings (public defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// The tokens' minimum age, ms.
    pub min_age_ms: u64,
    /// The longest random delay before a submission, ms.
    pub delay_ms_max: u64,
    /// The shortest wait between two of a session's tails, ms.
    pub tail_min_ms: u64,
    /// The relayers' longest wait for a batch (`MAX_WAIT_MS`).
    pub max_wait_ms: u64,
}

/// Every passive attack on a run's views.
pub fn passive(views: &Views, truth: &Truth, known: Known, seed: u64) -> Vec<AttackResult> {
    let score = Score::new(truth, views);
    let mut results = passive::all(views, &score, known.min_age_ms, known.delay_ms_max, seed);
    results.extend(app_channels::all(views, &score, known, seed));
    results
}

/// Every active attack's result, from what the active phases recorded.
pub fn active(views: &Views, truth: &Truth, outcomes: &ActiveOutcomes) -> Vec<AttackResult> {
    let score = Score::new(truth, views);
    active::all(views, &score, outcomes)
}
