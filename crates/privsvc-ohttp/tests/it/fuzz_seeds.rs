//! Stable replay of the OHTTP fuzz seed corpora (fuzz/seeds/ohttp_*/*) through the entry
//! functions the cargo-fuzz targets call (`privsvc_ohttp::fuzz_entry`). The seeds are written by
//! `write_generated_seeds` (ignored; run it with `-- --ignored` after a format change, then
//! review the diff).

use std::path::PathBuf;

use privsvc_attributes::fuzz_entry::replay_seed_corpus;
use privsvc_ohttp::fuzz_entry::{
    client_response, gateway_open, padded_request, padded_response, FUZZ_GATEWAY_SEED,
};
use privsvc_ohttp::{encapsulate, BinaryRequest, OhttpGateway};
use privsvc_ohttp::{encode_padded_request, encode_padded_response, encode_request};

fn seeds_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target)
}

fn replay(target: &str, entry: fn(&[u8]) -> bool) -> (usize, usize) {
    replay_seed_corpus(&seeds_dir(target), entry)
}

#[test]
fn ohttp_padded_request_seeds() {
    let (accepted, rejected) = replay("ohttp_padded_request", padded_request);
    assert!(
        accepted >= 2 && rejected >= 3,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn ohttp_padded_response_seeds() {
    let (accepted, rejected) = replay("ohttp_padded_response", padded_response);
    assert!(
        accepted >= 2 && rejected >= 3,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn ohttp_client_response_seeds() {
    let (accepted, rejected) = replay("ohttp_client_response", client_response);
    assert!(
        accepted >= 2 && rejected >= 4,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn ohttp_gateway_open_seeds() {
    let (accepted, rejected) = replay("ohttp_gateway_open", gateway_open);
    assert!(
        accepted >= 1 && rejected >= 3,
        "{accepted} accepted, {rejected} rejected"
    );
}

fn request(body: &[u8]) -> BinaryRequest {
    BinaryRequest {
        method: "POST".into(),
        path: "/v1/records".into(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.to_vec(),
    }
}

fn write(target: &str, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(seeds_dir(target)).unwrap();
    std::fs::write(seeds_dir(target).join(name), bytes).unwrap();
}

#[test]
#[ignore = "writes fuzz/seeds; run by hand after a format change"]
fn write_generated_seeds() {
    let t = "ohttp_padded_request";
    let small = encode_padded_request(&request(b"{}"), "https", "r.example").unwrap();
    write(t, "accept-small-post.bin", &small);
    let get = BinaryRequest {
        method: "GET".into(),
        path: "/v1/records/abc".into(),
        headers: vec![],
        body: vec![],
    };
    write(
        t,
        "accept-get.bin",
        &encode_padded_request(&get, "", "").unwrap(),
    );
    write(
        t,
        "reject-unpadded.bin",
        &encode_request(&get, "", "").unwrap(),
    );
    let mut nonzero = small.to_vec();
    *nonzero.last_mut().unwrap() = 1;
    write(t, "reject-non-zero-padding.bin", &nonzero);
    write(t, "reject-zeros.bin", &vec![0u8; 4096]);

    let t = "ohttp_padded_response";
    let ok = encode_padded_response(
        200,
        &[("content-type".into(), "application/json".into())],
        b"{\"state\":\"queued\",\"position\":3}",
    )
    .unwrap();
    write(t, "accept-status.bin", &ok);
    write(
        t,
        "accept-404.bin",
        &encode_padded_response(404, &[], b"{\"error\":\"unknown\"}").unwrap(),
    );
    write(t, "reject-truncated.bin", &ok[..ok.len() - 1]);
    let mut nonzero = ok.to_vec();
    *nonzero.last_mut().unwrap() = 7;
    write(t, "reject-non-zero-padding.bin", &nonzero);
    write(t, "reject-zeros.bin", &vec![0u8; 1024]);

    // Client side: 0x00 + a plaintext the gateway seals, 0x01 + a body sent as is.
    let t = "ohttp_client_response";
    let sealed = |plain: &[u8]| [&[0u8][..], plain].concat();
    write(t, "accept-sealed-status.bin", &sealed(&ok));
    write(
        t,
        "accept-sealed-404.bin",
        &sealed(&encode_padded_response(404, &[], b"{\"error\":\"unknown\"}").unwrap()),
    );
    write(
        t,
        "reject-sealed-truncated.bin",
        &sealed(&ok[..ok.len() - 1]),
    );
    write(t, "reject-sealed-non-zero-padding.bin", &sealed(&nonzero));
    write(t, "reject-sealed-empty.bin", &[0u8]);
    let gateway = OhttpGateway::from_seed(&FUZZ_GATEWAY_SEED).unwrap();
    let (message, _) = encapsulate(&gateway.public_key(), &request(b"{}"), "https", "r").unwrap();
    let (_, sealer) = gateway.open(&message).unwrap();
    let foreign = sealer.seal(200, &[], b"{}").unwrap();
    write(
        t,
        "reject-foreign-response.bin",
        &[&[1u8][..], &foreign].concat(),
    );
    write(
        t,
        "reject-raw-nonce-only.bin",
        &[&[1u8][..], &foreign[..32]].concat(),
    );
    write(t, "reject-empty.bin", b"");

    let t = "ohttp_gateway_open";
    let gateway = OhttpGateway::from_seed(&FUZZ_GATEWAY_SEED).unwrap();
    let (message, _) = encapsulate(&gateway.public_key(), &request(b"{}"), "https", "r").unwrap();
    write(t, "accept-encapsulated.bin", &message);
    let mut flipped = message.clone();
    *flipped.last_mut().unwrap() ^= 1;
    write(t, "reject-tampered.bin", &flipped);
    let mut other_key = message.clone();
    other_key[0] = 9;
    write(t, "reject-unknown-key-id.bin", &other_key);
    write(t, "reject-header-only.bin", &message[..7]);
    write(t, "reject-empty.bin", b"");
}
