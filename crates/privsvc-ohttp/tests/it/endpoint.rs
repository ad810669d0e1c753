//! The relayer's `POST /v1/ohttp` endpoint over loopback: dispatch and every error status.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Request};
use axum::routing::post;
use axum::{Extension, Router};
use privsvc_ohttp::to_binary_request;
use privsvc_ohttp::{
    encapsulate, gateway_router, BinaryRequest, OhttpGateway, RelayerRequest, ViaOhttp,
    MAX_ENCAPSULATED_BYTES,
};
use tower::ServiceExt;

use crate::common::{addr, get, relayer, serve};

const SEED: &[u8] = b"endpoint test seed, 32 bytes....";

fn gateway() -> Arc<OhttpGateway> {
    Arc::new(OhttpGateway::from_seed(SEED).unwrap())
}

async fn post_raw(url: &str, content_type: &str, body: Vec<u8>) -> (u16, String, Vec<u8>) {
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/ohttp"))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let ct = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, ct, response.bytes().await.unwrap().to_vec())
}

fn error_of(body: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).expect("JSON error body");
    v["error"].as_str().expect("error field").to_string()
}

async fn call(
    url: &str,
    gateway: &OhttpGateway,
    request: RelayerRequest,
) -> privsvc_ohttp::OhttpResponse {
    let (message, pending) = encapsulate(
        &gateway.public_key(),
        &to_binary_request(&request),
        "http",
        "relayer.test",
    )
    .unwrap();
    let (status, ct, body) = post_raw(url, "message/ohttp-req", message).await;
    assert_eq!((status, ct.as_str()), (200, "message/ohttp-res"));
    pending.open(&body).unwrap()
}

