//! Errors of the vault crate.

/// Everything that can go wrong deriving keys or signing with a vault.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// The wallet gave two different derivation signatures.
    #[error("the wallet gave two different signatures for the same derivation message; privsvc needs a deterministic (RFC 6979) signer")]
    NonDeterministicWallet,
    /// The wallet is a contract account.
    #[error("the wallet is a smart-contract account; privsvc needs an externally owned account (or use a random-root vault)")]
    SmartContractWallet,
    /// The wallet refused or failed to sign.
    #[error("wallet error: {0}")]
    Wallet(String),
}
