//! Ownership proofs (docs/PROTOCOL.md §8.5): signing, and the checks that need no ledger. The
//! proof's form, limits and checks are privsvc-vault's; this module only converts JavaScript
//! values.

use privsvc_vault::{proof_body, OwnershipProof, NETWORK_CHAIN_ID};
use wasm_bindgen::prelude::*;

use crate::convert::{address_text, to_b256, to_u64};
use crate::error::WasmError;
use crate::vault::RawSigner;

/// `signOwnershipProof(signer, { entityKey, challenge, verifier, ttlSeconds?, chainId? })` at
/// Unix time `now`: the proof as JSON text (the form of `privsvc_client::OwnershipProof`).
#[wasm_bindgen(js_name = rawSignOwnershipProof)]
pub fn raw_sign_ownership_proof(
    signer: &RawSigner,
    entity_key: &str,
    challenge: &str,
    verifier: &str,
    ttl_seconds: Option<f64>,
    chain_id: Option<f64>,
    now: f64,
) -> Result<String, WasmError> {
    let ttl = ttl_seconds.map(|t| to_u64("ttlSeconds", t)).transpose()?;
    let chain_id = chain_id
        .map(|c| to_u64("chainId", c))
        .transpose()?
        .unwrap_or(NETWORK_CHAIN_ID);
    let entity_key = to_b256("entityKey", entity_key)?;
    let now = to_u64("now", now)?;
    let body = proof_body(entity_key, challenge, verifier, now, ttl)
        .map_err(|e| WasmError::argument("ttlSeconds", e.to_string()))?;
    let signature = signer.sign_proof_body(&body, chain_id)?;
    let proof = OwnershipProof::new(body, chain_id, signer.address_raw(), &signature)
        .map_err(|e| WasmError::argument("signature", e.to_string()))?;
    serde_json::to_string(&proof).map_err(|e| WasmError::argument("proof", e.to_string()))
}

/// The checks of a proof that need no ledger (window, challenge, verifier, chain, signature)
/// at Unix time `now` against the ledger's chain id: the signer's address when they pass, else
/// a `ProofRejectedError` naming the reason. The caller then checks the entity on the ledger.
#[wasm_bindgen(js_name = rawCheckProof)]
pub fn raw_check_proof(
    proof: &str,
    challenge: &str,
    verifier: &str,
    now: f64,
    ledger_chain_id: f64,
) -> Result<String, WasmError> {
    let proof: OwnershipProof = serde_json::from_str(proof).map_err(WasmError::ProofMalformed)?;
    let now = to_u64("now", now)?;
    let ledger = to_u64("ledger chain id", ledger_chain_id)?;
    proof
        .check_terms(challenge, verifier, now)
        .map_err(WasmError::ProofRejected)?;
    let signer = proof
        .check_signature(ledger)
        .map_err(WasmError::ProofRejected)?;
    Ok(address_text(&signer))
}
