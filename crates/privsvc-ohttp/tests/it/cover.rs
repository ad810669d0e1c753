//! Cover traffic and the submission class on loopback: a dummy goes through the relay and is
//! answered by the gateway alone, after the time a real answer takes; every submission leaves
//! the client in the submission class, whatever its size.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::routing::get as get_route;
use axum::Router;
use privsvc_ohttp::{
    encapsulate, gateway_router, ohttp_call, send_dummy, Fetch, FetchRequest, FetchResponse,
    HttpError, OhttpGateway, OhttpTransport, RelayConfig, RelayerRequest, ReqwestFetch,
};
use privsvc_ohttp::{REQUEST_OVERHEAD, SUBMISSION_CLASS};

use crate::common::{get, serve, served_stack};

/// A `Fetch` that records the size of every body it sends (what leaves the client).
#[derive(Default)]
struct Measured {
    inner: Option<ReqwestFetch>,
    sizes: Mutex<Vec<usize>>,
}

#[async_trait]
impl Fetch for Measured {
    async fn fetch(
        &self,
        request: FetchRequest,
        timeout: Duration,
        max_body: usize,
    ) -> Result<FetchResponse, HttpError> {
        let size = request.body.as_ref().map_or(0, Vec::len);
        self.sizes.lock().unwrap().push(size);
        self.inner
            .as_ref()
            .expect("a client")
            .fetch(request, timeout, max_body)
            .await
    }
}

fn measured() -> Measured {
    Measured {
        inner: Some(ReqwestFetch::with_client(reqwest::Client::new())),
        sizes: Mutex::default(),
    }
}

fn config() -> RelayConfig {
    let mut c = RelayConfig::default();
    c.heartbeat_interval = Duration::from_secs(10);
    c.allow_http = true;
    c.on_demand_refresh_gap = Duration::from_secs(3600);
    c
}

fn submission(body_len: usize) -> RelayerRequest {
    let mut body = br#"{"app":"demo","envelope":""#.to_vec();
    body.resize(body.len() + body_len, b'x');
    body.extend_from_slice(br#""}"#);
    RelayerRequest {
        method: "POST".into(),
        path: "/v1/records".into(),
        body: Some(body),
    }
}

#[tokio::test]
async fn every_submission_leaves_the_client_in_the_submission_class() {
    let s = served_stack(b"cover test seed: 32 bytes long..", config()).await;
    let key = s.gateway.public_key();
    let http = measured();
    // A small record, one with the largest envelope (16 384 bytes, escaped quotes and all,
    // with its attributes), and a status poll.
    for request in [
        submission(300),
        submission(16_384 + 6_000),
        get("/v1/records/x"),
    ] {
        ohttp_call(&s.relay_url, &s.relayer_url, &key, request, &http)
            .await
            .unwrap();
    }
    let sizes = http.sizes.lock().unwrap().clone();
    assert_eq!(
        sizes,
        vec![
            SUBMISSION_CLASS + REQUEST_OVERHEAD,
            SUBMISSION_CLASS + REQUEST_OVERHEAD,
            4_096 + REQUEST_OVERHEAD
        ]
    );
}

#[tokio::test]
async fn a_dummy_through_the_relay_is_answered_by_the_gateway_alone() {
    let s = served_stack(b"cover test seed: 32 bytes long..", config()).await;
    let key = s.gateway.public_key();
    let http = measured();
    send_dummy(
        &s.relay_url,
        &s.relayer_url,
        &key,
        SUBMISSION_CLASS,
        0,
        &http,
    )
    .await
    .unwrap();
    assert_eq!(
        http.sizes.lock().unwrap().clone(),
        vec![SUBMISSION_CLASS + REQUEST_OVERHEAD]
    );
    assert_eq!(s.gateway.dummies_answered(), 1);
    assert_eq!(
        s.gateway.real_requests(),
        0,
        "nothing reached the relayer's routes"
    );
    // The relay forwarded it like any request.
    assert_eq!(s.relay.forwarded(), 1);
    // A dummy asking for a larger answer gets it (and still opens).
    send_dummy(&s.relay_url, &s.relayer_url, &key, 0, 8_192, &http)
        .await
        .unwrap();
    assert_eq!(s.gateway.dummies_answered(), 2);
    // The transport sends one with the relayer's key.
    let transport = OhttpTransport::without_ledger(&s.relay_url).unwrap();
    transport.set_gateway_key(&s.relayer_url, &key).unwrap();
    transport
        .send_dummy(&s.relayer_url, SUBMISSION_CLASS, 0)
        .await
        .unwrap();
    assert_eq!(s.gateway.dummies_answered(), 3);
    assert_eq!(s.gateway.real_requests(), 0);
}

/// POST an encapsulated `request` to `url`'s gateway; the time until its answer is opened.
async fn timed(url: &str, key: &str, request: RelayerRequest) -> (u16, Duration) {
    let binary = privsvc_ohttp::to_binary_request(&request);
    let (message, pending) = encapsulate(key, &binary, "http", "relayer.test").unwrap();
    let started = Instant::now();
    let r = reqwest::Client::new()
        .post(format!("{url}/v1/ohttp"))
        .header("content-type", "message/ohttp-req")
        .body(message)
        .send()
        .await
        .unwrap();
    let answer = pending.open(&r.bytes().await.unwrap()).unwrap();
    (answer.status, started.elapsed())
}

#[tokio::test]
async fn a_dummy_is_answered_after_the_time_of_a_real_answer() {
    const SLOW: Duration = Duration::from_millis(400);
    let gateway = Arc::new(OhttpGateway::from_seed(&[3u8; 32]).unwrap());
    let inner = Router::new().route(
        "/slow",
        get_route(|| async {
            tokio::time::sleep(SLOW).await;
            "{}"
        }),
    );
    let (url, _task) = serve(gateway_router(Some(gateway.clone()), inner)).await;
    let key = gateway.public_key();
    let dummy = || RelayerRequest {
        method: "POST".into(),
        path: "/v1/dummy".into(),
        body: Some(b"{}".to_vec()),
    };
    // No real answer yet: nothing to imitate.
    let (status, took) = timed(&url, &key, dummy()).await;
    assert!(status == 200 && took < SLOW, "{status} {took:?}");
    // Once real answers took 400 ms, so does a dummy.
    for _ in 0..2 {
        assert_eq!(timed(&url, &key, get("/slow")).await.0, 200);
    }
    let (status, took) = timed(&url, &key, dummy()).await;
    assert!(status == 200 && took >= SLOW, "{status} {took:?}");
    assert_eq!(
        (gateway.real_requests(), gateway.dummies_answered()),
        (2, 2)
    );
}
