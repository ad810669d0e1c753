//! The issuer over real HTTP on loopback with the devnet as its ledger: key publication, the
//! full issue-redeem-verify cycle, every 403, quota, restarts, equivocation, and the client
//! token wallet.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::Address;
use base64::Engine as _;
use privsvc_devnet::{Devnet, DevnetConfig, DevnetHandle, DEV_PRIVATE_KEYS};
use privsvc_ledger::{LedgerReader, LedgerWriter, RpcLedger, RpcWriter};
use privsvc_tokens::issuer_key_create;
use privsvc_tokens::*;
use privsvc_vault::{LocalWallet, Wallet};
use serde_json::Value;

const APP: &str = "tokens-test";

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

async fn env() -> Env {
    let devnet = Devnet::start(DevnetConfig::on_demand()).await.unwrap();
    let reader: Arc<dyn LedgerReader> = Arc::new(RpcLedger::new(devnet.url()).unwrap());
    let writer: Arc<dyn LedgerWriter> = Arc::new(
        RpcWriter::connect(RpcLedger::new(devnet.url()).unwrap(), &secret(0))
            .await
            .unwrap(),
    );
    Env {
        devnet,
        reader,
        writer,
    }
}

/// An issuer served on 127.0.0.1:<ephemeral>; returns its base URL and the server task.
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

