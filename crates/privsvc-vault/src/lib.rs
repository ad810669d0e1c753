//! privsvc-vault: the user's keys (docs/PROTOCOL.md §1).
//!
//! A vault derives everything from one 32-byte root: the root comes from a deterministic wallet
//! signature over an EIP-712 derivation message ([`KeyVault::from_wallet`]) or from 32 random
//! bytes with a 24-word recovery code ([`KeyVault::random`]). From the root it derives one-time
//! owner keys per record, the tag key that lets the user find their records on the ledger, and
//! per-record payload keys. [`IsolatedVault`] (native only; in a browser the isolation is a Web
//! Worker, outside this crate) keeps the same keys on a dedicated thread.
//!
//! ```
//! use privsvc_vault::KeyVault;
//!
//! let (vault, code) = KeyVault::random("notes");
//! let record = vault.new_record();
//! let tag = vault.make_tag(&record);
//! assert_eq!(vault.open_tags(&[tag]), vec![Some(record)]);
//! let restored = KeyVault::from_recovery_code(code.as_str(), "notes").unwrap();
//! assert_eq!(restored.address_of(&record).unwrap(), vault.address_of(&record).unwrap());
//! ```
#![forbid(unsafe_code)]

mod aes256x4;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzz_entry;
mod gcm_siv;
#[cfg(not(target_arch = "wasm32"))]
mod isolated;
mod kdf;
mod key_vault;
mod local_wallet;
mod payload;
mod proof;
mod record_ref;
mod recovery;
mod sign;
mod signer;
mod tag;
mod typed_data;
mod vault;
mod wallet;

/// Internals that the crate's own conformance tests reach (the key derivations); not part of
/// the API (no stability promise).
#[doc(hidden)]
pub mod testing {
    /// The key derivations.
    pub mod kdf {
        pub use crate::kdf::*;
    }
}

pub use error::{BoxError, RecoveryCodeError, VaultError};
#[cfg(not(target_arch = "wasm32"))]
pub use isolated::IsolatedVault;
pub use kdf::{BatchBytes, Secret32};
pub use key_vault::{DeriveOptions, KeyVault};
pub use local_wallet::LocalWallet;
pub use payload::{PAYLOAD_AUTH_BYTES, PAYLOAD_NONCE_BYTES};
pub use proof::{
    proof_body, OwnershipProof, ProofCheckError, ProofSignError, DEFAULT_PROOF_TTL_SECONDS,
    MAX_PROOF_WINDOW_SECONDS,
};
pub use record_ref::RecordRef;
pub use recovery::{RecoveryCode, RECOVERY_WORDS};
pub use sign::{signature_from_hex, signature_hex};
pub use signer::RecordSigner;
pub use tag::{tag_from_text, tag_to_text, Tag, TAG_BYTES, TAG_NONCE_BYTES, TAG_TEXT_LEN};
pub use typed_data::{
    derivation_signing_hash, derivation_typed_data, proof_signer, proof_signing_hash,
    proof_typed_data, OwnershipProofBody, DERIVATION_PURPOSE, DERIVATION_TYPE, DOMAIN_NAME,
    DOMAIN_VERSION, NETWORK_CHAIN_ID, PROOF_TYPE,
};
pub use vault::Vault;
pub use wallet::Wallet;
