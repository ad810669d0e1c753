//! End-to-end tests of the relayer: real HTTP on loopback, a real devnet, real SQLite files.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use privsvc_ledger::{
    BatchReceipt, LedgerError, LedgerWriter, Operation, PreparedTx, QueryOptions, Select,
};
use privsvc_relayer::{OhttpSeed, TokenMode};
use serde_json::{json, Value};

use crate::common::*;

const T: Duration = Duration::from_secs(30);

#[tokio::test]
async fn status_202_then_written_owned_by_the_one_time_owner_and_created_by_the_relayer() {
    let (node, _dir, relayer) = devnet_and_relayer(|_| {}).await;
    let (body, owner) = record_body(APP, 86_400, b"payload bytes");
    let id = submit(relayer.url(), &body).await;
    let st = wait_state(relayer.url(), &id, "written", T).await;
    assert_eq!(st["batchSize"], 1, "{st}");
    assert!(st.get("position").is_none() && st["error"].is_null());
    let key: B256 = st["entityKey"].as_str().unwrap().parse().unwrap();
    let tx: B256 = st["txHash"].as_str().unwrap().parse().unwrap();
    assert_ne!(tx, B256::ZERO);
    let block: u64 = st["block"].as_str().unwrap().parse().unwrap();
    let entity = reader(&node)
        .entity(key, None)
        .await
        .unwrap()
        .expect("entity exists");
    assert_eq!(entity.owner, Some(owner));
    assert_eq!(entity.creator, Some(relayer.address()));
    assert_eq!(entity.created_at, Some(block));
    assert_eq!(
        entity.payload.as_deref(),
        Some(body["envelope"].as_str().unwrap().as_bytes())
    );
    assert_eq!(entity.content_type.as_deref(), Some("application/json"));
    let names: Vec<String> = entity
        .attributes
        .unwrap_or_default()
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert!(names.contains(&"project".to_string()) && names.contains(&"level".to_string()));
    let receipt = writer(&node, 3).receipt(tx).await.unwrap().unwrap();
    assert!(receipt.success);
    assert_eq!(receipt.created[0].key, key);
    assert_eq!(receipt.transfers[0].to, owner);
    let h = get(relayer.url(), "/healthz").await.1;
    assert_eq!(h["batches"], 1, "{h}");
    assert_eq!(h["lastFlushBlock"], block.to_string());
    relayer.shutdown().await;
}

