//! The creates the relayer sends: record entities, spends entities and heartbeats (DESIGN 4).

use std::collections::BTreeMap;

use alloy_primitives::Address;
use privsvc_attributes::{AttrValue, Attributes};
use privsvc_ledger::expiry::seconds_to_blocks;
use privsvc_ledger::{ArkivValue, Attribute, Create, CreationFlags};

use crate::store::StoredRecord;

/// `project` of system entities.
pub const SYSTEM_PROJECT: &str = "privsvc-7f3k";
/// API version string.
pub const API_VERSION: &str = "privsvc-relayer/1";
/// Content type of record entities.
pub const ENVELOPE_CONTENT_TYPE: &str = "application/json";
/// Lifetime of a heartbeat entity (1 hour).
pub const HEARTBEAT_LIFETIME_SECS: u64 = 3600;
/// Lifetime of a spends entity: tokens are accepted for two days; keep the evidence 3 days.
pub const SPENDS_LIFETIME_SECS: u64 = 3 * 86_400;

fn str_attr(name: &str, value: &str) -> Attribute {
    Attribute {
        name: name.into(),
        value: ArkivValue::Str(value.into()),
    }
}

/// Convert record attributes to ledger attributes (same native types).
pub fn ledger_attributes(attrs: &Attributes) -> Vec<Attribute> {
    attrs
        .iter()
        .map(|(name, v)| Attribute {
            name: name.clone(),
            value: match v {
                AttrValue::Str(s) => ArkivValue::Str(s.clone()),
                AttrValue::I32(i) => ArkivValue::I32(*i),
                AttrValue::U64(u) => ArkivValue::U64(*u),
                AttrValue::U256(u) => ArkivValue::U256(*u),
            },
        })
        .collect()
}

/// The create of a record entity: payload = sealed envelope, typed attributes, expiry =
/// expSeconds, the given salt.
pub fn record_create(rec: &StoredRecord, salt: u128) -> Result<Create, String> {
    let attrs = Attributes::from_wire_json(rec.attributes.as_bytes())
        .map_err(|e| format!("stored attributes unreadable: {e}"))?;
    Ok(Create {
        salt,
        expires_at: 0,
        min_lifetime: seconds_to_blocks(rec.exp_seconds),
        flags: CreationFlags::default(),
        content_type: ENVELOPE_CONTENT_TYPE.into(),
        payload: rec.envelope.clone(),
        attributes: ledger_attributes(&attrs),
    })
}

/// The spends entities of a batch: one per epoch, payload = the token ids (32 bytes each).
pub fn spends_creates(records: &[StoredRecord], salt: impl Fn() -> u128) -> Vec<Create> {
    let mut by_epoch: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for r in records {
        if let Some(t) = &r.token {
            by_epoch
                .entry(t.epoch)
                .or_default()
                .extend_from_slice(&t.id);
        }
    }
    by_epoch
        .into_iter()
        .map(|(epoch, ids)| Create {
            salt: salt(),
            expires_at: 0,
            min_lifetime: seconds_to_blocks(SPENDS_LIFETIME_SECS),
            flags: CreationFlags::default(),
            content_type: "application/octet-stream".into(),
            payload: ids,
            attributes: vec![
                Attribute {
                    name: "epoch".into(),
                    value: ArkivValue::U64(epoch),
                },
                str_attr("privsvc_kind", "spends"),
                str_attr("project", SYSTEM_PROJECT),
            ],
        })
        .collect()
}

/// The heartbeat create: attributes `project, privsvc_kind, url`; payload JSON
/// `{url, address, chainId, version, ohttpKey?}`; lifetime one hour.
pub fn heartbeat_create(
    url: &str,
    address: Address,
    chain_id: u64,
    ohttp_key: Option<&str>,
    salt: u128,
) -> Create {
    let mut payload = serde_json::json!({
        "url": url,
        "address": address.to_checksum(None),
        "chainId": chain_id,
        "version": API_VERSION,
    });
    if let Some(k) = ohttp_key {
        payload["ohttpKey"] = serde_json::Value::String(k.into());
    }
    Create {
        salt,
        expires_at: 0,
        min_lifetime: seconds_to_blocks(HEARTBEAT_LIFETIME_SECS),
        flags: CreationFlags::default(),
        content_type: "application/json".into(),
        payload: payload.to_string().into_bytes(),
        attributes: vec![
            str_attr("privsvc_kind", "heartbeat"),
            str_attr("project", SYSTEM_PROJECT),
            str_attr("url", url),
        ],
    }
}

/// A query-language string literal: `str('...')` with `'` doubled.
pub fn str_literal(s: &str) -> String {
    format!("str('{}')", s.replace('\'', "''"))
}
