//! Shared test harness: a real devnet, real RPC reader/writer, real SQLite files, real HTTP.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy_primitives::Address;
use k256::ecdsa::SigningKey;
use privsvc_attributes::Attributes;
use privsvc_devnet::{DevSigner, Devnet, DevnetConfig, DevnetHandle, DEV_PRIVATE_KEYS};
use privsvc_envelope::{seal_envelope, EnvelopeBody};
use privsvc_ledger::{
    ArkivValue, Attribute, Create, CreationFlags, LedgerReader, LedgerWriter, Operation,
};
use privsvc_relayer::{Relayer, RelayerConfig};
use privsvc_tokens::{token_message, token_suite, IssuerKey, IssuerSecretKey, TokenRedemption};
use serde_json::{json, Value};

pub const APP: &str = "testapp";

/// A devnet mining one block per transaction.
pub async fn devnet() -> DevnetHandle {
    Devnet::start(DevnetConfig::on_demand())
        .await
        .expect("devnet starts")
}

/// A reader of the devnet.
pub fn reader(node: &DevnetHandle) -> Arc<dyn LedgerReader> {
    Arc::new(privsvc_ledger::RpcLedger::new(node.url()).expect("rpc reader"))
}

/// The concrete RPC writer of the devnet with dev account `i`.
pub fn rpc_writer(node: &DevnetHandle, i: usize) -> privsvc_ledger::RpcWriter {
    let key = k256::ecdsa::SigningKey::from_slice(
        &hex::decode(DEV_PRIVATE_KEYS[i].trim_start_matches("0x")).unwrap(),
    )
    .unwrap();
    let ledger = privsvc_ledger::RpcLedger::new(node.url()).expect("rpc ledger");
    privsvc_ledger::RpcWriter::new(ledger, key, node.chain_id())
}

/// A writer of the devnet with dev account `i`.
pub fn writer(node: &DevnetHandle, i: usize) -> Arc<dyn LedgerWriter> {
    Arc::new(rpc_writer(node, i))
}

/// Dev account address `i`.
pub fn dev_address(i: usize) -> Address {
    DevSigner::dev(i).address()
}

/// Start a relayer with dev account `i` and the given config.
pub async fn start(node: &DevnetHandle, i: usize, cfg: RelayerConfig) -> Relayer {
    start_with(node, cfg, writer(node, i)).await
}

/// Start a relayer that writes through `writer` (and reads the devnet).
pub async fn start_with(
    node: &DevnetHandle,
    cfg: RelayerConfig,
    writer: Arc<dyn LedgerWriter>,
) -> Relayer {
    Relayer::start(cfg, reader(node), writer)
        .await
        .expect("relayer starts")
}

/// A fresh devnet and a relayer of dev account 0 on it, whose test [`config`] `tweak` adjusts.
/// Keep the temp dir alive as long as the relayer.
pub async fn devnet_and_relayer(
    tweak: impl FnOnce(&mut RelayerConfig),
) -> (DevnetHandle, tempfile::TempDir, Relayer) {
    let (node, dir, c) = devnet_and_config(tweak).await;
    let relayer = start(&node, 0, c).await;
    (node, dir, relayer)
}

/// A fresh devnet and a test [`config`] in a new temp dir, which `tweak` adjusts, for tests
/// that start the relayer themselves. Keep the temp dir alive as long as the relayer.
pub async fn devnet_and_config(
    tweak: impl FnOnce(&mut RelayerConfig),
) -> (DevnetHandle, tempfile::TempDir, RelayerConfig) {
    let node = devnet().await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    tweak(&mut c);
    (node, dir, c)
}

/// A sealed record: (submit body, owner address).
pub fn record_body(app: &str, exp: u64, data: &[u8]) -> (Value, Address) {
    record_body_in(app, app, exp, data)
}

/// A sealed record of `app` whose `project` attribute is `project`: (submit body, owner).
pub fn record_body_in(app: &str, project: &str, exp: u64, data: &[u8]) -> (Value, Address) {
    let hour = privsvc_envelope::hour_of(privsvc_relayer::testing::now_ms() / 1000);
    record_body_at(app, project, exp, data, hour)
}

