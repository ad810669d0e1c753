//! The envelope body and its canonical JSON.

use std::collections::BTreeMap;

use privsvc_attributes::{json, name_problem, AttrType, AttributeError, MAX_ATTRIBUTES};
use serde_json::{Map, Value};

use crate::{expiry, to_base64, EnvelopeError, MemberReason, ENVELOPE_VERSION, MAX_HOUR};

/// The signed content of an envelope (`v` is always [`ENVELOPE_VERSION`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvelopeBody {
    /// The application name (also the `project` attribute's value).
    pub app: String,
    /// Lifetime in seconds; one of [`crate::EXPIRY_BUCKETS`] (0 is refused).
    pub exp: u64,
    /// The hour of sealing, `floor(unix seconds / 3600)` ([`crate::hour_of`]); relayers and
    /// verifiers bound when the record may be published with it ([`crate::check_hour_window`],
    /// [`crate::check_created_in_time`]).
    pub hour: u64,
    /// Content type of the payload.
    pub ct: String,
    /// Whether `data` is encrypted for the owner.
    pub enc: bool,
    /// Type of every attribute of the record, `project` and `tag` included.
    pub types: BTreeMap<String, AttrType>,
    /// The stored payload (ciphertext when `enc`).
    pub data: Vec<u8>,
}

impl EnvelopeBody {
    /// Checks the rules every sealed body meets: non-empty `app` and `ct`, `exp` a bucket (so
    /// never 0), `hour` at most [`MAX_HOUR`], valid attribute names, at most 30 of them, and a
    /// `project` attribute (when listed) of type `str`.
    pub fn validate(&self) -> Result<(), EnvelopeError> {
        if self.app.is_empty() {
            return Err(EnvelopeError::InvalidMember {
                member: "app",
                reason: MemberReason::Empty,
            });
        }
        if self.ct.is_empty() {
            return Err(EnvelopeError::InvalidMember {
                member: "ct",
                reason: MemberReason::Empty,
            });
        }
        if !expiry::is_bucket(self.exp) {
            return Err(EnvelopeError::NotABucket(self.exp));
        }
        if self.hour > MAX_HOUR {
            return Err(EnvelopeError::InvalidMember {
                member: "hour",
                reason: MemberReason::HourTooLarge(self.hour),
            });
        }
        if let Some(t) = self.types.get("project") {
            if *t != AttrType::Str {
                return Err(EnvelopeError::ProjectNotStr(*t));
            }
        }
        if self.types.len() > MAX_ATTRIBUTES {
            return Err(AttributeError::TooMany {
                count: self.types.len(),
            }
            .into());
        }
        for name in self.types.keys() {
            if let Some(reason) = name_problem(name) {
                return Err(AttributeError::Invalid {
                    name: name.clone(),
                    reason,
                }
                .into());
            }
        }
        Ok(())
    }

    /// The body as a JSON object (without `sig`).
    pub fn to_json(&self) -> Map<String, Value> {
        let types: Map<String, Value> = self
            .types
            .iter()
            .map(|(k, t)| (k.clone(), Value::String(t.as_str().into())))
            .collect();
        let mut m = Map::new();
        m.insert("v".into(), Value::from(ENVELOPE_VERSION));
        m.insert("app".into(), Value::String(self.app.clone()));
        m.insert("exp".into(), Value::from(self.exp));
        m.insert("hour".into(), Value::from(self.hour));
        m.insert("ct".into(), Value::String(self.ct.clone()));
        m.insert("enc".into(), Value::Bool(self.enc));
        m.insert("types".into(), Value::Object(types));
        m.insert("data".into(), Value::String(to_base64(&self.data)));
        m
    }

    /// RFC 8785 JSON of the body without `sig` (the signed part of the digest preimage).
    pub fn canonical_json(&self) -> String {
        json::canonical(&Value::Object(self.to_json()))
    }

    /// RFC 8785 JSON of the body with `sig` (the sealed text before padding).
    pub fn canonical_sealed_json(&self, signature: &[u8; 65]) -> String {
        let mut m = self.to_json();
        m.insert(
            "sig".into(),
            Value::String(format!("0x{}", hex::encode(signature))),
        );
        json::canonical(&Value::Object(m))
    }
}
