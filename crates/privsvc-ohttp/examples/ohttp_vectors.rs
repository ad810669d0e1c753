//! Writes `conformance/ohttp/vectors.json`: OHTTP padding vectors (docs/PROTOCOL.md §6).
//!
//! ```text
//! cargo run -p privsvc-ohttp --example ohttp_vectors            # rewrite the file
//! cargo run -p privsvc-ohttp --example ohttp_vectors -- --check # compare, exit 1 on a change
//! ```
//!
//! Every input is fixed here (gateway seed, ephemeral `ikmE`, response nonces, messages), so
//! the output is the same on every run. Encapsulation uses the reference RFC 9458 code of
//! `tests/reference` (on the `hpke` crate, with the ephemeral key `DeriveKeyPair(ikmE)`); the
//! Binary HTTP plaintexts come from this crate's encoders. `tests/it/padding_vectors.rs` checks
//! the file against this crate's gateway and client.

#[path = "../tests/reference/mod.rs"]
mod reference;

use std::path::PathBuf;

use privsvc_ohttp::binary::{
    encode_padded_request, encode_padded_response, encode_request, encode_response,
};
use privsvc_ohttp::padding::{class_of, REQUEST_CLASSES, RESPONSE_CLASSES};
use privsvc_ohttp::{BinaryRequest, OhttpGateway};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The test gateway seed (32 bytes). Test material only.
const SEED: &[u8; 32] = b"privsvc ohttp padding vectors 01";
const SCHEME: &str = "https";
const AUTHORITY: &str = "relayer.example";
/// Hex of messages up to this size is written out; larger ones are pinned by SHA-256.
const HEX_LIMIT: usize = 4_200;

/// A body `prefix || fill x count || suffix`, so that large bodies stay short in the file.
#[derive(Clone)]
struct Body {
    prefix: &'static str,
    fill: char,
    count: usize,
    suffix: &'static str,
}

impl Body {
    fn bytes(&self) -> Vec<u8> {
        let mut text = self.prefix.to_string();
        text.extend(std::iter::repeat_n(self.fill, self.count));
        text.push_str(self.suffix);
        text.into_bytes()
    }
    fn json(&self) -> Value {
        json!({
            "prefix": self.prefix,
            "fill": self.fill.to_string(),
            "count": self.count,
            "suffix": self.suffix,
        })
    }
}

fn data_body(count: usize) -> Body {
    Body {
        prefix: "{\"app\":\"demo\",\"data\":\"",
        fill: 'x',
        count,
        suffix: "\"}",
    }
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn ikm(label: &str) -> [u8; 32] {
    Sha256::digest(format!("privsvc ohttp vector ikmE {label}")).into()
}

fn nonce(label: &str) -> [u8; 16] {
    let d = Sha256::digest(format!("privsvc ohttp vector response nonce {label}"));
    d[..16].try_into().expect("16 bytes")
}

fn request_headers() -> Vec<(String, String)> {
    vec![
        ("accept".into(), "application/json".into()),
        ("content-type".into(), "application/json".into()),
    ]
}

fn request(body: &Body) -> BinaryRequest {
    BinaryRequest {
        method: "POST".into(),
        path: "/v1/records".into(),
        headers: request_headers(),
        body: body.bytes(),
    }
}

fn response_headers() -> Vec<(String, String)> {
    vec![("content-type".into(), "application/json".into())]
}

/// The fill count for which `len_of(count)` is exactly `target` (lengths grow by one per fill
/// byte except where a varint widens; such targets are skipped by the caller's choice).
fn fill_for(target: usize, len_of: impl Fn(usize) -> usize) -> usize {
    let mut count = target.saturating_sub(len_of(0));
    while len_of(count) < target {
        count += 1;
    }
    while len_of(count) > target {
        count -= 1;
    }
    assert_eq!(len_of(count), target, "no body reaches {target} bytes");
    count
}

fn request_len(count: usize) -> usize {
    encode_request(&request(&data_body(count)), SCHEME, AUTHORITY)
        .expect("encodes")
        .len()
}

fn response_len(count: usize) -> usize {
    encode_response(200, &response_headers(), &data_body(count).bytes())
        .expect("encodes")
        .len()
}

fn message_json(prefix: &str, bytes: &[u8]) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert(format!("{prefix}Length"), json!(bytes.len()));
    m.insert(format!("{prefix}Sha256"), json!(sha(bytes)));
    if bytes.len() <= HEX_LIMIT {
        m.insert(prefix.to_string(), json!(hex::encode(bytes)));
    }
    m
}

fn headers_json(headers: &[(String, String)]) -> Value {
    json!(headers
        .iter()
        .map(|(n, v)| json!([n, v]))
        .collect::<Vec<_>>())
}

