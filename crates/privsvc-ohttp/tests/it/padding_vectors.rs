//! `conformance/ohttp/vectors.json` against this crate: the padded Binary HTTP plaintexts of
//! our encoders, the encapsulations of the reference RFC 9458 code (`tests/reference`, fixed
//! ephemeral `ikmE`), our gateway opening them, our gateway's sealed answers (same length, and
//! the reference opens them to the vector's plaintext byte for byte), our client refusing
//! what is too large, and the reject cases refused by both sides.
//!
//! The file is written by `examples/ohttp_vectors.rs`; this test never rewrites it.

use privsvc_ohttp::{
    decode_padded_request, decode_padded_response, encode_padded_request_at_least,
    encode_padded_response, encode_request, encode_response,
};
use privsvc_ohttp::{encapsulate, encapsulate_at_least, BinaryRequest, OhttpError, OhttpGateway};
use privsvc_ohttp::{SUBMISSION_CLASS, SUBMISSION_ROUTE};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::reference;

const VECTORS: &str = include_str!("../../../../conformance/ohttp/vectors.json");

fn vectors() -> Value {
    serde_json::from_str(VECTORS).expect("vectors.json is JSON")
}

fn h(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().expect("hex string")).expect("hex")
}

fn n(v: &Value) -> usize {
    v.as_u64().expect("a number") as usize
}

fn body(v: &Value) -> Vec<u8> {
    let mut text = v["prefix"].as_str().unwrap().to_string();
    text.push_str(&v["fill"].as_str().unwrap().repeat(n(&v["count"])));
    text.push_str(v["suffix"].as_str().unwrap());
    text.into_bytes()
}

