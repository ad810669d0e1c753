//! The issuer and the key acceptance rules (docs/PROTOCOL.md §5, §5.1 and §5.2) against an
//! adversary, over real HTTP on loopback, the real devnet and real RSA keys: the
//! new-app cap, lapsed apps, the next-day key schedule driven by an injected clock, and the
//! acceptance rules (late keys, pins, equivocation by deleting and re-creating a key).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::{Address, B256};
use base64::Engine as _;
use privsvc_devnet::{Devnet, DevnetConfig, DevnetHandle, DEV_PRIVATE_KEYS};
use privsvc_ledger::{LedgerReader, LedgerWriter, Operation, RpcLedger, RpcWriter};
use privsvc_tokens::issuer_key_create;
use privsvc_tokens::*;
use privsvc_vault::{LocalWallet, Wallet};
use serde_json::Value;

struct Env {
    devnet: DevnetHandle,
    reader: Arc<dyn LedgerReader>,
    writer: Arc<dyn LedgerWriter>,
}

fn secret(i: usize) -> [u8; 32] {
    let mut out = [0u8; 32];
    hex::decode_to_slice(&DEV_PRIVATE_KEYS[i][2..], &mut out).unwrap();
    out
}

async fn dev_writer(devnet: &DevnetHandle, i: usize) -> Arc<dyn LedgerWriter> {
    Arc::new(
        RpcWriter::connect(RpcLedger::new(devnet.url()).unwrap(), &secret(i))
            .await
            .unwrap(),
    )
}

async fn env() -> Env {
    let devnet = Devnet::start(DevnetConfig::on_demand()).await.unwrap();
    let reader: Arc<dyn LedgerReader> = Arc::new(RpcLedger::new(devnet.url()).unwrap());
    let writer = dev_writer(&devnet, 0).await;
    Env {
        devnet,
        reader,
        writer,
    }
}

fn today() -> u32 {
    epoch_of(now_ms())
}

