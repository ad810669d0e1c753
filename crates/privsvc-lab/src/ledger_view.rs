//! Reading the public ledger at the end of a run: the app's records (with the hour their
//! envelopes name and their blocks' timestamps), the spends entities, and the order of creates
//! inside each batch (from the node's logs).

use std::collections::{BTreeMap, BTreeSet};

use alloy_primitives::{Address, B256};
use privsvc_ledger::{query_all, ArkivValue, AttributeSelect, RpcLedger, Select};
use privsvc_ledger::{spends_query, SpendsEntity};
use serde_json::json;

use crate::views::{LedgerRecord, LedgerView, Ms, Spends};
use crate::LabError;

fn select_all() -> Select {
    Select {
        key: true,
        owner: true,
        creator: true,
        created_at: true,
        payload: true,
        attributes: AttributeSelect::All,
        ..Select::default()
    }
}

/// Reads the records of `app`, every spends entity of today and yesterday, and the order of the
/// records' creates; `block_seen` is when the lab saw each block appear.
pub async fn read(
    rpc_url: &str,
    app: &str,
    block_seen: BTreeMap<u64, Ms>,
) -> Result<LedgerView, LabError> {
    let ledger = RpcLedger::new(rpc_url)?;
    let expression = format!("project = {}", privsvc_client::str_literal(app));
    let entities = query_all(&ledger, &expression, &select_all(), None).await?;
    let mut records = Vec::new();
    for e in entities {
        let (Some(owner), Some(creator), Some(block)) = (e.owner, e.creator, e.created_at) else {
            continue;
        };
        let tag = e.attributes.as_ref().and_then(|attrs| {
            attrs
                .iter()
                .find(|a| a.name == "tag")
                .and_then(|a| match &a.value {
                    ArkivValue::Str(s) => Some(s.clone()),
                    _ => None,
                })
        });
        let hour = e.payload.as_deref().and_then(envelope_hour);
        records.push(LedgerRecord {
            key: e.key,
            owner,
            creator,
            block,
            envelope_len: e.payload.as_ref().map_or(0, Vec::len),
            tag,
            hour,
            block_timestamp: None,
        });
    }
    let blocks: BTreeSet<u64> = records.iter().map(|r| r.block).collect();
    let mut timestamps = BTreeMap::new();
    for b in blocks {
        if let Some(t) = privsvc_ledger::LedgerReader::block_timestamp(&ledger, b).await? {
            timestamps.insert(b, t);
        }
    }
    for r in &mut records {
        r.block_timestamp = timestamps.get(&r.block).copied();
    }
    let today = u64::from(privsvc_tokens::epoch_of(privsvc_tokens::now_ms()));
    let mut spends = Vec::new();
    for epoch in [today.saturating_sub(1), today] {
        for e in query_all(&ledger, &spends_query(epoch), &select_all(), None).await? {
            let (Some(creator), Some(block)) = (e.creator, e.created_at) else {
                continue;
            };
            if let Ok(s) = SpendsEntity::from_entity(&e) {
                spends.push(Spends {
                    block,
                    creator,
                    ids: s.token_ids,
                });
            }
        }
    }
    let batch_order = create_order(&ledger, &records).await?;
    let batch_gas = gas_of(&ledger, batch_order.keys().map(|(_, _, tx)| *tx)).await?;
    Ok(LedgerView {
        records,
        block_seen,
        spends,
        batch_order,
        batch_gas,
    })
}

/// The gas each transaction used, from its receipt (a transaction without one is left out).
async fn gas_of(
    ledger: &RpcLedger,
    transactions: impl Iterator<Item = B256>,
) -> Result<BTreeMap<B256, u64>, LabError> {
    let mut gas = BTreeMap::new();
    for tx in transactions.collect::<BTreeSet<_>>() {
        let receipt = ledger
            .call("eth_getTransactionReceipt", json!([format!("{tx:#x}")]))
            .await?;
        let used = receipt["gasUsed"]
            .as_str()
            .and_then(|g| u64::from_str_radix(g.trim_start_matches("0x"), 16).ok());
        if let Some(used) = used {
            gas.insert(tx, used);
        }
    }
    Ok(gas)
}

/// The `hour` member of a sealed envelope (a JSON object padded with trailing spaces).
fn envelope_hour(envelope: &[u8]) -> Option<u64> {
    let end = envelope.iter().rposition(|b| *b != b' ')? + 1;
    serde_json::from_slice::<serde_json::Value>(&envelope[..end])
        .ok()?
        .get("hour")?
        .as_u64()
}

/// The order of the records' creates in each batch (one transaction: a relayer may land two in
/// one block), from the node's `EntityCreated` logs (whose second topic is the entity key), in
/// log order.
async fn create_order(
    ledger: &RpcLedger,
    records: &[LedgerRecord],
) -> Result<BTreeMap<(u64, Address, B256), Vec<B256>>, LabError> {
    let by_key: BTreeMap<B256, (u64, Address)> = records
        .iter()
        .map(|r| (r.key, (r.block, r.creator)))
        .collect();
    let blocks: BTreeSet<u64> = records.iter().map(|r| r.block).collect();
    let mut order: BTreeMap<(u64, Address, B256), Vec<B256>> = BTreeMap::new();
    for block in blocks {
        let filter = json!({
            "address": privsvc_ledger::ARKIV_ADDRESS.to_checksum(None),
            "fromBlock": format!("0x{block:x}"),
            "toBlock": format!("0x{block:x}"),
        });
        let logs = ledger.call("eth_getLogs", json!([filter])).await?;
        for log in logs.as_array().into_iter().flatten() {
            let Some(key) = log["topics"]
                .get(1)
                .and_then(|t| t.as_str())
                .and_then(|t| t.parse::<B256>().ok())
            else {
                continue;
            };
            let tx = log["transactionHash"]
                .as_str()
                .and_then(|t| t.parse::<B256>().ok())
                .unwrap_or_default();
            if let Some(&(block, creator)) = by_key.get(&key) {
                let keys = order.entry((block, creator, tx)).or_default();
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
    }
    Ok(order)
}
