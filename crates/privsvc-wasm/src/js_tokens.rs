//! A caller's own `TokenStore` and `TokenSource` objects (`tokenStore`, `tokens`:
//! docs/API.md §3.1), as the crates' traits.
//!
//! A JS token store has four synchronous methods over plain token objects
//! `{ app, epoch, nonce, signature, obtainedMs }`: `list(app)` (array), `add(tokens)`,
//! `remove(app, nonce)` (true when it was there) and `prune(minEpoch)`; with `keyPin(issuer,
//! app, epoch)` and `pinKey(issuer, app, epoch, spkiBase64)` as well (`browserTokenStore()` has
//! them) it also keeps the issuer-key pins that go with its tokens, and with `relayerPin(url)`
//! and `pinRelayer(url, address)` (optionally `unpinRelayer(url)` and `relayerPins()`) the
//! relayer pins (url -> account) the client makes on first use. A JS token source has
//! two asynchronous ones over `{ epoch, nonce, signature }`: `take(app, requestedMs)` (a token
//! obtained before `requestedMs` and ripe, or `null` at once: a source never waits) and
//! `putBack(app, token)`.

use async_trait::async_trait;
use js_sys::{Array, Function, Object, Promise, Reflect};
use std::sync::Arc;

use alloy_primitives::Address;
use privsvc_tokens::{
    KeyPins, RelayerPins, StoredToken, TokenError, TokenRedemption, TokenSource, TokenStore,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

fn method(target: &Object, name: &str) -> Option<Function> {
    Reflect::get(target, &JsValue::from_str(name))
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
}

fn has_methods(value: &JsValue, names: &[&str]) -> Option<Object> {
    let object = value.dyn_ref::<Object>()?;
    names
        .iter()
        .all(|n| method(object, n).is_some())
        .then(|| object.clone())
}

fn to_js<T: Serialize + ?Sized>(value: &T) -> Result<JsValue, String> {
    let text = serde_json::to_string(value).map_err(|e| e.to_string())?;
    js_sys::JSON::parse(&text).map_err(|_| "cannot build a JS value".to_string())
}

fn from_js<T: DeserializeOwned>(value: &JsValue, what: &str) -> Result<T, String> {
    let text = js_sys::JSON::stringify(value)
        .ok()
        .and_then(|s| s.as_string())
        .ok_or_else(|| format!("{what}: not JSON"))?;
    serde_json::from_str(&text).map_err(|e| format!("{what}: {e}"))
}

fn message_of(e: &JsValue) -> String {
    Reflect::get(e, &JsValue::from_str("message"))
        .ok()
        .and_then(|m| m.as_string())
        .unwrap_or_else(|| "failed".into())
}

fn call(target: &Object, name: &str, args: &[JsValue]) -> Result<JsValue, String> {
    let f = method(target, name).ok_or_else(|| format!("has no `{name}` method"))?;
    let list = Array::new();
    for a in args {
        list.push(a);
    }
    f.apply(target, &list)
        .map_err(|e| format!("`{name}` threw: {}", message_of(&e)))
}

/// A caller's token store.
pub struct JsTokenStore {
    target: Object,
}

impl JsTokenStore {
    /// The store, when `value` has `list`, `add`, `remove` and `prune`.
    pub fn from_value(value: &JsValue) -> Option<JsTokenStore> {
        has_methods(value, &["list", "add", "remove", "prune"])
            .map(|target| JsTokenStore { target })
    }

    fn call(&self, name: &str, args: &[JsValue]) -> Result<JsValue, TokenError> {
        let answer = call(&self.target, name, args)
            .map_err(|e| TokenError::Store(format!("tokenStore: {e}")))?;
        if answer.is_instance_of::<Promise>() {
            return Err(TokenError::Store(format!(
                "tokenStore.{name} returned a promise; a token store's methods are synchronous"
            )));
        }
        Ok(answer)
    }
}

impl TokenStore for JsTokenStore {
    fn add(&self, tokens: &[StoredToken]) -> Result<(), TokenError> {
        let list = to_js(tokens).map_err(TokenError::Store)?;
        self.call("add", &[list]).map(drop)
    }

    fn list(&self, app: &str) -> Result<Vec<StoredToken>, TokenError> {
        let answer = self.call("list", &[app.into()])?;
        let all: Vec<StoredToken> =
            from_js(&answer, "tokenStore.list").map_err(TokenError::Store)?;
        // Only the app's tokens, whatever the store answered.
        Ok(all.into_iter().filter(|t| t.app == app).collect())
    }

    fn remove(&self, app: &str, nonce: &str) -> Result<bool, TokenError> {
        let answer = self.call("remove", &[app.into(), nonce.into()])?;
        Ok(answer.is_truthy())
    }

    fn prune(&self, min_epoch: u32) -> Result<(), TokenError> {
        self.call("prune", &[JsValue::from(min_epoch)]).map(drop)
    }

    /// The store's own pins when it has `keyPin` and `pinKey` (persisted with its tokens).
    fn key_pins(&self) -> Option<Arc<dyn KeyPins>> {
        has_methods(&self.target, &["keyPin", "pinKey"]).map(|_| {
            Arc::new(JsTokenStore {
                target: self.target.clone(),
            }) as Arc<dyn KeyPins>
        })
    }

    /// The store's relayer pins when it has `relayerPin` and `pinRelayer` (persisted with its
    /// tokens, as a file store's are next to its file); else none, and the client keeps them
    /// in memory for the session.
    fn relayer_pins(&self) -> Option<Arc<dyn RelayerPins>> {
        has_methods(&self.target, &["relayerPin", "pinRelayer"]).map(|_| {
            Arc::new(JsTokenStore {
                target: self.target.clone(),
            }) as Arc<dyn RelayerPins>
        })
    }
}

fn address_of(answer: &JsValue, what: &str) -> Result<Address, TokenError> {
    answer
        .as_string()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| TokenError::Store(format!("tokenStore.{what} did not answer an address")))
}

