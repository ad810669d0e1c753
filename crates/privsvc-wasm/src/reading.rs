//! The low-level reading exports of docs/API.md §3.5 and §3.6: `listApp`, `fetchBatches`,
//! `heartbeatRelayers` and `fetchIssuerKey`, over the app's ledger reader ([`crate::js_ledger::reader_of`]),
//! answering JSON text. Entities are in the ledger's JSON form, the one `verifyRecord` takes.

use std::sync::Arc;

use alloy_primitives::Address;
use js_sys::Promise;
use privsvc_client::{fetch_batches, heartbeat_relayers, list_app, BatchId};
use privsvc_ledger::entity_to_json;
use privsvc_ledger::LedgerReader;
use privsvc_tokens::TokenError;
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::error::js_error;

fn error(name: &str, message: String) -> JsValue {
    js_error(name, &message)
}

fn reader(rpc: &JsValue) -> Result<Arc<dyn LedgerReader>, JsValue> {
    Ok(Arc::new(crate::js_ledger::reader_of(rpc)?))
}

fn address(text: &str, what: &str) -> Result<Address, JsValue> {
    text.parse()
        .map_err(|_| error("PrivsvcError", format!("{what}: not an address: {text:?}")))
}

/// `listApp(client, project, relayers?)`: `{ block, entities }`, the project's records without
/// payloads at one pinned block (only those created by `relayers`, a JSON array of addresses,
/// when given).
#[wasm_bindgen(js_name = rawListApp)]
pub fn raw_list_app(reader_rpc: JsValue, project: String, relayers: Option<String>) -> Promise {
    let reader = reader(&reader_rpc);
    future_to_promise(async move {
        let reader = reader?;
        let relayers: Option<Vec<Address>> = match relayers {
            None => None,
            Some(text) => {
                let list: Vec<String> = serde_json::from_str(&text)
                    .map_err(|e| error("PrivsvcError", format!("relayers: {e}")))?;
                Some(
                    list.iter()
                        .map(|a| address(a, "relayers"))
                        .collect::<Result<_, _>>()?,
                )
            }
        };
        let listing = list_app(reader.as_ref(), &project, relayers.as_deref(), None)
            .await
            .map_err(|e| error("PrivsvcError", e.to_string()))?;
        let entities: Vec<Value> = listing
            .entities
            .iter()
            .map(|e| entity_to_json(e, false))
            .collect();
        Ok(JsValue::from_str(
            &json!({"block": listing.block, "entities": entities}).to_string(),
        ))
    })
}

/// One batch of `fetchBatches`.
#[derive(Deserialize)]
struct BatchInput {
    block: u64,
    creator: String,
}

/// `fetchBatches(client, project, [{ block, creator }])`: the full records (payloads included)
/// of whole batches, as a JSON array.
#[wasm_bindgen(js_name = rawFetchBatches)]
pub fn raw_fetch_batches(reader_rpc: JsValue, project: String, batches: String) -> Promise {
    let reader = reader(&reader_rpc);
    future_to_promise(async move {
        let reader = reader?;
        let input: Vec<BatchInput> = serde_json::from_str(&batches)
            .map_err(|e| error("PrivsvcError", format!("batches: {e}")))?;
        let ids = input
            .iter()
            .map(|b| {
                Ok(BatchId {
                    block: b.block,
                    creator: address(&b.creator, "creator")?,
                })
            })
            .collect::<Result<Vec<_>, JsValue>>()?;
        let entities = fetch_batches(reader.as_ref(), &project, &ids, None)
            .await
            .map_err(|e| error("PrivsvcError", e.to_string()))?;
        let out: Vec<Value> = entities.iter().map(|e| entity_to_json(e, false)).collect();
        Ok(JsValue::from_str(&Value::Array(out).to_string()))
    })
}

/// `heartbeatRelayers(reader)`: every live heartbeat, newest first, unverified:
/// `[{ url, creator, address, ohttpKey, createdAt }]`.
#[wasm_bindgen(js_name = rawHeartbeatRelayers)]
pub fn raw_heartbeat_relayers(reader_rpc: JsValue) -> Promise {
    let reader = reader(&reader_rpc);
    future_to_promise(async move {
        let reader = reader?;
        let list = heartbeat_relayers(reader.as_ref())
            .await
            .map_err(|e| error("PrivsvcError", e.to_string()))?;
        let out: Vec<Value> = list
            .iter()
            .map(|h| {
                json!({
                    "url": h.url,
                    "creator": h.creator.to_checksum(None),
                    "address": h.address.map(|a| a.to_checksum(None)),
                    "ohttpKey": h.ohttp_key,
                    "createdAt": h.created_at,
                })
            })
            .collect();
        Ok(JsValue::from_str(&Value::Array(out).to_string()))
    })
}

/// `fetchIssuerKey(reader, issuer, app, epoch)`: the issuer's key for the day as published on
/// the ledger, its SPKI DER in standard base64; rejects with `IssuerEquivocationError` when the
/// issuer published two keys.
#[wasm_bindgen(js_name = rawFetchIssuerKey)]
pub fn raw_fetch_issuer_key(
    reader_rpc: JsValue,
    issuer: String,
    app: String,
    epoch: u32,
) -> Promise {
    let reader = reader(&reader_rpc);
    future_to_promise(async move {
        let reader = reader?;
        let issuer = address(&issuer, "issuer")?;
        match privsvc_tokens::fetch_issuer_key(reader.as_ref(), issuer, &app, epoch).await {
            Ok(key) => Ok(JsValue::from_str(&privsvc_envelope::to_base64(key.spki()))),
            Err(e @ TokenError::IssuerEquivocation { .. }) => {
                Err(error("IssuerEquivocationError", e.to_string()))
            }
            Err(e) => Err(error("PrivsvcError", e.to_string())),
        }
    })
}

/// `epochOf(ms)`: the UTC day number of `ms` (Unix milliseconds).
#[wasm_bindgen(js_name = rawEpochOf)]
pub fn raw_epoch_of(ms: f64) -> u32 {
    privsvc_tokens::epoch_of(ms.max(0.0) as u64)
}

/// `acceptableEpochs(ms)`: the days whose tokens relayers accept at `ms`: today and yesterday.
#[wasm_bindgen(js_name = rawAcceptableEpochs)]
pub fn raw_acceptable_epochs(ms: f64) -> Vec<u32> {
    privsvc_tokens::acceptable_epochs(ms.max(0.0) as u64).to_vec()
}
