//! Everything logged (TRACE, all targets) while clients hit the relay's per-address rate limit
//! through `PrivateListener::keeping_ip`: the listener keeps the peer IP for the limit, yet no log line may
//! hold it (axum's connection traces print it as `<peer>`).
//!
//! One test per process: it installs the global subscriber.

mod common;

use common::{capture_logs, client_from, get, relayed, serve_relay_listener};
use privsvc_ohttp::{ohttp_call, OhttpError, RelayConfig};

/// The client's source address: appears nowhere else in this test's setup.
const CLIENT_IP: &str = "127.0.0.2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_relay_logs_no_client_address() {
    let logs = capture_logs();

    let s = relayed(b"relay log capture seed, 32 bytes", "127.0.0.1", {
        let mut c = RelayConfig::default();
        c.allow_http = true;
        c.rate_limit_per_min = 1;
        c
    })
    .await;
    let (relay_url, _t2) = serve_relay_listener(&s.relay).await;
    let relayer_url = &s.relayer_url;

    let client = client_from(CLIENT_IP);
    let info = get("/v1/info");
    let key = s.gateway.public_key();
    let ok = ohttp_call(
        &relay_url,
        relayer_url,
        &key,
        info.clone(),
        &privsvc_ohttp::ReqwestFetch::with_client(client.clone()),
    )
    .await
    .unwrap();
    assert_eq!(ok.status, 200);
    let refused = ohttp_call(
        &relay_url,
        relayer_url,
        &key,
        info,
        &privsvc_ohttp::ReqwestFetch::with_client(client),
    )
    .await;
    assert!(
        matches!(refused, Err(OhttpError::Refused { status: 429, .. })),
        "{refused:?}"
    );

    let text = logs.text();
    // TRACE was captured, connection traces included (with the peer printed as `<peer>`).
    assert!(text.contains("connection <peer> accepted"), "{text}");
    assert!(!text.contains(CLIENT_IP), "client address logged:\n{text}");
}
