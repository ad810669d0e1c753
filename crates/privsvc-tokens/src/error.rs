//! Errors of the tokens crate.

use privsvc_ledger::LedgerError;
use privsvc_vault::VaultError;

/// Everything that can go wrong creating, verifying, fetching or storing tokens.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// An issuer public key could not be decoded or has the wrong parameters.
    #[error("invalid issuer key: {0}; expected a 2048-bit RSA public key (e = 65537) as SPKI DER")]
    InvalidKey(String),
    /// A token redemption is malformed (bad hex nonce, bad base64 signature, wrong length).
    #[error("malformed token: {0}")]
    Malformed(String),
    /// The token signature does not verify under the issuer key for this app and epoch.
    #[error("token signature does not verify for this app, epoch and issuer key")]
    InvalidSignature,
    /// A blind signature from the issuer did not verify (faulty or malicious issuer).
    #[error("the issuer returned a blind signature that does not verify under its published key")]
    BadBlindSignature,
    /// The app name cannot be used in a token message.
    #[error("invalid app name: {0}")]
    InvalidApp(String),
    /// The issuer has no key on the ledger for this app and epoch.
    #[error("issuer {issuer} has no key on the ledger for app {app:?}, epoch {epoch}")]
    NoIssuerKey {
        /// The issuer address (0x-hex).
        issuer: String,
        /// The app.
        app: String,
        /// The UTC day number.
        epoch: u32,
    },
    /// The issuer published two distinct keys for one app and epoch.
    #[error("issuer {issuer} published {keys} distinct keys for app {app:?}, epoch {epoch}: it may be tagging clients; do not use its tokens")]
    IssuerEquivocation {
        /// The issuer address (0x-hex).
        issuer: String,
        /// The app.
        app: String,
        /// The UTC day number.
        epoch: u32,
        /// How many distinct keys were found.
        keys: usize,
    },
    /// The issuer's key for an epoch was created after that day began although the app had a
    /// key the day before: an honest issuer publishes it the day before; a late key may have
    /// been made for a few users only (to tag them).
    #[error("issuer {issuer} created its key for app {app:?}, epoch {epoch} {late_by_s} s after that day began although the app already had a key the day before; refusing it (a late key can tag its users)")]
    KeyTooLate {
        /// The issuer address (0x-hex).
        issuer: String,
        /// The app.
        app: String,
        /// The UTC day number.
        epoch: u32,
        /// Seconds between the start of the day and the key's creation block.
        late_by_s: u64,
    },
    /// The issuer refused an issuance (HTTP 403) with this reason.
    #[error("the issuer refused to issue tokens: {0}")]
    Refused(String),
    /// The issuer answered something unexpected.
    #[error("issuer protocol error: {0}")]
    Issuer(String),
    /// The issuer could not be reached (directly or through the client's transport).
    #[error("cannot reach the issuer: {0}")]
    Transport(#[from] privsvc_rt::TransportError),
    /// Reading the ledger failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The wallet failed to sign the issuance message.
    #[error(transparent)]
    Wallet(#[from] VaultError),
    /// The token store failed.
    #[error("token store error: {0}")]
    Store(String),
    /// A cryptographic operation failed unexpectedly.
    #[error("blind RSA error: {0}")]
    Crypto(String),
}

impl From<blind_rsa_signatures::Error> for TokenError {
    fn from(e: blind_rsa_signatures::Error) -> Self {
        TokenError::Crypto(e.to_string())
    }
}
