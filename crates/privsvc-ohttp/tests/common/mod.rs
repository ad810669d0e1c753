//! Shared test harness: loopback servers, a small relayer API, and a ledger with heartbeats.
#![allow(dead_code)]

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use alloy_primitives::Address;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::{self, post};
use axum::{Json, Router};
use privsvc_devnet::{DevSigner, Devnet, DevnetConfig, DevnetHandle, DEV_PRIVATE_KEYS};
use privsvc_ledger::Heartbeat;
use privsvc_ledger::{LedgerReader, LedgerWriter, Operation, RpcLedger, RpcWriter};
use privsvc_ohttp::{
    gateway_router, OhttpGateway, OhttpRelay, RelayConfig, RelayerRequest, SILENCE_OHTTP_LOGS,
};
use tokio::net::{TcpListener, TcpStream};

/// Serve `router` on 127.0.0.1:0 without peer addresses; returns the base URL and the task.
pub async fn serve(router: Router) -> (String, tokio::task::JoinHandle<()>) {
    let (url, _, task) = serve_recording(router, "127.0.0.1").await;
    (url, task)
}

/// Records every accepted connection's peer address (test-side only; handlers never see it).
#[derive(Default, Clone)]
pub struct Peers(pub Arc<Mutex<Vec<std::net::SocketAddr>>>);

impl Peers {
    pub fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    pub fn all(&self) -> Vec<std::net::SocketAddr> {
        self.0.lock().unwrap().clone()
    }
}

struct RecordingListener {
    inner: TcpListener,
    peers: Peers,
}

impl axum::serve::Listener for RecordingListener {
    type Io = TcpStream;
    type Addr = ();

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            if let Ok((stream, peer)) = self.inner.accept().await {
                self.peers.0.lock().unwrap().push(peer);
                return (stream, ());
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(())
    }
}

/// Serve `router` on `127.0.0.1:0`; the URL uses `host` (e.g. `localhost`). Also returns the
/// recorded peers.
pub async fn serve_recording(
    router: Router,
    host: &str,
) -> (String, Peers, tokio::task::JoinHandle<()>) {
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tcp.local_addr().unwrap().port();
    let peers = Peers::default();
    let listener = RecordingListener {
        inner: tcp,
        peers: peers.clone(),
    };
    let task = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    (format!("http://{host}:{port}"), peers, task)
}

/// A minimal relayer API: `GET /v1/info`, `POST /v1/records` (202 with an id and the body's
/// `app`), `GET /v1/records/{id}` (404), `GET /boom` (500).
/// `/v1/info` publishes the gateway's current key, read on every request.
pub fn relayer_api(address: Address, gateway: Option<Arc<OhttpGateway>>) -> Router {
    let counter = Arc::new(AtomicUsize::new(0));
    Router::new()
        .route(
            "/v1/info",
            routing::get(move || async move {
                Json(serde_json::json!({
                    "address": address.to_checksum(None),
                    "version": "privsvc-relayer/1",
                    "chainId": 7738577,
                    "ohttpKey": gateway.as_ref().map(|g| g.public_key()),
                }))
            }),
        )
        .route(
            "/v1/records",
            post(move |body: axum::body::Bytes| {
                let counter = counter.clone();
                async move {
                    let Ok(value) = serde_json::from_slice::<serde_json::Value>(&body) else {
                        return (
                            StatusCode::BAD_REQUEST,
                            Json(serde_json::json!({"error": "body is not JSON"})),
                        );
                    };
                    let n = counter.fetch_add(1, Ordering::SeqCst);
                    (
                        StatusCode::ACCEPTED,
                        Json(serde_json::json!({"id": format!("rec-{n}"), "app": value["app"]})),
                    )
                }
            }),
        )
        .route(
            "/v1/records/{id}",
            routing::get(|Path(_id): Path<String>| async {
                (
                    StatusCode::NOT_FOUND,
                    Json(serde_json::json!({"error": "unknown id"})),
                )
            }),
        )
        .route(
            "/boom",
            routing::get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
        )
}

/// A relayer: its API plus `POST /v1/ohttp` with `gateway`.
pub fn relayer(address: Address, gateway: Option<Arc<OhttpGateway>>) -> Router {
    let api = relayer_api(address, gateway.clone());
    api.clone().merge(gateway_router(gateway, api))
}

/// The address of dev account `i` (0..5).
pub fn addr(i: usize) -> Address {
    DevSigner::dev(i).address()
}

/// A devnet (blocks on demand) with a JSON-RPC reader, on which dev accounts write heartbeats.
pub struct Chain {
    pub node: DevnetHandle,
    pub reader: Arc<dyn LedgerReader>,
    writers: Mutex<Vec<Option<Arc<RpcWriter>>>>,
}

impl Chain {
    pub async fn start() -> Chain {
        let node = Devnet::start(DevnetConfig::on_demand())
            .await
            .expect("devnet starts");
        let reader: Arc<dyn LedgerReader> =
            Arc::new(RpcLedger::new(node.url()).expect("rpc reader"));
        Chain {
            node,
            reader,
            writers: Mutex::new(vec![None; DEV_PRIVATE_KEYS.len()]),
        }
    }

