//! `RawClient`: the Rust `PrivateClient` (tokens, OHTTP, cover batches, verification) for
//! `createPrivateClient` in `js/index.js`. Its wallet and vault are JavaScript objects reached
//! through [`crate::bridge`]; the ledger is read through the JavaScript reader of the app's
//! `publicClient` ([`crate::js_ledger::JsLedger`]).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::Address;
use js_sys::Promise;
use privsvc_attributes::Attributes;
use privsvc_client::{
    discover_relayers, verify_ownership_proof, CreateParams, EntitiesQuery, Expires, MyRecord,
    OwnershipProof, PrivateClient, PrivsvcError, ProofExpectation, ProveParams,
};
use privsvc_ledger::LedgerReader;
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::bridge::Bridge;
use crate::convert::{address_text, to_attributes, to_b256};
use crate::error::js_error;
use crate::js_ledger::JsLedger;
use crate::js_traits::{JsVault, JsWallet};

/// The options of `createPrivateClient` that reach Rust (SPEC's table, JSON).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Options {
    app: String,
    project: Option<String>,
    relayers: Option<Vec<String>>,
    ohttp_relay: Option<String>,
    delay_ms: Option<(u64, u64)>,
    min_anonymity: Option<u64>,
    max_hold_ms: Option<u64>,
    inclusion_timeout_ms: Option<u64>,
    poll_ms: Option<u64>,
    strict: Option<bool>,
    rarity_k: Option<usize>,
    cover_batches: Option<usize>,
    token_attestation: Option<String>,
    token_min_age_ms: Option<u64>,
    trusted_relayers_only: Option<bool>,
    /// The wallet's account (when a wallet is given).
    wallet_address: Option<String>,
}

/// The JS error of a client error: its SPEC class in `name`.
fn client_error(e: PrivsvcError) -> JsValue {
    let name = match &e {
        PrivsvcError::NonDeterministicWallet => "NonDeterministicWalletError",
        PrivsvcError::SmartContractWallet => "SmartContractWalletError",
        PrivsvcError::IssuerEquivocation { .. } => "IssuerEquivocationError",
        PrivsvcError::NoTokenReady { .. } => "NoTokenReady",
        _ => "PrivsvcError",
    };
    js_error(name, &e.to_string())
}

fn config_error(message: impl Into<String>) -> JsValue {
    js_error("PrivsvcError", &message.into())
}

fn record_json(r: &MyRecord) -> Value {
    let mut v = r.summary();
    v["key"] = json!(r.key.to_string());
    v["data"] = json!(hex::encode(&r.data));
    v["encrypted"] = json!(r.encrypted);
    v["envelope"] = json!(r.envelope);
    v
}

/// A privsvc client session (SPEC `createPrivateClient`), driven by `js/index.js`.
#[wasm_bindgen]
pub struct RawClient {
    inner: Rc<PrivateClient>,
}

