//! A wallet holding a secp256k1 private key in process.

use std::fmt;

use alloy_dyn_abi::TypedData;
use alloy_primitives::{eip191_hash_message, Address, Signature};
use async_trait::async_trait;
use k256::ecdsa::SigningKey;

use crate::error::VaultError;
use crate::sign::sign_digest;
use crate::wallet::Wallet;

/// An externally owned account whose private key lives in this process (zeroized on drop).
///
/// Signs deterministically (RFC 6979), so it can derive privsvc keys.
#[derive(Clone)]
pub struct LocalWallet {
    key: SigningKey,
    address: Address,
}

impl LocalWallet {
    /// A fresh random account.
    pub fn random() -> Self {
        Self::from_key(SigningKey::random(&mut rand::rngs::OsRng))
    }

    /// An account from its 32-byte private key; fails when the bytes are not a valid scalar.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self, VaultError> {
        let key = SigningKey::from_bytes(bytes.into()).map_err(|_| {
            VaultError::Wallet("private key is zero or not below the secp256k1 group order".into())
        })?;
        Ok(Self::from_key(key))
    }

    /// An account from a hex private key (64 hex digits, optional `0x`).
    pub fn from_hex(hex_key: &str) -> Result<Self, VaultError> {
        let digits = hex_key.trim().strip_prefix("0x").unwrap_or(hex_key.trim());
        let mut bytes = zeroize::Zeroizing::new([0u8; 32]);
        hex::decode_to_slice(digits, bytes.as_mut()).map_err(|_| {
            VaultError::Wallet("private key must be 64 hexadecimal digits (optional 0x)".into())
        })?;
        Self::from_bytes(&bytes)
    }

    fn from_key(key: SigningKey) -> Self {
        let address = Address::from_private_key(&key);
        Self { key, address }
    }
}

impl fmt::Debug for LocalWallet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalWallet")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl Wallet for LocalWallet {
    fn address(&self) -> Address {
        self.address
    }

    async fn sign_typed_data(&self, typed_data: &TypedData) -> Result<Signature, VaultError> {
        let hash = typed_data
            .eip712_signing_hash()
            .map_err(|e| VaultError::TypedData(Box::new(e)))?;
        sign_digest(&self.key, &hash)
    }

    async fn personal_sign(&self, message: &[u8]) -> Result<Signature, VaultError> {
        sign_digest(&self.key, &eip191_hash_message(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_key_has_known_address() {
        // The first well-known development account (Hardhat/Anvil account 0).
        let w = LocalWallet::from_hex(
            "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
        )
        .unwrap();
        assert_eq!(
            w.address().to_string(),
            "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
        );
        assert!(!format!("{w:?}").contains("ac0974"));
    }

    #[test]
    fn rejects_invalid_keys() {
        assert!(LocalWallet::from_bytes(&[0u8; 32]).is_err());
        assert!(LocalWallet::from_bytes(&[0xff; 32]).is_err());
        assert!(LocalWallet::from_hex("0x1234").is_err());
    }

    #[tokio::test]
    async fn personal_sign_recovers_to_address() {
        let w = LocalWallet::random();
        let sig = w.personal_sign(b"hello").await.unwrap();
        assert_eq!(sig.recover_address_from_msg(b"hello").unwrap(), w.address());
        assert_eq!(
            w.personal_sign(b"hello").await.unwrap(),
            sig,
            "RFC 6979 is deterministic"
        );
    }
}
