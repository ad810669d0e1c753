//! Runs the committed vectors in conformance/core against this implementation.
//!
//! The expected values were generated once by examples/generate_core_vectors.rs, checked by
//! hand and by an independent implementation (keccak, JCS and secp256k1 recovery written
//! separately), and committed. This test only reads them; it never regenerates them.

use std::path::PathBuf;

use alloy_primitives::Address;
use k256::ecdsa::SigningKey;
use privsvc_attributes::Attributes;
use privsvc_envelope::*;
use serde_json::Value;

fn load(file: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../conformance/core")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn s(v: &Value) -> &str {
    v.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {v}"))
}

fn unhex(v: &Value) -> Vec<u8> {
    hex::decode(s(v).trim_start_matches("0x")).unwrap()
}

#[test]
fn envelope_vectors() {
    let d = load("envelope.json");
    let key = SigningKey::from_slice(&unhex(&d["privateKey"])).unwrap();
    let owner: Address = s(&d["owner"]).parse().unwrap();
    assert_eq!(Address::from_private_key(&key), owner);
    let cases = d["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for c in cases {
        let name = s(&c["name"]);
        let attrs = Attributes::from_wire(&c["attributes"]).unwrap();
        let b = &c["body"];
        let body = EnvelopeBody {
            app: s(&b["app"]).into(),
            exp: b["exp"].as_u64().unwrap(),
            hour: b["hour"].as_u64().unwrap(),
            ct: s(&b["ct"]).into(),
            enc: b["enc"].as_bool().unwrap(),
            types: attrs.types(),
            data: from_base64(s(&b["data"])).unwrap(),
        };
        assert_eq!(
            body.canonical_json(),
            s(&c["canonicalBody"]),
            "{name}: canonical body"
        );
        assert_eq!(
            attrs.canonical_json(),
            s(&c["canonicalAttributes"]),
            "{name}: canonical attributes"
        );
        if let Some(pre) = c.get("digestPreimageHex") {
            assert_eq!(
                envelope_digest_preimage(&body, &attrs),
                unhex(pre),
                "{name}: preimage"
            );
        }
        assert_eq!(
            envelope_digest(&body, &attrs).to_string(),
            s(&c["digest"]),
            "{name}: digest"
        );
        let sealed = seal_envelope(&body, &attrs, &key).unwrap();
        assert_eq!(sealed, s(&c["sealed"]), "{name}: sealed text");
        assert_eq!(
            sealed.len() as u64,
            c["paddedLength"].as_u64().unwrap(),
            "{name}: length"
        );
        let parsed = parse_envelope(s(&c["sealed"]).as_bytes()).unwrap();
        assert_eq!(parsed.body, body, "{name}: parsed body");
        assert_eq!(
            parsed.signature.to_vec(),
            unhex(&c["signature"]),
            "{name}: signature"
        );
        assert_eq!(
            envelope_signer(&parsed, &attrs).unwrap(),
            owner,
            "{name}: signer"
        );
    }
    let rejects = d["reject"].as_array().unwrap();
    assert!(rejects.len() >= 18);
    for r in rejects {
        let name = s(&r["name"]);
        let err = parse_envelope(s(&r["envelope"]).as_bytes())
            .err()
            .unwrap_or_else(|| panic!("{name}: accepted"))
            .to_string();
        assert!(err.contains(s(&r["errorContains"])), "{name}: {err}");
    }
}

