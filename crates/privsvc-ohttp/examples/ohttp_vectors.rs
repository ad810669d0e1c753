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

use privsvc_ohttp::{
    class_of, min_request_class, REQUEST_CLASSES, RESPONSE_CLASSES, SUBMISSION_CLASS,
    SUBMISSION_ROUTE,
};
use privsvc_ohttp::{dummy_request, DUMMY_ANSWER};
use privsvc_ohttp::{
    encode_padded_request_at_least, encode_padded_response, encode_request, encode_response,
};
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

/// A submission (`POST /v1/records`) with `body`.
fn request(body: &Body) -> BinaryRequest {
    request_to("/v1/records", body)
}

/// A `POST` of `body` to `path`.
fn request_to(path: &str, body: &Body) -> BinaryRequest {
    BinaryRequest {
        method: "POST".into(),
        path: path.into(),
        headers: request_headers(),
        body: body.bytes(),
    }
}

/// A request that is not a submission (an issue request), for the smallest classes.
const OTHER_PATH: &str = "/v1/tokens/issue";

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

fn other_request_len(count: usize) -> usize {
    encode_request(
        &request_to(OTHER_PATH, &data_body(count)),
        SCHEME,
        AUTHORITY,
    )
    .expect("encodes")
    .len()
}

/// A status answer body: the JSON padded with spaces to its fixed 512 bytes.
fn status_body(json: &'static str) -> Body {
    Body {
        prefix: json,
        fill: ' ',
        count: 512 - json.len(),
        suffix: "",
    }
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
    // (name, note, path, body, the class a cover request asks for)
    let dummy_body = Body {
        prefix: "{\"responseClass\":0}",
        fill: ' ',
        count: 0,
        suffix: "",
    };
    assert_eq!(request_to("/v1/dummy", &dummy_body), dummy_request(0));
    let requests: Vec<(&str, &str, &str, Body, usize)> = vec![
        (
            "small",
            "a typical submission: the submission class, 32 768",
            "/v1/records",
            small,
            0,
        ),
        (
            "exactly-4096",
            "not a submission; fills the smallest class exactly: no padding byte",
            OTHER_PATH,
            data_body(fill_for(4_096, other_request_len)),
            0,
        ),
        (
            "over-4096",
            "not a submission; one byte over the smallest class: the next class",
            OTHER_PATH,
            data_body(fill_for(4_097, other_request_len)),
            0,
        ),
        (
            "over-32768",
            "one byte over the submission class: the largest class",
            "/v1/records",
            data_body(fill_for(32_769, request_len)),
            0,
        ),
        (
            "exactly-131072",
            "fills the largest class exactly",
            "/v1/records",
            data_body(fill_for(131_072, request_len)),
            0,
        ),
        (
            "dummy",
            "a dummy (cover traffic), padded to the class its client chose: here the submission class",
            "/v1/dummy",
            dummy_body,
            SUBMISSION_CLASS,
        ),
    ];

    let mut request_vectors = Vec::new();
    let mut small_ctx = None;
    for (name, note, path, body, cover_class) in &requests {
        let req = &request_to(path, body);
        let bhttp = encode_request(req, SCHEME, AUTHORITY).expect("encodes");
        let padded =
            encode_padded_request_at_least(req, SCHEME, AUTHORITY, *cover_class).expect("fits");
        let at_least = min_request_class(&req.method, &req.path).max(*cover_class);
        assert_eq!(
            Some(padded.len()),
            class_of(bhttp.len().max(at_least), &REQUEST_CLASSES)
        );
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
        if *cover_class > 0 {
            v.insert("coverClass".into(), json!(cover_class));
        }
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
    // The status answers of every state: one JSON shape padded with spaces to 512 bytes.
    let responses: Vec<(&str, &str, u16, Body)> = vec![
        (
            "status-queued",
            "a queued status answer (512-byte body): 1 024",
            200,
            status_body("{\"id\":\"6f1c2a9e-8d7b-4c3a-9f2e-1b0a4d5c6e7f\",\"state\":\"queued\",\"entityKey\":null,\"txHash\":null,\"block\":null,\"batchSize\":null,\"error\":null}"),
        ),
        (
            "status-written",
            "a written status answer (the same 512 bytes): 1 024",
            200,
            status_body("{\"id\":\"6f1c2a9e-8d7b-4c3a-9f2e-1b0a4d5c6e7f\",\"state\":\"written\",\"entityKey\":\"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"txHash\":\"0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\",\"block\":\"1234\",\"batchSize\":5,\"error\":null}"),
        ),
        (
            "unknown-id",
            "a 404 (the same 512 bytes): 1 024",
            404,
            status_body("{\"id\":\"6f1c2a9e-8d7b-4c3a-9f2e-1b0a4d5c6e7f\",\"state\":null,\"entityKey\":null,\"txHash\":null,\"block\":null,\"batchSize\":null,\"error\":\"unknown record id\"}"),
        ),
        (
            "dummy-answer",
            "the gateway's answer to a dummy: the class it asked for, by default that of status answers",
            200,
            Body {
                prefix: "{\"dummy\":true}",
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
        if *name == "dummy-answer" {
            assert_eq!(bytes, DUMMY_ANSWER);
        }
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
        "description": "OHTTP padding vectors (privsvc, docs/PROTOCOL.md §6). Binary HTTP plaintexts are known-length messages followed by zero bytes up to the smallest size class that holds them (a submission: at least submissionClass; a dummy: at least its coverClass); the encapsulation is RFC 9458 with the ephemeral key DeriveKeyPair(ikmE). A body is prefix + fill x count + suffix. Messages over 4200 bytes are pinned by length and SHA-256 instead of hex. Test material only.",
        "suite": {
            "keyId": 1,
            "kem": "DHKEM(X25519, HKDF-SHA256) 0x0020",
            "kdf": "HKDF-SHA256 0x0001",
            "aead": "AES-128-GCM 0x0001"
        },
        "requestClasses": REQUEST_CLASSES,
        "responseClasses": RESPONSE_CLASSES,
        "submissionClass": SUBMISSION_CLASS,
        "submissionRoute": [SUBMISSION_ROUTE.0, SUBMISSION_ROUTE.1],
        "submissionRule": "a request to the submission route (method, and path without its query) is padded to the smallest class that holds it and is at least submissionClass; a request with coverClass (a dummy) to at least that class; any other to the smallest class that holds it",
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