#[wasm_bindgen]
impl RawClient {
    /// Builds a client from `options` (JSON), the ledger reader's `rpc` function, a wallet
    /// adapter or a vault adapter, and its token store. The token source is
    /// `tokenWallet.source()`'s or a caller's object (`take`, `putBack`), and `fetch` the adapter
    /// of a caller's fetch; each may be `undefined`.
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        options: &str,
        reader: JsValue,
        wallet: JsValue,
        vault: JsValue,
        store: &crate::token_wallet::RawTokenStore,
        tokens: Option<crate::token_wallet::RawTokenSource>,
        custom_tokens: JsValue,
        fetch: JsValue,
    ) -> Promise {
        let fetch = crate::fetch::JsFetch::from_value(&fetch);
        let store = store.store();
        let tokens: Option<Arc<dyn privsvc_tokens::TokenSource>> = match tokens {
            Some(t) => Some(t.source()),
            None => crate::js_tokens::JsTokenSource::from_value(&custom_tokens)
                .map(|s| Arc::new(s) as _),
        };
        let parsed: Result<Options, _> = serde_json::from_str(options);
        let reader = JsLedger::from_value(&reader);
        future_to_promise(async move {
            let o = parsed.map_err(|e| config_error(format!("invalid options: {e}")))?;
            let reader: Arc<dyn LedgerReader> = Arc::new(reader?);
            // Keys in a worker are the JS side's business (WorkerVault); Rust never isolates.
            let mut b = PrivateClient::builder(o.app.clone())
                .reader(reader)
                .isolate_keys(false);
            if !vault.is_undefined() && !vault.is_null() {
                b = b.vault(Arc::new(JsVault::new(o.app.clone(), Bridge::start(vault))));
            }
            if let Some(text) = o.wallet_address.as_deref() {
                // The wallet also signs token issue requests when a vault holds the keys.
                let address: Address = text
                    .parse()
                    .map_err(|_| config_error(format!("invalid wallet address {text:?}")))?;
                b = b.wallet(Arc::new(JsWallet::new(address, Bridge::start(wallet))));
            }
            if let Some(source) = tokens {
                b = b.tokens(privsvc_client::Tokens::Source(source));
            }
            if let Some(fetch) = fetch {
                b = b.fetch(Arc::new(fetch));
            }
            if let Some(p) = o.project {
                b = b.project(p);
            }
            if let Some(r) = o.relayers {
                b = b.relayers(r);
            }
            if let Some(u) = o.ohttp_relay {
                b = b.ohttp_relay(u);
            }
            if let Some((lo, hi)) = o.delay_ms {
                b = b.delay_ms(lo, hi);
            }
            if let Some(k) = o.min_anonymity {
                b = b.min_anonymity(k);
            }
            if let Some(ms) = o.max_hold_ms {
                b = b.max_hold_ms(ms);
            }
            if let Some(ms) = o.inclusion_timeout_ms {
                b = b.inclusion_timeout(Duration::from_millis(ms));
            }
            if let Some(ms) = o.poll_ms {
                b = b.poll_interval(Duration::from_millis(ms));
            }
            if let Some(s) = o.strict {
                b = b.strict(s);
            }
            if let Some(k) = o.rarity_k {
                b = b.rarity_k(k);
            }
            if let Some(n) = o.cover_batches {
                b = b.cover_batches(n);
            }
            if let Some(code) = o.token_attestation {
                b = b.token_attestation(code);
            }
            if let Some(ms) = o.token_min_age_ms {
                b = b.token_min_age_ms(ms);
            }
            b = b.token_store(store);
            if let Some(t) = o.trusted_relayers_only {
                b = b.trusted_relayers_only(t);
            }
            let client = b.build().await.map_err(client_error)?;
            Ok(RawClient {
                inner: Rc::new(client),
            }
            .into())
        })
    }

    /// The app.
    #[wasm_bindgen(getter)]
    pub fn app(&self) -> String {
        self.inner.app().to_owned()
    }

    /// The project.
    #[wasm_bindgen(getter)]
    pub fn project(&self) -> String {
        self.inner.project().to_owned()
    }

    /// The ledger's chain id.
    #[wasm_bindgen(getter, js_name = chainId)]
    pub fn chain_id(&self) -> f64 {
        self.inner.chain_id() as f64
    }

    /// `relayers()`: JSON `[{ url, address, bad, info }]`.
    pub fn relayers(&self) -> String {
        let list: Vec<Value> = self
            .inner
            .relayers()
            .iter()
            .map(|r| json!({"url": r.url, "address": address_text(&r.address), "bad": r.bad, "info": r.info}))
            .collect();
        Value::Array(list).to_string()
    }

    /// `relayerAddresses()`: JSON array of addresses.
    #[wasm_bindgen(js_name = relayerAddresses)]
    pub fn relayer_addresses(&self) -> String {
        let list: Vec<String> = self
            .inner
            .relayer_addresses()
            .iter()
            .map(address_text)
            .collect();
        json!(list).to_string()
    }

    /// `createEntity`: `params` JSON `{ contentType, attributes (wire), expires (seconds),
    /// scope?, encrypt? }` and the payload; resolves to the create result as JSON.
    #[wasm_bindgen(js_name = createEntity)]
    pub fn create_entity(&self, params: &str, payload: Vec<u8>) -> Promise {
        let client = self.inner.clone();
        let params: Result<Value, _> = serde_json::from_str(params);
        future_to_promise(async move {
            let p =
                params.map_err(|e| config_error(format!("invalid createEntity params: {e}")))?;
            let seconds = p["expires"]
                .as_u64()
                .ok_or_else(|| config_error("expires must be a whole number of seconds"))?;
            let mut cp = CreateParams::new(
                payload,
                p["contentType"].as_str().unwrap_or_default(),
                Expires::Seconds(seconds),
            )
            .encrypt(p["encrypt"].as_bool().unwrap_or(false));
            let attrs = to_attributes(&p["attributes"].to_string())
                .map_err(|e| config_error(e.to_string()))?;
            for (name, value) in &attrs {
                cp = cp.attribute(name.clone(), value.clone());
            }
            if let Some(s) = p["scope"].as_str() {
                cp = cp.scope(s);
            }
            let r = client.create_entity(cp).await.map_err(client_error)?;
            Ok(JsValue::from_str(
                &json!({
                    "entityKey": r.entity_key.to_string(),
                    "owner": address_text(&r.owner),
                    "txHash": r.tx_hash.to_string(),
                    "relayer": r.relayer,
                    "batchSize": r.batch_size,
                    "recovered": r.recovered,
                    "warnings": r.warnings,
                })
                .to_string(),
            ))
        })
    }

    /// `myEntities({ refresh, where })`: `where_` is wire JSON (or empty); resolves to JSON.
    #[wasm_bindgen(js_name = myEntities)]
    pub fn my_entities(&self, refresh: bool, where_: Option<String>) -> Promise {
        let client = self.inner.clone();
        future_to_promise(async move {
            let mut q = EntitiesQuery::new();
            if refresh {
                q = q.refresh();
            }
            if let Some(w) = where_ {
                let attrs: Attributes =
                    to_attributes(&w).map_err(|e| config_error(e.to_string()))?;
                for (n, v) in &attrs {
                    q = q.where_eq(n.clone(), v.clone());
                }
            }
            let records = client.my_entities(&q).await.map_err(client_error)?;
            let list: Vec<Value> = records.iter().map(record_json).collect();
            Ok(JsValue::from_str(&Value::Array(list).to_string()))
        })
    }

    /// `proveOwnership(entityKey, { challenge, verifier, ttlSeconds })`: resolves to the proof
    /// as JSON.
    #[wasm_bindgen(js_name = proveOwnership)]
    pub fn prove_ownership(
        &self,
        entity_key: &str,
        challenge: String,
        verifier: String,
        ttl_seconds: Option<f64>,
    ) -> Promise {
        let client = self.inner.clone();
        let key = to_b256("entityKey", entity_key);
        future_to_promise(async move {
            let key = key.map_err(|e| config_error(e.to_string()))?;
            let proof = client
                .prove_ownership(
                    key,
                    &ProveParams {
                        challenge,
                        verifier,
                        ttl_seconds: ttl_seconds.map(|t| t as u64),
                    },
                )
                .await
                .map_err(client_error)?;
            serde_json::to_string(&proof)
                .map(|s| JsValue::from_str(&s))
                .map_err(|e| config_error(e.to_string()))
        })
    }

    /// `scopeAddress(name)`.
    #[wasm_bindgen(js_name = scopeAddress)]
    pub fn scope_address(&self, name: String) -> Promise {
        let client = self.inner.clone();
        future_to_promise(async move {
            let a = client.scope_address(&name).await.map_err(client_error)?;
            Ok(JsValue::from_str(&address_text(&a)))
        })
    }

    /// `checkRarity(attributes, k?)` against the project's listing: warnings as JSON.
    #[wasm_bindgen(js_name = checkRarity)]
    pub fn check_rarity(&self, attributes: &str, k: Option<u32>) -> Promise {
        let client = self.inner.clone();
        let attrs = to_attributes(attributes);
        future_to_promise(async move {
            let attrs = attrs.map_err(|e| config_error(e.to_string()))?;
            let w = client
                .check_rarity(&attrs, k.map(|k| k as usize))
                .await
                .map_err(client_error)?;
            Ok(JsValue::from_str(&json!(w).to_string()))
        })
    }
}

