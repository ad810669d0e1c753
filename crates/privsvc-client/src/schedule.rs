//! `SessionSchedule`: the timers of a session's own reads (DESIGN 10's transcript rule: every
//! read is made on these timers, never because a write was requested, accepted or landed).

use std::time::Duration;

/// The session's timers. Every field is a range `(low, high)`: each wait is drawn uniformly
/// from it with the client's own randomness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionSchedule {
    /// Between two tails (an incremental listing of the project's new records), whether or not
    /// a write is pending. Default 15 to 45 s.
    pub tail: (Duration, Duration),
    /// How long the status polls of a written record continue after `written`. Default 0 to
    /// 60 s.
    pub status_tail: (Duration, Duration),
    /// A token refill is scheduled when the store holds fewer usable tokens of the app than
    /// this. Default 5.
    pub refill_below: usize,
    /// The first refill of a session, at a random moment within this. Default 0 to 10 minutes.
    pub first_refill: (Duration, Duration),
    /// Each later refill, and each later look at the store. Default 10 minutes to 6 hours.
    pub later_refill: (Duration, Duration),
}

impl Default for SessionSchedule {
    fn default() -> Self {
        SessionSchedule {
            tail: (Duration::from_secs(15), Duration::from_secs(45)),
            status_tail: (Duration::ZERO, Duration::from_secs(60)),
            refill_below: 5,
            first_refill: (Duration::ZERO, Duration::from_secs(600)),
            later_refill: (Duration::from_secs(600), Duration::from_secs(6 * 3600)),
        }
    }
}

impl SessionSchedule {
    /// Every range multiplied by `factor` (a compressed day for tests and the attack lab).
    pub fn scaled(self, factor: f64) -> Self {
        let s = |(a, b): (Duration, Duration)| (a.mul_f64(factor), b.mul_f64(factor));
        SessionSchedule {
            tail: s(self.tail),
            status_tail: s(self.status_tail),
            refill_below: self.refill_below,
            first_refill: s(self.first_refill),
            later_refill: s(self.later_refill),
        }
    }
}
