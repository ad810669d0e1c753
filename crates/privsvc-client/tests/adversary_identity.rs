//! The OHTTP relay's operator substitutes its own gateway key (docs/PROTOCOL.md §8.6).
//!
//! The operator of the OHTTP relay a client uses publishes a heartbeat from its own account
//! (dev account 3) naming relayer A's URL with the operator's own gateway key, and runs the
//! relay in the middle: whatever is encapsulated to its key it opens and reads, answers
//! `/v1/info` itself (its own address and key, so a confirmation through the relay agrees) and
//! passes on to A in clear, sealing A's answers back, so a client taken in works normally.
//! Requests it cannot open it forwards to A's `/v1/ohttp`, or, when told to, answers 400 as if
//! A's gateway could not open them.
//!
//! The client must never encapsulate a request to the operator's key:
//! - a fresh client refuses A's URL as ambiguous (discovered, or given by URL alone), and uses
//!   A when given A's address;
//! - a client that pinned A in an earlier session (file token store) keeps using A's key and
//!   warns about the operator's heartbeat;
//! - a 400 from "A's gateway" marks A bad for the session instead of re-discovering its key.
//!
//! Real stack: the devnet, relayers A and B (OHTTP on), heartbeats signed by the dev accounts,
//! real HTTP on loopback, real HPKE. On the code before revision 3 every test fails: the newest
//! heartbeat named the key (the operator's), and a 400 made the transport look it up again.

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use alloy_primitives::Address;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use common::{fast_builder, note, writer, Stack, StackOptions};
use privsvc_client::{ClientOptions, PrivateClient, PrivsvcError, RelayerRef};
use privsvc_devnet::DevSigner;
use privsvc_ledger::Heartbeat;
use privsvc_ledger::Operation;
use privsvc_ohttp::{OhttpGateway, CONTENT_TYPE_OHTTP_REQ, CONTENT_TYPE_OHTTP_RES, TARGET_HEADER};
use privsvc_tokens::FileTokenStore;
use privsvc_vault::LocalWallet;

/// The relay operator's dev account.
const OPERATOR: usize = 3;

/// Everything logged at WARN and above by this test binary (one global subscriber).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs() -> String {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    let logs = LOGS.get_or_init(|| {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
            .with_ansi(false)
            .without_time()
            .with_writer(move || writer.clone())
            .try_init()
            .expect("global subscriber");
        logs
    });
    String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned()
}

/// The relay's operator: its own gateway key, its relay, what it read.
struct Operator {
    gateway: OhttpGateway,
    account: Address,
    http: reqwest::Client,
    /// Requests encapsulated to the operator's key: it read them.
    opened: AtomicUsize,
    /// Every request that reached the relay.
    relayed: AtomicUsize,
    /// Answer 400 to the requests it cannot open, as a gateway that cannot open them would.
    refuse: AtomicBool,
    url: OnceLock<String>,
}

impl Operator {
    async fn start() -> Arc<Operator> {
        let op = Arc::new(Operator {
            gateway: OhttpGateway::from_seed(b"the relay operator's own key!!!!").unwrap(),
            account: DevSigner::dev(OPERATOR).address(),
            http: reqwest::Client::new(),
            opened: AtomicUsize::new(0),
            relayed: AtomicUsize::new(0),
            refuse: AtomicBool::new(false),
            url: OnceLock::new(),
        });
        let router = Router::new()
            .route("/ohttp", post(operator_relay))
            .with_state(op.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        op.url
            .set(format!("http://{}", listener.local_addr().unwrap()))
            .unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.ok() });
        op
    }

    fn url(&self) -> String {
        self.url.get().unwrap().clone()
    }

    fn opened(&self) -> usize {
        self.opened.load(Ordering::SeqCst)
    }

    fn relayed(&self) -> usize {
        self.relayed.load(Ordering::SeqCst)
    }

    /// The operator's heartbeat: its own account, `url` (relayer A's), its own gateway key.
    async fn claim(&self, stack: &Stack, url: &str) {
        let heartbeat = Heartbeat {
            url: url.to_string(),
            address: self.account,
            chain_id: stack.node().chain_id(),
            version: "privsvc-relayer/1".into(),
            ohttp_key: Some(self.gateway.public_key()),
        };
        let receipt = writer(stack.node(), OPERATOR)
            .execute(&[Operation::Create(
                heartbeat.to_create(rand::random()).unwrap(),
            )])
            .await
            .expect("the operator's heartbeat is written");
        assert!(receipt.success, "{:?}", receipt.revert_reason);
    }
}

