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
