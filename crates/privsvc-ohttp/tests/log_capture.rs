//! Everything logged (TRACE, all targets, `log` records included) while clients talk through the
//! relay and the gateway: no client address and no request or response body may appear.
//!
//! One test per process: it installs the global subscriber.

mod common;

use common::{capture_logs, get, relayed, serve_recording, Relayed};
use privsvc_ohttp::{ohttp_call, RelayConfig, RelayerRequest, MAX_ENCAPSULATED_BYTES};

const BODY_MARKER: &str = "BODY-MARKER-5d1e";
const FORGED_ADDRESS: &str = "198.51.100.77";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_and_gateway_log_no_client_address_or_body() {
    let logs = capture_logs();

    // Relayer (addressed as localhost, so its URL holds no client-like IP) and relay.
    let Relayed {
        gateway,
        relayer_url,
        relay,
        relayer_task: _t1,
        ..
    } = relayed(b"log capture seed, 32 bytes long.", "localhost", {
        let mut c = RelayConfig::default();
        c.allow_http = true;
        c
    })
    .await;
    let (relay_url, client_peers, _t2) = serve_recording(relay.router(), "127.0.0.1").await;

    // Successful calls carrying the marker in both directions.
    let http = reqwest::Client::new();
    let fetch = privsvc_ohttp::ReqwestFetch::with_client(http.clone());
    let key = gateway.public_key();
    let created = ohttp_call(
        &relay_url,
        &relayer_url,
        &key,
        RelayerRequest {
            method: "POST".into(),
            path: "/v1/records".into(),
            body: Some(format!(r#"{{"app":"{BODY_MARKER}"}}"#).into_bytes()),
        },
        &fetch,
    )
    .await
    .unwrap();
    assert_eq!(created.status, 202);
    assert!(String::from_utf8_lossy(&created.body).contains(BODY_MARKER));
    let info = ohttp_call(
        &relay_url,
        &relayer_url,
        &key,
        get(&format!("/v1/records/{BODY_MARKER}")),
        &fetch,
    )
    .await
    .unwrap();
    assert_eq!(info.status, 404);

    // Failing calls: unopenable (400), unverified target (403), too large (413), with forged
    // forwarding headers and the marker in the raw body.
    for (target, body, expected) in [
        (relayer_url.as_str(), BODY_MARKER.as_bytes().to_vec(), 400),
        (
            "http://unverified.test",
            BODY_MARKER.as_bytes().to_vec(),
            403,
        ),
        (
            relayer_url.as_str(),
            BODY_MARKER
                .repeat(MAX_ENCAPSULATED_BYTES / BODY_MARKER.len() + 1)
                .into_bytes(),
            413,
        ),
    ] {
        let response = http
            .post(format!("{relay_url}/ohttp"))
            .header("content-type", "message/ohttp-req")
            .header("x-privsvc-target", target)
            .header("x-forwarded-for", FORGED_ADDRESS)
            .header("x-real-ip", FORGED_ADDRESS)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), expected);
    }

    // Control: plain `axum::serve` on a TcpListener logs peer addresses at TRACE, so this
    // capture would see a leak (proves the assertions below can fail).
    let control = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let control_url = format!("http://{}", control.local_addr().unwrap());
    let control_task = tokio::spawn(async move {
        axum::serve(control, axum::Router::new()).await.unwrap();
    });
    let _ = http.get(&control_url).send().await.unwrap();
    control_task.abort();

    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let text = logs.text();
    let (control_lines, text): (Vec<&str>, Vec<&str>) = text
        .lines()
        .partition(|line| line.contains("axum::serve") && line.contains("accepted"));
    let text = text.join("\n");
    if std::env::var_os("PRIVSVC_DUMP_LOGS").is_some() {
        eprintln!("{text}");
    }

    // The capture works: our own events and axum's are there.
    assert!(text.contains("relay targets refreshed"), "{text}");
    assert!(text.contains("ohttp request served"), "{text}");
    assert!(text.contains("ohttp request could not be opened"), "{text}");
    assert!(
        control_lines.iter().any(|l| l.contains("127.0.0.1:")),
        "control leak not captured: {control_lines:?}"
    );

    // No key material from the ohttp crate's traces.
    assert!(!text.contains("okm="), "derived keys in logs");
    assert!(
        !text.contains("ohttp::rh"),
        "ohttp key schedule traces in logs"
    );

    // No body text, no forged address, no client address (the relay's peers).
    assert!(!text.contains(BODY_MARKER), "body in logs:\n{text}");
    assert!(!text.contains(FORGED_ADDRESS), "forged address in logs");
    let peers = client_peers.all();
    assert!(!peers.is_empty());
    for peer in peers {
        assert!(
            !text.contains(&peer.to_string()),
            "client address {peer} in logs"
        );
        assert!(
            !text.contains(&format!(":{}", peer.port())),
            "client port {} in logs",
            peer.port()
        );
    }
    // Relay and gateway lines never mention a loopback IP at all.
    for line in text
        .lines()
        .filter(|l| l.contains("privsvc_ohttp") || l.contains("axum"))
    {
        assert!(!line.contains("127.0.0.1"), "address in: {line}");
    }
}
