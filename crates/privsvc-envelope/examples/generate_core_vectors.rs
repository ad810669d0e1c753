//! GENERATOR for conformance/core/*.json. Run once, review the output by hand, commit it:
//!
//! ```sh
//! cargo run -p privsvc-envelope --example generate_core_vectors -- conformance/core fuzz/seeds/parse_envelope
//! ```
//!
//! The optional second directory receives the envelope seeds of the `parse_envelope` fuzz
//! target (`accept-*` and `reject-*` files derived from the same vectors).
//!
//! The conformance test (tests/it/conformance.rs) never runs this; it compares the library with
//! the committed files, so regenerating is a deliberate act that shows up in review.

use std::collections::BTreeMap;

use k256::ecdsa::SigningKey;
use privsvc_attributes::{json, Attributes};
use privsvc_envelope::*;
use serde_json::{json, Value};

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: generate_core_vectors <dir>");
    let envelopes = envelope_vectors();
    if let Some(seeds) = std::env::args().nth(2) {
        write_seeds(&seeds, &envelopes);
    }
    write(&dir, "envelope.json", envelopes);
    write(&dir, "attributes.json", attribute_vectors());
    write(&dir, "expiry.json", expiry_vectors());
    write(&dir, "window.json", window_vectors());
}

/// Fuzz seeds: the accepted cases and every rejection, plus high-s, v = 29 and 16385 bytes.
fn write_seeds(dir: &str, v: &Value) {
    let slug = |name: &str| -> String {
        name.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect::<String>()
            .split('-')
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("-")
    };
    let put = |name: String, bytes: &[u8]| {
        std::fs::write(format!("{dir}/{name}"), bytes).unwrap();
    };
    let cases = v["cases"].as_array().unwrap();
    for (c, name) in cases
        .iter()
        .zip(["minimal-512", "every-type-1024", "payload-4096"])
    {
        put(
            format!("accept-{name}.txt"),
            c["sealed"].as_str().unwrap().as_bytes(),
        );
    }
    for r in v["reject"].as_array().unwrap() {
        let name = slug(r["name"].as_str().unwrap());
        put(
            format!("reject-{name}.txt"),
            r["envelope"].as_str().unwrap().as_bytes(),
        );
    }
    let first = cases[0]["sealed"].as_str().unwrap();
    let content = first.trim_end_matches(' ');
    let sig_at = content.find("\"sig\":\"0x").unwrap() + 9;
    let sig = hex::decode(&content[sig_at..sig_at + 130]).unwrap();
    // s' = n - s with the other recovery byte: the same signer, but high-s.
    let n = alloy_primitives::U256::from_str_radix(
        "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141",
        16,
    )
    .unwrap();
    let s = alloy_primitives::U256::from_be_slice(&sig[32..64]);
    let mut high = sig.clone();
    high[32..64].copy_from_slice(&(n - s).to_be_bytes::<32>());
    high[64] = if sig[64] == 27 { 28 } else { 27 };
    let mut v29 = sig.clone();
    v29[64] = 29;
    for (name, bytes) in [("high-s", high), ("v-29", v29)] {
        let mut t = content.to_owned();
        t.replace_range(sig_at..sig_at + 130, &hex::encode(bytes));
        put(
            format!("reject-{name}.txt"),
            pad_envelope(&t).unwrap().as_bytes(),
        );
    }
    let mut over = cases[3]["sealed"].as_str().unwrap().to_owned();
    over.push(' ');
    put("reject-oversize-16385.txt".into(), over.as_bytes());
}

/// The hour of sealing used by every envelope vector (2026-05-10T08:00Z).
const HOUR: u64 = 494_000;

