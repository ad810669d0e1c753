//! EIP-712 typed data of key derivation and ownership proofs (docs/PROTOCOL.md §1.1 and §8.5).

use privsvc_vault::{derivation_signing_hash, derivation_typed_data, proof_typed_data};
use wasm_bindgen::prelude::*;

use crate::convert::ProofBodyInput;
use crate::convert::{address_text, to_signature, to_u64};
use crate::error::WasmError;

fn chain(chain_id: Option<f64>) -> Result<Option<u64>, WasmError> {
    chain_id.map(|c| to_u64("chainId", c)).transpose()
}

/// `derivationTypedData(app, chainId?)` as the JSON text `eth_signTypedData_v4` takes.
#[wasm_bindgen(js_name = rawDerivationTypedData)]
pub fn raw_derivation_typed_data(app: &str, chain_id: Option<f64>) -> Result<String, WasmError> {
    serde_json::to_string(&derivation_typed_data(app, chain(chain_id)?))
        .map_err(|e| WasmError::argument("typed data", e.to_string()))
}

/// The address that made `signature` over the derivation message of `app`.
#[wasm_bindgen(js_name = rawDerivationSigner)]
pub fn raw_derivation_signer(
    signature: &str,
    app: &str,
    chain_id: Option<f64>,
) -> Result<String, WasmError> {
    let signature = to_signature("derivation signature", signature)?;
    let hash = derivation_signing_hash(app, chain(chain_id)?)?;
    let address = signature
        .recover_address_from_prehash(&hash)
        .map_err(|e| WasmError::argument("derivation signature", e.to_string()))?;
    Ok(address_text(&address))
}

/// `proofTypedData(body)` as JSON text; `body` is the JSON of an ownership proof body.
#[wasm_bindgen(js_name = rawProofTypedData)]
pub fn raw_proof_typed_data(body: &str, chain_id: Option<f64>) -> Result<String, WasmError> {
    let body = ProofBodyInput::parse(body)?;
    serde_json::to_string(&proof_typed_data(&body, chain(chain_id)?))
        .map_err(|e| WasmError::argument("typed data", e.to_string()))
}
