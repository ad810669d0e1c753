//! Adversary tests of revision 3 (DESIGN 10, "what a party can measure") on the servers. Each
//! test plays one party (a replaying OHTTP relay, a flooding user, a host with a whole IPv6
//! /64, a relay watching `/healthz` for an empty queue, a user flooding holds that can never
//! be met, and a store that fails at the wrong moment) against a real relayer: the embedded
//! devnet, real HTTP on 127.0.0.1, real OHTTP, real RSA blind signatures, real SQLite files.
//! Each fails on the relayer before revision 3.

mod common;

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use common::faultproxy::FaultProxy;
use common::*;
use privsvc_ledger::{LedgerReader, LedgerWriter, RpcLedger, RpcWriter};
use privsvc_relayer::listener::PeerAddr;
use privsvc_relayer::Relayer;
use privsvc_tokens::now_ms;
use serde_json::{json, Value};
use tower::ServiceExt as _;

const T: Duration = Duration::from_secs(30);

/// Stay inside one one-minute rate-limit window for the next few seconds.
async fn avoid_minute_edge() {
    let into_minute = now_ms() % 60_000;
    if into_minute > 45_000 {
        tokio::time::sleep(Duration::from_millis(60_000 - into_minute + 100)).await;
    }
}

/// One request through the relayer's full router, from `ip` as the listener would see it.
async fn from_address(
    router: &axum::Router,
    ip: IpAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> u16 {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(
            body.map(|b| serde_json::to_vec(b).unwrap())
                .unwrap_or_default(),
        ))
        .unwrap();
    req.extensions_mut().insert(ConnectInfo(PeerAddr::from(ip)));
    router.clone().oneshot(req).await.unwrap().status().as_u16()
}

/// A host with an IPv6 /64 (2^64 addresses) sends each request from a new address of it: it
/// gets one source's share of submissions and of issuer requests, not 2^64 of them. The
/// relayer's router is driven in-process with the source address a listener would report
/// (this machine cannot bind many addresses of one /64); IPv4 addresses and other /64s are
/// other sources.
#[tokio::test]
async fn an_ipv6_slash_64_is_one_source_for_submissions_and_issuer_routes() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.rate_limit_per_min = 3;
        c.issuer_on = true;
        c.issuer_rate_limit_per_min = 3;
        c.min_batch = 100;
        c.max_wait_ms = 600_000;
    })
    .await;
    let router = relayer.router();
    avoid_minute_edge().await;
    let address = |prefix: &str, i: u32| -> IpAddr {
        format!("{prefix}:{:x}:{:x}::{:x}", i >> 16, i & 0xffff, i + 1)
            .parse()
            .unwrap()
    };
    let mut statuses = Vec::new();
    for i in 0..20 {
        let ip = address("2001:db8:5:6", i);
        statuses.push(from_address(&router, ip, "POST", "/v1/records", Some(&body())).await);
    }
    assert_eq!(statuses[..3], [202; 3], "{statuses:?}");
    assert!(statuses[3..].iter().all(|s| *s == 429), "{statuses:?}");
    let next_prefix: IpAddr = "2001:db8:5:7::1".parse().unwrap();
    assert_eq!(
        from_address(&router, next_prefix, "POST", "/v1/records", Some(&body())).await,
        202
    );
    let v4: IpAddr = "192.0.2.7".parse().unwrap();
    assert_eq!(
        from_address(&router, v4, "POST", "/v1/records", Some(&body())).await,
        202
    );

    let key_path = format!("/v1/issuer/key?app=invented&epoch={}", today());
    let mut statuses = Vec::new();
    for i in 0..20 {
        let ip = address("2001:db8:9:9", i);
        statuses.push(from_address(&router, ip, "GET", &key_path, None).await);
    }
    assert_eq!(statuses[..3], [404; 3], "{statuses:?}");
    assert!(statuses[3..].iter().all(|s| *s == 429), "{statuses:?}");
    relayer.shutdown().await;
}

/// A relayer of dev account 0 reaching the ledger only through `proxy` (which counts calls).
async fn relayer_via(
    proxy: &FaultProxy,
    chain_id: u64,
    cfg: privsvc_relayer::RelayerConfig,
) -> privsvc_relayer::RelayerHandle {
    let key = k256::ecdsa::SigningKey::from_slice(
        &hex::decode(privsvc_devnet::DEV_PRIVATE_KEYS[0].trim_start_matches("0x")).unwrap(),
    )
    .unwrap();
    let reader: Arc<dyn LedgerReader> = Arc::new(RpcLedger::new(proxy.url.clone()).unwrap());
    let writer: Arc<dyn LedgerWriter> = Arc::new(RpcWriter::new(
        RpcLedger::new(proxy.url.clone()).unwrap(),
        key,
        chain_id,
    ));
    Relayer::start(cfg, reader, writer)
        .await
        .expect("relayer starts")
}

