//! `PrivsvcError`: everything the client can fail with, with messages a developer can act on.

use std::path::PathBuf;

use alloy_primitives::Address;
use privsvc_attributes::{AppName, InvalidAppName};
use privsvc_fingerprint::CheckWarning;

/// Errors of the privsvc client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrivsvcError {
    /// No relayer could be used at all (none configured, none discovered, none reachable).
    #[error("no relayer available: {reason}; pass relayer URLs with `relayers(...)` or check that relayers publish heartbeats on this ledger")]
    NoRelayerAvailable {
        /// Why none was usable.
        reason: String,
    },
    /// The record was submitted to every usable relayer and none wrote it (and it is not on the
    /// ledger).
    #[error("every relayer failed to write the record ({}); nothing was written, retry later or add relayers", .attempts.join("; "))]
    AllRelayersFailed {
        /// One line per attempt: relayer URL and what went wrong.
        attempts: Vec<String>,
    },
    /// A relayer refused the record as malformed (HTTP 400); another relayer would refuse it too.
    #[error("relayer {relayer} refused the record ({status}): {message}")]
    Rejected {
        /// The relayer URL.
        relayer: String,
        /// The HTTP status.
        status: u16,
        /// The relayer's answer.
        message: String,
    },
    /// `strict` mode is on and `check()` returned warnings; nothing was sent.
    #[error("strict mode refused the write because of {} fingerprinting warning(s): {}; coarsen the values or turn strict off", .warnings.len(), warning_codes(.warnings))]
    StrictRefusal {
        /// The warnings that caused the refusal.
        warnings: Vec<CheckWarning>,
    },
    /// Attribute names or values are not acceptable; nothing was sent.
    #[error("invalid attributes: {}", problems_text(.problems))]
    InvalidAttributes {
        /// Every problem found, each naming its attribute.
        problems: Vec<privsvc_attributes::AttributeError>,
    },
    /// `prove_ownership` was asked about an entity that is not one of the user's records.
    #[error("entity {entity_key} is not one of your records (or it expired); call my_entities() to see the keys you own")]
    UnknownRecord {
        /// The entity key asked for.
        entity_key: alloy_primitives::B256,
    },
    /// The wallet gave two different derivation signatures.
    #[error("the wallet gave two different signatures for the key derivation message; use a deterministic (RFC 6979) wallet or a random-root vault (KeyVault::random)")]
    NonDeterministicWallet,
    /// The wallet is a smart-contract account.
    #[error("the wallet is a smart-contract account, whose signatures cannot derive keys; use an externally owned account or a random-root vault (KeyVault::random)")]
    SmartContractWallet,
    /// The token issuer published two different keys for one app and day: both on the ledger,
    /// or one on the ledger and another this device pinned earlier (`pinned`).
    #[error("{}", equivocation_message(issuer, app, *epoch, *pinned))]
    IssuerEquivocation {
        /// The issuer address.
        issuer: Address,
        /// The app.
        app: AppName,
        /// The UTC day number.
        epoch: u32,
        /// Whether one of the keys is the one this device pinned for that day, and the ledger
        /// shows another now.
        pinned: bool,
    },
    /// Every relayer that could take the record requires a token, and none is ripe (at least
    /// `token_min_age_ms` old) within the wait bound.
    #[error("no token for app {:?} is ripe yet (a token is spent only once `token_min_age_ms` old, so the issuer cannot tie it to this write); retry later, prefetch tokens with TokenWallet::prefetch_later, or add a relayer that requires none", .app.as_str())]
    NoRipeToken {
        /// The app.
        app: AppName,
    },
    /// `check_rarity` was called on a session whose listing carries no attribute values: before
    /// the session's attribute listing (its first tail), or on a session built with `rarity_k`
    /// 0; nothing is listed on demand.
    #[error("the session's listing carries no attribute values yet, so rarity cannot be counted: the attribute listing runs at the session's first tail (within one tail interval of its start); try again after it, and build the client with rarity_k above 0")]
    RarityUnavailable,
    /// The client's app is not an app name (1 to 128 bytes of UTF-8).
    #[error("invalid app: {0}; pass an app name of 1 to 128 bytes to ClientOptions::new")]
    InvalidApp(#[from] InvalidAppName),
    /// The client was configured inconsistently.
    #[error("invalid client configuration: {0}")]
    Config(String),

    /// The device store (tokens, pins, scan cache kept between sessions) cannot be opened.
    #[error("device store: {}: {source}", path.display())]
    Store {
        /// The directory that cannot be made.
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// The device store is locked by another process (or another store of this one).
    #[error("device store: {}: the device store is in use by another process ({source}); close it, or give this client another data directory or memory stores", dir.display())]
    StoreInUse {
        /// The store's directory.
        dir: PathBuf,
        /// The lock's error.
        #[source]
        source: std::io::Error,
    },
    /// The scan cache's store failed (the session goes on without it).
    #[error("scan cache: {}{source}", path_prefix(.path))]
    ScanCache {
        /// The cache's file, when it has one.
        path: Option<PathBuf>,
        /// The file system's error, or a JavaScript store's (its own words:
        /// `source: "quota exceeded".into()`).
        #[source]
        source: BoxError,
    },
    /// The requested expiry cannot be used.
    #[error("invalid expiry: {0}")]
    Expiry(#[source] privsvc_envelope::EnvelopeError),
    /// A key vault operation failed.
    #[error("key vault: {0}")]
    Vault(#[source] privsvc_vault::VaultError),
    /// Reading the ledger failed.
    #[error("ledger: {0}")]
    Ledger(#[from] privsvc_ledger::LedgerError),
    /// A transport (HTTP or OHTTP) failure; an OHTTP one carries its `privsvc_ohttp::OhttpError`
    /// as the source.
    #[error("transport: {0}")]
    Transport(#[from] privsvc_ohttp::TransportError),
    /// The vault gave an ownership proof a signature that does not verify (high `s`, or not
    /// the record's owner's).
    #[error("ownership proof: {0}")]
    ProofSignature(#[source] privsvc_vault::ProofSignError),
    /// Fetching or using rate-limit tokens failed.
    #[error("tokens: {0}")]
    Tokens(#[source] privsvc_tokens::TokenError),
    /// The token issuer a relayer names cannot be used: no issuer named, a malformed address or
    /// URL, or no live heartbeat of the issuer naming that URL (nothing was sent to it).
    #[error("the relayer's token issuer cannot be used: {0}")]
    IssuerNotUsable(#[source] UnusableIssuer),
    /// A relayer answered something that does not follow the protocol.
    #[error("relayer {relayer} answered an unexpected response: {message}")]
    Protocol {
        /// The relayer URL.
        relayer: String,
        /// What was wrong.
        message: String,
    },
}

/// Why the token issuer a relayer names cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UnusableIssuer {
    /// The relayer requires tokens but names no issuer (or no issuer URL).
    #[error("the relayer requires tokens but names no issuer")]
    NotNamed,
    /// The relayer's `issuer` is not an address.
    #[error("the relayer's issuer address is malformed: {0}")]
    BadAddress(#[source] alloy_primitives::hex::FromHexError),
    /// The relayer's `issuerUrl` is not an absolute http(s) URL.
    #[error("the relayer's issuerUrl is not usable: {0}")]
    BadUrl(#[source] privsvc_ohttp::TransportError),
    /// No live heartbeat of the issuer names that URL.
    #[error("issuer {issuer} has no live heartbeat naming the relayer's issuerUrl {url}; no token is requested from it")]
    NoHeartbeat {
        /// The issuer the relayer names.
        issuer: Address,
        /// The issuer URL the relayer names.
        url: privsvc_ohttp::RelayerUrl,
    },
}

/// An error of a store or a crate underneath kept as a source without its type becoming part
/// of this crate's API.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn path_prefix(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!("{}: ", p.display()),
        None => String::new(),
    }
}

fn problems_text(problems: &[privsvc_attributes::AttributeError]) -> String {
    problems
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

fn warning_codes(warnings: &[CheckWarning]) -> String {
    warnings
        .iter()
        .map(|w| w.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl From<privsvc_vault::VaultError> for PrivsvcError {
    fn from(e: privsvc_vault::VaultError) -> Self {
        match e {
            privsvc_vault::VaultError::NonDeterministicWallet => Self::NonDeterministicWallet,
            privsvc_vault::VaultError::SmartContractWallet => Self::SmartContractWallet,
            other => Self::Vault(other),
        }
    }
}

impl From<privsvc_ohttp::OhttpError> for PrivsvcError {
    /// An OHTTP failure (a relay's, a gateway key's, a heartbeat lookup's) is a transport one.
    fn from(e: privsvc_ohttp::OhttpError) -> Self {
        Self::Transport(e.into())
    }
}

impl From<privsvc_tokens::TokenError> for PrivsvcError {
    fn from(e: privsvc_tokens::TokenError) -> Self {
        match e {
            privsvc_tokens::TokenError::IssuerEquivocation {
                issuer,
                app,
                epoch,
                pinned,
                ..
            } => Self::IssuerEquivocation {
                issuer,
                app,
                epoch,
                pinned,
            },
            other => Self::Tokens(other),
        }
    }
}

/// The message of [`PrivsvcError::IssuerEquivocation`]: what the two keys were, what to do, and
/// the one harmless cause of a pinned key's replacement (a reset ledger).
fn equivocation_message(issuer: &Address, app: &AppName, epoch: u32, pinned: bool) -> String {
    let app = app.as_str();
    if pinned {
        format!(
            "token issuer {issuer}'s key for app {app:?} on day {epoch} is not the key this device pinned for that day: an issuer that replaces its key may be tagging users, so its tokens are refused for that day: use another relayer or issuer. A ledger that was reset (a devnet redeployed with the same accounts) gives the same error: the pins are then the old ledger's; remove this device's store (the data directory, or the site's IndexedDB in a browser)"
        )
    } else {
        format!(
            "token issuer {issuer} published two different keys for app {app:?} on day {epoch}; it may be tagging users, so its tokens are refused: use another relayer or issuer"
        )
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn an_unusable_issuer_keeps_its_cause() {
        let bad_address = "0x12".parse::<Address>().unwrap_err();
        let e = PrivsvcError::IssuerNotUsable(UnusableIssuer::BadAddress(bad_address));
        assert!(e.source().and_then(|s| s.source()).is_some(), "{e}");
        let url = privsvc_ohttp::RelayerUrl::parse("https://issuer.example/").unwrap();
        let e = PrivsvcError::IssuerNotUsable(UnusableIssuer::NoHeartbeat {
            issuer: Address::repeat_byte(0x11),
            url,
        });
        assert_eq!(
            e.to_string(),
            "the relayer's token issuer cannot be used: issuer 0x1111111111111111111111111111111111111111 \
             has no live heartbeat naming the relayer's issuerUrl https://issuer.example; no token is \
             requested from it"
        );
    }
}