#[tokio::test]
async fn status_400_names_each_problem() {
    let (_node, _dir, relayer) = devnet_and_relayer(|_| {}).await;
    let url = relayer.url().to_string();
    let base = body();
    let with = |f: &dyn Fn(&mut Value)| {
        let mut b = base.clone();
        f(&mut b);
        b
    };
    let relayer_addr = relayer.address().to_string();
    let trimmed = base["envelope"].as_str().unwrap().trim_end().to_string();
    let mut many = serde_json::Map::new();
    for i in 0..33 {
        many.insert(format!("a{i}"), json!({"type": "i32", "value": i}));
    }
    many.insert("project".into(), json!({"type": "str", "value": APP}));
    let cases: Vec<(Value, &str)> = vec![
        (
            with(&|b| b["owner"] = json!("0x1234")),
            "owner is not an address",
        ),
        (
            with(&|b| b["owner"] = json!(relayer_addr.clone())),
            "relayer's own address",
        ),
        (with(&|b| b["envelope"] = json!(trimmed.clone())), "padded"),
        (
            with(&|b| b["expSeconds"] = json!(1000)),
            "not a valid bucket",
        ),
        (
            with(&|b| b["expSeconds"] = json!(86_400)),
            "differs from the envelope",
        ),
        (with(&|b| b["app"] = json!("otherapp")), "app differs"),
        (
            with(&|b| b["attributes"]["Level"] = json!({"type": "i32", "value": 1})),
            "lowercase",
        ),
        (
            with(&|b| b["attributes"]["9x"] = json!({"type": "i32", "value": 1})),
            "attribute \"9x\"",
        ),
        (
            with(&|b| {
                b["attributes"].as_object_mut().unwrap().remove("project");
            }),
            "project is missing",
        ),
        (
            with(&|b| b["attributes"] = Value::Object(many.clone())),
            "at most 30",
        ),
        (
            with(&|b| {
                b["attributes"]["privsvc_kind"] = json!({"type": "str", "value": "heartbeat"})
            }),
            "reserved for system entities",
        ),
        (
            with(&|b| b["attributes"]["project"] = json!({"type": "str", "value": "privsvc-7f3k"})),
            "reserved for system entities",
        ),
        (
            with(&|b| b["minAnonymity"] = json!(0)),
            "minAnonymity 0 is out of range",
        ),
        (
            with(&|b| b["minAnonymity"] = json!(51)),
            "minAnonymity 51 is out of range",
        ),
        (
            with(&|b| b["maxHoldMs"] = json!(600_001)),
            "maxHoldMs 600001 is out of range",
        ),
        (
            with(&|b| b["owner"] = json!(Address::repeat_byte(0x11).to_string())),
            "does not recover to owner",
        ),
        (
            with(&|b| b["attributes"]["level"] = json!({"type": "i32", "value": 4})),
            "does not recover to owner",
        ),
    ];
    for (b, needle) in cases {
        refused(&url, &b, 400, needle).await;
    }
    let r = http()
        .post(format!("{url}/v1/records"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("not JSON"), "{v}");
    let m = relayer.metrics_text();
    assert!(
        m.contains("privsvc_submissions_total{status=\"400\"} 18"),
        "{m}"
    );
    relayer.shutdown().await;
}

fn token_config(dir: &std::path::Path, issuer: Address) -> privsvc_relayer::RelayerConfig {
    let mut c = config(dir);
    c.tokens = TokenMode::Required;
    c.issuer.address = Some(issuer);
    c.issuer.url = Some("http://issuer.invalid".into());
    c
}

#[tokio::test]
async fn status_402_without_a_token_when_tokens_are_required() {
    let node = devnet().await;
    let dir = tempfile::tempdir().unwrap();
    let relayer = start(&node, 0, token_config(dir.path(), dev_address(1))).await;
    refused(relayer.url(), &body(), 402, "requires a token").await;
    let info = get(relayer.url(), "/v1/info").await.1;
    assert_eq!(info["tokensRequired"], true);
    assert_eq!(info["issuer"], dev_address(1).to_checksum(None));
    assert_eq!(info["issuerUrl"], "http://issuer.invalid");
    relayer.shutdown().await;
}

#[tokio::test]
async fn status_403_for_invalid_spent_old_or_keyless_tokens_and_tokens_are_written() {
    let node = devnet().await;
    let issuer = TestIssuer::publish(&node, 1, APP, &[today()]).await;
    let dir = tempfile::tempdir().unwrap();
    let relayer = start(&node, 0, token_config(dir.path(), issuer.address)).await;
    let url = relayer.url().to_string();

    // A good token is accepted once, and its spends entity lands with the batch.
    let token = issuer.token(APP, today());
    let id = submit(&url, &body_with_token(&token)).await;
    refused(&url, &body_with_token(&token), 403, "already spent").await;
    let st = wait_state(&url, &id, "written", T).await;
    let block: u64 = st["block"].as_str().unwrap().parse().unwrap();
    let spends = reader(&node)
        .query(
            "privsvc_kind = str('spends') AND project = str('privsvc-7f3k')",
            &QueryOptions::new(Select {
                creator: true,
                created_at: true,
                payload: true,
                ..Select::default()
            }),
        )
        .await
        .unwrap();
    assert_eq!(spends.entities.len(), 1);
    assert_eq!(spends.entities[0].created_at, Some(block));
    assert_eq!(spends.entities[0].creator, Some(relayer.address()));
    assert_eq!(
        spends.entities[0].payload.as_deref(),
        Some(token.token_id(APP).unwrap().as_slice())
    );

    // Invalid signature.
    let mut bad = issuer.token(APP, today());
    bad.signature = issuer.token(APP, today()).signature;
    refused(&url, &body_with_token(&bad), 403, "token invalid").await;

    // An epoch no longer accepted.
    let old = body_with_token(&issuer.token(APP, today() - 2));
    refused(&url, &old, 403, "no longer accepted").await;

    // Yesterday is accepted, but the issuer published no key for it.
    let keyless = body_with_token(&issuer.token(APP, today() - 1));
    refused(&url, &keyless, 403, "no issuer key").await;
    relayer.shutdown().await;
}

#[tokio::test]
async fn status_413_over_64_kb() {
    let (_node, _dir, relayer) = devnet_and_relayer(|_| {}).await;
    let mut b = body();
    b["padding"] = json!("x".repeat(70 * 1024));
    refused(relayer.url(), &b, 413, "64 KB").await;
    relayer.shutdown().await;
}

#[tokio::test]
async fn status_429_per_address_only_when_tokens_are_off() {
    let (node, _dir, relayer) = devnet_and_relayer(|c| {
        c.limits.submissions_per_min = 2;
    })
    .await;
    avoid_minute_edge().await;
    submit(relayer.url(), &body()).await;
    submit(relayer.url(), &body()).await;
    let (status, v) = post(relayer.url(), "/v1/records", &body()).await;
    assert_eq!(status, 429, "{v}");
    relayer.shutdown().await;

    // With tokens required the limiter is off: many requests get 402, never 429.
    let dir = tempfile::tempdir().unwrap();
    let mut c = token_config(dir.path(), dev_address(1));
    c.limits.submissions_per_min = 2;
    let relayer = start(&node, 0, c).await;
    for _ in 0..4 {
        assert_eq!(post(relayer.url(), "/v1/records", &body()).await.0, 402);
    }
    relayer.shutdown().await;
}

#[tokio::test]
async fn status_503_when_the_queue_is_full() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.limits.queue_capacity = 2;
        c.batching.min_batch = 10;
        c.batching.max_wait = Duration::from_millis(600_000);
    })
    .await;
    submit(relayer.url(), &body()).await;
    submit(relayer.url(), &body()).await;
    let e = refused(relayer.url(), &body(), 503, "queue full").await;
    assert_eq!(e, "queue full");
    relayer.shutdown().await;
}

