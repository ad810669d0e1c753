//! The OHTTP relay's operator substitutes its own gateway key (docs/PROTOCOL.md §8.6).
//!
//! The relay sees every encapsulated request. It cannot read them, unless the client
//! encapsulates to a key the relay holds. So its operator publishes a heartbeat, from its own
//! dev account (3), naming relayer A's URL with the operator's own gateway key, and runs a
//! relay that opens whatever is encapsulated to that key: it answers `/v1/info` itself (its
//! own address and key, so the confirmation through the relay agrees) and forwards everything
//! else in clear to A, sealing A's answers back, so the client would work normally while the
//! operator reads every request. Requests it cannot open it forwards to A's `/v1/ohttp`, or,
//! when told to, answers 400 as if A's gateway could not open them (the old transport then
//! looked the key up again, and found the operator's newer heartbeat).
//!
//! Real devnet, real heartbeats signed by the dev accounts, real HTTP on loopback, real HPKE.
//! On the code before revision 3 each test fails: the transport took the newest heartbeat's key
//! (the operator's), and after a 400 it re-discovered the key (the operator's again).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use alloy_primitives::Address;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use privsvc_ohttp::{
    OhttpError, OhttpGateway, OhttpTransport, RelayerRequest, Transport, CONTENT_TYPE_OHTTP_REQ,
    CONTENT_TYPE_OHTTP_RES, TARGET_HEADER,
};

use crate::common::{addr, get, relayer, serve, Chain};

/// The operator's dev account.
const OPERATOR: usize = 3;

/// The relay's operator: holds its own gateway key and opens what is encapsulated to it.
struct Operator {
    gateway: OhttpGateway,
    account: Address,
    http: reqwest::Client,
    /// Requests the operator could open (encapsulated to its key): what it read.
    opened: AtomicUsize,
    /// Every request that reached the relay.
    relayed: AtomicUsize,
    /// Answer 400 to every request it cannot open (as a gateway that cannot open it would).
    refuse: AtomicBool,
}

impl Operator {
    fn new() -> Arc<Self> {
        Arc::new(Operator {
            gateway: OhttpGateway::from_seed(b"the relay operator's own key!!!!").unwrap(),
            account: addr(OPERATOR),
            http: reqwest::Client::new(),
            opened: AtomicUsize::new(0),
            relayed: AtomicUsize::new(0),
            refuse: AtomicBool::new(false),
        })
    }

    fn key(&self) -> String {
        self.gateway.public_key()
    }

    fn opened(&self) -> usize {
        self.opened.load(Ordering::SeqCst)
    }