#[tokio::test]
async fn dispatches_every_endpoint_in_process() {
    let gateway = gateway();
    let (url, _task) = serve(relayer(addr(0), Some(gateway.clone()))).await;

    let info = call(&url, &gateway, get("/v1/info")).await;
    assert_eq!(info.status, 200);
    assert_eq!(info.header("content-type"), Some("application/json"));
    let json: serde_json::Value = serde_json::from_slice(&info.body).unwrap();
    assert_eq!(json["ohttpKey"], gateway.public_key());

    let created = call(
        &url,
        &gateway,
        RelayerRequest {
            method: "POST".into(),
            path: "/v1/records".into(),
            body: Some(br#"{"app":"demo"}"#.to_vec()),
        },
    )
    .await;
    assert_eq!(created.status, 202);
    let json: serde_json::Value = serde_json::from_slice(&created.body).unwrap();
    assert_eq!(json["app"], "demo");

    // Inner errors travel sealed inside a 200.
    let missing = call(&url, &gateway, get("/v1/records/nope")).await;
    assert_eq!(missing.status, 404);
    let boom = call(&url, &gateway, get("/boom")).await;
    assert_eq!(boom.status, 500);
    // No OHTTP inside OHTTP: the inner router has no /v1/ohttp.
    let nested = call(
        &url,
        &gateway,
        RelayerRequest {
            method: "POST".into(),
            path: "/v1/ohttp".into(),
            body: Some(b"{}".to_vec()),
        },
    )
    .await;
    assert_eq!(nested.status, 404);
}

#[tokio::test]
async fn error_statuses() {
    let gateway = gateway();
    let (url, _task) = serve(relayer(addr(0), Some(gateway.clone()))).await;
    let (off_url, _off) = serve(relayer(addr(0), None)).await;
    let (message, _) = encapsulate(
        &gateway.public_key(),
        &BinaryRequest {
            method: "GET".into(),
            path: "/v1/info".into(),
            headers: vec![],
            body: vec![],
        },
        "http",
        "",
    )
    .unwrap();

    // 404: OHTTP off.
    let (status, ct, body) = post_raw(&off_url, "message/ohttp-req", message.clone()).await;
    assert_eq!((status, ct.as_str()), (404, "application/json"));
    assert_eq!(error_of(&body), "OHTTP is off on this relayer");

    // 415: wrong content type.
    let (status, _, body) = post_raw(&url, "application/json", message.clone()).await;
    assert_eq!(status, 415);
    assert!(error_of(&body).contains("message/ohttp-req"));

    // 413: over the largest request class plus the OHTTP overhead (declared length).
    let (status, _, body) = post_raw(
        &url,
        "message/ohttp-req",
        vec![1u8; MAX_ENCAPSULATED_BYTES + 1],
    )
    .await;
    assert_eq!(status, 413);
    assert_eq!(MAX_ENCAPSULATED_BYTES, 131_072 + 55);
    assert_eq!(
        error_of(&body),
        "encapsulated request over 131127 bytes",
        "the limit fits the largest request class exactly"
    );

    // 400: cannot be opened (garbage exactly at the limit is 400, not 413).
    let (status, _, body) =
        post_raw(&url, "message/ohttp-req", vec![1u8; MAX_ENCAPSULATED_BYTES]).await;
    assert_eq!(status, 400);
    assert_eq!(error_of(&body), "the encapsulated request cannot be opened");
    let mut tampered = message.clone();
    tampered[20] ^= 0xff;
    let (status, _, _) = post_raw(&url, "message/ohttp-req", tampered).await;
    assert_eq!(status, 400);
    let (status, _, _) = post_raw(&url, "message/ohttp-req", Vec::new()).await;
    assert_eq!(status, 400);

    // Content type with parameters is accepted; the message itself is fine.
    let (status, _, _) = post_raw(&url, "message/ohttp-req; x=1", message).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn streamed_body_over_the_limit_is_413() {
    // No Content-Length: the limit is enforced while reading.
    let app = gateway_router(Some(gateway()), Router::new());
    let chunks = (0..5).map(|_| Ok::<_, std::io::Error>(vec![0u8; 30 * 1024]));
    let request = Request::post("/v1/ohttp")
        .header("content-type", "message/ohttp-req")
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 413);
}

#[tokio::test]
async fn inner_requests_are_marked_and_carry_only_safe_headers() {
    let gateway = gateway();
    // The inner handler reports what it saw.
    let api = Router::new().route(
        "/echo",
        post(
            |via: Option<Extension<ViaOhttp>>, headers: HeaderMap, body: String| async move {
                let mut names: Vec<String> =
                    headers.keys().map(|k| k.as_str().to_string()).collect();
                names.sort();
                axum::Json(serde_json::json!({
                    "via": via.is_some(),
                    "headers": names,
                    "body": body,
                }))
            },
        ),
    );
    let (url, _task) = serve(
        api.clone()
            .merge(gateway_router(Some(gateway.clone()), api)),
    )
    .await;
    let request = BinaryRequest {
        method: "POST".into(),
        path: "/echo".into(),
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("x-forwarded-for".into(), "203.0.113.7".into()),
            ("forwarded".into(), "for=203.0.113.7".into()),
            ("cookie".into(), "session=1".into()),
            ("host".into(), "evil.example".into()),
        ],
        body: b"\"hi\"".to_vec(),
    };
    let (message, pending) =
        encapsulate(&gateway.public_key(), &request, "http", "relayer.test").unwrap();
    let (status, _, body) = post_raw(&url, "message/ohttp-req", message).await;
    assert_eq!(status, 200);
    let answer = pending.open(&body).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(json["via"], true);
    assert_eq!(json["headers"], serde_json::json!(["content-type"]));
    assert_eq!(json["body"], "\"hi\"");
}

