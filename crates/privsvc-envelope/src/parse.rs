//! Strict parsing of sealed envelopes (docs/PROTOCOL.md §3).

use std::collections::BTreeMap;

use privsvc_attributes::{json, AttrType, AttributeError};
use serde_json::{Map, Value};

use crate::error::{MemberReason, SignatureFormatReason};
use crate::seal::{check_signature_bytes, padded_size, MAX_ENVELOPE_BYTES, PADDED_SIZES};
use crate::{from_base64, EnvelopeBody, EnvelopeError, ENVELOPE_VERSION};

/// A parsed envelope: its body and its 65-byte signature `r || s || v`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedEnvelope {
    /// The signed body.
    pub body: EnvelopeBody,
    /// The signature `r || s || v`, v in {27, 28}.
    pub signature: [u8; 65],
}

const MEMBERS: [&str; 9] = [
    "v", "app", "exp", "hour", "ct", "enc", "types", "data", "sig",
];

/// Parses a sealed, padded envelope. Refuses: inputs over 16384 bytes or of a length other
/// than 512/1024/4096/16384; padding other than trailing spaces; padding beyond the smallest
/// size that fits; invalid JSON, duplicate keys, trailing bytes; a version other than 2 (so
/// every version 1 envelope);
/// unknown or missing members; wrong member types; `exp` outside the buckets; invalid type
/// names; non-canonical base64; a malformed or high-s signature; and any text that is not the
/// RFC 8785 form.
///
/// It does not verify the signature: see [`crate::envelope_signer`].
pub fn parse_envelope(bytes: &[u8]) -> Result<SealedEnvelope, EnvelopeError> {
    let len = bytes.len();
    if len > MAX_ENVELOPE_BYTES {
        return Err(EnvelopeError::Oversize { len });
    }
    if !PADDED_SIZES.contains(&len) {
        return Err(EnvelopeError::NotPadded { len });
    }
    let content_len = bytes.iter().rposition(|b| *b != b' ').map_or(0, |p| p + 1);
    let json_end = bytes[..content_len]
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
        .map_or(0, |p| p + 1);
    if let Some(pos) = bytes[json_end..content_len].iter().position(|b| *b != b' ') {
        return Err(EnvelopeError::BadPadding {
            offset: json_end + pos,
            byte: bytes[json_end + pos],
        });
    }
    let content = &bytes[..content_len];
    let value = json::parse_strict(content)?;
    let Value::Object(obj) = value else {
        return Err(EnvelopeError::NotAnObject);
    };
    let sealed = from_object(&obj)?;
    let canonical = sealed.body.canonical_sealed_json(&sealed.signature);
    if canonical.as_bytes() != content {
        return Err(EnvelopeError::NonCanonical);
    }
    let expected = padded_size(content_len)?;
    if expected != len {
        return Err(EnvelopeError::PaddedTooFar {
            len,
            content: content_len,
            expected,
        });
    }
    Ok(sealed)
}

fn from_object(obj: &Map<String, Value>) -> Result<SealedEnvelope, EnvelopeError> {
    match obj.get("v") {
        None => return Err(EnvelopeError::MissingMember("v")),
        Some(v) if v.as_u64() == Some(ENVELOPE_VERSION) => {}
        Some(other) => return Err(EnvelopeError::UnsupportedVersion(other.clone())),
    }
    if let Some(unknown) = obj.keys().find(|k| !MEMBERS.contains(&k.as_str())) {
        return Err(EnvelopeError::UnknownMember(unknown.clone()));
    }
    let app = string_member(obj, "app")?;
    let exp = member(obj, "exp")?
        .as_u64()
        .ok_or(EnvelopeError::InvalidMember {
            member: "exp",
            reason: MemberReason::NotSeconds,
        })?;
    let hour = member(obj, "hour")?
        .as_u64()
        .ok_or(EnvelopeError::InvalidMember {
            member: "hour",
            reason: MemberReason::NotHour,
        })?;
    let ct = string_member(obj, "ct")?;
    let enc = member(obj, "enc")?
        .as_bool()
        .ok_or(EnvelopeError::InvalidMember {
            member: "enc",
            reason: MemberReason::NotBool,
        })?;
    let types = types_member(member(obj, "types")?)?;
    let data = from_base64(&string_member(obj, "data")?).map_err(|e| match e {
        EnvelopeError::Base64(source) => EnvelopeError::InvalidMember {
            member: "data",
            reason: MemberReason::Base64(source),
        },
        other => other,
    })?;
    let signature = parse_signature(&string_member(obj, "sig")?)?;
    let body = EnvelopeBody {
        app,
        exp,
        hour,
        ct,
        enc,
        types,
        data,
    };
    body.validate()?;
    Ok(SealedEnvelope { body, signature })
}

fn member<'a>(obj: &'a Map<String, Value>, name: &'static str) -> Result<&'a Value, EnvelopeError> {
    obj.get(name).ok_or(EnvelopeError::MissingMember(name))
}

fn string_member(obj: &Map<String, Value>, name: &'static str) -> Result<String, EnvelopeError> {
    member(obj, name)?
        .as_str()
        .map(str::to_owned)
        .ok_or(EnvelopeError::InvalidMember {
            member: name,
            reason: MemberReason::NotString,
        })
}

fn types_member(v: &Value) -> Result<BTreeMap<String, AttrType>, EnvelopeError> {
    let Value::Object(m) = v else {
        return Err(EnvelopeError::InvalidMember {
            member: "types",
            reason: MemberReason::NotTypeMap,
        });
    };
    let mut out = BTreeMap::new();
    for (name, t) in m {
        let ty = t
            .as_str()
            .ok_or_else(|| format!("type must be a string, got {t}"))
            .and_then(|s| s.parse::<AttrType>())
            .map_err(|reason| AttributeError::Invalid {
                name: name.clone(),
                reason,
            })?;
        out.insert(name.clone(), ty);
    }
    Ok(out)
}

/// Parses `0x` + 130 lowercase hex digits into `r || s || v` and checks its form (r and s
/// valid, s low, v in {27, 28}); recovery happens in [`crate::envelope_signer`].
pub fn parse_signature(text: &str) -> Result<[u8; 65], EnvelopeError> {
    let Some(digits) = text.strip_prefix("0x") else {
        return Err(EnvelopeError::BadSignatureFormat(
            SignatureFormatReason::MissingPrefix,
        ));
    };
    if digits.len() != 130 {
        return Err(EnvelopeError::BadSignatureFormat(
            SignatureFormatReason::Length(digits.len()),
        ));
    }
    if let Some(c) = digits.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(EnvelopeError::BadSignatureFormat(
            SignatureFormatReason::NotLowercaseHex(c),
        ));
    }
    let mut out = [0u8; 65];
    hex::decode_to_slice(digits, &mut out).map_err(|_| {
        EnvelopeError::BadSignatureFormat(SignatureFormatReason::Length(digits.len()))
    })?;
    check_signature_bytes(&out)?;
    Ok(out)
}