fn window_vectors() -> Value {
    let hours: Vec<Value> = [
        0u64,
        3_599,
        3_600,
        1_778_400_000,
        1_778_403_599,
        1_778_403_600,
    ]
    .into_iter()
    .map(|t| json!({"unixSeconds": t, "hour": hour_of(t)}))
    .collect();
    let now_hour = HOUR;
    let mut window = Vec::new();
    for now in [now_hour * 3_600, now_hour * 3_600 + 3_599] {
        for hour in [
            now_hour - 5,
            now_hour - 3,
            now_hour - 2,
            now_hour - 1,
            now_hour,
            now_hour + 1,
            now_hour + 2,
        ] {
            let accepted = check_hour_window(hour, now).is_ok();
            window.push(json!({"hour": hour, "nowSeconds": now, "accepted": accepted}));
        }
    }
    let deadline = republish_deadline(HOUR);
    let republish: Vec<Value> = [
        (HOUR - 1) * 3_600,
        HOUR * 3_600,
        deadline - 1,
        deadline,
        deadline + 1,
        deadline + 86_400,
    ]
    .into_iter()
    .map(|created| {
        let accepted = check_created_in_time(HOUR, created).is_ok();
        json!({"hour": HOUR, "createdSeconds": created, "deadline": deadline, "accepted": accepted})
    })
    .collect();
    json!({
        "description": "envelope v2 time rules (docs/PROTOCOL.md §3). hour = floor(unixSeconds / 3600). A relayer accepts an envelope at time nowSeconds only when hour is in [floor(nowSeconds / 3600) - 2, floor(nowSeconds / 3600) + 1]. A verifier refuses an entity whose creation block timestamp createdSeconds is at or after deadline = (hour + 4) x 3600.",
        "hourOf": hours,
        "window": window,
        "republish": republish,
    })
}

fn write(dir: &str, file: &str, v: Value) {
    let text = serde_json::to_string_pretty(&v).unwrap() + "\n";
    std::fs::write(format!("{dir}/{file}"), text).unwrap();
}

fn attrs(wire: Value) -> Attributes {
    Attributes::from_wire(&wire).unwrap()
}

/// A tag as the ledger stores it: 44 bytes (0, 1, ..., 43) in 60 base64 characters.
const TAG: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKis=";

