//! Adversary tests of revision 3 (what a party can measure, docs/PROTOCOL.md §5 to §7) on the
//! servers. Each
//! test plays one party (a replaying OHTTP relay, a flooding user, a host with a whole IPv6
//! /64, a relay watching `/healthz` for an empty queue, a user flooding holds that can never
//! be met, and a store that fails at the wrong moment) against a real relayer: the embedded
//! devnet, real HTTP on 127.0.0.1, real OHTTP, real RSA blind signatures, real SQLite files.
//! Each fails on the relayer before revision 3.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use base64::Engine as _;
use privsvc_ledger::{LedgerReader, LedgerWriter, RpcLedger, RpcWriter};
use privsvc_ohttp::PeerIp;
use privsvc_ohttp::{RESPONSE_CLASSES, RESPONSE_OVERHEAD};
use privsvc_relayer::{OhttpSeed, Relayer};
use privsvc_tokens::{
    fetch_issuer_key, issuance_message, now_ms, token_message, token_suite, verify_token, Blinded,
    IssueRequest, IssueResponse, IssuerKey, TokenRedemption,
};
use privsvc_vault::{LocalWallet, Wallet};
use serde_json::{json, Value};
use tower::ServiceExt as _;

use crate::common::faultproxy::FaultProxy;
use crate::common::*;

const T: Duration = Duration::from_secs(30);
const SEED: [u8; 32] = [9u8; 32];
/// What every answer of the issuer routes measures through OHTTP (docs/PROTOCOL.md §5.3).
const ISSUER_SEALED: usize = RESPONSE_CLASSES[1] + RESPONSE_OVERHEAD;

/// An encapsulated request to the relayer at `url` (OHTTP on): the bytes a relay forwards and
/// the client's context to open the answer.
async fn encapsulated(
    url: &str,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
) -> (Vec<u8>, privsvc_ohttp::PendingResponse) {
    let key = get(url, "/v1/info").await.1["ohttpKey"]
        .as_str()
        .expect("ohttpKey")
        .to_string();
    let mut headers = vec![("accept".to_string(), "application/json".to_string())];
    if body.is_some() {
        headers.push(("content-type".into(), "application/json".into()));
    }
    let request = privsvc_ohttp::BinaryRequest {
        method: method.into(),
        path: path.into(),
        headers,
        body: body.unwrap_or_default(),
    };
    let authority = url.trim_start_matches("http://").to_string();
    privsvc_ohttp::encapsulate(&key, &request, "http", &authority).unwrap()
}

