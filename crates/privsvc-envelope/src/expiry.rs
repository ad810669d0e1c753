//! Expiry buckets (docs/PROTOCOL.md §3): lifetimes are rounded up to one of five values.

use crate::EnvelopeError;

/// The allowed lifetimes in seconds: 1 h, 1 d, 7 d, 30 d, 90 d.
pub const EXPIRY_BUCKETS: [u64; 5] = [3_600, 86_400, 604_800, 2_592_000, 7_776_000];

/// The longest allowed lifetime in seconds (90 days).
pub const MAX_EXPIRY_SECONDS: u64 = 7_776_000;

/// A relative lifetime, as the client accepts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expires {
    /// Seconds.
    Seconds(u64),
    /// Minutes of 60 s.
    Minutes(u64),
    /// Hours of 3600 s.
    Hours(u64),
    /// Days of 86400 s.
    Days(u64),
    /// Weeks of 7 days.
    Weeks(u64),
    /// Months of 30 days (the Arkiv SDK's month).
    Months(u64),
}

/// The lifetime in seconds (saturating at `u64::MAX`; not yet rounded to a bucket).
///
/// ```
/// use privsvc_envelope::{expiry_seconds, Expires};
/// assert_eq!(expiry_seconds(Expires::Days(2)), 172_800);
/// ```
pub fn expiry_seconds(expires: Expires) -> u64 {
    let (n, unit) = match expires {
        Expires::Seconds(n) => (n, 1),
        Expires::Minutes(n) => (n, 60),
        Expires::Hours(n) => (n, 3_600),
        Expires::Days(n) => (n, 86_400),
        Expires::Weeks(n) => (n, 604_800),
        Expires::Months(n) => (n, 2_592_000),
    };
    n.saturating_mul(unit)
}

/// Rounds a lifetime up to the smallest bucket that holds it; 0 and more than 90 days are
/// errors.
///
/// ```
/// use privsvc_envelope::expiry_bucket;
/// assert_eq!(expiry_bucket(1).unwrap(), 3_600);
/// assert_eq!(expiry_bucket(86_401).unwrap(), 604_800);
/// assert!(expiry_bucket(7_776_001).is_err());
/// ```
pub fn expiry_bucket(seconds: u64) -> Result<u64, EnvelopeError> {
    if seconds == 0 {
        return Err(EnvelopeError::ZeroExpiry);
    }
    EXPIRY_BUCKETS
        .iter()
        .copied()
        .find(|b| seconds <= *b)
        .ok_or(EnvelopeError::ExpiryTooLong(seconds))
}

/// Whether `seconds` is exactly one of the buckets.
pub fn is_bucket(seconds: u64) -> bool {
    EXPIRY_BUCKETS.contains(&seconds)
}
