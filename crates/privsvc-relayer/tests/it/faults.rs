//! Reliability under ledger faults (issue 13): the real devnet, a real fault-injecting HTTP
//! proxy on 127.0.0.1 between the relayer and the devnet, and the relayer's real HTTP API.
//! Each test is bounded by a timeout: on the writer from before transactions of unknown fate
//! were settled, the first reverts its batches, the second stalls for good, the third does not
//! drain.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_primitives::Address;
use privsvc_devnet::{BlockTime, Devnet, DevnetConfig, DevnetHandle, DEV_PRIVATE_KEYS};
use privsvc_ledger::{LedgerReader, LedgerWriter, RpcLedger, RpcWriter};
use privsvc_relayer::{Relayer, RelayerConfig};

use crate::common::faultproxy::FaultProxy;
use crate::common::*;

/// Timeout of one ledger request of the relayer in these tests; proxy delays exceed it.
const CALL_TIMEOUT: Duration = Duration::from_millis(1_000);

/// A relayer of dev account 0 that reaches the ledger only through `proxy`.
async fn relayer_via(proxy: &FaultProxy, chain_id: u64, cfg: RelayerConfig) -> Relayer {
    let key = k256::ecdsa::SigningKey::from_slice(
        &hex::decode(DEV_PRIVATE_KEYS[0].trim_start_matches("0x")).unwrap(),
    )
    .unwrap();
    let reader: Arc<dyn LedgerReader> =
        Arc::new(RpcLedger::with_timeout(proxy.url.clone(), CALL_TIMEOUT).unwrap());
    let writer: Arc<dyn LedgerWriter> = Arc::new(RpcWriter::new(
        RpcLedger::with_timeout(proxy.url.clone(), CALL_TIMEOUT).unwrap(),
        key,
        chain_id,
    ));
    Relayer::start(cfg, reader, writer)
        .await
        .expect("relayer starts")
}

/// Submit `n` fresh records; their ids and owners.
async fn submit_n(url: &str, n: usize, tag: &str) -> Vec<(String, Address)> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (body, owner) = record_body(APP, 3600, format!("{tag}-{i}").as_bytes());
        out.push((submit(url, &body).await, owner));
    }
    out
}