/// POST encapsulated bytes to `/v1/ohttp` from `client`: the outer status and sealed body.
async fn post_ohttp_from(client: &reqwest::Client, url: &str, msg: Vec<u8>) -> (u16, Vec<u8>) {
    let r = client
        .post(format!("{url}/v1/ohttp"))
        .header("content-type", "message/ohttp-req")
        .body(msg)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

/// One call through `/v1/ohttp` from `client`: (sealed length, the opened answer).
async fn ohttp_call(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
) -> (usize, privsvc_ohttp::OhttpResponse) {
    let (msg, pending) = encapsulated(url, method, path, body).await;
    let (status, sealed) = post_ohttp_from(client, url, msg).await;
    assert_eq!(status, 200);
    (sealed.len(), pending.open(&sealed).unwrap())
}

/// Wait until the issuer has published today's key of [`APP`] (configured in `ISSUER_APPS`).
async fn wait_issuer_key(url: &str) {
    let start = std::time::Instant::now();
    while get(url, &format!("/v1/issuer/key?app={APP}&epoch={}", today()))
        .await
        .0
        != 200
    {
        assert!(start.elapsed() < T, "no issuer key");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `n` token messages of [`APP`] for today, blinded under `key`.
fn blinded(key: &IssuerKey, n: usize) -> Vec<(Vec<u8>, Blinded)> {
    (0..n)
        .map(|_| {
            let msg = token_message(APP, today(), &rand::random()).unwrap();
            let b = token_suite().blind(key, &msg).unwrap();
            (msg, b)
        })
        .collect()
}

/// A signed issue request of `wallet` to `issuer` for `tokens`.
async fn issue_request(
    wallet: &LocalWallet,
    issuer: alloy_primitives::Address,
    chain: u64,
    tokens: &[(Vec<u8>, Blinded)],
) -> IssueRequest {
    let b64 = base64::engine::general_purpose::STANDARD;
    let ts = now_ms();
    let mut req = IssueRequest {
        issuer,
        chain_id: chain,
        app: APP.into(),
        epoch: today(),
        wallet: wallet.address(),
        blinded: tokens
            .iter()
            .map(|(_, b)| b64.encode(b.blinded_message()))
            .collect(),
        ts,
        wallet_signature: String::new(),
        attestation: None,
    };
    let text = issuance_message(&req, ts).unwrap();
    let sig = wallet.personal_sign(text.as_bytes()).await.unwrap();
    req.wallet_signature = format!("0x{}", hex::encode(sig.as_bytes()));
    req
}

/// Finalize every blind signature of `answer` into a token and verify it under `key`.
fn assert_real_tokens(key: &IssuerKey, tokens: &[(Vec<u8>, Blinded)], answer: &IssueResponse) {
    let b64 = base64::engine::general_purpose::STANDARD;
    assert_eq!(answer.blind_signatures.len(), tokens.len());
    for ((msg, b), bs) in tokens.iter().zip(&answer.blind_signatures) {
        let sig = token_suite()
            .finalize(key, &b64.decode(bs).unwrap(), b, msg)
            .unwrap();
        let nonce: [u8; 32] = msg[msg.len() - 32..].try_into().unwrap();
        verify_token(key, APP, &TokenRedemption::new(today(), &nonce, &sig)).unwrap();
    }
}

/// The OHTTP relay replays a user's encapsulated issue request twenty times (ten at once).
/// It cannot tell the answers apart (same size, the 8 192-byte class), whichever answer it
/// delivers gives the user the same valid tokens, and the replays cost the user no quota: the
/// user's next request gets the rest of the day's tokens.
#[tokio::test]
async fn a_relay_replaying_an_encapsulated_issue_request_costs_the_user_nothing() {
    let (node, _dir, relayer) = devnet_and_relayer(|c| {
        c.ohttp_seed = Some(OhttpSeed::new(SEED));
        c.issuer.on = true;
        c.issuer.apps = vec![APP.into()];
        c.issuer.quota = 10;
    })
    .await;
    let url = relayer.url().to_string();
    let me = relayer.address();
    wait_issuer_key(&url).await;
    let key = fetch_issuer_key(reader(&node).as_ref(), me, APP, today())
        .await
        .unwrap();
    let user = LocalWallet::random();
    let tokens = blinded(&key, 5);
    let req = issue_request(&user, me, node.chain_id(), &tokens).await;
    let body = serde_json::to_vec(&req).unwrap();
    let (msg, pending) = encapsulated(&url, "POST", "/v1/tokens/issue", Some(body.clone())).await;

    // The user's request, forwarded once, then replayed: ten copies at once, ten in a row.
    let (status, first) = post_ohttp_from(&http(), &url, msg.clone()).await;
    assert_eq!(status, 200);
    let relay = http();
    let burst = (0..10).map(|_| post_ohttp_from(&relay, &url, msg.clone()));
    let mut answers: Vec<(u16, Vec<u8>)> = futures::future::join_all(burst).await;
    for _ in 0..10 {
        answers.push(post_ohttp_from(&http(), &url, msg.clone()).await);
    }
    // What the relay sees: the same status and size every time.
    assert_eq!(first.len(), ISSUER_SEALED);
    for (status, sealed) in &answers {
        assert_eq!((*status, sealed.len()), (200, first.len()));
    }

    // The relay delivers the last replay's answer instead of the first: the user is served.
    let (_, last) = answers.pop().unwrap();
    let opened = pending.open(&last).unwrap();
    assert_eq!(
        opened.status,
        200,
        "{}",
        String::from_utf8_lossy(&opened.body)
    );
    let answer: IssueResponse = serde_json::from_slice(&opened.body).unwrap();
    assert_eq!(answer.remaining, 5, "the replays were charged");
    assert_real_tokens(&key, &tokens, &answer);
    // Byte for byte the stored answer (the same request posted directly, once more).
    let direct = http()
        .post(format!("{url}/v1/tokens/issue"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status().as_u16(), 200);
    assert_eq!(direct.bytes().await.unwrap().to_vec(), opened.body);

    // The replays cost nothing: the user's next request gets the other five tokens.
    let more = blinded(&key, 5);
    let next = issue_request(&user, me, node.chain_id(), &more).await;
    let (len, answer) = ohttp_call(
        &http(),
        &url,
        "POST",
        "/v1/tokens/issue",
        Some(serde_json::to_vec(&next).unwrap()),
    )
    .await;
    assert_eq!(len, ISSUER_SEALED);
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let answer: IssueResponse = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(answer.remaining, 0);
    assert_real_tokens(&key, &more, &answer);
    relayer.shutdown().await;
}

/// A user posts issuer requests encapsulated in `/v1/ohttp` itself, to escape the issuer's
/// per-address limit: they count against its address like direct ones (429 inside the sealed
/// answer, with `Retry-After`), while a configured OHTTP relay (which limits its own clients)
/// is not counted. Every issuer answer, 404, 400 or 429, measures the 8 192-byte class; other
/// answers keep theirs.
#[tokio::test]
async fn a_user_flooding_the_issuer_through_ohttp_is_limited_like_a_direct_one() {
    let relay_ip: IpAddr = "127.0.0.2".parse().unwrap();
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.ohttp_seed = Some(OhttpSeed::new(SEED));
        c.issuer.on = true;
        c.issuer.requests_per_min = 5;
        c.limits.ohttp_relay_ips = vec![relay_ip];
    })
    .await;
    let url = relayer.url().to_string();
    let key_path = format!("/v1/issuer/key?app=invented&epoch={}", today());
    avoid_minute_edge().await;
    let user = http();
    for _ in 0..5 {
        let (len, answer) = ohttp_call(&user, &url, "GET", &key_path, None).await;
        assert_eq!((answer.status, len), (404, ISSUER_SEALED));
    }
    // Blind signing is behind the same count.
    let (len, answer) = ohttp_call(
        &user,
        &url,
        "POST",
        "/v1/tokens/issue",
        Some(b"{}".to_vec()),
    )
    .await;
    assert_eq!((answer.status, len), (429, ISSUER_SEALED));
    let body: Value = serde_json::from_slice(&answer.body).unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("a minute"),
        "{body}"
    );
    let retry: u64 = answer
        .headers
        .iter()
        .find(|(n, _)| n == "retry-after")
        .expect("Retry-After")
        .1
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    let (_, answer) = ohttp_call(&user, &url, "GET", &key_path, None).await;
    assert_eq!(answer.status, 429);
    // Its direct requests share the count.
    assert_eq!(get(&url, &key_path).await.0, 429);

    // The configured relay forwards many users' requests: not counted per address.
    let relay = reqwest::Client::builder()
        .local_address(relay_ip)
        .build()
        .unwrap();
    for _ in 0..10 {
        let (len, answer) = ohttp_call(&relay, &url, "GET", &key_path, None).await;
        assert_eq!((answer.status, len), (404, ISSUER_SEALED));
    }
    let (len, answer) = ohttp_call(
        &relay,
        &url,
        "POST",
        "/v1/tokens/issue",
        Some(b"{}".to_vec()),
    )
    .await;
    assert_eq!((answer.status, len), (400, ISSUER_SEALED));
    // A relayer answer outside the issuer keeps its own class.
    let (len, answer) = ohttp_call(&relay, &url, "GET", "/v1/info", None).await;
    assert_eq!(
        (answer.status, len),
        (200, RESPONSE_CLASSES[0] + RESPONSE_OVERHEAD)
    );
    relayer.shutdown().await;
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
    req.extensions_mut().insert(ConnectInfo(PeerIp::from(ip)));
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
        c.limits.submissions_per_min = 3;
        c.issuer.on = true;
        c.issuer.requests_per_min = 3;
        c.batching.min_batch = 100;
        c.batching.max_wait = Duration::from_millis(600_000);
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
) -> privsvc_relayer::Relayer {
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
    c.batching.min_batch = 10;
    c.batching.max_wait = Duration::from_millis(600_000);
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
        c.batching.min_batch = 1;
        c.batching.max_wait = Duration::from_millis(200);
        c.batching.max_batch = 10;
        c.batching.max_min_anonymity = 10;
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
        c.batching.min_batch = 1;
        c.batching.max_wait = Duration::from_millis(200);
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
    // Its status says written (A knows it is on the ledger), never queued, though the store
    // still has it queued.
    let st = get(a.url(), &format!("/v1/records/{id_a}")).await.1;
    assert_eq!(st["state"], "written", "{st}");
    assert_eq!(st["entityKey"], on_b["entityKey"]);
    let stored = |db: &rusqlite::Connection| -> String {
        db.query_row("SELECT state FROM records WHERE id = ?1", [&id_a], |r| {
            r.get(0)
        })
        .unwrap()
    };
    assert_eq!(stored(&db), "queued");

    // The store recovers: A marks the record written with the entity B created.
    db.execute_batch("DROP TRIGGER store_hiccup").unwrap();
    let start = std::time::Instant::now();
    while stored(&db) != "written" {
        assert!(start.elapsed() < T, "never recorded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let on_a = wait_state(a.url(), &id_a, "written", T).await;
    assert_eq!(on_a["entityKey"], on_b["entityKey"]);
    assert_eq!(owner_entities(&node, owner).await, 1);
    a.shutdown().await;
    b.shutdown().await;
}

/// The residual of n-1 (SECURITY.md, "n-1 by flooding"), measured: an OHTTP relay that
/// forwards a relayer's traffic holds a target's encapsulated submission, sends `MIN_BATCH - 1`
/// submissions of its own, then the target's. The batch flushes at `MIN_BATCH` and the target
/// is the one entity in it that the relay did not create: rounding `/healthz` does not stop
/// this (it only stops waiting for an empty queue). The test fails if the relayer ever stops
/// flushing such a batch.
#[tokio::test]
async fn a_relay_can_still_flood_a_batch_around_a_target() {
    const MIN_BATCH: usize = 8;
    let relay_ip: IpAddr = "127.0.0.1".parse().unwrap();
    let (node, _dir, relayer) = devnet_and_relayer(|c| {
        c.ohttp_seed = Some(OhttpSeed::new(SEED));
        c.batching.min_batch = MIN_BATCH;
        c.batching.max_wait = Duration::from_millis(600_000);
        c.limits.ohttp_relay_ips = vec![relay_ip];
    })
    .await;
    let url = relayer.url().to_string();
    let relay = http();
    // The target's submission, as the relay receives it (it cannot read it).
    let (target, target_owner) = record_body(APP, 3600, b"target");
    let (target_msg, target_pending) = encapsulated(
        &url,
        "POST",
        "/v1/records",
        Some(serde_json::to_vec(&target).unwrap()),
    )
    .await;
    // The flood: the relay's own records, then the target's.
    let started = std::time::Instant::now();
    let mut own = Vec::new();
    for i in 0..MIN_BATCH - 1 {
        let (b, owner) = record_body(APP, 3600, format!("flood {i}").as_bytes());
        let (len, answer) = ohttp_call(
            &relay,
            &url,
            "POST",
            "/v1/records",
            Some(serde_json::to_vec(&b).unwrap()),
        )
        .await;
        assert_eq!(
            (answer.status, len),
            (202, RESPONSE_CLASSES[0] + RESPONSE_OVERHEAD)
        );
        own.push(owner);
    }
    assert_eq!(get(&url, "/healthz").await.1["queue"], 100);
    let (status, sealed) = post_ohttp_from(&relay, &url, target_msg).await;
    assert_eq!(status, 200);
    let answer = target_pending.open(&sealed).unwrap();
    assert_eq!(answer.status, 202);
    let id = serde_json::from_slice::<Value>(&answer.body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let st = wait_state(&url, &id, "written", T).await;
    let elapsed = started.elapsed();
    // The batch on the ledger: the target and the relay's records, nothing else.
    let block: u64 = st["block"].as_str().unwrap().parse().unwrap();
    let page = reader(&node)
        .query(
            &format!(
                "$creator = addr({}) AND $createdAt = u64({block}) AND project = str('{APP}')",
                relayer.address()
            ),
            &privsvc_ledger::QueryOptions::new(privsvc_ledger::Select {
                key: true,
                owner: true,
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    let owners: Vec<_> = page.entities.iter().filter_map(|e| e.owner).collect();
    assert_eq!(owners.len(), MIN_BATCH, "{owners:?}");
    let strangers: Vec<_> = owners.iter().filter(|o| !own.contains(o)).collect();
    assert_eq!(
        strangers,
        vec![&target_owner],
        "the relay singles the target out"
    );
    println!(
        "n-1 by flooding: {} records of the relay's own, target written {} ms after the flood began",
        MIN_BATCH - 1,
        elapsed.as_millis()
    );
    relayer.shutdown().await;
}
