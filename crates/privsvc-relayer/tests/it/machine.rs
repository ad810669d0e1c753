//! The relayer on a real machine (issue 32): a wall clock that steps, a disk that fills, a
//! database file that rots. The real devnet, real HTTP, the real SQLite file (damaged byte by
//! byte on disk, or refused writes through SQLite's own `max_page_count` and `query_only`), and
//! a clock whose wall reading the test steps ([`Clock::step_wall`]) as an NTP correction would.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use privsvc_ledger::{BatchReceipt, LedgerError, LedgerWriter, Operation, PreparedTx};
use privsvc_relayer::testing::StoreFault;
use privsvc_relayer::{Clock, Relayer, RelayerError, StoreError};
use serde_json::Value;
use tokio::sync::watch;

use crate::common::*;

const T: Duration = Duration::from_secs(30);
const HOUR_MS: i64 = 3_600_000;

/// GET the exact `/healthz` on the relayer's `METRICS_BIND` listener.
async fn exact_health(relayer: &Relayer) -> Value {
    let url = format!(
        "http://{}",
        relayer.metrics_addr().expect("METRICS_BIND on")
    );
    get(&url, "/healthz").await.1
}

/// Poll the exact `/healthz` until `done` holds (at most 30 s).
async fn exact_health_until(relayer: &Relayer, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let h = exact_health(relayer).await;
        if done(&h) {
            return h;
        }
        assert!(start.elapsed() < T, "health stuck at {h}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A read-only connection to the relayer's database, as an operator's `sqlite3` would open it.
fn open_db(path: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

/// The stored state of record `id`, read directly from the file.
fn stored_state(path: &std::path::Path, id: &str) -> String {
    open_db(path)
        .query_row("SELECT state FROM records WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .unwrap()
}

/// Move every committed page into the database file itself (the relayer is stopped).
fn checkpoint(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
}

/// Flip one bit of the byte at `offset` of each occurrence of `needle` in the file: damage
/// that SQLite cannot see, inside a stored value. Returns how many occurrences were changed.
fn flip_in_file(path: &std::path::Path, needle: &[u8], offset: usize) -> usize {
    let mut bytes = std::fs::read(path).unwrap();
    let mut hits = Vec::new();
    let mut from = 0;
    while let Some(i) = bytes[from..]
        .windows(needle.len())
        .position(|w| w == needle)
    {
        hits.push(from + i);
        from += i + needle.len();
    }
    for at in &hits {
        bytes[at + offset] ^= 0x01;
    }
    std::fs::write(path, bytes).unwrap();
    hits.len()
}

/// Replace each occurrence of `needle` in the file by `with` (same length).
fn replace_in_file(path: &std::path::Path, needle: &[u8], with: &[u8]) -> usize {
    assert_eq!(needle.len(), with.len());
    let mut bytes = std::fs::read(path).unwrap();
    let mut n = 0;
    let mut from = 0;
    while let Some(i) = bytes[from..]
        .windows(needle.len())
        .position(|w| w == needle)
    {
        let at = from + i;
        bytes[at..at + with.len()].copy_from_slice(with);
        from = at + needle.len();
        n += 1;
    }
    std::fs::write(path, bytes).unwrap();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wall_clock_stepped_back_two_hours_delays_no_record_past_its_batch_window() {
    let clock = Clock::system();
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.clock = clock.clone();
        c.batching.min_batch = 5;
        c.batching.max_wait = Duration::from_secs(3);
    })
    .await;
    let url = relayer.url().to_string();
    // Two records, fewer than minBatch: they wait for maxWaitMs (3 s), then go.
    let ids = [submit(&url, &body()).await, submit(&url, &body()).await];
    let stepped = Instant::now();
    clock.step_wall(-2 * HOUR_MS);
    for id in &ids {
        wait_state(&url, id, "written", Duration::from_secs(20)).await;
    }
    assert!(
        stepped.elapsed() < Duration::from_secs(20),
        "written {:?} after the step",
        stepped.elapsed()
    );
    relayer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wall_clock_stepped_forward_two_hours_prunes_no_status_within_its_retention() {
    let clock = Clock::system();
    let retention = Duration::from_secs(12);
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.clock = clock.clone();
        c.status_retention = retention;
    })
    .await;
    let url = relayer.url().to_string();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(submit(&url, &body()).await);
    }
    for id in &ids {
        wait_state(&url, id, "written", T).await;
    }
    let written = Instant::now();
    clock.step_wall(2 * HOUR_MS);
    // Pruning runs every retention / 4 (3 s): two passes after the step.
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(written.elapsed() < retention, "the machine was too slow");
    for id in &ids {
        let (code, v) = get(&url, &format!("/v1/records/{id}")).await;
        assert_eq!(code, 200, "status lost after a forward step: {v}");
        assert_eq!(v["state"], "written", "{v}");
    }
    // A step back keeps none of them past the retention either.
    clock.step_wall(-4 * HOUR_MS);
    let path = format!("/v1/records/{}", ids[0]);
    while get(&url, &path).await.0 != 404 {
        assert!(
            written.elapsed() < retention + Duration::from_secs(10),
            "status kept past its retention after a backward step"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(written.elapsed() >= retention - Duration::from_secs(1));
    relayer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restart_after_a_slow_clock_was_corrected_keeps_the_statuses() {
    let slow = Clock::system();
    slow.step_wall(-HOUR_MS);
    let (node, _dir, mut c) = devnet_and_config(|c| {
        c.clock = slow.clone();
        c.status_retention = Duration::from_secs(600);
    })
    .await;
    let relayer = start(&node, 0, c.clone()).await;
    let id = submit(relayer.url(), &body()).await;
    wait_state(relayer.url(), &id, "written", T).await;
    relayer.shutdown().await;
    // Started again with the clock corrected (an hour forward): the wall clock says an hour
    // passed, the machine's uptime a few seconds. Pruning runs at once at start.
    c.clock = Clock::system();
    let relayer = start(&node, 0, c).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (code, v) = get(relayer.url(), &format!("/v1/records/{id}")).await;
    assert_eq!(code, 200, "status pruned after the restart: {v}");
    assert_eq!(v["state"], "written", "{v}");
    relayer.shutdown().await;
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_relayer_an_hour_slow_an_envelope_near_its_bound_by_the_ledgers_time_is_failed() {
    let clock = Clock::system();
    // The relayer's clock is an hour slow: it still accepts an envelope sealed three hours
    // before the ledger's current hour, whose bound is then less than an hour away.
    clock.step_wall(-HOUR_MS);
    let (node, _dir, relayer) = devnet_and_relayer(|c| c.clock = clock.clone()).await;
    let url = relayer.url().to_string();
    let hour = privsvc_envelope::hour_of(privsvc_relayer::testing::now_ms() / 1000);
    let (late, late_owner) = record_body_at(APP, APP, 3600, b"late", hour - 3);
    let (fresh, fresh_owner) = record_body_at(APP, APP, 3600, b"fresh", hour);
    let late_id = submit(&url, &late).await;
    let fresh_id = submit(&url, &fresh).await;
    wait_state(&url, &fresh_id, "written", T).await;
    let st = wait_state(&url, &late_id, "failed", T).await;
    let e = st["error"].as_str().unwrap();
    assert!(e.contains("too late to write"), "{e}");
    assert!(e.contains("ledger's newest block"), "{e}");
    assert_eq!(owner_entities(&node, late_owner).await, 0);
    assert_eq!(owner_entities(&node, fresh_owner).await, 1);
    relayer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_store_refuses_records_with_503_and_retry_after_and_healthz_says_why() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.metrics_bind = Some("127.0.0.1:0".parse().unwrap());
        // Nothing is written meanwhile: the records fill the database.
        c.batching.min_batch = 1_000;
        c.batching.max_batch = 1_000;
        c.batching.max_wait = Duration::from_secs(3_600);
    })
    .await;
    let url = relayer.url().to_string();
    exact_health_until(&relayer, |h| h["ok"] == true).await;
    // The database may not grow any more: SQLite answers SQLITE_FULL, as on a full disk.
    relayer.set_store_fault(StoreFault::Full).await.unwrap();
    let refused = async {
        for _ in 0..500 {
            let r = http()
                .post(format!("{url}/v1/records"))
                .json(&body())
                .send()
                .await
                .unwrap();
            if r.status() == 503 {
                return r;
            }
            assert_eq!(r.status(), 202);
        }
        panic!("the full store took 500 records");
    }
    .await;
    assert_eq!(
        refused
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("30")
    );
    let v: Value = refused.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("cannot store"), "{v}");
    let h = exact_health(&relayer).await;
    assert_eq!(h["ok"], false, "{h}");
    assert_eq!(h["storeFailing"], true, "{h}");
    let reason = h["reason"].as_str().unwrap();
    assert!(reason.contains("database or disk is full"), "{reason}");
    let (_, public) = get(&url, "/healthz").await;
    assert_eq!(public["ok"], false, "{public}");
    assert_eq!(public["storeFailing"], true, "{public}");
    assert!(
        public.get("reason").is_none(),
        "the reason is for METRICS_BIND only: {public}"
    );
    // Space again: records are taken, and the health record clears.
    relayer.set_store_fault(StoreFault::None).await.unwrap();
    submit(&url, &body()).await;
    let h = exact_health_until(&relayer, |h| h["ok"] == true).await;
    assert_eq!(h["storeFailing"], false, "{h}");
    assert!(h.get("reason").is_none(), "{h}");
    relayer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn below_the_free_space_floor_records_are_refused_and_healthz_says_why() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.metrics_bind = Some("127.0.0.1:0".parse().unwrap());
        // No filesystem has this much free: always below the floor.
        c.limits.min_free_bytes = u64::MAX;
    })
    .await;
    let url = relayer.url().to_string();
    let r = http()
        .post(format!("{url}/v1/records"))
        .json(&body())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(
        r.headers().get("retry-after").and_then(|v| v.to_str().ok()),
        Some("30")
    );
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("disk is nearly full"),
        "{v}"
    );
    let h = exact_health(&relayer).await;
    assert_eq!(h["ok"], false, "{h}");
    assert_eq!(h["storeFailing"], true, "{h}");
    assert!(
        h["reason"]
            .as_str()
            .unwrap()
            .contains("below MIN_FREE_BYTES"),
        "{h}"
    );
    relayer.shutdown().await;
}

