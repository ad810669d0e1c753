//! The issuer mounted on a real relayer (`ISSUER=on`) and the relayer's key checks, against an
//! adversary (docs/PROTOCOL.md §5.1, §5.2): the real devnet, real HTTP on 127.0.0.1, real RSA keys,
//! real SQLite.
//!
//! - an anonymous caller cannot make the issuer write (no key, no transaction) nor stall
//!   batches;
//! - a signed request for another issuer or chain is refused;
//! - the new-app cap holds, across a restart;
//! - an issuer that swaps its key for a pinned (app, epoch) is refused as equivocating, even
//!   after the relayer restarts;
//! - a key created after its day began is refused for an established app, accepted for a new
//!   one;
//! - the issuer routes answer 429 past the per-address limit.

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::{Address, B256};
use base64::Engine as _;
use privsvc_ledger::{LedgerWriter, Operation, RpcLedger};
use privsvc_relayer::TokenMode;
use privsvc_tokens::issuer_key_create;
use privsvc_tokens::{
    issuance_message, now_ms, token_suite, IssueRequest, IssuerKey, TokenError, TokenWallet,
    TokenWalletOptions,
};
use privsvc_vault::{LocalWallet, Wallet};
use serde_json::Value;

use crate::common::*;

const T: Duration = Duration::from_secs(30);

/// How many issuer-key entities `creator` has on the ledger.
async fn key_entities(node: &privsvc_devnet::DevnetHandle, creator: Address) -> usize {
    let expr = privsvc_ledger::Expr::And(vec![
        privsvc_ledger::Expr::eq(
            "privsvc_kind",
            privsvc_ledger::ArkivValue::Str("issuer-key".into()),
        )
        .unwrap(),
        privsvc_ledger::Expr::creator_is(creator),
    ]);
    let mut options = privsvc_ledger::QueryOptions::new(privsvc_ledger::Select::default());
    options.limit = Some(200);
    reader(node)
        .query(&expr.to_string(), &options)
        .await
        .unwrap()
        .entities
        .len()
}

/// Issuer-key entities created by `creator` for `app`, today's and tomorrow's.
async fn app_keys(node: &privsvc_devnet::DevnetHandle, creator: Address, app: &str) -> usize {
    let today = privsvc_tokens::epoch_of(now_ms());
    let mut options = privsvc_ledger::QueryOptions::new(privsvc_ledger::Select::default());
    options.limit = Some(200);
    let mut n = 0;
    for epoch in [today, today + 1] {
        let query = privsvc_tokens::issuer_key_query(creator, app, epoch).unwrap();
        n += reader(node)
            .query(&query, &options)
            .await
            .unwrap()
            .entities
            .len();
    }
    n
}

async fn nonce(node: &privsvc_devnet::DevnetHandle, a: Address) -> u64 {
    RpcLedger::new(node.url())
        .unwrap()
        .transaction_count(a, true)
        .await
        .unwrap()
}

/// `n` concurrent anonymous `GET /v1/issuer/key` for invented apps; each must be 404 + JSON.
async fn invented_key_requests(url: &str, n: usize, tag: &str) {
    let mut tasks = Vec::new();
    for i in 0..n {
        let path = format!("/v1/issuer/key?app=invented-{tag}-{i}&epoch={}", today());
        let url = url.to_string();
        tasks.push(tokio::spawn(async move { get(&url, &path).await }));
    }
    for t in tasks {
        let (status, body) = t.await.unwrap();
        assert_eq!(status, 404, "{body}");
        assert!(body["error"].as_str().unwrap().contains("no key"), "{body}");
    }
}

fn wallet_for(
    node: &privsvc_devnet::DevnetHandle,
    issuer: Address,
    url: &str,
) -> TokenWalletOptions {
    let mut o = TokenWalletOptions::new(Arc::new(LocalWallet::random()), reader(node), issuer, url);
    o.min_age_ms = 0;
    o
}

