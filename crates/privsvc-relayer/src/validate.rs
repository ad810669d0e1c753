//! Validation of a submit request (docs/PROTOCOL.md §9.3: every 400 condition of its table).
//!
//! Each refusal is a sentence naming the field and the problem. Messages never echo the body.

use alloy_primitives::Address;
use privsvc_attributes::{AttrValue, Attributes};
use privsvc_envelope::SealedEnvelope;
use privsvc_tokens::TokenRedemption;
use serde_json::{Map, Value};

use crate::entities::SYSTEM_PROJECT;
use crate::store::StoredRecord;

pub use privsvc_envelope::{EXPIRY_BUCKETS, PADDED_SIZES};

/// The bounds a submission is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The relayer's own address (an owner may not equal it).
    pub relayer: Address,
    /// Largest `minAnonymity`.
    pub max_min_anonymity: usize,
    /// Largest `maxHoldMs`.
    pub max_hold_ms: u64,
}

/// A submission that passed every check but the token.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The app (equal to the envelope's).
    pub app: String,
    /// The one-time owner (the envelope's signer).
    pub owner: Address,
    /// The sealed, padded envelope text.
    pub envelope: Vec<u8>,
    /// The typed attributes.
    pub attributes: Attributes,
    /// Lifetime in seconds (equal to the envelope's).
    pub exp_seconds: u64,
    /// The token, when one was sent.
    pub token: Option<TokenRedemption>,
    /// Smallest batch the record may join (1 = no hold).
    pub min_anonymity: u32,
    /// How long the record may be held (ms).
    pub max_hold_ms: u64,
}

fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<&'a Value, String> {
    match obj.get(name) {
        Some(Value::Null) | None => Err(format!("field {name} is required")),
        Some(v) => Ok(v),
    }
}

fn integer(obj: &Map<String, Value>, name: &str) -> Result<Option<u64>, String> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{name} must be a non-negative integer")),
    }
}

/// Check a request body as if the time were `now_secs` (Unix seconds): only envelopes v2 whose
/// `hour` is in `[now_hour - 2, now_hour + 1]` pass, so a copied envelope cannot be submitted
/// again after its window. `Err` is the 400 reason.
pub fn validate_at(body: &[u8], limits: &Limits, now_secs: u64) -> Result<Submission, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let Value::Object(mut obj) = value else {
        return Err("body must be a JSON object".into());
    };

    let app = field(&obj, "app")?
        .as_str()
        .ok_or("app must be a string")?
        .to_string();

    let owner_text = field(&obj, "owner")?
        .as_str()
        .ok_or("owner must be a string holding an address")?;
    let owner = parse_address(owner_text)
        .ok_or("owner is not an address (expected 0x followed by 40 hex digits)")?;
    if owner == limits.relayer {
        return Err("owner must not be the relayer's own address".into());
    }

    let exp_seconds = integer(&obj, "expSeconds")?.ok_or("field expSeconds is required")?;
    if !EXPIRY_BUCKETS.contains(&exp_seconds) {
        return Err(format!(
            "expSeconds {exp_seconds} is not a valid bucket (allowed: 3600, 86400, 604800, \
             2592000, 7776000)"
        ));
    }

    field(&obj, "envelope")?;
    let envelope = match obj.remove("envelope") {
        Some(Value::String(text)) => text.into_bytes(),
        _ => return Err("envelope must be a string (the sealed envelope's JSON text)".into()),
    };
    if !PADDED_SIZES.contains(&envelope.len()) {
        return Err(format!(
            "envelope is {} bytes; it must be padded to exactly 512, 1024, 4096 or 16384 bytes",
            envelope.len()
        ));
    }
    let sealed = parse_sealed(&envelope)?;
    check_body(&sealed, &app, exp_seconds)?;
    privsvc_envelope::check_hour_window(sealed.body.hour, now_secs).map_err(|e| e.to_string())?;

    let attributes = Attributes::from_wire(field(&obj, "attributes")?)
        .map_err(|e| format!("invalid attributes: {e}"))?;
    match attributes.get("project") {
        None => return Err("attribute project is missing (it is mandatory)".into()),
        Some(AttrValue::Str(_)) => {}
        Some(other) => {
            return Err(format!(
                "attribute project must have type str, not {}",
                other.attr_type()
            ))
        }
    }
    // System entities (heartbeats, issuer keys, spends) are recognised by these; a record
    // carrying them would be created by the relayer and could impersonate one.
    for (name, value) in &attributes {
        if name.starts_with(privsvc_attributes::SYSTEM_PREFIX) {
            return Err(format!(
                "attribute {name:?}: names starting with \"privsvc\" are reserved for system entities"
            ));
        }
        if name == "project" && *value == AttrValue::Str(SYSTEM_PROJECT.into()) {
            return Err(format!(
                "attribute \"project\": {SYSTEM_PROJECT:?} is reserved for system entities"
            ));
        }
    }

    let min_anonymity = integer(&obj, "minAnonymity")?.unwrap_or(1);
    if min_anonymity < 1 || min_anonymity > limits.max_min_anonymity as u64 {
        return Err(format!(
            "minAnonymity {min_anonymity} is out of range (allowed 1..={})",
            limits.max_min_anonymity
        ));
    }
    let max_hold_ms = integer(&obj, "maxHoldMs")?.unwrap_or(limits.max_hold_ms);
    if max_hold_ms < 1 || max_hold_ms > limits.max_hold_ms {
        return Err(format!(
            "maxHoldMs {max_hold_ms} is out of range (allowed 1..={})",
            limits.max_hold_ms
        ));
    }

    let token = match obj.get("token") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            <TokenRedemption as serde::Deserialize>::deserialize(v)
                .map_err(|e| format!("token must be {{epoch, nonce, signature}}: {e}"))?,
        ),
    };

    check_signed(&sealed, &attributes, owner)?;

    Ok(Submission {
        app,
        owner,
        envelope,
        attributes,
        exp_seconds,
        token,
        min_anonymity: min_anonymity as u32,
        max_hold_ms,
    })
}

