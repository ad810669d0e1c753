//! JSON shapes of blocks, transactions, receipts, logs and entities (viem-compatible).

use alloy_primitives::{Address, B256};
use serde_json::{json, Map, Value as Json};

use crate::chain::Chain;
use crate::entity::EntityData;
use crate::select::{AttrSelect, Projection};
use crate::types::{Block, LogEntry, TxRecord};
use crate::value::{to_json, type_name};

/// `0x`-prefixed hex quantity.
pub fn qty(n: impl Into<u128>) -> Json {
    Json::String(format!("{:#x}", n.into()))
}

fn addr(a: &Address) -> Json {
    Json::String(a.to_checksum(None))
}

/// A block object.
pub fn block(chain: &Chain, b: &Block, full: bool) -> Json {
    let txs: Vec<Json> = if full {
        b.txs.iter().filter_map(|h| chain.tx(h)).map(tx).collect()
    } else {
        b.txs.iter().map(|h| json!(h)).collect()
    };
    json!({
        "number": qty(b.number),
        "hash": b.hash,
        "parentHash": b.parent_hash,
        "nonce": "0x0000000000000000",
        "sha3Uncles": "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347",
        "logsBloom": format!("0x{}", "0".repeat(512)),
        "transactionsRoot": B256::ZERO,
        "stateRoot": B256::ZERO,
        "receiptsRoot": B256::ZERO,
        "miner": Address::ZERO,
        "difficulty": "0x0",
        "totalDifficulty": "0x0",
        "extraData": "0x",
        "size": qty(1000u64 + 32 * b.txs.len() as u64),
        "gasLimit": qty(b.gas_limit),
        "gasUsed": qty(b.gas_used),
        "timestamp": qty(b.timestamp),
        "baseFeePerGas": qty(b.base_fee),
        "mixHash": B256::ZERO,
        "transactions": txs,
        "uncles": [],
    })
}

/// A transaction object (pending ones have null block fields).
pub fn tx(t: &TxRecord) -> Json {
    let mut o = json!({
        "hash": t.hash,
        "nonce": qty(t.nonce),
        "blockHash": t.location.as_ref().map(|l| json!(l.hash)),
        "blockNumber": t.location.as_ref().map(|l| qty(l.number)),
        "transactionIndex": t.location.as_ref().map(|l| qty(l.index)),
        "from": addr(&t.from),
        "to": t.to.as_ref().map(addr),
        "value": format!("{:#x}", t.value),
        "gas": qty(t.gas_limit),
        "input": t.input,
        "type": qty(t.tx_type as u64),
        "v": qty(t.v),
        "r": format!("{:#x}", t.r),
        "s": format!("{:#x}", t.s),
    });
    let m = o.as_object_mut().expect("object");
    if let Some(id) = t.chain_id {
        m.insert("chainId".into(), qty(id));
    }
    if t.tx_type == 2 {
        m.insert("maxFeePerGas".into(), qty(t.max_fee));
        m.insert(
            "maxPriorityFeePerGas".into(),
            qty(t.max_priority.unwrap_or(0)),
        );
        m.insert("gasPrice".into(), qty(t.max_fee));
        m.insert("accessList".into(), json!([]));
        m.insert("yParity".into(), qty(t.v));
    } else {
        m.insert("gasPrice".into(), qty(t.gas_price.unwrap_or(t.max_fee)));
    }
    o
}

/// One log object.
pub fn log(t: &TxRecord, index: u64, l: &LogEntry) -> Json {
    let loc = t.location.as_ref();
    json!({
        "address": addr(&l.address),
        "topics": l.topics,
        "data": l.data,
        "blockNumber": loc.map(|l| qty(l.number)),
        "blockHash": loc.map(|l| json!(l.hash)),
        "transactionHash": t.hash,
        "transactionIndex": loc.map(|l| qty(l.index)),
        "logIndex": qty(index),
        "removed": false,
    })
}

