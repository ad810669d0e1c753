//! Channels the relayer closes (docs/PROTOCOL.md §7), reopened on purpose for the attack lab (docs/PRIVACY.md):
//! an attack that cannot win against a leaky relayer proves nothing. Settable only with the
//! `lab-leaks` feature (`RelayerConfig::lab_leaks`); without it every switch is off
//! and the leaky branches are dead code.

/// The leaky settings of one relayer. All off by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LabLeaks {
    /// A batch keeps the records' arrival order on the ledger (no shuffle).
    pub arrival_order: bool,
    /// No envelope idempotence: the same sealed envelope again is a new record, and the batcher
    /// does not look for it on the ledger first, so it is written again when no token stops it.
    pub resubmissions_stored_again: bool,
    /// The planner looks for a batch among the oldest `MAX_BATCH` records only: holds that
    /// can never be met stall every record behind them.
    pub planner_oldest_only: bool,
    /// The mounted issuer signs a repeated issue request again at the wallet's expense.
    pub issue_replays_signed_again: bool,
}
