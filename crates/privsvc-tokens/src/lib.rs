//! Blind RSA rate-limit tokens for privsvc (docs/PROTOCOL.md §5): the primitives
//! (RFC 9474 RSABSSA-SHA384-PSS-Deterministic), the token issuer with its HTTP endpoints, and
//! the client-side token wallet with its stores.
//!
//! Features: `server` (default; the issuer and its axum router, implies `sqlite`) and `sqlite`
//! (the SQLite-backed stores: `FileTokenStore`, `SqliteKeyPins`, the issuer's store). Without
//! them the crate is the client part only, which also builds for `wasm32-unknown-unknown`.
//!
//! One token, end to end, with the primitives (the issuer and the wallet do the same over HTTP
//! and the ledger):
//!
//! ```
//! use privsvc_tokens::*;
//!
//! # fn main() -> Result<(), TokenError> {
//! let suite = token_suite();
//! // Issuer: the day's key; its SPKI is what goes on the ledger.
//! let sk = suite.generate_key()?;
//! let spki = IssuerKey::from_secret(&sk)?.spki().to_vec();
//! let signer = BlindSigner::new(&sk)?;
//!
//! // Client: read the key (from the ledger), blind a fresh token message.
//! let key = import_issuer_key(&spki)?;
//! let epoch = epoch_of(now_ms());
//! let nonce = [42u8; NONCE_BYTES];
//! let msg = token_message("my-app", epoch, &nonce)?;
//! let blinded = suite.blind(&key, &msg)?;
//!
//! // Issuer: sign the blinded value (checked before it leaves).
//! let blind_sig = signer.sign(blinded.blinded_message())?;
//!
//! // Client: unblind; the redemption goes into a submit request.
//! let sig = suite.finalize(&key, &blind_sig, &blinded, &msg)?;
//! let token = TokenRedemption::new(epoch, &nonce, &sig);
//!
//! // Relayer: verify and record the id as spent.
//! let id = verify_token(&key, "my-app", &token)?;
//! assert_eq!(id, token_id(&msg));
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod acceptance;
mod error;
#[cfg(feature = "sqlite")]
mod file_store;
#[cfg(feature = "fuzzing")]
pub mod fuzz_entry;
#[cfg(feature = "server")]
mod issuer;
#[cfg(feature = "sqlite")]
// Without `server` only its private-file helpers are used (by the SQLite pins).
#[cfg_attr(not(feature = "server"), allow(dead_code))]
mod issuer_store;
mod key_entity;
mod message;
mod protocol;
mod published_key;
mod relayer_pins;
#[cfg(feature = "server")]
mod router;
mod signer;
mod source;
#[cfg(feature = "sqlite")]
mod sqlite_pins;
mod store;
mod suite;
mod wallet;

#[cfg(feature = "sqlite")]
pub use acceptance::SqliteKeyPins;
pub use acceptance::{accept_issuer_key, KeyPins, MemoryKeyPins, PIN_RETENTION_DAYS};
pub use error::{BoxError, MalformedToken, TokenError};
#[cfg(feature = "server")]
pub use issuer::{
    next_day_due, next_day_moment, Clock, IssueRefusal, Issuer, IssuerConfig, IssuerError,
    DEFAULT_MAX_ACTIVE_APPS, DEFAULT_MAX_NEW_APPS, DEFAULT_QUOTA, MAX_APP_BYTES, MAX_CLOCK_SKEW_MS,
    PUBLISH_MARGIN_MS,
};
#[cfg(feature = "server")]
pub use issuer_store::ISSUER_DB_FILE;
pub use key_entity::{issuer_key_create, issuer_key_query};
pub use message::{
    acceptable_epochs, epoch_of, now_ms, token_id, token_message, DAY_MS, ISSUANCE_DOMAIN,
    NONCE_BYTES, TOKEN_DOMAIN,
};
pub use protocol::{
    issuance_message, ErrorBody, IssueRequest, IssueResponse, IssuerKeyResponse, TokenRedemption,
    MAX_TOKENS_PER_REQUEST,
};
pub use published_key::{fetch_issuer_key, fetch_issuer_key_entity, PublishedKey};
#[cfg(not(target_arch = "wasm32"))]
pub use relayer_pins::FileRelayerPins;
pub use relayer_pins::{MemoryRelayerPins, RelayerPins};
#[cfg(feature = "server")]
pub use router::{issuer_router, MAX_ISSUE_BODY};
pub use signer::{BlindSigner, BLINDING_REFRESH};
pub use source::{
    ripe_at_ms, OnDemandIssuer, Ripening, StoreTokenSource, TokenSource, DEFAULT_MAX_RIPE_MS,
    DEFAULT_MIN_AGE_MS, DEFAULT_RIPE_WAIT_MS,
};
#[cfg(feature = "sqlite")]
pub use store::FileTokenStore;
pub use store::{available_in, memory_store, MemoryTokenStore, StoredToken, TokenStore};
pub use suite::{
    import_issuer_key, token_suite, verify_token, Blinded, IssuerKey, IssuerSecretKey,
    SuitePublicKey, TokenSuite, MODULUS_BITS, MODULUS_BYTES, SUITE_NAME,
};
pub use wallet::{
    Acquired, TokenWallet, TokenWalletOptions, DEFAULT_PREFETCH_WITHIN, KEY_READ_INTERVAL,
};
