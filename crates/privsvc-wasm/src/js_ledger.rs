//! `JsLedger`: the crates' [`LedgerReader`] over a JavaScript JSON-RPC function made by
//! `js/net.js` (`ledgerReader(publicClient).rpc`), so that every ledger read of the wasm client
//! goes where the app's `publicClient` says: privsvc's own fetch (no redirect, no referrer, no
//! credentials, no HTTP cache) for an RPC URL, or the `request` of a viem client or an EIP-1193
//! provider (a wagmi `custom()` transport included).
//!
//! The function is `rpcBytes(method, paramsJson)` (or `rpc`) and resolves to a JSON-RPC answer
//! (`{ result }` or `{ error: { code, message, data? } }`) as bytes (a `Uint8Array`, what a
//! reader over a URL hands over: no string is made of a listing page on either side) or as
//! text; it rejects when the ledger cannot be reached. `arkiv_query` pages are decoded by the
//! borrowed-bytes decoder of the native reader ([`privsvc_ledger::rpc::decode_query_answer`]).

use alloy_primitives::{Address, B256, U256};
use alloy_sol_types::{SolCall, SolEvent};
use async_trait::async_trait;
use js_sys::{Function, Promise, Reflect, Uint8Array};
use privsvc_ledger::abi;
use privsvc_ledger::codec::{parse_hex, parse_uint};
use privsvc_ledger::entity::{QueryOptions, QueryPage};
use privsvc_ledger::rpc::{decode_answer, decode_query_answer};
use privsvc_ledger::wire::{self, parse_quantity, quantity};
use privsvc_ledger::{Entity, LedgerError, LedgerReader};
use serde_json::{json, Value};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::error::js_error;

/// A ledger reached through a JavaScript JSON-RPC function.
pub struct JsLedger {
    rpc: Function,
}

impl JsLedger {
    /// The ledger of `value`, which must be `ledgerReader(...).rpcBytes` (or `.rpc`).
    pub fn from_value(value: &JsValue) -> Result<JsLedger, JsValue> {
        value
            .dyn_ref::<Function>()
            .map(|f| JsLedger { rpc: f.clone() })
            .ok_or_else(|| {
                js_error(
                    "PrivsvcError",
                    "internal: the ledger reader is not a function (use ledgerReader(publicClient).rpcBytes)",
                )
            })
    }

    /// One JSON-RPC call: its `result`, or [`LedgerError::Rpc`] for a JSON-RPC error.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, LedgerError> {
        decode_answer(method, &self.answer(method, params).await?)
    }

    /// The bytes of the answer to one JSON-RPC call.
    async fn answer(&self, method: &str, params: Value) -> Result<Vec<u8>, LedgerError> {
        let transport = |m: String| LedgerError::Transport(format!("{method}: {m}"));
        let promise = self
            .rpc
            .call2(
                &JsValue::UNDEFINED,
                &JsValue::from_str(method),
                &JsValue::from_str(&params.to_string()),
            )
            .map_err(|e| transport(message_of(&e)))?;
        let promise: Promise = promise
            .dyn_into()
            .map_err(|_| transport("the reader returned no promise".into()))?;
        let answer = JsFuture::from(promise)
            .await
            .map_err(|e| transport(message_of(&e)))?;
        if let Some(bytes) = answer.dyn_ref::<Uint8Array>() {
            return Ok(bytes.to_vec());
        }
        answer
            .as_string()
            .map(String::into_bytes)
            .ok_or_else(|| transport("the reader's answer is neither bytes nor text".into()))
    }

    async fn quantity_call(&self, method: &str, params: Value) -> Result<u64, LedgerError> {
        parse_quantity(&self.call(method, params).await?)
    }
}

fn message_of(e: &JsValue) -> String {
    Reflect::get(e, &JsValue::from_str("message"))
        .ok()
        .and_then(|m| m.as_string())
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "the ledger reader failed".into())
}

fn addr_json(a: &Address) -> Value {
    Value::String(format!("0x{}", hex::encode(a)))
}

fn data_of(v: &Value, what: &str) -> Result<Vec<u8>, LedgerError> {
    v.as_str()
        .and_then(parse_hex)
        .ok_or_else(|| LedgerError::Decode(format!("{what} is not 0x hex")))
}

