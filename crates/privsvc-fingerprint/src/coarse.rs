//! Coarser replacement values for precise ones.
//!
//! [`day`] and [`hour`] take a Unix time in seconds or in milliseconds: values of
//! [`MS_THRESHOLD`] (10^11) or more are read as milliseconds (10^11 seconds is the year 5138,
//! 10^11 ms is 1973). The result is in the same unit as the input.

/// Inputs at or above this value are milliseconds, below it seconds.
pub const MS_THRESHOLD: u64 = 100_000_000_000;

/// The decimals of a coordinate that [`geo`] keeps by default (about 1.1 km).
pub const GEO_DECIMALS: u32 = 2;

fn floor_to(t: u64, seconds: u64) -> u64 {
    let unit = if t >= MS_THRESHOLD {
        seconds * 1000
    } else {
        seconds
    };
    t - t % unit
}

/// The start of the UTC day containing `t` (seconds or milliseconds, same unit out).
///
/// ```
/// use privsvc_fingerprint::coarse;
/// assert_eq!(coarse::day(1_716_212_345), 1_716_163_200);
/// assert_eq!(coarse::day(1_716_212_345_678), 1_716_163_200_000);
/// ```
pub fn day(t: u64) -> u64 {
    floor_to(t, 86_400)
}

/// The start of the UTC hour containing `t` (seconds or milliseconds, same unit out).
///
/// ```
/// use privsvc_fingerprint::coarse;
/// assert_eq!(coarse::hour(1_716_212_345), 1_716_210_000);
/// ```
pub fn hour(t: u64) -> u64 {
    floor_to(t, 3_600)
}

/// `x` rounded to `decimals` decimal places (half away from zero); use [`GEO_DECIMALS`] for
/// coordinates. More than 15 decimals returns `x` unchanged.
///
/// ```
/// use privsvc_fingerprint::coarse;
/// assert_eq!(coarse::geo(52.520_008, coarse::GEO_DECIMALS), 52.52);
/// assert_eq!(coarse::geo(-13.404_954, 2), -13.4);
/// ```
pub fn geo(x: f64, decimals: u32) -> f64 {
    if decimals > 15 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(decimals as i32);
    (x * scale).round() / scale
}

/// `x` rounded down to a multiple of `step` (towards minus infinity); `step = 0` returns `x`.
///
/// ```
/// use privsvc_fingerprint::coarse;
/// assert_eq!(coarse::bucket(37, 10), 30);
/// assert_eq!(coarse::bucket(-1, 10), -10);
/// ```
pub fn bucket(x: i64, step: u64) -> i64 {
    if step == 0 {
        return x;
    }
    let (x, step) = (x as i128, step as i128);
    let floored = x - x.rem_euclid(step);
    floored.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_and_hour_in_both_units() {
        assert_eq!(day(0), 0);
        assert_eq!(day(86_399), 0);
        assert_eq!(day(86_400), 86_400);
        assert_eq!(
            hour(MS_THRESHOLD - 1),
            MS_THRESHOLD - 1 - (MS_THRESHOLD - 1) % 3600
        );
        assert_eq!(hour(1_716_212_345_678), 1_716_210_000_000);
        assert_eq!(hour(1_716_210_000), 1_716_210_000);
    }

    #[test]
    fn geo_and_bucket_edges() {
        assert_eq!(geo(0.125, 2), 0.13);
        assert_eq!(geo(179.999, 2), 180.0);
        assert_eq!(geo(1.23456, 0), 1.0);
        assert!(geo(f64::NAN, 2).is_nan());
        assert_eq!(bucket(30, 10), 30);
        assert_eq!(bucket(5, 0), 5);
        assert_eq!(bucket(i64::MIN + 1, 3), i64::MIN);
        assert_eq!(bucket(i64::MAX, u64::MAX), 0);
        assert_eq!(bucket(-5, u64::MAX), i64::MIN);
    }
}