/// The sealed envelope in `envelope`, or why it does not parse.
fn parse_sealed(envelope: &[u8]) -> Result<SealedEnvelope, String> {
    privsvc_envelope::parse_envelope(envelope)
        .map_err(|e| format!("envelope cannot be parsed: {e}"))
}

/// The envelope's body names `app` and the lifetime `exp_seconds`.
fn check_body(sealed: &SealedEnvelope, app: &str, exp_seconds: u64) -> Result<(), String> {
    if sealed.body.app != app {
        return Err("app differs from the app inside the envelope".into());
    }
    if sealed.body.exp != exp_seconds {
        return Err(format!(
            "expSeconds {exp_seconds} differs from the envelope's expiry ({})",
            sealed.body.exp
        ));
    }
    Ok(())
}

/// The envelope's attribute types are those of `attributes`, and its signature (over the body
/// and the attributes) recovers to `owner`.
fn check_signed(
    sealed: &SealedEnvelope,
    attributes: &Attributes,
    owner: Address,
) -> Result<(), String> {
    if sealed.body.types != attributes.types() {
        return Err("attributes differ from the attribute types inside the envelope".into());
    }
    let signer = privsvc_envelope::envelope_signer(sealed, attributes)
        .map_err(|e| format!("envelope signature does not recover to owner: {e}"))?;
    if signer != owner {
        return Err("envelope signature does not recover to owner".into());
    }
    Ok(())
}

/// Checks a stored record before it enters a batch, with the checks intake made: its envelope
/// has the stored SHA-256, parses, names the stored app and lifetime, has the stored
/// attributes' types and project, and its signature recovers to the stored owner. Returns the
/// envelope's `hour`; `Err` says what does not hold (the stored copy was damaged).
pub fn verify_stored(rec: &StoredRecord) -> Result<u64, String> {
    if crate::store::envelope_sha256(&rec.envelope) != rec.envelope_digest {
        return Err("the envelope does not match its stored SHA-256".into());
    }
    let sealed = parse_sealed(&rec.envelope)?;
    check_body(&sealed, &rec.app, rec.exp_seconds)?;
    let attributes = Attributes::from_wire_json(rec.attributes.as_bytes())
        .map_err(|e| format!("the stored attributes do not parse: {e}"))?;
    if crate::project::project_key(&attributes) != rec.project {
        return Err("the stored project differs from the project attribute".into());
    }
    check_signed(&sealed, &attributes, rec.owner)?;
    Ok(sealed.body.hour)
}

fn parse_address(text: &str) -> Option<Address> {
    let hex = text.strip_prefix("0x")?;
    if hex.len() != 40 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    text.parse().ok()
}