/// A writer whose broadcasts wait, once armed, until the test opens the gate.
struct Gated {
    inner: Arc<dyn LedgerWriter>,
    armed: AtomicBool,
    waiting: AtomicBool,
    open: watch::Sender<bool>,
}

#[async_trait]
impl LedgerWriter for Gated {
    fn address(&self) -> Address {
        self.inner.address()
    }
    async fn prepare(
        &self,
        ops: &[Operation],
        nonce: Option<u64>,
    ) -> Result<PreparedTx, LedgerError> {
        self.inner.prepare(ops, nonce).await
    }
    async fn broadcast(&self, tx: &PreparedTx) -> Result<(), LedgerError> {
        if self.armed.load(Ordering::SeqCst) {
            self.waiting.store(true, Ordering::SeqCst);
            let mut open = self.open.subscribe();
            let _ = open.wait_for(|o| *o).await;
        }
        self.inner.broadcast(tx).await
    }
    async fn receipt(&self, h: B256) -> Result<Option<BatchReceipt>, LedgerError> {
        self.inner.receipt(h).await
    }
    async fn mined_nonce(&self) -> Result<Option<u64>, LedgerError> {
        self.inner.mined_nonce().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_mined_while_the_store_cannot_write_is_written_without_a_restart() {
    let (node, _dir, c) = devnet_and_config(|c| {
        c.metrics_bind = Some("127.0.0.1:0".parse().unwrap());
        c.batching.min_batch = 3;
        c.batching.max_wait = Duration::from_secs(3_600);
        c.heartbeat_interval = Duration::from_secs(3_600);
    })
    .await;
    let gated = Arc::new(Gated {
        inner: writer(&node, 0),
        armed: AtomicBool::new(false),
        waiting: AtomicBool::new(false),
        open: watch::channel(false).0,
    });
    let relayer = start_with(&node, c, gated.clone()).await;
    let url = relayer.url().to_string();
    let db = relayer.store_path().to_path_buf();
    exact_health_until(&relayer, |h| h["heartbeat"] != "").await;
    gated.armed.store(true, Ordering::SeqCst);
    let mut records = Vec::new();
    for i in 0..3 {
        let (b, owner) = record_body(APP, 3600, format!("mined-{i}").as_bytes());
        records.push((submit(&url, &b).await, owner));
    }
    // The batch is stored and about to be broadcast; then the store stops taking writes.
    let start = Instant::now();
    while !gated.waiting.load(Ordering::SeqCst) {
        assert!(start.elapsed() < T, "the batch was never broadcast");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Deterministic: `query_only` refuses every write, where `max_page_count` refuses only a
    // write that needs a new page (a batch's update may fit the pages it has).
    relayer.set_store_fault(StoreFault::ReadOnly).await.unwrap();
    gated.open.send_replace(true);
    for (id, _) in &records {
        let st = wait_state(&url, id, "written", T).await;
        assert!(
            st["txHash"].as_str().unwrap() != format!("{}", B256::ZERO),
            "{st}"
        );
        // Written by the status, not yet in the file: the store could not record it.
        assert_eq!(stored_state(&db, id), "sending");
    }
    let h = exact_health(&relayer).await;
    assert_eq!(h["ok"], false, "{h}");
    assert_eq!(h["storeFailing"], true, "{h}");
    assert!(
        h["reason"].as_str().unwrap().contains("cannot write"),
        "{h}"
    );
    refused(&url, &body(), 503, "cannot store").await;
    // Writes work again: the batch is recorded without a restart.
    relayer.set_store_fault(StoreFault::None).await.unwrap();
    let start = Instant::now();
    while records
        .iter()
        .any(|(id, _)| stored_state(&db, id) != "written")
    {
        assert!(start.elapsed() < T, "the mined batch was never recorded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    exact_health_until(&relayer, |h| h["ok"] == true).await;
    for (id, owner) in &records {
        wait_state(&url, id, "written", T).await;
        assert_eq!(owner_entities(&node, *owner).await, 1);
    }
    relayer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_sqlite_finds_damaged_stops_the_relayer_naming_the_file() {
    let (node, _dir, c) = devnet_and_config(|_| {}).await;
    let relayer = start(&node, 0, c.clone()).await;
    let id = submit(relayer.url(), &body()).await;
    wait_state(relayer.url(), &id, "written", T).await;
    let db = relayer.store_path().to_path_buf();
    relayer.shutdown().await;
    checkpoint(&db);
    // The root page of the batches table (read only after start, by reconciliation) gets an
    // invalid page type: a damage SQLite's structure check sees.
    let (root, page_size): (i64, i64) = {
        let conn = open_db(&db);
        (
            conn.query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'batches'",
                [],
                |r| r.get(0),
            )
            .unwrap(),
            conn.query_row("PRAGMA page_size", [], |r| r.get(0))
                .unwrap(),
        )
    };
    let mut bytes = std::fs::read(&db).unwrap();
    bytes[((root - 1) * page_size) as usize] = 0x42;
    std::fs::write(&db, bytes).unwrap();
    let error = match Relayer::start(c, reader(&node), writer(&node, 0)).await {
        Ok(_) => panic!("the relayer started on a damaged database"),
        Err(e) => e,
    };
    assert!(
        matches!(&error, RelayerError::Store(StoreError::Corrupt { path, .. }) if *path == db),
        "{error}"
    );
    let text = error.to_string();
    assert!(text.contains(&db.display().to_string()), "{text}");
    assert!(text.contains("quick_check"), "{text}");
    assert!(text.contains("move"), "{text}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flipped_byte_in_a_stored_envelope_or_owner_is_never_written() {
    let (node, _dir, mut c) = devnet_and_config(|c| {
        // The records stay queued until the restart below.
        c.batching.min_batch = 10;
        c.batching.max_wait = Duration::from_secs(3_600);
    })
    .await;
    let relayer = start(&node, 0, c.clone()).await;
    let url = relayer.url().to_string();
    let mut records = Vec::new();
    for i in 0..3 {
        let (b, owner) = record_body(APP, 3600, format!("rot-{i}").as_bytes());
        records.push((submit(&url, &b).await, owner, b));
    }
    let db = relayer.store_path().to_path_buf();
    relayer.shutdown().await;
    checkpoint(&db);
    // Record 0: one bit of its envelope (in the middle of the stored text).
    let envelope = records[0].2["envelope"]
        .as_str()
        .unwrap()
        .as_bytes()
        .to_vec();
    assert_eq!(flip_in_file(&db, &envelope, envelope.len() / 3), 1);
    // Record 1: one hex digit of its owner (still an address, someone else's).
    let owner = format!("{:#x}", records[1].1);
    let mut other = owner.clone().into_bytes();
    other[10] = if other[10] == b'a' { b'b' } else { b'a' };
    assert_eq!(replace_in_file(&db, owner.as_bytes(), &other), 1);
    let other_owner: Address = String::from_utf8(other).unwrap().parse().unwrap();
    c.batching.min_batch = 1;
    c.batching.max_wait = Duration::from_millis(200);
    let relayer = start(&node, 0, c).await;
    let url = relayer.url().to_string();
    wait_state(&url, &records[2].0, "written", T).await;
    for (id, _, _) in &records[..2] {
        let st = wait_state(&url, id, "failed", T).await;
        let e = st["error"].as_str().unwrap();
        assert!(e.contains("stored copy of this record is damaged"), "{e}");
        assert!(e.contains("not written"), "{e}");
    }
    assert_eq!(owner_entities(&node, records[0].1).await, 0);
    assert_eq!(owner_entities(&node, records[1].1).await, 0);
    assert_eq!(owner_entities(&node, other_owner).await, 0);
    assert_eq!(owner_entities(&node, records[2].1).await, 1);
    relayer.shutdown().await;
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stored_field_that_does_not_parse_is_an_error_naming_the_record() {
    let (node, _dir, c) = devnet_and_config(|_| {}).await;
    let relayer = start(&node, 0, c.clone()).await;
    let id = submit(relayer.url(), &body()).await;
    let st = wait_state(relayer.url(), &id, "written", T).await;
    let tx = st["txHash"].as_str().unwrap().to_string();
    let db = relayer.store_path().to_path_buf();
    relayer.shutdown().await;
    checkpoint(&db);
    // The written record's transaction hash loses a hex digit.
    let mut damaged = tx.clone().into_bytes();
    damaged[20] = b'z';
    assert!(replace_in_file(&db, tx.as_bytes(), &damaged) >= 1);
    let relayer = start(&node, 0, c).await;
    let (code, v) = get(relayer.url(), &format!("/v1/records/{id}")).await;
    assert_eq!(code, 500, "{v}");
    let e = v["error"].as_str().unwrap();
    assert!(e.contains(&format!("record {id}")), "{e}");
    assert!(e.contains("tx_hash"), "{e}");
    relayer.shutdown().await;
    node.shutdown().await;
}