async fn operator_relay(
    State(op): State<Arc<Operator>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    op.relayed.fetch_add(1, Ordering::SeqCst);
    let target = headers
        .get(TARGET_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if let Ok((request, sealer)) = op.gateway.open(&body) {
        op.opened.fetch_add(1, Ordering::SeqCst);
        // Read it, pass it on in clear, and claim the relayer's identity in /v1/info.
        let method = reqwest::Method::from_bytes(request.method.as_bytes()).unwrap();
        let answer = op
            .http
            .request(method, format!("{target}{}", request.path))
            .header("content-type", "application/json")
            .body(request.body.clone())
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        let mut answer = answer.bytes().await.unwrap().to_vec();
        if request.path == "/v1/info" {
            let mut info: serde_json::Value = serde_json::from_slice(&answer).unwrap();
            info["address"] = op.account.to_checksum(None).into();
            info["ohttpKey"] = op.gateway.public_key().into();
            answer = serde_json::to_vec(&info).unwrap();
        }
        let sealed = sealer
            .seal(
                status,
                &[("content-type".into(), "application/json".into())],
                &answer,
            )
            .unwrap();
        return (
            StatusCode::OK,
            [("content-type", CONTENT_TYPE_OHTTP_RES)],
            sealed,
        )
            .into_response();
    }
    if op.refuse.load(Ordering::SeqCst) {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(serde_json::json!({"error": "the encapsulated request cannot be opened"})),
        )
            .into_response();
    }
    let answer = op
        .http
        .post(format!("{target}/v1/ohttp"))
        .header("content-type", CONTENT_TYPE_OHTTP_REQ)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
    let content_type = answer.headers().get("content-type").cloned();
    let mut response = (status, answer.bytes().await.unwrap()).into_response();
    if let Some(ct) = content_type {
        response.headers_mut().insert("content-type", ct);
    }
    response
}

/// A stack without tokens, OHTTP on (relayers A and B), and the operator's relay.
async fn scene() -> (Stack, Arc<Operator>) {
    logs(); // installs the subscriber before anything is logged
    let stack = Stack::start(StackOptions {
        tokens: false,
        ..StackOptions::default()
    })
    .await;
    (stack, Operator::start().await)
}

fn a_address(stack: &Stack) -> Address {
    stack.a().address()
}

/// Options of a client through the operator's relay with fast test timings, relayers
/// `relayers` (`None`: discovered from heartbeats).
fn through_operator(
    stack: &Stack,
    op: &Operator,
    relayers: Option<Vec<RelayerRef>>,
) -> ClientOptions {
    let mut options = fast_builder(
        Arc::new(LocalWallet::random()),
        stack.reader.clone(),
        Vec::<String>::new(),
    )
    .ohttp_relay(op.url())
    .options()
    .clone();
    options.relayers = relayers;
    options
}

