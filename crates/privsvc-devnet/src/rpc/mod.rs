//! JSON-RPC over HTTP (axum): the `eth_*` subset viem needs and the Arkiv `arkiv_*` methods.

mod arkiv;
pub mod json;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use alloy_primitives::{Address, Bytes, B256, U256};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, Method};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value as Json};
use tower_http::cors::{Any, CorsLayer};

use crate::chain::{CallRequest, Chain, SimRevert};

/// Shared node state behind the server.
pub struct Node {
    /// The chain.
    pub chain: Mutex<Chain>,
    /// Mine a block right after each accepted transaction.
    pub on_demand: bool,
    /// Installed polling filters (`eth_newFilter`, `eth_newBlockFilter`).
    pub filters: Mutex<Filters>,
}

/// One installed filter.
#[derive(Debug, Clone)]
enum FilterKind {
    Logs(serde_json::Map<String, Json>),
    Blocks,
}

/// Polling filters by id.
#[derive(Debug, Default)]
pub struct Filters {
    next: u64,
    installed: std::collections::HashMap<u64, (FilterKind, u64)>,
}

impl Node {
    /// Lock the chain (a poisoned lock is recovered: the chain is only mutated atomically).
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Chain> {
        self.chain.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A JSON-RPC error.
#[derive(Debug, Clone)]
pub struct RpcError {
    /// Code.
    pub code: i64,
    /// Message.
    pub message: String,
    /// Optional data.
    pub data: Option<Json>,
}

impl RpcError {
    /// An error without data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
    /// -32602.
    pub fn params(message: impl Into<String>) -> Self {
        Self::new(-32602, message)
    }
    fn revert(r: SimRevert) -> Self {
        let message = match &r.revert {
            crate::revert::Revert::Message(m) => format!("execution reverted: {m}"),
            other => format!("execution reverted: {}", other.describe()),
        };
        Self {
            code: 3,
            message,
            data: Some(json!(r.revert.data())),
        }
    }
}

type RpcResult = Result<Json, RpcError>;

/// How long a browser may keep the answer to a CORS preflight.
const CORS_MAX_AGE: Duration = Duration::from_secs(600);

/// Build the router.
pub fn router(node: Arc<Node>) -> Router {
    Router::new()
        .route("/", post(handle))
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .layer(cors())
        .with_state(node)
}

/// CORS as public nodes answer it: a page of any origin may send JSON-RPC (the preflight of a
/// JSON POST is answered, and every answer carries `Access-Control-Allow-Origin: *`).
fn cors() -> CorsLayer {
    CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::POST, Method::GET, Method::OPTIONS])
        .allow_headers([header::CONTENT_TYPE])
        .max_age(CORS_MAX_AGE)
}

async fn handle(State(node): State<Arc<Node>>, body: axum::body::Bytes) -> impl IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        reply(&node, &body),
    )
}

/// The JSON-RPC answer (as its JSON text) to one HTTP body: a single request or a batch.
pub(crate) fn reply(node: &Node, body: &[u8]) -> String {
    match serde_json::from_slice::<Json>(body) {
        Err(_) => error_reply(
            Json::Null,
            RpcError::new(-32700, "parse error: body is not JSON"),
        )
        .to_string(),
        Ok(Json::Array(reqs)) => {
            if reqs.is_empty() {
                error_reply(Json::Null, RpcError::new(-32600, "empty batch")).to_string()
            } else {
                let answers: Vec<String> = reqs.into_iter().map(|r| one(node, r)).collect();
                format!("[{}]", answers.join(","))
            }
        }
        Ok(req) => one(node, req),
    }
}

fn error_reply(id: Json, e: RpcError) -> Json {
    let mut err = json!({"code": e.code, "message": e.message});
    if let Some(d) = e.data {
        err["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": err})
}

