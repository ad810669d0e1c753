//! JSON wire forms of `arkiv_query` / `arkiv_getEntity` (native protocol): the `select`
//! projection, the query options, and entities (`RpcEntity`) in both directions.

use alloy_primitives::{Address, B256};
use serde_json::{json, Map, Value};

use crate::abi::{flags_byte, flags_from_byte};
use crate::answer::AnswerError;
use crate::codec::{parse_hex, parse_uint};
use crate::entity::{
    ArkivValue, Attribute, AttributeSelect, CreationFlags, Entity, QueryOptions, Select,
};
use crate::error::LedgerError;

fn bad(what: AnswerError) -> LedgerError {
    LedgerError::Decode(what)
}

fn not_a(field: &'static str, expected: &'static str) -> LedgerError {
    bad(AnswerError::NotA { field, expected })
}

/// A `0x` hex quantity (`"0x1a"`).
pub fn quantity(v: u64) -> Value {
    Value::String(format!("{v:#x}"))
}

/// Parse a quantity given as `0x` hex, decimal string or JSON number.
pub fn parse_quantity(v: &Value) -> Result<u64, LedgerError> {
    match v {
        Value::Number(n) => n.as_u64().ok_or(bad(AnswerError::NotU64)),
        Value::String(s) => parse_uint(s)
            .and_then(|u| u64::try_from(u).ok())
            .ok_or(bad(AnswerError::NotU64)),
        _ => Err(bad(AnswerError::NotU64)),
    }
}

/// A select that asks for every field and every attribute (the SDK's `select("*")`).
pub fn select_all() -> Select {
    Select {
        key: true,
        owner: true,
        creator: true,
        created_at: true,
        updated_at: true,
        expires_at: true,
        creation_flags: true,
        content_type: true,
        payload: true,
        attribute_schema: true,
        attributes: AttributeSelect::All,
    }
}

/// The `select` object as the SDK sends it: all eleven keys, unselected ones `false`;
/// `attributes` is `true`, `false` or `{name: true, …}`.
pub fn select_to_json(s: &Select) -> Value {
    let attributes = match &s.attributes {
        AttributeSelect::None => Value::Bool(false),
        AttributeSelect::All => Value::Bool(true),
        // The SDK sends `false` for an empty name set.
        AttributeSelect::Named(names) if names.is_empty() => Value::Bool(false),
        AttributeSelect::Named(names) => Value::Object(
            names
                .iter()
                .map(|n| (n.clone(), Value::Bool(true)))
                .collect(),
        ),
    };
    json!({
        "key": s.key,
        "owner": s.owner,
        "creator": s.creator,
        "createdAt": s.created_at,
        "updatedAt": s.updated_at,
        "expiresAt": s.expires_at,
        "creationFlags": s.creation_flags,
        "contentType": s.content_type,
        "payload": s.payload,
        "attributeSchema": s.attribute_schema,
        "attributes": attributes,
    })
}

/// The `arkiv_query` options object (`select`, and `limit`, `atBlock`, `cursor` when set).
pub fn query_options_to_json(o: &QueryOptions) -> Value {
    let mut m = Map::new();
    m.insert("select".into(), select_to_json(&o.select));
    if let Some(l) = o.limit {
        m.insert("limit".into(), quantity(u64::from(l)));
    }
    if let Some(b) = o.at_block {
        m.insert("atBlock".into(), quantity(b));
    }
    if let Some(c) = &o.cursor {
        m.insert("cursor".into(), Value::String(c.clone()));
    }
    Value::Object(m)
}

/// `creationFlags` as the node renders it: `{readonly, permissionlessExtension, raw}`.
pub fn flags_to_json(f: CreationFlags) -> Value {
    json!({
        "readonly": f.readonly,
        "permissionlessExtension": f.permissionless_extension,
        "raw": flags_byte(f),
    })
}

/// Parse `creationFlags` given as the object form, a number or a hex quantity (reserved bits
/// are ignored).
pub fn flags_from_json(v: &Value) -> Result<CreationFlags, LedgerError> {
    let raw = match v {
        Value::Object(o) => {
            if let Some(raw) = o.get("raw") {
                parse_quantity(raw)?
            } else {
                let b = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
                return Ok(CreationFlags {
                    readonly: b("readonly"),
                    permissionless_extension: b("permissionlessExtension"),
                });
            }
        }
        other => parse_quantity(other)?,
    };
    // Reserved bits (which a node may report in `raw`) carry no meaning: ignore them.
    u8::try_from(raw)
        .ok()
        .and_then(|b| flags_from_byte(b & crate::abi::FLAGS_MASK))
        .ok_or(bad(AnswerError::OutOfRange("creation flags")))
}

