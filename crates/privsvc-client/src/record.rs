//! Client-side records: create parameters and results, and `MyRecord` (docs/API.md §2.4, §2.5).

use alloy_primitives::{Address, B256};
use privsvc_attributes::{AttrValue, Attributes};
use privsvc_envelope::Expires;
use privsvc_fingerprint::CheckWarning;
use privsvc_vault::RecordRef;
use serde_json::{json, Value};

/// Parameters of [`crate::PrivateClient::create_entity`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateParams {
    /// Record data.
    pub payload: Vec<u8>,
    /// Content type, kept inside the envelope.
    pub content_type: String,
    /// Queryable attributes (lowercase names; `project` and `tag` are set by the library).
    pub attributes: Vec<(String, AttrValue)>,
    /// Relative lifetime, rounded up to 1 h, 1 d, 7 d, 30 d or 90 d.
    pub expires: Expires,
    /// Write under a scope: all records in a scope share one owner.
    pub scope: Option<String>,
    /// Encrypt the payload so only the user can read it.
    pub encrypt: bool,
}

impl CreateParams {
    /// A record with `payload` of `content_type`, living at least `expires`.
    pub fn new(
        payload: impl Into<Vec<u8>>,
        content_type: impl Into<String>,
        expires: Expires,
    ) -> Self {
        Self {
            payload: payload.into(),
            content_type: content_type.into(),
            attributes: Vec::new(),
            expires,
            scope: None,
            encrypt: false,
        }
    }

    /// Adds one attribute.
    pub fn attribute(mut self, name: impl Into<String>, value: impl Into<AttrValue>) -> Self {
        self.attributes.push((name.into(), value.into()));
        self
    }

    /// Writes under scope `name`.
    pub fn scope(mut self, name: impl Into<String>) -> Self {
        self.scope = Some(name.into());
        self
    }

    /// Encrypts the payload.
    pub fn encrypt(mut self, on: bool) -> Self {
        self.encrypt = on;
        self
    }
}

/// The result of [`crate::PrivateClient::create_entity`].
#[derive(Debug, Clone, PartialEq)]
pub struct CreateResult {
    /// Ledger entity key.
    pub entity_key: B256,
    /// The one-time owner (or the scope's owner).
    pub owner: Address,
    /// The batch transaction as the relayer reported it (zero when recovered from the ledger).
    pub tx_hash: B256,
    /// Relayer URL that wrote it; empty when the record was recovered.
    pub relayer: String,
    /// Records of the project in the batch, this one included. With `min_anonymity` 1 it is the
    /// relayer's figure from its `written` answer; above 1 it is counted in the session's own
    /// listing of the ledger (the tail that showed the record), never taken from the relayer.
    pub batch_size: u64,
    /// The block that holds the record, when known: from the session's listing, or the
    /// relayer's `written` answer.
    pub block: Option<u64>,
    /// The relayer did not answer but the record had landed; nothing was written twice.
    pub recovered: bool,
    /// Fingerprinting and rarity warnings.
    pub warnings: Vec<CheckWarning>,
    /// The record reference (keep it to prove ownership without listing).
    pub record_ref: RecordRef,
}

/// One of the user's verified records, as returned by [`crate::PrivateClient::my_entities`].
#[derive(Clone, PartialEq, Eq)]
pub struct MyRecord {
    /// The entity key (same as `entity_key`; the JS API has both names).
    pub key: B256,
    /// The ledger entity key.
    pub entity_key: B256,
    /// Current owner (the one-time owner address).
    pub owner: Address,
    /// The relayer that created the entity.
    pub creator: Address,
    /// The app inside the envelope.
    pub app: String,
    /// Content type inside the envelope.
    pub content_type: String,
    /// The payload (decrypted when it was encrypted).
    pub data: Vec<u8>,
    /// Whether the payload was stored encrypted.
    pub encrypted: bool,
    /// The record's attributes (`project` and `tag` included).
    pub attributes: Attributes,
    /// Creation block.
    pub created_at: u64,
    /// Expiry block (first block at which it is gone).
    pub expires_at: u64,
    /// Lifetime bucket in seconds.
    pub exp_seconds: u64,
    /// The sealed envelope text (padding trimmed).
    pub envelope: String,
    /// The record reference its keys derive from.
    pub record_ref: RecordRef,
    /// Whether a scan verified the record on the ledger (owner, signature, app, attributes,
    /// lifetime, creation window). A record this device wrote is returned at once with
    /// `verified: false`; a scheduled scan verifies it later.
    pub verified: bool,
}

impl std::fmt::Debug for MyRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The payload is the user's data: never print it.
        f.debug_struct("MyRecord")
            .field("entity_key", &self.entity_key)
            .field("owner", &self.owner)
            .field("creator", &self.creator)
            .field("app", &self.app)
            .field("content_type", &self.content_type)
            .field("data_len", &self.data.len())
            .field("created_at", &self.created_at)
            .field("expires_at", &self.expires_at)
            .field("exp_seconds", &self.exp_seconds)
            .field("verified", &self.verified)
            .finish_non_exhaustive()
    }
}

impl MyRecord {
    /// The payload as UTF-8 text (invalid sequences replaced).
    pub fn to_text(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }

    /// The payload parsed as JSON.
    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_slice(&self.data)
    }

    /// The value of attribute `name`.
    pub fn attribute(&self, name: &str) -> Option<&AttrValue> {
        self.attributes.get(name)
    }

    /// A JSON summary of the record's metadata (no payload), e.g. for listings.
    pub fn summary(&self) -> Value {
        json!({
            "entityKey": self.entity_key.to_string(),
            "owner": self.owner.to_string(),
            "creator": self.creator.to_string(),
            "app": self.app,
            "contentType": self.content_type,
            "attributes": self.attributes.to_wire(),
            "createdAt": self.created_at,
            "expiresAt": self.expires_at,
            "expSeconds": self.exp_seconds,
            "ref": self.record_ref.to_hex(),
            "verified": self.verified,
        })
    }
}