#[async_trait(?Send)]
impl LedgerReader for JsLedger {
    async fn chain_id(&self) -> Result<u64, LedgerError> {
        self.quantity_call("eth_chainId", json!([])).await
    }

    async fn block_number(&self) -> Result<u64, LedgerError> {
        self.quantity_call("eth_blockNumber", json!([])).await
    }

    async fn query(
        &self,
        expression: &str,
        options: &QueryOptions,
    ) -> Result<QueryPage, LedgerError> {
        let mut options = options.clone();
        // Every entity is identified by its key; always ask for it (as RpcLedger does).
        options.select.key = true;
        let params = json!([expression, wire::query_options_to_json(&options)]);
        decode_query_answer(&self.answer("arkiv_query", params).await?)
    }

    async fn entity(
        &self,
        key: B256,
        at_block: Option<u64>,
    ) -> Result<Option<Entity>, LedgerError> {
        let options = QueryOptions {
            at_block,
            select: wire::select_all(),
            limit: Some(1),
            cursor: None,
        };
        let expression = privsvc_ledger::query::Expr::key_is(key).to_string();
        let page = self.query(&expression, &options).await?;
        Ok(page.entities.into_iter().next())
    }

    async fn code_at(&self, address: Address) -> Result<Vec<u8>, LedgerError> {
        let r = self
            .call("eth_getCode", json!([addr_json(&address), "latest"]))
            .await?;
        data_of(&r, "eth_getCode result")
    }

    async fn entity_nonce(&self, address: Address) -> Result<u64, LedgerError> {
        let tx = json!({
            "to": addr_json(&abi::ARKIV_ADDRESS),
            "data": format!("0x{}", hex::encode(abi::entity_nonce_calldata(address))),
        });
        let r = self.call("eth_call", json!([tx, "latest"])).await?;
        let out = data_of(&r, "eth_call result")?;
        abi::entityNonceCall::abi_decode_returns(&out)
            .map_err(|e| LedgerError::Decode(format!("entityNonce result: {e}")))
    }

    async fn balance(&self, address: Address) -> Result<U256, LedgerError> {
        let r = self
            .call("eth_getBalance", json!([addr_json(&address), "latest"]))
            .await?;
        r.as_str()
            .and_then(parse_uint)
            .ok_or_else(|| LedgerError::Decode(format!("balance is not a quantity: {r}")))
    }

    async fn block_timestamp(&self, number: u64) -> Result<Option<u64>, LedgerError> {
        let block = self
            .call("eth_getBlockByNumber", json!([quantity(number), false]))
            .await?;
        if block.is_null() {
            return Ok(None);
        }
        let ts = block
            .get("timestamp")
            .ok_or_else(|| LedgerError::Decode("block without timestamp".into()))?;
        parse_quantity(ts).map(Some)
    }

    /// The transaction of the `EntityCreated` log of `key` in block `created_at` (as RpcLedger).
    async fn creation_tx(&self, key: B256, created_at: u64) -> Result<Option<B256>, LedgerError> {
        let topic = <abi::EntityCreated as SolEvent>::SIGNATURE_HASH;
        let filter = json!({
            "address": addr_json(&abi::ARKIV_ADDRESS),
            "fromBlock": quantity(created_at),
            "toBlock": quantity(created_at),
            "topics": [topic, key],
        });
        let logs = self.call("eth_getLogs", json!([filter])).await?;
        let logs = logs
            .as_array()
            .ok_or_else(|| LedgerError::Decode("eth_getLogs result is not an array".into()))?;
        for log in logs {
            let from_arkiv = log["address"]
                .as_str()
                .and_then(|a| a.parse::<Address>().ok())
                == Some(abi::ARKIV_ADDRESS);
            let topics: Vec<B256> = log["topics"]
                .as_array()
                .map(|t| {
                    t.iter()
                        .filter_map(|x| wire::parse_b256(x, "topic").ok())
                        .collect()
                })
                .unwrap_or_default();
            if from_arkiv && topics.first() == Some(&topic) && topics.get(1) == Some(&key) {
                return wire::parse_b256(&log["transactionHash"], "transactionHash").map(Some);
            }
        }
        Ok(None)
    }
}