fn urls(client: &PrivateClient) -> Vec<String> {
    client.relayers().into_iter().map(|r| r.url).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_client_refuses_the_ambiguous_url_and_never_uses_the_operators_key() {
    let (stack, op) = scene().await;
    op.claim(&stack, &stack.a_url).await;

    // Discovery: A's URL is named by two accounts, so A is left out; B is used.
    let discovered = PrivateClient::from_options(through_operator(&stack, &op, None))
        .await
        .expect("B is discovered");
    assert_eq!(urls(&discovered), vec![stack.b_url.clone()]);
    assert_eq!(
        op.opened(),
        0,
        "a request was encapsulated to the operator's key"
    );

    // Given by its URL alone, A is refused as ambiguous.
    let err = PrivateClient::from_options(through_operator(
        &stack,
        &op,
        Some(vec![RelayerRef::from(stack.a_url.as_str())]),
    ))
    .await
    .unwrap_err();
    match &err {
        PrivsvcError::NoRelayerAvailable { reason } => {
            assert!(reason.contains("ambiguous"), "{reason}")
        }
        other => panic!("expected NoRelayerAvailable, got {other:?}"),
    }
    assert_eq!(
        op.opened(),
        0,
        "a request was encapsulated to the operator's key"
    );

    // Given with A's address, A is A: its own heartbeat's key, a record written through it.
    let client = PrivateClient::from_options(through_operator(
        &stack,
        &op,
        Some(vec![RelayerRef::with_address(
            stack.a_url.clone(),
            a_address(&stack),
        )]),
    ))
    .await
    .expect("A given with its address");
    assert_eq!(client.relayer_addresses(), vec![a_address(&stack)]);
    let written = client.create_entity(note("given")).await.unwrap();
    assert_eq!(written.relayer, stack.a_url);
    assert!(
        op.relayed() > 0,
        "the writes went through the operator's relay"
    );
    assert_eq!(
        op.opened(),
        0,
        "a request was encapsulated to the operator's key"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_pinned_a_relayer_keeps_its_key_and_warns() {
    let (stack, op) = scene().await;
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("tokens.json");
    let with_store = |relayers: Option<Vec<RelayerRef>>| {
        let mut options = through_operator(&stack, &op, relayers);
        options.token_store = Some(Arc::new(open_when_released(&store_path)));
        options
    };

    // An earlier session, before the operator's heartbeat: A is pinned in the token store's
    // directory.
    let earlier = PrivateClient::from_options(with_store(None)).await.unwrap();
    assert!(urls(&earlier).contains(&stack.a_url));
    drop(earlier);

    op.claim(&stack, &stack.a_url).await;

    // A later session with the same store: A's URL is A's, the operator's heartbeat is
    // ignored and reported.
    let client = PrivateClient::from_options(with_store(Some(vec![RelayerRef::from(
        stack.a_url.clone(),
    )])))
    .await
    .expect("the pinned relayer is used");
    assert_eq!(client.relayer_addresses(), vec![a_address(&stack)]);
    let written = client.create_entity(note("pinned")).await.unwrap();
    assert_eq!(written.relayer, stack.a_url);
    drop(client);
    // The dropped session's tasks let go of the store at their next poll.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // Discovery with the same pins finds both relayers, A under A's account.
    let discovered = PrivateClient::from_options(with_store(None)).await.unwrap();
    let a = discovered
        .relayers()
        .into_iter()
        .find(|r| r.url == stack.a_url)
        .expect("A is discovered");
    assert_eq!(a.address, a_address(&stack));
    assert_eq!(discovered.relayers().len(), 2);

    assert_eq!(
        op.opened(),
        0,
        "a request was encapsulated to the operator's key"
    );
    let logs = logs();
    assert!(
        logs.lines().any(|l| l.contains("WARN")
            && l.contains("another account names this relayer's URL")
            && l.contains(&stack.a_url)
            && l.contains(&op.account.to_string())),
        "no warning about the operator's heartbeat:\n{logs}"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_400_outside_the_encapsulation_never_marks_the_relayer_bad_nor_rediscovers_its_key() {
    let (stack, op) = scene().await;
    let client = PrivateClient::from_options(through_operator(
        &stack,
        &op,
        Some(vec![RelayerRef::from(stack.a_url.clone())]),
    ))
    .await
    .unwrap();

    // The operator publishes its heartbeat for A's URL, then answers 400 in A's name.
    op.claim(&stack, &stack.a_url).await;
    op.refuse.store(true, Ordering::SeqCst);
    let before = op.relayed();
    let err = client.create_entity(note("refused")).await.unwrap_err();
    match &err {
        PrivsvcError::AllRelayersFailed { attempts } => assert!(
            attempts
                .iter()
                .any(|a| a.contains(&stack.a_url) && a.contains("refused a well-formed request")),
            "{attempts:?}"
        ),
        other => panic!("expected AllRelayersFailed, got {other:?}"),
    }
    // The relay can make that 400 itself: it must not steer later writes away from A.
    let a = &client.relayers()[0];
    assert!(
        !a.bad,
        "A was marked bad by an answer outside the encapsulation"
    );
    assert_eq!(a.address, a_address(&stack));
    assert_eq!(op.relayed(), before + 1, "the key was looked up again");
    // The next write goes to A again, encapsulated to A's own key.
    let _ = client.create_entity(note("again")).await.unwrap_err();
    assert_eq!(op.relayed(), before + 2, "A was not tried again");
    assert_eq!(
        op.opened(),
        0,
        "a request was encapsulated to the operator's key"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_issuer_named_by_a_relayer_is_reached_with_the_issuers_own_key() {
    // Tokens on: B requires them and names A (the issuer) at A's URL.
    let stack = Stack::start(StackOptions::default()).await;
    logs();
    let op = Operator::start().await;
    op.claim(&stack, &stack.a_url).await;

    // The client uses B only; the issuer's URL is named by A and by the operator.
    let client = PrivateClient::from_options(through_operator(
        &stack,
        &op,
        Some(vec![RelayerRef::from(stack.b_url.clone())]),
    ))
    .await
    .expect("B is used");
    assert_eq!(urls(&client), vec![stack.b_url.clone()]);
    // Issuer calls go through the relay to the key of A's own heartbeat (A is the issuer B
    // names), not to the operator's, and are not refused as ambiguous.
    let prefetch = client
        .prefetch_later(1, Some(std::time::Duration::from_millis(200)))
        .unwrap();
    let added = tokio::time::timeout(std::time::Duration::from_secs(30), prefetch)
        .await
        .expect("the prefetch ends")
        .unwrap();
    // One issue request, of the count every issue request asks.
    assert_eq!(
        added,
        privsvc_tokens::MAX_TOKENS_PER_REQUEST,
        "no tokens from the issuer"
    );
    assert!(
        op.relayed() > 0,
        "the issuer calls went through the operator's relay"
    );
    assert_eq!(
        op.opened(),
        0,
        "a request was encapsulated to the operator's key"
    );
    stack.shutdown().await;
}

/// Opens the file token store, waiting up to 5 s for a dropped client's aborted background
/// tasks to let go of it (an abort takes effect at the task's next poll).
fn open_when_released(path: &std::path::Path) -> FileTokenStore {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match FileTokenStore::open(path) {
            Ok(store) => return store,
            Err(e) if std::time::Instant::now() > deadline => panic!("{e}"),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}