fn today() -> u32 {
    epoch_of(now_ms())
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

async fn post_issue(url: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{url}/v1/tokens/issue"))
        .json(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// `n` blinded messages for `key` (with their nonces, messages and secrets).
fn blind_n(key: &IssuerKey, epoch: u32, n: usize) -> Vec<([u8; 32], Vec<u8>, Blinded)> {
    (0..n)
        .map(|_| {
            let nonce: [u8; 32] = rand::random();
            let msg = token_message(APP, epoch, &nonce).unwrap();
            let b = token_suite().blind(key, &msg).unwrap();
            (nonce, msg, b)
        })
        .collect()
}

/// The issuer settings of these tests: data in `dir`, the devnet's chain, [`APP`] configured
/// (`ISSUER_APPS`), so its key exists once [`Issuer::publish_due_keys`] ran.
fn config(env: &Env, dir: &std::path::Path) -> IssuerConfig {
    let mut c = IssuerConfig::new(dir, env.devnet.chain_id());
    c.apps = vec![APP.into()];
    c
}

/// Who a request is for: (issuer address, chain id).
type Target = (Address, u64);

fn target(env: &Env, issuer: &Issuer) -> Target {
    (issuer.address(), env.devnet.chain_id())
}

/// A signed issue request body.
async fn request(
    to: &Target,
    wallet: &LocalWallet,
    epoch: u32,
    blinded: &[&Blinded],
    ts: u64,
    attestation: Option<&str>,
) -> IssueRequest {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut req = IssueRequest {
        issuer: to.0,
        chain_id: to.1,
        app: APP.into(),
        epoch,
        wallet: wallet.address(),
        blinded: blinded
            .iter()
            .map(|b| b64.encode(b.blinded_message()))
            .collect(),
        ts,
        wallet_signature: String::new(),
        attestation: attestation.map(str::to_string),
    };
    let text = issuance_message(&req, ts).unwrap();
    let sig = wallet.personal_sign(text.as_bytes()).await.unwrap();
    req.wallet_signature = format!("0x{}", hex::encode(sig.as_bytes()));
    req
}

fn json(req: &IssueRequest) -> Value {
    serde_json::to_value(req).unwrap()
}

fn assert_refused(status: u16, body: &Value, needle: &str) {
    assert_eq!(status, 403, "{body}");
    let obj = body.as_object().unwrap();
    assert_eq!(obj.len(), 1, "{body}");
    let msg = obj["error"].as_str().unwrap();
    assert!(msg.contains(needle), "{msg:?} does not mention {needle:?}");
}

/// Publish the configured app's key (one schedule step) and read it back from the ledger.
async fn ledger_key(env: &Env, url: &str, issuer: &Issuer) -> IssuerKey {
    assert_eq!(issuer.publish_due_keys().await, 0);
    let (status, body) = get_key(url, APP, today()).await;
    assert_eq!(status, 200, "{body}");
    fetch_today(env, issuer.address()).await.unwrap()
}

/// The key `issuer` published on the ledger for `APP` today, as readers see it.
async fn fetch_today(env: &Env, issuer: Address) -> Result<IssuerKey, TokenError> {
    fetch_issuer_key(env.reader.as_ref(), issuer, APP, today()).await
}

/// Writes an issuer-key entity for `APP` today with `spki` as `writer`; the write must succeed.
async fn write_key_entity(writer: &dyn LedgerWriter, spki: &[u8], salt: u128) {
    let r = writer
        .execute(&[issuer_key_create(APP, today(), spki, salt).unwrap()])
        .await
        .unwrap();
    assert!(r.success);
}

fn wallet_options(
    env: &Env,
    issuer: Address,
    url: &str,
    wallet: LocalWallet,
) -> TokenWalletOptions {
    TokenWalletOptions::new(Arc::new(wallet), env.reader.clone(), issuer, url)
}

#[tokio::test]
async fn full_issue_redeem_verify_cycle() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let (issuer, url, _server) = serve(&env, config(&env, dir.path())).await;

    let mut opts = wallet_options(&env, issuer.address(), &url, LocalWallet::random());
    opts.min_age_ms = 0;
    let wallet = TokenWallet::new(opts);
    let got = wallet.acquire(APP, 25, None).await.unwrap();
    assert_eq!(
        got,
        Acquired {
            count: 25,
            remaining: DEFAULT_QUOTA_FOR_TEST - 25
        }
    );
    assert_eq!(wallet.available(APP).unwrap(), 25);

    // The key the relayer uses comes from the ledger, created by the issuer.
    let key = fetch_today(&env, issuer.address()).await.unwrap();
    assert_eq!(
        Some(key.clone()),
        issuer.public_key(APP, today()).await.unwrap()
    );

    let source = wallet.source();
    let mut ids = std::collections::HashSet::new();
    while let Some(token) = source.take(APP, now_ms() + 1).await.unwrap() {
        assert_eq!(token.epoch, today());
        let id = verify_token(&key, APP, &token).unwrap();
        assert!(ids.insert(id), "token handed out twice");
        // Round trip through JSON as a relayer receives it.
        let wire: TokenRedemption =
            serde_json::from_str(&serde_json::to_string(&token).unwrap()).unwrap();
        assert_eq!(verify_token(&key, APP, &wire).unwrap(), id);
        assert!(verify_token(&key, "another-app", &wire).is_err());
    }
    assert_eq!(ids.len(), 25);
    assert_eq!(wallet.available(APP).unwrap(), 0);
    env.devnet.shutdown().await;
}

const DEFAULT_QUOTA_FOR_TEST: u32 = privsvc_tokens::DEFAULT_QUOTA;

#[tokio::test]
async fn key_endpoint_never_creates_a_key_and_checks_the_epoch() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let (issuer, url, _server) = serve(&env, config(&env, dir.path())).await;
    let block = env.reader.block_number().await.unwrap();

    let (status, body) = get_key(&url, APP, today() - 1).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("not today"));
    let r = reqwest::get(format!("{url}/v1/issuer/key?app={APP}"))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // Before the schedule ran: 404 for today and tomorrow, even for the configured app, and
    // nothing was written.
    for epoch in [today(), today() + 1] {
        let (status, body) = get_key(&url, APP, epoch).await;
        assert_eq!(status, 404, "{body}");
        assert!(body["error"].as_str().unwrap().contains("no key"), "{body}");
    }
    assert_eq!(env.reader.block_number().await.unwrap(), block);
    assert_eq!(issuer.public_key(APP, today()).await.unwrap(), None);

    assert_eq!(issuer.publish_due_keys().await, 0);
    let (status, first) = get_key(&url, APP, today()).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        first["issuer"].as_str().unwrap().to_lowercase(),
        issuer.address().to_string().to_lowercase()
    );
    assert_eq!(first["app"], APP);
    assert_eq!(first["epoch"], today());
    let block = env.reader.block_number().await.unwrap();
    let (_, second) = get_key(&url, APP, today()).await;
    assert_eq!(first["entityKey"], second["entityKey"]);
    // A second schedule step publishes nothing new for today.
    assert_eq!(issuer.publish_due_keys().await, 0);
    let (_, third) = get_key(&url, APP, today()).await;
    assert_eq!(first["entityKey"], third["entityKey"]);
    let published_today = env.reader.block_number().await.unwrap() - block;
    assert!(published_today <= 1, "{published_today} key transactions");

    // The entity holds the issuer's SPKI.
    let key: alloy_primitives::B256 = first["entityKey"].as_str().unwrap().parse().unwrap();
    let entity = env.reader.entity(key, None).await.unwrap().unwrap();
    assert_eq!(entity.creator, Some(issuer.address()));
    let published = import_issuer_key(entity.payload.as_deref().unwrap()).unwrap();
    assert_eq!(
        Some(published),
        issuer.public_key(APP, today()).await.unwrap()
    );
    env.devnet.shutdown().await;
}