#[tokio::test]
async fn status_404_for_an_unknown_id_and_no_queue_position() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.batching.min_batch = 10;
        c.batching.max_wait = Duration::from_millis(600_000);
    })
    .await;
    let (status, v) = get(
        relayer.url(),
        "/v1/records/00000000-0000-4000-8000-000000000000",
    )
    .await;
    assert_eq!(status, 404, "{v}");
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(submit(relayer.url(), &body()).await);
    }
    for id in &ids {
        let (status, v) = get(relayer.url(), &format!("/v1/records/{id}")).await;
        assert_eq!(status, 200);
        assert_eq!(v["state"], "queued");
        // docs/PROTOCOL.md §9.4: no queue figure in a public answer.
        assert!(v.get("position").is_none(), "{v}");
        assert!(v["entityKey"].is_null());
    }
    // docs/PROTOCOL.md §7: the public queue is rounded up to a multiple of 100 (exact in-process).
    assert_eq!(get(relayer.url(), "/healthz").await.1["queue"], 100);
    assert_eq!(relayer.health().await.queue, 3);
    relayer.shutdown().await;
}

#[tokio::test]
async fn holds_that_form_and_holds_that_fail() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.batching.min_batch = 1;
        c.batching.max_wait = Duration::from_millis(1500);
    })
    .await;
    let url = relayer.url().to_string();

    // k = 3 holds the batch until three records are there.
    let mut held = body();
    held["minAnonymity"] = json!(3);
    held["maxHoldMs"] = json!(20_000);
    let a = submit(&url, &held).await;
    let b = submit(&url, &body()).await;
    let c2 = submit(&url, &body()).await;
    wait_written_in_batch(&url, &[&a, &b, &c2], 3, T).await;

    // k = 4 alone: other records flush without it at max wait, then it fails.
    let mut lonely = body();
    lonely["minAnonymity"] = json!(4);
    lonely["maxHoldMs"] = json!(2500);
    let l = submit(&url, &lonely).await;
    let other = submit(&url, &body()).await;
    let st = wait_state(&url, &other, "written", T).await;
    assert_eq!(st["batchSize"], 1);
    let st = wait_state(&url, &l, "failed", T).await;
    let e = st["error"].as_str().unwrap();
    assert!(
        e.contains("no batch of 4 records formed within 2500 ms"),
        "{e}"
    );
    relayer.shutdown().await;
}

#[tokio::test]
async fn statuses_are_pruned_after_retention() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.status_retention = Duration::from_millis(800);
    })
    .await;
    let id = submit(relayer.url(), &body()).await;
    wait_state(relayer.url(), &id, "written", T).await;
    let path = format!("/v1/records/{id}");
    assert_eq!(get(relayer.url(), &path).await.0, 200);
    let start = std::time::Instant::now();
    while get(relayer.url(), &path).await.0 != 404 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "status never pruned"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(start.elapsed() >= Duration::from_millis(300));
    relayer.shutdown().await;
}

#[tokio::test]
async fn a_token_is_spent_once_under_200_concurrent_redemptions() {
    let node = devnet().await;
    let issuer = TestIssuer::publish(&node, 1, APP, &[today()]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = token_config(dir.path(), issuer.address);
    c.batching.min_batch = 100;
    c.batching.max_wait = Duration::from_millis(600_000);
    let relayer = start(&node, 0, c).await;
    let token = serde_json::to_value(issuer.token(APP, today())).unwrap();
    let mut tasks = Vec::new();
    for _ in 0..200 {
        let b = body_with_token(&token);
        let url = relayer.url().to_string();
        tasks.push(tokio::spawn(async move {
            post(&url, "/v1/records", &b).await.0
        }));
    }
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.unwrap());
    }
    assert_eq!(codes.iter().filter(|c| **c == 202).count(), 1, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 403).count(), 199);
    relayer.shutdown().await;
}

#[tokio::test]
async fn a_double_spend_across_two_relayers_is_detected() {
    let node = devnet().await;
    let issuer = TestIssuer::publish(&node, 1, APP, &[today()]).await;
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let r1 = start(&node, 0, token_config(d1.path(), issuer.address)).await;
    let r2 = start(&node, 2, token_config(d2.path(), issuer.address)).await;
    let token = serde_json::to_value(issuer.token(APP, today())).unwrap();
    let honest = serde_json::to_value(issuer.token(APP, today())).unwrap();
    let mut ids = Vec::new();
    for (r, t) in [(&r1, &token), (&r2, &token), (&r1, &honest)] {
        let b = body_with_token(t);
        ids.push((r.url().to_string(), submit(r.url(), &b).await));
    }
    for (url, id) in &ids {
        wait_state(url, id, "written", T).await;
    }
    // The count is refreshed in the background (once a minute); recount now.
    r1.refresh_double_spends().await;
    r2.refresh_double_spends().await;
    let h1 = get(r1.url(), "/healthz").await.1;
    let h2 = get(r2.url(), "/healthz").await.1;
    assert_eq!(h1["doubleSpendsDetected"], 1, "{h1}");
    assert_eq!(h2["doubleSpendsDetected"], 1, "{h2}");
    r1.shutdown().await;
    r2.shutdown().await;
}

