//! `RawClient`: the Rust `PrivateClient` (tokens, OHTTP, cover batches, verification) for
//! `createPrivateClient` in `js/index.js`. Its wallet and vault are JavaScript objects reached
//! through [`crate::bridge`]; the ledger is read through the JavaScript reader of the app's
//! `publicClient` ([`crate::js_ledger::reader_of`]).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::Address;
use js_sys::Promise;
use privsvc_attributes::Attributes;
use privsvc_client::{
    discover_relayers, verify_ownership_proof, CreateParams, EntitiesQuery, Expires, MyRecord,
    OwnershipProof, PrivateClient, PrivsvcError, ProofExpectation, ProveParams, RejectReason,
    RelayerRef, SessionSchedule,
};
use privsvc_ledger::LedgerReader;
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::bridge::Bridge;
use crate::convert::{address_text, to_attributes, to_b256};
use crate::error::js_error;
use crate::js_traits::{JsVault, JsWallet};

/// The options of `createPrivateClient` that reach Rust (the table of docs/API.md §3.1, as JSON).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Options {
    app: String,
    project: Option<String>,
    relayers: Option<Vec<RelayerInput>>,
    ohttp_relay: Option<String>,
    delay_ms: Option<(u64, u64)>,
    min_anonymity: Option<u64>,
    max_hold_ms: Option<u64>,
    inclusion_timeout_ms: Option<u64>,
    poll_ms: Option<u64>,
    strict: Option<bool>,
    rarity_k: Option<usize>,
    cover_batches: Option<usize>,
    /// The scan cache's resume granularity in blocks (default an hour of blocks).
    scan_cache_resume_blocks: Option<u64>,
    token_attestation: Option<String>,
    token_min_age_ms: Option<u64>,
    /// The oldest ripening age of a token obtained in this session, ms (default an hour).
    token_max_ripe_ms: Option<u64>,
    /// The cover stream's slots per minute through the OHTTP relay (default none).
    cover_per_minute: Option<f64>,
    /// The share of the cover stream's dummies in the submission class (default 0.1).
    cover_submission_share: Option<f64>,
    /// With `allowOnDemand`, the longest a write waits for tokens it fetched to ripen, ms.
    token_ripe_wait_ms: Option<u64>,
    /// Let a write that finds no ripe token fetch tokens and spend one once ripe (a timing
    /// risk, the app's explicit choice; default false).
    allow_on_demand: Option<bool>,
    /// The session's timers (SessionSchedule in ms; absent fields keep their defaults).
    schedule: Option<Schedule>,
    /// Seed of the client's own randomness (decimal text of a u64; tests only).
    seed: Option<String>,
    trusted_relayers_only: Option<bool>,
    /// The wallet's account (when a wallet is given).
    wallet_address: Option<String>,
}

/// A relayer of the `relayers` option: a URL, or `{ url, address }` (the account that runs it,
/// which skips discovery for that relayer).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RelayerInput {
    Url(String),
    WithAddress {
        url: String,
        address: Option<String>,
    },
}

impl RelayerInput {
    fn to_ref(&self) -> Result<RelayerRef, JsValue> {
        match self {
            RelayerInput::Url(url) => Ok(RelayerRef::new(url.clone())),
            RelayerInput::WithAddress { url, address: None } => Ok(RelayerRef::new(url.clone())),
            RelayerInput::WithAddress {
                url,
                address: Some(a),
            } => {
                let address: Address = a.parse().map_err(|_| {
                    config_error(format!("relayers: invalid address {a:?} for {url}"))
                })?;
                Ok(RelayerRef::with_address(url.clone(), address))
            }
        }
    }
}

/// The `schedule` option: [`SessionSchedule`] with every range as `[lowMs, highMs]`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct Schedule {
    /// Between two tails (default 15 000 to 45 000 ms).
    tail_ms: Option<(u64, u64)>,
    /// How long the status polls of a written record go on after `written` (default 0 to
    /// 60 000 ms).
    status_tail_ms: Option<(u64, u64)>,
    /// The poll horizon of a submission, in batching rounds of its relayer (default 1 to 3).
    status_horizon_rounds: Option<(f64, f64)>,
    /// A refill is scheduled when the store holds fewer usable tokens than this (default 5).
    refill_below: Option<usize>,
    /// The session's first refill (default 0 to 600 000 ms).
    first_refill_ms: Option<(u64, u64)>,
    /// Each later refill (default 600 000 ms to 6 hours).
    later_refill_ms: Option<(u64, u64)>,
    /// Between two scans (default 60 000 to 180 000 ms).
    scan_ms: Option<(u64, u64)>,
    /// The fetch ages of the user's batches, in blocks (default 32 to 900).
    fetch_age_blocks: Option<(u64, u64)>,
}