#[tokio::test]
async fn every_refusal_is_a_403_with_a_reason() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(&env, dir.path());
    config.quota_per_wallet = 5;
    config.attestation_codes = Some(vec![
        "code-one".into(),
        "code-two".into(),
        "code-three".into(),
    ]);
    let (issuer, url, _server) = serve(&env, config).await;
    let key = ledger_key(&env, &url, &issuer).await;
    let to = target(&env, &issuer);
    let alice = LocalWallet::random();
    let mallory = LocalWallet::random();
    let now = now_ms();
    let e = today();
    let three = blind_n(&key, e, 3);
    let three_refs: Vec<&Blinded> = three.iter().map(|x| &x.2).collect();

    // Properly signed, but for another issuer or another chain: refused by name.
    let elsewhere = (Address::repeat_byte(0x11), to.1);
    let req = request(&elsewhere, &alice, e, &three_refs, now, Some("code-one")).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "for issuer");
    let other_chain = (to.0, to.1 + 1);
    let req = request(&other_chain, &alice, e, &three_refs, now, Some("code-one")).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "for chain");
    // Fields rewritten to this issuer without a new signature: the signature fails.
    let mut req = request(&elsewhere, &alice, e, &three_refs, now, Some("code-one")).await;
    req.issuer = to.0;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "walletSignature");

    // Epoch not today.
    let req = request(&to, &alice, e - 1, &three_refs, now, Some("code-one")).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "epoch");

    // Zero and 21 blinded values.
    let req = request(&to, &alice, e, &[], now, Some("code-one")).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "between 1 and 20");
    let many = blind_n(&key, e, 21);
    let many_refs: Vec<&Blinded> = many.iter().map(|x| &x.2).collect();
    let req = request(&to, &alice, e, &many_refs, now, Some("code-one")).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "between 1 and 20");

    // ts more than 5 minutes off, either way.
    for ts in [now - 301_000, now + 301_000] {
        let req = request(&to, &alice, e, &three_refs, ts, Some("code-one")).await;
        let (s, b) = post_issue(&url, &json(&req)).await;
        assert_refused(s, &b, "5 minutes");
    }

    // Signature by another wallet, garbage signature, signature over other blinded values.
    let mut req = request(&to, &mallory, e, &three_refs, now, Some("code-one")).await;
    req.wallet = alice.address();
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "walletSignature");
    let mut req = request(&to, &alice, e, &three_refs, now, Some("code-one")).await;
    req.wallet_signature = "0x1234".into();
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "walletSignature");
    let mut req = request(&to, &alice, e, &three_refs, now, Some("code-one")).await;
    req.blinded.swap(0, 1);
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "walletSignature");

    // Attestation code missing, unknown, then used once and refused on reuse.
    let req = request(&to, &alice, e, &three_refs, now, None).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "attestation code missing");
    let req = request(&to, &alice, e, &three_refs, now, Some("code-nine")).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "attestation code");
    let req = request(&to, &alice, e, &three_refs, now, Some("code-one")).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["remaining"], 2);
    let sigs = b["blindSignatures"].as_array().unwrap();
    assert_eq!(sigs.len(), 3);
    let b64 = base64::engine::general_purpose::STANDARD;
    for ((nonce, msg, blinded), bs) in three.iter().zip(sigs) {
        let bs = b64.decode(bs.as_str().unwrap()).unwrap();
        let sig = token_suite().finalize(&key, &bs, blinded, msg).unwrap();
        verify_token(&key, APP, &TokenRedemption::new(e, nonce, &sig)).unwrap();
    }
    let again = blind_n(&key, e, 1);
    let req = request(&to, &alice, e, &[&again[0].2], now, Some("code-one")).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "already used");

    // Quota: 2 left; 3 more is refused (and does not burn the code), 2 is fine, then nothing.
    let req = request(&to, &alice, e, &three_refs, now_ms(), Some("code-two")).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "quota exceeded");
    let two: Vec<&Blinded> = three_refs[..2].to_vec();
    let req = request(&to, &alice, e, &two, now_ms(), Some("code-two")).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["remaining"], 0);
    let req = request(&to, &alice, e, &[&again[0].2], now_ms(), Some("code-three")).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_refused(s, &b, "quota exceeded");
    // Another wallet has its own quota.
    let req = request(
        &to,
        &mallory,
        e,
        &[&again[0].2],
        now_ms(),
        Some("code-three"),
    )
    .await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["remaining"], 4);

    // Malformed requests are 400 with the same body shape.
    let mut bad = json(&request(&to, &alice, e, &[&again[0].2], now_ms(), None).await);
    bad["blinded"] = serde_json::json!(["%%%"]);
    let (s, b) = post_issue(&url, &bad).await;
    assert_eq!(s, 400, "{b}");
    assert!(b["error"].is_string());
    let (s, b) = post_issue(&url, &serde_json::json!({"app": APP})).await;
    assert_eq!(s, 400, "{b}");
    assert!(b["error"].is_string());
    env.devnet.shutdown().await;
}