/// A receipt object, or null while pending.
pub fn receipt(t: &TxRecord) -> Json {
    let (Some(r), Some(loc)) = (&t.receipt, &t.location) else {
        return Json::Null;
    };
    let logs: Vec<Json> = r
        .logs
        .iter()
        .enumerate()
        .map(|(i, l)| log(t, r.first_log_index + i as u64, l))
        .collect();
    json!({
        "transactionHash": t.hash,
        "transactionIndex": qty(loc.index),
        "blockHash": loc.hash,
        "blockNumber": qty(loc.number),
        "from": addr(&t.from),
        "to": t.to.as_ref().map(addr),
        "cumulativeGasUsed": qty(r.cumulative_gas_used),
        "gasUsed": qty(r.gas_used),
        "effectiveGasPrice": qty(r.effective_gas_price),
        "contractAddress": null,
        "logs": logs,
        "logsBloom": format!("0x{}", "0".repeat(512)),
        "status": if r.status { "0x1" } else { "0x0" },
        "type": qty(t.tx_type as u64),
    })
}

/// An entity row with the selected fields only.
pub fn entity(e: &EntityData, p: &Projection) -> Json {
    let mut m = Map::new();
    if p.has("key") {
        m.insert("key".into(), json!(e.key));
    }
    if p.has("owner") {
        m.insert("owner".into(), addr(&e.owner));
    }
    if p.has("creator") {
        m.insert("creator".into(), addr(&e.creator));
    }
    if p.has("createdAt") {
        m.insert("createdAt".into(), qty(e.created_at));
    }
    if p.has("updatedAt") {
        m.insert("updatedAt".into(), qty(e.updated_at));
    }
    if p.has("expiresAt") {
        m.insert("expiresAt".into(), qty(e.expires_at));
    }
    if p.has("creationFlags") {
        m.insert(
            "creationFlags".into(),
            json!({"readonly": e.readonly(), "permissionlessExtension": e.permissionless_extension(), "raw": e.flags}),
        );
    }
    if p.has("contentType") {
        m.insert("contentType".into(), json!(e.content_type));
    }
    if p.has("payload") {
        m.insert("payload".into(), json!(e.payload));
    }
    if p.has("attributeSchema") {
        let s: Vec<Json> = e
            .attrs
            .iter()
            .map(|a| json!({"name": a.name, "type": type_name(a.type_id)}))
            .collect();
        m.insert("attributeSchema".into(), Json::Array(s));
    }
    let attrs: Option<Vec<Json>> = match &p.attributes {
        AttrSelect::Off => None,
        AttrSelect::All => Some(e.attrs.iter().collect::<Vec<_>>()),
        AttrSelect::Named(names) => {
            Some(e.attrs.iter().filter(|a| names.binary_search(&a.name).is_ok()).collect())
        }
    }
    .map(|v| {
        v.into_iter()
            .map(|a| json!({"name": a.name, "type": type_name(a.type_id), "value": to_json(a.type_id, &a.value)}))
            .collect()
    });
    if let Some(a) = attrs {
        m.insert("attributes".into(), Json::Array(a));
    }
    Json::Object(m)
}

/// An entity row with the selected fields, serialized straight to JSON text: the same text as
/// `entity(e, p).to_string()`, without building a `Value` tree first (`arkiv_query` renders
/// pages of up to 200 rows, and a client's first listing of a large app reads thousands).
pub struct EntityRow<'a> {
    /// The entity.
    pub entity: &'a EntityData,
    /// The selected fields.
    pub projection: &'a Projection,
}

/// One `{name, type, value}` attribute of an [`EntityRow`].
struct AttrRow<'a>(&'a crate::entity::StoredAttr);

impl serde::Serialize for AttrRow<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let a = self.0;
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("name", &a.name)?;
        m.serialize_entry("type", type_name(a.type_id))?;
        if a.type_id == crate::value::type_id::STR {
            m.serialize_entry("value", &String::from_utf8_lossy(&a.value))?;
        } else {
            m.serialize_entry("value", &to_json(a.type_id, &a.value))?;
        }
        m.end()
    }
}

/// One `{name, type}` entry of `attributeSchema`.
struct SchemaRow<'a>(&'a crate::entity::StoredAttr);

impl serde::Serialize for SchemaRow<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("name", &self.0.name)?;
        m.serialize_entry("type", type_name(self.0.type_id))?;
        m.end()
    }
}

