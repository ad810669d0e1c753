//! `TokenWallet` (docs/API.md §3.6): fetching tokens ahead of time with the wallet, and the token
//! source a client spends them from.

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::Address;
use js_sys::Promise;
use privsvc_ledger::LedgerReader;
use privsvc_ohttp::{HttpTransport, OhttpTransport};
use privsvc_tokens::{
    available_in, memory_store, TokenRedemption, TokenSource, TokenStore, TokenWallet,
    TokenWalletOptions,
};
use serde::Deserialize;
use serde_json::json;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::bridge::Bridge;
use crate::error::js_error;
use crate::js_tokens::JsTokenStore;
use crate::js_traits::JsWallet;

/// The options of `new TokenWallet(...)` that reach Rust (JSON).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Options {
    issuer: String,
    issuer_url: String,
    wallet_address: String,
    allow_on_demand: Option<bool>,
    attestation: Option<String>,
    min_age_ms: Option<u64>,
    /// The oldest ripening age of a token the wallet obtains, ms (default an hour).
    max_ripe_ms: Option<u64>,
    /// The OHTTP relay every issuer call goes through (the gateway key from the issuer's
    /// heartbeat), as a client with `ohttpRelay` sends them.
    ohttp_relay: Option<String>,
}

fn error(message: impl Into<String>) -> JsValue {
    js_error("PrivsvcError", &message.into())
}

/// A token store: `memoryStore()`, or a JavaScript object (`list`, `add`, `remove`, `prune`,
/// optionally `keyPin` and `pinKey`): `browserTokenStore(name?)` or a caller's own.
#[wasm_bindgen]
pub struct RawTokenStore {
    inner: Arc<dyn TokenStore>,
}

#[wasm_bindgen]
impl RawTokenStore {
    /// The caller's `custom` store (`browserTokenStore()` is one, written in JavaScript), else
    /// a new memory store.
    #[wasm_bindgen(constructor)]
    pub fn new(custom: JsValue) -> RawTokenStore {
        let inner: Arc<dyn TokenStore> = match JsTokenStore::from_value(&custom) {
            Some(store) => Arc::new(store),
            None => memory_store(),
        };
        RawTokenStore { inner }
    }

    /// The store, for a client or a token wallet.
    pub(crate) fn store(&self) -> Arc<dyn TokenStore> {
        self.inner.clone()
    }

    /// Unspent tokens of `app` for an accepted day (today, or yesterday/tomorrow near midnight).
    pub fn available(&self, app: &str) -> Result<u32, JsValue> {
        available_in(self.inner.as_ref(), app)
            .map(|n| n as u32)
            .map_err(|e| error(e.to_string()))
    }
}

/// Client-side token handling: `acquire`, `prefetchLater`, `source`.
#[wasm_bindgen]
pub struct RawTokenWallet {
    inner: TokenWallet,
}

/// A token source for `createPrivateClient({ tokens })`.
#[wasm_bindgen]
pub struct RawTokenSource {
    inner: Arc<dyn TokenSource>,
}

impl RawTokenSource {
    /// The source.
    pub(crate) fn source(&self) -> Arc<dyn TokenSource> {
        self.inner.clone()
    }
}

#[wasm_bindgen]
impl RawTokenSource {
    /// `take(app, requestedMs)`: one token obtained before the write was requested
    /// (`requestedMs`, Unix ms; default now) and ripe, removed from the store, as JSON
    /// `{ epoch, nonce, signature }`, or `null` at once when none is ready (it never waits).
    pub fn take(&self, app: String, requested_ms: Option<f64>) -> Promise {
        let source = self.inner.clone();
        let requested_ms = requested_ms
            .filter(|ms| ms.is_finite() && *ms >= 0.0)
            .map_or_else(privsvc_tokens::now_ms, |ms| ms as u64);
        future_to_promise(async move {
            let token = source
                .take(&app, requested_ms)
                .await
                .map_err(|e| error(e.to_string()))?;
            Ok(match token {
                Some(t) => {
                    JsValue::from_str(&serde_json::to_string(&t).map_err(|e| error(e.to_string()))?)
                }
                None => JsValue::NULL,
            })
        })
    }