/// The answer to one request, as JSON text.
fn one(node: &Node, req: Json) -> String {
    let id = req.get("id").cloned().unwrap_or(Json::Null);
    let Some(method) = req.get("method").and_then(|m| m.as_str()) else {
        return error_reply(id, RpcError::new(-32600, "invalid request: missing method"))
            .to_string();
    };
    let params = match req.get("params") {
        None | Some(Json::Null) => vec![],
        Some(Json::Array(a)) => a.clone(),
        Some(_) => return error_reply(id, RpcError::params("params must be an array")).to_string(),
    };
    tracing::debug!(method, "rpc request");
    let answer = if method == "arkiv_query" {
        // Rendered as text directly, outside the chain lock (pages of up to 200 rows).
        arkiv::query(node, &id, &params)
    } else {
        dispatch(node, method, &params)
            .map(|result| json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
    };
    answer.unwrap_or_else(|e| {
        tracing::debug!(method, code = e.code, "rpc error");
        error_reply(id, e).to_string()
    })
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Parse a hex quantity or JSON number.
pub fn parse_u64(v: &Json) -> Option<u64> {
    match v {
        Json::Number(n) => n.as_u64(),
        Json::String(s) => {
            let h = s.strip_prefix("0x")?;
            u64::from_str_radix(h, 16).ok()
        }
        _ => None,
    }
}

fn parse_addr(v: Option<&Json>) -> Result<Address, RpcError> {
    v.and_then(|v| v.as_str())
        .and_then(|s| s.parse::<Address>().ok())
        .ok_or_else(|| RpcError::params("expected an address"))
}

/// Resolve a block tag or number to a block number.
fn block_number(chain: &Chain, v: Option<&Json>) -> Result<u64, RpcError> {
    let head = chain.head().number;
    match v {
        None | Some(Json::Null) => Ok(head),
        Some(Json::String(s))
            if matches!(s.as_str(), "latest" | "pending" | "safe" | "finalized") =>
        {
            Ok(head)
        }
        Some(Json::String(s)) if s == "earliest" => Ok(chain.first_block()),
        Some(Json::Object(o)) if o.contains_key("blockNumber") => {
            parse_u64(&o["blockNumber"]).ok_or_else(|| RpcError::params("invalid block number"))
        }
        Some(other) => {
            parse_u64(other).ok_or_else(|| RpcError::params("invalid block tag or number"))
        }
    }
}

fn call_request(v: Option<&Json>) -> Result<CallRequest, RpcError> {
    let o = v
        .and_then(|v| v.as_object())
        .ok_or_else(|| RpcError::params("expected a call object"))?;
    let addr = |k: &str| -> Result<Option<Address>, RpcError> {
        match o.get(k) {
            None | Some(Json::Null) => Ok(None),
            Some(x) => parse_addr(Some(x)).map(Some),
        }
    };
    let input = match o.get("input").or_else(|| o.get("data")) {
        None | Some(Json::Null) => Bytes::new(),
        Some(Json::String(s)) => s
            .parse::<Bytes>()
            .map_err(|_| RpcError::params("invalid data hex"))?,
        _ => return Err(RpcError::params("invalid data")),
    };
    let value = match o.get("value") {
        None | Some(Json::Null) => U256::ZERO,
        Some(Json::String(s)) => s
            .parse::<U256>()
            .map_err(|_| RpcError::params("invalid value"))?,
        _ => return Err(RpcError::params("invalid value")),
    };
    let gas = match o.get("gas") {
        None | Some(Json::Null) => None,
        Some(g) => Some(parse_u64(g).ok_or_else(|| RpcError::params("invalid gas"))?),
    };
    Ok(CallRequest {
        from: addr("from")?,
        to: addr("to")?,
        input,
        value,
        gas,
    })
}

fn mine_if_on_demand(node: &Node, chain: &mut Chain) -> Result<(), RpcError> {
    if node.on_demand && chain.pool_len() > 0 {
        chain
            .mine(now())
            .map_err(|e| RpcError::new(-32603, e.to_string()))?;
    }
    Ok(())
}

fn dispatch(node: &Node, method: &str, p: &[Json]) -> RpcResult {
    match method {
        m if m.starts_with("arkiv_") => {
            let chain = node.lock();
            arkiv::dispatch(&chain, m, p)
        }
        "eth_chainId" => Ok(json::qty(node.lock().params.chain_id)),
        "net_version" => Ok(Json::String(node.lock().params.chain_id.to_string())),
        "web3_clientVersion" => Ok(json!(concat!("privsvc-devnet/", env!("CARGO_PKG_VERSION")))),
        "eth_syncing" => Ok(Json::Bool(false)),
        "eth_accounts" => Ok(json!([])),
        "eth_blockNumber" => Ok(json::qty(node.lock().head().number)),
        "eth_gasPrice" => Ok(json::qty(node.lock().params.base_fee)),
        "eth_maxPriorityFeePerGas" => Ok(json::qty(0u64)),
        "eth_feeHistory" => {
            let chain = node.lock();
            let count = p.first().and_then(parse_u64).unwrap_or(1).clamp(1, 1024);
            let newest = block_number(&chain, p.get(1))?.min(chain.head().number);
            let oldest = newest.saturating_sub(count - 1).max(chain.first_block());
            let n = (newest - oldest + 1) as usize;
            let bf = chain.params.base_fee;
            let pct = p.get(2).and_then(|v| v.as_array()).map_or(0, |a| a.len());
            let mut out = json!({
                "oldestBlock": json::qty(oldest),
                "baseFeePerGas": vec![json::qty(bf); n + 1],
                "gasUsedRatio": (oldest..=newest).map(|b| {
                    chain.block(b).map_or(0.0, |b| b.gas_used as f64 / b.gas_limit.max(1) as f64)
                }).collect::<Vec<_>>(),
            });
            if pct > 0 {
                out["reward"] = json!(vec![vec![json::qty(0u64); pct]; n]);
            }
            Ok(out)
        }
        "eth_getBlockByNumber" => {
            let chain = node.lock();
            let n = block_number(&chain, p.first())?;
            let full = p.get(1).and_then(|v| v.as_bool()).unwrap_or(false);
            match chain.block(n) {
                Some(b) => Ok(json::block(&chain, b, full)),
                None => Ok(chain
                    .history_block(n)
                    .map_or(Json::Null, |b| json::block(&chain, &b, full))),
            }
        }
        "eth_getBlockByHash" => {
            let chain = node.lock();
            let h: B256 = p
                .first()
                .and_then(|v| v.as_str())
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| RpcError::params("expected a block hash"))?;
            let full = p.get(1).and_then(|v| v.as_bool()).unwrap_or(false);
            Ok(chain
                .block_by_hash(&h)
                .map_or(Json::Null, |b| json::block(&chain, b, full)))
        }
        "eth_getBalance" => {
            let a = parse_addr(p.first())?;
            Ok(json!(format!("{:#x}", node.lock().account(&a).balance)))
        }
        "eth_getTransactionCount" => {
            let a = parse_addr(p.first())?;
            let chain = node.lock();
            let n = match p.get(1).and_then(|v| v.as_str()) {
                Some("pending") => chain.pending_nonce(&a),
                _ => chain.account(&a).nonce,
            };
            Ok(json::qty(n))
        }
        "eth_getCode" => {
            parse_addr(p.first())?;
            Ok(json!("0x"))
        }
        "eth_getStorageAt" => Ok(json!(B256::ZERO)),
        "eth_call" => {
            let req = call_request(p.first())?;
            let chain = node.lock();
            let at = block_number(&chain, p.get(1))?;
            if at > chain.head().number {
                return Err(RpcError::new(
                    -32000,
                    format!("header not found: block {at}"),
                ));
            }
            chain
                .call(&req, Some(at))
                .map(|b| json!(b))
                .map_err(RpcError::revert)
        }
        "eth_estimateGas" => {
            let req = call_request(p.first())?;
            let chain = node.lock();
            chain
                .estimate_gas(&req)
                .map(json::qty)
                .map_err(RpcError::revert)
        }
        "eth_sendRawTransaction" => {
            let raw: Bytes = p
                .first()
                .and_then(|v| v.as_str())
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| RpcError::params("expected the raw transaction as hex"))?;
            let mut chain = node.lock();
            let hash = chain
                .submit_raw(&raw)
                .map_err(|e| RpcError::new(-32000, e.0))?;
            mine_if_on_demand(node, &mut chain)?;
            Ok(json!(hash))
        }
        "eth_getTransactionByHash" => {
            let h = parse_hash(p.first())?;
            Ok(node.lock().tx(&h).map_or(Json::Null, json::tx))
        }
        "eth_getTransactionReceipt" => {
            let h = parse_hash(p.first())?;
            Ok(node.lock().tx(&h).map_or(Json::Null, json::receipt))
        }
        "eth_getLogs" => {
            let chain = node.lock();
            get_logs(&chain, p.first())
        }
        "eth_newFilter" | "eth_newBlockFilter" => {
            let kind = if method == "eth_newBlockFilter" {
                FilterKind::Blocks
            } else {
                let c = p
                    .first()
                    .and_then(|v| v.as_object())
                    .ok_or_else(|| RpcError::params("expected a filter object"))?;
                FilterKind::Logs(c.clone())
            };
            let head = node.lock().head().number;
            let mut f = node.filters.lock().unwrap_or_else(|e| e.into_inner());
            f.next += 1;
            let id = f.next;
            f.installed.insert(id, (kind, head));
            Ok(json::qty(id))
        }
        "eth_uninstallFilter" => {
            let id = p
                .first()
                .and_then(parse_u64)
                .ok_or_else(|| RpcError::params("expected a filter id"))?;
            let mut f = node.filters.lock().unwrap_or_else(|e| e.into_inner());
            Ok(Json::Bool(f.installed.remove(&id).is_some()))
        }
        "eth_getFilterChanges" | "eth_getFilterLogs" => {
            let id = p
                .first()
                .and_then(parse_u64)
                .ok_or_else(|| RpcError::params("expected a filter id"))?;
            let chain = node.lock();
            let head = chain.head().number;
            let mut f = node.filters.lock().unwrap_or_else(|e| e.into_inner());
            let (kind, last) = f
                .installed
                .get(&id)
                .cloned()
                .ok_or_else(|| RpcError::new(-32000, "filter not found"))?;
            let out = match kind {
                FilterKind::Blocks => Json::Array(
                    (last + 1..=head)
                        .filter_map(|n| chain.block(n))
                        .map(|b| json!(b.hash))
                        .collect(),
                ),
                FilterKind::Logs(mut c) => {
                    if method == "eth_getFilterChanges" {
                        let from = block_number(&chain, c.get("fromBlock"))?.max(last + 1);
                        c.insert("fromBlock".into(), json::qty(from));
                        c.insert("toBlock".into(), json::qty(head));
                        if from > head {
                            Json::Array(vec![])
                        } else {
                            get_logs(&chain, Some(&Json::Object(c)))?
                        }
                    } else {
                        get_logs(&chain, Some(&Json::Object(c)))?
                    }
                }
            };
            if method == "eth_getFilterChanges" {
                if let Some(entry) = f.installed.get_mut(&id) {
                    entry.1 = head;
                }
            }
            Ok(out)
        }
        "evm_mine" | "anvil_mine" => {
            let mut chain = node.lock();
            let n = if method == "anvil_mine" {
                p.first().and_then(parse_u64).unwrap_or(1)
            } else {
                1
            };
            for _ in 0..n {
                chain
                    .mine(now())
                    .map_err(|e| RpcError::new(-32603, e.to_string()))?;
            }
            Ok(json!("0x0"))
        }
        _ => Err(RpcError::new(
            -32601,
            format!("the method {method} does not exist/is not available"),
        )),
    }
}

