//! The crates' [`LedgerReader`](privsvc_ledger::LedgerReader) over a JavaScript ledger reader made by `js/net.js`
//! (`ledgerReader(publicClient)`): [`reader_of`] is the native reader, `RpcLedger`, with a
//! [`JsChannel`] carrying its calls, so that every ledger read of the wasm client goes where the
//! app's `publicClient` says: privsvc's own fetch (no redirect, no referrer, no credentials, no
//! HTTP cache) for an RPC URL, or the `request` of a viem client or an EIP-1193 provider (a
//! wagmi `custom()` transport included).
//!
//! Its `rpcBytes(method, paramsJson)` resolves to a JSON-RPC answer (`{ result }` or
//! `{ error: { code, message, data? } }`) as bytes (a `Uint8Array`, what a reader over a URL
//! hands over: no string is made of a listing page on either side) or as text; it rejects when
//! the ledger cannot be reached. A reader over a URL also has `rpcBatchBytes(bodyJson)`, which
//! sends a JSON-RPC batch: [`privsvc_ledger::LedgerReader::query_many`] asks for a listing's pages in batches
//! through it. Every read, and the decoding of its answer (`arkiv_query` pages straight from
//! the bytes), is the native reader's.

use async_trait::async_trait;
use js_sys::{Function, Promise, Reflect, Uint8Array};
use privsvc_ledger::LedgerError;
use privsvc_ledger::{RpcChannel, RpcLedger};
use serde_json::Value;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::error::js_error;

/// The ledger of `value`, which must be a reader made by `ledgerReader(publicClient)`.
pub fn reader_of(value: &JsValue) -> Result<RpcLedger, JsValue> {
    Ok(RpcLedger::with_channel(
        Box::new(JsChannel::from_value(value)?),
        "the app's ledger reader",
    ))
}

/// JSON-RPC calls carried by a JavaScript ledger reader.
pub struct JsChannel {
    /// `rpcBytes(method, paramsJson)`.
    rpc: Function,
    /// `rpcBatchBytes(bodyJson)`, when the reader has it (a reader over a URL).
    batch: Option<Function>,
}

impl JsChannel {
    /// The channel of `value`, which must be a reader made by `ledgerReader(publicClient)`.
    pub fn from_value(value: &JsValue) -> Result<JsChannel, JsValue> {
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
        Ok(JsChannel {
            rpc,
            batch: function("rpcBatchBytes"),
        })
    }
}

#[async_trait(?Send)]
impl RpcChannel for JsChannel {
    async fn call(
        &self,
        _id: u64,
        method: &'static str,
        params: &Value,
    ) -> Result<Vec<u8>, LedgerError> {
        let promise = self.rpc.call2(
            &JsValue::UNDEFINED,
            &JsValue::from_str(method),
            &JsValue::from_str(&params.to_string()),
        );
        bytes_of(method, promise).await
    }

    async fn batch(
        &self,
        method: &'static str,
        body: String,
    ) -> Result<Option<Vec<u8>>, LedgerError> {
        let Some(batch) = &self.batch else {
            return Ok(None);
        };
        let promise = batch.call1(&JsValue::UNDEFINED, &JsValue::from_str(&body));
        bytes_of(method, promise).await.map(Some)
    }
}

/// The bytes of the answer `promise` (what a reader function returned) resolves to.
async fn bytes_of(method: &str, promise: Result<JsValue, JsValue>) -> Result<Vec<u8>, LedgerError> {
    let transport = |m: String| {
        LedgerError::Transport(privsvc_ledger::ChannelError::Host(
            format!("{method}: {m}").into(),
        ))
    };
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
