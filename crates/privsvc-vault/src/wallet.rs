//! The `Wallet` trait: what privsvc asks of a user's wallet.

use alloy_dyn_abi::TypedData;
use alloy_primitives::{Address, Signature};
use async_trait::async_trait;

use crate::error::VaultError;

/// A user's wallet: an account that signs EIP-712 typed data and EIP-191 messages.
///
/// Implement it over a browser wallet, a hardware wallet or a remote signer; [`crate::LocalWallet`]
/// holds a private key in process.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait Wallet: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// The wallet's account address.
    fn address(&self) -> Address;
    /// `eth_signTypedData_v4` over `typed_data`.
    async fn sign_typed_data(&self, typed_data: &TypedData) -> Result<Signature, VaultError>;
    /// `personal_sign` (EIP-191 version 0x45) over `message`.
    async fn personal_sign(&self, message: &[u8]) -> Result<Signature, VaultError>;
    /// Whether the account is a contract (smart-contract wallet). A contract wallet's signatures
    /// are not deterministic ECDSA, so vaults refuse it. The default says no; wallets that can
    /// tell (or a ledger-aware wrapper) override it.
    async fn is_contract(&self) -> Result<bool, VaultError> {
        Ok(false)
    }
}
