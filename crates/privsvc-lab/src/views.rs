//! Each party's view, built from what the taps in its position recorded and from the public
//! ledger; never from a client's internal state.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Instant;

use alloy_primitives::{Address, B256};
use privsvc_testkit::{Exchange, LocalStack};
use serde_json::Value;

/// Milliseconds since the start of the run.
pub type Ms = f64;

/// Milliseconds from `epoch` to `t`.
pub fn ms_since(epoch: Instant, t: Instant) -> Ms {
    t.saturating_duration_since(epoch).as_secs_f64() * 1000.0
}

/// One JSON-RPC call as the RPC saw it.
#[derive(Debug, Clone)]
pub struct RpcCall {
    /// Arrival.
    pub at: Ms,
    /// Source address.
    pub source: IpAddr,
    /// Method.
    pub method: String,
    /// Parameters.
    pub params: Value,
    /// Bytes of the HTTP request that carried it.
    pub request_bytes: usize,
    /// Bytes of the answer.
    pub response_bytes: usize,
}

/// One `POST /ohttp` as the OHTTP relay saw it.
#[derive(Debug, Clone)]
pub struct RelayRequest {
    /// Arrival.
    pub at: Ms,
    /// Answer sent.
    pub done: Ms,
    /// Source address.
    pub source: IpAddr,
    /// The target relayer (`x-privsvc-target`).
    pub target: String,
    /// Encapsulated request size.
    pub request_bytes: usize,
    /// Encapsulated answer size.
    pub response_bytes: usize,
    /// Answer status.
    pub status: u16,
    /// `Origin`, `Referer`, `Cookie` and `User-Agent` headers, when sent.
    pub identifying_headers: Vec<(String, String)>,
    /// Sent by the relay itself (a replay), not by a client.
    pub injected: bool,
}

/// A request as a relayer sees it once decrypted.
#[derive(Debug, Clone)]
pub struct RelayerRequest {
    /// Arrival.
    pub at: Ms,
    /// The connection's source (the OHTTP relay for encapsulated requests).
    pub source: IpAddr,
    /// Whether it came inside `POST /v1/ohttp`.
    pub encapsulated: bool,
    /// Method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Body.
    pub body: Vec<u8>,
    /// Size of what arrived on the wire.
    pub wire_bytes: usize,
    /// Status of the answer.
    pub status: u16,
    /// Size of the answer on the wire.
    pub response_bytes: usize,
}

impl RelayerRequest {
    /// The body as JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// One record of the app on the ledger.
#[derive(Debug, Clone)]
pub struct LedgerRecord {
    /// Entity key.
    pub key: B256,
    /// Owner.
    pub owner: Address,
    /// Creator (a relayer, or anyone).
    pub creator: Address,
    /// Creation block.
    pub block: u64,
    /// Size of the padded envelope.
    pub envelope_len: usize,
    /// The `tag` attribute.
    pub tag: Option<String>,
    /// The envelope's `hour` (Unix seconds / 3600 where the client sealed it), when it parses.
    pub hour: Option<u64>,
    /// The timestamp of the creation block (Unix seconds).
    pub block_timestamp: Option<u64>,
}

/// A spends entity: the token ids a relayer's batch redeemed.
#[derive(Debug, Clone)]
pub struct Spends {
    /// Block of the batch.
    pub block: u64,
    /// The relayer.
    pub creator: Address,
    /// Token ids (32 bytes each).
    pub ids: Vec<[u8; 32]>,
}

/// What everyone sees: the public ledger, and when each block appeared.
#[derive(Debug, Clone, Default)]
pub struct LedgerView {
    /// The app's records.
    pub records: Vec<LedgerRecord>,
    /// When each block was first seen.
    pub block_seen: BTreeMap<u64, Ms>,
    /// Spends entities.
    pub spends: Vec<Spends>,
    /// The order of creates in each batch `(block, creator, transaction)`.
    pub batch_order: BTreeMap<(u64, Address, B256), Vec<B256>>,
    /// Gas used by each batch transaction of [`Self::batch_order`] (its receipt's `gasUsed`).
    pub batch_gas: BTreeMap<B256, u64>,
}

impl LedgerView {
    /// When `block` appeared (the next known block's time when it was not seen itself).
    pub fn time_of(&self, block: u64) -> Option<Ms> {
        self.block_seen.range(block..).next().map(|(_, t)| *t)
    }
}

/// Every party's view of a run.
#[derive(Debug, Clone, Default)]
pub struct Views {
    /// The RPC.
    pub rpc: Vec<RpcCall>,
    /// The OHTTP relay.
    pub relay: Vec<RelayRequest>,
    /// Each relayer, by name.
    pub relayers: BTreeMap<String, Vec<RelayerRequest>>,
    /// Relayer addresses, by name.
    pub relayer_addresses: BTreeMap<String, Address>,
    /// Relayer public URLs, by name.
    pub relayer_urls: BTreeMap<String, String>,
    /// The name of the relayer that runs the token issuer.
    pub issuer: Option<String>,
    /// The public ledger.
    pub ledger: LedgerView,
}

impl Views {
    /// Reads the taps of `stack`; `ledger` is read separately ([`crate::ledger_view`]).
    pub fn from_stack(stack: &LocalStack, epoch: Instant, ledger: LedgerView) -> Views {
        let mut views = Views {
            ledger,
            ..Views::default()
        };
        if let Some(tap) = stack.tap("rpc") {
            for e in tap.exchanges() {
                views.rpc.extend(rpc_calls(epoch, &e));
            }
        }
        if let Some(tap) = stack.tap("relay") {
            views.relay = tap
                .exchanges()
                .iter()
                .map(|e| relay_request(epoch, e))
                .collect();
        }
        for name in stack.relayer_names() {
            let Some(tap) = stack.tap(&name) else {
                continue;
            };
            let seen = tap
                .exchanges()
                .iter()
                .filter(|e| !e.injected)
                .map(|e| relayer_request(epoch, e))
                .collect();
            views.relayers.insert(name.clone(), seen);
            let handle = stack.relayer(&name);
            views
                .relayer_addresses
                .insert(name.clone(), handle.address());
            views
                .relayer_urls
                .insert(name.clone(), handle.url().to_string());
        }
        views
    }

