//! The protocol constants, read by `js/core.js` from the Rust crates instead of copied by hand.

use serde_json::json;
use wasm_bindgen::prelude::*;

/// The protocol constants as JSON: `{ networkChainId, derivationPurpose, tagBytes,
/// privsvcProject, apiVersion, envelopeVersion, envelopeContentType, blockTimeSeconds,
/// defaultProofTtlSeconds, defaultTokenMinAgeMs, defaultRpcUrl,
/// pinRetentionDays }`.
#[wasm_bindgen(js_name = rawConstants)]
pub fn raw_constants() -> String {
    json!({
        "networkChainId": privsvc_vault::NETWORK_CHAIN_ID,
        "derivationPurpose": privsvc_vault::DERIVATION_PURPOSE,
        "tagBytes": privsvc_vault::TAG_BYTES,
        "privsvcProject": privsvc_ledger::PRIVSVC_PROJECT,
        "apiVersion": privsvc_client::API_VERSION,
        "envelopeVersion": privsvc_envelope::ENVELOPE_VERSION,
        "envelopeContentType": privsvc_envelope::ENVELOPE_CONTENT_TYPE,
        "blockTimeSeconds": privsvc_ledger::BLOCK_TIME_SECONDS,
        "defaultRpcUrl": privsvc_client::DEFAULT_RPC_URL,
        "defaultProofTtlSeconds": privsvc_vault::DEFAULT_PROOF_TTL_SECONDS,
        "defaultTokenMinAgeMs": privsvc_tokens::DEFAULT_MIN_AGE_MS,
        "pinRetentionDays": privsvc_tokens::PIN_RETENTION_DAYS,
    })
    .to_string()
}
