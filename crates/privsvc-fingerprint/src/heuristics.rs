//! Per-attribute heuristics (documented in the crate docs).

use privsvc_attributes::{AttrValue, U256};

use crate::{CheckWarning, WarningCode};

const TIME_MIN_S: u64 = 946_684_800; // 2000-01-01T00:00:00Z
const TIME_MAX_S: u64 = 4_102_444_800; // 2100-01-01T00:00:00Z

const LOCATION_WORDS: [&str; 15] = [
    "lat",
    "latitude",
    "lon",
    "lng",
    "long",
    "longitude",
    "geo",
    "gps",
    "coord",
    "coords",
    "coordinates",
    "location",
    "loc",
    "position",
    "pos",
];
const POSTAL_WORDS: [&str; 5] = ["zip", "zipcode", "postcode", "postal", "plz"];

/// All warnings for one attribute.
pub(crate) fn check_attribute(name: &str, value: &AttrValue) -> Vec<CheckWarning> {
    let mut out = Vec::new();
    let mut push = |code, message: String| out.push(CheckWarning::new(code, Some(name), message));
    if let Some(m) = timestamp(value) {
        push(WarningCode::Timestamp, m);
    }
    if let Some(m) = location(name, value) {
        push(WarningCode::PreciseLocation, m);
    }
    if let Some(m) = postal(name, value) {
        push(WarningCode::PostalCode, m);
    }
    if let Some(m) = free_text(value) {
        push(WarningCode::FreeText, m);
    }
    out
}

fn has_word(name: &str, words: &[&str]) -> bool {
    name.split('_').any(|part| words.contains(&part))
}

/// The value as an integer, when it is one (numbers, or u256 that fits in u64).
fn as_integer(value: &AttrValue) -> Option<i128> {
    match value {
        AttrValue::I32(v) => Some(i128::from(*v)),
        AttrValue::U64(v) => Some(i128::from(*v)),
        AttrValue::U256(v) if *v <= U256::from(u64::MAX) => Some(i128::from(v.to::<u64>())),
        _ => None,
    }
}

fn timestamp(value: &AttrValue) -> Option<String> {
    let number = match value {
        AttrValue::Str(s)
            if matches!(s.len(), 10 | 13) && s.bytes().all(|b| b.is_ascii_digit()) =>
        {
            s.parse::<i128>().ok()
        }
        AttrValue::Str(s) => return iso_datetime(s),
        other => as_integer(other),
    }?;
    let (lo, hi) = (i128::from(TIME_MIN_S), i128::from(TIME_MAX_S));
    if (lo..=hi).contains(&number) && number % 3_600 != 0 {
        return Some(format!(
            "{number} looks like a Unix time in seconds with sub-hour precision; use coarse::hour or coarse::day"
        ));
    }
    if (lo * 1000..=hi * 1000).contains(&number) && number % 3_600_000 != 0 {
        return Some(format!(
            "{number} looks like a Unix time in milliseconds with sub-hour precision; use coarse::hour or coarse::day"
        ));
    }
    None
}

/// `YYYY-MM-DD[T ]HH:MM...` with non-zero minutes, seconds or fraction.
fn iso_datetime(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() < 16 {
        return None;
    }
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let shape = digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && matches!(b[10], b'T' | b't' | b' ')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16);
    if !shape {
        return None;
    }
    // Minutes onwards, up to a zone designator (Z, +hh:mm, -hh:mm).
    let tail_end = b[16..]
        .iter()
        .position(|c| matches!(c, b'Z' | b'z' | b'+' | b'-'))
        .map_or(b.len(), |p| p + 16);
    if b[14..tail_end]
        .iter()
        .any(|c| c.is_ascii_digit() && *c != b'0')
    {
        return Some(format!(
            "{s:?} is a date-time finer than an hour; keep only the date or the hour"
        ));
    }
    None
}

/// A decimal number `[-]d+[.d+]`: its value and number of fraction digits.
fn decimal(s: &str) -> Option<(f64, usize)> {
    let t = s.trim();
    let unsigned = t.strip_prefix('-').unwrap_or(t);
    let (int, frac) = match unsigned.split_once('.') {
        Some((i, f)) if !f.is_empty() => (i, f),
        Some(_) => return None,
        None => (unsigned, ""),
    };
    let digits = |x: &str| x.bytes().all(|c| c.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) {
        return None;
    }
    Some((t.parse().ok()?, frac.len()))
}

