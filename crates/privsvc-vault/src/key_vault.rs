//! `KeyVault`: the user's keys held in the current thread.

use std::fmt;

use alloy_primitives::{Address, Signature};
use k256::ecdsa::SigningKey;
use rand::RngCore;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::error::VaultError;
use crate::kdf::{self, Secret32};
use crate::payload;
use crate::record_ref::RecordRef;
use crate::recovery::RecoveryCode;
use crate::signer::RecordSigner;
use crate::tag::{self, Tag};
use crate::typed_data::{derivation_signing_hash, derivation_typed_data};
use crate::wallet::Wallet;

/// Options of the wallet-based constructors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeriveOptions {
    /// EIP-712 `chainId` of the derivation message; `None` means [`crate::NETWORK_CHAIN_ID`].
    pub chain_id: Option<u64>,
}

impl DeriveOptions {
    /// Options deriving for this EIP-712 `chainId` instead of [`crate::NETWORK_CHAIN_ID`].
    pub fn for_chain(chain_id: u64) -> Self {
        DeriveOptions {
            chain_id: Some(chain_id),
        }
    }
}

/// The user's privsvc keys for one app, held in this thread.
///
/// Everything derives from a 32-byte root (docs/PROTOCOL.md §1.1); the root and the tag key are
/// wiped from memory when the vault is dropped, per-record keys right after each use.
pub struct KeyVault {
    app: String,
    root: Secret32,
    tag_key: Secret32,
    cover_key: Secret32,
}

impl KeyVault {
    /// Asks `wallet` for the derivation signature (twice, compared) and derives the vault.
    ///
    /// Errors: [`VaultError::SmartContractWallet`] for a contract account or a signature that
    /// does not recover to the wallet's address, [`VaultError::NonDeterministicWallet`] when the
    /// two signatures differ, [`VaultError::Wallet`] when the wallet fails.
    pub async fn from_wallet(
        wallet: &dyn Wallet,
        app: &str,
        opts: &DeriveOptions,
    ) -> Result<Self, VaultError> {
        let signature = Self::sign_derivation(wallet, app, opts).await?;
        Ok(Self::from_signature(&signature, app))
    }

    /// Asks `wallet` for the derivation signature twice and returns it once checked (same checks
    /// as [`KeyVault::from_wallet`]). The signature is as secret as the keys it derives.
    pub async fn sign_derivation(
        wallet: &dyn Wallet,
        app: &str,
        opts: &DeriveOptions,
    ) -> Result<Signature, VaultError> {
        if wallet.is_contract().await? {
            return Err(VaultError::SmartContractWallet);
        }
        let typed = derivation_typed_data(app, opts.chain_id);
        let first = wallet.sign_typed_data(&typed).await?;
        let second = wallet.sign_typed_data(&typed).await?;
        let a = Zeroizing::new(first.as_bytes());
        let b = Zeroizing::new(second.as_bytes());
        if !bool::from(a.as_slice().ct_eq(b.as_slice())) {
            return Err(VaultError::NonDeterministicWallet);
        }
        let hash = derivation_signing_hash(app, opts.chain_id)?;
        match first.recover_address_from_prehash(&hash) {
            Ok(address) if address == wallet.address() => Ok(first),
            _ => Err(VaultError::SmartContractWallet),
        }
    }

    /// The vault of a derivation signature already held (for example from [`KeyVault::sign_derivation`]).
    ///
    /// The root covers the 65 bytes `r || s || v` with `v` written as 27 or 28, whichever form
    /// (0/1 or 27/28) the wallet returned.
    pub fn from_signature(signature: &Signature, app: &str) -> Self {
        Self::from_root(kdf::root_from_signature(signature, app), app)
    }

    /// A random-root vault and its recovery code (show the code to the user once).
    pub fn random(app: &str) -> (Self, RecoveryCode) {
        let mut entropy = Zeroizing::new([0u8; 32]);
        rand::rngs::OsRng.fill_bytes(entropy.as_mut());
        let code = RecoveryCode::from_entropy(&entropy);
        (
            Self::from_root(kdf::root_from_entropy(&entropy, app), app),
            code,
        )
    }

    /// Restores a random-root vault from its 24-word recovery code.
    pub fn from_recovery_code(code: &str, app: &str) -> Result<Self, VaultError> {
        let code = RecoveryCode::parse(code)?;
        Ok(Self::from_recovery(&code, app))
    }

