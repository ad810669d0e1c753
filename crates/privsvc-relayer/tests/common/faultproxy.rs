//! A fault-injecting JSON-RPC proxy on 127.0.0.1 (real TCP, real HTTP/1.1), put between a
//! relayer and the ledger. Each request is forwarded to the upstream node, or, with the
//! configured probability, one fault is injected:
//! - `Http500`: an HTTP 500 with a non-JSON body (the node is not asked);
//! - `Drop`: the connection is closed without an answer (the node is not asked);
//! - `Delay`: no answer for `delay` (past the client's timeout), then the connection closes;
//! - `AnswerLost` (only for `eth_sendRawTransaction`): the node takes the transaction, the
//!   answer is dropped.
//!
//! `lose_send_answers` makes every `eth_sendRawTransaction` an `AnswerLost`. A partition
//! (`set_partitioned`) answers nothing at all: every request is held, unanswered and not
//! forwarded, until the partition ends (then its connection closes), as when the network
//! between the relayer and the node drops every packet. Receipts with status 0 seen going back
//! are recorded (reverted transactions).
//!
//! Shared by the relayer's fault tests and the campaign example (`#[path]` include).
#![allow(dead_code)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What the proxy does and counts.
#[derive(Debug)]
pub struct ProxyState {
    upstream: Mutex<String>,
    /// Fault probability in millionths.
    rate_ppm: AtomicU64,
    delay_ms: AtomicU64,
    lose_send_answers: AtomicBool,
    partitioned: AtomicBool,
    /// Requests held unanswered by a partition.
    pub held: AtomicU64,
    /// Forwarded requests.
    pub forwarded: AtomicU64,
    /// Injected 500s.
    pub http500: AtomicU64,
    /// Injected dropped connections.
    pub dropped: AtomicU64,
    /// Injected delays.
    pub delayed: AtomicU64,
    /// Transactions applied whose answer was dropped.
    pub answers_lost: AtomicU64,
    reverted: Mutex<HashSet<String>>,
}

impl ProxyState {
    /// Faults injected so far.
    pub fn faults(&self) -> u64 {
        self.http500.load(Ordering::SeqCst)
            + self.dropped.load(Ordering::SeqCst)
            + self.delayed.load(Ordering::SeqCst)
            + self.answers_lost.load(Ordering::SeqCst)
    }
    /// Set the fault probability (0.0..=1.0).
    pub fn set_rate(&self, p: f64) {
        self.rate_ppm
            .store((p.clamp(0.0, 1.0) * 1e6) as u64, Ordering::SeqCst);
    }
    /// Lose (or stop losing) the answer of every `eth_sendRawTransaction`.
    pub fn set_lose_send_answers(&self, on: bool) {
        self.lose_send_answers.store(on, Ordering::SeqCst);
    }
    /// Start (or end) a partition: no request is forwarded or answered while it lasts.
    pub fn set_partitioned(&self, on: bool) {
        self.partitioned.store(on, Ordering::SeqCst);
    }
    /// Point the proxy at another node URL.
    pub fn set_upstream(&self, url: &str) {
        *self.upstream.lock().unwrap() = url.to_string();
    }
    /// Hashes of transactions whose receipt said "reverted".
    pub fn reverted(&self) -> usize {
        self.reverted.lock().unwrap().len()
    }
}

/// A running proxy.
pub struct FaultProxy {
    /// Its URL (`http://127.0.0.1:port`).
    pub url: String,
    /// Its settings and counters.
    pub state: Arc<ProxyState>,
    task: JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone, Copy)]
enum Fault {
    Http500,
    Drop,
    Delay,
    AnswerLost,
}

impl FaultProxy {
    /// Start a proxy to `upstream` on 127.0.0.1 (`port` 0: any), faults off; `delay` is the
    /// length of a `Delay` fault.
    pub async fn start(upstream: &str, port: u16, delay: Duration) -> FaultProxy {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("proxy binds");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(ProxyState {
            upstream: Mutex::new(upstream.to_string()),
            rate_ppm: AtomicU64::new(0),
            delay_ms: AtomicU64::new(delay.as_millis() as u64),
            lose_send_answers: AtomicBool::new(false),
            partitioned: AtomicBool::new(false),
            held: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
            http500: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            delayed: AtomicU64::new(0),
            answers_lost: AtomicU64::new(0),
            reverted: Mutex::new(HashSet::new()),
        });
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let s = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    continue;
                };
                let s = s.clone();
                let client = client.clone();
                tokio::spawn(async move {
                    let _ = serve(sock, &s, &client).await;
                });
            }
        });
        FaultProxy { url, state, task }
    }
}

/// Read one HTTP/1.1 request: (head, body).
async fn read_request(sock: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    if len > 16 * 1024 * 1024 {
        return None;
    }
    while buf.len() < head_end + len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf[head_end..head_end + len].to_vec())
}

async fn respond(sock: &mut TcpStream, status: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = sock.write_all(head.as_bytes()).await;
    let _ = sock.write_all(body).await;
    let _ = sock.shutdown().await;
}

async fn serve(mut sock: TcpStream, s: &ProxyState, client: &reqwest::Client) -> Option<()> {
    let body = read_request(&mut sock).await?;
    let method = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("method").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_default();
    if s.partitioned.load(Ordering::SeqCst) {
        s.held.fetch_add(1, Ordering::SeqCst);
        // Bounded: a partition of the campaign lasts at most 10 minutes.
        for _ in 0..6_000 {
            if !s.partitioned.load(Ordering::SeqCst) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        return Some(());
    }
    let send = method == "eth_sendRawTransaction";
    let fault = {
        let mut rng = rand::thread_rng();
        if send && s.lose_send_answers.load(Ordering::SeqCst) {
            Some(Fault::AnswerLost)
        } else if rng.gen_range(0..1_000_000) < s.rate_ppm.load(Ordering::SeqCst) {
            Some(match rng.gen_range(0..if send { 4 } else { 3 }) {
                0 => Fault::Http500,
                1 => Fault::Drop,
                2 => Fault::Delay,
                _ => Fault::AnswerLost,
            })
        } else {
            None
        }
    };
    match fault {
        Some(Fault::Http500) => {
            s.http500.fetch_add(1, Ordering::SeqCst);
            respond(&mut sock, "500 Internal Server Error", b"upstream failure").await;
            return Some(());
        }
        Some(Fault::Drop) => {
            s.dropped.fetch_add(1, Ordering::SeqCst);
            return Some(());
        }
        Some(Fault::Delay) => {
            s.delayed.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(s.delay_ms.load(Ordering::SeqCst))).await;
            return Some(());
        }
        _ => {}
    }
    let upstream = s.upstream.lock().unwrap().clone();
    let answer = client
        .post(&upstream)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .ok()?;
    let status = answer.status();
    let bytes = answer.bytes().await.ok()?;
    if matches!(fault, Some(Fault::AnswerLost)) {
        s.answers_lost.fetch_add(1, Ordering::SeqCst);
        return Some(());
    }
    s.forwarded.fetch_add(1, Ordering::SeqCst);
    if method == "eth_getTransactionReceipt" {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) {
            let r = &v["result"];
            if r["status"].as_str() == Some("0x0") {
                if let Some(h) = r["transactionHash"].as_str() {
                    s.reverted.lock().unwrap().insert(h.to_string());
                }
            }
        }
    }
    let line = format!(
        "{} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    respond(&mut sock, &line, &bytes).await;
    Some(())
}
