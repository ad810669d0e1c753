//! When an envelope may be published (docs/PROTOCOL.md §3, envelope v2).
//!
//! Every body carries `hour = floor(unix seconds / 3600)` at sealing. A relayer accepts a
//! submission only while `hour` is in `[now_hour - 2, now_hour + 1]`
//! ([`check_hour_window`]), and a verifier refuses an entity whose creation block is at or
//! after `(hour + 4) x 3600` ([`check_created_in_time`]). So an onlooker who copies a sealed
//! envelope cannot have it published again once its owner's record has expired: the copy is
//! refused by honest relayers and, if a rogue relayer writes it anyway, by every verifier.

use crate::EnvelopeError;

/// Seconds in one hour, the unit of `hour`.
pub const HOUR_SECONDS: u64 = 3_600;

/// How many hours before the current one a relayer still accepts.
pub const WINDOW_HOURS_BEFORE: u64 = 2;

/// How many hours after the current one a relayer accepts (clock skew).
pub const WINDOW_HOURS_AFTER: u64 = 1;

/// An entity created at or after `(hour + REPUBLISH_HOURS) x 3600` is refused by verifiers.
pub const REPUBLISH_HOURS: u64 = 4;

/// The largest `hour` a body may carry: the largest integer JSON represents exactly
/// (2^53 - 1), far beyond any real clock.
pub const MAX_HOUR: u64 = (1 << 53) - 1;

/// The hour of a Unix time: `floor(unix_secs / 3600)`.
///
/// ```
/// assert_eq!(privsvc_envelope::hour_of(7_199), 1);
/// assert_eq!(privsvc_envelope::hour_of(7_200), 2);
/// ```
pub fn hour_of(unix_secs: u64) -> u64 {
    unix_secs / HOUR_SECONDS
}

/// Checks that `hour` is in `[hour_of(now_secs) - 2, hour_of(now_secs) + 1]`, the window in
/// which a relayer accepts a submission.
///
/// ```
/// use privsvc_envelope::check_hour_window;
/// let now = 100 * 3600 + 59;
/// assert!(check_hour_window(98, now).is_ok());
/// assert!(check_hour_window(101, now).is_ok());
/// assert!(check_hour_window(97, now).is_err());
/// assert!(check_hour_window(102, now).is_err());
/// ```
pub fn check_hour_window(hour: u64, now_secs: u64) -> Result<(), EnvelopeError> {
    let now_hour = hour_of(now_secs);
    let earliest = now_hour.saturating_sub(WINDOW_HOURS_BEFORE);
    let latest = now_hour.saturating_add(WINDOW_HOURS_AFTER);
    if (earliest..=latest).contains(&hour) {
        Ok(())
    } else {
        Err(EnvelopeError::HourOutsideWindow {
            hour,
            now_hour,
            earliest,
            latest,
        })
    }
}

/// The first creation time (Unix seconds) a verifier refuses for an envelope of `hour`:
/// `(hour + 4) x 3600` (saturating).
pub fn republish_deadline(hour: u64) -> u64 {
    hour.saturating_add(REPUBLISH_HOURS)
        .saturating_mul(HOUR_SECONDS)
}

/// The verifier rule: refuses an entity whose creation block timestamp `created_secs` is at or
/// after [`republish_deadline`]`(hour)`.
///
/// ```
/// use privsvc_envelope::check_created_in_time;
/// assert!(check_created_in_time(100, 104 * 3600 - 1).is_ok());
/// assert!(check_created_in_time(100, 104 * 3600).is_err());
/// ```
pub fn check_created_in_time(hour: u64, created_secs: u64) -> Result<(), EnvelopeError> {
    let deadline = republish_deadline(hour);
    if created_secs < deadline {
        Ok(())
    } else {
        Err(EnvelopeError::CreatedTooLate {
            hour,
            created: created_secs,
            deadline,
        })
    }
}