#[test]
fn attribute_vectors() {
    let d = load("attributes.json");
    let valid = d["valid"].as_array().unwrap();
    assert_eq!(valid.len(), 3);
    for c in valid {
        let name = s(&c["name"]);
        let attrs = Attributes::from_wire(&c["wire"]).unwrap();
        assert_eq!(
            attrs.canonical_json(),
            s(&c["canonical"]),
            "{name}: canonical"
        );
        assert_eq!(
            Attributes::from_wire_json(s(&c["canonical"]).as_bytes()).unwrap(),
            attrs,
            "{name}"
        );
        let cells = attrs.arkiv_attributes();
        let want = c["arkiv"].as_array().unwrap();
        assert_eq!(cells.len(), want.len(), "{name}: cell count");
        for (cell, w) in cells.iter().zip(want) {
            assert_eq!(cell.name, s(&w["name"]), "{name}");
            assert_eq!(
                u64::from(cell.type_id),
                w["typeId"].as_u64().unwrap(),
                "{name}: {}",
                cell.name
            );
            assert_eq!(cell.value, unhex(&w["value"]), "{name}: {}", cell.name);
        }
    }
    let invalid = d["invalid"].as_array().unwrap();
    assert!(invalid.len() >= 15);
    for c in invalid {
        let name = s(&c["name"]);
        let err = Attributes::from_wire_json(s(&c["wireText"]).as_bytes())
            .err()
            .unwrap_or_else(|| panic!("{name}: accepted"))
            .to_string();
        assert!(err.contains(s(&c["errorContains"])), "{name}: {err}");
    }
}

#[test]
fn expiry_vectors() {
    let d = load("expiry.json");
    let buckets: Vec<u64> = d["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .collect();
    assert_eq!(buckets, EXPIRY_BUCKETS);
    for c in d["cases"].as_array().unwrap() {
        let seconds = c["seconds"].as_u64().unwrap();
        let got = expiry_bucket(seconds);
        match (c.get("bucket"), c.get("error").map(s)) {
            (Some(b), None) => assert_eq!(got, Ok(b.as_u64().unwrap()), "{seconds}"),
            (None, Some("zero")) => assert_eq!(got, Err(EnvelopeError::ZeroExpiry)),
            (None, Some("too-long")) => assert_eq!(got, Err(EnvelopeError::ExpiryTooLong(seconds))),
            other => panic!("malformed case {c}: {other:?}"),
        }
    }
    for c in d["expires"].as_array().unwrap() {
        let n = c["n"].as_u64().unwrap();
        let e = match s(&c["unit"]) {
            "seconds" => Expires::Seconds(n),
            "minutes" => Expires::Minutes(n),
            "hours" => Expires::Hours(n),
            "days" => Expires::Days(n),
            "weeks" => Expires::Weeks(n),
            "months" => Expires::Months(n),
            u => panic!("unknown unit {u}"),
        };
        assert_eq!(expiry_seconds(e), c["seconds"].as_u64().unwrap(), "{c}");
        assert_eq!(
            expiry_bucket(expiry_seconds(e)).unwrap(),
            c["bucket"].as_u64().unwrap(),
            "{c}"
        );
    }
}

#[test]
fn window_vectors() {
    let d = load("window.json");
    for c in d["hourOf"].as_array().unwrap() {
        assert_eq!(
            hour_of(c["unixSeconds"].as_u64().unwrap()),
            c["hour"].as_u64().unwrap(),
            "{c}"
        );
    }
    let window = d["window"].as_array().unwrap();
    assert!(window.iter().any(|c| c["accepted"] == true));
    assert!(window.iter().any(|c| c["accepted"] == false));
    for c in window {
        let got = check_hour_window(
            c["hour"].as_u64().unwrap(),
            c["nowSeconds"].as_u64().unwrap(),
        );
        assert_eq!(
            got.is_ok(),
            c["accepted"].as_bool().unwrap(),
            "{c}: {got:?}"
        );
    }
    let republish = d["republish"].as_array().unwrap();
    assert!(republish.iter().any(|c| c["accepted"] == true));
    assert!(republish.iter().any(|c| c["accepted"] == false));
    for c in republish {
        let hour = c["hour"].as_u64().unwrap();
        assert_eq!(
            republish_deadline(hour),
            c["deadline"].as_u64().unwrap(),
            "{c}"
        );
        let got = check_created_in_time(hour, c["createdSeconds"].as_u64().unwrap());
        assert_eq!(
            got.is_ok(),
            c["accepted"].as_bool().unwrap(),
            "{c}: {got:?}"
        );
    }
}
