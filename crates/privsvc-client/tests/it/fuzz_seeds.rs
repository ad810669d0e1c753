//! Stable replay of the client fuzz seed corpora (fuzz/seeds/client_*/*) through the same entry
//! functions the cargo-fuzz targets call (`privsvc_client::fuzz_entry`).
//!
//! Files named `accept-*` must be accepted, `reject-*` refused; any other file (a minimised
//! crash kept as a regression seed) must only not panic. The seeds are written by
//! `write_generated_seeds` (ignored; run it with `-- --ignored` after a format change, then
//! review the diff).

use std::path::PathBuf;

use alloy_primitives::{Address, B256};
use privsvc_client::fuzz_entry::{heartbeat, info};
use privsvc_ledger::entity_to_json;
use privsvc_ledger::Heartbeat;
use privsvc_ledger::{ArkivValue, Attribute, Entity};
use serde_json::{json, Value};

fn seeds_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target)
}

fn replay(target: &str, entry: fn(&[u8]) -> bool) -> (usize, usize) {
    privsvc_attributes::fuzz_entry::replay_seed_corpus(&seeds_dir(target), entry)
}

#[test]
fn client_info_seeds() {
    let (accepted, rejected) = replay("client_info", info);
    assert!(
        accepted >= 2 && rejected >= 5,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn client_heartbeat_seeds() {
    let (accepted, rejected) = replay("client_heartbeat", heartbeat);
    assert!(
        accepted >= 2 && rejected >= 6,
        "{accepted} accepted, {rejected} rejected"
    );
}

// ----- seed generation -----

fn write(target: &str, name: &str, v: &Value) {
    let dir = seeds_dir(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), serde_json::to_vec(v).unwrap()).unwrap();
}

fn str_attr(name: &str, value: &str) -> Attribute {
    Attribute {
        name: name.into(),
        value: ArkivValue::Str(value.into()),
    }
}

fn heartbeat_entity(hb: &Heartbeat, creator: Address, url_attr: &str) -> Entity {
    Entity {
        key: B256::repeat_byte(3),
        creator: Some(creator),
        created_at: Some(100),
        attributes: Some(vec![
            str_attr("privsvc_kind", "heartbeat"),
            str_attr("project", "privsvc-7f3k"),
            str_attr("url", url_attr),
        ]),
        payload: Some(serde_json::to_vec(&hb.payload_json()).unwrap()),
        ..Entity::default()
    }
}

#[test]
#[ignore = "writes fuzz/seeds; run by hand after a format change"]
fn write_generated_seeds() {
    // client_info
    let info = json!({
        "address": "0x0000000000000000000000000000000000000001",
        "version": "privsvc-relayer/1",
        "chainId": 7738577, "minBatch": 2, "maxWaitMs": 1000, "minIntervalBlocks": 1,
        "tokensRequired": false, "maxMinAnonymity": 10, "maxHoldMs": 600000,
    });
    write("client_info", "accept-minimal.json", &info);
    let mut full = info.clone();
    full["tokensRequired"] = json!(true);
    full["issuer"] = json!("0x00000000000000000000000000000000000000aa");
    full["issuerUrl"] = json!("https://issuer.example");
    full["ohttpKey"] = json!("0100209a");
    write("client_info", "accept-tokens-and-ohttp.json", &full);
    let edit = |name: &str, f: &dyn Fn(&mut Value)| {
        let mut v = info.clone();
        f(&mut v);
        write("client_info", name, &v);
    };
    edit("reject-version-2.json", &|v| {
        v["version"] = json!("privsvc-relayer/2")
    });
    edit("reject-address-not-hex.json", &|v| {
        v["address"] = json!("0xzz00000000000000000000000000000000000001")
    });
    edit("reject-chain-id-negative.json", &|v| {
        v["chainId"] = json!(-1)
    });
    edit("reject-chain-id-string.json", &|v| {
        v["chainId"] = json!("7738577")
    });
    edit("reject-missing-max-hold.json", &|v| {
        v.as_object_mut().unwrap().remove("maxHoldMs");
    });
    write("client_info", "reject-array.json", &json!([]));

    // client_heartbeat
    let relayer = Address::repeat_byte(0x42);
    let hb = Heartbeat {
        url: "https://relay.example/".into(),
        address: relayer,
        chain_id: 7738577,
        version: "privsvc-relayer/1".into(),
        ohttp_key: Some("0100209a".into()),
    };
    let e = heartbeat_entity(&hb, relayer, &hb.url);
    write(
        "client_heartbeat",
        "accept-with-ohttp-key.json",
        &entity_to_json(&e, true),
    );
    let plain = Heartbeat {
        url: "http://127.0.0.1:8080".into(),
        ohttp_key: None,
        ..hb.clone()
    };
    write(
        "client_heartbeat",
        "accept-plain-http.json",
        &entity_to_json(&heartbeat_entity(&plain, relayer, &plain.url), false),
    );
    let reject = |name: &str, e: Entity| {
        write("client_heartbeat", name, &entity_to_json(&e, true));
    };
    reject(
        "reject-claims-another-relayer.json",
        heartbeat_entity(&hb, Address::repeat_byte(0x43), &hb.url),
    );
    reject(
        "reject-url-attribute-differs.json",
        heartbeat_entity(&hb, relayer, "https://evil.example/"),
    );
    let with_query = Heartbeat {
        url: "https://relay.example/?x=1".into(),
        ..hb.clone()
    };
    reject(
        "reject-url-with-query.json",
        heartbeat_entity(&with_query, relayer, &with_query.url),
    );
    let ftp = Heartbeat {
        url: "ftp://relay.example".into(),
        ..hb.clone()
    };
    reject(
        "reject-url-not-http.json",
        heartbeat_entity(&ftp, relayer, &ftp.url),
    );
    let mut kind = heartbeat_entity(&hb, relayer, &hb.url);
    kind.attributes.as_mut().unwrap()[0] = str_attr("privsvc_kind", "issuer-key");
    reject("reject-not-a-heartbeat.json", kind);
    let mut payload = heartbeat_entity(&hb, relayer, &hb.url);
    payload.payload = Some(b"not json".to_vec());
    reject("reject-payload-not-json.json", payload);
    let mut no_creator = heartbeat_entity(&hb, relayer, &hb.url);
    no_creator.creator = None;
    reject("reject-without-creator.json", no_creator);
    let mut key = entity_to_json(&heartbeat_entity(&hb, relayer, &hb.url), true);
    key["key"] = json!("0x12");
    write("client_heartbeat", "reject-key-not-32-bytes.json", &key);
}
