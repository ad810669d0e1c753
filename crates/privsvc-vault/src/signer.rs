//! `RecordSigner`: the one-time owner key of one record, usable only to sign what privsvc needs.

use std::fmt;

use alloy_primitives::{Address, Signature};
use k256::ecdsa::SigningKey;
use privsvc_attributes::Attributes;
use privsvc_envelope::EnvelopeBody;

use crate::error::VaultError;
use crate::sign::sign_digest;
use crate::typed_data::{proof_signing_hash, OwnershipProofBody};

/// The owner key of one record. It exposes only the owner address and signing of envelopes and
/// ownership proofs; the key is wiped from memory when the signer is dropped.
pub struct RecordSigner {
    key: SigningKey,
    address: Address,
}

impl RecordSigner {
    pub(crate) fn new(key: SigningKey) -> Self {
        let address = Address::from_private_key(&key);
        Self { key, address }
    }

    /// The record's one-time owner address.
    pub fn address(&self) -> Address {
        self.address
    }

    /// Signs `body` over `attributes` (docs/PROTOCOL.md §3) and returns the sealed envelope
    /// text, padded to 512, 1024, 4096 or 16384 bytes. The attributes' types must be exactly
    /// `body.types`.
    pub fn sign_envelope(
        &self,
        body: &EnvelopeBody,
        attributes: &Attributes,
    ) -> Result<String, VaultError> {
        Ok(privsvc_envelope::seal_envelope(
            body, attributes, &self.key,
        )?)
    }

    /// Signs an ownership proof on the privsvc network ([`crate::NETWORK_CHAIN_ID`]).
    pub fn sign_proof(&self, body: &OwnershipProofBody) -> Result<Signature, VaultError> {
        self.sign_proof_on_chain(body, None)
    }

    /// Signs an ownership proof whose EIP-712 domain uses `chain_id` (`None`: the privsvc network).
    pub fn sign_proof_on_chain(
        &self,
        body: &OwnershipProofBody,
        chain_id: Option<u64>,
    ) -> Result<Signature, VaultError> {
        sign_digest(&self.key, &proof_signing_hash(body, chain_id)?)
    }
}

impl fmt::Debug for RecordSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordSigner")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}
