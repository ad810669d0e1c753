//! `TokenWallet` (docs/API.md §3.6): fetching tokens ahead of time with the wallet, and the token
//! source a client spends them from.

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::Address;
use js_sys::Promise;
use privsvc_ledger::{LedgerReader, RpcLedger};
use privsvc_tokens::{
    available_in, memory_store, TokenSource, TokenStore, TokenWallet, TokenWalletOptions,
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
    rpc_url: String,
    issuer: String,
    issuer_url: String,
    wallet_address: String,
    allow_on_demand: Option<bool>,
    attestation: Option<String>,
    min_age_ms: Option<u64>,
}

fn error(message: impl Into<String>) -> JsValue {
    js_error("PrivsvcError", &message.into())
}

/// A token store: `memoryStore()`, `browserTokenStore(name?)` or a caller's object (`list`,
/// `add`, `remove`, `prune`).
#[wasm_bindgen]
pub struct RawTokenStore {
    inner: Arc<dyn TokenStore>,
}

#[wasm_bindgen]
impl RawTokenStore {
    /// The localStorage store in item `slot`, else the caller's `custom` store, else a new
    /// memory store.
    #[wasm_bindgen(constructor)]
    pub fn new(slot: Option<String>, custom: JsValue) -> RawTokenStore {
        let inner: Arc<dyn TokenStore> = match (slot, JsTokenStore::from_value(&custom)) {
            (Some(slot), _) => Arc::new(crate::browser_store::LocalStorageTokenStore::new(slot)),
            (None, Some(store)) => Arc::new(store),
            (None, None) => memory_store(),
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
impl RawTokenWallet {
    /// A token wallet from `options` (JSON), a wallet adapter, its token store and the adapter
    /// of the fetch its issuer calls go through (`undefined`: reqwest's).
    #[wasm_bindgen(constructor)]
    pub fn new(
        options: &str,
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
        let reader: Arc<dyn LedgerReader> =
            Arc::new(RpcLedger::new(o.rpc_url).map_err(|e| error(e.to_string()))?);
        let wallet = Arc::new(JsWallet::new(address, Bridge::start(wallet)));
        let mut options = TokenWalletOptions::new(wallet, reader, issuer, o.issuer_url);
        let store = store.store();
        if let Some(pins) = store.key_pins() {
            options.pins = pins;
        }
        options.store = store;
        if let Some(on) = o.allow_on_demand {
            options.allow_on_demand = on;
        }
        options.attestation = o.attestation;
        if let Some(fetch) = fetch {
            options.transport = Arc::new(privsvc_tokens::DirectIssuerTransport::with_fetch(
                Arc::new(fetch),
            ));
        }
        if let Some(ms) = o.min_age_ms {
            options.min_age_ms = ms;
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