fn parse_hash(v: Option<&Json>) -> Result<B256, RpcError> {
    v.and_then(|v| v.as_str())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| RpcError::params("expected a 32-byte hash"))
}

fn get_logs(chain: &Chain, f: Option<&Json>) -> RpcResult {
    let f = f
        .and_then(|v| v.as_object())
        .ok_or_else(|| RpcError::params("expected a filter object"))?;
    let (from, to) = if let Some(h) = f.get("blockHash") {
        let h = parse_hash(Some(h))?;
        let b = chain
            .block_by_hash(&h)
            .ok_or_else(|| RpcError::new(-32000, "unknown block"))?;
        (b.number, b.number)
    } else {
        let from = block_number(chain, f.get("fromBlock"))?;
        let to = block_number(chain, f.get("toBlock"))?;
        (from, to.min(chain.head().number))
    };
    if to >= from && to - from > 100_000 {
        return Err(RpcError::new(
            -32005,
            "query exceeds 100000 blocks; narrow the range",
        ));
    }
    let addresses: Vec<Address> = match f.get("address") {
        None | Some(Json::Null) => vec![],
        Some(Json::Array(a)) => a
            .iter()
            .map(|x| parse_addr(Some(x)))
            .collect::<Result<_, _>>()?,
        Some(x) => vec![parse_addr(Some(x))?],
    };
    let topics: Vec<Option<Vec<B256>>> = match f.get("topics") {
        None | Some(Json::Null) => vec![],
        Some(Json::Array(a)) => a
            .iter()
            .map(|t| match t {
                Json::Null => Ok(None),
                Json::Array(alts) => alts
                    .iter()
                    .map(|x| parse_hash(Some(x)))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Some),
                x => parse_hash(Some(x)).map(|h| Some(vec![h])),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(RpcError::params("topics must be an array")),
    };
    let mut out = Vec::new();
    for n in from.max(chain.first_block())..=to {
        let Some(b) = chain.block(n) else { continue };
        for (t, idx, l) in chain.block_logs(b) {
            if !addresses.is_empty() && !addresses.contains(&l.address) {
                continue;
            }
            let ok = topics.iter().enumerate().all(|(i, want)| match want {
                None => true,
                Some(alts) => l.topics.get(i).is_some_and(|t| alts.contains(t)),
            });
            if ok {
                out.push(json::log(t, idx, l));
            }
        }
    }
    Ok(Json::Array(out))
}