#[tokio::test]
async fn wallet_reports_quota_exhaustion() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(&env, dir.path());
    config.quota_per_wallet = 30;
    let (issuer, url, _server) = serve(&env, config).await;
    let wallet = TokenWallet::new(wallet_options(
        &env,
        issuer.address(),
        &url,
        LocalWallet::random(),
    ));
    assert_eq!(
        wallet.acquire(APP, 22, None).await.unwrap(),
        Acquired {
            count: 22,
            remaining: 8
        }
    );
    let err = wallet.acquire(APP, 9, None).await.unwrap_err();
    assert!(
        matches!(&err, TokenError::Refused { status: 403, reason: m, .. } if m.contains("quota exceeded")),
        "{err}"
    );
    assert_eq!(
        wallet.acquire(APP, 8, None).await.unwrap(),
        Acquired {
            count: 8,
            remaining: 0
        }
    );
    assert_eq!(wallet.available(APP).unwrap(), 30);
    // Fresh tokens are younger than the default minimum age of 60 s: nothing to spend yet.
    let source = StoreTokenSource::new(wallet.options().store.clone(), DEFAULT_MIN_AGE_MS);
    assert_eq!(source.take(APP, now_ms() + 1).await.unwrap(), None);

    // A blinded value not below the modulus, properly signed for: 400, nothing counted.
    let to = target(&env, &issuer);
    let other = LocalWallet::random();
    let key = fetch_today(&env, issuer.address()).await.unwrap();
    let one = blind_n(&key, today(), 1);
    let mut req = request(&to, &other, today(), &[&one[0].2], now_ms(), None).await;
    req.blinded = vec![base64::engine::general_purpose::STANDARD.encode([0xffu8; 256])];
    let text = issuance_message(&req, req.ts).unwrap();
    let sig = other.personal_sign(text.as_bytes()).await.unwrap();
    req.wallet_signature = format!("0x{}", hex::encode(sig.as_bytes()));
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_eq!(s, 400, "{b}");
    assert!(b["error"].as_str().unwrap().contains("modulus"), "{b}");
    let req = request(&to, &other, today(), &[&one[0].2], now_ms(), None).await;
    let (s, b) = post_issue(&url, &json(&req)).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["remaining"], 29);
    env.devnet.shutdown().await;
}

