//! Client token stores: where unspent tokens wait. [`memory_store`] keeps them in memory;
//! `FileTokenStore` (feature `sqlite`, in `file_store`) keeps them in one JSON file, rewritten
//! atomically on every change.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::acceptance::{KeyPins, MemoryKeyPins};
use crate::error::TokenError;
use crate::protocol::TokenRedemption;
use crate::relayer_pins::{MemoryRelayerPins, RelayerPins};

/// An unspent token as a store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredToken {
    /// The app it was issued for.
    pub app: String,
    /// UTC day number it was issued for.
    pub epoch: u32,
    /// Nonce, 64 hex characters.
    pub nonce: String,
    /// Signature, standard base64.
    pub signature: String,
    /// When the client obtained it (epoch milliseconds); 0 = old enough for any minimum age.
    pub obtained_ms: u64,
}

impl StoredToken {
    /// The redemption to attach to a submission.
    pub fn redemption(&self) -> TokenRedemption {
        TokenRedemption {
            epoch: self.epoch,
            nonce: self.nonce.clone(),
            signature: self.signature.clone(),
        }
    }

    /// A stored token from a redemption.
    pub fn from_redemption(app: &str, token: &TokenRedemption, obtained_ms: u64) -> Self {
        StoredToken {
            app: app.to_string(),
            epoch: token.epoch,
            nonce: token.nonce.clone(),
            signature: token.signature.clone(),
            obtained_ms,
        }
    }
}

/// Storage of unspent tokens. Implementations must make [`TokenStore::remove`] atomic: of two
/// concurrent removals of one token exactly one returns `true`, so a token is handed out once.
pub trait TokenStore: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// Add tokens (a token already present, same app and nonce, is not added twice).
    fn add(&self, tokens: &[StoredToken]) -> Result<(), TokenError>;
    /// All tokens of `app`.
    fn list(&self, app: &str) -> Result<Vec<StoredToken>, TokenError>;
    /// Remove the token of `app` with `nonce`; `true` when it was there. Durable before it
    /// returns.
    fn remove(&self, app: &str, nonce: &str) -> Result<bool, TokenError>;
    /// Drop every token of an epoch before `min_epoch` (no relayer accepts them any more).
    fn prune(&self, min_epoch: u32) -> Result<(), TokenError>;
    /// The issuer key pins that go with this store (as persistent as the store), if it has
    /// any; a client uses them unless it is given others.
    fn key_pins(&self) -> Option<Arc<dyn KeyPins>> {
        None
    }
    /// The relayer pins (url -> account, [`RelayerPins`]) that go with this store (as
    /// persistent as the store), if it has any; a client uses them unless it is given others.
    fn relayer_pins(&self) -> Option<Arc<dyn RelayerPins>> {
        None
    }
}

/// Unspent tokens of `app` in `store` for a day relayers accept now.
pub fn available_in(store: &dyn TokenStore, app: &str) -> Result<usize, TokenError> {
    let epochs = crate::acceptable_epochs(crate::now_ms());
    Ok(store
        .list(app)?
        .iter()
        .filter(|t| epochs.contains(&t.epoch))
        .count())
}

pub(crate) fn merge(into: &mut Vec<StoredToken>, tokens: &[StoredToken]) {
    for t in tokens {
        if !into.iter().any(|x| x.app == t.app && x.nonce == t.nonce) {
            into.push(t.clone());
        }
    }
}

/// The tokens of `app` in `all`.
pub(crate) fn of_app(all: &[StoredToken], app: &str) -> Vec<StoredToken> {
    all.iter().filter(|t| t.app == app).cloned().collect()
}

/// Removes the token (`app`, `nonce`) from `all`; whether it was there.
pub(crate) fn remove_token(all: &mut Vec<StoredToken>, app: &str, nonce: &str) -> bool {
    let before = all.len();
    all.retain(|t| !(t.app == app && t.nonce == nonce));
    all.len() != before
}

/// A store in memory (lost when the process ends).
#[derive(Default)]
pub struct MemoryTokenStore {
    tokens: Mutex<Vec<StoredToken>>,
    pins: Arc<MemoryKeyPins>,
    relayer_pins: Arc<MemoryRelayerPins>,
}

impl std::fmt::Debug for MemoryTokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTokenStore")
            .field("tokens", &self.lock().len())
            .finish()
    }
}

/// A new in-memory store.
pub fn memory_store() -> Arc<dyn TokenStore> {
    Arc::new(MemoryTokenStore::default())
}

impl MemoryTokenStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<StoredToken>> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl TokenStore for MemoryTokenStore {
    fn add(&self, tokens: &[StoredToken]) -> Result<(), TokenError> {
        merge(&mut self.lock(), tokens);
        Ok(())
    }

    fn list(&self, app: &str) -> Result<Vec<StoredToken>, TokenError> {
        Ok(of_app(&self.lock(), app))
    }

    fn remove(&self, app: &str, nonce: &str) -> Result<bool, TokenError> {
        Ok(remove_token(&mut self.lock(), app, nonce))
    }

    fn prune(&self, min_epoch: u32) -> Result<(), TokenError> {
        self.lock().retain(|t| t.epoch >= min_epoch);
        Ok(())
    }

    /// In memory, like the tokens: shared by every client given this store.
    fn key_pins(&self) -> Option<Arc<dyn KeyPins>> {
        Some(self.pins.clone())
    }

    /// In memory, like the tokens: shared by every client given this store.
    fn relayer_pins(&self) -> Option<Arc<dyn RelayerPins>> {
        Some(self.relayer_pins.clone())
    }
}

#[cfg(feature = "sqlite")]
pub use crate::file_store::FileTokenStore;
