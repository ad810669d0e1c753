//! Adversary tests of revision 3 (DESIGN 10, "what a party can measure") on the servers. Each
//! test plays one party (a replaying OHTTP relay, a flooding user, a host with a whole IPv6
//! /64, a relay watching `/healthz` for an empty queue, a user flooding holds that can never
//! be met, and a store that fails at the wrong moment) against a real relayer: the embedded
//! devnet, real HTTP on 127.0.0.1, real OHTTP, real RSA blind signatures, real SQLite files.
//! Each fails on the relayer before revision 3.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(30);

/// A user floods the relayer with more than MAX_BATCH held records whose holds can never be
/// met (minAnonymity 2, each alone in its own project, a long maxHoldMs). Honest records
/// arriving behind them are written at once; the held ones stay queued, holding nothing up.
#[tokio::test]
async fn unmet_holds_from_many_projects_never_stall_honest_records() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.min_batch = 1;
        c.max_wait_ms = 200;
        c.max_batch = 10;
        c.max_min_anonymity = 10;
    })
    .await;
    let url = relayer.url().to_string();
    let mut held = Vec::new();
    for i in 0..25 {
        let (mut b, _) = record_body_in(APP, &format!("lone-{i}"), 3600, b"never met");
        b["minAnonymity"] = json!(2);
        b["maxHoldMs"] = json!(120_000);
        held.push(submit(&url, &b).await);
    }
    let bodies: Vec<Value> = (0..3).map(|_| body()).collect();
    let honest: Vec<String> =
        futures::future::join_all(bodies.iter().map(|b| submit(&url, b))).await;
    for id in &honest {
        wait_state(&url, id, "written", Duration::from_secs(15)).await;
    }
    for id in held.iter().step_by(6) {
        let st = get(&url, &format!("/v1/records/{id}")).await.1;
        assert_eq!(st["state"], "queued", "{st}");
    }
    relayer.shutdown().await;
}

/// The relayer's store fails exactly when the batcher marks a record that it found already on
/// the ledger (another relayer wrote the same envelope first: a client's failover). The record
/// must go back to the queue, never into a batch: a second entity would be a second copy of
/// the user's record under the same owner. When the store recovers it is marked written with
/// the entity that exists.
#[tokio::test]
async fn a_store_hiccup_on_a_record_already_on_the_ledger_never_writes_it_twice() {
    let (node, _dir_a, a) = devnet_and_relayer(|c| {
        c.min_batch = 1;
        c.max_wait_ms = 200;
    })
    .await;
    let dir_b = tempfile::tempdir().unwrap();
    let b = start(&node, 1, config(dir_b.path())).await;
    // The failing store: A's database refuses to mark a queued record written.
    let db = rusqlite::Connection::open(a.store_path()).unwrap();
    db.execute_batch(
        "CREATE TRIGGER store_hiccup BEFORE UPDATE OF state ON records
         WHEN OLD.state = 'queued' AND NEW.state = 'written'
         BEGIN SELECT RAISE(ABORT, 'injected store failure'); END;",
    )
    .unwrap();

    let (record, owner) = record_body(APP, 3600, b"failover");
    let id_b = submit(b.url(), &record).await;
    let on_b = wait_state(b.url(), &id_b, "written", T).await;
    let id_a = submit(a.url(), &record).await;
    // A finds it on the ledger several times over, cannot store that, and writes nothing.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(owner_entities(&node, owner).await, 1, "written twice");
    let st = get(a.url(), &format!("/v1/records/{id_a}")).await.1;
    assert_eq!(st["state"], "queued", "{st}");

    // The store recovers: A marks the record written with the entity B created.
    db.execute_batch("DROP TRIGGER store_hiccup").unwrap();
    let on_a = wait_state(a.url(), &id_a, "written", T).await;
    assert_eq!(on_a["entityKey"], on_b["entityKey"]);
    assert_eq!(owner_entities(&node, owner).await, 1);
    a.shutdown().await;
    b.shutdown().await;
}