#[tokio::test]
async fn a_restarted_issuer_keeps_the_days_key_and_counters() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(&env, dir.path());
    config.quota_per_wallet = 10;
    // The same account before and after the restart.
    let user = LocalWallet::from_hex(DEV_PRIVATE_KEYS[2]).unwrap();
    let user_again = LocalWallet::from_hex(DEV_PRIVATE_KEYS[2]).unwrap();

    let (issuer, url, server) = serve(&env, config.clone()).await;
    let issuer_address = issuer.address();
    let wallet = TokenWallet::new(wallet_options(&env, issuer_address, &url, user));
    assert_eq!(wallet.acquire(APP, 4, None).await.unwrap().remaining, 6);
    let (_, first) = get_key(&url, APP, today()).await;
    let key_before = issuer.public_key(APP, today()).await.unwrap().unwrap();
    // In the second half of the UTC day tomorrow's key is due: publish it now, so that the
    // restarted issuer has nothing left to write (whenever the test runs).
    issuer.publish_due_keys().await;
    server.abort();
    let _ = server.await;
    drop(issuer);

    let (issuer, url, _server) = serve(&env, config).await;
    let block = env.reader.block_number().await.unwrap();
    let (status, second) = get_key(&url, APP, today()).await;
    assert_eq!(status, 200);
    assert_eq!(issuer.publish_due_keys().await, 0);
    assert_eq!(first["entityKey"], second["entityKey"]);
    assert_eq!(
        env.reader.block_number().await.unwrap(),
        block,
        "the key was published again"
    );
    assert_eq!(
        issuer.public_key(APP, today()).await.unwrap().unwrap(),
        key_before
    );

    let mut opts = wallet_options(&env, issuer_address, &url, user_again);
    opts.min_age_ms = 0;
    let wallet = TokenWallet::new(opts);
    assert_eq!(wallet.acquire(APP, 4, None).await.unwrap().remaining, 2);
    let ledger = fetch_today(&env, issuer_address).await.unwrap();
    let token = wallet
        .source()
        .take(APP, now_ms() + 1)
        .await
        .unwrap()
        .unwrap();
    verify_token(&ledger, APP, &token).unwrap();
    env.devnet.shutdown().await;
}

#[tokio::test]
async fn equivocation_is_detected_and_never_caused() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let (issuer, url, _server) = serve(&env, config(&env, dir.path())).await;
    let key = ledger_key(&env, &url, &issuer).await;

    // A key for the same (app, epoch) by someone else is not the issuer's: ignored.
    let other: Arc<dyn LedgerWriter> = Arc::new(
        RpcWriter::connect(RpcLedger::new(env.devnet.url()).unwrap(), &secret(1))
            .await
            .unwrap(),
    );
    let stranger_key = IssuerKey::from_secret(&token_suite().generate_key().unwrap()).unwrap();
    write_key_entity(other.as_ref(), stranger_key.spki(), 1).await;
    assert_eq!(fetch_today(&env, issuer.address()).await.unwrap(), key);

    // A second issuer's-own key with the same SPKI is the same key: no equivocation.
    write_key_entity(env.writer.as_ref(), key.spki(), 2).await;
    assert_eq!(fetch_today(&env, issuer.address()).await.unwrap(), key);

    // A distinct second key by the issuer: equivocation, for readers and for the wallet.
    write_key_entity(env.writer.as_ref(), stranger_key.spki(), 3).await;
    let err = fetch_today(&env, issuer.address()).await.unwrap_err();
    assert!(
        matches!(
            err,
            TokenError::IssuerEquivocation {
                keys: 2,
                pinned: false,
                ..
            }
        ),
        "{err}"
    );
    let wallet = TokenWallet::new(wallet_options(
        &env,
        issuer.address(),
        &url,
        LocalWallet::random(),
    ));
    let err = wallet.acquire(APP, 1, None).await.unwrap_err();
    assert!(
        matches!(err, TokenError::IssuerEquivocation { .. }),
        "{err}"
    );

    // No key at all for another app.
    let err = fetch_issuer_key(env.reader.as_ref(), issuer.address(), "nobody", today())
        .await
        .unwrap_err();
    assert!(matches!(err, TokenError::NoIssuerKey { .. }), "{err}");
    env.devnet.shutdown().await;
}

