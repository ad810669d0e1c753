//! Shared test harness: loopback servers, a small relayer API, and a ledger with heartbeats.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use alloy_primitives::{Address, B256, U256};
use async_trait::async_trait;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use privsvc_ledger::{Entity, LedgerError, LedgerReader, QueryOptions, QueryPage};
use privsvc_ohttp::{gateway_router, Anonymous, OhttpGateway};
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
    type Addr = Anonymous;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            if let Ok((stream, peer)) = self.inner.accept().await {
                self.peers.0.lock().unwrap().push(peer);
                return (stream, Anonymous);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(Anonymous)
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
            get(move || async move {
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
            get(|Path(_id): Path<String>| async {
                (
                    StatusCode::NOT_FOUND,
                    Json(serde_json::json!({"error": "unknown id"})),
                )
            }),
        )
        .route(
            "/boom",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
        )
}

/// A relayer: its API plus `POST /v1/ohttp` with `gateway`.
pub fn relayer(address: Address, gateway: Option<Arc<OhttpGateway>>) -> Router {
    let api = relayer_api(address, gateway.clone());
    api.clone().merge(gateway_router(gateway, api))
}

/// A heartbeat entity as the ledger returns it.
pub fn heartbeat_entity(
    n: u8,
    creator: Address,
    claimed: Address,
    url: &str,
    ohttp_key: Option<&str>,
    created_at: u64,
) -> Entity {
    let payload = serde_json::json!({
        "url": url,
        "address": claimed.to_checksum(None),
        "chainId": 7738577,
        "version": "privsvc-relayer/1",
        "ohttpKey": ohttp_key,
    });
    Entity {
        key: B256::with_last_byte(n),
        creator: Some(creator),
        created_at: Some(created_at),
        payload: Some(serde_json::to_vec(&payload).unwrap()),
        ..Entity::default()
    }
}

/// An in-memory ledger holding heartbeat entities (answers every query with all of them).
#[derive(Default)]
pub struct HeartbeatLedger {
    pub head: Mutex<u64>,
    pub entities: Mutex<Vec<Entity>>,
    pub queries: Mutex<Vec<String>>,
}

impl HeartbeatLedger {
    pub fn new(head: u64) -> Arc<Self> {
        Arc::new(Self {
            head: Mutex::new(head),
            ..Self::default()
        })
    }
    pub fn push(&self, entity: Entity) {
        self.entities.lock().unwrap().push(entity);
    }
}

#[async_trait]
impl LedgerReader for HeartbeatLedger {
    async fn chain_id(&self) -> Result<u64, LedgerError> {
        Ok(7738577)
    }
    async fn block_number(&self) -> Result<u64, LedgerError> {
        Ok(*self.head.lock().unwrap())
    }
    async fn query(
        &self,
        expression: &str,
        _options: &QueryOptions,
    ) -> Result<QueryPage, LedgerError> {
        self.queries.lock().unwrap().push(expression.to_string());
        Ok(QueryPage {
            entities: self.entities.lock().unwrap().clone(),
            block_number: *self.head.lock().unwrap(),
            cursor: None,
        })
    }
    async fn entity(&self, _key: B256, _at: Option<u64>) -> Result<Option<Entity>, LedgerError> {
        Ok(None)
    }
    async fn code_at(&self, _address: Address) -> Result<Vec<u8>, LedgerError> {
        Ok(Vec::new())
    }
    async fn entity_nonce(&self, _address: Address) -> Result<u64, LedgerError> {
        Ok(0)
    }
    async fn balance(&self, _address: Address) -> Result<U256, LedgerError> {
        Ok(U256::ZERO)
    }
}

/// A deterministic test address.
pub fn addr(n: u8) -> Address {
    Address::with_last_byte(n)
}
