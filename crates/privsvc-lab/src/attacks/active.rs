//! Active attacks: scored by the phase that ran them (`crate::active`), reported here.

use std::collections::BTreeMap;

use super::{AttackResult, Score};
use crate::stats::Trial;
use crate::views::Views;

/// The scored guesses of each active phase, by attack id.
#[derive(Debug, Clone, Default)]
pub struct ActiveOutcomes {
    /// Trials by attack id.
    pub trials: BTreeMap<&'static str, Vec<Trial>>,
}

impl ActiveOutcomes {
    /// Adds a scored guess of attack `id`.
    pub fn push(&mut self, id: &'static str, success: bool, chance: f64) {
        self.trials
            .entry(id)
            .or_default()
            .push(Trial { success, chance });
    }

    /// Records that attack `id`'s phase ran, whether or not it scored a guess (an abstaining
    /// attack is reported with no trials, not left out).
    pub fn ran(&mut self, id: &'static str) {
        self.trials.entry(id).or_default();
    }
}

/// Party and description of each active attack, in report order.
pub const ACTIVE_ATTACKS: &[(&str, &str, &str)] = &[
    (
        "replay-submission",
        "OHTTP relay (active)",
        "a replayed submission writes again or answers differently",
    ),
    (
        "replay-issue",
        "OHTTP relay (active)",
        "a replayed issue request burns the user's quota or answers differently",
    ),
    (
        "key-substitution",
        "OHTTP relay (active)",
        "its own gateway key in a heartbeat for a real relayer: requests it decrypts",
    ),
    (
        "n-minus-one",
        "OHTTP relay (active)",
        "which record is the target's (n-1: an empty queue read off /healthz, then fillers)",
    ),
    (
        "n-minus-one-flood",
        "OHTTP relay (active)",
        "which record is the target's (n-1: the queue flushed with its own fillers first)",
    ),
    (
        "copies",
        "another user (active)",
        "a copied record (create and transfer) accepted as the owner's",
    ),
    (
        "copy-fetch",
        "another user + RPC",
        "who owns a record (the address that fetches its copy's batch)",
    ),
    (
        "ratchet",
        "relayer (active)",
        "a write kept waiting by a position counting down",
    ),
    (
        "refusal",
        "relayer (active)",
        "a write failed by a relayer answering 400",
    ),
    (
        "head-of-line",
        "another user (active)",
        "a write stalled behind submissions whose holds can never be met",
    ),
    (
        "issuer-flood",
        "another user (active)",
        "tokens past the per-source issuer limit (many wallets, one address, through /v1/ohttp)",
    ),
    (
        "resume-link",
        "RPC",
        "which earlier session a returning session (scan cache, new address) continues, by its resume block",
    ),
    (
        "relay-steering",
        "OHTTP relay (active)",
        "writes steered to relayer C by 400s the relay made outside the encapsulation",
    ),
    (
        "heartbeat-spam",
        "another user (active)",
        "fresh sessions that could not write or were steered, by heartbeats naming relayers A and B",
    ),
    (
        "cover-drift",
        "RPC",
        "which batch is the user's (fetch sets intersected across the expiry of its covers)",
    ),
];

pub(super) fn all(_views: &Views, _score: &Score, outcomes: &ActiveOutcomes) -> Vec<AttackResult> {
    ACTIVE_ATTACKS
        .iter()
        .filter_map(|(id, party, attack)| {
            outcomes
                .trials
                .get(id)
                .map(|t| AttackResult::new(id, party, attack, t))
        })
        .collect()
}
