//! Fingerprinting-risk checks for privsvc records.
//!
//! Records are public on the ledger; only the link to the user is hidden. A value that is
//! nearly unique (a precise time, a home location, a sentence) lets an observer link records
//! again. [`check_record`] looks at one record before it is sealed and [`check_rarity`]
//! compares its attribute values with the app's existing records. Both return warnings; the
//! client refuses the write on any warning in `strict` mode. [`coarse`] has the replacement
//! functions the messages recommend.
//!
//! The library-set attributes `project` and `tag` are never inspected. The heuristics, by
//! warning code:
//!
//! * `timestamp`: a number (i32, u64, or u256 that fits u64), or a `str` of 10 or 13 digits,
//!   inside 2000-01-01..2100-01-01 read as Unix seconds (946684800..=4102444800) or
//!   milliseconds (times 1000) that is not a whole hour; or a `str` ISO 8601 date-time
//!   `YYYY-MM-DD[T ]HH:MM...` whose minutes, seconds or fraction are not zero. Whole hours
//!   (see [`coarse::hour`]) and plain dates `YYYY-MM-DD` pass.
//! * `precise-location`: a `str` `"lat,lon"` pair (|lat| <= 90, |lon| <= 180) with more than 2
//!   decimals in either part; for attributes whose name has a location word as a `_`-separated
//!   part (`lat`, `latitude`, `lon`, `lng`, `long`, `longitude`, `geo`, `gps`, `coord`,
//!   `coords`, `coordinates`, `location`, `loc`, `position`, `pos`): a decimal `str` with more
//!   than 2 decimals, or an integer with magnitude above 18000 (a fixed-point coordinate finer
//!   than 2 decimals); for names with a `geohash` part: a geohash longer than 5 characters
//!   (5 characters is a cell of about 5 km). Two decimals (about 1 km, [`coarse::geo`]) pass.
//! * `postal-code`: a `str` in a distinctive postal format, letters upper case (UK `SW1A 1AA`,
//!   Canada `K1A 0B1`, Netherlands `1012 AB`, US ZIP+4 `12345-6789`) whatever its name; for names with a postal
//!   word part (`zip`, `zipcode`, `postcode`, `postal`, `plz`): a `str` with 4 or more letters
//!   and digits, or a number of 1000 or more. Short prefixes (`"SW1"`, `"10"`) pass.
//! * `free-text`: a `str` of 4 or more white-space separated words, or one that looks like an
//!   e-mail address (`local@domain.tld`). Use a category from a fixed list instead.
//! * `expiry-rounded`: a lifetime that is not exactly one of the buckets 3600, 86400, 604800,
//!   2592000 or 7776000 seconds (it will be rounded up, so the record lives longer than asked),
//!   or a lifetime of 0 (invalid).
//! * `expiry-too-long`: a lifetime over 90 days (sealing refuses it).
//! * `payload-too-large`: a payload over [`PAYLOAD_WARN_BYTES`] (2048) bytes, which no longer
//!   fits the 512/1024/4096-byte envelope sizes most records use and so stands out in the
//!   16384-byte class; over [`PAYLOAD_MAX_BYTES`] the message says it cannot be sealed at all.
//! * `rare-combination` ([`check_rarity`]): fewer than `k` existing records share one of the
//!   record's attribute values (one warning per such attribute), or share the combination of
//!   all its values (`tag` excluded; one warning without an attribute name). `k = 0` disables.
#![forbid(unsafe_code)]

pub mod coarse;
mod heuristics;
mod rarity;
mod record;

pub use rarity::check_rarity;
pub use record::{check_record, RecordCheck, PAYLOAD_MAX_BYTES, PAYLOAD_WARN_BYTES};

use serde::{Deserialize, Serialize};
use std::fmt;

/// The fingerprinting warning codes (docs/API.md §2.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WarningCode {
    /// A precise point in time.
    Timestamp,
    /// A location finer than about 1 km.
    PreciseLocation,
    /// A full postal code.
    PostalCode,
    /// Free text or an e-mail address.
    FreeText,
    /// The lifetime is rounded up to a bucket (or is invalid).
    ExpiryRounded,
    /// The lifetime is over 90 days.
    ExpiryTooLong,
    /// The payload makes the envelope stand out by size.
    PayloadTooLarge,
    /// Few existing records share the attribute values.
    RareCombination,
}

impl WarningCode {
    /// The code as written on the wire and in the JS API, e.g. `precise-location`.
    pub fn as_str(self) -> &'static str {
        match self {
            WarningCode::Timestamp => "timestamp",
            WarningCode::PreciseLocation => "precise-location",
            WarningCode::PostalCode => "postal-code",
            WarningCode::FreeText => "free-text",
            WarningCode::ExpiryRounded => "expiry-rounded",
            WarningCode::ExpiryTooLong => "expiry-too-long",
            WarningCode::PayloadTooLarge => "payload-too-large",
            WarningCode::RareCombination => "rare-combination",
        }
    }
}

impl fmt::Display for WarningCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One fingerprinting warning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckWarning {
    /// What kind of risk.
    pub code: WarningCode,
    /// The attribute concerned, if any.
    pub attribute: Option<String>,
    /// A sentence explaining the risk and the remedy.
    pub message: String,
}

impl CheckWarning {
    pub(crate) fn new(code: WarningCode, attribute: Option<&str>, message: String) -> Self {
        CheckWarning {
            code,
            attribute: attribute.map(str::to_owned),
            message,
        }
    }
}

impl fmt::Display for CheckWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.attribute {
            Some(a) => write!(f, "{} ({a:?}): {}", self.code, self.message),
            None => write!(f, "{}: {}", self.code, self.message),
        }
    }
}
