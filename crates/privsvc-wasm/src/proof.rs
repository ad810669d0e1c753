//! Ownership proofs (PROTOCOL 8.4): signing, and the checks that need no ledger.

use alloy_primitives::Address;
use privsvc_vault::{proof_signer, OwnershipProofBody, NETWORK_CHAIN_ID};
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;

use crate::convert::{signature_hex, to_b256, to_u64};
use crate::error::WasmError;
use crate::vault::RawSigner;

/// Default validity of a proof, seconds (SPEC limits).
pub const DEFAULT_PROOF_TTL_SECONDS: u64 = 300;

/// Longest validity window a proof may have, seconds (PROTOCOL 8.4).
pub const MAX_PROOF_WINDOW_SECONDS: u64 = 3_600;

/// An ownership proof in the JSON form the Rust client uses (`privsvc_client::OwnershipProof`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnershipProof {
    /// The signed content.
    #[serde(flatten)]
    pub body: OwnershipProofBody,
    /// EIP-712 chain id the proof was signed for.
    pub chain_id: u64,
    /// The record's owner, who signed.
    pub owner: Address,
    /// `0x` + 130 hex characters, `r || s || v`.
    pub signature: String,
}

/// Parsing of a proof body given as JSON.
pub struct ProofBodyInput;

impl ProofBodyInput {
    /// The body of `json` (`{ entityKey, challenge, verifier, notBefore, notAfter }`).
    pub fn parse(json: &str) -> Result<OwnershipProofBody, WasmError> {
        serde_json::from_str(json).map_err(|e| WasmError::argument("proof body", e.to_string()))
    }
}

/// `signOwnershipProof(signer, { entityKey, challenge, verifier, ttlSeconds?, chainId? })` at
/// Unix time `now`: the proof as JSON text.
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
    let ttl = ttl_seconds
        .map(|t| to_u64("ttlSeconds", t))
        .transpose()?
        .unwrap_or(DEFAULT_PROOF_TTL_SECONDS);
    if ttl > MAX_PROOF_WINDOW_SECONDS {
        return Err(WasmError::argument(
            "ttlSeconds",
            format!(
                "an ownership proof is valid at most {MAX_PROOF_WINDOW_SECONDS} s, {ttl} s asked; \
                 ask the verifier for a fresh challenge instead of a long-lived proof"
            ),
        ));
    }
    let chain_id = chain_id
        .map(|c| to_u64("chainId", c))
        .transpose()?
        .unwrap_or(NETWORK_CHAIN_ID);
    let now = to_u64("now", now)?;
    let body = OwnershipProofBody {
        entity_key: to_b256("entityKey", entity_key)?,
        challenge: challenge.to_owned(),
        verifier: verifier.to_owned(),
        not_before: now,
        not_after: now.saturating_add(ttl),
    };
    let signature = signer.sign_proof_body(&body, chain_id)?;
    let signature = signature_hex(&signature);
    if privsvc_envelope::parse_signature(&signature).is_err() {
        return Err(WasmError::argument(
            "signature",
            "the signer produced a high-s or malformed proof signature",
        ));
    }
    let proof = OwnershipProof {
        body,
        chain_id,
        owner: signer.address_raw(),
        signature,
    };
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
    let proof: OwnershipProof = serde_json::from_str(proof)
        .map_err(|e| WasmError::ProofRejected(format!("the proof is malformed: {e}")))?;
    let now = to_u64("now", now)?;
    let ledger = to_u64("ledger chain id", ledger_chain_id)?;
    let b = &proof.body;
    let window = b.not_after.saturating_sub(b.not_before);
    let reject = |s: String| Err(WasmError::ProofRejected(s));
    if window > MAX_PROOF_WINDOW_SECONDS {
        return reject(format!(
            "the proof is valid for {window} s, at most {MAX_PROOF_WINDOW_SECONDS} s is accepted; ask for a fresh proof"
        ));
    }
    if now < b.not_before {
        return reject(format!(
            "the proof is not valid before {} (now {now})",
            b.not_before
        ));
    }
    if now > b.not_after {
        return reject(format!(
            "the proof expired at {} (now {now}); ask for a fresh one",
            b.not_after
        ));
    }
    if b.challenge != challenge {
        return reject("the proof answers another challenge".into());
    }
    if b.verifier != verifier {
        return reject(format!(
            "the proof is addressed to verifier {:?}",
            b.verifier
        ));
    }
    if proof.chain_id != ledger {
        return reject(format!(
            "the proof is for chain {}, the ledger is chain {ledger}",
            proof.chain_id
        ));
    }
    let bad = || {
        WasmError::ProofRejected(
            "the proof signature is invalid or not by the claimed owner".into(),
        )
    };
    let bytes = privsvc_envelope::parse_signature(&proof.signature).map_err(|_| bad())?;
    let signature =
        alloy_primitives::Signature::from_bytes_and_parity(&bytes[..64], bytes[64] == 28);
    let signer = proof_signer(b, Some(proof.chain_id), &signature).map_err(|_| bad())?;
    if signer != proof.owner {
        return Err(bad());
    }
    Ok(crate::convert::address_text(&signer))
}