impl RelayerPins for JsTokenStore {
    fn get(&self, url: &str) -> Result<Option<Address>, TokenError> {
        let answer = self.call("relayerPin", &[url.into()])?;
        if answer.is_undefined() || answer.is_null() {
            return Ok(None);
        }
        address_of(&answer, "relayerPin").map(Some)
    }

    fn pin(&self, url: &str, account: Address) -> Result<Address, TokenError> {
        let answer = self.call(
            "pinRelayer",
            &[url.into(), account.to_checksum(None).into()],
        )?;
        address_of(&answer, "pinRelayer")
    }

    fn unpin(&self, url: &str) -> Result<bool, TokenError> {
        if method(&self.target, "unpinRelayer").is_none() {
            return Err(TokenError::Store(
                "tokenStore has no `unpinRelayer` method".into(),
            ));
        }
        Ok(self.call("unpinRelayer", &[url.into()])?.is_truthy())
    }

    fn list(&self) -> Result<Vec<(String, Address)>, TokenError> {
        if method(&self.target, "relayerPins").is_none() {
            return Ok(Vec::new());
        }
        let answer = self.call("relayerPins", &[])?;
        let map: std::collections::BTreeMap<String, String> =
            from_js(&answer, "tokenStore.relayerPins").map_err(TokenError::Store)?;
        map.into_iter()
            .map(|(url, a)| {
                a.parse().map(|a| (url.clone(), a)).map_err(|_| {
                    TokenError::Store(format!("tokenStore.relayerPins: {url}: not an address"))
                })
            })
            .collect()
    }
}

fn spki_of(answer: &JsValue, what: &str) -> Result<Vec<u8>, TokenError> {
    let text = answer.as_string().ok_or_else(|| {
        TokenError::Store(format!("tokenStore.{what} did not answer base64 text"))
    })?;
    privsvc_envelope::from_base64(&text)
        .map_err(|_| TokenError::Store(format!("tokenStore.{what}: not standard base64")))
}

impl KeyPins for JsTokenStore {
    fn get(&self, issuer: Address, app: &str, epoch: u32) -> Result<Option<Vec<u8>>, TokenError> {
        let answer = self.call(
            "keyPin",
            &[
                issuer.to_checksum(None).into(),
                app.into(),
                JsValue::from(epoch),
            ],
        )?;
        if answer.is_undefined() || answer.is_null() {
            return Ok(None);
        }
        spki_of(&answer, "keyPin").map(Some)
    }

    fn pin(
        &self,
        issuer: Address,
        app: &str,
        epoch: u32,
        spki: &[u8],
    ) -> Result<Vec<u8>, TokenError> {
        let answer = self.call(
            "pinKey",
            &[
                issuer.to_checksum(None).into(),
                app.into(),
                JsValue::from(epoch),
                privsvc_envelope::to_base64(spki).into(),
            ],
        )?;
        spki_of(&answer, "pinKey")
    }
}

/// A caller's token source.
pub struct JsTokenSource {
    target: Object,
}

impl JsTokenSource {
    /// The source, when `value` has `take` and `putBack`.
    pub fn from_value(value: &JsValue) -> Option<JsTokenSource> {
        has_methods(value, &["take", "putBack"]).map(|target| JsTokenSource { target })
    }

    async fn call(&self, name: &str, args: &[JsValue]) -> Result<JsValue, TokenError> {
        let fail = |e: String| TokenError::Store(format!("tokens: {e}"));
        let answer = call(&self.target, name, args).map_err(fail)?;
        match answer.dyn_into::<Promise>() {
            Ok(p) => JsFuture::from(p)
                .await
                .map_err(|e| fail(format!("`{name}` rejected: {}", message_of(&e)))),
            Err(value) => Ok(value),
        }
    }
}

#[async_trait(?Send)]
impl TokenSource for JsTokenSource {
    async fn take(
        &self,
        app: &str,
        requested_ms: u64,
    ) -> Result<Option<TokenRedemption>, TokenError> {
        let answer = self
            .call(
                "take",
                &[app.into(), JsValue::from_f64(requested_ms as f64)],
            )
            .await?;
        if answer.is_null() || answer.is_undefined() {
            return Ok(None);
        }
        from_js(&answer, "tokens.take")
            .map(Some)
            .map_err(TokenError::Store)
    }

    async fn put_back(&self, app: &str, token: TokenRedemption) -> Result<(), TokenError> {
        let token = to_js(&token).map_err(TokenError::Store)?;
        self.call("putBack", &[app.into(), token]).await.map(drop)
    }
}
