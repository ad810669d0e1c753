//! Everything logged (TRACE, all targets) while clients hit the relay's per-address rate limit
//! through `RelayListener`: the listener keeps the peer IP for the limit, yet no log line may
//! hold it (axum's connection traces print it as `<peer>`).
//!
//! One test per process: it installs the global subscriber.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use common::{addr, relayer, serve, Chain};
use privsvc_ohttp::{
    ohttp_call, OhttpError, OhttpGateway, OhttpRelay, RelayConfig, RelayerRequest,
    SILENCE_OHTTP_LOGS,
};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The client's source address: appears nowhere else in this test's setup.
const CLIENT_IP: &str = "127.0.0.2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_relay_logs_no_client_address() {
    let logs = Buffer::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(format!(
            "trace,{SILENCE_OHTTP_LOGS}"
        )))
        .with_ansi(false)
        .without_time()
        .with_writer(move || writer.clone())
        .try_init()
        .expect("global subscriber");

    let gateway = Arc::new(OhttpGateway::from_seed(b"relay log capture seed, 32 bytes").unwrap());
    let (relayer_url, _t1) = serve(relayer(addr(0), Some(gateway.clone()))).await;
    let chain = Chain::start().await;
    chain
        .heartbeat(0, &relayer_url, Some(&gateway.public_key()))
        .await;
    let relay = OhttpRelay::new(
        chain.reader.clone(),
        RelayConfig {
            allow_http: true,
            rate_limit_per_min: 1,
            ..RelayConfig::default()
        },
    )
    .unwrap();
    assert_eq!(relay.refresh().await.unwrap(), 1);
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_url = format!("http://{}", tcp.local_addr().unwrap());
    let serving = relay.clone();
    let _t2 = tokio::spawn(async move { serving.serve(tcp).await.unwrap() });

    let client = reqwest::Client::builder()
        .local_address(CLIENT_IP.parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    let info = RelayerRequest {
        method: "GET".into(),
        path: "/v1/info".into(),
        body: None,
    };
    let key = gateway.public_key();
    let ok = ohttp_call(&relay_url, &relayer_url, &key, info.clone(), &client)
        .await
        .unwrap();
    assert_eq!(ok.status, 200);
    let refused = ohttp_call(&relay_url, &relayer_url, &key, info, &client).await;
    assert!(
        matches!(refused, Err(OhttpError::Refused { status: 429, .. })),
        "{refused:?}"
    );

    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    // TRACE was captured, connection traces included (with the peer printed as `<peer>`).
    assert!(text.contains("connection <peer> accepted"), "{text}");
    assert!(!text.contains(CLIENT_IP), "client address logged:\n{text}");
}
