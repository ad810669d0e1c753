//! Entry points shared by the token fuzz targets (`fuzz/fuzz_targets/tokens_*.rs`) and their
//! stable seed replay (`tests/it/fuzz_seeds.rs`): the token redemption of a submit request and
//! the body of an issue request, as relayers and issuers read them from the network.
//!
//! Each returns whether the input was accepted and panics only when an invariant of an accepted
//! input is broken.

use crate::message::ISSUANCE_DOMAIN;
use crate::protocol::issuance_message;
use crate::protocol::{IssueRequest, TokenRedemption};

/// A `token` member of a submit request. Accepted when its nonce and signature decode; then the
/// redemption rebuilt from the decoded parts decodes to the same parts and has the same token id.
pub fn token_redemption(data: &[u8]) -> bool {
    let Ok(redemption) = serde_json::from_slice::<TokenRedemption>(data) else {
        return false;
    };
    let (Ok(nonce), Ok(signature)) = (redemption.nonce_bytes(), redemption.signature_bytes())
    else {
        return false;
    };
    let rebuilt = TokenRedemption::new(redemption.epoch, &nonce, &signature);
    assert_eq!(rebuilt.nonce_bytes().ok(), Some(nonce), "nonce round trip");
    assert_eq!(
        rebuilt.signature_bytes().ok(),
        Some(signature),
        "signature round trip"
    );
    assert_eq!(
        rebuilt.token_id("notes").ok(),
        redemption.token_id("notes").ok(),
        "token id depends on the nonce's spelling"
    );
    true
}

/// The body of `POST /v1/tokens/issue`. Accepted when it parses and its issuance message can be
/// built; the message then starts with the v2 domain line, names the issuer in EIP-55 form and
/// the chain, and has exactly seven lines whenever `app` holds no line break.
pub fn issue_request(data: &[u8]) -> bool {
    let Ok(request) = serde_json::from_slice::<IssueRequest>(data) else {
        return false;
    };
    let Ok(message) = issuance_message(&request, request.ts) else {
        return false;
    };
    let mut lines = message.split('\n');
    assert_eq!(lines.next(), Some(ISSUANCE_DOMAIN), "domain line");
    assert_eq!(
        lines.next(),
        Some(format!("issuer: {}", request.issuer.to_checksum(None)).as_str()),
        "issuer line"
    );
    assert_eq!(
        lines.next(),
        Some(format!("chain: {}", request.chain_id).as_str()),
        "chain line"
    );
    if !request.app.contains('\n') {
        assert_eq!(message.split('\n').count(), 7, "seven lines");
    }
    true
}