/// Answers padded to response classes over HTTP: the sealed body is class + 32 bytes, one byte
/// more moves it one class up, and an answer too large for the largest class arrives as a
/// sealed 502 of the smallest class instead of leaking its size.
#[tokio::test]
async fn answers_are_padded_to_response_classes() {
    use privsvc_ohttp::encode_response;
    use privsvc_ohttp::{RESPONSE_CLASSES, RESPONSE_OVERHEAD};

    let gateway = gateway();
    let api = Router::new().route(
        "/sized/{n}",
        axum::routing::get(
            |axum::extract::Path(n): axum::extract::Path<usize>| async move {
                ([("content-type", "application/json")], vec![b'x'; n])
            },
        ),
    );
    let app = api
        .clone()
        .merge(gateway_router(Some(gateway.clone()), api));
    let (url, _task) = serve(app).await;
    let headers = [("content-type".to_string(), "application/json".to_string())];
    // The body length whose Binary HTTP answer is exactly `target` bytes.
    let body_for = |target: usize| {
        let len = |n: usize| {
            encode_response(200, &headers, &vec![b'x'; n])
                .unwrap()
                .len()
        };
        let mut n = target - len(0);
        while len(n) > target {
            n -= 1;
        }
        assert_eq!(len(n), target);
        n
    };
    let cases = [
        (0, RESPONSE_CLASSES[0]),
        (body_for(RESPONSE_CLASSES[0]), RESPONSE_CLASSES[0]),
        (body_for(RESPONSE_CLASSES[0] + 1), RESPONSE_CLASSES[1]),
        (body_for(RESPONSE_CLASSES[1] + 1), RESPONSE_CLASSES[2]),
        (body_for(RESPONSE_CLASSES[2]), RESPONSE_CLASSES[2]),
    ];
    for (n, class) in cases {
        let (message, pending) = encapsulate(
            &gateway.public_key(),
            &to_binary_request(&get(&format!("/sized/{n}"))),
            "http",
            "relayer.test",
        )
        .unwrap();
        let (status, _, sealed) = post_raw(&url, "message/ohttp-req", message).await;
        assert_eq!(status, 200);
        assert_eq!(sealed.len(), class + RESPONSE_OVERHEAD, "body {n}");
        let answer = pending.open(&sealed).unwrap();
        assert_eq!((answer.status, answer.body.len()), (200, n));
    }
    // One byte over the largest class: a sealed 502 with a JSON error, smallest class.
    let n = body_for(RESPONSE_CLASSES[2] + 1);
    let (message, pending) = encapsulate(
        &gateway.public_key(),
        &to_binary_request(&get(&format!("/sized/{n}"))),
        "http",
        "relayer.test",
    )
    .unwrap();
    let (status, _, sealed) = post_raw(&url, "message/ohttp-req", message).await;
    assert_eq!(status, 200);
    assert_eq!(sealed.len(), RESPONSE_CLASSES[0] + RESPONSE_OVERHEAD);
    let answer = pending.open(&sealed).unwrap();
    assert_eq!(answer.status, 502);
    assert!(error_of(&answer.body).contains("too large for OHTTP"));
}

/// An inner answer carrying `MinResponseClass` is padded to at least that class, whatever its
/// status or length: a tiny 200 and a tiny 404 of such a route measure the same as a large
/// answer of the class, and an answer larger than the class keeps its own, larger class.
#[tokio::test]
async fn min_response_class_raises_small_answers_to_one_size() {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use privsvc_ohttp::MinResponseClass;
    use privsvc_ohttp::{RESPONSE_CLASSES, RESPONSE_OVERHEAD};

    let gateway = gateway();
    let api = Router::new()
        .route(
            "/small",
            axum::routing::get(|| async { "ok".into_response() }),
        )
        .route(
            "/missing",
            axum::routing::get(|| async { (StatusCode::NOT_FOUND, "{}").into_response() }),
        )
        .route(
            "/large",
            axum::routing::get(|| async { vec![b'x'; 10_000].into_response() }),
        )
        .layer(axum::middleware::map_response(
            |mut r: axum::response::Response| async move {
                r.extensions_mut()
                    .insert(MinResponseClass(RESPONSE_CLASSES[1]));
                r
            },
        ))
        .route("/plain", axum::routing::get(|| async { "plain" }));
    let app = api
        .clone()
        .merge(gateway_router(Some(gateway.clone()), api));
    let (url, _task) = serve(app).await;
    for (path, status, class) in [
        ("/small", 200, RESPONSE_CLASSES[1]),
        ("/missing", 404, RESPONSE_CLASSES[1]),
        ("/large", 200, RESPONSE_CLASSES[2]),
        ("/plain", 200, RESPONSE_CLASSES[0]),
    ] {
        let (message, pending) = encapsulate(
            &gateway.public_key(),
            &to_binary_request(&get(path)),
            "http",
            "relayer.test",
        )
        .unwrap();
        let (outer, _, sealed) = post_raw(&url, "message/ohttp-req", message).await;
        assert_eq!(outer, 200);
        assert_eq!(sealed.len(), class + RESPONSE_OVERHEAD, "{path}");
        assert_eq!(pending.open(&sealed).unwrap().status, status, "{path}");
    }
}