impl Schedule {
    fn to_schedule(&self) -> SessionSchedule {
        let d = SessionSchedule::default();
        let range = |r: Option<(u64, u64)>, default: (Duration, Duration)| match r {
            Some((a, b)) => (
                Duration::from_millis(a.min(b)),
                Duration::from_millis(a.max(b)),
            ),
            None => default,
        };
        SessionSchedule {
            tail: range(self.tail_ms, d.tail),
            status_tail: range(self.status_tail_ms, d.status_tail),
            status_horizon_rounds: match self.status_horizon_rounds {
                Some((a, b)) => (a.min(b), a.max(b)),
                None => d.status_horizon_rounds,
            },
            refill_below: self.refill_below.unwrap_or(d.refill_below),
            first_refill: range(self.first_refill_ms, d.first_refill),
            later_refill: range(self.later_refill_ms, d.later_refill),
            scan: range(self.scan_ms, d.scan),
            fetch_age_blocks: match self.fetch_age_blocks {
                Some((a, b)) => (a.min(b), a.max(b)),
                None => d.fetch_age_blocks,
            },
        }
    }
}

/// The JS error of a client error: its class of docs/API.md §3.8 in `name`.
fn client_error(e: PrivsvcError) -> JsValue {
    let name = match &e {
        PrivsvcError::NonDeterministicWallet => "NonDeterministicWalletError",
        PrivsvcError::SmartContractWallet => "SmartContractWalletError",
        PrivsvcError::IssuerEquivocation { .. } => "IssuerEquivocationError",
        PrivsvcError::NoRipeToken { .. } => "NoTokenReady",
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

/// A session's first listing started before its vault (`privsvc_client::FirstListing`):
/// `createPrivateClient` starts it while the wallet signs, on a device that certainly keeps no
/// scan cache for the session, and hands it to [`RawClient::create`].
#[wasm_bindgen]
pub struct RawFirstListing {
    inner: privsvc_client::FirstListing,
}

#[wasm_bindgen]
impl RawFirstListing {
    /// Starts listing `project` from its first block through the JavaScript ledger `reader`;
    /// resolves to a `RawFirstListing` once the head is read. Freeing it (or dropping an
    /// untaken one) stops the listing.
    pub fn start(reader: JsValue, project: String) -> Promise {
        let reader = crate::js_ledger::reader_of(&reader);
        future_to_promise(async move {
            let reader: Arc<dyn LedgerReader> = Arc::new(reader?);
            let inner = privsvc_client::FirstListing::start(reader, &project)
                .await
                .map_err(client_error)?;
            Ok(RawFirstListing { inner }.into())
        })
    }
}

/// A privsvc client session (`createPrivateClient`, docs/API.md §3.1), driven by `js/index.js`.
#[wasm_bindgen]
pub struct RawClient {
    inner: Rc<PrivateClient>,
}

#[wasm_bindgen]
impl RawClient {
    /// Builds a client from `options` (JSON), the ledger reader's `rpc` function, a wallet
    /// adapter or a vault adapter, and its token store. The token source is
    /// `tokenWallet.source()`'s or a caller's object (`take`, `putBack`), `fetch` the adapter
    /// of a caller's fetch and `scan_cache` the adapter of a scan-cache store; each may be
    /// `undefined`. `first_listing`, when given, is the session's first listing, started
    /// before the vault (taken by the call).
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
        scan_cache: JsValue,
        first_listing: Option<RawFirstListing>,
    ) -> Promise {
        let first_listing = first_listing.map(|l| l.inner);
        let fetch = crate::fetch::JsFetch::from_value(&fetch);
        let scan_cache = (!scan_cache.is_undefined() && !scan_cache.is_null())
            .then(|| crate::js_scan_cache::JsScanCache::new(Bridge::start(scan_cache)));
        let store = store.store();
        let tokens: Option<Arc<dyn privsvc_tokens::TokenSource>> = match tokens {
            Some(t) => Some(t.source()),
            None => crate::js_tokens::JsTokenSource::from_value(&custom_tokens)
                .map(|s| Arc::new(s) as _),
        };
        let parsed: Result<Options, _> = serde_json::from_str(options);
        let reader = crate::js_ledger::reader_of(&reader);
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
                b = b.tokens(privsvc_client::TokenSupply::Source(source));
            }
            if let Some(fetch) = fetch {
                b = b.fetch(Arc::new(fetch));
            }
            if let Some(store) = scan_cache {
                b = b.scan_cache(Arc::new(store));
            }
            if let Some(blocks) = o.scan_cache_resume_blocks {
                b = b.scan_cache_resume_blocks(blocks);
            }
            if let Some(listing) = first_listing {
                b = b.first_listing(listing);
            }
            if let Some(p) = o.project {
                b = b.project(p);
            }
            if let Some(r) = &o.relayers {
                let refs = r
                    .iter()
                    .map(RelayerInput::to_ref)
                    .collect::<Result<Vec<_>, _>>()?;
                b = b.relayers(refs);
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
            if let Some(ms) = o.token_max_ripe_ms {
                b = b.token_max_ripe_ms(ms);
            }
            if let Some(rate) = o.cover_per_minute {
                b = b.cover(
                    rate,
                    o.cover_submission_share
                        .unwrap_or(privsvc_client::DEFAULT_COVER_SUBMISSION_SHARE),
                );
            }
            if let Some(ms) = o.token_ripe_wait_ms {
                b = b.token_ripe_wait_ms(ms);
            }
            if let Some(on) = o.allow_on_demand {
                b = b.allow_on_demand(on);
            }
            if let Some(s) = &o.schedule {
                b = b.schedule(s.to_schedule());
            }
            if let Some(text) = &o.seed {
                let seed: u64 = text
                    .parse()
                    .map_err(|_| config_error(format!("seed: not a u64: {text:?}")))?;
                b = b.seed(seed);
            }
            // The store's relayer pins (browserTokenStore's, a caller's store with
            // relayerPin/pinRelayer, or the memory store's) are the client's, as in Rust.
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

    /// What became of the scan cache at start, JSON: `{ state: "off" | "empty" }`,
    /// `{ state: "resumed", block }` or `{ state: "discarded", reason }`.
    #[wasm_bindgen(getter, js_name = scanCacheState)]
    pub fn scan_cache_state(&self) -> String {
        use privsvc_client::ScanCacheState;
        match self.inner.scan_cache_state() {
            ScanCacheState::Resumed { block } => json!({ "state": "resumed", "block": block }),
            ScanCacheState::Discarded { reason } => {
                json!({ "state": "discarded", "reason": reason })
            }
            ScanCacheState::Empty => json!({ "state": "empty" }),
            _ => json!({ "state": "off" }),
        }
        .to_string()
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

    /// `ripeTokens()`: tokens of the app a write requested now could spend (obtained and at
    /// least `tokenMinAgeMs` old). 0: a write goes to a relayer that requires no token, or
    /// fails with `NoTokenReady` (the Rust `NoRipeToken`).
    #[wasm_bindgen(js_name = ripeTokens)]
    pub fn ripe_tokens(&self) -> u32 {
        self.inner.ripe_tokens().try_into().unwrap_or(u32::MAX)
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
                    "block": r.block,
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
    let reader = crate::js_ledger::reader_of(&reader);
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
    let reader = crate::js_ledger::reader_of(&reader);
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

/// The parsed arguments of `verifyRecord`.
struct VerifyArgs {
    entity: privsvc_ledger::Entity,
    app: Option<String>,
    relayers: Option<Vec<Address>>,
    owner: Option<Address>,
    created_timestamp: Option<u64>,
}

impl VerifyArgs {
    fn options(&self) -> privsvc_client::VerifyOptions<'_> {
        privsvc_client::VerifyOptions {
            app: self.app.as_deref(),
            relayers: self.relayers.as_deref(),
            owner: self.owner,
            created_timestamp: self.created_timestamp,
        }
    }
}

/// Parses `verifyRecord`'s entity and options; `Ok(Err(answer))` when the entity is not a
/// ledger entity (the answer is the refusal).
fn verify_args(entity: &str, options: &str) -> Result<Result<VerifyArgs, String>, JsValue> {
    let value: Value =
        serde_json::from_str(entity).map_err(|e| config_error(format!("invalid entity: {e}")))?;
    let entity = match privsvc_ledger::entity_from_json(&value) {
        Ok(e) => e,
        Err(e) => {
            return Ok(Err(json!({
                "ok": false, "code": "bad-entity", "reason": e.to_string()
            })
            .to_string()))
        }
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
    Ok(Ok(VerifyArgs {
        entity,
        app: o["app"].as_str().map(str::to_owned),
        relayers,
        owner,
        created_timestamp: o["createdTimestamp"].as_u64(),
    }))
}

/// The short code of a refusal (`copy`, `republished`, `wrong-owner`, ...), for apps to branch
/// on; the reason is the text for people.
fn reject_code(reason: &RejectReason) -> &'static str {
    match reason {
        RejectReason::MissingField(_) => "missing-field",
        RejectReason::WrongContentType(_) => "wrong-content-type",
        RejectReason::BadEnvelope(_) => "bad-envelope",
        RejectReason::BadAttributes(_) => "bad-attributes",
        RejectReason::WrongApp { .. } => "wrong-app",
        RejectReason::AttributesMismatch(_) => "attributes-mismatch",
        RejectReason::SignatureMismatch { .. } => "signature-mismatch",
        RejectReason::WrongOwner { .. } => "wrong-owner",
        RejectReason::LifetimeMismatch { .. } => "lifetime-mismatch",
        RejectReason::UntrustedCreator(_) => "untrusted-creator",
        RejectReason::CreationTimeUnknown => "creation-time-unknown",
        RejectReason::Republished { .. } => "republished",
        RejectReason::Copy { .. } => "copy",
        RejectReason::Ledger(_) => "ledger",
    }
}

/// `verifyRecord`'s answer: `{ ok: true, record }` or `{ ok: false, code, reason }` (with
/// `original`, the record copied, for a copy).
fn verdict_json(verdict: Result<privsvc_client::VerifiedRecord, RejectReason>) -> String {
    match verdict {
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
        }, "unchecked": r.unchecked.iter().map(|u| json!({"code": u.code(), "reason": u.describe()})).collect::<Vec<_>>()})
        .to_string(),
        Err(reason) => {
            let mut v =
                json!({"ok": false, "code": reject_code(&reason), "reason": reason.to_string()});
            if let RejectReason::Copy { original } = &reason {
                v["original"] = json!(original.to_string());
            }
            v.to_string()
        }
    }
}

/// `verifyRecord(entity, { app?, relayers?, owner?, createdTimestamp? })` without a ledger:
/// `entity` is the ledger's JSON form (`arkiv_query` with key, owner, creator, payload,
/// attributes selected); answers JSON `{ ok: true, record, unchecked }` or `{ ok: false, code,
/// reason }`, where `unchecked` names the checks that need the ledger (copies, and the creation
/// window without `createdTimestamp`): [`raw_verify_record_on_ledger`] makes them.
#[wasm_bindgen(js_name = rawVerifyRecord)]
pub fn raw_verify_record(entity: &str, options: &str) -> Result<String, JsValue> {
    let args = match verify_args(entity, options)? {
        Ok(a) => a,
        Err(answer) => return Ok(answer),
    };
    Ok(verdict_json(privsvc_client::verify_record(
        &args.entity,
        &args.options(),
    )))
}

/// `verifyRecord` with a reader (`reader`, a ledger reader's `rpc` function): the Rust
/// `verify_record_on_ledger`, which reads the creation block's time when `createdTimestamp` is
/// absent and refuses a copy (`code: "copy"`, `original`: an earlier entity of the same owner
/// with the same envelope). Resolves to the same JSON as `rawVerifyRecord`.
#[wasm_bindgen(js_name = rawVerifyRecordOnLedger)]
pub fn raw_verify_record_on_ledger(entity: &str, options: &str, reader: JsValue) -> Promise {
    let args = verify_args(entity, options);
    let reader = crate::js_ledger::reader_of(&reader);
    future_to_promise(async move {
        let args = match args? {
            Ok(a) => a,
            Err(answer) => return Ok(JsValue::from_str(&answer)),
        };
        let reader = reader?;
        let verdict =
            privsvc_client::verify_record_on_ledger(&args.entity, &args.options(), &reader).await;
        Ok(JsValue::from_str(&verdict_json(verdict)))
    })
}