fn location(name: &str, value: &AttrValue) -> Option<String> {
    let location_name = has_word(name, &LOCATION_WORDS);
    match value {
        AttrValue::Str(s) => {
            if let Some((a, b)) = s.split_once(',') {
                if let (Some((lat, da)), Some((lon, db))) = (decimal(a), decimal(b)) {
                    if lat.abs() <= 90.0 && lon.abs() <= 180.0 && da.max(db) > 2 {
                        return Some(format!(
                            "{s:?} looks like coordinates with {} decimals; use coarse::geo(x, 2) (about 1 km)",
                            da.max(db)
                        ));
                    }
                }
            }
            if location_name {
                if let Some((_, d)) = decimal(s) {
                    if d > 2 {
                        return Some(format!(
                            "a coordinate with {d} decimals locates a place within metres; use coarse::geo(x, 2) (about 1 km)"
                        ));
                    }
                }
            }
            if has_word(name, &["geohash"]) && s.len() > 5 {
                return Some(format!(
                    "a geohash of {} characters is finer than about 5 km; keep at most 5 characters",
                    s.len()
                ));
            }
            None
        }
        other if location_name => {
            let v = as_integer(other)?;
            (v.abs() > 18_000).then(|| {
                format!("{v} looks like a fixed-point coordinate finer than 2 decimals; use coarse::geo(x, 2)")
            })
        }
        _ => None,
    }
}

fn postal(name: &str, value: &AttrValue) -> Option<String> {
    let postal_name = has_word(name, &POSTAL_WORDS);
    match value {
        AttrValue::Str(s) => {
            if let Some(kind) = postal_format(s) {
                return Some(format!(
                    "{s:?} looks like a full {kind} postal code, which can narrow a person down to a street; keep only the area prefix"
                ));
            }
            let significant = s.chars().filter(|c| c.is_alphanumeric()).count();
            (postal_name && significant >= 4).then(|| {
                "a full postal code can narrow a person down to a street; keep only the first 2 or 3 characters".to_owned()
            })
        }
        other if postal_name => {
            let v = as_integer(other)?;
            (v.abs() >= 1000).then(|| {
                format!("{v} looks like a full postal code; keep only the first 2 or 3 digits")
            })
        }
        _ => None,
    }
}

/// Recognises distinctive postal code formats (letters in upper case, as postcodes are
/// written; lower-case identifiers such as geohashes would match too often); returns the
/// country.
fn postal_format(s: &str) -> Option<&'static str> {
    let b = s.as_bytes();
    let all = |r: &[u8], f: fn(&u8) -> bool| !r.is_empty() && r.iter().all(f);
    // US ZIP+4: 12345-6789
    if b.len() == 10
        && all(&b[..5], u8::is_ascii_digit)
        && b[5] == b'-'
        && all(&b[6..], u8::is_ascii_digit)
    {
        return Some("US ZIP+4");
    }
    // Netherlands: 1234 AB or 1234AB (upper case letters)
    let nl = s.replacen(' ', "", 1);
    let n = nl.as_bytes();
    if n.len() == 6
        && all(&n[..4], u8::is_ascii_digit)
        && n[0] != b'0'
        && all(&n[4..], u8::is_ascii_uppercase)
    {
        return Some("Dutch");
    }
    let compact: Vec<u8> = s.bytes().filter(|c| *c != b' ').collect();
    if s.matches(' ').count() > 1 {
        return None;
    }
    let c = compact.as_slice();
    let letter = |x: &u8| x.is_ascii_uppercase();
    let digit = |x: &u8| x.is_ascii_digit();
    // Canada: A1A 1A1
    if c.len() == 6
        && letter(&c[0])
        && digit(&c[1])
        && letter(&c[2])
        && digit(&c[3])
        && letter(&c[4])
        && digit(&c[5])
    {
        return Some("Canadian");
    }
    // UK: outward (A9, A9A, A99, AA9, AA9A, AA99) + inward (9AA)
    if (5..=7).contains(&c.len()) {
        let (outward, inward) = c.split_at(c.len() - 3);
        let inward_ok = digit(&inward[0]) && letter(&inward[1]) && letter(&inward[2]);
        let letters = outward.iter().take_while(|x| letter(x)).count();
        let rest = &outward[letters..];
        let outward_ok = (1..=2).contains(&letters)
            && !rest.is_empty()
            && rest.len() <= 2
            && digit(&rest[0])
            && rest[1..].iter().all(|x| x.is_ascii_alphanumeric());
        if inward_ok && outward_ok {
            return Some("UK");
        }
    }
    None
}

fn free_text(value: &AttrValue) -> Option<String> {
    let AttrValue::Str(s) = value else {
        return None;
    };
    let words = s.split_whitespace().count();
    if words >= 4 {
        return Some(format!(
            "free text ({words} words) is nearly unique; use a value from a fixed list instead"
        ));
    }
    if looks_like_email(s) {
        return Some(
            "an e-mail address identifies a person; do not store it as an attribute".to_owned(),
        );
    }
    None
}

fn looks_like_email(s: &str) -> bool {
    let Some((local, domain)) = s.trim().split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !local.contains(char::is_whitespace)
        && !domain.contains(char::is_whitespace)
        && domain
            .split_once('.')
            .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty())
}