/// `verifyOwnershipProof(proof, { challenge, verifier, client })` with the Rust verifier
/// (window, signature, the entity's owner and the record's validity on the ledger at
/// `reader`, a ledger reader's `rpc` function): resolves to `""` when the proof holds, else the
/// reason.
#[wasm_bindgen(js_name = rawVerifyOwnershipProof)]
pub fn raw_verify_ownership_proof(
    proof: String,
    challenge: String,
    verifier: String,
    reader: JsValue,
    now: Option<f64>,
) -> Promise {
    let reader = JsLedger::from_value(&reader);
    future_to_promise(async move {
        let proof: OwnershipProof = match serde_json::from_str(&proof) {
            Ok(p) => p,
            Err(e) => return Ok(JsValue::from_str(&format!("the proof is malformed: {e}"))),
        };
        let reader = reader?;
        let verdict = verify_ownership_proof(
            &proof,
            &ProofExpectation {
                challenge: &challenge,
                verifier: &verifier,
                reader: &reader,
                now: now.map(|n| n as u64),
            },
        )
        .await;
        Ok(JsValue::from_str(&match verdict {
            Ok(()) => String::new(),
            Err(reason) => reason.to_string(),
        }))
    })
}

/// `discoverRelayers(reader, fetch?)`: live relayers whose `/v1/info` matches their heartbeat,
/// JSON; `reader` is a ledger reader's `rpc` function, `fetch` the adapter of a caller's fetch
/// (see [`crate::fetch`]) or `undefined`.
#[wasm_bindgen(js_name = rawDiscoverRelayers)]
pub fn raw_discover_relayers(reader: JsValue, fetch: JsValue) -> Promise {
    let fetch = crate::fetch::JsFetch::from_value(&fetch);
    let reader = JsLedger::from_value(&reader);
    future_to_promise(async move {
        let reader: Arc<dyn LedgerReader> = Arc::new(reader?);
        let mut options = privsvc_client::ClientOptions::new("privsvc");
        options.fetch = fetch.map(|f| Arc::new(f) as _);
        let transport =
            privsvc_client::default_transport(&options, reader.clone()).map_err(client_error)?;
        let list = discover_relayers(reader.as_ref(), transport.as_ref())
            .await
            .map_err(client_error)?;
        let out: Vec<Value> = list
            .iter()
            .map(|r| json!({"url": r.url, "address": address_text(&r.address), "bad": r.bad, "info": r.info}))
            .collect();
        Ok(JsValue::from_str(&Value::Array(out).to_string()))
    })
}

