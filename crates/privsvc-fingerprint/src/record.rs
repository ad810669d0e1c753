//! `check_record`: warnings about one record before it is sealed.

use privsvc_attributes::Attributes;
use privsvc_envelope::{expiry_bucket, EnvelopeError};

use crate::heuristics::check_attribute;
use crate::{CheckWarning, WarningCode};

/// Payloads larger than this leave the common 512/1024/4096-byte envelope sizes.
pub const PAYLOAD_WARN_BYTES: usize = 2048;

/// Roughly the largest payload that fits a 16384-byte envelope (base64 plus the body).
pub const PAYLOAD_MAX_BYTES: usize = 12_000;

/// What [`check_record`] looks at; every part is optional.
#[derive(Clone, Copy, Debug, Default)]
pub struct RecordCheck<'a> {
    /// The record's attributes (`project` and `tag` are skipped).
    pub attributes: Option<&'a Attributes>,
    /// The requested lifetime in seconds, before rounding.
    pub expires: Option<u64>,
    /// The payload as it will be stored (after encryption, if any).
    pub payload: Option<&'a [u8]>,
}

/// Synchronous fingerprinting warnings for one record, attributes first (in name order), then
/// expiry, then payload. See the crate docs for each heuristic.
///
/// ```
/// use privsvc_attributes::Attributes;
/// use privsvc_fingerprint::{check_record, RecordCheck, WarningCode};
/// let mut a = Attributes::new();
/// a.insert("seen_at", 1_716_212_345u64).unwrap();
/// let w = check_record(&RecordCheck { attributes: Some(&a), expires: Some(86_400), payload: None });
/// assert_eq!(w.len(), 1);
/// assert_eq!(w[0].code, WarningCode::Timestamp);
/// assert_eq!(w[0].attribute.as_deref(), Some("seen_at"));
/// ```
pub fn check_record(check: &RecordCheck<'_>) -> Vec<CheckWarning> {
    let mut out = Vec::new();
    if let Some(attrs) = check.attributes {
        for (name, value) in attrs {
            if name == "project" || name == "tag" {
                continue;
            }
            out.extend(check_attribute(name, value));
        }
    }
    if let Some(seconds) = check.expires {
        out.extend(check_expiry(seconds));
    }
    if let Some(payload) = check.payload {
        out.extend(check_payload(payload.len()));
    }
    out
}

fn check_expiry(seconds: u64) -> Option<CheckWarning> {
    let (code, message) = match expiry_bucket(seconds) {
        Ok(bucket) if bucket == seconds => return None,
        Ok(bucket) => (
            WarningCode::ExpiryRounded,
            format!("a lifetime of {seconds} s is rounded up to {bucket} s; the record lives longer than asked"),
        ),
        Err(EnvelopeError::ExpiryTooLong(_)) => (
            WarningCode::ExpiryTooLong,
            format!("a lifetime of {seconds} s is longer than the maximum of 7776000 s (90 days); the record will be refused"),
        ),
        Err(_) => (
            WarningCode::ExpiryRounded,
            "a lifetime of 0 s is invalid; the shortest lifetime is 3600 s (1 hour)".to_owned(),
        ),
    };
    Some(CheckWarning::new(code, None, message))
}

fn check_payload(len: usize) -> Option<CheckWarning> {
    if len > PAYLOAD_MAX_BYTES {
        return Some(CheckWarning::new(
            WarningCode::PayloadTooLarge,
            None,
            format!("a payload of {len} bytes does not fit the largest envelope (16384 bytes, about {PAYLOAD_MAX_BYTES} bytes of payload); split or shrink it"),
        ));
    }
    (len > PAYLOAD_WARN_BYTES).then(|| {
        CheckWarning::new(
            WarningCode::PayloadTooLarge,
            None,
            format!("a payload of {len} bytes needs the 16384-byte envelope, which few records use; keep payloads at or below {PAYLOAD_WARN_BYTES} bytes"),
        )
    })
}