    fn relayed(&self) -> usize {
        self.relayed.load(Ordering::SeqCst)
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
            info["ohttpKey"] = op.key().into();
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

/// Relayer A (dev account 0, its own gateway, its own live heartbeat) and the operator's relay.
struct Scene {
    chain: Chain,
    a_url: String,
    a_gateway: Arc<OhttpGateway>,
    operator: Arc<Operator>,
    relay_url: String,
    _tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Scene {
    async fn start() -> Scene {
        let chain = Chain::start().await;
        let a_gateway =
            Arc::new(OhttpGateway::from_seed(b"relayer A's gateway seed, 32 b.").unwrap());
        let (a_url, a_task) = serve(relayer(addr(0), Some(a_gateway.clone()))).await;
        chain
            .heartbeat(0, &a_url, Some(&a_gateway.public_key()))
            .await;
        let operator = Operator::new();
        let (relay_url, relay_task) = serve(
            Router::new()
                .route("/ohttp", post(operator_relay))
                .with_state(operator.clone()),
        )
        .await;
        Scene {
            chain,
            a_url,
            a_gateway,
            operator,
            relay_url,
            _tasks: vec![a_task, relay_task],
        }
    }

    /// The operator's heartbeat: its own account, A's URL, its own gateway key.
    async fn operator_claims_a(&self) {
        self.chain
            .heartbeat(OPERATOR, &self.a_url, Some(&self.operator.key()))
            .await;
    }

    fn transport(&self) -> OhttpTransport {
        OhttpTransport::new(&self.relay_url, self.chain.reader.clone()).unwrap()
    }
}

fn submit() -> RelayerRequest {
    RelayerRequest {
        method: "POST".into(),
        path: "/v1/records".into(),
        body: Some(br#"{"app":"secret-app"}"#.to_vec()),
    }
}

#[tokio::test]
async fn a_url_named_by_two_accounts_is_refused_and_nothing_goes_to_the_operators_key() {
    let s = Scene::start().await;
    s.operator_claims_a().await;

    let transport = s.transport();
    let err = OhttpError::from(transport.send(&s.a_url, submit()).await.unwrap_err());
    match &err {
        OhttpError::AmbiguousRelayer { relayer, accounts } => {
            assert_eq!(relayer, &s.a_url);
            assert_eq!(accounts.len(), 2, "{accounts:?}");
            assert!(accounts.contains(&addr(0)) && accounts.contains(&addr(OPERATOR)));
        }
        other => panic!("expected AmbiguousRelayer, got {other:?}"),
    }
    assert!(err.to_string().contains("ambiguous"), "{err}");
    assert_eq!(
        s.operator.opened(),
        0,
        "a request was encapsulated to the operator's key"
    );
    assert_eq!(
        s.operator.relayed(),
        0,
        "nothing is sent for an ambiguous URL"
    );

    // Bound to A's account (as a client that pinned A, or was given A's address, binds it),
    // the URL is A's: A's key, A's answers, the operator reads nothing.
    transport.bind_relayer(&s.a_url, addr(0), None).unwrap();
    assert_eq!(
        transport.gateway_key(&s.a_url).await.unwrap(),
        s.a_gateway.public_key()
    );
    let created = transport.send(&s.a_url, submit()).await.unwrap();
    assert_eq!(created.status, 202);
    let info = transport.send(&s.a_url, get("/v1/info")).await.unwrap();
    let info: serde_json::Value = serde_json::from_slice(&info.body).unwrap();
    assert_eq!(info["address"], addr(0).to_checksum(None));
    assert_eq!(
        s.operator.opened(),
        0,
        "a request was encapsulated to the operator's key"
    );
}

#[tokio::test]
async fn a_url_learnt_on_first_use_stays_with_its_account() {
    let s = Scene::start().await;
    let transport = s.transport();
    // First use: A is the only account naming its URL.
    assert_eq!(
        transport.send(&s.a_url, submit()).await.unwrap().status,
        202
    );
    assert_eq!(transport.relayer_account(&s.a_url), Some(addr(0)));

    // The operator's heartbeat appears; the key is looked up again (asked for explicitly):
    // still only in A's heartbeats.
    s.operator_claims_a().await;
    transport.forget_gateway_key(&s.a_url);
    assert_eq!(
        transport.gateway_key(&s.a_url).await.unwrap(),
        s.a_gateway.public_key()
    );
    assert_eq!(
        transport.send(&s.a_url, submit()).await.unwrap().status,
        202
    );
    assert_eq!(
        s.operator.opened(),
        0,
        "a request was encapsulated to the operator's key"
    );
}

#[tokio::test]
async fn a_400_outside_the_encapsulation_never_makes_the_transport_look_for_another_key() {
    let s = Scene::start().await;
    let transport = s.transport();
    assert_eq!(
        transport.send(&s.a_url, submit()).await.unwrap().status,
        202
    );

    // Now the operator publishes its heartbeat for A's URL and answers 400 in A's name.
    s.operator_claims_a().await;
    s.operator.refuse.store(true, Ordering::SeqCst);
    let before = s.operator.relayed();
    let err = transport.send(&s.a_url, submit()).await.unwrap_err();
    // A transport error names the OHTTP failure and carries it as its source.
    assert!(
        err.to_string().contains("refused a well-formed request"),
        "{err}"
    );
    let err = OhttpError::from(err);
    assert!(
        matches!(&err, OhttpError::GatewayRefused { relayer } if relayer == &s.a_url),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("refused a well-formed request"),
        "{err}"
    );
    // The 400 may be the relay's own: the relayer is not marked refused (a relay that could
    // mark relayers bad could steer writes). The next call goes out again, encapsulated to the
    // same key (no re-discovery), and fails the same way.
    let again = OhttpError::from(transport.send(&s.a_url, get("/v1/info")).await.unwrap_err());
    assert!(
        matches!(again, OhttpError::GatewayRefused { .. }),
        "{again:?}"
    );
    assert_eq!(
        s.operator.relayed(),
        before + 2,
        "each call reaches the relay, with no re-discovery in between"
    );
    assert_eq!(
        s.operator.opened(),
        0,
        "a request was encapsulated to the operator's key"
    );
    assert_eq!(
        transport.gateway_key(&s.a_url).await.unwrap(),
        s.a_gateway.public_key(),
        "the key was replaced"
    );
}
