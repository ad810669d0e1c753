//! The onlooker on the client's link (docs/PROTOCOL.md §6, padding): it sees every message the
//! client exchanges with the OHTTP relay and measures its size. Here it is a recording proxy
//! between a real client (`OhttpTransport`) and a real relay (`OhttpRelay`) over loopback HTTP,
//! in front of a real relayer (`privsvc-relayer`, OHTTP on) writing to the real devnet.
//!
//! What it must not learn: the length of a submission's attributes or payload within a class,
//! and whether the status answer it sees is of a queued record, a written record or an unknown
//! id (or the relayer's info document). What it may learn: the size class, which moves by
//! exactly one class when a request crosses a class boundary. Without padding (the code before
//! revision 2) every assertion on equal sizes fails: a queued status answer sealed to 144 bytes
//! and a written one to 317.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use k256::ecdsa::SigningKey;
use privsvc_attributes::Attributes;
use privsvc_envelope::{seal_envelope, EnvelopeBody};
use privsvc_ohttp::encode_request;
use privsvc_ohttp::to_binary_request;
use privsvc_ohttp::{
    OhttpError, OhttpRelay, OhttpTransport, RelayConfig, RelayerRequest, Transport, TARGET_HEADER,
};
use privsvc_ohttp::{
    REQUEST_CLASSES, REQUEST_OVERHEAD, RESPONSE_CLASSES, RESPONSE_OVERHEAD, SUBMISSION_CLASS,
};
use privsvc_relayer::{OhttpSeed, Relayer, RelayerConfig};
use serde_json::{json, Value};

use crate::common::{get, serve, Chain};

const APP: &str = "padapp";

/// One exchange as the onlooker sees it: encapsulated request and response body sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    request: usize,
    response: usize,
}