/// [`record_body_in`] with its envelope sealed as if at `hour`.
pub fn record_body_at(
    app: &str,
    project: &str,
    exp: u64,
    data: &[u8],
    hour: u64,
) -> (Value, Address) {
    let key = SigningKey::random(&mut rand::thread_rng());
    let owner = Address::from_public_key(key.verifying_key());
    let mut attrs = Attributes::new();
    attrs.insert("project", project).unwrap();
    attrs.insert("level", 3i32).unwrap();
    let sealed = sealed_envelope_at(&key, app, exp, &attrs, data, hour);
    (
        json!({
            "app": app,
            "owner": owner.to_string(),
            "envelope": sealed,
            "attributes": attrs.to_wire(),
            "expSeconds": exp,
        }),
        owner,
    )
}

/// THE one place these tests build a sealed envelope (signed by `key`, over `attrs`), so a
/// change of the envelope format is a one-place fix.
pub fn sealed_envelope(
    key: &SigningKey,
    app: &str,
    exp: u64,
    attrs: &Attributes,
    data: &[u8],
) -> String {
    let hour = privsvc_envelope::hour_of(privsvc_relayer::testing::now_ms() / 1000);
    sealed_envelope_at(key, app, exp, attrs, data, hour)
}

/// [`sealed_envelope`] sealed as if at `hour` (the envelope's hour window).
pub fn sealed_envelope_at(
    key: &SigningKey,
    app: &str,
    exp: u64,
    attrs: &Attributes,
    data: &[u8],
    hour: u64,
) -> String {
    let body = EnvelopeBody {
        app: app.into(),
        exp,
        hour,
        ct: "text/plain".into(),
        enc: false,
        types: attrs.types(),
        data: data.to_vec(),
    };
    seal_envelope(&body, attrs, key).unwrap()
}

/// A fresh, valid submit body for [`APP`].
pub fn body() -> Value {
    record_body(APP, 3600, b"hello").0
}

/// A fresh, valid submit body for [`APP`] that redeems `token`.
pub fn body_with_token(token: &impl serde::Serialize) -> Value {
    let mut b = body();
    b["token"] = serde_json::to_value(token).unwrap();
    b
}

/// HTTP client.
pub fn http() -> reqwest::Client {
    reqwest::Client::new()
}