fn headers(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_str().unwrap().to_string(),
                p[1].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The class a cover request (a dummy) asks for; 0 for any other request.
fn cover_class(v: &Value) -> usize {
    v.get("coverClass").map_or(0, n)
}

fn request_of(v: &Value) -> BinaryRequest {
    BinaryRequest {
        method: v["method"].as_str().unwrap().into(),
        path: v["path"].as_str().unwrap().into(),
        headers: headers(&v["headers"]),
        body: body(&v["body"]),
    }
}

/// `bytes` matches the vector's `{prefix}`, `{prefix}Length` and `{prefix}Sha256`.
fn assert_message(v: &Value, prefix: &str, bytes: &[u8]) {
    let name = v["name"].as_str().unwrap();
    assert_eq!(
        bytes.len(),
        n(&v[format!("{prefix}Length")]),
        "{name} {prefix}"
    );
    assert_eq!(
        hex::encode(Sha256::digest(bytes)),
        v[format!("{prefix}Sha256")].as_str().unwrap(),
        "{name} {prefix}"
    );
    if let Some(text) = v.get(prefix) {
        assert_eq!(
            hex::encode(bytes),
            text.as_str().unwrap(),
            "{name} {prefix}"
        );
    }
}

fn gateway(v: &Value) -> (OhttpGateway, Vec<u8>, Vec<u8>) {
    let seed = h(&v["gateway"]["seed"]);
    let gateway = OhttpGateway::from_seed(&seed).unwrap();
    let config = h(&v["gateway"]["keyConfig"]);
    let sk = h(&v["gateway"]["secretKey"]);
    (gateway, config, sk)
}

#[test]
fn gateway_key_derives_from_the_seed() {
    let v = vectors();
    let (gateway, config, sk) = gateway(&v);
    assert_eq!(gateway.public_key(), hex::encode(&config));
    let seed = h(&v["gateway"]["seed"]);
    assert_eq!(reference::gateway_secret(&seed, 1), sk);
    assert_eq!(reference::public_of(&sk), config[3..35]);
    assert_eq!(h(&v["gateway"]["publicKey"]), config[3..35]);
    assert_eq!(
        v["requestClasses"],
        serde_json::json!([4096, 32768, 131072])
    );
    assert_eq!(v["responseClasses"], serde_json::json!([1024, 8192, 65536]));
    assert_eq!(n(&v["submissionClass"]), SUBMISSION_CLASS);
    assert_eq!(
        v["submissionRoute"],
        serde_json::json!([SUBMISSION_ROUTE.0, SUBMISSION_ROUTE.1])
    );
}

#[test]
fn request_vectors_reproduce_byte_for_byte_and_our_gateway_opens_them() {
    let v = vectors();
    let (gateway, config, sk) = gateway(&v);
    let requests = v["requests"].as_array().unwrap();
    let mut classes = std::collections::BTreeSet::new();
    for r in requests {
        let req = request_of(r);
        let (scheme, authority) = (
            r["scheme"].as_str().unwrap(),
            r["authority"].as_str().unwrap(),
        );
        assert_eq!(req.body.len(), n(&r["bodyLength"]));
        let bhttp = encode_request(&req, scheme, authority).unwrap();
        assert_message(r, "bhttp", &bhttp);
        let padded =
            encode_padded_request_at_least(&req, scheme, authority, cover_class(r)).unwrap();
        assert_eq!(padded.len(), n(&r["paddedLength"]));
        if req.path == SUBMISSION_ROUTE.1 {
            assert!(padded.len() >= SUBMISSION_CLASS, "{r}");
        }
        assert_eq!(&padded[..bhttp.len()], bhttp.as_slice());
        assert!(padded[bhttp.len()..].iter().all(|&b| b == 0));
        classes.insert(padded.len());

        let ikm: [u8; 32] = h(&r["ikmE"]).try_into().unwrap();
        let (message, _, enc) = reference::encapsulate(&config, Some(ikm), &padded);
        assert_eq!(hex::encode(&enc), r["enc"].as_str().unwrap());
        assert_message(r, "encapsulated", &message);
        assert_eq!(
            hex::encode(&message[message.len() - 16..]),
            r["encapsulatedTag"].as_str().unwrap()
        );
        assert_eq!(message.len(), padded.len() + 55);

        // The seeded gateway key opens it to exactly the padded plaintext, and our gateway
        // reads the request out of it.
        let (plain, _, _) = reference::open(&sk, &message);
        assert_eq!(plain, padded.as_slice());
        let (opened, _) = gateway.open(&message).unwrap();
        assert_eq!(opened, req);
        assert_eq!(decode_padded_request(&plain).unwrap(), req);
    }
    assert_eq!(
        classes.into_iter().collect::<Vec<_>>(),
        vec![4096, 32768, 131072]
    );

    // Our client's encapsulation of the same request has the vector's length (only the
    // ephemeral key and so the ciphertext differ).
    for r in requests {
        let req = request_of(r);
        let (message, _) = encapsulate_at_least(
            &hex::encode(&config),
            &req,
            r["scheme"].as_str().unwrap(),
            r["authority"].as_str().unwrap(),
            cover_class(r),
        )
        .unwrap();
        assert_eq!(message.len(), n(&r["encapsulatedLength"]));
    }
}

#[test]
fn response_vectors_reproduce_and_our_gateway_seals_the_same_plaintext() {
    let v = vectors();
    let (gateway, config, _) = gateway(&v);
    let requests = v["requests"].as_array().unwrap();
    let mut classes = std::collections::BTreeSet::new();
    for r in v["responses"].as_array().unwrap() {
        let q = requests
            .iter()
            .find(|q| q["name"] == r["request"])
            .expect("the named request vector");
        let status = n(&r["status"]) as u16;
        let hdrs = headers(&r["headers"]);
        let content = body(&r["body"]);
        assert_eq!(content.len(), n(&r["bodyLength"]));
        let bhttp = encode_response(status, &hdrs, &content).unwrap();
        assert_message(r, "bhttp", &bhttp);
        let padded = encode_padded_response(status, &hdrs, &content).unwrap();
        assert_eq!(padded.len(), n(&r["paddedLength"]));
        assert_eq!(&padded[..bhttp.len()], bhttp.as_slice());
        assert!(padded[bhttp.len()..].iter().all(|&b| b == 0));
        classes.insert(padded.len());

        // The reference, with the request's ikmE and the response nonce, reproduces it.
        let ikm: [u8; 32] = h(&q["ikmE"]).try_into().unwrap();
        let q_padded = encode_padded_request_at_least(
            &request_of(q),
            q["scheme"].as_str().unwrap(),
            q["authority"].as_str().unwrap(),
            cover_class(q),
        )
        .unwrap();
        let (message, ctx, enc) = reference::encapsulate(&config, Some(ikm), &q_padded);
        let sealed = reference::seal_response(&ctx, &enc, &h(&r["responseNonce"]), &padded);
        assert_message(r, "encapsulated", &sealed);
        assert_eq!(
            hex::encode(&sealed[sealed.len() - 16..]),
            r["encapsulatedTag"].as_str().unwrap()
        );
        let plain = reference::open_response(&ctx, &enc, &sealed);
        let decoded = decode_padded_response(&plain).unwrap();
        assert_eq!(
            (decoded.status, decoded.body.as_slice()),
            (status, content.as_slice())
        );
        assert_eq!(decoded.headers, hdrs);

        // Our gateway answering the same request with the same response: same length, and its
        // plaintext is the vector's byte for byte (only the nonce is random).
        let (_, sealer) = gateway.open(&message).unwrap();
        let ours = sealer.seal(status, &hdrs, &content).unwrap();
        assert_eq!(ours.len(), n(&r["encapsulatedLength"]));
        assert_eq!(
            reference::open_response(&ctx, &enc, &ours),
            padded.as_slice()
        );
    }
    assert_eq!(
        classes.into_iter().collect::<Vec<_>>(),
        vec![1024, 8192, 65536]
    );
}

#[test]
fn one_byte_over_the_largest_class_is_refused() {
    let v = vectors();
    let (_, config, _) = gateway(&v);
    let t = &v["tooLarge"]["request"];
    let req = BinaryRequest {
        method: t["method"].as_str().unwrap().into(),
        path: t["path"].as_str().unwrap().into(),
        headers: headers(&t["headers"]),
        body: body(&t["body"]),
    };
    let scheme_authority = ("https", "relayer.example");
    let bhttp = encode_request(&req, scheme_authority.0, scheme_authority.1).unwrap();
    assert_eq!(bhttp.len(), n(&t["bhttpLength"]));
    let err = encapsulate(&hex::encode(&config), &req, "https", "relayer.example").unwrap_err();
    assert!(
        matches!(
            err,
            OhttpError::TooLarge {
                size: 131_073,
                limit: 131_072
            }
        ),
        "{err:?}"
    );
    let t = &v["tooLarge"]["response"];
    let content = body(&t["body"]);
    let hdrs = headers(&t["headers"]);
    let status = n(&t["status"]) as u16;
    assert_eq!(
        encode_response(status, &hdrs, &content).unwrap().len(),
        n(&t["bhttpLength"])
    );
    assert!(matches!(
        encode_padded_response(status, &hdrs, &content),
        Err(OhttpError::TooLarge {
            size: 65_537,
            limit: 65_536
        })
    ));
}

/// The plaintext of a reject case (see `rejectRule` in the file).
fn reject_plaintext(v: &Value, case: &Value) -> Vec<u8> {
    let list = if case["kind"] == "request" {
        "requests"
    } else {
        "responses"
    };
    let from = v[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == case["from"])
        .unwrap();
    let mut bytes = h(&from["bhttp"]);
    let at = |x: &Value| match x {
        Value::String(s) if s == "bhttpLength" => n(&from["bhttpLength"]),
        other => n(other),
    };
    bytes.resize(at(&case["length"]), 0);
    for set in case["set"].as_array().unwrap() {
        let offset = at(&set[0]);
        bytes[offset] = n(&set[1]) as u8;
    }
    bytes
}

#[test]
fn reject_cases_are_refused_by_gateway_and_client() {
    let v = vectors();
    let (gateway, config, sk) = gateway(&v);
    let cases = v["reject"].as_array().unwrap();
    assert!(cases.len() >= 8);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let plain = reject_plaintext(&v, case);
        if case["kind"] == "request" {
            assert!(decode_padded_request(&plain).is_err(), "{name}");
            let (message, _, _) = reference::encapsulate(&config, Some([7u8; 32]), &plain);
            assert!(
                matches!(gateway.open(&message), Err(OhttpError::Open)),
                "gateway accepted reject case {name}"
            );
        } else {
            assert!(decode_padded_response(&plain).is_err(), "{name}");
            // A real client request; the reference gateway (seeded key) answers it with the
            // reject plaintext; our client refuses it.
            let small = request_of(&v["requests"][0]);
            let (message, pending) =
                encapsulate(&hex::encode(&config), &small, "https", "relayer.example").unwrap();
            let (_, ctx, enc) = reference::open(&sk, &message);
            let sealed = reference::seal_response_with(
                |label, out| ctx.export(label, out).unwrap(),
                &enc,
                &[9u8; 16],
                &plain,
            );
            assert!(
                matches!(pending.open(&sealed), Err(OhttpError::BadResponse(_))),
                "client accepted reject case {name}"
            );
        }
    }
    // Control: the unmodified plaintexts are accepted by the same paths.
    let good = reject_plaintext(
        &v,
        &serde_json::json!({"kind": "request", "from": "small", "length": 4096, "set": []}),
    );
    let (message, _, _) = reference::encapsulate(&config, Some([7u8; 32]), &good);
    assert!(gateway.open(&message).is_ok());
}