/// The `attributes` array of an entity: `[{name, type, value}]` in the given order.
pub fn attributes_to_json(attrs: &[Attribute]) -> Value {
    Value::Array(
        attrs
            .iter()
            .map(|a| json!({"name": a.name, "type": a.value.type_name(), "value": a.value.to_json()}))
            .collect(),
    )
}

/// Parse an `attributes` array (`[{name, type, value}]`).
pub fn attributes_from_json(v: &Value) -> Result<Vec<Attribute>, LedgerError> {
    let arr = v
        .as_array()
        .ok_or_else(|| not_a("attributes", "an array"))?;
    arr.iter()
        .map(|a| {
            let name = a
                .get("name")
                .and_then(Value::as_str)
                .ok_or(bad(AnswerError::Missing("an attribute's name")))?;
            let ty = a
                .get("type")
                .and_then(Value::as_str)
                .ok_or(bad(AnswerError::Missing("an attribute's type")))?;
            let value = ArkivValue::from_json(ty, a.get("value").unwrap_or(&Value::Null))
                .map_err(|e| bad(AnswerError::Attribute(e)))?;
            Ok(Attribute {
                name: name.to_owned(),
                value,
            })
        })
        .collect()
}

/// Parse an `attributeSchema` array (`[{name, type}]`) into `(name, type tag)` pairs.
pub fn attribute_schema_from_json(v: &Value) -> Result<Vec<(String, String)>, LedgerError> {
    let arr = v
        .as_array()
        .ok_or_else(|| not_a("attributeSchema", "an array"))?;
    arr.iter()
        .map(|a| {
            let name = a.get("name").and_then(Value::as_str);
            let ty = a.get("type").and_then(Value::as_str);
            match (name, ty) {
                (Some(n), Some(t)) => Ok((n.to_owned(), t.to_owned())),
                _ => Err(bad(AnswerError::Missing(
                    "an attributeSchema entry's name or type",
                ))),
            }
        })
        .collect()
}

/// Parse a `0x` + 64 hex string into a `B256` (`what` names it in the error).
pub fn parse_b256(v: &Value, what: &'static str) -> Result<B256, LedgerError> {
    let s = v.as_str().ok_or_else(|| not_a(what, "a string"))?;
    let b = parse_hex(s).ok_or(bad(AnswerError::NotHex(what)))?;
    <[u8; 32]>::try_from(b.as_slice())
        .map(B256::from)
        .map_err(|_| {
            bad(AnswerError::WrongLength {
                field: what,
                expected: 32,
                got: b.len(),
            })
        })
}

fn parse_address(v: &Value, what: &'static str) -> Result<Address, LedgerError> {
    let s = v.as_str().ok_or_else(|| not_a(what, "a string"))?;
    let b = parse_hex(s).ok_or(bad(AnswerError::NotHex(what)))?;
    if b.len() != 20 {
        return Err(bad(AnswerError::WrongLength {
            field: what,
            expected: 20,
            got: b.len(),
        }));
    }
    Ok(Address::from_slice(&b))
}

/// Parse one `RpcEntity` (only the fields present are set; `key` is required).
pub fn entity_from_json(v: &Value) -> Result<Entity, LedgerError> {
    let o = v
        .as_object()
        .ok_or_else(|| not_a("an entity", "a JSON object"))?;
    let get = |k: &str| o.get(k).filter(|v| !v.is_null());
    let key = parse_b256(
        get("key").ok_or(bad(AnswerError::Missing("an entity's key")))?,
        "key",
    )?;
    Ok(Entity {
        key,
        owner: get("owner")
            .map(|v| parse_address(v, "owner"))
            .transpose()?,
        creator: get("creator")
            .map(|v| parse_address(v, "creator"))
            .transpose()?,
        created_at: get("createdAt").map(parse_quantity).transpose()?,
        updated_at: get("updatedAt").map(parse_quantity).transpose()?,
        expires_at: get("expiresAt").map(parse_quantity).transpose()?,
        creation_flags: get("creationFlags").map(flags_from_json).transpose()?,
        content_type: get("contentType")
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| not_a("contentType", "a string"))
            })
            .transpose()?,
        payload: get("payload")
            .map(|v| {
                v.as_str()
                    .and_then(parse_hex)
                    .ok_or(bad(AnswerError::NotHex("payload")))
            })
            .transpose()?,
        attributes: get("attributes").map(attributes_from_json).transpose()?,
    })
}