    /// The writer of dev account `i` (one per account: it owns the account's nonces).
    pub async fn writer(&self, i: usize) -> Arc<RpcWriter> {
        if let Some(w) = self.writers.lock().unwrap()[i].clone() {
            return w;
        }
        let secret: [u8; 32] = hex::decode(DEV_PRIVATE_KEYS[i].trim_start_matches("0x"))
            .unwrap()
            .try_into()
            .unwrap();
        let ledger = RpcLedger::new(self.node.url()).unwrap();
        let w = Arc::new(RpcWriter::connect(ledger, &secret).await.expect("writer"));
        self.writers.lock().unwrap()[i] = Some(w.clone());
        w
    }

    /// Dev account `signer` publishes a heartbeat for `url` whose payload claims `claimed`.
    pub async fn heartbeat_claiming(
        &self,
        signer: usize,
        claimed: Address,
        url: &str,
        ohttp_key: Option<&str>,
    ) {
        let heartbeat = Heartbeat {
            url: url.to_string(),
            address: claimed,
            chain_id: self.node.chain_id(),
            version: "privsvc-relayer/1".into(),
            ohttp_key: ohttp_key.map(str::to_string),
        };
        let create = heartbeat
            .to_create(rand::random())
            .expect("heartbeat create");
        let receipt = self
            .writer(signer)
            .await
            .execute(&[Operation::Create(create)])
            .await
            .expect("heartbeat written");
        assert!(receipt.success, "{:?}", receipt.revert_reason);
    }

    /// Dev account `signer` publishes its heartbeat for `url`.
    pub async fn heartbeat(&self, signer: usize, url: &str, ohttp_key: Option<&str>) {
        self.heartbeat_claiming(signer, addr(signer), url, ohttp_key)
            .await;
    }

    /// Mine `n` empty blocks.
    pub fn mine(&self, n: u64) {
        self.node.mine_blocks(n).expect("mine");
    }
}

/// A `GET path` request to a relayer.
pub fn get(path: &str) -> RelayerRequest {
    RelayerRequest {
        method: "GET".into(),
        path: path.into(),
        body: None,
    }
}

/// A relayer (dev account 0) with a live heartbeat on a fresh devnet, and a relay that has
/// refreshed and verified it (not yet served).
pub struct Relayed {
    pub chain: Chain,
    pub gateway: Arc<OhttpGateway>,
    pub relayer_url: String,
    pub relay: OhttpRelay,
    pub relayer_task: tokio::task::JoinHandle<()>,
}

/// Start a [`Relayed`]: the gateway's key comes from `seed`, the relayer's URL names `host`
/// (e.g. `localhost`), the relay runs with `config`.
pub async fn relayed(seed: &[u8], host: &str, config: RelayConfig) -> Relayed {
    let chain = Chain::start().await;
    let gateway = Arc::new(OhttpGateway::from_seed(seed).unwrap());
    let (relayer_url, _, relayer_task) =
        serve_recording(relayer(addr(0), Some(gateway.clone())), host).await;
    chain
        .heartbeat(0, &relayer_url, Some(&gateway.public_key()))
        .await;
    let relay = OhttpRelay::new(chain.reader.clone(), config).unwrap();
    assert_eq!(relay.refresh().await.unwrap(), 1);
    Relayed {
        chain,
        gateway,
        relayer_url,
        relay,
        relayer_task,
    }
}

/// A [`Relayed`] whose relay router is served on 127.0.0.1:0.
pub struct Stack {
    pub chain: Chain,
    pub gateway: Arc<OhttpGateway>,
    pub relayer_url: String,
    pub relay: OhttpRelay,
    pub relay_url: String,
    _tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Start a [`Stack`]: [`relayed`] on 127.0.0.1 with `seed` and `config`, the relay served.
pub async fn served_stack(seed: &[u8], config: RelayConfig) -> Stack {
    let Relayed {
        chain,
        gateway,
        relayer_url,
        relay,
        relayer_task,
    } = relayed(seed, "127.0.0.1", config).await;
    let (relay_url, relay_task) = serve(relay.router()).await;
    Stack {
        chain,
        gateway,
        relayer_url,
        relay,
        relay_url,
        _tasks: vec![relayer_task, relay_task],
    }
}

/// A client whose connections leave from `ip` (any 127.0.0.0/8 address works on loopback).
pub fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip.parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// Serve `relay` through `PrivateListener::keeping_ip` (per-address rate limit) on 127.0.0.1:0;
/// returns the relay's URL and the task.
pub async fn serve_relay_listener(relay: &OhttpRelay) -> (String, tokio::task::JoinHandle<()>) {
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_url = format!("http://{}", tcp.local_addr().unwrap());
    let serving = relay.clone();
    let task = tokio::spawn(async move { serving.serve(tcp).await.unwrap() });
    (relay_url, task)
}

/// Everything the global subscriber installed by [`capture_logs`] writes.
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl Write for LogCapture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogCapture {
    /// The captured text so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Install the global subscriber (once per process) capturing everything at TRACE, except the
/// `ohttp` crate's own key-schedule traces (see SILENCE_OHTTP_LOGS), as every privsvc binary
/// configures it.
pub fn capture_logs() -> LogCapture {
    let logs = LogCapture::default();
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
    logs
}