    /// The same views cut at `end` (what the parties saw of the simulated day alone).
    pub fn until(&self, end: Ms) -> Views {
        let mut v = self.clone();
        v.rpc.retain(|c| c.at <= end);
        v.relay.retain(|r| r.at <= end);
        for seen in v.relayers.values_mut() {
            seen.retain(|r| r.at <= end);
        }
        v
    }

    /// The relayer's name for a public URL.
    pub fn relayer_named_by_url(&self, url: &str) -> Option<&str> {
        let url = url.trim_end_matches('/');
        self.relayer_urls
            .iter()
            .find(|(_, u)| u.trim_end_matches('/') == url)
            .map(|(n, _)| n.as_str())
    }
}

fn rpc_calls(epoch: Instant, e: &Exchange) -> Vec<RpcCall> {
    let body: Value = serde_json::from_slice(&e.request.body).unwrap_or(Value::Null);
    let calls = match body {
        Value::Array(a) => a,
        v => vec![v],
    };
    calls
        .into_iter()
        .map(|c| RpcCall {
            at: ms_since(epoch, e.at),
            source: e.request.source,
            method: c["method"].as_str().unwrap_or("").to_string(),
            params: c["params"].clone(),
            request_bytes: e.request.body.len(),
            response_bytes: e.response.len(),
        })
        .collect()
}

fn relay_request(epoch: Instant, e: &Exchange) -> RelayRequest {
    RelayRequest {
        at: ms_since(epoch, e.at),
        done: ms_since(epoch, e.done),
        source: e.request.source,
        target: e
            .request
            .header("x-privsvc-target")
            .unwrap_or("")
            .to_string(),
        request_bytes: e.request.body.len(),
        response_bytes: e.response.len(),
        status: e.status,
        identifying_headers: e
            .request
            .headers
            .iter()
            .filter(|(n, _)| matches!(n.as_str(), "origin" | "referer" | "cookie" | "user-agent"))
            .cloned()
            .collect(),
        injected: e.injected,
    }
}

fn relayer_request(epoch: Instant, e: &Exchange) -> RelayerRequest {
    let (encapsulated, method, path, body) = match &e.opened {
        Some(o) => (true, o.method.clone(), o.path.clone(), o.body.clone()),
        None => (
            e.request.path == "/v1/ohttp",
            e.request.method.clone(),
            e.request.path.clone(),
            e.request.body.clone(),
        ),
    };
    RelayerRequest {
        at: ms_since(epoch, e.at),
        source: e.request.source,
        encapsulated,
        method,
        path,
        body,
        wire_bytes: e.request.body.len(),
        status: e.status,
        response_bytes: e.response.len(),
    }
}
