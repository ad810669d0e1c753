//! Adversary tests of the relayer (docs/PROTOCOL.md §7, revision 2): each test plays a party that
//! tries to abuse a rule and asserts that it gets nothing or learns nothing. Real relayer over
//! loopback HTTP, the real embedded devnet, real SQLite files. Each test fails on the relayer
//! before revision 2.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use alloy_primitives::B256;
use privsvc_relayer::{OhttpSeed, RelayerConfig, TokenMode};
use serde_json::{json, Value};

use crate::common::*;

const T: Duration = Duration::from_secs(60);
const SEED: [u8; 32] = [7u8; 32];

/// An encapsulated `POST /v1/records` of `body` for the relayer at `url` (with OHTTP on):
/// (the bytes a relay would forward, the client's context to open the answer).
async fn encapsulated(url: &str, body: &Value) -> (Vec<u8>, privsvc_ohttp::PendingResponse) {
    let key = get(url, "/v1/info").await.1["ohttpKey"]
        .as_str()
        .expect("ohttpKey")
        .to_string();
    let request = privsvc_ohttp::BinaryRequest {
        method: "POST".into(),
        path: "/v1/records".into(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: serde_json::to_vec(body).unwrap(),
    };
    let authority = url.trim_start_matches("http://").to_string();
    privsvc_ohttp::encapsulate(&key, &request, "http", &authority).unwrap()
}

/// POST encapsulated bytes to `/v1/ohttp` from `client`; the outer status and body.
async fn post_ohttp_from(client: &reqwest::Client, url: &str, msg: Vec<u8>) -> (u16, Vec<u8>) {
    let r = client
        .post(format!("{url}/v1/ohttp"))
        .header("content-type", "message/ohttp-req")
        .body(msg)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

/// Submit `body` encapsulated, from `client`; the inner status.
async fn ohttp_submit(client: &reqwest::Client, url: &str, body: &Value) -> u16 {
    let (msg, pending) = encapsulated(url, body).await;
    let (status, answer) = post_ohttp_from(client, url, msg).await;
    assert_eq!(status, 200);
    pending.open(&answer).unwrap().status
}

/// How many record rows the relayer's database holds (read with a separate connection).
fn stored_records(db: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT COUNT(*) FROM records", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_relay_replaying_an_encapsulated_submission_gets_one_entity_and_one_id() {
    let (node, _dir, relayer) = devnet_and_relayer(|c| {
        c.ohttp_seed = Some(OhttpSeed::new(SEED));
        // The record waits 2 s for a second one: the first replays find it queued.
        c.batching.min_batch = 2;
        c.batching.max_wait = Duration::from_millis(2_000);
    })
    .await;
    let url = relayer.url().to_string();
    let (body, owner) = record_body(APP, 3600, b"replayed");
    let (msg, pending) = encapsulated(&url, &body).await;

    // The client's own request, then the relay replays the same bytes, while the record is
    // queued and after it is written.
    let (status, answer) = post_ohttp_from(&http(), &url, msg.clone()).await;
    assert_eq!(status, 200);
    let first = pending.open(&answer).unwrap();
    assert_eq!(first.status, 202);
    let id = serde_json::from_slice::<Value>(&first.body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    for _ in 0..5 {
        assert_eq!(post_ohttp_from(&http(), &url, msg.clone()).await.0, 200);
    }
    wait_state(&url, &id, "written", T).await;
    for _ in 0..5 {
        assert_eq!(post_ohttp_from(&http(), &url, msg.clone()).await.0, 200);
    }
    // Every replay was answered 202 (the relay cannot read the answers; the client can)...
    let m = relayer.metrics_text();
    assert!(
        m.contains("privsvc_submissions_total{status=\"202\"} 11"),
        "{m}"
    );
    // ... and stored nothing: one record, one entity.
    assert_eq!(stored_records(relayer.store_path()), 1);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(owner_entities(&node, owner).await, 1);

    // The same envelope posted directly, again and again: the same id every time.
    for _ in 0..5 {
        assert_eq!(submit(&url, &body).await, id);
    }
    assert_eq!(stored_records(relayer.store_path()), 1);
    assert_eq!(owner_entities(&node, owner).await, 1);
    relayer.shutdown().await;
}

#[tokio::test]
async fn concurrent_copies_of_one_envelope_get_one_id_and_one_entity() {
    let (node, _dir, relayer) = devnet_and_relayer(|c| {
        c.batching.min_batch = 1;
        c.batching.max_wait = Duration::from_millis(300);
    })
    .await;
    let url = relayer.url().to_string();
    let (body, owner) = record_body(APP, 3600, b"raced");
    let copies = (0..20).map(|_| submit(&url, &body));
    let ids = futures::future::join_all(copies).await;
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    wait_state(&url, &ids[0], "written", T).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(owner_entities(&node, owner).await, 1);
    assert_eq!(stored_records(relayer.store_path()), 1);
    relayer.shutdown().await;
}

fn token_config(dir: &std::path::Path, issuer: alloy_primitives::Address) -> RelayerConfig {
    let mut c = config(dir);
    c.tokens = TokenMode::Required;
    c.issuer.address = Some(issuer);
    c.issuer.url = Some("http://issuer.invalid".into());
    c
}

#[tokio::test]
async fn a_resubmission_spends_no_second_token_and_reveals_nothing_new() {
    let node = devnet().await;
    let issuer = TestIssuer::publish(&node, 1, APP, &[today()]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = token_config(dir.path(), issuer.address);
    c.batching.min_batch = 2;
    c.batching.max_wait = Duration::from_millis(600_000);
    let relayer = start(&node, 0, c).await;
    let url = relayer.url().to_string();

    let (mut body, owner) = record_body(APP, 3600, b"once");
    body["token"] = serde_json::to_value(issuer.token(APP, today())).unwrap();
    let id = submit(&url, &body).await;
    // The same envelope with another valid token, with no token, and with a different
    // minAnonymity: the first answer each time, and the first submission's settings stand.
    let second = issuer.token(APP, today());
    let mut again = body.clone();
    again["token"] = serde_json::to_value(&second).unwrap();
    assert_eq!(submit(&url, &again).await, id);
    let mut bare = body.clone();
    bare.as_object_mut().unwrap().remove("token");
    assert_eq!(submit(&url, &bare).await, id);
    let mut held = body.clone();
    held["minAnonymity"] = json!(5);
    assert_eq!(submit(&url, &held).await, id);
    assert_eq!(stored_records(relayer.store_path()), 1);

    // The second token was not spent: a new record can still use it. Its arrival completes
    // the batch of 2 (the resubmissions did not count as records).
    let new = submit(&url, &body_with_token(&second)).await;
    assert_ne!(new, id);
    let st = wait_state(&url, &id, "written", T).await;
    assert_eq!(st["batchSize"], 2, "{st}");
    wait_state(&url, &new, "written", T).await;
    assert_eq!(owner_entities(&node, owner).await, 1);
    relayer.shutdown().await;
}

/// Spearman's rank correlation of two permutations of 0..n.
fn rank_correlation(a: &[usize], b: &[usize]) -> f64 {
    let n = a.len() as f64;
    let d2: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
        .sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

#[tokio::test]
async fn the_order_of_a_batch_on_the_ledger_tells_nothing_about_arrival_order() {
    const BATCHES: usize = 40;
    const SIZE: usize = 8;
    let (node, _dir, relayer) = devnet_and_relayer(|c| {
        c.batching.min_batch = SIZE;
        c.batching.max_batch = SIZE;
        c.batching.max_min_anonymity = SIZE;
        c.batching.max_wait = Duration::from_millis(600_000);
    })
    .await;
    let url = relayer.url().to_string();
    let receipts = writer(&node, 4);
    let mut same_position = 0usize;
    let mut correlation_sum = 0.0;
    for _ in 0..BATCHES {
        // Arrival order is what the relay (or an onlooker) sees: one submission after another.
        let mut ids = Vec::with_capacity(SIZE);
        for _ in 0..SIZE {
            ids.push(submit(&url, &body()).await);
        }
        let mut tx = None;
        let mut keys = Vec::with_capacity(SIZE);
        for id in &ids {
            let st = wait_state(&url, id, "written", T).await;
            assert_eq!(st["batchSize"], SIZE, "{st}");
            let h: B256 = st["txHash"].as_str().unwrap().parse().unwrap();
            assert!(tx.is_none() || tx == Some(h), "one batch per round");
            tx = Some(h);
            keys.push(st["entityKey"].as_str().unwrap().parse::<B256>().unwrap());
        }
        let receipt = receipts.receipt(tx.unwrap()).await.unwrap().unwrap();
        let ledger_order: Vec<B256> = receipt.created.iter().map(|c| c.key).collect();
        assert_eq!(ledger_order.len(), SIZE);
        // Each record's transfer follows the create of the same key (prediction followed the
        // shuffled order).
        for t in &receipt.transfers {
            assert!(keys.contains(&t.key));
        }
        let ledger_pos: Vec<usize> = keys
            .iter()
            .map(|k| {
                ledger_order
                    .iter()
                    .position(|l| l == k)
                    .expect("key created")
            })
            .collect();
        let arrival_pos: Vec<usize> = (0..SIZE).collect();
        same_position += ledger_pos
            .iter()
            .zip(&arrival_pos)
            .filter(|(l, a)| l == a)
            .count();
        correlation_sum += rank_correlation(&arrival_pos, &ledger_pos);
    }
    // Chance: a record lands at its arrival position with probability 1/8, so about 40 of 320
    // (standard deviation about 6); arrival order would give 320. Correlation: mean about 0
    // with standard deviation 0.06 over 40 batches; arrival order would give 1.
    let mean_correlation = correlation_sum / BATCHES as f64;
    let by_chance = BATCHES * SIZE / SIZE;
    assert!(
        same_position <= 2 * by_chance,
        "{same_position} of {} records at their arrival position",
        BATCHES * SIZE
    );
    assert!(
        mean_correlation.abs() < 0.4,
        "mean rank correlation {mean_correlation}"
    );
    relayer.shutdown().await;
}

#[tokio::test]
async fn encapsulating_submissions_does_not_escape_the_per_address_limit() {
    let relay_ip: IpAddr = "127.0.0.2".parse().unwrap();
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.ohttp_seed = Some(OhttpSeed::new(SEED));
        c.limits.submissions_per_min = 2;
        c.limits.ohttp_relay_ips = vec![relay_ip];
        c.batching.min_batch = 100;
        c.batching.max_wait = Duration::from_millis(600_000);
    })
    .await;
    let url = relayer.url().to_string();
    avoid_minute_edge().await;
    // A caller (127.0.0.1, not a relay) posting encapsulated submissions itself.
    let caller = http();
    assert_eq!(ohttp_submit(&caller, &url, &body()).await, 202);
    assert_eq!(ohttp_submit(&caller, &url, &body()).await, 202);
    for _ in 0..3 {
        assert_eq!(ohttp_submit(&caller, &url, &body()).await, 429);
    }
    // Its direct submissions share the same count.
    let (status, v) = post(&url, "/v1/records", &body()).await;
    assert_eq!(status, 429, "{v}");
    // The configured relay (127.0.0.2) is not limited: it limits its own clients.
    let relay = reqwest::Client::builder()
        .local_address(relay_ip)
        .build()
        .unwrap();
    for _ in 0..10 {
        assert_eq!(ohttp_submit(&relay, &url, &body()).await, 202);
    }
    relayer.shutdown().await;
}

/// The status of every id, and for each written record check that `batchSize` is the number
/// of records of ITS project in its transaction (computed from all statuses).
async fn check_batch_sizes_count_peers(url: &str, records: &[(String, String)]) {
    let mut statuses = Vec::new();
    for (id, project) in records {
        statuses.push((
            project.clone(),
            get(url, &format!("/v1/records/{id}")).await.1,
        ));
    }
    let mut peers: HashMap<(String, String), u64> = HashMap::new();
    for (project, st) in &statuses {
        if st["state"] == "written" {
            let tx = st["txHash"].as_str().unwrap().to_string();
            *peers.entry((project.clone(), tx)).or_default() += 1;
        }
    }
    for (project, st) in &statuses {
        if st["state"] == "written" {
            let tx = st["txHash"].as_str().unwrap().to_string();
            assert_eq!(st["batchSize"], peers[&(project.clone(), tx)], "{st}");
        }
    }
}

#[tokio::test]
async fn minanonymity_counts_only_records_of_the_same_project() {
    let (node, _dir, relayer) = devnet_and_relayer(|c| {
        c.batching.min_batch = 8;
        c.batching.max_wait = Duration::from_millis(3_000);
    })
    .await;
    let url = relayer.url().to_string();
    let mut all: Vec<(String, String)> = Vec::new();

    // A P-record asking for 3 peers, then many records of other projects.
    let (mut held, held_owner) = record_body_in(APP, "P", 3600, b"needs peers");
    held["minAnonymity"] = json!(3);
    held["maxHoldMs"] = json!(120_000);
    let held_id = submit(&url, &held).await;
    all.push((held_id.clone(), "P".into()));
    for i in 0..9 {
        let project = format!("other{}", i % 3);
        let id = submit(&url, &record_body_in(APP, &project, 3600, b"x").0).await;
        all.push((id, project));
    }
    for (id, _) in &all[1..] {
        wait_state(&url, id, "written", T).await;
    }
    // Nine records went out; the P-record had no peer among them: still held, not written.
    let st = get(&url, &format!("/v1/records/{held_id}")).await.1;
    assert_eq!(st["state"], "queued", "{st}");
    assert_eq!(owner_entities(&node, held_owner).await, 0);
    check_batch_sizes_count_peers(&url, &all).await;

    // Five more of other projects, then two P-records: one batch of 8 forms, with 3 P.
    let mut round = Vec::new();
    for i in 0..5 {
        let project = format!("other{}", i % 2);
        round.push((
            submit(&url, &record_body_in(APP, &project, 3600, b"y").0).await,
            project,
        ));
    }
    for _ in 0..2 {
        round.push((
            submit(&url, &record_body_in(APP, "P", 3600, b"peer").0).await,
            "P".to_string(),
        ));
    }
    let st = wait_state(&url, &held_id, "written", T).await;
    assert_eq!(st["batchSize"], 3, "{st}");
    for (id, _) in &round {
        let peer = wait_state(&url, id, "written", T).await;
        assert_eq!(peer["txHash"], st["txHash"], "one batch of 8");
    }
    all.extend(round);
    check_batch_sizes_count_peers(&url, &all).await;
    assert_eq!(owner_entities(&node, held_owner).await, 1);
    relayer.shutdown().await;
}

#[tokio::test]
async fn metrics_are_not_served_on_the_public_listener() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.ohttp_seed = Some(OhttpSeed::new(SEED));
    })
    .await;
    let url = relayer.url().to_string();
    submit(&url, &body()).await;
    let (status, v) = get(&url, "/metrics").await;
    assert_eq!(status, 404, "{v}");
    // Nor inside OHTTP.
    let key = get(&url, "/v1/info").await.1["ohttpKey"]
        .as_str()
        .unwrap()
        .to_string();
    let request = privsvc_ohttp::BinaryRequest {
        method: "GET".into(),
        path: "/metrics".into(),
        headers: vec![],
        body: vec![],
    };
    let authority = url.trim_start_matches("http://").to_string();
    let (msg, pending) = privsvc_ohttp::encapsulate(&key, &request, "http", &authority).unwrap();
    let (outer, answer) = post_ohttp_from(&http(), &url, msg).await;
    assert_eq!(outer, 200);
    assert_eq!(pending.open(&answer).unwrap().status, 404);
    assert!(relayer.metrics_addr().is_none());
    relayer.shutdown().await;

    // With METRICS_BIND, only that listener serves them.
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.metrics_bind = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let metrics = format!("http://{}", relayer.metrics_addr().unwrap());
    assert_ne!(metrics, relayer.url());
    let text = http()
        .get(format!("{metrics}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("privsvc_submissions_total"), "{text}");
    assert_eq!(get(relayer.url(), "/metrics").await.0, 404);
    // The metrics listener serves nothing else.
    assert_eq!(get(&metrics, "/v1/info").await.0, 404);
    relayer.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn data_dir_is_private_and_deleted_records_are_overwritten() {
    use std::os::unix::fs::PermissionsExt;
    let node = devnet().await;
    let parent = tempfile::tempdir().unwrap();
    let data = parent.path().join("relayer-data");
    let mut c = config(&data);
    c.status_retention = Duration::from_millis(600);
    c.batching.min_batch = 1;
    c.batching.max_wait = Duration::from_millis(100);
    let relayer = start(&node, 0, c).await;
    let url = relayer.url().to_string();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    let db = relayer.store_path().to_path_buf();
    assert_eq!(mode(&db), 0o600);

    // A record with a recognisable payload is written, then its status pruned.
    let marker = b"MARKER-".repeat(40);
    let (b, _) = record_body(APP, 3600, &marker);
    let envelope = b["envelope"].as_str().unwrap().to_string();
    let id = submit(&url, &b).await;
    wait_state(&url, &id, "written", T).await;
    for suffix in ["-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        assert_eq!(mode(std::path::Path::new(&p)), 0o600, "{suffix}");
    }
    let path = format!("/v1/records/{id}");
    let start = std::time::Instant::now();
    while get(&url, &path).await.0 != 404 {
        assert!(start.elapsed() < T, "status not pruned");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    relayer.shutdown().await;
    // Fold the WAL into the database, then look for the envelope's bytes anywhere on disk.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
    }
    // The payload is inside the envelope as base64; a 60-byte run of it is unmistakable.
    let needle = &envelope.as_bytes()[envelope.find("data").unwrap() + 10..][..60];
    for entry in std::fs::read_dir(&data).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            let bytes = std::fs::read(&p).unwrap();
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "{} still holds the deleted envelope",
                p.display()
            );
        }
    }
}
