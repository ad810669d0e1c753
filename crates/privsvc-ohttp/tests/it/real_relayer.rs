//! The whole path with the real relayer (privsvc-relayer) on a devnet: the relayer publishes its
//! heartbeat, the relay verifies it, and `OhttpTransport` finds the gateway key in the heartbeat
//! and reaches the relayer's endpoints through `POST /ohttp` -> `POST /v1/ohttp`.

use std::time::{Duration, Instant};

use privsvc_ohttp::{
    OhttpGateway, OhttpRelay, OhttpTransport, RelayConfig, RelayerRequest, Transport,
    MAX_ENCAPSULATED_BYTES,
};
use privsvc_relayer::{OhttpSeed, Relayer, RelayerConfig};

use crate::common::{get, Chain};

const SEED: [u8; 32] = [5u8; 32];

async fn start_relayer(chain: &Chain, dir: &tempfile::TempDir, ohttp: bool) -> Relayer {
    let mut config = RelayerConfig::for_tests(dir.path());
    config.block_time = Duration::from_millis(100);
    config.ohttp_seed = ohttp.then(|| OhttpSeed::new(SEED));
    let account = if ohttp { 0 } else { 1 };
    let relayer = Relayer::start(config, chain.reader.clone(), chain.writer(account).await)
        .await
        .expect("relayer starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while relayer.health().await.heartbeat.is_empty() {
        assert!(Instant::now() < deadline, "no heartbeat");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    relayer
}

#[tokio::test]
async fn client_relay_real_relayer() {
    let chain = Chain::start().await;
    let dir = tempfile::tempdir().unwrap();
    let relayer = start_relayer(&chain, &dir, true).await;

    let relay = OhttpRelay::new(chain.reader.clone(), {
        let mut c = RelayConfig::default();
        c.allow_http = true;
        c
    })
    .unwrap();
    assert_eq!(relay.refresh().await.unwrap(), 1);
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_url = format!("http://{}", tcp.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(
            privsvc_ohttp::PrivateListener::anonymous(tcp),
            relay.router(),
        )
        .await
        .unwrap()
    });

    let transport = OhttpTransport::new(&relay_url, chain.reader.clone()).unwrap();
    let info = transport
        .send(relayer.url(), get("/v1/info"))
        .await
        .unwrap();
    assert_eq!(info.status, 200);
    let info: serde_json::Value = serde_json::from_slice(&info.body).unwrap();
    let address: alloy_primitives::Address = info["address"].as_str().unwrap().parse().unwrap();
    assert_eq!(address, relayer.address());
    // The relayer's key is the one our derivation gives for its seed, and the one the transport
    // took from the heartbeat.
    let expected = OhttpGateway::from_seed(&SEED).unwrap().public_key();
    assert_eq!(info["ohttpKey"], expected);
    assert_eq!(
        transport.gateway_key(relayer.url()).await.unwrap(),
        expected
    );

    // POST /v1/records reaches the real validation (a body that is not a submit request).
    let rejected = transport
        .send(
            relayer.url(),
            RelayerRequest {
                method: "POST".into(),
                path: "/v1/records".into(),
                body: Some(br#"{"app":"demo"}"#.to_vec()),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        rejected.status,
        400,
        "{}",
        String::from_utf8_lossy(&rejected.body)
    );
    let unknown = transport
        .send(
            relayer.url(),
            get("/v1/records/00000000-0000-4000-8000-000000000000"),
        )
        .await
        .unwrap();
    assert_eq!(unknown.status, 404);
    relayer.shutdown().await;
}

#[tokio::test]
async fn real_relayer_gateway_statuses() {
    let chain = Chain::start().await;
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let on = start_relayer(&chain, &d1, true).await;
    let off = start_relayer(&chain, &d2, false).await;
    let http = reqwest::Client::new();
    let post = |url: String, body: Vec<u8>| {
        http.post(format!("{url}/v1/ohttp"))
            .header("content-type", "message/ohttp-req")
            .body(body)
            .send()
    };
    let status = post(off.url().to_string(), vec![1; 64])
        .await
        .unwrap()
        .status();
    assert_eq!(status, 404);
    let status = post(on.url().to_string(), vec![1; 64])
        .await
        .unwrap()
        .status();
    assert_eq!(status, 400);
    let status = post(on.url().to_string(), vec![1; MAX_ENCAPSULATED_BYTES + 1])
        .await
        .unwrap()
        .status();
    assert_eq!(status, 413);
    on.shutdown().await;
    off.shutdown().await;
}
