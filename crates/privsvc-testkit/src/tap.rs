//! `Tap`: a recording HTTP proxy in a party's position. It forwards every request to its target
//! unchanged and records what that party sees: the source address, the arrival and answer times,
//! method, path, headers and both bodies, and, in front of a relayer whose OHTTP seed it knows,
//! the request inside each `POST /v1/ohttp`. An [`Interceptor`] makes the party active: it can
//! answer instead of forwarding, hold a request, or send requests of its own.
//!
//! A tap forwards each request from its client's own loopback address (a client of its own per
//! IPv4 loopback source), so the party behind it sees the real source and its per-source limits
//! and `OHTTP_RELAY_IPS` apply as they would without the tap.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use privsvc_ohttp::OhttpGateway;
use tokio::task::JoinHandle;

/// Largest request body a tap accepts (the largest OHTTP request class and some margin).
const MAX_BODY: usize = 1024 * 1024;
/// Time limit of one forwarded request.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(60);

/// A request as the tap received it (or as an interceptor makes one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapRequest {
    /// The connection's source address.
    pub source: IpAddr,
    /// HTTP method, upper case.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Header fields, names lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl TapRequest {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The request inside an OHTTP message, as the relayer that can decrypt it sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedRequest {
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// The body, padding removed.
    pub body: Vec<u8>,
}

/// One request and its answer, as the party in the tap's position saw them.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// Order of arrival at this tap.
    pub id: u64,
    /// The name of the tap (`rpc`, `relay`, a relayer's name).
    pub tap: String,
    /// When the request arrived.
    pub at: Instant,
    /// When the answer was sent.
    pub done: Instant,
    /// The request.
    pub request: TapRequest,
    /// The answer's status (502 when the target did not answer).
    pub status: u16,
    /// The answer's body.
    pub response: Vec<u8>,
    /// The request inside a `POST /v1/ohttp` the tap could open.
    pub opened: Option<OpenedRequest>,
    /// Sent by the tap's interceptor (a replay, a filler), not by a client.
    pub injected: bool,
}

/// What an interceptor does with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Forward it to the target as it is.
    Forward,
    /// Answer it without forwarding.
    Respond {
        /// Status code.
        status: u16,
        /// `content-type` of the answer.
        content_type: Option<String>,
        /// The answer's body.
        body: Vec<u8>,
    },
}

/// An active party: decides what happens to each request before it is forwarded. It may wait
/// (holding the request) and send requests of its own through the [`Forwarder`].
#[async_trait]
pub trait Interceptor: Send + Sync {
    /// Called for every client request, before it is forwarded.
    async fn intercept(&self, request: &TapRequest, forward: &Forwarder) -> Action;
}

struct Inner {
    name: String,
    target: RwLock<Option<String>>,
    log: Mutex<Vec<Exchange>>,
    gateway: Option<OhttpGateway>,
    interceptor: RwLock<Option<Arc<dyn Interceptor>>>,
    client: reqwest::Client,
    /// Clients bound to each IPv4 loopback source seen, so the target sees that source.
    clients_by_source: Mutex<HashMap<IpAddr, reqwest::Client>>,
    next_id: AtomicU64,
}

/// Sends requests to a tap's target and records them as injected exchanges.
#[derive(Clone)]
pub struct Forwarder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("tap", &self.inner.name)
            .finish()
    }
}

/// The answer of a forwarded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    /// Status code (502 when the target did not answer).
    pub status: u16,
    /// `content-type`.
    pub content_type: Option<String>,
    /// Body.
    pub body: Vec<u8>,
}

impl Forwarder {
    /// The target's base URL.
    pub fn target(&self) -> Option<String> {
        self.inner
            .target
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Sends `request` to the target and records it as injected by the tap.
    pub async fn send(&self, request: &TapRequest) -> Forwarded {
        let at = Instant::now();
        let answer = self.inner.forward(request).await;
        self.inner.record(request.clone(), at, &answer, true);
        answer
    }
}

impl Inner {
    /// The client that forwards from `source` (the shared one for a source it cannot bind).
    fn client_for(&self, source: IpAddr) -> reqwest::Client {
        if !(source.is_ipv4() && source.is_loopback()) {
            return self.client.clone();
        }
        let mut clients = self
            .clients_by_source
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(&source) {
            return c.clone();
        }
        match forwarding_client(Some(source)) {
            Ok(c) => {
                clients.insert(source, c.clone());
                c
            }
            Err(_) => self.client.clone(),
        }
    }

    async fn forward(&self, request: &TapRequest) -> Forwarded {
        let Some(target) = self
            .target
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        else {
            return bad_gateway("the tap has no target yet");
        };
        let method = Method::from_bytes(request.method.as_bytes()).unwrap_or(Method::GET);
        let mut builder = self
            .client_for(request.source)
            .request(method, format!("{target}{}", request.path));
        for (name, value) in &request.headers {
            if !matches!(
                name.as_str(),
                "host" | "content-length" | "connection" | "transfer-encoding"
            ) {
                builder = builder.header(name, value);
            }
        }
        let sent = builder.body(request.body.clone()).send().await;
        let answer = match sent {
            Ok(answer) => answer,
            Err(e) => return bad_gateway(&e.without_url().to_string()),
        };
        let status = answer.status().as_u16();
        let content_type = answer
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        match answer.bytes().await {
            Ok(body) => Forwarded {
                status,
                content_type,
                body: body.to_vec(),
            },
            Err(e) => bad_gateway(&e.without_url().to_string()),
        }
    }