/// Every record is written and its owner holds exactly one entity on the ledger (read
/// directly from the node, not through the proxy).
async fn all_written_once(url: &str, ledger_url: &str, records: &[(String, Address)], t: Duration) {
    for (id, _) in records {
        wait_state(url, id, "written", t).await;
    }
    let direct = RpcLedger::new(ledger_url).unwrap();
    for (id, owner) in records {
        let page = direct
            .query(
                &format!("$owner = addr({owner})"),
                &privsvc_ledger::QueryOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(
            page.entities.len(),
            1,
            "record {id} written {} times",
            page.entities.len()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn heartbeats_whose_broadcast_answer_is_lost_never_make_a_batch_revert() {
    let mut devnet_config = DevnetConfig::default();
    devnet_config.block_time = BlockTime::Interval(Duration::from_millis(1_000));
    let node = Devnet::start(devnet_config).await.unwrap();
    let proxy = FaultProxy::start(&node.url(), 0, Duration::from_millis(1_500)).await;
    // Every transaction is taken by the node, and every answer to its broadcast is lost.
    proxy.state.set_lose_send_answers(true);
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.heartbeat_interval = Duration::from_millis(1_000);
    c.block_time = Duration::from_millis(1_000);
    let relayer = relayer_via(&proxy, node.chain_id(), c).await;
    let url = relayer.url().to_string();
    let mut records = Vec::new();
    for wave in 0..5 {
        records.extend(submit_n(&url, 3, &format!("hb-{wave}")).await);
        tokio::time::sleep(Duration::from_millis(2_500)).await;
    }
    tokio::time::timeout(
        Duration::from_secs(120),
        all_written_once(&url, &node.url(), &records, Duration::from_secs(110)),
    )
    .await
    .expect("records written within 120 s");
    assert!(proxy.state.answers_lost.load(Ordering::SeqCst) > 5);
    assert_eq!(
        proxy.state.reverted(),
        0,
        "a batch reverted: it was signed over a heartbeat of unknown fate"
    );
    relayer.shutdown().await;
    node.shutdown().await;
}

/// A devnet with a database that mines only while `mining` is on (every 200 ms).
struct PausableNode {
    node: Arc<Mutex<Option<DevnetHandle>>>,
    mining: Arc<AtomicBool>,
    db: std::path::PathBuf,
}

impl PausableNode {
    async fn start(db: std::path::PathBuf) -> Self {
        let node = Arc::new(Mutex::new(Some(Self::boot(&db).await)));
        let mining = Arc::new(AtomicBool::new(true));
        let (n, m) = (node.clone(), mining.clone());
        tokio::spawn(async move {
            for _ in 0..3_000 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if m.load(Ordering::SeqCst) {
                    if let Some(node) = n.lock().unwrap().as_ref() {
                        let _ = node.mine();
                    }
                }
            }
        });
        PausableNode { node, mining, db }
    }

    async fn boot(db: &std::path::Path) -> DevnetHandle {
        let mut devnet_config = DevnetConfig::default();
        devnet_config.block_time = BlockTime::Interval(Duration::from_secs(3_600));
        devnet_config.db_path = Some(db.to_path_buf());
        Devnet::start(devnet_config).await.unwrap()
    }

    fn url(&self) -> String {
        self.node.lock().unwrap().as_ref().unwrap().url()
    }

    fn pool_len_hint(&self) -> u64 {
        self.node.lock().unwrap().as_ref().unwrap().block_number()
    }

    /// Stop the node (its pending pool is lost) and start it again on the same database.
    async fn restart(&self) -> String {
        let old = self.node.lock().unwrap().take().unwrap();
        old.shutdown().await;
        let new = Self::boot(&self.db).await;
        let url = new.url();
        *self.node.lock().unwrap() = Some(new);
        url
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pending_heartbeat_lost_by_a_node_restart_never_stalls_the_relayer() {
    let dir = tempfile::tempdir().unwrap();
    let node = PausableNode::start(dir.path().join("chain.sqlite")).await;
    let chain_id = node.node.lock().unwrap().as_ref().unwrap().chain_id();
    let proxy = FaultProxy::start(&node.url(), 0, Duration::from_millis(1_500)).await;
    let mut c = config(&dir.path().join("relayer"));
    c.heartbeat_interval = Duration::from_millis(1_000);
    c.block_time = Duration::from_millis(200);
    let relayer = relayer_via(&proxy, chain_id, c).await;
    let url = relayer.url().to_string();
    // A first record proves the path works.
    let first = submit_n(&url, 1, "before").await;
    all_written_once(&url, &node.url(), &first, Duration::from_secs(30)).await;

    // The node stops mining and the answers to broadcasts get lost: the next heartbeat sits in
    // the node's pool while the relayer cannot tell whether the node took it.
    node.mining.store(false, Ordering::SeqCst);
    proxy.state.set_lose_send_answers(true);
    let start = Instant::now();
    while proxy.state.answers_lost.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no heartbeat was sent"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let records = submit_n(&url, 3, "after").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let head_before = node.pool_len_hint();
    // The node restarts on its database: its pending pool (the heartbeat) is gone.
    let new_url = node.restart().await;
    assert_eq!(
        node.pool_len_hint(),
        head_before,
        "the chain survived the restart"
    );
    proxy.state.set_upstream(&new_url);
    proxy.state.set_lose_send_answers(false);
    node.mining.store(true, Ordering::SeqCst);
    tokio::time::timeout(
        Duration::from_secs(90),
        all_written_once(&url, &new_url, &records, Duration::from_secs(85)),
    )
    .await
    .expect("the relayer writes again after the node lost its pending heartbeat");
    relayer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_20_percent_of_ledger_calls_failing_every_record_is_written_once() {
    let mut devnet_config = DevnetConfig::default();
    devnet_config.block_time = BlockTime::Interval(Duration::from_millis(500));
    let node = Devnet::start(devnet_config).await.unwrap();
    let proxy = FaultProxy::start(&node.url(), 0, CALL_TIMEOUT * 3 / 2).await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.heartbeat_interval = Duration::from_millis(2_000);
    c.block_time = Duration::from_millis(500);
    c.receipt_timeout = Duration::from_secs(10);
    let relayer = relayer_via(&proxy, node.chain_id(), c).await;
    // Faults start once the relayer runs.
    proxy.state.set_rate(0.2);
    let url = relayer.url().to_string();
    let mut records = Vec::new();
    for wave in 0..5 {
        records.extend(submit_n(&url, 20, &format!("f-{wave}")).await);
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
    tokio::time::timeout(
        Duration::from_secs(150),
        all_written_once(&url, &node.url(), &records, Duration::from_secs(140)),
    )
    .await
    .expect("100 records written within 150 s under 20% faults");
    let faults = proxy.state.faults();
    assert!(faults >= 10, "only {faults} faults injected");
    // The health record says when the ledger fails, and clears once it answers.
    let (_, h) = get(&url, "/healthz").await;
    assert!(h.get("ledgerFailing").is_some(), "{h}");
    assert!(h.get("ledgerConsecutiveFailures").is_some(), "{h}");
    relayer.shutdown().await;
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn healthz_and_metrics_say_when_the_ledger_is_failing() {
    let node = devnet().await;
    let proxy = FaultProxy::start(&node.url(), 0, Duration::from_millis(1_500)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.metrics_bind = Some("127.0.0.1:0".parse().unwrap());
    let relayer = relayer_via(&proxy, node.chain_id(), c).await;
    let url = relayer.url().to_string();
    let (_, h) = get(&url, "/healthz").await;
    assert_eq!(h["ledgerFailing"], false, "{h}");
    proxy.state.set_rate(1.0);
    // No health request asks the ledger (docs/PROTOCOL.md §7); the background check (every 10 s)
    // does, and its retries all fail.
    let h = health_until(&url, |h| h["ledgerFailing"] == true).await;
    assert_eq!(h["ok"], false, "{h}");
    assert!(h["ledgerConsecutiveFailures"].as_u64().unwrap() >= 3, "{h}");
    let metrics = http()
        .get(format!(
            "http://{}/metrics",
            relayer.metrics_addr().unwrap()
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("privsvc_ledger_failing 1"), "{metrics}");
    proxy.state.set_rate(0.0);
    let h = health_until(&url, |h| h["ledgerFailing"] == false).await;
    assert_eq!(h["ok"], true, "{h}");
    relayer.shutdown().await;
    node.shutdown().await;
}

/// Poll the public `/healthz` until `done` holds (the background ledger check runs every
/// 10 s; each of its calls may take its retries with 1 s time-outs).
async fn health_until(url: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let (_, h) = get(url, "/healthz").await;
        if done(&h) {
            return h;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "health stuck at {h}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
