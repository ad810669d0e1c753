//! Stable replay of the `relayer_submit` fuzz seed corpus (fuzz/seeds/relayer_submit/*) through
//! the entry function the cargo-fuzz target calls (`privsvc_relayer::testing::fuzz_entry::submit_body`).
//!
//! Files named `accept-*` must be accepted, `reject-*` refused; any other file (a minimised
//! crash kept as a regression seed) must only not panic. The seeds are written by
//! `write_generated_seeds` (ignored; run it with `-- --ignored` after a change of the envelope
//! or attribute format, then review the diff). A freshly sealed body is checked too, so that
//! the accepting path stays covered even while stored seeds are stale.

use std::path::PathBuf;

use alloy_primitives::Address;
use k256::ecdsa::SigningKey;
use privsvc_attributes::Attributes;
use privsvc_envelope::{seal_envelope, EnvelopeBody};
use privsvc_relayer::testing::fuzz_entry::{submit_body, FUZZ_NOW_SECS, FUZZ_RELAYER};
use serde_json::{json, Value};

fn seeds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/relayer_submit")
}

fn replay(entry: fn(&[u8]) -> bool) -> (usize, usize) {
    privsvc_attributes::fuzz_entry::replay_seed_corpus(&seeds_dir(), entry)
}

#[test]
fn relayer_submit_seeds() {
    let (accepted, rejected) = replay(submit_body);
    assert!(
        accepted >= 2 && rejected >= 12,
        "{accepted} accepted, {rejected} rejected"
    );
}

/// A body sealed with `key` (deterministic for a given key) at the fuzz clock's hour.
fn body(key: &SigningKey, app: &str, exp: u64, data: &[u8]) -> Value {
    body_at(
        key,
        app,
        exp,
        data,
        privsvc_envelope::hour_of(FUZZ_NOW_SECS),
    )
}

/// A body sealed with `key` whose envelope carries `hour`.
fn body_at(key: &SigningKey, app: &str, exp: u64, data: &[u8], hour: u64) -> Value {
    let owner = Address::from_public_key(key.verifying_key());
    let mut attrs = Attributes::new();
    attrs.insert("project", app).unwrap();
    attrs.insert("level", 3i32).unwrap();
    let envelope = EnvelopeBody {
        app: app.into(),
        exp,
        hour,
        ct: "text/plain".into(),
        enc: false,
        types: attrs.types(),
        data: data.to_vec(),
    };
    let sealed = seal_envelope(&envelope, &attrs, key).unwrap();
    json!({
        "app": app,
        "owner": owner.to_string(),
        "envelope": sealed,
        "attributes": attrs.to_wire(),
        "expSeconds": exp,
    })
}

fn key(byte: u8) -> SigningKey {
    SigningKey::from_slice(&[byte; 32]).unwrap()
}

#[test]
fn a_freshly_sealed_body_is_accepted_and_its_owner_cannot_be_swapped() {
    let good = body(&key(5), "notes", 3600, b"hello");
    assert!(submit_body(&serde_json::to_vec(&good).unwrap()));
    // Someone replaying the envelope under another owner (e.g. the relayer's own address).
    for owner in [Address::repeat_byte(0x22), FUZZ_RELAYER] {
        let mut forged = good.clone();
        forged["owner"] = json!(owner.to_string());
        assert!(!submit_body(&serde_json::to_vec(&forged).unwrap()));
    }
}

fn write(name: &str, v: &Value) {
    std::fs::create_dir_all(seeds_dir()).unwrap();
    std::fs::write(seeds_dir().join(name), serde_json::to_vec(v).unwrap()).unwrap();
}

#[test]
#[ignore = "writes fuzz/seeds; run by hand after a format change"]
fn write_generated_seeds() {
    let good = body(&key(5), "notes", 3600, b"hello");
    write("accept-minimal.json", &good);
    let mut options = body(&key(6), "notes", 604_800, &[b'x'; 700]);
    options["minAnonymity"] = json!(3);
    options["maxHoldMs"] = json!(60_000);
    options["token"] = Value::Null;
    write("accept-1024-bytes-with-options.json", &options);

    let edit = |name: &str, f: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        f(&mut v);
        write(name, &v);
    };
    edit("reject-owner-is-another-address.json", &|v| {
        v["owner"] = json!(Address::repeat_byte(0x22).to_string())
    });
    edit("reject-owner-is-the-relayer.json", &|v| {
        v["owner"] = json!(FUZZ_RELAYER.to_string())
    });
    edit("reject-owner-short.json", &|v| v["owner"] = json!("0x1234"));
    edit("reject-app-differs.json", &|v| v["app"] = json!("other"));
    edit("reject-exp-not-a-bucket.json", &|v| {
        v["expSeconds"] = json!(3601)
    });
    edit("reject-exp-differs.json", &|v| {
        v["expSeconds"] = json!(86400)
    });
    edit("reject-envelope-unpadded.json", &|v| {
        let s = v["envelope"].as_str().unwrap().trim_end().to_string();
        v["envelope"] = json!(s)
    });
    edit("reject-envelope-not-a-string.json", &|v| {
        v["envelope"] = json!({"v": 1})
    });
    edit("reject-attribute-changed.json", &|v| {
        v["attributes"]["level"]["value"] = json!(4)
    });
    edit("reject-project-missing.json", &|v| {
        v["attributes"].as_object_mut().unwrap().remove("project");
    });
    edit("reject-system-project.json", &|v| {
        v["attributes"]["project"]["value"] = json!("privsvc-7f3k")
    });
    edit("reject-reserved-attribute-name.json", &|v| {
        v["attributes"]["privsvc_kind"] = json!({"type": "str", "value": "heartbeat"})
    });
    edit("reject-min-anonymity-zero.json", &|v| {
        v["minAnonymity"] = json!(0)
    });
    edit("reject-min-anonymity-above-limit.json", &|v| {
        v["minAnonymity"] = json!(11)
    });
    edit("reject-max-hold-above-limit.json", &|v| {
        v["maxHoldMs"] = json!(600_001)
    });
    edit("reject-max-hold-negative.json", &|v| {
        v["maxHoldMs"] = json!(-1)
    });
    edit("reject-token-malformed.json", &|v| {
        v["token"] = json!("abc")
    });
    edit("reject-app-missing.json", &|v| {
        v.as_object_mut().unwrap().remove("app");
    });
    let hour = privsvc_envelope::hour_of(FUZZ_NOW_SECS);
    write(
        "reject-hour-before-the-window.json",
        &body_at(&key(7), "notes", 3600, b"old copy", hour - 3),
    );
    write(
        "reject-hour-after-the-window.json",
        &body_at(&key(8), "notes", 3600, b"future", hour + 2),
    );
    write("reject-not-an-object.json", &json!([1, 2]));
    std::fs::write(seeds_dir().join("reject-not-json.txt"), b"app=notes").unwrap();
}