    /// `putBack(app, token)`: returns a token (JSON) that no relayer saw to the store.
    #[wasm_bindgen(js_name = putBack)]
    pub fn put_back(&self, app: String, token: &str) -> Promise {
        let source = self.inner.clone();
        let token: Result<TokenRedemption, _> = serde_json::from_str(token);
        future_to_promise(async move {
            let token = token.map_err(|e| error(format!("invalid token: {e}")))?;
            source
                .put_back(&app, token)
                .await
                .map_err(|e| error(e.to_string()))?;
            Ok(JsValue::UNDEFINED)
        })
    }
}

#[wasm_bindgen]
impl RawTokenWallet {
    /// A token wallet from `options` (JSON), the ledger reader's `rpc` function, a wallet
    /// adapter, its token store and the adapter of the fetch its issuer calls go through
    /// (`undefined`: reqwest's). With `ohttpRelay` in the options every issuer call goes through
    /// that relay, encapsulated to the gateway key of the issuer's heartbeat.
    #[wasm_bindgen(constructor)]
    pub fn new(
        options: &str,
        reader: JsValue,
        wallet: JsValue,
        store: &RawTokenStore,
        fetch: JsValue,
    ) -> Result<RawTokenWallet, JsValue> {
        let fetch = crate::fetch::JsFetch::from_value(&fetch);
        let o: Options =
            serde_json::from_str(options).map_err(|e| error(format!("invalid options: {e}")))?;
        let address: Address = o
            .wallet_address
            .parse()
            .map_err(|_| error("invalid wallet address"))?;
        let issuer: Address = o
            .issuer
            .parse()
            .map_err(|_| error("`issuer` must be the issuer's address"))?;
        let reader: Arc<dyn LedgerReader> = Arc::new(crate::js_ledger::reader_of(&reader)?);
        let wallet = Arc::new(JsWallet::new(address, Bridge::start(wallet)));
        let mut options = TokenWalletOptions::new(wallet, reader.clone(), issuer, o.issuer_url);
        let store = store.store();
        if let Some(pins) = store.key_pins() {
            options.pins = pins;
        }
        options.store = store;
        if let Some(on) = o.allow_on_demand {
            options.allow_on_demand = on;
        }
        options.attestation = o.attestation;
        let fetch: Option<Arc<dyn privsvc_rt::Fetch>> = fetch.map(|f| Arc::new(f) as _);
        match (o.ohttp_relay, fetch) {
            (Some(relay), fetch) => {
                let mut t = OhttpTransport::new(&relay, reader)
                    .map_err(|e| error(format!("ohttpRelay: {e}")))?;
                if let Some(f) = fetch {
                    t = t.with_fetch(f);
                }
                // Issuer calls through the OHTTP relay to the issuer's relayer (its
                // `/v1/ohttp`), as the client's are when it has a relay.
                options.transport = Arc::new(t);
            }
            (None, Some(fetch)) => {
                options.transport = Arc::new(HttpTransport::with_fetch(fetch));
            }
            (None, None) => {}
        }
        if let Some(ms) = o.min_age_ms {
            options.min_age_ms = ms;
        }
        if let Some(ms) = o.max_ripe_ms {
            options.max_ripe_ms = ms;
        }
        Ok(RawTokenWallet {
            inner: TokenWallet::new(options),
        })
    }

    /// Fetches `count` tokens for `app` now: resolves to JSON `{ count, remaining }`.
    pub fn acquire(&self, app: String, count: u32, attestation: Option<String>) -> Promise {
        let wallet = self.inner.clone();
        future_to_promise(async move {
            let got = wallet
                .acquire(&app, count as usize, attestation.as_deref())
                .await
                .map_err(|e| error(e.to_string()))?;
            Ok(JsValue::from_str(
                &json!({"count": got.count, "remaining": got.remaining}).to_string(),
            ))
        })
    }

    /// Fetches `count` tokens at a random moment within `withinMs` (default 6 hours).
    #[wasm_bindgen(js_name = prefetchLater)]
    pub fn prefetch_later(&self, app: String, count: u32, within_ms: Option<f64>) {
        let within = within_ms.map(|ms| Duration::from_millis(ms as u64));
        drop(self.inner.prefetch_later(&app, count as usize, within));
    }

    /// The token source for `createPrivateClient({ tokens })`.
    pub fn source(&self) -> RawTokenSource {
        RawTokenSource {
            inner: self.inner.source(),
        }
    }
}