    fn record(&self, request: TapRequest, at: Instant, answer: &Forwarded, injected: bool) {
        let opened = match &self.gateway {
            Some(g) if request.method == "POST" && request.path == "/v1/ohttp" => {
                g.open(&request.body).ok().map(|(r, _)| OpenedRequest {
                    method: r.method,
                    path: r.path,
                    body: r.body,
                })
            }
            _ => None,
        };
        let exchange = Exchange {
            id: self.next_id.fetch_add(1, Ordering::SeqCst),
            tap: self.name.clone(),
            at,
            done: Instant::now(),
            request,
            status: answer.status,
            response: answer.body.clone(),
            opened,
            injected,
        };
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(exchange);
    }
}

fn bad_gateway(reason: &str) -> Forwarded {
    Forwarded {
        status: 502,
        content_type: Some("application/json".into()),
        body: format!("{{\"error\":{reason:?}}}").into_bytes(),
    }
}

/// A recording proxy on loopback. Stops when dropped.
pub struct Tap {
    url: String,
    addr: SocketAddr,
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tap")
            .field("name", &self.inner.name)
            .field("url", &self.url)
            .finish()
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Tap {
    /// A tap called `name` listening on `bind` (an ephemeral port), forwarding to `target`
    /// (set it later with [`Tap::set_target`] when the target is not known yet). With
    /// `ohttp_seed`, it opens each `POST /v1/ohttp` with the gateway key of that seed.
    pub async fn start(
        name: &str,
        bind: IpAddr,
        target: Option<String>,
        ohttp_seed: Option<&[u8; 32]>,
    ) -> Result<Tap, crate::StackError> {
        let gateway = match ohttp_seed {
            Some(seed) => Some(OhttpGateway::from_seed(seed)?),
            None => None,
        };
        let client = forwarding_client(None)
            .map_err(|e| crate::StackError::Config(format!("http client: {e}")))?;
        let inner = Arc::new(Inner {
            name: name.to_string(),
            target: RwLock::new(target.map(|t| t.trim_end_matches('/').to_string())),
            log: Mutex::new(Vec::new()),
            gateway,
            interceptor: RwLock::new(None),
            client,
            clients_by_source: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        });
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(bind, 0)).await?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .fallback(handle)
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .with_state(inner.clone());
        let task = tokio::spawn(async move {
            let service = app.into_make_service_with_connect_info::<SocketAddr>();
            if let Err(e) = axum::serve(listener, service).await {
                tracing::warn!(error = %e, "a tap stopped");
            }
        });
        Ok(Tap {
            url: format!("http://{addr}"),
            addr,
            inner,
            task,
        })
    }

    /// The tap's URL (what clients are given instead of the target's).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The tap's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Points the tap at `target` (a base URL).
    pub fn set_target(&self, target: &str) {
        *self.inner.target.write().unwrap_or_else(|p| p.into_inner()) =
            Some(target.trim_end_matches('/').to_string());
    }

    /// Makes the tap's party active (`None`: passive again).
    pub fn set_interceptor(&self, interceptor: Option<Arc<dyn Interceptor>>) {
        *self
            .inner
            .interceptor
            .write()
            .unwrap_or_else(|p| p.into_inner()) = interceptor;
    }

    /// A forwarder to the tap's target (for an interceptor built outside the tap).
    pub fn forwarder(&self) -> Forwarder {
        Forwarder {
            inner: self.inner.clone(),
        }
    }

    /// Everything recorded so far, in arrival order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        let mut log = self
            .inner
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        log.sort_by_key(|e| e.id);
        log
    }

    /// Forgets everything recorded so far.
    pub fn clear(&self) {
        self.inner
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    let request = TapRequest {
        source: peer.ip(),
        method: method.as_str().to_string(),
        path: uri
            .path_and_query()
            .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string()),
        headers: headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.to_vec(),
    };
    let interceptor = inner
        .interceptor
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let action = match interceptor {
        Some(i) => {
            i.intercept(
                &request,
                &Forwarder {
                    inner: inner.clone(),
                },
            )
            .await
        }
        None => Action::Forward,
    };
    let answer = match action {
        Action::Forward => inner.forward(&request).await,
        Action::Respond {
            status,
            content_type,
            body,
        } => Forwarded {
            status,
            content_type,
            body,
        },
    };
    inner.record(request, at, &answer, false);
    let mut response = (
        StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY),
        answer.body,
    )
        .into_response();
    if let Some(ct) = answer
        .content_type
        .and_then(|c| HeaderValue::from_str(&c).ok())
    {
        response.headers_mut().insert("content-type", ct);
    }
    response
}

/// An HTTP client for forwarding, bound to `source` when given.
fn forwarding_client(source: Option<IpAddr>) -> Result<reqwest::Client, reqwest::Error> {
    let mut b = reqwest::Client::builder()
        .timeout(FORWARD_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none());
    if let Some(ip) = source {
        b = b.local_address(ip);
    }
    b.build()
}
