//! Entry points shared by the OHTTP fuzz targets (`fuzz/fuzz_targets/ohttp_*.rs`) and their
//! stable seed replay (`tests/it/fuzz_seeds.rs`): the bytes a gateway or a client decodes from
//! the network.
//!
//! Each returns whether the input was accepted and panics only when an invariant of an accepted
//! input is broken.

use crate::binary::{
    decode_padded_request, decode_padded_response, encode_padded_request, encode_padded_response,
};
use crate::gateway::OhttpGateway;
use crate::padding::{is_class, REQUEST_CLASSES, RESPONSE_CLASSES};

/// The gateway seed of [`gateway_open`] (0x00 0x01 ... 0x1f, the seed of the vector in
/// docs/PROTOCOL.md §6).
pub const FUZZ_GATEWAY_SEED: [u8; 32] = {
    let mut s = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        s[i] = i as u8;
        i += 1;
    }
    s
};

/// A padded Binary HTTP request (the plaintext a gateway decapsulates). An accepted input
/// measures a request class, and re-encoding what was decoded decodes to the same request.
pub fn padded_request(data: &[u8]) -> bool {
    let Ok(request) = decode_padded_request(data) else {
        return false;
    };
    assert!(
        is_class(data.len(), &REQUEST_CLASSES),
        "accepted an unpadded request"
    );
    let again = encode_padded_request(&request, "https", "relayer.example")
        .expect("a decoded request re-encodes");
    assert!(is_class(again.len(), &REQUEST_CLASSES));
    let back = decode_padded_request(&again).expect("re-encoded request decodes");
    assert_eq!(back, request, "request changed by a round trip");
    true
}

/// A padded Binary HTTP response (the plaintext a client decapsulates). An accepted input
/// measures a response class, and re-encoding what was decoded decodes to the same response.
pub fn padded_response(data: &[u8]) -> bool {
    let Ok(response) = decode_padded_response(data) else {
        return false;
    };
    assert!(
        is_class(data.len(), &RESPONSE_CLASSES),
        "accepted an unpadded response"
    );
    let again = encode_padded_response(response.status, &response.headers, &response.body)
        .expect("a decoded response re-encodes");
    let back = decode_padded_response(&again).expect("re-encoded response decodes");
    assert_eq!(back, response, "response changed by a round trip");
    true
}

/// An encapsulated request (`message/ohttp-req`) opened by a gateway with
/// [`FUZZ_GATEWAY_SEED`]. Every failure must be the one opaque [`crate::OhttpError::Open`];
/// an opened request's answer is sealed to a response class.
pub fn gateway_open(data: &[u8]) -> bool {
    let gateway = OhttpGateway::from_seed(&FUZZ_GATEWAY_SEED).expect("fixed seed");
    match gateway.open(data) {
        Ok((_, sealer)) => {
            sealer.seal(200, &[], b"{}").expect("a small answer seals");
            true
        }
        Err(crate::OhttpError::Open) => false,
        Err(other) => panic!("gateway refused with a telling error: {other}"),
    }
}

/// An encapsulated response (`message/ohttp-res`) opened by a client
/// ([`crate::client::PendingResponse::open`]) that sent one request to a gateway with
/// [`FUZZ_GATEWAY_SEED`]. The first byte picks the form of the rest: even, it is the plaintext
/// the gateway seals (so decapsulation succeeds and the padded Binary HTTP decoder runs behind
/// it); odd, it is the `message/ohttp-res` body itself (so the AEAD must refuse it). Invariants:
/// a sealed plaintext is accepted exactly when it decodes on its own, to the same response; a
/// body not sealed by the gateway is never accepted; every refusal is
/// [`crate::OhttpError::BadResponse`].
pub fn client_response(data: &[u8]) -> bool {
    let Some((&mode, rest)) = data.split_first() else {
        return false;
    };
    thread_local! {
        // Deriving the gateway costs more than the rest; it holds no per-request state.
        static GATEWAY: (OhttpGateway, String) = {
            let gateway = OhttpGateway::from_seed(&FUZZ_GATEWAY_SEED).expect("fixed seed");
            let key = gateway.public_key();
            (gateway, key)
        };
    }
    GATEWAY.with(|(gateway, key)| open_as_client(gateway, key, mode, rest))
}

/// [`client_response`] with its gateway.
fn open_as_client(gateway: &OhttpGateway, key: &str, mode: u8, rest: &[u8]) -> bool {
    let request = crate::binary::BinaryRequest {
        method: "GET".into(),
        path: "/v1/info".into(),
        headers: vec![],
        body: vec![],
    };
    let (message, pending) = crate::client::encapsulate(key, &request, "https", "r")
        .expect("a small request encapsulates");
    let (_, sealer) = gateway
        .open(&message)
        .expect("the gateway opens its own request");
    let (body, alone) = if mode.is_multiple_of(2) {
        let sealed = sealer.seal_padded(rest).expect("any plaintext seals");
        (sealed, decode_padded_response(rest).ok())
    } else {
        (rest.to_vec(), None)
    };
    match pending.open(&body) {
        Ok(response) => {
            assert_eq!(
                Some(&response),
                alone.as_ref(),
                "the client accepted what the decoder alone refuses, or read it differently"
            );
            true
        }
        Err(crate::OhttpError::BadResponse(_)) => {
            assert!(
                alone.is_none(),
                "the client refused a valid sealed response"
            );
            false
        }
        Err(other) => panic!("the client refused with another error: {other}"),
    }
}
