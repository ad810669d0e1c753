//! The envelope error type.

use privsvc_attributes::json::StrictJsonError;
use privsvc_attributes::{AttrType, AttributeError};

use crate::MAX_HOUR;

/// Why an envelope could not be sealed, parsed or verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// The envelope (or the text to pad) is larger than the largest padded size.
    #[error("envelope is {len} bytes; the largest padded size is 16384 bytes (make the payload smaller)")]
    Oversize {
        /// Length in bytes.
        len: usize,
    },
    /// The input length is not one of the padded sizes.
    #[error(
        "envelope is {len} bytes; it must be padded to exactly 512, 1024, 4096 or 16384 bytes"
    )]
    NotPadded {
        /// Length in bytes.
        len: usize,
    },
    /// The envelope is padded to a larger size than the smallest that fits its content.
    #[error("envelope content of {content} bytes is padded to {len} bytes; it must be padded to the smallest size that fits, {expected}")]
    PaddedTooFar {
        /// Padded length.
        len: usize,
        /// Content length without the padding.
        content: usize,
        /// The size it should have been padded to.
        expected: usize,
    },
    /// The padding after the JSON object contains a byte other than a space.
    #[error("padding must be spaces (0x20) only; found byte 0x{byte:02x} at offset {offset}")]
    BadPadding {
        /// Offset of the offending byte.
        offset: usize,
        /// The offending byte.
        byte: u8,
    },
    /// The envelope text is not strict JSON (syntax, duplicate keys, trailing bytes).
    #[error("envelope: {0}")]
    Json(#[from] StrictJsonError),
    /// The JSON value is not an object.
    #[error("envelope must be a JSON object")]
    NotAnObject,
    /// The envelope's version is not 2 (version 1 envelopes, without `hour`, are refused).
    #[error("unsupported envelope version {0}: only version 2 is accepted (version 1 envelopes have no hour and are refused; seal the record again)")]
    UnsupportedVersion(serde_json::Value),
    /// The envelope has a member that version 2 does not define.
    #[error(
        "unknown envelope member {0:?} (version 2 has v, app, exp, hour, ct, enc, types, data, sig)"
    )]
    UnknownMember(String),
    /// A required member is absent.
    #[error("envelope member {0:?} is missing")]
    MissingMember(&'static str),
    /// A member has the wrong JSON type or an invalid value.
    #[error("envelope member {member:?}: {reason}")]
    InvalidMember {
        /// The member name.
        member: &'static str,
        /// What is wrong.
        #[source]
        reason: MemberReason,
    },
    /// `exp` (or a requested lifetime) is not one of the expiry buckets.
    #[error("exp {0} is not an expiry bucket (3600, 86400, 604800, 2592000 or 7776000 seconds)")]
    NotABucket(u64),
    /// An expiry of zero seconds was requested.
    #[error("an expiry of 0 seconds is invalid; the shortest lifetime is 3600 seconds (1 hour)")]
    ZeroExpiry,
    /// An expiry beyond the largest bucket was requested.
    #[error("an expiry of {0} seconds is longer than the maximum of 7776000 seconds (90 days)")]
    ExpiryTooLong(u64),
    /// An attribute name in `types` is invalid, or there are too many.
    #[error("envelope types: {0}")]
    Attribute(#[from] AttributeError),
    /// The envelope text is valid but not in RFC 8785 canonical form.
    #[error("envelope is not in RFC 8785 canonical form (sorted keys, no white space, shortest escapes); re-serialise it canonically before padding")]
    NonCanonical,
    /// `sig` is not `0x` followed by 130 lowercase hex digits.
    #[error("sig must be 0x followed by 130 lowercase hex digits (r || s || v): {0}")]
    BadSignatureFormat(#[source] SignatureFormatReason),
    /// The signature's `v` byte is not 27 or 28.
    #[error("signature v must be 27 or 28, got {0}")]
    BadRecoveryByte(u8),
    /// The signature's `s` is in the upper half of the curve order.
    #[error("signature s is not low (s must be at most n/2); re-sign with a low-s signer")]
    HighS,
    /// The signature does not recover a public key.
    #[error("signature does not recover a public key: {0}")]
    InvalidSignature(#[source] InvalidSignatureReason),
    /// The attributes do not have exactly the types the envelope lists.
    #[error("attributes do not match the envelope's types: {0}")]
    TypesMismatch(String),
    /// Signing failed.
    #[error("signing failed: {0}")]
    Signing(#[source] SigningReason),
    /// The `project` attribute is listed with a type other than `str`.
    #[error("attribute \"project\" must have type str, the envelope says {0}")]
    ProjectNotStr(AttrType),
    /// A relayer's clock puts the envelope's `hour` outside the accepted submission window.
    #[error("envelope hour {hour} is outside the accepted window {earliest}..={latest} (the current hour is {now_hour}); seal the record again with the current hour")]
    HourOutsideWindow {
        /// The envelope's hour.
        hour: u64,
        /// The current hour.
        now_hour: u64,
        /// The earliest accepted hour (`now_hour - 2`).
        earliest: u64,
        /// The latest accepted hour (`now_hour + 1`).
        latest: u64,
    },
    /// The entity was created too long after its envelope was sealed: a copied envelope
    /// republished after the window.
    #[error("entity created at {created} (unix seconds), at or after {deadline} = (hour {hour} + 4) x 3600: the envelope was republished after its window")]
    CreatedTooLate {
        /// The envelope's hour.
        hour: u64,
        /// Timestamp of the entity's creation block, unix seconds.
        created: u64,
        /// The first refused timestamp, `(hour + 4) x 3600`.
        deadline: u64,
    },
    /// A base64 text is not standard base64 with padding.
    #[error("invalid base64 (standard alphabet with padding expected): {0}")]
    Base64(#[source] Base64Error),
}

/// What is wrong with an envelope member's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemberReason {
    /// An empty string where text is needed (`app`, `ct`).
    #[error("must not be empty")]
    Empty,
    /// Not a JSON string.
    #[error("must be a string")]
    NotString,
    /// `enc` is not a JSON boolean.
    #[error("must be true or false")]
    NotBool,
    /// `exp` is not a non-negative JSON integer.
    #[error("must be a non-negative integer number of seconds")]
    NotSeconds,
    /// `hour` is not a non-negative JSON integer.
    #[error("must be a non-negative integer (unix seconds / 3600, rounded down)")]
    NotHour,
    /// `hour` is above [`crate::MAX_HOUR`].
    #[error("{0} is above the largest exact JSON integer {MAX_HOUR}")]
    HourTooLarge(u64),
    /// `types` is not a JSON object.
    #[error("must be an object mapping attribute names to types")]
    NotTypeMap,
    /// `data` is not standard base64.
    #[error("invalid base64 (standard alphabet with padding expected): {0}")]
    Base64(#[source] Base64Error),
}

/// What is wrong with the text of `sig`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureFormatReason {
    /// It does not start with `0x`.
    #[error("missing 0x prefix")]
    MissingPrefix,
    /// It has another number of hex digits.
    #[error("{0} hex digits instead of 130")]
    Length(usize),
    /// A character that is not `0-9` or `a-f`.
    #[error("{0:?} is not a lowercase hex digit")]
    NotLowercaseHex(char),
}

/// Why a digest could not be signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SigningReason {
    /// The secp256k1 signer failed (k256's error says no more).
    #[error("the secp256k1 signer failed")]
    SignerFailed,
    /// The signature needs a reduced x coordinate, which `v` in {27, 28} cannot express.
    #[error("signature needs a reduced x coordinate, which v in {{27, 28}} cannot express")]
    ReducedX,
}

/// Why a signature of the right form recovers no public key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidSignatureReason {
    /// `v` gives no recovery id.
    #[error("bad recovery id")]
    BadRecoveryId,
    /// `r` or `s` is zero or not below the curve order.
    #[error("r or s is zero or not below the curve order")]
    ScalarOutOfRange,
    /// No public key recovers from `r`, `s` and `v` (k256's error says no more).
    #[error("no public key recovers from r, s and v")]
    NotRecoverable,
}

/// Why a text is not standard base64 with padding (the decoder's finding, as privsvc's own
/// type so that the enum stays `Clone + Eq` and the decoder's version is not part of the API).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Base64Error {
    /// A byte that is not a base64 symbol (or padding in the middle, or text after it).
    #[error("byte 0x{byte:02x} at offset {offset} is not a base64 symbol there")]
    InvalidByte {
        /// Its offset.
        offset: usize,
        /// The byte.
        byte: u8,
    },
    /// The number of symbols cannot be base64.
    #[error("{0} symbols cannot be base64")]
    InvalidLength(usize),
    /// The last symbol carries non-zero bits that decoding would drop.
    #[error("the last symbol 0x{byte:02x} at offset {offset} has non-zero trailing bits")]
    NonZeroTrailingBits {
        /// Its offset.
        offset: usize,
        /// The symbol.
        byte: u8,
    },
    /// The padding is missing or not canonical.
    #[error("the padding is missing or not canonical")]
    InvalidPadding,
}

impl From<base64::DecodeError> for Base64Error {
    fn from(e: base64::DecodeError) -> Self {
        match e {
            base64::DecodeError::InvalidByte(offset, byte) => {
                Base64Error::InvalidByte { offset, byte }
            }
            base64::DecodeError::InvalidLength(len) => Base64Error::InvalidLength(len),
            base64::DecodeError::InvalidLastSymbol(offset, byte) => {
                Base64Error::NonZeroTrailingBits { offset, byte }
            }
            base64::DecodeError::InvalidPadding => Base64Error::InvalidPadding,
        }
    }
}
