//! CORS of the JSON-RPC server, as a browser meets it: a real preflight over loopback, then the
//! request itself from another origin.

use privsvc_devnet::{Devnet, DevnetConfig};
use reqwest::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS, ACCESS_CONTROL_REQUEST_METHOD,
    CONTENT_TYPE, ORIGIN,
};
use reqwest::Method;
use serde_json::{json, Value as Json};

const PAGE: &str = "http://127.0.0.1:5173";

fn header(r: &reqwest::Response, name: reqwest::header::HeaderName) -> String {
    r.headers()
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} in the answer: {:?}", r.headers()))
        .to_str()
        .expect("ASCII header")
        .to_ascii_lowercase()
}

#[tokio::test]
async fn a_page_of_another_origin_may_send_json_rpc() {
    let node = Devnet::start(DevnetConfig::on_demand()).await.unwrap();
    let http = reqwest::Client::new();

    // The preflight a browser sends before a JSON POST to another origin.
    let pre = http
        .request(Method::OPTIONS, node.url())
        .header(ORIGIN, PAGE)
        .header(ACCESS_CONTROL_REQUEST_METHOD, "POST")
        .header(ACCESS_CONTROL_REQUEST_HEADERS, "content-type")
        .send()
        .await
        .unwrap();
    assert!(pre.status().is_success(), "preflight: {}", pre.status());
    assert_eq!(header(&pre, ACCESS_CONTROL_ALLOW_ORIGIN), "*");
    let methods = header(&pre, ACCESS_CONTROL_ALLOW_METHODS);
    for m in ["post", "get", "options"] {
        assert!(methods.contains(m), "allowed methods: {methods}");
    }
    assert!(
        header(&pre, ACCESS_CONTROL_ALLOW_HEADERS).contains("content-type"),
        "allowed headers"
    );
    assert_eq!(header(&pre, ACCESS_CONTROL_MAX_AGE), "600");

    // The request itself: answered, with the header a browser needs to hand the answer over.
    let r = http
        .post(node.url())
        .header(ORIGIN, PAGE)
        .header(CONTENT_TYPE, "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}).to_string())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    assert_eq!(header(&r, ACCESS_CONTROL_ALLOW_ORIGIN), "*");
    let body: Json = r.json().await.unwrap();
    assert!(body["result"].as_str().unwrap().starts_with("0x"), "{body}");

    // A JSON-RPC error answer carries it too (a page reads the error, not a CORS failure).
    let bad = http
        .post(node.url())
        .header(ORIGIN, PAGE)
        .header(CONTENT_TYPE, "application/json")
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(header(&bad, ACCESS_CONTROL_ALLOW_ORIGIN), "*");
    let body: Json = bad.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32700);
}