#[tokio::test]
async fn healthz_reports_every_field_and_heartbeats_are_published() {
    let (node, _dir, relayer) = devnet_and_relayer(|c| {
        c.heartbeat_interval = Duration::from_millis(1000);
        c.public_url = Some("http://relayer.test:1234".into());
    })
    .await;
    let start_t = std::time::Instant::now();
    let h = loop {
        let h = get(&format!("http://{}", relayer.local_addr()), "/healthz")
            .await
            .1;
        if h["heartbeat"].as_str().is_some_and(|s| !s.is_empty()) {
            break h;
        }
        assert!(start_t.elapsed() < T, "no heartbeat: {h}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(h["ok"], true);
    assert_eq!(h["address"], relayer.address().to_checksum(None));
    // docs/PROTOCOL.md §7: an empty queue reads 100 on the public /healthz.
    assert_eq!(h["queue"], 100);
    assert_eq!(h["batches"], 0);
    assert_eq!(h["lastFlushBlock"], "0");
    assert!(h["lastBeat"].as_u64().unwrap() > 1_600_000_000_000);
    assert!(h["balanceNative"].as_f64().unwrap() > 1000.0, "{h}");
    assert_eq!(h["doubleSpendsDetected"], 0);
    let key: B256 = h["heartbeat"].as_str().unwrap().parse().unwrap();
    let e = reader(&node).entity(key, None).await.unwrap().unwrap();
    assert_eq!(e.creator, Some(relayer.address()));
    let payload: Value = serde_json::from_slice(&e.payload.unwrap()).unwrap();
    assert_eq!(payload["url"], "http://relayer.test:1234");
    assert_eq!(payload["version"], "privsvc-relayer/1");
    // A second beat follows within the interval.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let h2 = get(&format!("http://{}", relayer.local_addr()), "/healthz")
        .await
        .1;
    assert_ne!(h2["heartbeat"], h["heartbeat"]);
    assert!(relayer.metrics_text().contains("privsvc_heartbeats_total"));
    relayer.shutdown().await;
}

#[tokio::test]
async fn ohttp_on_serves_encapsulated_requests_and_off_answers_404() {
    let node = devnet().await;
    let dir = tempfile::tempdir().unwrap();
    let off = start(&node, 0, config(dir.path())).await;
    let r = post_ohttp(off.url(), vec![1u8, 2, 3]).await;
    assert_eq!(r.status().as_u16(), 404);
    assert!(get(off.url(), "/v1/info").await.1.get("ohttpKey").is_none());
    off.shutdown().await;

    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.ohttp_seed = Some(OhttpSeed::new([7u8; 32]));
    let on = start(&node, 0, c).await;
    let info = get(on.url(), "/v1/info").await.1;
    let key = info["ohttpKey"].as_str().expect("ohttpKey").to_string();
    let r = post_ohttp(on.url(), vec![1u8, 2, 3]).await;
    assert_eq!(r.status().as_u16(), 400);
    let request = privsvc_ohttp::BinaryRequest {
        method: "POST".into(),
        path: "/v1/records".into(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: serde_json::to_vec(&body()).unwrap(),
    };
    let authority = on.url().trim_start_matches("http://").to_string();
    let (msg, pending) = privsvc_ohttp::encapsulate(&key, &request, "http", &authority).unwrap();
    let r = post_ohttp(on.url(), msg).await;
    assert_eq!(r.status().as_u16(), 200);
    let answer = pending.open(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(answer.status, 202);
    let v: Value = serde_json::from_slice(&answer.body).unwrap();
    let id = v["id"].as_str().unwrap();
    wait_state(on.url(), id, "written", T).await;
    on.shutdown().await;
}

/// A writer that can hold back `prepare`, drop broadcasts, or hide receipts.
struct Faulty {
    inner: Arc<dyn LedgerWriter>,
    hang_prepare: AtomicBool,
    drop_broadcast: AtomicBool,
    hide_receipts: AtomicBool,
}

impl Faulty {
    fn new(inner: Arc<dyn LedgerWriter>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            hang_prepare: AtomicBool::new(false),
            drop_broadcast: AtomicBool::new(false),
            hide_receipts: AtomicBool::new(false),
        })
    }
}

#[async_trait]
impl LedgerWriter for Faulty {
    fn address(&self) -> Address {
        self.inner.address()
    }
    async fn prepare(
        &self,
        ops: &[Operation],
        nonce: Option<u64>,
    ) -> Result<PreparedTx, LedgerError> {
        if self.hang_prepare.load(Ordering::SeqCst) && ops.len() > 1 {
            std::future::pending::<()>().await;
        }
        self.inner.prepare(ops, nonce).await
    }
    async fn broadcast(&self, tx: &PreparedTx) -> Result<(), LedgerError> {
        if self.drop_broadcast.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.inner.broadcast(tx).await
    }
    async fn receipt(&self, h: B256) -> Result<Option<BatchReceipt>, LedgerError> {
        if self.hide_receipts.load(Ordering::SeqCst) {
            return Ok(None);
        }
        self.inner.receipt(h).await
    }
    async fn mined_nonce(&self) -> Result<Option<u64>, LedgerError> {
        self.inner.mined_nonce().await
    }
}

async fn crash_case(which: &str) {
    let (node, _dir, c) = devnet_and_config(|c| {
        c.receipt_timeout = Duration::from_millis(300);
        c.heartbeat_interval = Duration::from_millis(3_600_000);
    })
    .await;
    let faulty = Faulty::new(writer(&node, 0));
    match which {
        "before-send" => faulty.hang_prepare.store(true, Ordering::SeqCst),
        "sent-not-mined" | "superseded" => faulty.drop_broadcast.store(true, Ordering::SeqCst),
        _ => faulty.hide_receipts.store(true, Ordering::SeqCst),
    }
    let relayer = start_with(&node, c.clone(), faulty.clone()).await;
    let url = relayer.url().to_string();
    let (body, owner) = record_body(APP, 3600, b"crash");
    let id = submit(&url, &body).await;
    // Let the batch reach the faulty step.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (_, st) = get(&url, &format!("/v1/records/{id}")).await;
    assert_eq!(st["state"], "queued", "{which}: {st}");
    let mined_before = owner_entities(&node, owner).await;
    match which {
        "before-send" | "sent-not-mined" | "superseded" => {
            assert_eq!(mined_before, 0, "{which}")
        }
        _ => assert_eq!(mined_before, 1, "{which}"),
    }
    relayer.crash().await;
    if which == "superseded" {
        // Another transaction of the account takes the stored batch's nonce.
        let create = privsvc_ledger::Create {
            salt: 7,
            expires_at: 0,
            min_lifetime: 100,
            flags: Default::default(),
            content_type: "text/plain".into(),
            payload: b"other".to_vec(),
            attributes: vec![],
        };
        let r = writer(&node, 0)
            .execute(&[Operation::Create(create)])
            .await
            .unwrap();
        assert!(r.success);
    }

    let mut c2 = c.clone();
    c2.bind = "127.0.0.1:0".parse().unwrap();
    let relayer = start(&node, 0, c2).await;
    let st = wait_state(relayer.url(), &id, "written", T).await;
    assert_eq!(
        owner_entities(&node, owner).await,
        1,
        "{which}: written exactly once"
    );
    assert_eq!(st["batchSize"], 1);
    relayer.shutdown().await;
}

#[tokio::test]
async fn crash_between_durable_accept_and_batch_send_writes_once() {
    crash_case("before-send").await;
}

#[tokio::test]
async fn crash_after_sending_before_the_receipt_writes_once() {
    crash_case("mined-no-receipt").await;
}

#[tokio::test]
async fn crash_after_storing_a_batch_that_never_reached_the_node_resends_it() {
    crash_case("sent-not-mined").await;
}

#[tokio::test]
async fn a_record_already_on_the_ledger_is_marked_written_not_written_again() {
    let node = devnet().await;
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let r1 = start(&node, 0, config(d1.path())).await;
    let (b, owner) = record_body(APP, 3600, b"twice");
    let id1 = submit(r1.url(), &b).await;
    let st1 = wait_state(r1.url(), &id1, "written", T).await;
    // The client gives up on r1 and resubmits the same sealed envelope to r2.
    let r2 = start(&node, 2, config(d2.path())).await;
    let id2 = submit(r2.url(), &b).await;
    let st2 = wait_state(r2.url(), &id2, "written", T).await;
    assert_eq!(st2["entityKey"], st1["entityKey"]);
    assert_eq!(st2["block"], st1["block"]);
    // The real creating transaction, read from the ledger's EntityCreated log (not 0x00..0).
    let tx1: B256 = st1["txHash"].as_str().unwrap().parse().unwrap();
    assert_ne!(tx1, B256::ZERO);
    assert_eq!(st2["txHash"], st1["txHash"]);
    assert_eq!(owner_entities(&node, owner).await, 1);
    r1.shutdown().await;
    r2.shutdown().await;
}

/// A batch mixing many records already on the ledger (more than one owner lookup's worth)
/// with fresh ones: every copy gets the existing entity, every fresh record is written once.
#[tokio::test]
async fn a_batch_of_resubmissions_and_fresh_records_writes_only_the_fresh_ones() {
    const OLD: usize = 70;
    const NEW: usize = 5;
    let node = devnet().await;
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let r1 = start(&node, 0, config(d1.path())).await;
    let old: Vec<(Value, Address)> = (0..OLD)
        .map(|i| record_body(APP, 3600, format!("old {i}").as_bytes()))
        .collect();
    let mut first = Vec::new();
    for (b, _) in &old {
        first.push(submit(r1.url(), b).await);
    }
    let mut st1 = Vec::new();
    for id in &first {
        st1.push(wait_state(r1.url(), id, "written", T).await);
    }
    r1.shutdown().await;
    // r2 holds everything for one batch: the 70 copies and 5 fresh records, interleaved.
    let mut cfg = config(d2.path());
    cfg.batching.min_batch = OLD + NEW;
    cfg.batching.max_wait = Duration::from_millis(60_000);
    let r2 = start(&node, 2, cfg).await;
    let fresh: Vec<(Value, Address)> = (0..NEW)
        .map(|i| record_body(APP, 3600, format!("new {i}").as_bytes()))
        .collect();
    let (mut copies, mut fresh_ids) = (Vec::new(), Vec::new());
    for (i, (b, _)) in old.iter().enumerate() {
        copies.push(submit(r2.url(), b).await);
        if i % 14 == 0 && fresh_ids.len() < NEW {
            fresh_ids.push(submit(r2.url(), &fresh[fresh_ids.len()].0).await);
        }
    }
    assert_eq!(fresh_ids.len(), NEW);
    for (id, before) in copies.iter().zip(&st1) {
        let st = wait_state(r2.url(), id, "written", T).await;
        assert_eq!(st["entityKey"], before["entityKey"], "{st}");
        assert_eq!(st["txHash"], before["txHash"], "{st}");
    }
    for id in &fresh_ids {
        let st = wait_state(r2.url(), id, "written", T).await;
        let key: B256 = st["entityKey"].as_str().unwrap().parse().unwrap();
        let entity = reader(&node).entity(key, None).await.unwrap().unwrap();
        assert_eq!(entity.creator, Some(r2.address()));
    }
    for (_, owner) in old.iter().chain(&fresh) {
        assert_eq!(owner_entities(&node, *owner).await, 1);
    }
    r2.shutdown().await;
}

#[tokio::test]
async fn creation_tx_reads_the_entity_created_log_of_the_key() {
    let (node, _dir, relayer) = devnet_and_relayer(|_| {}).await;
    let id = submit(relayer.url(), &body()).await;
    let st = wait_state(relayer.url(), &id, "written", T).await;
    relayer.shutdown().await;
    let key: B256 = st["entityKey"].as_str().unwrap().parse().unwrap();
    let tx: B256 = st["txHash"].as_str().unwrap().parse().unwrap();
    let block: u64 = st["block"].as_str().unwrap().parse().unwrap();
    let ledger = reader(&node);
    assert_eq!(ledger.creation_tx(key, block).await.unwrap(), Some(tx));
    // Another block, or a key never created: the node cannot tell.
    assert_eq!(ledger.creation_tx(key, block - 1).await.unwrap(), None);
    assert_eq!(
        ledger
            .creation_tx(B256::repeat_byte(0x5a), block)
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn info_metrics_and_cors() {
    let (node, _dir, relayer) = devnet_and_relayer(|c| {
        c.metrics_bind = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let info = get(relayer.url(), "/v1/info").await.1;
    assert_eq!(info["version"], "privsvc-relayer/1");
    assert_eq!(info["chainId"], node.chain_id());
    assert_eq!(info["address"], relayer.address().to_checksum(None));
    assert_eq!(info["tokensRequired"], false);
    assert!(info.get("issuer").is_none() && info.get("issuerUrl").is_none());
    for k in [
        "minBatch",
        "maxWaitMs",
        "minIntervalBlocks",
        "maxMinAnonymity",
        "maxHoldMs",
    ] {
        assert!(info[k].is_u64(), "{k}");
    }
    let r = http()
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/v1/records", relayer.url()),
        )
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap().to_string()),
        Some("*".into())
    );
    let id = submit(relayer.url(), &body()).await;
    wait_state(relayer.url(), &id, "written", T).await;
    let metrics_url = format!(
        "http://{}",
        relayer.metrics_addr().expect("METRICS_BIND on")
    );
    let m = http()
        .get(format!("{metrics_url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains("privsvc_submissions_total{status=\"202\"} 1"),
        "{m}"
    );
    assert!(m.contains("privsvc_batches_total 1"), "{m}");
    assert!(m.contains("privsvc_batch_size_bucket{le=\"1\"} 1"), "{m}");
    assert!(m.contains("privsvc_queue_length 0"), "{m}");
    assert!(!m.contains(&id));
    relayer.shutdown().await;
}

#[tokio::test]
async fn issuer_on_issues_tokens_that_the_relayer_accepts_end_to_end() {
    use privsvc_tokens::{TokenWallet, TokenWalletOptions};
    let (node, _dir, relayer) = devnet_and_relayer(|c| {
        c.tokens = TokenMode::Required;
        c.issuer.on = true;
    })
    .await;
    let info = get(relayer.url(), "/v1/info").await.1;
    assert_eq!(info["issuer"], relayer.address().to_checksum(None));
    assert_eq!(info["issuerUrl"], relayer.url());
    let mut options = TokenWalletOptions::new(
        Arc::new(privsvc_vault::LocalWallet::random()),
        reader(&node),
        relayer.address(),
        relayer.url(),
    );
    options.min_age_ms = 0;
    // Tokens obtained in this session ripen at once (not at a random age up to an hour).
    options.max_ripe_ms = 0;
    let wallet = TokenWallet::new(options);
    let got = wallet.acquire(APP, 2, None).await.unwrap();
    assert_eq!(got.count, 2);
    let source = wallet.source();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let token = source
            .take(APP, privsvc_tokens::now_ms() + 1)
            .await
            .unwrap()
            .expect("a token");
        ids.push(submit(relayer.url(), &body_with_token(&token)).await);
        // The same token again is refused.
        let again = body_with_token(&token);
        assert_eq!(post(relayer.url(), "/v1/records", &again).await.0, 403);
    }
    for id in &ids {
        wait_state(relayer.url(), id, "written", T).await;
    }
    relayer.shutdown().await;
}

#[tokio::test]
async fn a_batch_over_the_block_gas_limit_is_split() {
    let mut devnet_config = privsvc_devnet::DevnetConfig::on_demand();
    // About two records' worth of gas (with the writer's 20 % margin) per block.
    devnet_config.gas_limit = 400_000;
    let node = privsvc_devnet::Devnet::start(devnet_config).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.batching.min_batch = 4;
    c.batching.max_wait = Duration::from_millis(1000);
    let relayer = start(&node, 0, c).await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(submit(relayer.url(), &body()).await);
    }
    wait_written_in_batch(relayer.url(), &ids, 2, T).await;
    relayer.shutdown().await;
}

/// A writer whose simulation refuses any transaction that transfers to `poisoned`, the way the
/// node refuses an operation (a decoded revert), and passes everything else to the devnet.
struct Refusing {
    inner: Arc<dyn LedgerWriter>,
    poisoned: Address,
}

#[async_trait]
impl LedgerWriter for Refusing {
    fn address(&self) -> Address {
        self.inner.address()
    }
    async fn prepare(
        &self,
        ops: &[Operation],
        nonce: Option<u64>,
    ) -> Result<PreparedTx, LedgerError> {
        for op in ops {
            if let Operation::Transfer { key, new_owner } = op {
                if *new_owner == self.poisoned {
                    return Err(LedgerError::Reverted(privsvc_ledger::Revert::from_reason(
                        format!("EntityNotFound({key})"),
                    )));
                }
            }
        }
        self.inner.prepare(ops, nonce).await
    }
    async fn broadcast(&self, tx: &PreparedTx) -> Result<(), LedgerError> {
        self.inner.broadcast(tx).await
    }
    async fn receipt(&self, h: B256) -> Result<Option<BatchReceipt>, LedgerError> {
        self.inner.receipt(h).await
    }
}

#[tokio::test]
async fn a_reverting_batch_fails_the_offender_with_the_reason_and_writes_the_rest() {
    let (node, _dir, c) = devnet_and_config(|c| {
        c.batching.min_batch = 3;
        c.batching.max_wait = Duration::from_millis(2000);
    })
    .await;
    let (bad, bad_owner) = record_body(APP, 3600, b"refused");
    let writer = Arc::new(Refusing {
        inner: writer(&node, 0),
        poisoned: bad_owner,
    });
    let relayer = start_with(&node, c, writer).await;
    let e = offender_fails_rest_written(&node, relayer.url(), &bad, bad_owner, T).await;
    assert!(e.contains("EntityNotFound"), "{e}");
    relayer.shutdown().await;
}

#[tokio::test]
async fn batches_are_at_least_min_interval_blocks_apart() {
    let mut devnet_config = privsvc_devnet::DevnetConfig::default();
    devnet_config.block_time = privsvc_devnet::BlockTime::Interval(Duration::from_millis(100));
    let node = privsvc_devnet::Devnet::start(devnet_config).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.batching.min_batch = 1;
    c.batching.min_interval_blocks = 5;
    c.block_time = Duration::from_millis(100);
    let relayer = start(&node, 0, c).await;
    let url = relayer.url().to_string();
    let mut blocks = Vec::new();
    for _ in 0..3 {
        let id = submit(&url, &body()).await;
        let st = wait_state(&url, &id, "written", T).await;
        blocks.push(st["block"].as_str().unwrap().parse::<u64>().unwrap());
    }
    for w in blocks.windows(2) {
        assert!(w[1] >= w[0] + 5, "batches at blocks {blocks:?}");
    }
    relayer.shutdown().await;
    node.shutdown().await;
}

#[tokio::test]
async fn a_stored_batch_whose_nonce_was_taken_is_requeued_and_written_once() {
    crash_case("superseded").await;
}

/// A writer that points the poisoned owner's transfer at an entity that does not exist (so the
/// node really reverts it with `EntityNotFound`), and signs batches of several records without
/// simulating them, so that such a batch is mined and reverts on the ledger.
struct Corrupting {
    inner: privsvc_ledger::RpcWriter,
    poisoned: Address,
}

#[async_trait]
impl LedgerWriter for Corrupting {
    fn address(&self) -> Address {
        self.inner.address()
    }
    async fn prepare(
        &self,
        ops: &[Operation],
        nonce: Option<u64>,
    ) -> Result<PreparedTx, LedgerError> {
        let ops: Vec<Operation> = ops
            .iter()
            .map(|op| match op {
                Operation::Transfer { new_owner, .. } if *new_owner == self.poisoned => {
                    Operation::Transfer {
                        key: B256::repeat_byte(0xee),
                        new_owner: *new_owner,
                    }
                }
                other => other.clone(),
            })
            .collect();
        let transfers = ops
            .iter()
            .filter(|o| matches!(o, Operation::Transfer { .. }))
            .count();
        if transfers < 2 {
            return self.inner.prepare(&ops, nonce).await;
        }
        let ledger = self.inner.ledger();
        let nonce = match nonce {
            Some(n) => n,
            None => ledger.transaction_count(self.address(), true).await?,
        };
        let (max_fee_per_gas, max_priority_fee_per_gas) = ledger.fees().await?;
        self.inner.sign(alloy_consensus::TxEip1559 {
            chain_id: self.inner.chain_id(),
            nonce,
            gas_limit: 5_000_000,
            max_fee_per_gas,
            max_priority_fee_per_gas,
            to: alloy_primitives::TxKind::Call(privsvc_ledger::ARKIV_ADDRESS),
            value: alloy_primitives::U256::ZERO,
            access_list: Default::default(),
            input: privsvc_ledger::encode_operations(&ops),
        })
    }
    async fn broadcast(&self, tx: &PreparedTx) -> Result<(), LedgerError> {
        self.inner.broadcast(tx).await
    }
    async fn receipt(&self, h: B256) -> Result<Option<BatchReceipt>, LedgerError> {
        self.inner.receipt(h).await
    }
}

#[tokio::test]
async fn a_batch_reverted_on_the_ledger_fails_the_offender_and_retries_the_rest() {
    let (node, _dir, c) = devnet_and_config(|c| {
        c.batching.min_batch = 3;
        c.batching.max_wait = Duration::from_millis(1500);
    })
    .await;
    let (bad, bad_owner) = record_body(APP, 3600, b"reverts");
    let writer = Arc::new(Corrupting {
        inner: rpc_writer(&node, 0),
        poisoned: bad_owner,
    });
    let relayer = start_with(&node, c, writer).await;
    // The offender fails; the rest is retried, without it.
    offender_fails_rest_written(&node, relayer.url(), &bad, bad_owner, T).await;
    let m = relayer.metrics_text();
    assert!(m.contains("privsvc_records_failed_total 1"), "{m}");
    relayer.shutdown().await;
}

#[tokio::test]
async fn shutdown_returns_while_a_batch_is_stuck_in_flight_and_the_next_start_writes_it_once() {
    let (node, _dir, c) = devnet_and_config(|c| {
        c.receipt_timeout = Duration::from_millis(300);
        c.heartbeat_interval = Duration::from_millis(3_600_000);
    })
    .await;
    // The ledger never answers the batch's preparation: the batcher is stuck in it.
    let faulty = Faulty::new(writer(&node, 0));
    faulty.hang_prepare.store(true, Ordering::SeqCst);
    let relayer = start_with(&node, c.clone(), faulty.clone()).await;
    let url = relayer.url().to_string();
    let (body, owner) = record_body(APP, 3600, b"stuck");
    let id = submit(&url, &body).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(30), relayer.shutdown())
        .await
        .expect("shutdown returns although a batch is stuck");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    // The record was accepted durably: the next start writes it, once.
    let mut c2 = c.clone();
    c2.bind = "127.0.0.1:0".parse().unwrap();
    let relayer = start(&node, 0, c2).await;
    wait_state(relayer.url(), &id, "written", T).await;
    assert_eq!(owner_entities(&node, owner).await, 1);
    tokio::time::timeout(Duration::from_secs(30), relayer.shutdown())
        .await
        .expect("shutdown returns");
}

#[tokio::test]
async fn a_chain_id_other_than_the_ledgers_is_refused_by_name() {
    let (node, _dir, c) = devnet_and_config(|c| c.chain_id = Some(1)).await;
    let err = privsvc_relayer::Relayer::start(c, reader(&node), writer(&node, 0))
        .await
        .err()
        .expect("a relayer configured for another chain does not start");
    assert!(
        matches!(
            err,
            privsvc_relayer::RelayerError::ChainIdMismatch { expected: 1, actual }
                if actual == node.chain_id()
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_unreachable_ledger_is_named_with_its_url_and_the_cause_kept() {
    // A port nothing listens on.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", free.local_addr().unwrap());
    drop(free);
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.rpc_url = url.clone();
    c.key =
        Some(privsvc_relayer::RelayerKey::from_hex(privsvc_devnet::DEV_PRIVATE_KEYS[0]).unwrap());
    let err = privsvc_relayer::Relayer::start_on_ledger(c)
        .await
        .err()
        .expect("no ledger, no relayer");
    let privsvc_relayer::RelayerError::LedgerConnect { url: named, source } = &err else {
        panic!("expected LedgerConnect, got {err:?}");
    };
    assert_eq!(named.as_str().trim_end_matches('/'), url);
    assert!(matches!(**source, LedgerError::Http { .. }), "{source:?}");
    assert!(err.to_string().contains(&url), "{err}");
}