#[tokio::test]
async fn an_issuer_that_lost_its_state_refuses_to_publish_a_second_key() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let (issuer, url, _server) = serve(&env, config(&env, dir.path())).await;
    ledger_key(&env, &url, &issuer).await;

    let empty = tempfile::tempdir().unwrap();
    // The second issuer's schedule step runs on a clock in the first hour of today, before the
    // day's random moment for next-day keys (in its second half), so that only today's key is
    // due whatever the time of day; then its clock is the real one again (0 = real time) for
    // the issue request below.
    let clock = Arc::new(AtomicU64::new(u64::from(today()) * DAY_MS + 3_600_000));
    let mut config2 = config(&env, empty.path());
    let c = clock.clone();
    config2.clock = Arc::new(move || match c.load(Ordering::SeqCst) {
        0 => now_ms(),
        t => t,
    });
    let (issuer2, url2, _server2) = serve(&env, config2).await;
    // The schedule step fails for the one configured app; the key endpoint knows no key.
    assert_eq!(issuer2.publish_due_keys().await, 1);
    clock.store(0, Ordering::SeqCst);
    let (status, body) = get_key(&url2, APP, today()).await;
    assert_eq!(status, 404, "{body}");
    // A signed issue request finds the ledger's key, and the issuer refuses to make another.
    let wallet = TokenWallet::new(wallet_options(
        &env,
        issuer2.address(),
        &url2,
        LocalWallet::random(),
    ));
    let err = wallet.acquire(APP, 1, None).await.unwrap_err();
    assert!(
        matches!(&err, TokenError::Refused { status: 500, reason: m, .. } if m.contains("refusing")),
        "{err}"
    );
    // Still exactly one key on the ledger.
    fetch_today(&env, issuer.address()).await.unwrap();
    env.devnet.shutdown().await;
}

#[tokio::test]
async fn on_demand_prefetch_and_file_store() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let (issuer, url, _server) = serve(&env, config(&env, dir.path())).await;
    let store_path = dir.path().join("client").join("tokens.json");

    let mut opts = wallet_options(&env, issuer.address(), &url, LocalWallet::random());
    opts.store = Arc::new(FileTokenStore::open(&store_path).unwrap());
    opts.allow_on_demand = true;
    opts.min_age_ms = 1_500;
    {
        let wallet = TokenWallet::new(opts.clone());
        // Nothing stored: the on-demand source starts one issue request in the background (of
        // the usual count) and answers at once, with nothing: the write that caused the fetch
        // never spends its tokens, and a take never waits.
        let started = std::time::Instant::now();
        assert_eq!(wallet.source().take(APP, now_ms()).await.unwrap(), None);
        assert!(started.elapsed() < Duration::from_secs(1), "a take waited");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while wallet.available(APP).unwrap() < MAX_TOKENS_PER_REQUEST {
            assert!(std::time::Instant::now() < deadline, "the background fetch");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(wallet.available(APP).unwrap(), MAX_TOKENS_PER_REQUEST);
    }
    let fetched = now_ms();
    // A later session spends them once 1.5 s old (tokens of an earlier session ripen at the
    // minimum age); before that, nothing, at once.
    let wallet = TokenWallet::new(opts);
    let source = wallet.source();
    if now_ms() < fetched + 1_000 {
        assert_eq!(source.take(APP, now_ms()).await.unwrap(), None);
    }
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let token = source.take(APP, now_ms()).await.unwrap().unwrap();
    let key = fetch_today(&env, issuer.address()).await.unwrap();
    verify_token(&key, APP, &token).unwrap();
    // Empty the store, so that the prefetch below is all it holds.
    while wallet.available(APP).unwrap() > 0 {
        source.take(APP, now_ms()).await.unwrap().unwrap();
    }

    let handle = wallet.prefetch_later(APP, 3, Some(Duration::from_millis(50)));
    assert_eq!(handle.await.unwrap().unwrap().count, 3);
    assert_eq!(wallet.available(APP).unwrap(), 3);
    drop(source);
    drop(wallet);

    // The tokens are in the file: a new store sees them (as after a restart).
    let reopened = FileTokenStore::open(&store_path).unwrap();
    let stored = reopened.list(APP).unwrap();
    assert_eq!(stored.len(), 3);
    for t in stored {
        verify_token(&key, APP, &t.redemption()).unwrap();
    }
    env.devnet.shutdown().await;
}

#[tokio::test]
async fn an_app_with_a_line_break_is_refused_before_anything_else() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let (_issuer, url, _server) = serve(&env, config(&env, dir.path())).await;
    // A line break in `app` would put an extra line into the signed issuance message.
    let (status, body) = get_key(&url, "notes\nchain: 1", today()).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("control characters"),
        "{body}"
    );
}