impl serde::Serialize for EntityRow<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (e, p) = (self.entity, self.projection);
        let f = &p.flags;
        let hex = |n: u64| format!("{n:#x}");
        let mut m = s.serialize_map(None)?;
        if f[0] {
            m.serialize_entry("key", &e.key)?;
        }
        if f[1] {
            m.serialize_entry("owner", &e.owner.to_checksum(None))?;
        }
        if f[2] {
            m.serialize_entry("creator", &e.creator.to_checksum(None))?;
        }
        if f[3] {
            m.serialize_entry("createdAt", &hex(e.created_at))?;
        }
        if f[4] {
            m.serialize_entry("updatedAt", &hex(e.updated_at))?;
        }
        if f[5] {
            m.serialize_entry("expiresAt", &hex(e.expires_at))?;
        }
        if f[6] {
            m.serialize_entry(
                "creationFlags",
                &json!({"readonly": e.readonly(), "permissionlessExtension": e.permissionless_extension(), "raw": e.flags}),
            )?;
        }
        if f[7] {
            m.serialize_entry("contentType", &e.content_type)?;
        }
        if f[8] {
            m.serialize_entry("payload", &e.payload)?;
        }
        if f[9] {
            let rows: Vec<SchemaRow<'_>> = e.attrs.iter().map(SchemaRow).collect();
            m.serialize_entry("attributeSchema", &rows)?;
        }
        let attrs: Option<Vec<AttrRow<'_>>> = match &p.attributes {
            AttrSelect::Off => None,
            AttrSelect::All => Some(e.attrs.iter().map(AttrRow).collect()),
            AttrSelect::Named(names) => Some(
                e.attrs
                    .iter()
                    .filter(|a| names.binary_search(&a.name).is_ok())
                    .map(AttrRow)
                    .collect(),
            ),
        };
        if let Some(a) = attrs {
            m.serialize_entry("attributes", &a)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entity::StoredAttr;
    use crate::value::type_id;

    fn word(v: u64) -> alloy_primitives::Bytes {
        let mut w = [0u8; 32];
        w[24..].copy_from_slice(&v.to_be_bytes());
        alloy_primitives::Bytes::from(w.to_vec())
    }

    #[test]
    fn entity_rows_render_the_same_text_as_the_value_tree() {
        let attr = |name: &str, type_id: u8, value: alloy_primitives::Bytes| StoredAttr {
            name: name.into(),
            type_id,
            value,
        };
        let e = EntityData {
            key: B256::repeat_byte(0xab),
            owner: Address::repeat_byte(0x5c),
            creator: Address::repeat_byte(0x7e),
            created_at: 17,
            updated_at: 20,
            expires_at: 43_217,
            flags: 3,
            content_type: "text/\"plain\"".into(),
            payload: alloy_primitives::Bytes::from(b"payload \x00\xff".to_vec()),
            attrs: vec![
                attr("count", type_id::U64, word(12)),
                attr(
                    "kind",
                    type_id::STR,
                    b"it's \"quoted\" \xe2\x82\xac".to_vec().into(),
                ),
                attr("flag", type_id::BOOL, word(1)),
                attr("who", type_id::ADDR, {
                    let mut w = [0u8; 32];
                    w[12..].copy_from_slice(Address::repeat_byte(0x42).as_slice());
                    w.to_vec().into()
                }),
            ],
        };
        let selects = [
            serde_json::Value::Null,
            json!({"key": true}),
            json!({"owner": true, "creator": true, "createdAt": true, "expiresAt": true,
                   "attributes": {"kind": true, "who": true}}),
            json!({"key": true, "owner": true, "creator": true, "createdAt": true,
                   "updatedAt": true, "expiresAt": true, "creationFlags": true,
                   "contentType": true, "payload": true, "attributeSchema": true,
                   "attributes": true}),
            json!({"payload": true, "attributes": false}),
        ];
        for select in selects {
            let p = Projection::from_json(Some(&select)).unwrap();
            let tree = entity(&e, &p).to_string();
            let text = serde_json::to_string(&EntityRow {
                entity: &e,
                projection: &p,
            })
            .unwrap();
            assert_eq!(text, tree, "select {select}");
        }
    }
}