/// `verifyRecord(entity, { app?, relayers?, owner?, createdTimestamp? })`: `entity` is the
/// ledger's JSON form (`arkiv_query` with key, owner, creator, payload, attributes selected);
/// resolves nothing, answers JSON `{ ok: true, record }` or `{ ok: false, reason }`.
#[wasm_bindgen(js_name = rawVerifyRecord)]
pub fn raw_verify_record(entity: &str, options: &str) -> Result<String, JsValue> {
    let value: Value =
        serde_json::from_str(entity).map_err(|e| config_error(format!("invalid entity: {e}")))?;
    let entity = match privsvc_ledger::wire::entity_from_json(&value) {
        Ok(e) => e,
        Err(e) => return Ok(json!({"ok": false, "reason": e.to_string()}).to_string()),
    };
    let o: Value =
        serde_json::from_str(options).map_err(|e| config_error(format!("invalid options: {e}")))?;
    let parse = |v: &Value| -> Result<Address, JsValue> {
        v.as_str()
            .unwrap_or_default()
            .parse()
            .map_err(|_| config_error(format!("invalid address {v}")))
    };
    let relayers = match o["relayers"].as_array() {
        Some(list) => Some(list.iter().map(parse).collect::<Result<Vec<_>, _>>()?),
        None => None,
    };
    let owner = match &o["owner"] {
        Value::Null => None,
        v => Some(parse(v)?),
    };
    let verdict = privsvc_client::verify_record(
        &entity,
        &privsvc_client::VerifyOptions {
            app: o["app"].as_str(),
            relayers: relayers.as_deref(),
            owner,
            created_timestamp: o["createdTimestamp"].as_u64(),
        },
    );
    Ok(match verdict {
        Ok(r) => json!({"ok": true, "record": {
            "key": r.key.to_string(),
            "owner": address_text(&r.owner),
            "creator": address_text(&r.creator),
            "createdAt": r.created_at,
            "expiresAt": r.expires_at,
            "app": r.body.app,
            "contentType": r.body.ct,
            "encrypted": r.body.enc,
            "expSeconds": r.body.exp,
            "hour": r.body.hour,
            "data": hex::encode(&r.body.data),
            "attributes": r.attributes.to_wire(),
            "envelope": r.envelope,
        }})
        .to_string(),
        Err(reason) => json!({"ok": false, "reason": reason.to_string()}).to_string(),
    })
}
