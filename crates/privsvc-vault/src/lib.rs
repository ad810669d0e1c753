//! privsvc-vault (under construction).
#![forbid(unsafe_code)]

pub mod error;
pub mod wallet;

pub use error::VaultError;
pub use wallet::Wallet;
