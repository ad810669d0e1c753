//! Shared test harness: a real devnet, real RPC reader/writer, real SQLite files, real HTTP.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy_primitives::Address;
use k256::ecdsa::SigningKey;
use privsvc_attributes::Attributes;
use privsvc_devnet::{BlockTime, DevSigner, Devnet, DevnetConfig, DevnetHandle, DEV_PRIVATE_KEYS};
use privsvc_envelope::{seal_envelope, EnvelopeBody};
use privsvc_ledger::{
    ArkivValue, Attribute, Create, CreationFlags, LedgerReader, LedgerWriter, Operation,
};
use privsvc_relayer::{Relayer, RelayerConfig, RelayerHandle};
use privsvc_tokens::{token_message, token_suite, IssuerKey, IssuerSecretKey, TokenRedemption};
use serde_json::{json, Value};

pub const APP: &str = "testapp";

/// A devnet mining one block per transaction.
pub async fn devnet() -> DevnetHandle {
    Devnet::start(DevnetConfig {
        block_time: BlockTime::OnDemand,
        ..Default::default()
    })
    .await
    .expect("devnet starts")
}

/// A reader of the devnet.
pub fn reader(node: &DevnetHandle) -> Arc<dyn LedgerReader> {
    Arc::new(privsvc_ledger::RpcLedger::new(node.url()).expect("rpc reader"))
}

/// A writer of the devnet with dev account `i`.
pub fn writer(node: &DevnetHandle, i: usize) -> Arc<dyn LedgerWriter> {
    let key = k256::ecdsa::SigningKey::from_slice(
        &hex::decode(DEV_PRIVATE_KEYS[i].trim_start_matches("0x")).unwrap(),
    )
    .unwrap();
    let ledger = privsvc_ledger::RpcLedger::new(node.url()).expect("rpc ledger");
    Arc::new(privsvc_ledger::RpcWriter::new(ledger, key, node.chain_id()))
}

/// Dev account address `i`.
pub fn dev_address(i: usize) -> Address {
    DevSigner::dev(i).address()
}

/// Start a relayer with dev account `i` and the given config.
pub async fn start(node: &DevnetHandle, i: usize, cfg: RelayerConfig) -> RelayerHandle {
    Relayer::start(cfg, reader(node), writer(node, i))
        .await
        .expect("relayer starts")
}

/// A sealed record: (submit body, owner address).
pub fn record_body(app: &str, exp: u64, data: &[u8]) -> (Value, Address) {
    let key = SigningKey::random(&mut rand::thread_rng());
    let owner = Address::from_public_key(key.verifying_key());
    let mut attrs = Attributes::new();
    attrs.insert("project", app).unwrap();
    attrs.insert("level", 3i32).unwrap();
    let body = EnvelopeBody {
        app: app.into(),
        exp,
        ct: "text/plain".into(),
        enc: false,
        types: attrs.types(),
        data: data.to_vec(),
    };
    let sealed = seal_envelope(&body, &attrs, &key).unwrap();
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

/// A fresh, valid submit body for [`APP`].
pub fn body() -> Value {
    record_body(APP, 3600, b"hello").0
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