fn envelope_vectors() -> Value {
    let key_bytes = [0x11u8; 32];
    let key = SigningKey::from_slice(&key_bytes).unwrap();
    let owner = alloy_primitives::Address::from_private_key(&key);
    let cases = [
        (
            "minimal record, 512 bytes",
            "demo",
            3600,
            "text/plain",
            false,
            b"hello".to_vec(),
            json!({"tag": {"type": "str", "value": TAG}, "project": {"type": "str", "value": "demo"}}),
        ),
        (
            "every attribute type, escapes in app and ct, encrypted flag, 1024 bytes",
            "caf\u{e9} \"quoted\" \\ app",
            604_800,
            "application/vnd.example+json; charset=utf-8",
            true,
            (0..=255u8).cycle().take(300).collect(),
            json!({
                "zeta": {"type": "str", "value": "\u{fc}ber \"q\" \\ \u{1f600}"},
                "project": {"type": "str", "value": "caf\u{e9} \"quoted\" \\ app"},
                "tag": {"type": "str", "value": TAG},
                "level": {"type": "i32", "value": -2147483648i64},
                "count": {"type": "u64", "value": "18446744073709551615"},
                "big": {"type": "u256", "value": "115792089237316195423570985008687907853269984665640564039457584007913129639935"},
                "a_1": {"type": "i32", "value": 7},
            }),
        ),
        (
            "payload of 2000 bytes, 4096 bytes",
            "demo",
            2_592_000,
            "application/octet-stream",
            false,
            vec![0xab; 2000],
            json!({"project": {"type": "str", "value": "demo"}, "tag": {"type": "str", "value": TAG}}),
        ),
        (
            "payload of 9000 bytes, 16384 bytes",
            "demo",
            7_776_000,
            "application/octet-stream",
            false,
            vec![0x00; 9000],
            json!({"project": {"type": "str", "value": "demo"}, "tag": {"type": "str", "value": TAG}, "n": {"type": "u64", "value": "0"}}),
        ),
    ];
    let mut out = Vec::new();
    for (name, app, exp, ct, enc, data, wire) in cases {
        let a = attrs(wire.clone());
        let body = EnvelopeBody {
            app: app.into(),
            exp,
            hour: HOUR,
            ct: ct.into(),
            enc,
            types: a.types(),
            data,
        };
        let pre = envelope_digest_preimage(&body, &a);
        let sealed = seal_envelope(&body, &a, &key).unwrap();
        let parsed = parse_envelope(sealed.as_bytes()).unwrap();
        let mut case = json!({
            "name": name,
            "body": {"app": app, "exp": exp, "hour": HOUR, "ct": ct, "enc": enc, "data": to_base64(&body.data)},
            "attributes": wire,
            "canonicalBody": body.canonical_json(),
            "canonicalAttributes": a.canonical_json(),
            "digest": envelope_digest(&body, &a).to_string(),
            "signature": format!("0x{}", hex::encode(parsed.signature)),
            "paddedLength": sealed.len(),
            "sealed": sealed,
        });
        if pre.len() < 2000 {
            case["digestPreimageHex"] = json!(hex::encode(&pre));
        }
        out.push(case);
    }
    // Rejections: mutate the first sealed envelope.
    let first = out[0]["sealed"].as_str().unwrap().to_owned();
    let content = first.trim_end_matches(' ').to_owned();
    let repad = |t: String| pad_envelope(&t).unwrap();
    // The envelope with the first `from` replaced by `to`, padded again.
    let edit = |from: &str, to: &str| repad(content.replacen(from, to, 1));
    let mut far = content.clone();
    far.push_str(&" ".repeat(1024 - content.len()));
    let mut nl = content.clone() + "\n";
    nl.push_str(&" ".repeat(512 - nl.len()));
    let rejects = vec![
        ("not padded", content.clone(), "must be padded to exactly"),
        (
            "padded beyond the smallest size",
            far,
            "must be padded to the smallest size that fits, 512",
        ),
        ("newline in the padding", nl, "padding must be spaces"),
        (
            "duplicate key",
            edit("{\"app\":\"demo\"", "{\"app\":\"demo\",\"app\":\"demo\""),
            "duplicate key \"app\"",
        ),
        (
            "version 1",
            edit("\"v\":2", "\"v\":1"),
            "unsupported envelope version 1",
        ),
        (
            "version 1 without hour",
            repad(
                content
                    .replacen(&format!(",\"hour\":{HOUR}"), "", 1)
                    .replacen("\"v\":2", "\"v\":1", 1),
            ),
            "unsupported envelope version 1",
        ),
        (
            "version 3",
            edit("\"v\":2", "\"v\":3"),
            "unsupported envelope version 3",
        ),
        (
            "unknown member",
            edit("\"v\":2", "\"v\":2,\"w\":0"),
            "unknown envelope member \"w\"",
        ),
        (
            "missing hour",
            edit(&format!(",\"hour\":{HOUR}"), ""),
            "envelope member \"hour\" is missing",
        ),
        (
            "hour as a string",
            edit(&format!("\"hour\":{HOUR}"), &format!("\"hour\":\"{HOUR}\"")),
            "envelope member \"hour\": must be a non-negative integer",
        ),
        (
            "negative hour",
            edit(&format!("\"hour\":{HOUR}"), &format!("\"hour\":-{HOUR}")),
            "envelope member \"hour\": must be a non-negative integer",
        ),
        (
            "zero lifetime",
            edit("\"exp\":3600", "\"exp\":0"),
            "exp 0 is not an expiry bucket",
        ),
        (
            "project attribute not a str",
            project_not_str(&key),
            "attribute \"project\" must have type str",
        ),
        (
            "missing member",
            edit("\"enc\":false,", ""),
            "envelope member \"enc\" is missing",
        ),
        (
            "exp not a bucket",
            edit("\"exp\":3600", "\"exp\":3601"),
            "exp 3601 is not an expiry bucket",
        ),
        (
            "white space in the body",
            edit("\"app\":\"demo\"", "\"app\": \"demo\""),
            "not in RFC 8785 canonical form",
        ),
        (
            "members out of order",
            edit(
                "\"app\":\"demo\",\"ct\":\"text/plain\"",
                "\"ct\":\"text/plain\",\"app\":\"demo\"",
            ),
            "not in RFC 8785 canonical form",
        ),
        (
            "upper-case signature hex",
            {
                let i = content.find("\"sig\":\"0x").unwrap() + 9;
                let mut t = content.clone();
                t.replace_range(i..i + 130, &content[i..i + 130].to_uppercase());
                repad(t)
            },
            "lowercase hex",
        ),
    ];
    let rejects: Vec<Value> = rejects
        .into_iter()
        .map(|(name, text, err)| {
            let got = parse_envelope(text.as_bytes()).unwrap_err().to_string();
            assert!(got.contains(err), "{name}: {got}");
            json!({"name": name, "envelope": text, "errorContains": err})
        })
        .collect();
    json!({
        "description": "privsvc envelopes v2 (docs/PROTOCOL.md §3). Body {v: 2, app, exp, hour, ct, enc, types, data}; hour = floor(unix seconds / 3600) at sealing. digest = keccak256(\"privsvc envelope v2\" || 0x00 || canonicalBody || 0x00 || canonicalAttributes); signature = r || s || v (low-s, v in {27, 28}) by the key, RFC 6979 deterministic; sealed = RFC 8785 JSON of body + sig, space-padded to 512/1024/4096/16384. `data` in body is standard base64. Rejections must fail to parse with an error containing errorContains.",
        "privateKey": format!("0x{}", hex::encode(key_bytes)),
        "owner": owner.to_string(),
        "cases": out,
        "reject": rejects,
    })
}

