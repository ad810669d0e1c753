//! Entry point shared by the `parse_envelope` fuzz target and its stable seed replay.

use privsvc_attributes::Attributes;

use crate::{envelope_digest, parse_envelope, seal_with_signature};

/// Parses `data` as a sealed envelope and checks the invariants of every accepted input:
/// sealing the parsed body with its signature reproduces `data` byte for byte, and digest
/// computation does not panic. Returns whether the input was accepted. Panics only when an
/// invariant is broken.
pub fn parse_envelope_target(data: &[u8]) -> bool {
    let Ok(sealed) = parse_envelope(data) else {
        return false;
    };
    let again = seal_with_signature(&sealed.body, &sealed.signature)
        .expect("a parsed envelope must seal again");
    assert_eq!(
        again.as_bytes(),
        data,
        "parse/seal round trip changed the bytes"
    );
    let _ = envelope_digest(&sealed.body, &Attributes::new());
    true
}