/// n-1: the OHTTP relay holds a victim's submission and polls `/healthz` until the relayer's
/// queue is empty, to send it alone among its own records. The public queue reads 100 whether
/// it holds 0, 1 or 3 records; the exact figures are on `METRICS_BIND` only. And polling
/// `/healthz` costs the ledger nothing: fifty requests, no ledger call each.
#[tokio::test]
async fn healthz_tells_a_relay_nothing_about_an_empty_queue_and_costs_no_ledger_call() {
    let node = devnet().await;
    let proxy = FaultProxy::start(&node.url(), 0, Duration::from_millis(100)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.min_batch = 10;
    c.max_wait_ms = 600_000;
    c.metrics_bind = Some("127.0.0.1:0".parse().unwrap());
    let relayer = relayer_via(&proxy, node.chain_id(), c).await;
    let url = relayer.url().to_string();
    let metrics = format!("http://{}", relayer.metrics_addr().unwrap());
    let start = std::time::Instant::now();
    while relayer.health().await.heartbeat.is_empty() {
        assert!(start.elapsed() < T, "no heartbeat");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut seen = Vec::new();
    let watch = || async { get(&url, "/healthz").await.1 };
    let h = watch().await;
    assert_eq!(h["ok"], true, "{h}");
    seen.push(h["queue"].clone());
    for n in [1, 3] {
        while relayer.health().await.queue < n {
            submit(&url, &body()).await;
        }
        seen.push(watch().await["queue"].clone());
    }
    assert_eq!(seen, vec![json!(100), json!(100), json!(100)], "{seen:?}");
    // The operator's view: exact, on METRICS_BIND and in-process.
    assert_eq!(get(&metrics, "/healthz").await.1["queue"], 3);
    assert_eq!(relayer.health().await.queue, 3);

    let before = proxy.state.forwarded.load(Ordering::SeqCst);
    for _ in 0..50 {
        let h = watch().await;
        assert_eq!(h["ok"], true, "{h}");
        assert!(h["balanceNative"].as_f64().unwrap() > 0.0, "{h}");
    }
    let calls = proxy.state.forwarded.load(Ordering::SeqCst) - before;
    // The background check may fall into the window (one call every 10 s).
    assert!(calls <= 2, "{calls} ledger calls for 50 health requests");
    relayer.shutdown().await;
}

/// A user floods the relayer with more than MAX_BATCH held records whose holds can never be
/// met (minAnonymity 2, each alone in its own project, a long maxHoldMs). Honest records
/// arriving behind them are written at once; the held ones stay queued, holding nothing up.
#[tokio::test]
async fn unmet_holds_from_many_projects_never_stall_honest_records() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.min_batch = 1;
        c.max_wait_ms = 200;
        c.max_batch = 10;
        c.max_min_anonymity = 10;
    })
    .await;
    let url = relayer.url().to_string();
    let mut held = Vec::new();
    for i in 0..25 {
        let (mut b, _) = record_body_in(APP, &format!("lone-{i}"), 3600, b"never met");
        b["minAnonymity"] = json!(2);
        b["maxHoldMs"] = json!(120_000);
        held.push(submit(&url, &b).await);
    }
    let bodies: Vec<Value> = (0..3).map(|_| body()).collect();
    let honest: Vec<String> =
        futures::future::join_all(bodies.iter().map(|b| submit(&url, b))).await;
    for id in &honest {
        wait_state(&url, id, "written", Duration::from_secs(15)).await;
    }
    for id in held.iter().step_by(6) {
        let st = get(&url, &format!("/v1/records/{id}")).await.1;
        assert_eq!(st["state"], "queued", "{st}");
    }
    relayer.shutdown().await;
}

/// The relayer's store fails exactly when the batcher marks a record that it found already on
/// the ledger (another relayer wrote the same envelope first: a client's failover). The record
/// must go back to the queue, never into a batch: a second entity would be a second copy of
/// the user's record under the same owner. When the store recovers it is marked written with
/// the entity that exists.
#[tokio::test]
async fn a_store_hiccup_on_a_record_already_on_the_ledger_never_writes_it_twice() {
    let (node, _dir_a, a) = devnet_and_relayer(|c| {
        c.min_batch = 1;
        c.max_wait_ms = 200;
    })
    .await;
    let dir_b = tempfile::tempdir().unwrap();
    let b = start(&node, 1, config(dir_b.path())).await;
    // The failing store: A's database refuses to mark a queued record written.
    let db = rusqlite::Connection::open(a.store_path()).unwrap();
    db.execute_batch(
        "CREATE TRIGGER store_hiccup BEFORE UPDATE OF state ON records
         WHEN OLD.state = 'queued' AND NEW.state = 'written'
         BEGIN SELECT RAISE(ABORT, 'injected store failure'); END;",
    )
    .unwrap();

    let (record, owner) = record_body(APP, 3600, b"failover");
    let id_b = submit(b.url(), &record).await;
    let on_b = wait_state(b.url(), &id_b, "written", T).await;
    let id_a = submit(a.url(), &record).await;
    // A finds it on the ledger several times over, cannot store that, and writes nothing.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(owner_entities(&node, owner).await, 1, "written twice");
    let st = get(a.url(), &format!("/v1/records/{id_a}")).await.1;
    assert_eq!(st["state"], "queued", "{st}");

    // The store recovers: A marks the record written with the entity B created.
    db.execute_batch("DROP TRIGGER store_hiccup").unwrap();
    let on_a = wait_state(a.url(), &id_a, "written", T).await;
    assert_eq!(on_a["entityKey"], on_b["entityKey"]);
    assert_eq!(owner_entities(&node, owner).await, 1);
    a.shutdown().await;
    b.shutdown().await;
}