    /// Restores a random-root vault from a parsed recovery code.
    pub fn from_recovery(code: &RecoveryCode, app: &str) -> Self {
        Self::from_root(kdf::root_from_entropy(code.entropy(), app), app)
    }

    fn from_root(root: Secret32, app: &str) -> Self {
        let tag_key = kdf::tag_key(&root);
        let cover_key = kdf::cover_key(&root);
        Self {
            app: app.to_owned(),
            root,
            tag_key,
            cover_key,
        }
    }

    /// The app this vault derives keys for.
    pub fn app(&self) -> &str {
        &self.app
    }

    /// A fresh random record reference.
    pub fn new_record(&self) -> RecordRef {
        RecordRef::random()
    }

    /// The reference of scope `name`: every record of a scope shares it (and so its owner).
    pub fn scope_record(&self, name: &str) -> RecordRef {
        RecordRef(kdf::scope_ref_bytes(&self.root, name))
    }

    /// A tag for `record` with a random nonce; put it on the ledger with [`crate::tag_to_text`].
    pub fn make_tag(&self, record: &RecordRef) -> Tag {
        let mut nonce = [0u8; 12];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        self.make_tag_with_nonce(record, &nonce)
    }

    /// A tag with a caller-chosen nonce. Only for test vectors: reusing a nonce links records.
    pub fn make_tag_with_nonce(&self, record: &RecordRef, nonce: &[u8; 12]) -> Tag {
        tag::seal_tag(&self.tag_key, record, nonce)
    }

    /// Opens tags: the reference for each tag made by this vault, `None` for every other tag.
    pub fn open_tags(&self, tags: &[Tag]) -> Vec<Option<RecordRef>> {
        tag::open_tags(&self.tag_key, tags)
    }

    /// Cover scores of `candidates` for the user's batch `anchor` ([`kdf::cover_score`]): the
    /// client fetches the best-scored neighbours of each of its batches with it, the same ones in
    /// every session.
    pub fn cover_scores(
        &self,
        anchor: &kdf::BatchBytes,
        candidates: &[kdf::BatchBytes],
    ) -> Vec<[u8; 32]> {
        candidates
            .iter()
            .map(|c| kdf::cover_score(&self.cover_key, anchor, c))
            .collect()
    }

    /// The key of the client's persisted scan cache ([`kdf::scan_cache_key`]).
    pub fn scan_cache_key(&self) -> kdf::Secret32 {
        kdf::scan_cache_key(&self.root)
    }

    /// The one-time owner address of `record`.
    pub fn address_of(&self, record: &RecordRef) -> Result<Address, VaultError> {
        Ok(self.signer(record)?.address())
    }

    /// The signer of `record`: it exposes the owner address and signs envelopes and proofs.
    pub fn signer(&self, record: &RecordRef) -> Result<RecordSigner, VaultError> {
        Ok(RecordSigner::new(self.owner_key(record)?))
    }

    fn owner_key(&self, record: &RecordRef) -> Result<SigningKey, VaultError> {
        for counter in 0..=u8::MAX {
            let candidate = kdf::owner_key_candidate(&self.root, record.as_bytes(), counter);
            if let Ok(key) = SigningKey::from_bytes(candidate.as_ref().into()) {
                return Ok(key);
            }
        }
        Err(VaultError::NoValidOwnerKey)
    }

    /// Encrypts a payload for `record` with a random nonce: nonce(12) || ciphertext.
    pub fn encrypt(&self, record: &RecordRef, plaintext: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; 12];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        self.encrypt_with_nonce(record, &nonce, plaintext)
    }

    /// Encrypts with a caller-chosen nonce. Only for test vectors: never reuse a nonce.
    pub fn encrypt_with_nonce(
        &self,
        record: &RecordRef,
        nonce: &[u8; 12],
        plaintext: &[u8],
    ) -> Vec<u8> {
        payload::seal(
            &kdf::enc_key(&self.root, record.as_bytes()),
            nonce,
            plaintext,
        )
    }

    /// Decrypts a payload encrypted for `record` by this vault.
    pub fn decrypt(&self, record: &RecordRef, data: &[u8]) -> Result<Vec<u8>, VaultError> {
        payload::open(&kdf::enc_key(&self.root, record.as_bytes()), data)
    }
}

impl fmt::Debug for KeyVault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyVault")
            .field("app", &self.app)
            .finish_non_exhaustive()
    }
}