/// An issuer on 127.0.0.1 with `config`; (issuer, base URL, server task).
async fn serve(
    env: &Env,
    config: IssuerConfig,
) -> (Arc<Issuer>, String, tokio::task::JoinHandle<()>) {
    let issuer = Arc::new(Issuer::open(config, env.writer.clone(), env.reader.clone()).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = issuer_router(issuer.clone());
    let task = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    (issuer, url, task)
}

async fn post_issue(url: &str, body: &IssueRequest) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{url}/v1/tokens/issue"))
        .json(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn get_key(url: &str, app: &str, epoch: u32) -> (u16, Value) {
    let r = reqwest::Client::new()
        .get(format!("{url}/v1/issuer/key"))
        .query(&[("app", app.to_string()), ("epoch", epoch.to_string())])
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// A signed v2 issue request of `wallet` for `app` and `epoch` at `ts`, to `issuer` on
/// `chain`; `blinded` are raw blinded values (random ones when no key exists yet).
async fn signed(
    issuer: Address,
    chain: u64,
    wallet: &LocalWallet,
    app: &str,
    epoch: u32,
    ts: u64,
    blinded: &[Vec<u8>],
) -> IssueRequest {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut req = IssueRequest {
        issuer,
        chain_id: chain,
        app: app.into(),
        epoch,
        wallet: wallet.address(),
        blinded: blinded.iter().map(|b| b64.encode(b)).collect(),
        ts,
        wallet_signature: String::new(),
        attestation: None,
    };
    let text = issuance_message(&req, ts).unwrap();
    let sig = wallet.personal_sign(text.as_bytes()).await.unwrap();
    req.wallet_signature = format!("0x{}", hex::encode(sig.as_bytes()));
    req
}

/// A random value below any 2048-bit modulus (what a client sends before a key exists).
/// A signed request for one token of (`app`, `epoch`), blinded under the key `issuer` published
/// for them on the ledger, posted to `url`: the status and body.
#[allow(clippy::too_many_arguments)]
async fn issue_one(
    env: &Env,
    url: &str,
    issuer: Address,
    chain: u64,
    wallet: &LocalWallet,
    app: &str,
    epoch: u32,
    ts: u64,
) -> (u16, serde_json::Value) {
    let key = fetch_issuer_key(env.reader.as_ref(), issuer, app, epoch)
        .await
        .unwrap();
    let msg = token_message(app, epoch, &rand::random::<[u8; 32]>()).unwrap();
    let blinded = token_suite().blind(&key, &msg).unwrap();
    let blinded = [blinded.blinded_message().to_vec()];
    let req = signed(issuer, chain, wallet, app, epoch, ts, &blinded).await;
    post_issue(url, &req).await
}

fn placeholder() -> Vec<u8> {
    let mut v: Vec<u8> = (0..MODULUS_BYTES).map(|_| rand::random()).collect();
    v[0] = 0;
    v
}

/// How many issuer-key entities `creator` has on the ledger (any app, any epoch).
async fn key_entities(env: &Env, creator: Address) -> usize {
    let mut options = privsvc_ledger::QueryOptions::new(privsvc_ledger::Select::default());
    options.limit = Some(200);
    let page = env
        .reader
        .query(
            &privsvc_ledger::Expr::And(vec![
                privsvc_ledger::Expr::eq(
                    "privsvc_kind",
                    privsvc_ledger::ArkivValue::Str("issuer-key".into()),
                )
                .unwrap(),
                privsvc_ledger::Expr::creator_is(creator),
            ])
            .to_string(),
            &options,
        )
        .await
        .unwrap();
    page.entities.len()
}

#[tokio::test]
async fn new_apps_are_capped_per_day_and_the_count_survives_a_restart() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let chain = env.devnet.chain_id();
    let mut config = IssuerConfig::new(dir.path(), chain);
    config.max_new_apps = 2;
    config.apps = vec!["configured".into()];
    let (issuer, url, server) = serve(&env, config.clone()).await;
    let me = issuer.address();
    let e = today();

    // An anonymous caller asking for keys of invented apps gets 404 and costs nothing.
    let rpc = RpcLedger::new(env.devnet.url()).unwrap();
    let nonce = rpc.transaction_count(me, true).await.unwrap();
    for i in 0..30 {
        let (s, b) = get_key(&url, &format!("invented-{i}"), e).await;
        assert_eq!(s, 404, "{b}");
        assert!(b["error"].as_str().unwrap().contains("no key"), "{b}");
    }
    assert_eq!(rpc.transaction_count(me, true).await.unwrap(), nonce);
    assert_eq!(key_entities(&env, me).await, 0);

    // An unsigned (badly signed) request for a new app creates nothing either.
    let w = LocalWallet::random();
    let mut bad = signed(me, chain, &w, "app-x", e, now_ms(), &[placeholder()]).await;
    bad.wallet_signature = "0x00".into();
    let (s, b) = post_issue(&url, &bad).await;
    assert_eq!(s, 403, "{b}");
    assert_eq!(key_entities(&env, me).await, 0);

    // Two new apps from signed requests: 409, each key published once.
    for app in ["app-a", "app-b"] {
        let req = signed(me, chain, &w, app, e, now_ms(), &[placeholder()]).await;
        let (s, b) = post_issue(&url, &req).await;
        assert_eq!(s, 409, "{b}");
        assert!(b["error"].as_str().unwrap().contains("created"), "{b}");
        fetch_issuer_key(env.reader.as_ref(), me, app, e)
            .await
            .unwrap();
    }
    // Asking again for app-a (another wallet) is not a new app: its key exists, tokens flow.
    let other = LocalWallet::random();
    let (s, b) = issue_one(&env, &url, me, chain, &other, "app-a", e, now_ms()).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(issuer.new_apps_today().unwrap(), 2);

    // A third new app is refused with the reason, and nothing is written.
    let before = key_entities(&env, me).await;
    assert_eq!(before, 2, "the query sees the issuer's keys");
    let req = signed(me, chain, &w, "app-c", e, now_ms(), &[placeholder()]).await;
    let (s, b) = post_issue(&url, &req).await;
    assert_eq!(s, 403, "{b}");
    assert!(
        b["error"].as_str().unwrap().contains("at most 2 new apps"),
        "{b}"
    );
    assert_eq!(key_entities(&env, me).await, before);

    // The count is durable: after a restart the cap still holds.
    server.abort();
    let _ = server.await;
    drop(issuer);
    let (issuer, url, _server) = serve(&env, config).await;
    let req = signed(me, chain, &w, "app-d", e, now_ms(), &[placeholder()]).await;
    let (s, b) = post_issue(&url, &req).await;
    assert_eq!(s, 403, "{b}");
    assert!(b["error"].as_str().unwrap().contains("new apps"), "{b}");
    // A configured app is not a new app: its key is created whatever the count.
    let req = signed(me, chain, &w, "configured", e, now_ms(), &[placeholder()]).await;
    let (s, b) = post_issue(&url, &req).await;
    assert_eq!(s, 409, "{b}");
    assert_eq!(issuer.new_apps_today().unwrap(), 2);
    env.devnet.shutdown().await;
}

#[tokio::test]
async fn the_schedule_publishes_next_day_keys_at_its_moment_and_lapsed_apps_wait() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let chain = env.devnet.chain_id();
    let e = today();
    let day_start = u64::from(e) * DAY_MS;
    // The injected clock starts yesterday afternoon.
    let clock = Arc::new(AtomicU64::new(day_start - DAY_MS / 3));
    let mut config = IssuerConfig::new(dir.path(), chain);
    config.apps = vec!["configured".into()];
    let c = clock.clone();
    config.clock = Arc::new(move || c.load(Ordering::SeqCst));
    let (issuer, url, _server) = serve(&env, config).await;
    let me = issuer.address();
    let w = LocalWallet::random();

    // Yesterday: an app is created (and then never issued tokens).
    let t = clock.load(Ordering::SeqCst);
    let req = signed(me, chain, &w, "lapsing", e - 1, t, &[placeholder()]).await;
    assert_eq!(post_issue(&url, &req).await.0, 409);

    // Today, early: the schedule runs (every 20 ms); today's key of the configured app appears,
    // tomorrow's does not (the moment is in the second half of the day).
    clock.store(day_start + 3_600_000, Ordering::SeqCst);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(
        issuer
            .clone()
            .run_key_schedule(Duration::from_millis(20), stop_rx),
    );
    wait_key(&env, me, "configured", e).await;
    // An app created today and issued tokens, and one created today and left idle.
    let t = clock.load(Ordering::SeqCst);
    for app in ["active", "idle"] {
        let req = signed(me, chain, &w, app, e, t, &[placeholder()]).await;
        assert_eq!(post_issue(&url, &req).await.0, 409);
    }
    assert_eq!(
        issue_one(&env, &url, me, chain, &w, "active", e, t).await.0,
        200
    );
    // The lapsed app (a key yesterday, none today) cannot get a key today: relayers would
    // refuse a key created after the day began for an established app.
    let req = signed(me, chain, &w, "lapsing", e, t, &[placeholder()]).await;
    let (s, b) = post_issue(&url, &req).await;
    assert_eq!(s, 403, "{b}");
    assert!(b["error"].as_str().unwrap().contains("tomorrow"), "{b}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    for app in ["configured", "active", "idle"] {
        assert_eq!(get_key(&url, app, e + 1).await.0, 404, "{app}");
    }

    // Just before midnight every moment has passed: tomorrow's keys of the configured and the
    // active app are published, not the idle one's.
    clock.store(day_start + DAY_MS - 1, Ordering::SeqCst);
    for app in ["configured", "active"] {
        wait_key(&env, me, app, e + 1).await;
        assert_eq!(get_key(&url, app, e + 1).await.0, 200, "{app}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(get_key(&url, "idle", e + 1).await.0, 404);
    let _ = stop_tx.send(true);
    task.await.unwrap();

    // A next-day key published the day before passes the acceptance rules on its day even
    // though the app is established.
    let pins = MemoryKeyPins::default();
    accept_issuer_key(env.reader.as_ref(), &pins, me, "active", e + 1)
        .await
        .unwrap();
    env.devnet.shutdown().await;
}

#[tokio::test]
async fn an_app_first_issued_tokens_in_the_days_last_moments_gets_its_next_day_key_before_midnight()
{
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let chain = env.devnet.chain_id();
    let e = today();
    let day_start = u64::from(e) * DAY_MS;
    // A minute before midnight: the day's moment (at least 15 minutes before its end) passed.
    let clock = Arc::new(AtomicU64::new(day_start + DAY_MS - 60_000));
    let mut config = IssuerConfig::new(dir.path(), chain);
    let c = clock.clone();
    config.clock = Arc::new(move || c.load(Ordering::SeqCst));
    let (issuer, url, _server) = serve(&env, config).await;
    let me = issuer.address();
    // The schedule's next step is an hour away: only the issuance can make it run sooner.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(
        issuer
            .clone()
            .run_key_schedule(Duration::from_secs(3600), stop_rx),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;

    // A new app: its key for today, then its first tokens.
    let w = LocalWallet::random();
    let t = clock.load(Ordering::SeqCst);
    let req = signed(me, chain, &w, "late", e, t, &[placeholder()]).await;
    assert_eq!(post_issue(&url, &req).await.0, 409);
    assert_eq!(
        issue_one(&env, &url, me, chain, &w, "late", e, t).await.0,
        200
    );
    // Tomorrow's key is published now, before the day ends, not an hour later.
    wait_key(&env, me, "late", e + 1).await;
    let _ = stop_tx.send(true);
    task.await.unwrap();

    // After midnight the app is not lapsed: its tokens flow, and its key passes the rules.
    clock.store(day_start + DAY_MS + 30_000, Ordering::SeqCst);
    let t = clock.load(Ordering::SeqCst);
    let (s, b) = issue_one(&env, &url, me, chain, &w, "late", e + 1, t).await;
    assert_eq!(s, 200, "{b}");
    accept_issuer_key(
        env.reader.as_ref(),
        &MemoryKeyPins::default(),
        me,
        "late",
        e + 1,
    )
    .await
    .unwrap();
    env.devnet.shutdown().await;
}

async fn wait_key(env: &Env, issuer: Address, app: &str, epoch: u32) {
    for _ in 0..200 {
        if fetch_issuer_key(env.reader.as_ref(), issuer, app, epoch)
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no key for {app} epoch {epoch} within 10 s");
}

/// Publish `spki` as the key of (`app`, `epoch`) from `writer`; returns the entity key.
async fn publish(writer: &dyn LedgerWriter, app: &str, epoch: u32, spki: &[u8]) -> B256 {
    let r = writer
        .execute(&[issuer_key_create(app, epoch, spki, rand::random()).unwrap()])
        .await
        .unwrap();
    assert!(r.success);
    r.created[0].key
}

fn fresh_key() -> IssuerKey {
    IssuerKey::from_secret(&token_suite().generate_key().unwrap()).unwrap()
}

#[tokio::test]
async fn acceptance_refuses_late_keys_of_established_apps_and_swapped_keys() {
    let env = env().await;
    let issuer = dev_writer(&env.devnet, 1).await;
    let me = issuer.address();
    let e = today();
    let dir = tempfile::tempdir().unwrap();
    let pins_path = dir.path().join("pins").join("pins.sqlite");
    let pins = SqliteKeyPins::open(&pins_path, e).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&pins_path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // A new app (no key yesterday): today's key, created today, is accepted and pinned.
    let k1 = fresh_key();
    let entity = publish(issuer.as_ref(), "fresh", e, k1.spki()).await;
    let got = accept_issuer_key(env.reader.as_ref(), &pins, me, "fresh", e)
        .await
        .unwrap();
    assert_eq!(got, k1);

    // An established app (a key yesterday): today's key created today is refused.
    publish(issuer.as_ref(), "established", e - 1, fresh_key().spki()).await;
    publish(issuer.as_ref(), "established", e, fresh_key().spki()).await;
    let err = accept_issuer_key(env.reader.as_ref(), &pins, me, "established", e)
        .await
        .unwrap_err();
    assert!(matches!(err, TokenError::KeyTooLate { .. }), "{err}");

    // The issuer deletes the pinned key and publishes another: equivocation, also for a pin
    // store reopened from its file (a restart).
    let r = issuer
        .execute(&[Operation::Delete { key: entity }])
        .await
        .unwrap();
    assert!(r.success);
    let k2 = fresh_key();
    publish(issuer.as_ref(), "fresh", e, k2.spki()).await;
    assert_eq!(
        fetch_issuer_key(env.reader.as_ref(), me, "fresh", e)
            .await
            .unwrap(),
        k2,
        "the ledger alone shows one key: only the pin reveals the swap"
    );
    let err = accept_issuer_key(env.reader.as_ref(), &pins, me, "fresh", e)
        .await
        .unwrap_err();
    assert!(
        matches!(err, TokenError::IssuerEquivocation { pinned: true, .. }),
        "{err}"
    );
    // The message says which key is whose, and names the harmless cause (a reset ledger) with
    // what to do about it.
    let message = err.to_string();
    assert!(
        message.contains("not the key pinned") && message.contains("data directory"),
        "{message}"
    );
    drop(pins);
    let reopened = SqliteKeyPins::open(&pins_path, e).unwrap();
    let err = accept_issuer_key(env.reader.as_ref(), &reopened, me, "fresh", e)
        .await
        .unwrap_err();
    assert!(
        matches!(err, TokenError::IssuerEquivocation { .. }),
        "{err}"
    );

    // Deleting yesterday's key does not make a late key acceptable to whoever pinned it.
    let k_old = fresh_key();
    let old = publish(issuer.as_ref(), "hiding", e - 1, k_old.spki()).await;
    accept_issuer_key(env.reader.as_ref(), &reopened, me, "hiding", e - 1)
        .await
        .unwrap();
    assert!(
        issuer
            .execute(&[Operation::Delete { key: old }])
            .await
            .unwrap()
            .success
    );
    publish(issuer.as_ref(), "hiding", e, fresh_key().spki()).await;
    let err = accept_issuer_key(env.reader.as_ref(), &reopened, me, "hiding", e)
        .await
        .unwrap_err();
    assert!(matches!(err, TokenError::KeyTooLate { .. }), "{err}");
    env.devnet.shutdown().await;
}

/// POST `req` and return the status and the raw body bytes.
async fn post_issue_raw(url: &str, req: &IssueRequest) -> (u16, Vec<u8>) {
    let r = reqwest::Client::new()
        .post(format!("{url}/v1/tokens/issue"))
        .json(req)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

/// `n` token messages of `app` blinded under `key`: (message, blinding state).
fn blinded_tokens(key: &IssuerKey, app: &str, epoch: u32, n: usize) -> Vec<(Vec<u8>, Blinded)> {
    (0..n)
        .map(|_| {
            let msg = token_message(app, epoch, &rand::random()).unwrap();
            let b = token_suite().blind(key, &msg).unwrap();
            (msg, b)
        })
        .collect()
}

fn raw_blinded(tokens: &[(Vec<u8>, Blinded)]) -> Vec<Vec<u8>> {
    tokens
        .iter()
        .map(|(_, b)| b.blinded_message().to_vec())
        .collect()
}

/// A party that holds a copy of a signed issue request (the OHTTP relay replaying the
/// encapsulated bytes, or anyone on the issuer's side of it) sends it again and again, at once
/// and after a restart of the issuer: every copy gets the first answer byte for byte (the same
/// blind signatures, the same `remaining`), and the wallet's quota is charged once.
#[tokio::test]
async fn a_replayed_issue_request_gets_its_first_answer_and_costs_no_quota() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let chain = env.devnet.chain_id();
    let app = "replayed";
    let mut config = IssuerConfig::new(dir.path(), chain);
    config.apps = vec![app.into()];
    config.quota_per_wallet = 6;
    let (issuer, url, server) = serve(&env, config.clone()).await;
    assert_eq!(issuer.publish_due_keys().await, 0);
    let me = issuer.address();
    let e = today();
    let key = fetch_issuer_key(env.reader.as_ref(), me, app, e)
        .await
        .unwrap();
    let w = LocalWallet::random();
    let tokens = blinded_tokens(&key, app, e, 3);
    let req = signed(me, chain, &w, app, e, now_ms(), &raw_blinded(&tokens)).await;

    let (status, first) = post_issue_raw(&url, &req).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&first));
    let answer: IssueResponse = serde_json::from_slice(&first).unwrap();
    assert_eq!(answer.remaining, 3);
    // The tokens are real.
    let b64 = base64::engine::general_purpose::STANDARD;
    for ((msg, blinded), bs) in tokens.iter().zip(&answer.blind_signatures) {
        let sig = token_suite()
            .finalize(&key, &b64.decode(bs).unwrap(), blinded, msg)
            .unwrap();
        let nonce: [u8; 32] = msg[msg.len() - 32..].try_into().unwrap();
        verify_token(&key, app, &TokenRedemption::new(e, &nonce, &sig)).unwrap();
    }

    // Twenty copies, ten of them at once.
    let mut copies = tokio::task::JoinSet::new();
    for _ in 0..10 {
        let (url, req) = (url.clone(), req.clone());
        copies.spawn(async move { post_issue_raw(&url, &req).await });
    }
    while let Some(copy) = copies.join_next().await {
        assert_eq!(copy.unwrap(), (200, first.clone()));
    }
    for _ in 0..10 {
        assert_eq!(post_issue_raw(&url, &req).await, (200, first.clone()));
    }

    // The answers are remembered durably: a restarted issuer gives the same one.
    server.abort();
    let _ = server.await;
    drop(issuer);
    let (_issuer, url, _server) = serve(&env, config).await;
    assert_eq!(post_issue_raw(&url, &req).await, (200, first.clone()));

    // The wallet was charged once: its three other tokens are still there, then no more.
    let more = blinded_tokens(&key, app, e, 3);
    let fresh = signed(me, chain, &w, app, e, now_ms(), &raw_blinded(&more)).await;
    let (status, body) = post_issue_raw(&url, &fresh).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let answer: IssueResponse = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer.remaining, 0);
    let one = blinded_tokens(&key, app, e, 1);
    let beyond = signed(me, chain, &w, app, e, now_ms(), &raw_blinded(&one)).await;
    assert_eq!(post_issue_raw(&url, &beyond).await.0, 403);
    // A copy of the first request still gets its answer, quota or not.
    assert_eq!(post_issue_raw(&url, &req).await, (200, first));
    env.devnet.shutdown().await;
}

/// The request that created a new app's key (409) replayed after the key exists is answered
/// 409 again: its placeholder values are not signed under the new key at the wallet's expense.
#[tokio::test]
async fn a_replayed_key_creating_request_is_not_signed_later() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let chain = env.devnet.chain_id();
    let mut config = IssuerConfig::new(dir.path(), chain);
    config.quota_per_wallet = 2;
    let (issuer, url, _server) = serve(&env, config).await;
    let me = issuer.address();
    let e = today();
    let w = LocalWallet::random();
    let first = signed(me, chain, &w, "brand-new", e, now_ms(), &[placeholder()]).await;
    let (status, created) = post_issue_raw(&url, &first).await;
    assert_eq!(status, 409, "{}", String::from_utf8_lossy(&created));
    let key = fetch_issuer_key(env.reader.as_ref(), me, "brand-new", e)
        .await
        .unwrap();
    for _ in 0..5 {
        assert_eq!(post_issue_raw(&url, &first).await, (409, created.clone()));
    }
    // The whole quota is left for the wallet's real request.
    let tokens = blinded_tokens(&key, "brand-new", e, 2);
    let real = signed(
        me,
        chain,
        &w,
        "brand-new",
        e,
        now_ms(),
        &raw_blinded(&tokens),
    )
    .await;
    let (status, body) = post_issue_raw(&url, &real).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        serde_json::from_slice::<IssueResponse>(&body)
            .unwrap()
            .remaining,
        0
    );
    env.devnet.shutdown().await;
}

