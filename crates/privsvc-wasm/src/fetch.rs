//! The JS `fetch` option (docs/API.md §3.1): the crates' [`Fetch`] over a JavaScript function made
//! by `js/client.js` from the caller's `fetch` (`send(method, url, headers, body, timeoutMs,
//! maxBody)` resolving to `{ status, contentType, body }`; it asks for `redirect: "manual"`,
//! applies the time limit and the size limit, and rejects with an error named `TooLarge` or
//! `Redirected` for those).

use std::time::Duration;

use async_trait::async_trait;
use js_sys::{Array, Function, Promise, Reflect, Uint8Array};
use privsvc_rt::{Fetch, FetchRequest, FetchResponse, HttpError};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// A caller's `fetch`, adapted by `js/client.js`.
pub struct JsFetch {
    send: Function,
}

impl JsFetch {
    /// The adapter `send`, or `None` when `value` is not a function (the platform fetch).
    pub fn from_value(value: &JsValue) -> Option<JsFetch> {
        value
            .dyn_ref::<Function>()
            .map(|f| JsFetch { send: f.clone() })
    }
}

fn text_of(value: &JsValue, field: &str) -> Option<String> {
    Reflect::get(value, &JsValue::from_str(field))
        .ok()
        .and_then(|v| v.as_string())
}

fn error_of(e: JsValue, max_body: usize) -> HttpError {
    let name = text_of(&e, "name").unwrap_or_default();
    let message = text_of(&e, "message").unwrap_or_else(|| "fetch failed".into());
    match name.as_str() {
        "Redirected" => HttpError::Redirected,
        "TooLarge" => {
            let size = Reflect::get(&e, &JsValue::from_str("size"))
                .ok()
                .and_then(|v| v.as_f64())
                .map_or(max_body.saturating_add(1), |n| n as usize);
            HttpError::TooLarge {
                size,
                limit: max_body,
            }
        }
        _ => HttpError::Request(format!("the fetch function failed: {message}").into()),
    }
}

#[async_trait(?Send)]
impl Fetch for JsFetch {
    async fn fetch(
        &self,
        request: FetchRequest,
        timeout: Duration,
        max_body: usize,
    ) -> Result<FetchResponse, HttpError> {
        let headers = Array::new();
        for (name, value) in &request.headers {
            headers.push(&Array::of2(&name.into(), &value.into()));
        }
        let body = match &request.body {
            Some(b) => Uint8Array::from(b.as_slice()).into(),
            None => JsValue::UNDEFINED,
        };
        let args = Array::new();
        args.push(&request.method.as_str().into());
        args.push(&request.url.as_str().into());
        args.push(&headers);
        args.push(&body);
        args.push(&JsValue::from_f64(timeout.as_millis() as f64));
        args.push(&JsValue::from_f64(max_body as f64));
        let promise = self
            .send
            .apply(&JsValue::UNDEFINED, &args)
            .map_err(|e| error_of(e, max_body))?;
        let promise: Promise = promise
            .dyn_into()
            .map_err(|_| HttpError::Request("the fetch adapter returned no promise".into()))?;
        let answer = JsFuture::from(promise)
            .await
            .map_err(|e| error_of(e, max_body))?;
        let status = Reflect::get(&answer, &JsValue::from_str("status"))
            .ok()
            .and_then(|v| v.as_f64())
            .filter(|s| (100.0..600.0).contains(s))
            .ok_or_else(|| HttpError::Request("the fetch answer has no HTTP status".into()))?
            as u16;
        let body = Reflect::get(&answer, &JsValue::from_str("body"))
            .ok()
            .and_then(|v| v.dyn_into::<Uint8Array>().ok())
            .map(|b| b.to_vec())
            .unwrap_or_default();
        if body.len() > max_body {
            return Err(HttpError::TooLarge {
                size: body.len(),
                limit: max_body,
            });
        }
        Ok(FetchResponse {
            status,
            content_type: text_of(&answer, "contentType"),
            body,
        })
    }
}
