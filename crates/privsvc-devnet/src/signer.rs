//! Well-known dev keys and a minimal transaction signer for tests, examples and benches.

use alloy_consensus::{SignableTransaction, TxEip1559, TxEnvelope, TxLegacy};
use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{Address, Bytes, Signature, TxKind, B256, U256};
use k256::ecdsa::SigningKey;

use crate::abi::ARKIV_ADDRESS;

/// The first five private keys of the standard development mnemonic
/// (`test test test test test test test test test test test junk`, as used by anvil and hardhat).
/// Public knowledge: never use them on a real network.
pub const DEV_PRIVATE_KEYS: [&str; 5] = [
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
];

/// Errors of the dev signer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignerError {
    /// The key is not 32 bytes of hex or not a valid secp256k1 scalar.
    #[error("invalid private key: {0}")]
    InvalidKey(#[source] crate::error::BoxError),
    /// Signing failed; the source is k256's error.
    #[error("signing failed: {0}")]
    Sign(#[source] crate::error::BoxError),
}

/// A signing key with its address.
#[derive(Clone)]
pub struct DevSigner {
    key: SigningKey,
    address: Address,
}

impl std::fmt::Debug for DevSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevSigner")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl DevSigner {
    /// From a hex private key (`0x` optional).
    pub fn from_hex(hex_key: &str) -> Result<Self, SignerError> {
        let raw = hex::decode(hex_key.trim_start_matches("0x"))
            .map_err(|e| SignerError::InvalidKey(Box::new(e)))?;
        let key = SigningKey::from_slice(&raw).map_err(|e| SignerError::InvalidKey(Box::new(e)))?;
        let address = Address::from_public_key(key.verifying_key());
        Ok(Self { key, address })
    }

    /// Dev key `i` (0..5) of [`DEV_PRIVATE_KEYS`].
    pub fn dev(i: usize) -> Self {
        Self::from_hex(DEV_PRIVATE_KEYS[i % DEV_PRIVATE_KEYS.len()]).expect("dev keys are valid")
    }

    /// The account address.
    pub fn address(&self) -> Address {
        self.address
    }

    /// Sign an EIP-1559 transaction; returns the EIP-2718 encoding for `eth_sendRawTransaction`.
    pub fn sign_eip1559(&self, tx: TxEip1559) -> Result<Bytes, SignerError> {
        let sig = self.sign_hash(tx.signature_hash())?;
        let env = TxEnvelope::from(tx.into_signed(sig));
        Ok(Bytes::from(env.encoded_2718()))
    }

    /// Sign a legacy (EIP-155) transaction; returns its RLP encoding.
    pub fn sign_legacy(&self, tx: TxLegacy) -> Result<Bytes, SignerError> {
        let sig = self.sign_hash(tx.signature_hash())?;
        let env = TxEnvelope::from(tx.into_signed(sig));
        Ok(Bytes::from(env.encoded_2718()))
    }

    /// The recoverable signature of a transaction's signing hash.
    fn sign_hash(&self, hash: B256) -> Result<Signature, SignerError> {
        let (sig, recid) = self
            .key
            .sign_prehash_recoverable(hash.as_slice())
            .map_err(|e| SignerError::Sign(Box::new(e)))?;
        Ok(Signature::from_signature_and_parity(sig, recid.is_y_odd()))
    }

    /// Sign a call to the Arkiv entrypoint with `calldata`.
    pub fn sign_arkiv_call(
        &self,
        chain_id: u64,
        nonce: u64,
        calldata: Bytes,
        gas_limit: u64,
        max_fee_per_gas: u128,
    ) -> Result<Bytes, SignerError> {
        self.sign_eip1559(TxEip1559 {
            chain_id,
            nonce,
            gas_limit,
            max_fee_per_gas,
            max_priority_fee_per_gas: 0,
            to: TxKind::Call(ARKIV_ADDRESS),
            value: U256::ZERO,
            access_list: Default::default(),
            input: calldata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_bad_key_keeps_the_decoders_error() {
        let not_hex = DevSigner::from_hex("0xzz").expect_err("not hex");
        assert!(
            not_hex
                .source()
                .and_then(|s| s.downcast_ref::<hex::FromHexError>())
                .is_some(),
            "{not_hex:?}"
        );
        let zero = DevSigner::from_hex(&"00".repeat(32)).expect_err("zero key");
        assert!(matches!(zero, SignerError::InvalidKey(_)), "{zero:?}");
        assert!(zero.source().is_some(), "{zero:?}");
    }
}