/// POST JSON; (status, body).
pub async fn post(url: &str, path: &str, body: &Value) -> (u16, Value) {
    let r = http()
        .post(format!("{url}{path}"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// GET JSON; (status, body).
pub async fn get(url: &str, path: &str) -> (u16, Value) {
    let r = http().get(format!("{url}{path}")).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Submit and expect 202; returns the id.
pub async fn submit(url: &str, body: &Value) -> String {
    let (status, v) = post(url, "/v1/records", body).await;
    assert_eq!(status, 202, "{v}");
    v["id"].as_str().unwrap().to_string()
}

/// Submit and expect `status`; returns the error message, which must contain `needle`.
pub async fn refused(url: &str, body: &Value, status: u16, needle: &str) -> String {
    let (code, v) = post(url, "/v1/records", body).await;
    assert_eq!(code, status, "{needle}: {v}");
    let e = v["error"].as_str().unwrap().to_string();
    assert!(e.contains(needle), "expected {needle:?} in {e:?}");
    e
}

/// POST an OHTTP request body to the relayer's gateway.
pub async fn post_ohttp(url: &str, body: Vec<u8>) -> reqwest::Response {
    http()
        .post(format!("{url}/v1/ohttp"))
        .header("content-type", "message/ohttp-req")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Poll a record until its state is `state` (panics after `timeout`).
pub async fn wait_state(url: &str, id: &str, state: &str, timeout: Duration) -> Value {
    let start = Instant::now();
    loop {
        let (code, v) = get(url, &format!("/v1/records/{id}")).await;
        if code == 200 && v["state"] == state {
            return v;
        }
        if start.elapsed() > timeout {
            panic!("record {id} not {state} within {timeout:?}: {code} {v}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait for each record to be written and check that it went in a batch of `size` records.
pub async fn wait_written_in_batch(
    url: &str,
    ids: &[impl AsRef<str>],
    size: u64,
    timeout: Duration,
) {
    for id in ids {
        let st = wait_state(url, id.as_ref(), "written", timeout).await;
        assert_eq!(st["batchSize"], size, "{st}");
    }
}

/// How many entities `owner` holds on the devnet.
pub async fn owner_entities(node: &DevnetHandle, owner: Address) -> usize {
    reader(node)
        .query(
            &format!("$owner = addr({owner})"),
            &privsvc_ledger::QueryOptions::default(),
        )
        .await
        .unwrap()
        .entities
        .len()
}

/// Submit a good record, the offending `bad` one, and another good record; the offender fails
/// with the ledger's refusal (returned), the other two are written together, and `bad_owner`
/// owns nothing on the ledger.
pub async fn offender_fails_rest_written(
    node: &DevnetHandle,
    url: &str,
    bad: &Value,
    bad_owner: Address,
    timeout: Duration,
) -> String {
    let good1 = submit(url, &body()).await;
    let bad_id = submit(url, bad).await;
    let good2 = submit(url, &body()).await;
    let st = wait_state(url, &bad_id, "failed", timeout).await;
    let e = st["error"].as_str().unwrap().to_string();
    assert!(e.contains("the ledger refused this record"), "{e}");
    // The rest is written (or retried), without the offender.
    wait_written_in_batch(url, &[&good1, &good2], 2, timeout).await;
    assert_eq!(owner_entities(node, bad_owner).await, 0);
    e
}

/// A test issuer: a real blind-RSA key published on the ledger by dev account `i`.
pub struct TestIssuer {
    pub sk: IssuerSecretKey,
    pub key: IssuerKey,
    pub address: Address,
}

impl TestIssuer {
    /// Generate a key and publish it for (app, epoch) from dev account `i`.
    pub async fn publish(node: &DevnetHandle, i: usize, app: &str, epochs: &[u32]) -> Self {
        let sk = tokio::task::spawn_blocking(|| token_suite().generate_key().unwrap())
            .await
            .unwrap();
        let key = IssuerKey::from_secret(&sk).unwrap();
        let w = writer(node, i);
        for epoch in epochs {
            let create = Create {
                salt: rand::random(),
                expires_at: 0,
                min_lifetime: 86_400,
                flags: CreationFlags::default(),
                content_type: "application/octet-stream".into(),
                payload: key.spki().to_vec(),
                attributes: vec![
                    Attribute {
                        name: "app".into(),
                        value: ArkivValue::Str(app.into()),
                    },
                    Attribute {
                        name: "epoch".into(),
                        value: ArkivValue::U64(u64::from(*epoch)),
                    },
                    Attribute {
                        name: "privsvc_kind".into(),
                        value: ArkivValue::Str("issuer-key".into()),
                    },
                    Attribute {
                        name: "project".into(),
                        value: ArkivValue::Str("privsvc-7f3k".into()),
                    },
                ],
            };
            let r = w.execute(&[Operation::Create(create)]).await.unwrap();
            assert!(r.success);
        }
        Self {
            sk,
            key,
            address: dev_address(i),
        }
    }

    /// A valid token for (app, epoch).
    pub fn token(&self, app: &str, epoch: u32) -> TokenRedemption {
        let nonce: [u8; 32] = rand::random();
        let msg = token_message(app, epoch, &nonce).unwrap();
        let suite = token_suite();
        let blinded = suite.blind(&self.key, &msg).unwrap();
        let bs = suite
            .blind_sign(&self.sk, blinded.blinded_message())
            .unwrap();
        let sig = suite.finalize(&self.key, &bs, &blinded, &msg).unwrap();
        TokenRedemption::new(epoch, &nonce, &sig)
    }
}

/// Today's epoch.
pub fn today() -> u32 {
    privsvc_tokens::epoch_of(privsvc_tokens::now_ms())
}

/// A config in a temp dir for tests (short timers, tokens off).
pub fn config(dir: &std::path::Path) -> RelayerConfig {
    let mut c = RelayerConfig::for_tests(dir);
    c.receipt_timeout = Duration::from_secs(10);
    c
}
pub mod faultproxy;

/// Waits, when fewer than 15 s are left of the current minute, for the next one: the rate
/// limiters count in fixed one-minute windows, so a test that counts requests against a limit
/// must not straddle a window's edge.
#[allow(dead_code)]
pub async fn avoid_minute_edge() {
    let into_minute = privsvc_tokens::now_ms() % 60_000;
    if into_minute > 45_000 {
        tokio::time::sleep(Duration::from_millis(60_000 - into_minute + 100)).await;
    }
}
