//! `SessionSchedule`: the timers of a session's own reads (docs/PROTOCOL.md §8.2: every
//! read is made on these timers, never because a write was requested, accepted or landed).

use std::time::Duration;

/// The session's timers. Every field is a range `(low, high)`: each wait is drawn uniformly
/// from it with the client's own randomness.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionSchedule {
    /// Between two tails (an incremental listing of the project's new records), whether or not
    /// a write is pending. Default 15 to 45 s.
    pub tail: (Duration, Duration),
    /// How long the status polls of a record written after its poll horizon continue after
    /// `written`. Default 0 to 60 s.
    pub status_tail: (Duration, Duration),
    /// The poll horizon of a submission, in batching rounds of its relayer (`maxWaitMs`, the
    /// gap of `minIntervalBlocks` and a block): drawn uniformly from this range at the 202, the
    /// status polls go on until then whether or not the record was written (so when they stop
    /// says nothing of when it landed). Default 1 to 3.
    pub status_horizon_rounds: (f64, f64),
    /// A token refill is scheduled when the store holds fewer usable tokens of the app than
    /// this. Default 5.
    pub refill_below: usize,
    /// The first refill of a session, at a random moment within this. Default 0 to 10 minutes.
    pub first_refill: (Duration, Duration),
    /// Each later refill, and each later look at the store. Default 10 minutes to 6 hours.
    pub later_refill: (Duration, Duration),
    /// Between two scans (a listing, the tags of the new records opened, and one fetch of
    /// `cover_batches + 1` batches of one closed window), whether or not the user wrote
    /// anything. The first scan runs when the session starts. Default 1 to 3 minutes.
    pub scan: (Duration, Duration),
    /// The age, in blocks, at which a batch holding the user's records is fetched, drawn
    /// uniformly from this range for each batch; the window an idle scan fetches is drawn from
    /// the closed windows of the same ages, so that the age of a fetched window says nothing.
    /// The low end is at least [`crate::COVER_WINDOW_BLOCKS`] (the covers must be final).
    /// Default 32 to 900 blocks (about a minute to half an hour).
    pub fetch_age_blocks: (u64, u64),
}

impl Default for SessionSchedule {
    fn default() -> Self {
        SessionSchedule {
            tail: (Duration::from_secs(15), Duration::from_secs(45)),
            status_tail: (Duration::ZERO, Duration::from_secs(60)),
            status_horizon_rounds: (1.0, 3.0),
            refill_below: 5,
            first_refill: (Duration::ZERO, Duration::from_secs(600)),
            later_refill: (Duration::from_secs(600), Duration::from_secs(6 * 3600)),
            scan: (Duration::from_secs(60), Duration::from_secs(180)),
            fetch_age_blocks: (32, 900),
        }
    }
}

impl SessionSchedule {
    /// Every time range multiplied by `factor` (a compressed day for tests and the attack lab);
    /// block counts are left as they are.
    pub fn scaled(self, factor: f64) -> Self {
        let s = |(a, b): (Duration, Duration)| (a.mul_f64(factor), b.mul_f64(factor));
        SessionSchedule {
            tail: s(self.tail),
            status_tail: s(self.status_tail),
            status_horizon_rounds: self.status_horizon_rounds,
            refill_below: self.refill_below,
            first_refill: s(self.first_refill),
            later_refill: s(self.later_refill),
            scan: s(self.scan),
            fetch_age_blocks: self.fetch_age_blocks,
        }
    }
}