#[tokio::test]
async fn anonymous_key_requests_cost_the_issuer_nothing_and_batches_flow() {
    let (node, _dir, relayer) = devnet_and_relayer(|c| {
        c.issuer.on = true;
        c.batching.min_batch = 1;
    })
    .await;
    let url = relayer.url().to_string();
    let me = relayer.address();
    // Let the start-up heartbeat go out first.
    let start = std::time::Instant::now();
    while relayer.health().await.last_beat == 0 {
        assert!(start.elapsed() < T, "no heartbeat");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let n0 = nonce(&node, me).await;
    let batches0 = relayer.health().await.batches;

    invented_key_requests(&url, 100, "a").await;
    assert_eq!(
        nonce(&node, me).await,
        n0,
        "the relayer account sent a transaction"
    );
    assert_eq!(key_entities(&node, me).await, 0);

    // While a record waits, another burst: the record is still written promptly.
    let id = submit(&url, &body()).await;
    invented_key_requests(&url, 100, "b").await;
    wait_state(&url, &id, "written", T).await;
    let batches = relayer.health().await.batches - batches0;
    assert!(batches >= 1);
    // Every transaction of the account since is a batch; no issuer key anywhere.
    assert_eq!(nonce(&node, me).await, n0 + batches);
    assert_eq!(key_entities(&node, me).await, 0);
    relayer.shutdown().await;
}

/// A signed v2 request of `wallet` for a new app, naming `issuer` and `chain`.
async fn signed_request(wallet: &LocalWallet, issuer: Address, chain: u64) -> IssueRequest {
    let mut v = vec![0u8; privsvc_tokens::MODULUS_BYTES];
    v[1..].iter_mut().for_each(|b| *b = rand::random());
    let ts = now_ms();
    let mut req = IssueRequest {
        issuer,
        chain_id: chain,
        app: "other-target".into(),
        epoch: today(),
        wallet: wallet.address(),
        blinded: vec![base64::engine::general_purpose::STANDARD.encode(v)],
        ts,
        wallet_signature: String::new(),
        attestation: None,
    };
    let text = issuance_message(&req, ts).unwrap();
    let sig = wallet.personal_sign(text.as_bytes()).await.unwrap();
    req.wallet_signature = format!("0x{}", hex::encode(sig.as_bytes()));
    req
}

#[tokio::test]
async fn requests_for_another_issuer_or_chain_are_refused() {
    let (node, _dir, relayer) = devnet_and_relayer(|c| c.issuer.on = true).await;
    let url = relayer.url();
    let me = relayer.address();
    let chain = node.chain_id();
    let w = LocalWallet::random();

    let req = signed_request(&w, Address::repeat_byte(0x11), chain).await;
    let (s, b) = post(
        url,
        "/v1/tokens/issue",
        &serde_json::to_value(&req).unwrap(),
    )
    .await;
    assert_eq!(s, 403, "{b}");
    assert!(b["error"].as_str().unwrap().contains("for issuer"), "{b}");
    let req = signed_request(&w, me, chain + 1).await;
    let (s, b) = post(
        url,
        "/v1/tokens/issue",
        &serde_json::to_value(&req).unwrap(),
    )
    .await;
    assert_eq!(s, 403, "{b}");
    assert!(b["error"].as_str().unwrap().contains("for chain"), "{b}");
    // Rewriting the named issuer without re-signing breaks the signature.
    let mut req = signed_request(&w, Address::repeat_byte(0x11), chain).await;
    req.issuer = me;
    let (s, b) = post(
        url,
        "/v1/tokens/issue",
        &serde_json::to_value(&req).unwrap(),
    )
    .await;
    assert_eq!(s, 403, "{b}");
    assert!(
        b["error"].as_str().unwrap().contains("walletSignature"),
        "{b}"
    );
    // A token wallet configured for another chain is refused by name, and nothing is written.
    let mut o = wallet_for(&node, me, url);
    o.chain_id = Some(chain + 7);
    let err = TokenWallet::new(o).acquire(APP, 1, None).await.unwrap_err();
    assert!(
        matches!(&err, TokenError::Refused { status: 403, reason: m, .. } if m.contains("chain")),
        "{err}"
    );
    assert_eq!(key_entities(&node, me).await, 0);
    relayer.shutdown().await;
}

#[tokio::test]
async fn the_new_app_cap_holds_across_a_restart() {
    let (node, _dir, c) = devnet_and_config(|c| {
        c.issuer.on = true;
        c.tokens = TokenMode::Required;
        c.issuer.max_new_apps = 1;
    })
    .await;
    let relayer = start(&node, 0, c.clone()).await;
    let me = relayer.address();
    let w = TokenWallet::new(wallet_for(&node, me, relayer.url()));
    assert_eq!(w.acquire("first-app", 2, None).await.unwrap().count, 2);
    let err = w.acquire("second-app", 1, None).await.unwrap_err();
    assert!(
        matches!(&err, TokenError::Refused { status: 403, reason: m, .. } if m.contains("at most 1 new apps")),
        "{err}"
    );
    // A token of the first app is good on the relayer.
    let token = w
        .source()
        .take("first-app", privsvc_tokens::now_ms() + 1)
        .await
        .unwrap()
        .unwrap();
    let mut b = record_body("first-app", 3600, b"x").0;
    b["token"] = serde_json::to_value(&token).unwrap();
    let id = submit(relayer.url(), &b).await;
    // Written before the restart: a restart with a batch in flight is another test's subject.
    wait_state(relayer.url(), &id, "written", T).await;
    relayer.shutdown().await;

    let relayer = start(&node, 0, c).await;
    let w = TokenWallet::new(wallet_for(&node, me, relayer.url()));
    let err = w.acquire("third-app", 1, None).await.unwrap_err();
    assert!(
        matches!(&err, TokenError::Refused { status: 403, reason: m, .. } if m.contains("new apps")),
        "{err}"
    );
    // No key for the refused apps. (Not "one key entity": in the second half of the UTC day,
    // after its random moment, the restarted issuer also publishes tomorrow's key of the app
    // it issued tokens for today.)
    assert_eq!(app_keys(&node, me, "second-app").await, 0);
    assert_eq!(app_keys(&node, me, "third-app").await, 0);
    assert!(app_keys(&node, me, "first-app").await >= 1);
    relayer.shutdown().await;
}

/// A fresh issuer key pair (not published).
async fn fresh_issuer(i: usize) -> TestIssuer {
    let sk = tokio::task::spawn_blocking(|| token_suite().generate_key().unwrap())
        .await
        .unwrap();
    let key = IssuerKey::from_secret(&sk).unwrap();
    TestIssuer {
        sk,
        key,
        address: dev_address(i),
    }
}

/// Publish `key` for (`app`, today) from `w`; returns the entity key.
async fn publish(w: &dyn LedgerWriter, app: &str, key: &IssuerKey) -> B256 {
    let r = w
        .execute(&[issuer_key_create(app, today(), key.spki(), rand::random()).unwrap()])
        .await
        .unwrap();
    assert!(r.success);
    r.created[0].key
}

fn token_body(app: &str, token: &privsvc_tokens::TokenRedemption) -> Value {
    let mut b = record_body(app, 3600, b"x").0;
    b["token"] = serde_json::to_value(token).unwrap();
    b
}

fn tokens_from(dir: &std::path::Path, issuer: Address) -> privsvc_relayer::RelayerConfig {
    let mut c = config(dir);
    c.tokens = TokenMode::Required;
    c.issuer.address = Some(issuer);
    c.issuer.url = Some("http://issuer.invalid".into());
    c
}

#[tokio::test]
async fn a_swapped_key_is_equivocation_even_after_a_restart() {
    let node = devnet().await;
    let issuer_writer = writer(&node, 1);
    let k1 = fresh_issuer(1).await;
    let k2 = fresh_issuer(1).await;
    let app = "swapped";
    let first = publish(issuer_writer.as_ref(), app, &k1.key).await;

    let dir = tempfile::tempdir().unwrap();
    let c = tokens_from(dir.path(), k1.address);
    let relayer = start(&node, 0, c.clone()).await;
    let id = submit(relayer.url(), &token_body(app, &k1.token(app, today()))).await;
    wait_state(relayer.url(), &id, "written", T).await;

    // The issuer deletes its key and publishes another one for the same (app, day): the
    // ledger now shows one key, but not the one the relayer pinned.
    let r = issuer_writer
        .execute(&[Operation::Delete { key: first }])
        .await
        .unwrap();
    assert!(r.success);
    publish(issuer_writer.as_ref(), app, &k2.key).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    refused(
        relayer.url(),
        &token_body(app, &k2.token(app, today())),
        403,
        "equivocation",
    )
    .await;
    refused(
        relayer.url(),
        &token_body(app, &k1.token(app, today())),
        403,
        "equivocation",
    )
    .await;

    // After a restart the pin is still there.
    relayer.shutdown().await;
    let relayer = start(&node, 0, c).await;
    refused(
        relayer.url(),
        &token_body(app, &k2.token(app, today())),
        403,
        "equivocation",
    )
    .await;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let pins = dir.path().join(privsvc_relayer::testing::PINS_FILE);
        let mode = std::fs::metadata(pins).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    relayer.shutdown().await;

    // Only the pin makes the difference: a relayer that never saw the first key accepts.
    let other_dir = tempfile::tempdir().unwrap();
    let fresh = start(&node, 2, tokens_from(other_dir.path(), k1.address)).await;
    submit(fresh.url(), &token_body(app, &k2.token(app, today()))).await;
    fresh.shutdown().await;
}

#[tokio::test]
async fn a_late_key_is_refused_for_an_established_app_and_accepted_for_a_new_one() {
    let node = devnet().await;
    // Keys for yesterday and today, both created now (today): today's is late.
    let established = TestIssuer::publish(&node, 1, "established", &[today() - 1, today()]).await;
    // A new app: only today's key, created today.
    let new_app = TestIssuer::publish(&node, 1, "brand-new", &[today()]).await;
    let dir = tempfile::tempdir().unwrap();
    let relayer = start(&node, 0, tokens_from(dir.path(), established.address)).await;
    refused(
        relayer.url(),
        &token_body("established", &established.token("established", today())),
        403,
        "after that day began",
    )
    .await;
    let id = submit(
        relayer.url(),
        &token_body("brand-new", &new_app.token("brand-new", today())),
    )
    .await;
    wait_state(relayer.url(), &id, "written", T).await;
    relayer.shutdown().await;
}

#[tokio::test]
async fn issuer_routes_answer_429_past_the_per_address_limit() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.issuer.on = true;
        c.issuer.requests_per_min = 5;
    })
    .await;
    let url = relayer.url();
    avoid_minute_edge().await;
    for _ in 0..5 {
        let (s, b) = get(url, &format!("/v1/issuer/key?app=a&epoch={}", today())).await;
        assert_eq!(s, 404, "{b}");
    }
    let r = http()
        .get(format!("{url}/v1/issuer/key?app=a&epoch={}", today()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 429);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    let b: Value = r.json().await.unwrap();
    assert!(b["error"].as_str().unwrap().contains("a minute"), "{b}");
    let (s, b) = post(url, "/v1/tokens/issue", &serde_json::json!({})).await;
    assert_eq!(s, 429, "{b}");
    // Submissions have their own limit.
    submit(url, &body()).await;
    relayer.shutdown().await;
}
