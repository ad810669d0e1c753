//! The OHTTP relay on loopback: target verification from heartbeats, the full round trip
//! client -> relay -> gateway -> relayer router, every error status, header stripping and
//! connection pooling.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderMap;
use axum::routing::post;
use axum::Router;
use privsvc_ohttp::{
    ohttp_call, OhttpError, OhttpGateway, OhttpRelay, RelayConfig, RelayerRequest,
    MAX_ENCAPSULATED_BYTES,
};

use crate::common::{
    addr, client_from, get, relayed, relayer, serve, serve_recording, serve_relay_listener,
    served_stack, Chain, Relayed, Stack,
};

/// Heartbeat interval of these tests: live = created within the last 10 blocks.
const INTERVAL: Duration = Duration::from_secs(10);

fn config() -> RelayConfig {
    let mut c = RelayConfig::default();
    c.refresh_interval = Duration::from_millis(100);
    c.heartbeat_interval = INTERVAL;
    c.info_timeout = Duration::from_secs(2);
    c.forward_timeout = Duration::from_secs(5);
    c.allow_http = true;
    c.on_demand_refresh_gap = Duration::from_secs(3600);
    c
}

/// One relayer (dev account 0) with a live heartbeat on a devnet, and a relay that has
/// refreshed.
async fn stack() -> Stack {
    served_stack(b"relay test seed: 32 bytes long..", config()).await
}

