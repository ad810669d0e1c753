//! Sealed, padded, signed record envelopes for privsvc (docs/PROTOCOL.md §3).
//!
//! * Body: the JSON object `{v: 2, app, exp, hour, ct, enc, types, data}` ([`EnvelopeBody`]);
//!   `exp` is an expiry bucket (never 0), `hour` is `floor(unix seconds / 3600)` at sealing,
//!   `data` is the stored payload in standard base64 with padding, `types` lists every
//!   attribute's type (`project`, always `str`, and `tag` included). Version 1 is refused.
//! * Window ([`check_hour_window`], [`check_created_in_time`]): relayers accept `hour` in
//!   `[now_hour - 2, now_hour + 1]`; verifiers refuse an entity created at or after
//!   `(hour + 4) x 3600` s, so a copied envelope cannot be republished after its record expired.
//! * Digest: `keccak256("privsvc envelope v2" || 0x00 || canonical(body) || 0x00 ||
//!   canonical(attributes))` with RFC 8785 canonical JSON ([`envelope_digest`]).
//! * Signature: 65 bytes `r || s || v` by the record's one-time owner key, low-s, v in {27, 28},
//!   written as `sig: "0x" + 130 lowercase hex`.
//! * Sealed text: RFC 8785 JSON of body plus `sig`, right-padded with spaces to the smallest of
//!   512, 1024, 4096 and 16384 bytes ([`seal_envelope`], [`pad_envelope`]).
//! * Parsing is strict ([`parse_envelope`]): it accepts exactly the bytes that sealing produces.
//!
//! ```
//! use privsvc_attributes::Attributes;
//! use privsvc_envelope::{envelope_signer, parse_envelope, seal_envelope, EnvelopeBody};
//! use k256::ecdsa::SigningKey;
//!
//! let key = SigningKey::from_slice(&[7u8; 32]).unwrap();
//! let mut attrs = Attributes::new();
//! attrs.insert("project", "demo").unwrap();
//! let body = EnvelopeBody {
//!     app: "demo".into(),
//!     exp: 3600,
//!     hour: privsvc_envelope::hour_of(1_800_000_000),
//!     ct: "text/plain".into(),
//!     enc: false,
//!     types: attrs.types(),
//!     data: b"hello".to_vec(),
//! };
//! let sealed = seal_envelope(&body, &attrs, &key).unwrap();
//! assert_eq!(sealed.len(), 512);
//! let parsed = parse_envelope(sealed.as_bytes()).unwrap();
//! let owner = envelope_signer(&parsed, &attrs).unwrap();
//! assert_eq!(owner, alloy_primitives::Address::from_private_key(&key));
//! ```
#![forbid(unsafe_code)]

mod body;
mod codec;
mod error;
mod expiry;
#[cfg(feature = "fuzzing")]
pub mod fuzz_entry;
mod parse;
mod seal;
mod window;

pub use body::EnvelopeBody;
pub use codec::{from_base64, to_base64};
pub use error::{
    Base64Error, EnvelopeError, InvalidSignatureReason, MemberReason, SignatureFormatReason,
    SigningReason,
};
pub use expiry::{
    expiry_bucket, expiry_seconds, is_bucket, Expires, EXPIRY_BUCKETS, MAX_EXPIRY_SECONDS,
};
pub use parse::{parse_envelope, parse_signature, SealedEnvelope};
pub use seal::{
    envelope_digest, envelope_digest_preimage, envelope_signer, pad_envelope, padded_size,
    recover_digest_signer, seal_envelope, seal_with_signature, sign_digest, DIGEST_DOMAIN,
    MAX_ENVELOPE_BYTES, PADDED_SIZES,
};
pub use window::{
    check_created_in_time, check_hour_window, hour_of, republish_deadline, HOUR_SECONDS, MAX_HOUR,
    REPUBLISH_HOURS, WINDOW_HOURS_AFTER, WINDOW_HOURS_BEFORE,
};

/// The envelope format version, `v` in every body.
pub const ENVELOPE_VERSION: u64 = 2;

/// The ledger content type of a record entity (its payload is the sealed envelope).
pub const ENVELOPE_CONTENT_TYPE: &str = "application/json";
