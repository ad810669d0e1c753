//! Adversary: an onlooker who copied a sealed envelope submits it again later, hoping the relayer
//! publishes a record its owner let expire. Envelope v2 (docs/PROTOCOL.md §3): a relayer accepts
//! only version 2 and only an `hour` in [now_hour - 2, now_hour + 1]; anything else is a 400 naming
//! `hour`. Real devnet, real relayer over HTTP. Before v2 the relayer accepted any copy at any time
//! (the envelope carried no time at all).

use std::time::Duration;

use alloy_primitives::Address;
use k256::ecdsa::SigningKey;
use privsvc_attributes::{AttrValue, Attributes};
use privsvc_envelope::{hour_of, pad_envelope, seal_envelope, EnvelopeBody};
use serde_json::{json, Value};

use crate::common::*;

fn unix_now() -> u64 {
    privsvc_relayer::testing::now_ms() / 1000
}

/// Waits past the next hour boundary when it is less than 30 s away, so that the hour a test
/// seals with is still the relayer's hour when the relayer checks it.
async fn clear_of_hour_boundary() {
    let into_hour = unix_now() % 3600;
    if into_hour > 3600 - 30 {
        tokio::time::sleep(Duration::from_secs(3600 - into_hour + 1)).await;
    }
}

/// A submit body whose envelope was sealed with `hour` (what an onlooker copied).
fn sealed_at(hour: u64) -> (Value, Address) {
    let key = SigningKey::random(&mut rand::thread_rng());
    let owner = Address::from_public_key(key.verifying_key());
    let mut attrs = Attributes::new();
    attrs.insert("project", APP).unwrap();
    attrs.insert("level", 3i32).unwrap();
    let body = EnvelopeBody {
        app: APP.into(),
        exp: 3600,
        hour,
        ct: "text/plain".into(),
        enc: false,
        types: attrs.types(),
        data: b"copied".to_vec(),
    };
    let sealed = seal_envelope(&body, &attrs, &key).unwrap();
    (
        json!({
            "app": APP,
            "owner": owner.to_string(),
            "envelope": sealed,
            "attributes": attrs.to_wire(),
            "expSeconds": 3600,
        }),
        owner,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_outside_the_hour_window_are_refused() {
    let (node, _dir, relayer) = devnet_and_relayer(|c| c.batching.min_batch = 1).await;
    let url = relayer.url().to_string();
    clear_of_hour_boundary().await;
    let now_hour = hour_of(unix_now());

    // Too old (the owner's one-hour record may be gone) and too far ahead: 400 naming hour,
    // nothing written for the owner.
    for hour in [now_hour - 3, now_hour + 2, now_hour - 100, 0] {
        let (body, owner) = sealed_at(hour);
        let e = refused(&url, &body, 400, "hour").await;
        assert!(
            e.contains(&format!(
                "envelope hour {hour} is outside the accepted window"
            )),
            "{e}"
        );
        assert_eq!(owner_entities(&node, owner).await, 0);
    }

    // Inside the window: accepted and written.
    let mut ids = Vec::new();
    let mut owners = Vec::new();
    for hour in [now_hour - 2, now_hour - 1, now_hour, now_hour + 1] {
        let (body, owner) = sealed_at(hour);
        ids.push(submit(&url, &body).await);
        owners.push(owner);
    }
    for id in &ids {
        wait_state(&url, id, "written", Duration::from_secs(20)).await;
    }
    for owner in owners {
        assert_eq!(owner_entities(&node, owner).await, 1);
    }
    relayer.shutdown().await;
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_1_and_non_str_project_are_refused() {
    let (node, _dir, relayer) = devnet_and_relayer(|_| {}).await;
    let url = relayer.url().to_string();
    clear_of_hour_boundary().await;
    let now_hour = hour_of(unix_now());

    // A version 1 envelope (no hour): refused, whatever its time.
    let (mut body, _) = sealed_at(now_hour);
    let text = body["envelope"].as_str().unwrap().trim_end_matches(' ');
    let v1 = text
        .replacen(&format!(",\"hour\":{now_hour}"), "", 1)
        .replacen("\"v\":2", "\"v\":1", 1);
    body["envelope"] = json!(pad_envelope(&v1).unwrap());
    refused(&url, &body, 400, "unsupported envelope version 1").await;

    // project as another type: refused by the relayer's own check (the attributes) and by the
    // envelope parser (the types), either way before anything is queued.
    let (mut body, _) = sealed_at(now_hour);
    let mut attrs = Attributes::from_wire(&body["attributes"]).unwrap();
    attrs.insert("project", AttrValue::I32(7)).unwrap();
    body["attributes"] = attrs.to_wire();
    refused(&url, &body, 400, "attribute project must have type str").await;

    relayer.shutdown().await;
    node.shutdown().await;
}
