//! Errors of the tokens crate.

use std::path::{Path, PathBuf};

use alloy_primitives::Address;
use privsvc_attributes::AppName;
use privsvc_ledger::LedgerError;
use privsvc_vault::VaultError;

/// Everything that can go wrong creating, verifying, fetching or storing tokens.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// An issuer public key could not be decoded or has the wrong parameters.
    /// The source is the DER or RSA decoder's error, or what is wrong with the key.
    #[error("invalid issuer key: {0}; expected a 2048-bit RSA public key (e = 65537) as SPKI DER")]
    InvalidKey(#[source] BoxError),
    /// A token redemption or a blinded value is malformed (bad hex nonce, bad base64, wrong
    /// length).
    #[error("malformed token: {0}")]
    Malformed(#[source] MalformedToken),
    /// The token signature does not verify under the issuer key for this app and epoch.
    #[error("token signature does not verify for this app, epoch and issuer key")]
    InvalidSignature,
    /// A blind signature from the issuer did not verify (faulty or malicious issuer).
    #[error("the issuer returned a blind signature that does not verify under its published key")]
    BadBlindSignature,
    /// The app name cannot be used in a token message: it is empty or longer than
    /// [`privsvc_attributes::MAX_APP_NAME_BYTES`] (128) bytes.
    #[error("invalid app name of {len} bytes: a token's app name has 1 to 128 bytes")]
    InvalidApp {
        /// The name's length in bytes.
        len: usize,
    },
    /// The issuer has no key on the ledger for this app and epoch.
    #[error("issuer {issuer} has no key on the ledger for app {:?}, epoch {epoch}", .app.as_str())]
    NoIssuerKey {
        /// The issuer address.
        issuer: Address,
        /// The app.
        app: AppName,
        /// The UTC day number.
        epoch: u32,
    },
    /// The issuer published two distinct keys for one app and epoch: both on the ledger, or
    /// one on the ledger now and another pinned when it was accepted earlier (`pinned`).
    #[error("{}", equivocation_message(issuer, app, *epoch, *keys, *pinned))]
    IssuerEquivocation {
        /// The issuer address.
        issuer: Address,
        /// The app.
        app: AppName,
        /// The UTC day number.
        epoch: u32,
        /// How many distinct keys were found.
        keys: usize,
        /// Whether one of them is the key pinned for (issuer, app, epoch) earlier, and the
        /// ledger shows another now.
        pinned: bool,
    },
    /// The issuer's key for an epoch was created after that day began although the app had a
    /// key the day before: an honest issuer publishes it the day before; a late key may have
    /// been made for a few users only (to tag them).
    #[error("issuer {issuer} created its key for app {:?}, epoch {epoch} {late_by_s} s after that day began although the app already had a key the day before; refusing it (a late key can tag its users)", .app.as_str())]
    KeyTooLate {
        /// The issuer address.
        issuer: Address,
        /// The app.
        app: AppName,
        /// The UTC day number.
        epoch: u32,
        /// Seconds between the start of the day and the key's creation block.
        late_by_s: u64,
    },
    /// The issuer answered an error status with this reason (its `{"error"}` text); a 403 is
    /// a refused issuance.
    #[error("{}", refusal_text(*.status, .request, .reason))]
    Refused {
        /// The request answered (`GET /v1/issuer/key`, `POST /v1/tokens/issue`).
        request: &'static str,
        /// The HTTP status.
        status: u16,
        /// The issuer's reason, as it gave it.
        reason: String,
    },
    /// An issuance was asked for no token.
    #[error("ask for at least one token")]
    NoTokensAsked,
    /// An attestation code is good for one request, and more tokens were asked than one
    /// request carries.
    #[error("an attestation code is good for one request of at most {max} tokens, {asked} asked")]
    AttestationCount {
        /// Tokens asked for.
        asked: usize,
        /// Tokens one request carries.
        max: usize,
    },
    /// The issuer's answer does not parse.
    #[error("issuer protocol error: bad {what}: {source}")]
    IssuerAnswer {
        /// The answer (`issuer key response`, `issue response`).
        what: &'static str,
        /// The JSON decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// The issuer's key answer names another issuer, app or epoch than asked.
    #[error("issuer protocol error: the issuer key response names another issuer, app or epoch")]
    IssuerKeyMismatch,
    /// The issuer returned another number of blind signatures than blinded values sent.
    #[error("issuer protocol error: asked for {asked} blind signatures, got {got}")]
    BlindSignatureCount {
        /// Blinded values sent.
        asked: usize,
        /// Blind signatures returned.
        got: usize,
    },
    /// A request to the issuer could not be built.
    #[error("cannot build the {what}: {source}")]
    Request {
        /// The request (`issuer key query`, `issue request`).
        what: &'static str,
        /// The URL parser's or the JSON encoder's error.
        #[source]
        source: BoxError,
    },
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
    #[error("token store error: {what}{}: {source}", path_text(.path))]
    Store {
        /// What failed (`cannot read`, `issuer key pins`, `tokenStore.list`, ...).
        what: &'static str,
        /// The store's file, when it has one.
        path: Option<PathBuf>,
        /// The file system's, SQLite's, the encoder's or the JavaScript store's error.
        #[source]
        source: BoxError,
    },
    /// A cryptographic operation failed unexpectedly.
    #[error("blind RSA error: {step}: {source}")]
    Crypto {
        /// The operation that failed.
        step: &'static str,
        /// The RSA or blind RSA crate's error, or what went wrong.
        #[source]
        source: BoxError,
    },
}

/// What is wrong with a token redemption or a blinded value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MalformedToken {
    /// The nonce does not have 64 characters.
    #[error("nonce must be {expected} hexadecimal characters, got {got}")]
    NonceLength {
        /// Characters given.
        got: usize,
        /// Characters expected (twice the nonce's bytes).
        expected: usize,
    },
    /// The nonce is not hexadecimal.
    #[error("nonce is not hexadecimal: {0}")]
    NonceNotHex(#[source] hex::FromHexError),
    /// The signature is not standard base64.
    #[error("signature is not base64: {0}")]
    SignatureNotBase64(#[source] base64::DecodeError),
    /// The signature does not have the key's size.
    #[error("signature is {got} bytes, expected {expected}")]
    SignatureLength {
        /// Bytes given.
        got: usize,
        /// The key's modulus size in bytes.
        expected: usize,
    },
    /// A blinded value of an issuance is not standard base64.
    #[error("blinded value {index} is not base64: {source}")]
    BlindedNotBase64 {
        /// The value's index in the request.
        index: usize,
        /// The decoder's error.
        #[source]
        source: base64::DecodeError,
    },
    /// A blinded message does not have the key's size.
    #[error("blinded message is {got} bytes, expected {expected}")]
    BlindedLength {
        /// Bytes given.
        got: usize,
        /// The key's modulus size in bytes.
        expected: usize,
    },
    /// A blinded message is not below the key's modulus.
    #[error("blinded message is not below the key's modulus")]
    BlindedNotBelowModulus,
}

/// An error of a crate underneath (blind RSA, RSA, DER, SQLite, the file system, a JavaScript
/// store) kept as a source without its type becoming part of this crate's API.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl TokenError {
    /// A store failure: `what` failed (on the file at `path`, if any) because of `source`.
    pub fn store(what: &'static str, path: Option<&Path>, source: impl Into<BoxError>) -> Self {
        TokenError::Store {
            what,
            path: path.map(Path::to_path_buf),
            source: source.into(),
        }
    }

    /// A cryptographic failure of `step` because of `source`.
    pub fn crypto(step: &'static str, source: impl Into<BoxError>) -> Self {
        TokenError::Crypto {
            step,
            source: source.into(),
        }
    }
}

fn refusal_text(status: u16, request: &str, reason: &str) -> String {
    if status == 403 {
        format!("the issuer refused to issue tokens: {reason}")
    } else {
        format!("issuer protocol error: {request} answered {status}: {reason}")
    }
}

fn path_text(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!(" {}", p.display()),
        None => String::new(),
    }
}

impl From<blind_rsa_signatures::Error> for TokenError {
    fn from(e: blind_rsa_signatures::Error) -> Self {
        TokenError::crypto("blind RSA signatures", e)
    }
}

/// The message of [`TokenError::IssuerEquivocation`]: what the two keys were, what it may mean,
/// and what to do, including the one harmless cause of a pinned key's replacement.
fn equivocation_message(
    issuer: &Address,
    app: &AppName,
    epoch: u32,
    keys: usize,
    pinned: bool,
) -> String {
    let app = app.as_str();
    if pinned {
        format!(
            "issuer {issuer}'s key for app {app:?}, epoch {epoch} on the ledger is not the key pinned for that day when it was first accepted: an issuer that replaces its key may be tagging clients, so its tokens are refused for that day. A ledger that was reset (a devnet redeployed with the same accounts) gives the same error: the pins are then the old ledger's, and the device store that keeps them (the data directory, or the browser's IndexedDB for this site) must be removed"
        )
    } else {
        format!(
            "issuer {issuer} published {keys} distinct keys for app {app:?}, epoch {epoch}: it may be tagging clients; do not use its tokens"
        )
    }
}