/// Render an entity as an `RpcEntity` (only the fields present; addresses lowercase, block
/// numbers as quantities). `attributeSchema` is added when `with_schema` and attributes are
/// present.
pub fn entity_to_json(e: &Entity, with_schema: bool) -> Value {
    let mut m = Map::new();
    m.insert("key".into(), Value::String(e.key.to_string()));
    let addr = |a: &Address| Value::String(format!("0x{}", hex::encode(a)));
    if let Some(a) = &e.owner {
        m.insert("owner".into(), addr(a));
    }
    if let Some(a) = &e.creator {
        m.insert("creator".into(), addr(a));
    }
    if let Some(b) = e.created_at {
        m.insert("createdAt".into(), quantity(b));
    }
    if let Some(b) = e.updated_at {
        m.insert("updatedAt".into(), quantity(b));
    }
    if let Some(b) = e.expires_at {
        m.insert("expiresAt".into(), quantity(b));
    }
    if let Some(f) = e.creation_flags {
        m.insert("creationFlags".into(), flags_to_json(f));
    }
    if let Some(c) = &e.content_type {
        m.insert("contentType".into(), Value::String(c.clone()));
    }
    if let Some(p) = &e.payload {
        m.insert(
            "payload".into(),
            Value::String(format!("0x{}", hex::encode(p))),
        );
    }
    if let Some(attrs) = &e.attributes {
        if with_schema {
            m.insert(
                "attributeSchema".into(),
                Value::Array(
                    attrs
                        .iter()
                        .map(|a| json!({"name": a.name, "type": a.value.type_name()}))
                        .collect(),
                ),
            );
        }
        m.insert("attributes".into(), attributes_to_json(attrs));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::U256;

    #[test]
    fn entity_round_trip() {
        let e = Entity {
            key: B256::repeat_byte(3),
            owner: Some(Address::repeat_byte(0xab)),
            creator: Some(Address::repeat_byte(0xcd)),
            created_at: Some(10),
            updated_at: Some(11),
            expires_at: Some(u64::MAX),
            creation_flags: Some(CreationFlags {
                readonly: true,
                permissionless_extension: false,
            }),
            content_type: Some("application/json".into()),
            payload: Some(b"{}".to_vec()),
            attributes: Some(vec![
                Attribute {
                    name: "rank".into(),
                    value: ArkivValue::U256(U256::from(7)),
                },
                Attribute {
                    name: "team".into(),
                    value: ArkivValue::Str("red".into()),
                },
            ]),
        };
        let j = entity_to_json(&e, true);
        assert_eq!(j["attributes"][0]["value"], "0x7");
        assert_eq!(j["creationFlags"]["raw"], 1);
        assert_eq!(entity_from_json(&j).unwrap(), e);
    }

    #[test]
    fn options_shape() {
        let o = QueryOptions {
            at_block: Some(16),
            select: Select {
                key: true,
                attributes: AttributeSelect::Named(vec!["tag".into()]),
                ..Select::default()
            },
            limit: Some(200),
            cursor: Some("b64:abc".into()),
        };
        let j = query_options_to_json(&o);
        assert_eq!(j["atBlock"], "0x10");
        assert_eq!(j["limit"], "0xc8");
        assert_eq!(j["select"]["attributes"]["tag"], true);
        assert_eq!(j["select"]["payload"], false);
        assert_eq!(j["select"].as_object().unwrap().len(), 11);
        let none = Select {
            attributes: AttributeSelect::Named(vec![]),
            ..Select::default()
        };
        assert_eq!(select_to_json(&none)["attributes"], false);
    }

    #[test]
    fn flags_forms() {
        assert!(flags_from_json(&json!(3)).unwrap().permissionless_extension);
        assert_eq!(
            flags_from_json(&json!("0x83")).unwrap(),
            flags_from_json(&json!(3)).unwrap()
        );
        assert!(flags_from_json(&json!(256)).is_err());
        assert!(
            flags_from_json(&json!({"readonly": true}))
                .unwrap()
                .readonly
        );
    }
}