async fn raw_post(
    relay_url: &str,
    target: Option<&str>,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{relay_url}/ohttp"))
        .header("content-type", content_type)
        .body(body);
    if let Some(target) = target {
        request = request.header("x-privsvc-target", target);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    (
        status,
        body["error"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn round_trip_info_and_records() {
    let s = stack().await;
    let http = privsvc_ohttp::ReqwestFetch::with_client(reqwest::Client::new());
    let key = s.gateway.public_key();

    let info = ohttp_call(&s.relay_url, &s.relayer_url, &key, get("/v1/info"), &http)
        .await
        .unwrap();
    assert_eq!(info.status, 200);
    let json: serde_json::Value = serde_json::from_slice(&info.body).unwrap();
    assert_eq!(json["address"], addr(0).to_checksum(None));
    assert_eq!(json["ohttpKey"], key);

    let created = ohttp_call(
        &s.relay_url,
        &format!("{}/", s.relayer_url), // trailing slash: same target
        &key,
        RelayerRequest {
            method: "POST".into(),
            path: "/v1/records".into(),
            body: Some(br#"{"app":"round-trip"}"#.to_vec()),
        },
        &http,
    )
    .await
    .unwrap();
    assert_eq!(created.status, 202);
    let json: serde_json::Value = serde_json::from_slice(&created.body).unwrap();
    assert_eq!(json["app"], "round-trip");
    assert_eq!(json["id"], "rec-0");

    // Relayer-level errors come back sealed, with their status.
    let missing = ohttp_call(
        &s.relay_url,
        &s.relayer_url,
        &key,
        get("/v1/records/x"),
        &http,
    )
    .await
    .unwrap();
    assert_eq!(missing.status, 404);
    // The relay URL may also be given with its /ohttp path.
    let again = ohttp_call(
        &format!("{}/ohttp", s.relay_url),
        &s.relayer_url,
        &key,
        get("/v1/info"),
        &http,
    )
    .await
    .unwrap();
    assert_eq!(again.status, 200);
    // Every call above was forwarded and answered by the relayer, the 404 included.
    assert_eq!(s.relay.forwarded(), 4);
}

#[tokio::test]
async fn healthz_counts_verified_targets() {
    let s = stack().await;
    let health: serde_json::Value = reqwest::get(format!("{}/healthz", s.relay_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        health,
        serde_json::json!({"ok": true, "role": "ohttp-relay", "targets": 1})
    );
    assert_eq!(s.relay.targets(), vec![s.relayer_url.clone()]);
}

#[tokio::test]
async fn only_verified_targets() {
    let s = stack().await;
    let http = privsvc_ohttp::ReqwestFetch::with_client(reqwest::Client::new());
    let key = s.gateway.public_key();

    // A relayer whose only heartbeat is older than two intervals (then account 0 publishes its
    // next heartbeat, as relayers do).
    let (stale_url, _t2) = serve(relayer(addr(3), Some(s.gateway.clone()))).await;
    s.chain.heartbeat(3, &stale_url, Some(&key)).await;
    s.chain.mine(11);
    s.chain.heartbeat(0, &s.relayer_url, Some(&key)).await;
    // A relayer whose /v1/info address (account 2) is not its heartbeat's creator (account 1).
    let (liar_url, _t1) = serve(relayer(addr(2), Some(s.gateway.clone()))).await;
    s.chain.heartbeat(1, &liar_url, Some(&key)).await;
    // A relayer with no heartbeat at all.
    let (unknown_url, _t3) = serve(relayer(addr(4), Some(s.gateway.clone()))).await;
    // A heartbeat naming a URL where nothing answers.
    s.chain.heartbeat(4, "http://127.0.0.1:9", Some(&key)).await;
    assert_eq!(s.relay.refresh().await.unwrap(), 1);
    assert_eq!(s.relay.targets(), vec![s.relayer_url.clone()]);

    for target in [liar_url.as_str(), stale_url.as_str(), unknown_url.as_str()] {
        let err = ohttp_call(&s.relay_url, target, &key, get("/v1/info"), &http)
            .await
            .unwrap_err();
        match err {
            OhttpError::Refused { status, message } => {
                assert_eq!((status, message.as_str()), (403, "target not verified"))
            }
            other => panic!("expected 403, got {other:?}"),
        }
    }
    let (status, _) = raw_post(
        &s.relay_url,
        Some("not a url"),
        "message/ohttp-req",
        vec![1],
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(s.relay.forwarded(), 0, "refused requests are not counted");

    // Once account 2 publishes a heartbeat for that URL, it is verified on the next refresh.
    s.chain.heartbeat(2, &liar_url, Some(&key)).await;
    assert_eq!(s.relay.refresh().await.unwrap(), 2);
    let ok = ohttp_call(&s.relay_url, &liar_url, &key, get("/v1/info"), &http)
        .await
        .unwrap();
    assert_eq!(ok.status, 200);
    assert_eq!(s.relay.forwarded(), 1);
}

#[tokio::test]
async fn unknown_targets_trigger_a_rate_limited_refresh() {
    let s = stack().await;
    let http = privsvc_ohttp::ReqwestFetch::with_client(reqwest::Client::new());
    let key = s.gateway.public_key();
    let relay = OhttpRelay::new(s.chain.reader.clone(), {
        let mut c = config();
        c.on_demand_refresh_gap = Duration::from_millis(300);
        c
    })
    .unwrap();
    let (relay_url, _t) = serve(relay.router()).await;
    // Never refreshed: the first request for a target refreshes on demand and is served.
    let ok = ohttp_call(&relay_url, &s.relayer_url, &key, get("/v1/info"), &http)
        .await
        .unwrap();
    assert_eq!(ok.status, 200);

    // A relayer that starts now: within the gap the relay does not look again (403) ...
    let (new_url, _t2) = serve(relayer(addr(1), Some(s.gateway.clone()))).await;
    s.chain.heartbeat(1, &new_url, Some(&key)).await;
    let err = ohttp_call(&relay_url, &new_url, &key, get("/v1/info"), &http)
        .await
        .unwrap_err();
    assert!(
        matches!(err, OhttpError::Refused { status: 403, .. }),
        "{err:?}"
    );
    // ... after it, the unknown target triggers a refresh and is served.
    tokio::time::sleep(Duration::from_millis(350)).await;
    let ok = ohttp_call(&relay_url, &new_url, &key, get("/v1/info"), &http)
        .await
        .unwrap();
    assert_eq!(ok.status, 200);
    assert_eq!(relay.targets().len(), 2);
}

#[tokio::test]
async fn https_only_unless_allowed() {
    let s = stack().await;
    let strict = OhttpRelay::new(s.chain.reader.clone(), {
        let mut c = config();
        c.allow_http = false;
        c
    })
    .unwrap();
    assert_eq!(strict.refresh().await.unwrap(), 0);
}

#[tokio::test]
async fn periodic_refresh_picks_up_new_heartbeats() {
    let s = stack().await;
    let (late_url, _t) = serve(relayer(addr(1), Some(s.gateway.clone()))).await;
    let task = s.relay.spawn_refresh();
    s.chain.heartbeat(1, &late_url, None).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while s.relay.targets().len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "refresh did not run"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    task.abort();
}

#[tokio::test]
async fn error_statuses() {
    let s = stack().await;
    let http = privsvc_ohttp::ReqwestFetch::with_client(reqwest::Client::new());
    let key = s.gateway.public_key();
    let target = Some(s.relayer_url.as_str());

    // 400: no target header.
    let (status, error) = raw_post(&s.relay_url, None, "message/ohttp-req", vec![1]).await;
    assert_eq!(
        (status, error.as_str()),
        (400, "missing x-privsvc-target header")
    );
    // 415: wrong content type.
    let (status, _) = raw_post(&s.relay_url, target, "application/json", vec![1]).await;
    assert_eq!(status, 415);
    // 413: over the largest request class plus the OHTTP overhead.
    let (status, error) = raw_post(
        &s.relay_url,
        target,
        "message/ohttp-req",
        vec![0u8; MAX_ENCAPSULATED_BYTES + 1],
    )
    .await;
    assert_eq!(
        (status, error.as_str()),
        (413, "encapsulated request over 131127 bytes")
    );
    // The gateway's 400 (cannot open) passes through the relay.
    let (status, error) = raw_post(&s.relay_url, target, "message/ohttp-req", vec![1; 64]).await;
    assert_eq!(
        (status, error.as_str()),
        (400, "the encapsulated request cannot be opened")
    );
    let wrong_key = OhttpGateway::from_seed(b"some other gateway key, 32 bytes")
        .unwrap()
        .public_key();
    let err = ohttp_call(
        &s.relay_url,
        &s.relayer_url,
        &wrong_key,
        get("/v1/info"),
        &http,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, OhttpError::Refused { status: 400, .. }),
        "{err:?}"
    );

    // 502: the relayer's gateway answers 5xx.
    let (broken_url, _t) = serve(
        Router::new()
            .route(
                "/v1/info",
                axum::routing::get(|| async {
                    axum::Json(serde_json::json!({"address": addr(3).to_checksum(None)}))
                }),
            )
            .route(
                "/v1/ohttp",
                post(|| async { (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "down") }),
            ),
    )
    .await;
    s.chain.heartbeat(3, &broken_url, None).await;
    assert_eq!(s.relay.refresh().await.unwrap(), 2);
    let (status, error) = raw_post(
        &s.relay_url,
        Some(&broken_url),
        "message/ohttp-req",
        vec![1],
    )
    .await;
    assert_eq!((status, error.as_str()), (502, "the relayer failed"));

    // 502: the relayer went away after verification.
    let (gone_url, gone_task) = serve(relayer(addr(4), Some(s.gateway.clone()))).await;
    s.chain.heartbeat(4, &gone_url, Some(&key)).await;
    assert_eq!(s.relay.refresh().await.unwrap(), 3);
    gone_task.abort();
    let _ = gone_task.await;
    let err = ohttp_call(&s.relay_url, &gone_url, &key, get("/v1/info"), &http)
        .await
        .unwrap_err();
    assert!(
        matches!(err, OhttpError::Refused { status: 502, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn forwards_no_client_headers_and_pools_one_connection() {
    // A target that records the headers of every forwarded request.
    let seen: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let recorder = seen.clone();
    let target_router = Router::new()
        .route(
            "/v1/info",
            axum::routing::get(|| async {
                axum::Json(serde_json::json!({"address": addr(0).to_checksum(None)}))
            }),
        )
        .route(
            "/v1/ohttp",
            post(move |headers: HeaderMap, body: axum::body::Bytes| {
                let recorder = recorder.clone();
                async move {
                    let mut names: Vec<String> =
                        headers.keys().map(|k| k.as_str().to_string()).collect();
                    names.sort();
                    recorder.lock().unwrap().push(names);
                    (
                        [("content-type", "message/ohttp-res")],
                        body.iter().rev().copied().collect::<Vec<u8>>(),
                    )
                }
            }),
        );
    let (target_url, peers, _t) = serve_recording(target_router, "127.0.0.1").await;
    let chain = Chain::start().await;
    chain.heartbeat(0, &target_url, None).await;
    let relay = OhttpRelay::new(chain.reader.clone(), config()).unwrap();
    relay.refresh().await.unwrap();
    let connections_after_verification = peers.count();
    let (relay_url, _r) = serve(relay.router()).await;

    let client = reqwest::Client::new();
    for _ in 0..3 {
        let response = client
            .post(format!("{relay_url}/ohttp"))
            .header("content-type", "message/ohttp-req")
            .header("x-privsvc-target", &target_url)
            .header("x-forwarded-for", "198.51.100.1")
            .header("forwarded", "for=198.51.100.1")
            .header("cookie", "session=secret")
            .header("user-agent", "client-agent/1.0")
            .header("authorization", "Bearer secret")
            .header("referer", "https://client.example/")
            .header("accept-language", "de")
            .body(vec![1u8, 2, 3])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "message/ohttp-res"
        );
        // The relayer's answer comes back unchanged.
        assert_eq!(response.bytes().await.unwrap().as_ref(), &[3u8, 2, 1]);
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    for names in seen {
        for name in &names {
            assert!(
                ["accept", "content-length", "content-type", "host"].contains(&name.as_str()),
                "forwarded header {name}"
            );
        }
    }
    // Three forwarded requests, one pooled connection.
    assert_eq!(peers.count() - connections_after_verification, 1);
}

#[tokio::test]
async fn rate_limit_per_source_address_through_the_relay_listener() {
    let Relayed {
        gateway,
        relayer_url,
        relay,
        relayer_task: _relayer_task,
        ..
    } = relayed(b"relay rate limit seed, 32 bytes.", "127.0.0.1", {
        let mut c = config();
        c.rate_limit_per_min = 3;
        c
    })
    .await;
    let (relay_url, _relay_task) = serve_relay_listener(&relay).await;
    let key = gateway.public_key();

    // Three requests from 127.0.0.1 pass (one pooled connection).
    let first_client = client_from("127.0.0.1");
    let first = privsvc_ohttp::ReqwestFetch::with_client(first_client.clone());
    for _ in 0..3 {
        let info = ohttp_call(&relay_url, &relayer_url, &key, get("/v1/info"), &first)
            .await
            .unwrap();
        assert_eq!(info.status, 200);
    }
    // The fourth is refused, whatever the connection.
    match ohttp_call(&relay_url, &relayer_url, &key, get("/v1/info"), &first).await {
        Err(OhttpError::Refused {
            status: 429,
            message,
        }) => {
            assert!(
                message.contains("more than 3 requests a minute"),
                "{message}"
            )
        }
        other => panic!("expected 429, got {other:?}"),
    }
    let response = client_from("127.0.0.1")
        .post(format!("{relay_url}/ohttp"))
        .header("content-type", "message/ohttp-req")
        .header("x-privsvc-target", &relayer_url)
        .body(vec![0u8; 64])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 429);
    let retry: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let body: serde_json::Value = response.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("retry in"),
        "{body}"
    );

    // Another source address still passes; /healthz is not limited.
    let other = ohttp_call(
        &relay_url,
        &relayer_url,
        &key,
        get("/v1/info"),
        &privsvc_ohttp::ReqwestFetch::with_client(client_from("127.0.0.2")),
    )
    .await
    .unwrap();
    assert_eq!(other.status, 200);
    let health = first_client
        .get(format!("{relay_url}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
}

/// A client with an IPv6 /64 sends each request from another of its 2^64 addresses: the relay
/// counts the /64 as one source. Driven in-process through the relay's router with the source
/// address its listener would report (this machine cannot bind many addresses of one /64).
#[tokio::test]
async fn an_ipv6_slash_64_is_one_source_at_the_relay() {
    use axum::body::Body;
    use axum::extract::ConnectInfo;
    use axum::http::Request;
    use privsvc_ohttp::PeerIp;
    use tower::ServiceExt as _;

    let Relayed {
        relay,
        relayer_task: _relayer_task,
        ..
    } = relayed(b"relay slash-64 seed, 32 bytes...", "127.0.0.1", {
        let mut c = config();
        c.rate_limit_per_min = 3;
        c
    })
    .await;
    let router = relay.router();
    let from = |ip: std::net::IpAddr| {
        let router = router.clone();
        async move {
            // No target header: 400 when the request is not over the limit.
            let mut request = Request::post("/ohttp").body(Body::empty()).unwrap();
            request
                .extensions_mut()
                .insert(ConnectInfo(PeerIp::from(ip)));
            router.oneshot(request).await.unwrap().status().as_u16()
        }
    };
    let mut statuses = Vec::new();
    for i in 0..20u32 {
        let ip = format!("2001:db8:4:4:{:x}::{:x}", i, i + 1)
            .parse()
            .unwrap();
        statuses.push(from(ip).await);
    }
    assert_eq!(statuses[..3], [400; 3], "{statuses:?}");
    assert!(statuses[3..].iter().all(|s| *s == 429), "{statuses:?}");
    assert_eq!(from("2001:db8:4:5::1".parse().unwrap()).await, 400);
    assert_eq!(from("::ffff:192.0.2.1".parse().unwrap()).await, 400);
}
