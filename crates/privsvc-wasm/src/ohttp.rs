//! The low-level `ohttpCall` (docs/API.md §3.8): one relayer request encapsulated to a gateway key
//! and sent through an OHTTP relay.

use std::sync::Arc;

use js_sys::{Object, Promise, Reflect, Uint8Array};
use privsvc_ohttp::{ohttp_call, Fetch, RelayerRequest, ReqwestFetch};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::error::js_error;
use crate::fetch::JsFetch;

fn error(message: String) -> JsValue {
    js_error("PrivsvcError", &message)
}

/// `ohttpCall(relayUrl, target, gatewayKey, { method, path, body? }, fetch?)`: resolves to
/// `{ status, body }` (the relayer's answer, `body` a `Uint8Array`). `fetch` is the adapter of
/// a caller's fetch or `undefined` (the platform fetch).
#[wasm_bindgen(js_name = rawOhttpCall)]
pub fn raw_ohttp_call(
    relay_url: String,
    target: String,
    gateway_key: String,
    method: String,
    path: String,
    body: Option<Vec<u8>>,
    fetch: JsValue,
) -> Promise {
    let fetch: Option<Arc<dyn Fetch>> = JsFetch::from_value(&fetch).map(|f| Arc::new(f) as _);
    future_to_promise(async move {
        let fetch = match fetch {
            Some(f) => f,
            None => Arc::new(
                ReqwestFetch::new(privsvc_ohttp::CALL_TIMEOUT).map_err(|e| error(e.to_string()))?,
            ),
        };
        let request = RelayerRequest {
            method: method.to_ascii_uppercase(),
            path,
            body,
        };
        let answer = ohttp_call(&relay_url, &target, &gateway_key, request, fetch.as_ref())
            .await
            .map_err(|e| error(e.to_string()))?;
        let out = Object::new();
        Reflect::set(&out, &"status".into(), &JsValue::from(answer.status))?;
        Reflect::set(
            &out,
            &"body".into(),
            &Uint8Array::from(answer.body.as_slice()).into(),
        )?;
        Ok(out.into())
    })
}
