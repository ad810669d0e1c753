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
