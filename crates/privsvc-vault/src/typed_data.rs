//! The EIP-712 structures privsvc signs: the key-derivation message (docs/PROTOCOL.md §1.1)
//! and ownership proofs (docs/PROTOCOL.md §8.5). Both use the domain
//! `{name: "privsvc", version: "1", chainId}`.

use alloy_dyn_abi::TypedData;
use alloy_primitives::{Address, Signature, B256};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::VaultError;

/// Chain id of the privsvc ledger network, the default EIP-712 `chainId`.
pub const NETWORK_CHAIN_ID: u64 = 7738577;
/// EIP-712 domain name.
pub const DOMAIN_NAME: &str = "privsvc";
/// EIP-712 domain version.
pub const DOMAIN_VERSION: &str = "1";
/// The `purpose` field of the key-derivation message.
pub const DERIVATION_PURPOSE: &str = "privsvc key v1";
/// EIP-712 type string of the key-derivation message.
pub const DERIVATION_TYPE: &str = "KeyDerivation(string purpose,string app)";
/// EIP-712 type string of an ownership proof.
pub const PROOF_TYPE: &str =
    "OwnershipProof(bytes32 entityKey,string challenge,string verifier,uint64 notBefore,uint64 notAfter)";

fn domain_json(chain_id: Option<u64>) -> serde_json::Value {
    json!({
        "name": DOMAIN_NAME,
        "version": DOMAIN_VERSION,
        "chainId": chain_id.unwrap_or(NETWORK_CHAIN_ID),
    })
}

fn domain_type_json() -> serde_json::Value {
    json!([
        {"name": "name", "type": "string"},
        {"name": "version", "type": "string"},
        {"name": "chainId", "type": "uint256"},
    ])
}

fn typed_data_from(value: serde_json::Value) -> TypedData {
    // The templates below are fixed; only string and integer field values vary, which cannot make
    // the structure invalid.
    serde_json::from_value(value).expect("privsvc EIP-712 templates are valid typed data")
}

/// The key-derivation message for `app`, in the form a wallet's `eth_signTypedData_v4` takes.
///
/// `chain_id` defaults to [`NETWORK_CHAIN_ID`].
///
/// ```
/// let td = privsvc_vault::derivation_typed_data("notes", None);
/// assert_eq!(td.primary_type, "KeyDerivation");
/// assert!(td.eip712_signing_hash().is_ok());
/// ```
pub fn derivation_typed_data(app: &str, chain_id: Option<u64>) -> TypedData {
    typed_data_from(json!({
        "types": {
            "EIP712Domain": domain_type_json(),
            "KeyDerivation": [
                {"name": "purpose", "type": "string"},
                {"name": "app", "type": "string"},
            ],
        },
        "primaryType": "KeyDerivation",
        "domain": domain_json(chain_id),
        "message": {"purpose": DERIVATION_PURPOSE, "app": app},
    }))
}

/// The EIP-712 signing hash of the key-derivation message.
pub fn derivation_signing_hash(app: &str, chain_id: Option<u64>) -> Result<B256, VaultError> {
    derivation_typed_data(app, chain_id)
        .eip712_signing_hash()
        .map_err(|e| VaultError::TypedData(Box::new(e)))
}

/// The signed content of an ownership proof (docs/PROTOCOL.md §8.5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnershipProofBody {
    /// Ledger key of the record's entity.
    pub entity_key: B256,
    /// The verifier's challenge (a nonce or session id).
    pub challenge: String,
    /// Who the proof is for (a domain or service name).
    pub verifier: String,
    /// Start of the validity window, Unix seconds.
    pub not_before: u64,
    /// End of the validity window, Unix seconds.
    pub not_after: u64,
}

/// The ownership proof as EIP-712 typed data; `chain_id` defaults to [`NETWORK_CHAIN_ID`].
pub fn proof_typed_data(body: &OwnershipProofBody, chain_id: Option<u64>) -> TypedData {
    typed_data_from(json!({
        "types": {
            "EIP712Domain": domain_type_json(),
            "OwnershipProof": [
                {"name": "entityKey", "type": "bytes32"},
                {"name": "challenge", "type": "string"},
                {"name": "verifier", "type": "string"},
                {"name": "notBefore", "type": "uint64"},
                {"name": "notAfter", "type": "uint64"},
            ],
        },
        "primaryType": "OwnershipProof",
        "domain": domain_json(chain_id),
        "message": {
            "entityKey": body.entity_key.to_string(),
            "challenge": body.challenge,
            "verifier": body.verifier,
            "notBefore": body.not_before,
            "notAfter": body.not_after,
        },
    }))
}

/// The EIP-712 signing hash of an ownership proof.
pub fn proof_signing_hash(
    body: &OwnershipProofBody,
    chain_id: Option<u64>,
) -> Result<B256, VaultError> {
    proof_typed_data(body, chain_id)
        .eip712_signing_hash()
        .map_err(|e| VaultError::TypedData(Box::new(e)))
}

/// The address that signed an ownership proof (compare it with the entity's owner).
pub fn proof_signer(
    body: &OwnershipProofBody,
    chain_id: Option<u64>,
    signature: &Signature,
) -> Result<Address, VaultError> {
    let hash = proof_signing_hash(body, chain_id)?;
    signature
        .recover_address_from_prehash(&hash)
        .map_err(|e| VaultError::TypedData(Box::new(e)))
}
