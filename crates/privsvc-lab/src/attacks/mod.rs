//! The attacks. Each is a small function from one party's view (or an allowed pair's) to
//! guesses, scored against the truth by the lab. The `Score` index is built from the truth and
//! is only ever read to score.

mod active;
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

/// Attacks the design cannot stop: measured and stated, not held to chance.
pub const RESIDUALS: &[&str] = &[
    "size-class-relay",
    "size-class-onlooker",
    "onlooker-relayer-timing",
    "issuer-onlooker-wallet",
    "n-minus-one-flood",
];

/// The truth, indexed for scoring.
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
            user_of_ip: truth.users.iter().map(|u| (u.ip, u.index)).collect(),
            writer_of_owner: truth.writer_of_owner(),
            writer_of_entity,
            writers_of_batch,
            wallets: truth.users.iter().map(|u| u.wallet).collect(),
        }
    }

    pub(crate) fn user(&self, ip: &IpAddr) -> Option<usize> {
        self.user_of_ip.get(ip).copied()
    }
}

/// Picks one of `items` at random (the attacker's coin).
pub(crate) fn pick<T: Clone>(items: &[T], rng: &mut StdRng) -> Option<T> {
    items.choose(rng).cloned()
}

/// Every passive attack on a run's views.
pub fn passive(views: &Views, truth: &Truth, min_age_ms: u64, seed: u64) -> Vec<AttackResult> {
    let score = Score::new(truth, views);
    passive::all(views, &score, min_age_ms, seed)
}

/// Every active attack's result, from what the active phases recorded.
pub fn active(views: &Views, truth: &Truth, outcomes: &ActiveOutcomes) -> Vec<AttackResult> {
    let score = Score::new(truth, views);
    active::all(views, &score, outcomes)
}
