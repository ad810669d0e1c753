//! The token rules of the client (docs/PROTOCOL.md §8.3 and §5.2), tried by the parties who
//! would abuse them. Real devnet, a real relayer with the issuer on (`ISSUER=on`) over loopback
//! HTTP, real RSA blind signatures; the clients use a short minimum token age.
//!
//! - no token a write spends was obtained after that write was requested (docs/PROTOCOL.md §8.3:
//!   the property itself, checked on the tokens, not a gap between requests), and a write with no
//!   ripe token asks the issuer nothing: it fails with `NoRipeToken` at once;
//! - the session refills its store on its own schedule, every issue request asking the same
//!   (full) count, and only when the store runs low;
//! - `prefetch_later` reaches that issuer one token at a time, each request in its own part of
//!   the window (spread, not a burst), and a later write spends only a ripe prefetched token;
//! - a fake relayer whose `/v1/info` names an `issuerUrl` other than the issuer's heartbeat URL
//!   makes the client send nothing to that URL;
//! - with an OHTTP relay configured, the issuer's relayer sees the client's issuer calls only as
//!   encapsulated `/v1/ohttp` requests from the relay, never a direct issue request;
//! - an issuer that replaces its key for an (app, epoch) the client pinned is refused with
//!   `IssuerEquivocation`, also in a later session (persistent pins).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_primitives::Address;
use axum::extract::State;
use privsvc_client::PrivsvcError;
use privsvc_devnet::{Devnet, DevnetConfig, DevnetHandle};
use privsvc_ledger::{LedgerReader, Operation, QueryOptions};
use privsvc_ohttp::{OhttpRelay, RelayConfig};
use privsvc_relayer::{OhttpSeed, Relayer, RelayerConfig, TokenMode};
use privsvc_tokens::{epoch_of, now_ms, token_suite, IssuerKey, SqliteKeyPins};
use privsvc_tokens::{issuer_key_create, issuer_key_query};
use privsvc_vault::LocalWallet;
use tempfile::TempDir;

use crate::common::*;

/// Minimum token age of the clients here.
const MIN_AGE_MS: u64 = 1_500;

/// One request seen by a proxy.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    /// Milliseconds since the epoch when the proxy received it.
    at_ms: u64,
    body: Vec<u8>,
}

#[derive(Clone)]
struct ProxyState {
    /// Where requests go; `None` = answer 503 (a fake issuer that only records).
    target: Option<String>,
    /// `issuerUrl` written into `/v1/info` answers, when set.
    fake_issuer_url: Option<String>,
    seen: Arc<Mutex<Vec<Seen>>>,
    http: reqwest::Client,
}

/// A recording HTTP proxy on loopback.
struct Proxy {
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

async fn forward(
    State(s): State<ProxyState>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: bytes::Bytes,
) -> axum::response::Response {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string());
    s.seen.lock().unwrap().push(Seen {
        method: method.to_string(),
        path: uri.path().to_string(),
        at_ms: now_ms(),
        body: body.to_vec(),
    });
    let reply = |status: u16, ct: String, bytes: Vec<u8>| {
        axum::response::Response::builder()
            .status(status)
            .header("content-type", ct)
            .body(axum::body::Body::from(bytes))
            .unwrap()
    };
    let Some(target) = &s.target else {
        return reply(
            503,
            "application/json".into(),
            br#"{"error":"fake"}"#.to_vec(),
        );
    };
    let res = s
        .http
        .request(method, format!("{target}{path}"))
        .header(
            "content-type",
            headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let ct = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let mut bytes = res.bytes().await.unwrap().to_vec();
    if let (Some(fake), "/v1/info") = (&s.fake_issuer_url, uri.path()) {
        let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        v["issuerUrl"] = serde_json::Value::String(fake.clone());
        bytes = serde_json::to_vec(&v).unwrap();
    }
    reply(status, ct, bytes)
}

impl Proxy {
    /// Binds a proxy; `serve` starts it in front of `target`.
    async fn bind() -> (tokio::net::TcpListener, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        (listener, url)
    }

