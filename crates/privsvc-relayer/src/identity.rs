//! Who the relayer is, fixed at start: its account, chain, public URL, the issuer it accepts
//! and its OHTTP key. Shared read-only (an `Arc`) with the parts that name it: the API's info
//! document, the heartbeats and the batches.

use alloy_primitives::Address;

/// The relayer's identity (immutable).
#[derive(Debug, Clone)]
pub struct Identity {
    /// The relayer's account.
    pub address: Address,
    /// The ledger's chain id.
    pub chain_id: u64,
    /// Public base URL.
    pub public_url: String,
    /// Issuer accepted for tokens.
    pub issuer: Option<Address>,
    /// Issuer URL published in info.
    pub issuer_url: Option<String>,
    /// The OHTTP gateway key (hex), when on.
    pub ohttp_key: Option<String>,
}
