//! `JsLedger`: the crates' [`LedgerReader`] over a JavaScript ledger reader made by `js/net.js`
//! (`ledgerReader(publicClient)`), so that every ledger read of the wasm client goes where the
//! app's `publicClient` says: privsvc's own fetch (no redirect, no referrer, no credentials, no
//! HTTP cache) for an RPC URL, or the `request` of a viem client or an EIP-1193 provider (a
//! wagmi `custom()` transport included).
//!
//! Its `rpcBytes(method, paramsJson)` resolves to a JSON-RPC answer (`{ result }` or
//! `{ error: { code, message, data? } }`) as bytes (a `Uint8Array`, what a reader over a URL
//! hands over: no string is made of a listing page on either side) or as text; it rejects when
//! the ledger cannot be reached. A reader over a URL also has `rpcBatchBytes(bodyJson)`, which
//! sends a JSON-RPC batch: [`LedgerReader::query_many`] asks for a listing's pages in batches
//! through it. `arkiv_query` pages are decoded by the borrowed-bytes decoders of the native
//! reader ([`privsvc_ledger::rpc::decode_query_answer`],
//! [`privsvc_ledger::rpc::decode_query_batch_answer`]).

use alloy_primitives::{Address, B256, U256};
use alloy_sol_types::{SolCall, SolEvent};
use async_trait::async_trait;
use js_sys::{Function, Promise, Reflect, Uint8Array};
use privsvc_ledger::abi;
use privsvc_ledger::codec::{parse_hex, parse_uint};
use privsvc_ledger::entity::{PageQuery, QueryOptions, QueryPage};
use privsvc_ledger::rpc::{
    decode_answer, decode_query_answer, decode_query_batch_answer, query_batch_body,
};
use privsvc_ledger::wire::{self, parse_quantity, quantity};
use privsvc_ledger::{Entity, LedgerError, LedgerReader};
use serde_json::{json, Value};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::error::js_error;

/// A ledger reached through a JavaScript ledger reader.
pub struct JsLedger {
    /// `rpcBytes(method, paramsJson)`.
    rpc: Function,
    /// `rpcBatchBytes(bodyJson)`, when the reader has it and the node took batches so far.
    batch: std::cell::RefCell<Option<Function>>,
    /// Id of the next batch call.
    next_id: std::cell::Cell<u64>,
}

impl JsLedger {
    /// The ledger of `value`, which must be a reader made by `ledgerReader(publicClient)`.
    pub fn from_value(value: &JsValue) -> Result<JsLedger, JsValue> {
        let function = |name: &str| {
            Reflect::get(value, &JsValue::from_str(name))
                .ok()
                .and_then(|f| f.dyn_into::<Function>().ok())
        };
        let rpc = function("rpcBytes").ok_or_else(|| {
            js_error(
                "PrivsvcError",
                "internal: not a ledger reader (use ledgerReader(publicClient))",
            )
        })?;
        Ok(JsLedger {
            rpc,
            batch: std::cell::RefCell::new(function("rpcBatchBytes")),
            next_id: std::cell::Cell::new(1),
        })
    }

    /// One JSON-RPC call: its `result`, or [`LedgerError::Rpc`] for a JSON-RPC error.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, LedgerError> {
        decode_answer(method, &self.answer(method, params).await?)
    }

    /// The bytes of the answer to one JSON-RPC call.
    async fn answer(&self, method: &str, params: Value) -> Result<Vec<u8>, LedgerError> {
        let promise = self.rpc.call2(
            &JsValue::UNDEFINED,
            &JsValue::from_str(method),
            &JsValue::from_str(&params.to_string()),
        );
        bytes_of(method, promise).await
    }

    /// The pages of `queries` in one JSON-RPC batch through `batch`; `None` when the node
    /// answered the batch as no batch.
    async fn query_batch(
        &self,
        batch: &Function,
        queries: &[PageQuery],
    ) -> Result<Option<Vec<QueryPage>>, LedgerError> {
        let first_id = self.next_id.get();
        self.next_id.set(first_id + queries.len() as u64);
        let body = query_batch_body(queries, first_id);
        let promise = batch.call1(&JsValue::UNDEFINED, &JsValue::from_str(&body));
        let answer = bytes_of("arkiv_query", promise).await?;
        decode_query_batch_answer(&answer, first_id, queries.len())
    }

    async fn quantity_call(&self, method: &str, params: Value) -> Result<u64, LedgerError> {
        parse_quantity(&self.call(method, params).await?)
    }
}

/// The bytes of the answer `promise` (what a reader function returned) resolves to.
async fn bytes_of(method: &str, promise: Result<JsValue, JsValue>) -> Result<Vec<u8>, LedgerError> {
    let transport = |m: String| LedgerError::Transport(format!("{method}: {m}"));
    let promise = promise.map_err(|e| transport(message_of(&e)))?;
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

    async fn query_many(&self, queries: &[PageQuery]) -> Result<Vec<QueryPage>, LedgerError> {
        let batch = self.batch.borrow().clone();
        if let Some(batch) = batch.filter(|_| queries.len() > 1) {
            match self.query_batch(&batch, queries).await? {
                Some(pages) => return Ok(pages),
                // The node does not take batches: page by page from now on.
                None => *self.batch.borrow_mut() = None,
            }
        }
        privsvc_ledger::reader::query_each(self, queries).await
    }

    async fn entity(
        &self,
        key: B256,
        at_block: Option<u64>,
    ) -> Result<Option<Entity>, LedgerError> {
        let mut options = QueryOptions::new(wire::select_all());
        options.at_block = at_block;
        options.limit = Some(1);
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