    fn serve(
        listener: tokio::net::TcpListener,
        target: Option<String>,
        fake_issuer_url: Option<String>,
    ) -> Proxy {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = ProxyState {
            target,
            fake_issuer_url,
            seen: seen.clone(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        };
        let app = axum::Router::new().fallback(forward).with_state(state);
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.ok();
        });
        Proxy { seen, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn devnet() -> DevnetHandle {
    Devnet::start(DevnetConfig::on_demand())
        .await
        .expect("devnet starts")
}

/// Relayer A (dev account 0): tokens required, issuer on, heartbeat naming `public_url`.
async fn issuer_relayer(
    node: &DevnetHandle,
    reader: Arc<dyn LedgerReader>,
    dir: &TempDir,
    public_url: Option<String>,
) -> Relayer {
    let mut c = RelayerConfig::for_tests(dir.path());
    c.block_time = Duration::from_millis(100);
    c.batching.max_wait = Duration::from_millis(100);
    c.tokens = TokenMode::Required;
    c.issuer.on = true;
    c.public_url = public_url;
    c.ohttp_seed = Some(OhttpSeed::new([1u8; 32]));
    let a = Relayer::start(c, reader, writer(node, 0))
        .await
        .expect("relayer starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.health().await.heartbeat.is_empty() {
        assert!(Instant::now() < deadline, "heartbeat not published");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a
}

/// A devnet and relayer A (issuer on) behind a recording proxy that its heartbeat (and so its
/// `issuerUrl`) names: every call of a client, issuer routes included, passes through the proxy.
struct Watched {
    node: DevnetHandle,
    reader: Arc<dyn LedgerReader>,
    dir: TempDir,
    a: Relayer,
    proxy: Proxy,
    proxy_url: String,
}

impl Watched {
    async fn start() -> Watched {
        let node = devnet().await;
        let reader = reader(&node);
        let dir = TempDir::new().unwrap();
        let (listener, proxy_url) = Proxy::bind().await;
        let a = issuer_relayer(&node, reader.clone(), &dir, Some(proxy_url.clone())).await;
        let proxy = Proxy::serve(listener, Some(format!("http://{}", a.local_addr())), None);
        Watched {
            node,
            reader,
            dir,
            a,
            proxy,
            proxy_url,
        }
    }

    /// Stops the proxy, the relayer and the devnet.
    async fn shutdown(self) {
        drop(self.proxy);
        self.a.shutdown().await;
        self.node.shutdown().await;
        drop(self.dir);
    }
}

fn client_builder(reader: Arc<dyn LedgerReader>, relayer: &str) -> privsvc_client::ClientBuilder {
    fast_builder(
        Arc::new(LocalWallet::random()),
        reader,
        [relayer.to_string()],
    )
    .token_min_age_ms(MIN_AGE_MS)
    .token_max_ripe_ms(2 * MIN_AGE_MS)
    .token_ripe_wait_ms(10_000)
}

/// Whether a submission body carries a token.
fn carries_token(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .is_some_and(|v| v.get("token").is_some_and(|t| !t.is_null()))
}

/// The nonce of the token a submission body carries.
fn token_nonce(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v.get("token")?.get("nonce")?.as_str().map(str::to_string)
}

#[tokio::test]
async fn no_token_a_write_spends_was_obtained_after_the_write_was_requested() {
    let w = Watched::start().await;
    let store = privsvc_tokens::memory_store();
    let client = client_builder(w.reader.clone(), &w.proxy_url)
        .token_store(store.clone())
        .build()
        .await
        .unwrap();
    ready(&client).await;
    // Seven writes, each checked against the store as it was when the write was requested:
    // the token it spent must be one the store held then, obtained before the request. A write
    // never waits for a token to ripen (revision 4), so each is requested once one is ripe.
    for i in 0..7 {
        ready(&client).await;
        let held: Vec<privsvc_tokens::StoredToken> = store.list(APP).unwrap();
        let requested = now_ms();
        client
            .create_entity(note(&format!("ripe {i}")))
            .await
            .unwrap_or_else(|e| panic!("write {i}: {e}"));
        let spent = w
            .proxy
            .seen()
            .iter()
            .rev()
            .filter(|s| s.method == "POST" && s.path == "/v1/records")
            .find_map(|s| token_nonce(&s.body))
            .expect("the write carried a token");
        let token = held.iter().find(|t| t.nonce == spent).unwrap_or_else(|| {
            panic!("write {i} spent a token the store did not hold when it was requested")
        });
        assert!(
            token.obtained_ms < requested && requested - token.obtained_ms >= MIN_AGE_MS,
            "write {i} spent a token obtained at {} for a write requested at {requested}",
            token.obtained_ms
        );
    }
    w.shutdown().await;
}

#[tokio::test]
async fn a_write_with_no_ripe_token_asks_the_issuer_nothing() {
    let w = Watched::start().await;
    // Refills far in the future: the store stays empty.
    let client = client_builder(w.reader.clone(), &w.proxy_url)
        .schedule(privsvc_client::SessionSchedule {
            first_refill: (Duration::from_secs(600), Duration::from_secs(600)),
            ..fast_schedule()
        })
        .build()
        .await
        .unwrap();
    let before = w.proxy.seen().len();
    let started = Instant::now();
    let err = client.create_entity(note("no token")).await.unwrap_err();
    assert!(matches!(err, PrivsvcError::NoRipeToken { .. }), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "NoRipeToken at once, not after a wait"
    );
    let after: Vec<Seen> = w.proxy.seen()[before..].to_vec();
    assert!(
        after
            .iter()
            .all(|s| !s.path.starts_with("/v1/tokens") && !s.path.starts_with("/v1/issuer")),
        "the write reached the issuer: {:?}",
        after.iter().map(|s| s.path.clone()).collect::<Vec<_>>()
    );
    // With `allow_on_demand`, the app's explicit choice, the write fetches and spends once ripe.
    let on_demand = client_builder(w.reader.clone(), &w.proxy_url)
        .schedule(privsvc_client::SessionSchedule {
            first_refill: (Duration::from_secs(600), Duration::from_secs(600)),
            ..fast_schedule()
        })
        .allow_on_demand(true)
        .build()
        .await
        .unwrap();
    on_demand.create_entity(note("on demand")).await.unwrap();
    w.shutdown().await;
}

#[tokio::test]
async fn the_session_refills_on_its_schedule_with_the_full_count_only_when_low() {
    let w = Watched::start().await;
    let store = privsvc_tokens::memory_store();
    let client = client_builder(w.reader.clone(), &w.proxy_url)
        .token_store(store.clone())
        .build()
        .await
        .unwrap();
    ready(&client).await;
    let issue_counts = |seen: &[Seen]| -> Vec<usize> {
        seen.iter()
            .filter(|s| s.method == "POST" && s.path == "/v1/tokens/issue")
            .map(|s| {
                serde_json::from_slice::<serde_json::Value>(&s.body).unwrap()["blinded"]
                    .as_array()
                    .map_or(0, Vec::len)
            })
            .collect()
    };
    // One refill at session start (with the request that created the app's key of the day, on
    // this fresh devnet), every request asking the full count.
    let counts = issue_counts(&w.proxy.seen());
    assert!(
        (1..=2).contains(&counts.len())
            && counts
                .iter()
                .all(|c| *c == privsvc_tokens::MAX_TOKENS_PER_REQUEST),
        "{counts:?}"
    );
    let at_start = counts.len();
    // A full store: the later looks at it (every 2 to 4 s) ask nothing.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        issue_counts(&w.proxy.seen()).len(),
        at_start,
        "no refill while stocked"
    );
    // Run the store low: the next look refills, with the same count.
    for t in store.list(APP).unwrap().iter().skip(2) {
        store.remove(APP, &t.nonce).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while issue_counts(&w.proxy.seen()).len() < at_start + 1 {
        assert!(Instant::now() < deadline, "no refill of a low store");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        issue_counts(&w.proxy.seen()),
        vec![privsvc_tokens::MAX_TOKENS_PER_REQUEST; at_start + 1]
    );
    drop(client);
    w.shutdown().await;
}

#[tokio::test]
async fn prefetch_later_spreads_issue_requests_and_a_write_spends_only_their_ripe_tokens() {
    // Three issue requests of the usual count (every issue request asks the same count).
    const REQUESTS: usize = 3;
    const COUNT: usize = REQUESTS * privsvc_tokens::MAX_TOKENS_PER_REQUEST;
    const WITHIN_MS: u64 = 3_000;
    const SLOT_MS: u64 = WITHIN_MS / REQUESTS as u64;
    let w = Watched::start().await;
    let store = privsvc_tokens::memory_store();
    // No scheduled refill during the test: only the prefetch asks.
    let client = client_builder(w.reader.clone(), &w.proxy_url)
        .token_store(store.clone())
        .schedule(privsvc_client::SessionSchedule {
            first_refill: (Duration::from_secs(600), Duration::from_secs(600)),
            ..fast_schedule()
        })
        .build()
        .await
        .unwrap();
    let issue_times = |seen: &[Seen]| -> Vec<u64> {
        seen.iter()
            .filter(|s| s.method == "POST" && s.path == "/v1/tokens/issue")
            .map(|s| s.at_ms)
            .collect()
    };
    assert!(
        issue_times(&w.proxy.seen()).is_empty(),
        "nothing asked at build"
    );

    let start = now_ms();
    let prefetch = client
        .prefetch_later(COUNT, Some(Duration::from_millis(WITHIN_MS)))
        .unwrap();
    let added = tokio::time::timeout(Duration::from_millis(WITHIN_MS + 20_000), prefetch)
        .await
        .expect("the prefetch ends after its window")
        .unwrap();
    assert_eq!(added, COUNT);
    let issues = issue_times(&w.proxy.seen());
    // One request per part of the window (the first moment may also create the app's issuer
    // key), each asking the usual count, and the k-th request no earlier than the k-th part of
    // the window: spread, not a burst.
    assert!(
        (REQUESTS..=REQUESTS + 1).contains(&issues.len()),
        "{} issue requests for {COUNT} tokens",
        issues.len()
    );
    let extra = issues.len() - REQUESTS;
    for (k, at) in issues.iter().enumerate() {
        let earliest = start + k.saturating_sub(extra) as u64 * SLOT_MS;
        assert!(
            *at >= earliest,
            "issue request {k} at +{} ms, before its part of the window (+{} ms)",
            at - start,
            earliest - start
        );
    }
    // Nor a burst at the end: the first request comes before the last part of the window. (Not
    // the span of first to last: the first moment falls anywhere in the first part and then
    // reads the issuer's key and waits the tail's quiet time, so a first moment late in its
    // part and a last one early in its part left less than one part between them, which an
    // honest run hit: 883 ms of 1,000 on CI.)
    let last_part_starts = start + (REQUESTS as u64 - 1) * SLOT_MS;
    assert!(
        issues[0] < last_part_starts,
        "the first issue request came at +{} ms, in the last part of the window: {issues:?}",
        issues[0] - start
    );

    // A write once the oldest prefetched token is ripe (on a loaded machine the first answers
    // may arrive late; the younger ones may still be unripe): it spends a ripe token and asks
    // the issuer for nothing.
    let before = store.list(APP).unwrap();
    assert_eq!(before.len(), COUNT);
    // Tokens of this session ripen at their own age, at most 2 x MIN_AGE_MS here.
    let oldest = before.iter().map(|t| t.obtained_ms).min().unwrap();
    let ripe_in = (oldest + 2 * MIN_AGE_MS + 50).saturating_sub(now_ms());
    tokio::time::sleep(Duration::from_millis(ripe_in)).await;
    client.create_entity(note("prefetched")).await.unwrap();
    let seen = w.proxy.seen();
    assert_eq!(
        issue_times(&seen),
        issues,
        "the write asked the issuer for nothing"
    );
    let spent_at = seen
        .iter()
        .filter(|s| s.method == "POST" && s.path == "/v1/records" && carries_token(&s.body))
        .map(|s| s.at_ms)
        .collect::<Vec<_>>();
    assert_eq!(spent_at.len(), 1);
    let after = store.list(APP).unwrap();
    assert_eq!(after.len(), COUNT - 1);
    let spent: Vec<_> = before
        .iter()
        .filter(|t| !after.iter().any(|u| u.nonce == t.nonce))
        .collect();
    assert_eq!(spent.len(), 1, "one prefetched token was spent");
    assert!(
        spent_at[0] >= spent[0].obtained_ms + MIN_AGE_MS,
        "the token spent at {} was obtained at {}, less than {MIN_AGE_MS} ms before",
        spent_at[0],
        spent[0].obtained_ms
    );

    // With a token source of its own the client fetches nothing, so it cannot prefetch.
    let source = Arc::new(privsvc_tokens::StoreTokenSource::new(
        store.clone(),
        MIN_AGE_MS,
    ));
    let with_source = client_builder(w.reader.clone(), &w.proxy_url)
        .tokens(privsvc_client::TokenSupply::Source(source))
        .build()
        .await
        .unwrap();
    assert!(matches!(
        with_source.prefetch_later(1, None),
        Err(PrivsvcError::Config(_))
    ));
    w.shutdown().await;
}

#[tokio::test]
async fn a_fake_issuer_url_in_relayer_info_receives_nothing() {
    let node = devnet().await;
    let reader = reader(&node);
    let dir = TempDir::new().unwrap();
    let a = issuer_relayer(&node, reader.clone(), &dir, None).await;
    // The fake issuer only records; the fake relayer is the real one behind a proxy that names
    // the fake issuer as `issuerUrl`.
    let (fl, fake_url) = Proxy::bind().await;
    let fake_issuer = Proxy::serve(fl, None, None);
    let (rl, relayer_url) = Proxy::bind().await;
    let fake_relayer = Proxy::serve(rl, Some(a.url().to_string()), Some(fake_url.clone()));
    let client = client_builder(reader.clone(), &relayer_url)
        .build()
        .await
        .unwrap();
    // The session's first refill (within 50 ms) finds no heartbeat of the issuer naming that
    // URL and asks nothing; the write has no token.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let err = client.create_entity(note("phished")).await.unwrap_err();
    assert!(matches!(err, PrivsvcError::NoRipeToken { .. }), "{err}");
    assert!(
        fake_issuer.seen().is_empty(),
        "the fake issuer received {:?}",
        fake_issuer
            .seen()
            .iter()
            .map(|s| s.path.clone())
            .collect::<Vec<_>>()
    );
    // Nothing was submitted either, and the real issuer saw no issue request.
    assert!(fake_relayer
        .seen()
        .iter()
        .all(|s| s.path != "/v1/records" && !s.path.starts_with("/v1/tokens")));
    drop((fake_issuer, fake_relayer));
    a.shutdown().await;
    node.shutdown().await;
}

#[tokio::test]
async fn an_issuer_that_replaces_a_pinned_key_is_refused_in_later_sessions() {
    let node = devnet().await;
    let reader = reader(&node);
    let dir = TempDir::new().unwrap();
    let a = issuer_relayer(&node, reader.clone(), &dir, None).await;
    let issuer: Address = a.address();
    let today = epoch_of(now_ms());
    let pins_path = dir.path().join("client").join("pins.sqlite");

    // Session 1 writes with a token: the issuer's key for (notes, today) is pinned on disk.
    {
        let pins = Arc::new(SqliteKeyPins::open(&pins_path, today).unwrap());
        let client = client_builder(reader.clone(), a.url())
            .token_pins(pins)
            .build()
            .await
            .unwrap();
        ready(&client).await;
        client.create_entity(note("pinned")).await.unwrap();
    }

    // The issuer deletes its key entity and publishes another key for the same day (for
    // example, one per user to tag them): the ledger alone shows a single key.
    let query = issuer_key_query(issuer, APP, today).unwrap();
    let page = reader
        .query(&query, &QueryOptions::default())
        .await
        .unwrap();
    assert_eq!(page.entities.len(), 1);
    let other = IssuerKey::from_secret(&token_suite().generate_key().unwrap()).unwrap();
    let w = writer(&node, 0);
    let r = w
        .execute(&[
            Operation::Delete {
                key: page.entities[0].key,
            },
            issuer_key_create(APP, today, other.spki(), 7).unwrap(),
        ])
        .await
        .unwrap();
    assert!(r.success);
    let page = reader
        .query(&query, &QueryOptions::default())
        .await
        .unwrap();
    assert_eq!(page.entities.len(), 1, "one key on the ledger, a new one");

    // Session 2, same pins file, empty token store: the replaced key is refused.
    let pins = Arc::new(SqliteKeyPins::open(&pins_path, today).unwrap());
    let client = client_builder(reader.clone(), a.url())
        .token_pins(pins)
        .build()
        .await
        .unwrap();
    // The session's first refill meets the replaced key; the write names the equivocation.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let err = client.create_entity(note("tagged")).await.unwrap_err();
    assert!(
        matches!(&err, PrivsvcError::IssuerEquivocation { epoch, pinned: true, .. } if *epoch == today),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains("this device pinned") && message.contains("data directory"),
        "{message}"
    );
    a.shutdown().await;
    node.shutdown().await;
}

#[tokio::test]
async fn with_an_ohttp_relay_the_issuer_never_sees_a_direct_issuer_call() {
    let w = Watched::start().await;
    let relay = OhttpRelay::new(w.reader.clone(), {
        let mut c = RelayConfig::default();
        c.allow_http = true;
        c.rate_limit_per_min = 1_000_000;
        c
    })
    .unwrap();
    assert_eq!(
        relay.refresh().await.unwrap(),
        1,
        "the relay verifies the relayer"
    );
    let relay_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_url = format!("http://{}", relay_listener.local_addr().unwrap());
    let served = relay.clone();
    let relay_task = tokio::spawn(async move {
        served.serve(relay_listener).await.ok();
    });
    let client = client_builder(w.reader.clone(), &w.proxy_url)
        .ohttp_relay(relay_url)
        .build()
        .await
        .unwrap();
    ready(&client).await;
    client
        .create_entity(note("through the relay"))
        .await
        .unwrap();
    let seen = w.proxy.seen();
    // (The relay itself reads `/v1/info` directly to verify the relayer.)
    assert!(
        seen.iter()
            .all(|s| s.path == "/v1/ohttp" || (s.method == "GET" && s.path == "/v1/info")),
        "the issuer's relayer saw {:?}",
        seen.iter().map(|s| s.path.clone()).collect::<Vec<_>>()
    );
    // Key look-up, key creation, issuance, submission and polls: all of them encapsulated.
    let encapsulated = seen.iter().filter(|s| s.path == "/v1/ohttp").count();
    assert!(encapsulated >= 4, "{encapsulated} encapsulated requests");
    relay_task.abort();
    w.shutdown().await;
}