/// A correctly signed envelope whose `project` attribute is an i32: parsers must refuse it.
fn project_not_str(key: &SigningKey) -> String {
    let a = attrs(
        json!({"project": {"type": "i32", "value": 7}, "tag": {"type": "str", "value": TAG}}),
    );
    let body = EnvelopeBody {
        app: "demo".into(),
        exp: 3600,
        hour: HOUR,
        ct: "text/plain".into(),
        enc: false,
        types: a.types(),
        data: b"hello".to_vec(),
    };
    let sig = sign_digest(&envelope_digest(&body, &a), key).unwrap();
    pad_envelope(&body.canonical_sealed_json(&sig)).unwrap()
}

fn attribute_vectors() -> Value {
    let valid = [
        ("empty", json!({})),
        (
            "library attributes",
            json!({"tag": {"type": "str", "value": TAG}, "project": {"type": "str", "value": "demo"}}),
        ),
        (
            "every type at its limits, unsorted input",
            json!({
                "z": {"type": "str", "value": "\u{e9}\u{1f600} \"q\" \\ /"},
                "i_min": {"type": "i32", "value": -2147483648i64},
                "i_max": {"type": "i32", "value": 2147483647},
                "u_max": {"type": "u64", "value": "18446744073709551615"},
                "u_zero": {"type": "u64", "value": "0"},
                "w": {"type": "u256", "value": "115792089237316195423570985008687907853269984665640564039457584007913129639935"},
                "a": {"type": "str", "value": ""},
                "neg_one": {"type": "i32", "value": -1},
            }),
        ),
    ];
    let valid: Vec<Value> = valid
        .into_iter()
        .map(|(name, wire)| {
            let a = attrs(wire.clone());
            let arkiv: Vec<Value> = a
                .arkiv_attributes()
                .into_iter()
                .map(|c| json!({"name": c.name, "typeId": c.type_id, "value": format!("0x{}", hex::encode(c.value))}))
                .collect();
            json!({"name": name, "wire": wire, "canonical": a.canonical_json(), "arkiv": arkiv})
        })
        .collect();
    let invalid = [
        (
            "upper-case name",
            r#"{"Foo":{"type":"str","value":"x"}}"#,
            r#"attribute "Foo": names must be lowercase"#,
        ),
        (
            "name starts with a digit",
            r#"{"1a":{"type":"str","value":"x"}}"#,
            r#"attribute "1a": names must start with a letter"#,
        ),
        (
            "name with a dash",
            r#"{"a-b":{"type":"str","value":"x"}}"#,
            r#"attribute "a-b": names may contain only a-z, 0-9 and _"#,
        ),
        (
            "name of 33 bytes",
            r#"{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa":{"type":"str","value":"x"}}"#,
            "names are at most 32 bytes",
        ),
        (
            "unknown type",
            r#"{"a":{"type":"bool","value":true}}"#,
            r#"attribute "a": unknown type "bool""#,
        ),
        (
            "extra member",
            r#"{"a":{"type":"str","value":"x","note":1}}"#,
            r#"attribute "a": unknown member "note""#,
        ),
        (
            "duplicate name",
            r#"{"a":{"type":"str","value":"x"},"a":{"type":"str","value":"y"}}"#,
            r#"duplicate key "a""#,
        ),
        (
            "str of 129 bytes",
            &format!(r#"{{"a":{{"type":"str","value":"{}"}}}}"#, "x".repeat(129)),
            "at most 128 bytes",
        ),
        (
            "control character",
            r#"{"a":{"type":"str","value":"x\u0007"}}"#,
            "control characters",
        ),
        (
            "i32 too large",
            r#"{"a":{"type":"i32","value":2147483648}}"#,
            "i32 value 2147483648 is out of range",
        ),
        (
            "i32 with fraction",
            r#"{"a":{"type":"i32","value":1.5}}"#,
            "must be integers",
        ),
        (
            "i32 as string",
            r#"{"a":{"type":"i32","value":"1"}}"#,
            "i32 values must be JSON numbers",
        ),
        (
            "u64 as number",
            r#"{"a":{"type":"u64","value":1}}"#,
            "u64 values must be decimal strings",
        ),
        (
            "u64 too large",
            r#"{"a":{"type":"u64","value":"18446744073709551616"}}"#,
            "out of range",
        ),
        (
            "u64 leading zero",
            r#"{"a":{"type":"u64","value":"01"}}"#,
            "leading zeros",
        ),
        (
            "u64 with sign",
            r#"{"a":{"type":"u64","value":"+1"}}"#,
            "only the digits 0-9",
        ),
        (
            "u256 hex",
            r#"{"a":{"type":"u256","value":"0x1"}}"#,
            "only the digits 0-9",
        ),
        (
            "u256 too large",
            r#"{"a":{"type":"u256","value":"115792089237316195423570985008687907853269984665640564039457584007913129639936"}}"#,
            "out of range",
        ),
        (
            "31 attributes",
            &thirty_one(),
            "31 attributes given, at most 30",
        ),
    ];
    let invalid: Vec<Value> = invalid
        .into_iter()
        .map(|(name, text, err)| {
            let got = Attributes::from_wire_json(text.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(got.contains(err), "{name}: {got}");
            json!({"name": name, "wireText": text, "errorContains": err})
        })
        .collect();
    json!({
        "description": "privsvc attributes (docs/PROTOCOL.md §2). canonical = RFC 8785 JSON of the wire object {name: {type, value}}; arkiv = the typed cells (typeId str 8, i32 2, u64 3, u256 4; numbers as 32-byte words) in ascending name order. Invalid inputs must be refused with an error containing errorContains.",
        "valid": valid,
        "invalid": invalid,
    })
}

fn thirty_one() -> String {
    let m: BTreeMap<String, Value> = (0..31)
        .map(|i| (format!("a{i:02}"), json!({"type": "i32", "value": i})))
        .collect();
    json::canonical(&serde_json::to_value(m).unwrap())
}

fn expiry_vectors() -> Value {
    let cases: Vec<Value> = [
        1u64,
        3599,
        3600,
        3601,
        86_399,
        86_400,
        86_401,
        604_800,
        604_801,
        2_592_000,
        2_592_001,
        7_775_999,
        7_776_000,
        0,
        7_776_001,
        u64::MAX,
    ]
    .into_iter()
    .map(|s| match expiry_bucket(s) {
        Ok(b) => json!({"seconds": s, "bucket": b}),
        Err(EnvelopeError::ZeroExpiry) => json!({"seconds": s, "error": "zero"}),
        Err(_) => json!({"seconds": s, "error": "too-long"}),
    })
    .collect();
    let units: Vec<Value> = [
        ("seconds", 90, Expires::Seconds(90)),
        ("minutes", 90, Expires::Minutes(90)),
        ("hours", 25, Expires::Hours(25)),
        ("days", 2, Expires::Days(2)),
        ("weeks", 1, Expires::Weeks(1)),
        ("months", 3, Expires::Months(3)),
    ]
    .into_iter()
    .map(|(unit, n, e)| {
        let seconds = expiry_seconds(e);
        json!({"unit": unit, "n": n, "seconds": seconds, "bucket": expiry_bucket(seconds).unwrap()})
    })
    .collect();
    json!({
        "description": "expiry buckets: a lifetime in seconds rounds up to the smallest of buckets that holds it; 0 and more than 7776000 are errors. expirySeconds: minutes 60 s, hours 3600 s, days 86400 s, weeks 7 days, months 30 days.",
        "buckets": EXPIRY_BUCKETS,
        "cases": cases,
        "expires": units,
    })
}