/// Twenty new apps a day, each kept alive by one request a day, would make the issuer publish
/// ever more next-day keys. At most `max_active_apps` apps outside the configured ones get
/// one: the most used (most wallets, then most tokens).
#[tokio::test]
async fn next_day_keys_go_to_at_most_max_active_apps_besides_the_configured_ones() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let chain = env.devnet.chain_id();
    let e = today();
    let day_start = u64::from(e) * DAY_MS;
    // Just before midnight: the day's moment for next-day keys has passed, whatever it is.
    let clock = Arc::new(AtomicU64::new(day_start + DAY_MS - 10 * 60_000));
    let mut config = IssuerConfig::new(dir.path(), chain);
    config.apps = vec!["configured".into()];
    config.max_active_apps = 2;
    let c = clock.clone();
    config.clock = Arc::new(move || c.load(Ordering::SeqCst));
    let (issuer, url, _server) = serve(&env, config).await;
    let me = issuer.address();
    let t = clock.load(Ordering::SeqCst);

    // Four new apps, issued tokens by 3, 2, 1 and 1 wallets (the configured app by one).
    let wallets: Vec<LocalWallet> = (0..3).map(|_| LocalWallet::random()).collect();
    for (app, users) in [
        ("app-a", 3),
        ("app-b", 2),
        ("app-c", 1),
        ("app-d", 1),
        ("configured", 1),
    ] {
        let req = signed(me, chain, &wallets[0], app, e, t, &[placeholder()]).await;
        assert_eq!(post_issue(&url, &req).await.0, 409, "{app}");
        let key = fetch_issuer_key(env.reader.as_ref(), me, app, e)
            .await
            .unwrap();
        for w in &wallets[..users] {
            let tokens = blinded_tokens(&key, app, e, 1);
            let req = signed(me, chain, w, app, e, t, &raw_blinded(&tokens)).await;
            let (s, b) = post_issue(&url, &req).await;
            assert_eq!(s, 200, "{app}: {b}");
        }
    }
    assert_eq!(issuer.publish_due_keys().await, 0);
    for (app, expected) in [
        ("configured", true),
        ("app-a", true),
        ("app-b", true),
        ("app-c", false),
        ("app-d", false),
    ] {
        assert_eq!(
            issuer.public_key(app, e + 1).await.unwrap().is_some(),
            expected,
            "{app}"
        );
        let status = get_key(&url, app, e + 1).await.0;
        assert_eq!(status, if expected { 200 } else { 404 }, "{app}");
    }
    env.devnet.shutdown().await;
}
