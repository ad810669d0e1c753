//! The `Vault` trait: what a privsvc client asks of the user's keys, wherever they live.

use alloy_primitives::{Address, Signature};
use async_trait::async_trait;
use privsvc_attributes::Attributes;
use privsvc_envelope::EnvelopeBody;

use crate::error::VaultError;
use crate::kdf::{BatchBytes, Secret32};
use crate::key_vault::KeyVault;
use crate::record_ref::RecordRef;
use crate::tag::Tag;
use crate::typed_data::OwnershipProofBody;

/// A key vault: [`KeyVault`] (keys in the caller's thread) or [`crate::IsolatedVault`] (keys on a
/// dedicated thread). Object safe; clients hold an `Arc<dyn Vault>`.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait Vault: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// The app the keys are derived for.
    fn app(&self) -> &str;

    /// A fresh random record reference (needs no key).
    fn new_record(&self) -> RecordRef {
        RecordRef::random()
    }

    /// The reference of scope `name`.
    async fn scope_record(&self, name: &str) -> Result<RecordRef, VaultError>;

    /// A tag for `record` with a random nonce.
    async fn make_tag(&self, record: &RecordRef) -> Result<Tag, VaultError>;

    /// For each tag, the reference when it was made by this vault, else `None`.
    async fn open_tags(&self, tags: &[Tag]) -> Result<Vec<Option<RecordRef>>, VaultError>;

    /// The one-time owner address of `record`.
    async fn address_of(&self, record: &RecordRef) -> Result<Address, VaultError>;

    /// Cover scores of `candidates` for the user's batch `anchor` (see
    /// [`crate::kdf::cover_score`]); the cover key never leaves the vault.
    async fn cover_scores(
        &self,
        anchor: &BatchBytes,
        candidates: &[BatchBytes],
    ) -> Result<Vec<[u8; 32]>, VaultError>;

    /// Seals an envelope with the owner key of `record`: the sealed, padded text
    /// (docs/PROTOCOL.md §3).
    async fn sign_envelope(
        &self,
        record: &RecordRef,
        body: &EnvelopeBody,
        attributes: &Attributes,
    ) -> Result<String, VaultError>;

    /// Signs an ownership proof for `record` on the privsvc network.
    async fn sign_proof(
        &self,
        record: &RecordRef,
        body: &OwnershipProofBody,
    ) -> Result<Signature, VaultError> {
        self.sign_proof_on_chain(record, body, None).await
    }

    /// Signs an ownership proof for `record` with the EIP-712 `chainId` given (`None`: the
    /// privsvc network).
    async fn sign_proof_on_chain(
        &self,
        record: &RecordRef,
        body: &OwnershipProofBody,
        chain_id: Option<u64>,
    ) -> Result<Signature, VaultError>;

    /// Encrypts a payload for `record`: nonce(12) || ciphertext.
    async fn encrypt(&self, record: &RecordRef, plaintext: &[u8]) -> Result<Vec<u8>, VaultError>;

    /// Decrypts a payload encrypted for `record`.
    async fn decrypt(&self, record: &RecordRef, data: &[u8]) -> Result<Vec<u8>, VaultError>;

    /// The key that seals the client's persisted scan cache ([`crate::kdf::scan_cache_key`]),
    /// or `None` when this vault gives none (then the client keeps no cache). The default is
    /// `None`. The key opens the cache alone: it derives no other key.
    async fn scan_cache_key(&self) -> Result<Option<Secret32>, VaultError> {
        Ok(None)
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl Vault for KeyVault {
    fn app(&self) -> &str {
        KeyVault::app(self)
    }

    async fn scope_record(&self, name: &str) -> Result<RecordRef, VaultError> {
        Ok(KeyVault::scope_record(self, name))
    }

    async fn make_tag(&self, record: &RecordRef) -> Result<Tag, VaultError> {
        Ok(KeyVault::make_tag(self, record))
    }

    async fn open_tags(&self, tags: &[Tag]) -> Result<Vec<Option<RecordRef>>, VaultError> {
        Ok(KeyVault::open_tags(self, tags))
    }

    async fn address_of(&self, record: &RecordRef) -> Result<Address, VaultError> {
        KeyVault::address_of(self, record)
    }

    async fn cover_scores(
        &self,
        anchor: &BatchBytes,
        candidates: &[BatchBytes],
    ) -> Result<Vec<[u8; 32]>, VaultError> {
        Ok(KeyVault::cover_scores(self, anchor, candidates))
    }

    async fn scan_cache_key(&self) -> Result<Option<Secret32>, VaultError> {
        Ok(Some(KeyVault::scan_cache_key(self)))
    }

    async fn sign_envelope(
        &self,
        record: &RecordRef,
        body: &EnvelopeBody,
        attributes: &Attributes,
    ) -> Result<String, VaultError> {
        self.signer(record)?.sign_envelope(body, attributes)
    }

    async fn sign_proof_on_chain(
        &self,
        record: &RecordRef,
        body: &OwnershipProofBody,
        chain_id: Option<u64>,
    ) -> Result<Signature, VaultError> {
        self.signer(record)?.sign_proof_on_chain(body, chain_id)
    }

    async fn encrypt(&self, record: &RecordRef, plaintext: &[u8]) -> Result<Vec<u8>, VaultError> {
        Ok(KeyVault::encrypt(self, record, plaintext))
    }

    async fn decrypt(&self, record: &RecordRef, data: &[u8]) -> Result<Vec<u8>, VaultError> {
        KeyVault::decrypt(self, record, data)
    }
}