#[derive(Clone)]
struct Onlooker {
    relay_url: String,
    http: reqwest::Client,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Onlooker {
    fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
    fn last(&self) -> Seen {
        *self
            .seen
            .lock()
            .unwrap()
            .last()
            .expect("an exchange was seen")
    }
}

/// The proxy: forwards `POST /ohttp` to the relay unchanged and notes both body sizes.
async fn forward(State(o): State<Onlooker>, headers: HeaderMap, body: Bytes) -> Response {
    let mut request = o.http.post(format!("{}/ohttp", o.relay_url));
    for name in ["content-type", TARGET_HEADER] {
        if let Some(value) = headers.get(name) {
            request = request.header(name, value);
        }
    }
    let answer = request
        .body(body.clone())
        .send()
        .await
        .expect("relay answers");
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
    let content_type = answer.headers().get("content-type").cloned();
    let answer = answer.bytes().await.expect("relay body");
    o.seen.lock().unwrap().push(Seen {
        request: body.len(),
        response: answer.len(),
    });
    let mut response = (status, answer).into_response();
    if let Some(ct) = content_type {
        response.headers_mut().insert("content-type", ct);
    }
    response
}

struct Stack {
    _chain: Chain,
    _dir: tempfile::TempDir,
    relayer: Relayer,
    onlooker: Onlooker,
    transport: OhttpTransport,
    _tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// A real relayer (OHTTP on, batches of at least 2 records, no time-based flush, so a lone
/// record stays queued), a real relay that verified its heartbeat, the onlooker's proxy in
/// front of the relay, and a client transport whose relay URL is the proxy.
async fn stack() -> Stack {
    let chain = Chain::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = RelayerConfig::for_tests(dir.path());
    config.block_time = Duration::from_millis(100);
    config.ohttp_seed = Some(OhttpSeed::new([11u8; 32]));
    config.batching.min_batch = 2;
    config.batching.max_wait = Duration::from_millis(600_000);
    let relayer = Relayer::start(config, chain.reader.clone(), chain.writer(0).await)
        .await
        .expect("relayer starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while relayer.health().await.heartbeat.is_empty() {
        assert!(Instant::now() < deadline, "no heartbeat");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let relay = OhttpRelay::new(chain.reader.clone(), {
        let mut c = RelayConfig::default();
        c.allow_http = true;
        c
    })
    .unwrap();
    assert_eq!(relay.refresh().await.unwrap(), 1);
    let (relay_url, relay_task) = serve(relay.router()).await;
    let onlooker = Onlooker {
        relay_url,
        http: reqwest::Client::new(),
        seen: Arc::default(),
    };
    let proxy = Router::new()
        .route("/ohttp", post(forward))
        .with_state(onlooker.clone());
    let (proxy_url, proxy_task) = serve(proxy).await;
    let transport = OhttpTransport::new(&proxy_url, chain.reader.clone()).unwrap();
    // The client confirms the heartbeat's key with an encapsulated GET /v1/info first.
    transport.gateway_key(relayer.url()).await.unwrap();
    assert_eq!(onlooker.count(), 1);
    Stack {
        _chain: chain,
        _dir: dir,
        relayer,
        onlooker,
        transport,
        _tasks: vec![relay_task, proxy_task],
    }
}

/// A valid, freshly sealed submission whose `note` attribute has `note_len` characters and
/// whose payload has `data_len` bytes.
fn submission(note_len: usize, data_len: usize) -> Vec<u8> {
    let key = SigningKey::random(&mut rand::thread_rng());
    let owner = alloy_primitives::Address::from_public_key(key.verifying_key());
    let mut attrs = Attributes::new();
    attrs.insert("project", APP).unwrap();
    attrs.insert("note", "n".repeat(note_len).as_str()).unwrap();
    let body = EnvelopeBody {
        app: APP.into(),
        exp: 3600,
        hour: privsvc_envelope::hour_of(privsvc_relayer::testing::now_ms() / 1000),
        ct: "text/plain".into(),
        enc: false,
        types: attrs.types(),
        data: vec![b'd'; data_len],
    };
    let sealed = seal_envelope(&body, &attrs, &key).unwrap();
    serde_json::to_vec(&json!({
        "app": APP,
        "owner": owner.to_string(),
        "envelope": sealed,
        "attributes": attrs.to_wire(),
        "expSeconds": 3600,
    }))
    .unwrap()
}

fn post_records(body: Vec<u8>) -> RelayerRequest {
    RelayerRequest {
        method: "POST".into(),
        path: "/v1/records".into(),
        body: Some(body),
    }
}

/// Send through the client transport; returns the answer and what the onlooker saw of it.
async fn exchange(s: &Stack, request: RelayerRequest) -> (u16, Value, Seen) {
    let before = s.onlooker.count();
    let answer = s.transport.send(s.relayer.url(), request).await.unwrap();
    assert_eq!(s.onlooker.count(), before + 1, "one exchange on the link");
    let body = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    (answer.status, body, s.onlooker.last())
}

async fn submit(s: &Stack, body: Vec<u8>) -> (String, Seen) {
    let (status, answer, seen) = exchange(s, post_records(body)).await;
    assert_eq!(status, 202, "{answer}");
    (answer["id"].as_str().unwrap().to_string(), seen)
}

async fn wait_written(s: &Stack, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, answer, _) = exchange(s, get(&format!("/v1/records/{id}"))).await;
        if answer["state"] == "written" {
            return;
        }
        assert!(Instant::now() < deadline, "record not written: {answer}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const SMALL_REQUEST: usize = REQUEST_CLASSES[0] + REQUEST_OVERHEAD;
/// Every submission, whatever its size: the submission class.
const SUBMISSION_REQUEST: usize = SUBMISSION_CLASS + REQUEST_OVERHEAD;
const SMALL_RESPONSE: usize = RESPONSE_CLASSES[0] + RESPONSE_OVERHEAD;

#[tokio::test]
async fn onlooker_cannot_tell_submission_lengths_or_record_states() {
    let s = stack().await;

    // Three valid submissions whose attributes and payloads differ in length: the onlooker
    // sees three identical sizes, the submission class.
    let bodies = [submission(1, 1), submission(120, 300), submission(40, 150)];
    let lengths: Vec<usize> = bodies.iter().map(Vec::len).collect();
    assert!(
        lengths[0] < lengths[1] && lengths[1] != lengths[2],
        "the plaintexts really differ: {lengths:?}"
    );
    let [a, b, c] = bodies;
    let (first, seen_a) = submit(&s, a).await;
    let (_, seen_b) = submit(&s, b).await; // with `first`, a batch of 2: written
    wait_written(&s, &first).await;
    let (queued, seen_c) = submit(&s, c).await; // alone: stays queued
    for seen in [seen_a, seen_b, seen_c] {
        assert_eq!(
            seen.request, SUBMISSION_REQUEST,
            "{seen:?}, plaintexts {lengths:?}"
        );
        assert_eq!(seen.response, SMALL_RESPONSE, "202 answers: {seen:?}");
    }

    // Status of a written record, of a queued one, of an unknown id, and the info document:
    // different answers, one size.
    let (status_w, written, seen_w) = exchange(&s, get(&format!("/v1/records/{first}"))).await;
    let (status_q, queued_answer, seen_q) =
        exchange(&s, get(&format!("/v1/records/{queued}"))).await;
    let (status_u, unknown, seen_u) =
        exchange(&s, get("/v1/records/00000000-0000-4000-8000-000000000000")).await;
    let (status_i, info, seen_i) = exchange(&s, get("/v1/info")).await;
    assert_eq!(
        (status_w, written["state"].as_str()),
        (200, Some("written"))
    );
    assert_eq!(
        (status_q, queued_answer["state"].as_str()),
        (200, Some("queued"))
    );
    assert_eq!(status_u, 404, "{unknown}");
    assert_eq!(status_i, 200);
    assert!(info["address"].is_string());
    let plain_lengths: Vec<usize> = [&written, &queued_answer, &unknown, &info]
        .iter()
        .map(|v| v.to_string().len())
        .collect();
    assert!(
        plain_lengths[0] > plain_lengths[1] + 100,
        "the answers themselves differ: {plain_lengths:?}"
    );
    for seen in [seen_w, seen_q, seen_u, seen_i] {
        assert_eq!(seen.response, SMALL_RESPONSE, "{seen:?}");
        assert_eq!(seen.request, SMALL_REQUEST, "{seen:?}");
    }
    s.relayer.shutdown().await;
}

#[tokio::test]
async fn requests_move_exactly_one_class_at_a_boundary() {
    let s = stack().await;
    let parsed = url::Url::parse(s.relayer.url()).unwrap();
    let authority = format!("{}:{}", parsed.host_str().unwrap(), parsed.port().unwrap());
    // The Binary HTTP length of a POST whose body has `n` bytes, as the client encodes it for
    // this relayer: an issue request (any request but a submission, which takes at least the
    // submission class whatever its length).
    let post_issue = |body: Vec<u8>| RelayerRequest {
        method: "POST".into(),
        path: "/v1/tokens/issue".into(),
        body: Some(body),
    };
    let bhttp_len = |n: usize| {
        let request = post_issue(vec![b'x'; n]);
        encode_request(&to_binary_request(&request), parsed.scheme(), &authority)
            .unwrap()
            .len()
    };
    let body_for = |target: usize| {
        let mut n = target - bhttp_len(0);
        while bhttp_len(n) > target {
            n -= 1;
        }
        assert_eq!(bhttp_len(n), target);
        n
    };
    // (Binary HTTP length, encapsulated size the onlooker must see.)
    let cases = [
        (1, REQUEST_CLASSES[0]),
        (REQUEST_CLASSES[0], REQUEST_CLASSES[0]),
        (REQUEST_CLASSES[0] + 1, REQUEST_CLASSES[1]),
        (REQUEST_CLASSES[1], REQUEST_CLASSES[1]),
        (REQUEST_CLASSES[1] + 1, REQUEST_CLASSES[2]),
        (REQUEST_CLASSES[2], REQUEST_CLASSES[2]),
    ];
    for (target, class) in cases {
        let target = target.max(bhttp_len(0));
        let request = post_issue(vec![b'x'; body_for(target)]);
        let (status, answer, seen) = exchange(&s, request).await;
        // The relayer refuses these requests (its issuer is off); its answer is still padded
        // to the smallest response class.
        assert!((400..500).contains(&status), "{status} {answer}");
        assert_eq!(seen.request, class + REQUEST_OVERHEAD, "bhttp {target}");
        assert_eq!(seen.response, SMALL_RESPONSE, "bhttp {target}");
    }
    // One byte over the largest class: the client refuses before sending anything.
    let before = s.onlooker.count();
    let request = post_issue(vec![b'x'; body_for(REQUEST_CLASSES[2]) + 1]);
    let err = OhttpError::from(
        s.transport
            .send(s.relayer.url(), request)
            .await
            .unwrap_err(),
    );
    assert!(
        matches!(err, OhttpError::TooLarge { limit: 131_072, .. }),
        "{err:?}"
    );
    assert_eq!(s.onlooker.count(), before, "nothing was sent");
    s.relayer.shutdown().await;
}