fn main() {
    let gateway = OhttpGateway::from_seed(SEED).expect("seed");
    let config = hex::decode(gateway.public_key()).expect("hex");
    let sk = reference::gateway_secret(SEED, 1);
    assert_eq!(
        reference::public_of(&sk),
        config[3..35],
        "derivation agrees"
    );

    let small = Body {
        prefix: "{\"app\":\"demo\",\"owner\":\"0x5c0b7b7e3b3e4dd2c5a1f33c1f02f4e1a43c8b11\",\"attributes\":{\"project\":\"demo\",\"level\":3},\"data\":\"",
        fill: 'x',
        count: 200,
        suffix: "\"}",
    };
    let requests: Vec<(&str, &str, Body)> = vec![
        ("small", "a typical submission: 4 096", small),
        (
            "exactly-4096",
            "fills the smallest class exactly: no padding byte",
            data_body(fill_for(4_096, request_len)),
        ),
        (
            "over-4096",
            "one byte over the smallest class: the next class",
            data_body(fill_for(4_097, request_len)),
        ),
        (
            "over-32768",
            "one byte over the middle class: the largest class",
            data_body(fill_for(32_769, request_len)),
        ),
        (
            "exactly-131072",
            "fills the largest class exactly",
            data_body(fill_for(131_072, request_len)),
        ),
    ];

    let mut request_vectors = Vec::new();
    let mut small_ctx = None;
    for (name, note, body) in &requests {
        let req = request(body);
        let bhttp = encode_request(&req, SCHEME, AUTHORITY).expect("encodes");
        let padded = encode_padded_request(&req, SCHEME, AUTHORITY).expect("fits");
        assert_eq!(Some(padded.len()), class_of(bhttp.len(), &REQUEST_CLASSES));
        let ikm_e = ikm(name);
        let (encapsulated, ctx, enc) = reference::encapsulate(&config, Some(ikm_e), &padded);
        let (opened, _) = gateway.open(&encapsulated).expect("our gateway opens it");
        assert_eq!(opened.body, req.body);
        if *name == "small" {
            small_ctx = Some((ctx, enc.clone()));
        }
        let mut v = serde_json::Map::new();
        v.insert("name".into(), json!(name));
        v.insert("note".into(), json!(note));
        v.insert("method".into(), json!(req.method));
        v.insert("scheme".into(), json!(SCHEME));
        v.insert("authority".into(), json!(AUTHORITY));
        v.insert("path".into(), json!(req.path));
        v.insert("headers".into(), headers_json(&req.headers));
        v.insert("body".into(), body.json());
        v.insert("bodyLength".into(), json!(req.body.len()));
        v.extend(message_json("bhttp", &bhttp));
        v.insert("paddedLength".into(), json!(padded.len()));
        v.insert("ikmE".into(), json!(hex::encode(ikm_e)));
        v.insert("enc".into(), json!(hex::encode(&enc)));
        v.extend(message_json("encapsulated", &encapsulated));
        v.insert(
            "encapsulatedTag".into(),
            json!(hex::encode(&encapsulated[encapsulated.len() - 16..])),
        );
        request_vectors.push(Value::Object(v));
    }
    let too_large = data_body(fill_for(131_073, request_len));

    let (ctx, enc) = small_ctx.expect("the small request is a vector");
    let status_written = Body {
        prefix: "{\"id\":\"6f1c2a9e-8d7b-4c3a-9f2e-1b0a4d5c6e7f\",\"state\":\"written\",\"entityKey\":\"0x",
        fill: 'a',
        count: 64,
        suffix: "\",\"block\":1234,\"batchSize\":5}",
    };
    let responses: Vec<(&str, &str, u16, Body)> = vec![
        (
            "status-queued",
            "a queued status answer: 1 024",
            200,
            Body {
                prefix: "{\"id\":\"6f1c2a9e-8d7b-4c3a-9f2e-1b0a4d5c6e7f\",\"state\":\"queued\"",
                fill: ' ',
                count: 0,
                suffix: "}",
            },
        ),
        (
            "status-written",
            "a written status answer: also 1 024",
            200,
            status_written,
        ),
        (
            "unknown-id",
            "a 404: also 1 024",
            404,
            Body {
                prefix: "{\"error\":\"unknown id\"}",
                fill: ' ',
                count: 0,
                suffix: "",
            },
        ),
        (
            "exactly-1024",
            "fills the smallest class exactly",
            200,
            data_body(fill_for(1_024, response_len)),
        ),
        (
            "over-1024",
            "one byte over the smallest class: the next class",
            200,
            data_body(fill_for(1_025, response_len)),
        ),
        (
            "over-8192",
            "one byte over the middle class: the largest class",
            200,
            data_body(fill_for(8_193, response_len)),
        ),
        (
            "exactly-65536",
            "fills the largest class exactly",
            200,
            data_body(fill_for(65_536, response_len)),
        ),
    ];
    let mut response_vectors = Vec::new();
    for (name, note, status, body) in &responses {
        let headers = response_headers();
        let bytes = body.bytes();
        let bhttp = encode_response(*status, &headers, &bytes).expect("encodes");
        let padded = encode_padded_response(*status, &headers, &bytes).expect("fits");
        let response_nonce = nonce(name);
        let sealed = reference::seal_response(&ctx, &enc, &response_nonce, &padded);
        let mut v = serde_json::Map::new();
        v.insert("name".into(), json!(name));
        v.insert("note".into(), json!(note));
        v.insert("request".into(), json!("small"));
        v.insert("status".into(), json!(status));
        v.insert("headers".into(), headers_json(&headers));
        v.insert("body".into(), body.json());
        v.insert("bodyLength".into(), json!(bytes.len()));
        v.extend(message_json("bhttp", &bhttp));
        v.insert("paddedLength".into(), json!(padded.len()));
        v.insert("responseNonce".into(), json!(hex::encode(response_nonce)));
        v.extend(message_json("encapsulated", &sealed));
        v.insert(
            "encapsulatedTag".into(),
            json!(hex::encode(&sealed[sealed.len() - 16..])),
        );
        response_vectors.push(Value::Object(v));
    }
    let response_too_large = data_body(fill_for(65_537, response_len));

    let document = json!({
        "description": "OHTTP padding vectors (privsvc, docs/PROTOCOL.md §6). Binary HTTP plaintexts are known-length messages followed by zero bytes up to the smallest size class that holds them; the encapsulation is RFC 9458 with the ephemeral key DeriveKeyPair(ikmE). A body is prefix + fill x count + suffix. Messages over 4200 bytes are pinned by length and SHA-256 instead of hex. Test material only.",
        "suite": {
            "keyId": 1,
            "kem": "DHKEM(X25519, HKDF-SHA256) 0x0020",
            "kdf": "HKDF-SHA256 0x0001",
            "aead": "AES-128-GCM 0x0001"
        },
        "requestClasses": REQUEST_CLASSES,
        "responseClasses": RESPONSE_CLASSES,
        "gateway": {
            "seed": hex::encode(SEED),
            "derivation": "ikm = HKDF-SHA256(salt = \"privsvc ohttp gateway key v1\", ikm = seed, info = [keyId], L = 32); (skR, pkR) = DeriveKeyPair(ikm)",
            "secretKey": hex::encode(&sk),
            "publicKey": hex::encode(&config[3..35]),
            "keyConfig": hex::encode(&config),
        },
        "requests": request_vectors,
        "responses": response_vectors,
        "tooLarge": {
            "note": "one byte over the largest class: refused before encapsulation",
            "request": { "bhttpLength": 131_073, "body": too_large.json(), "method": "POST", "path": "/v1/records", "headers": headers_json(&request_headers()) },
            "response": { "bhttpLength": 65_537, "status": 200, "body": response_too_large.json(), "headers": headers_json(&response_headers()) }
        },
        "reject": [
            { "name": "non-zero last padding byte", "kind": "request", "from": "small", "length": 4_096, "set": [[4_095, 1]] },
            { "name": "non-zero first padding byte", "kind": "request", "from": "small", "length": 4_096, "set": [["bhttpLength", 128]] },
            { "name": "unpadded", "kind": "request", "from": "small", "length": "bhttpLength", "set": [] },
            { "name": "one byte short of a class", "kind": "request", "from": "small", "length": 4_095, "set": [] },
            { "name": "one byte over a class", "kind": "request", "from": "small", "length": 4_097, "set": [] },
            { "name": "non-zero response padding", "kind": "response", "from": "status-queued", "length": 1_024, "set": [[1_023, 255]] },
            { "name": "unpadded response", "kind": "response", "from": "status-queued", "length": "bhttpLength", "set": [] },
            { "name": "response between classes", "kind": "response", "from": "status-queued", "length": 2_048, "set": [] }
        ],
        "rejectRule": "take the named vector's Binary HTTP message, append zero bytes up to (or cut it at) `length`, then set each [offset, value] (offset \"bhttpLength\" = the first padding byte). A gateway must refuse such a request plaintext (400, the opaque open error) and a client such a response plaintext."
    });

    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../conformance/ohttp/vectors.json");
    let text = format!(
        "{}\n",
        serde_json::to_string_pretty(&document).expect("serializes")
    );
    if std::env::args().any(|a| a == "--check") {
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current != text {
            eprintln!("{} differs from the generator's output", path.display());
            std::process::exit(1);
        }
        println!("{} is up to date", path.display());
        return;
    }
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, text).expect("write vectors");
    println!("wrote {}", path.display());
}
