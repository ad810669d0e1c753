//! `browserTokenStore()`: unspent tokens in `localStorage` (key `privsvc:tokens`,
//! docs/API.md §3.6), so they survive the page. Key pins stay in memory with the store (like the
//! memory store's).

use std::sync::Arc;

use privsvc_tokens::{KeyPins, MemoryKeyPins, StoredToken, TokenError, TokenStore};
use wasm_bindgen::JsCast;

/// Tokens in one `localStorage` item, a JSON array of stored tokens.
#[derive(Debug)]
pub struct LocalStorageTokenStore {
    slot: String,
    pins: Arc<MemoryKeyPins>,
}

impl LocalStorageTokenStore {
    /// The store in item `slot` (`privsvc:tokens` by default).
    pub fn new(slot: String) -> Self {
        LocalStorageTokenStore {
            slot,
            pins: Arc::new(MemoryKeyPins::default()),
        }
    }

    fn storage() -> Result<web_sys::Storage, TokenError> {
        let window: web_sys::Window = js_sys::global()
            .dyn_into()
            .map_err(|_| TokenError::Store("localStorage exists only in a page".into()))?;
        window
            .local_storage()
            .ok()
            .flatten()
            .ok_or_else(|| TokenError::Store("localStorage is not available".into()))
    }

    fn read(&self) -> Result<Vec<StoredToken>, TokenError> {
        let text = Self::storage()?
            .get_item(&self.slot)
            .map_err(|_| TokenError::Store("cannot read localStorage".into()))?;
        match text {
            None => Ok(Vec::new()),
            // A damaged item is dropped rather than blocking every write.
            Some(t) => Ok(serde_json::from_str(&t).unwrap_or_default()),
        }
    }

    fn write(&self, tokens: &[StoredToken]) -> Result<(), TokenError> {
        let text = serde_json::to_string(tokens).map_err(|e| TokenError::Store(e.to_string()))?;
        Self::storage()?
            .set_item(&self.slot, &text)
            .map_err(|_| TokenError::Store("cannot write localStorage (quota?)".into()))
    }
}

impl TokenStore for LocalStorageTokenStore {
    fn add(&self, tokens: &[StoredToken]) -> Result<(), TokenError> {
        let mut all = self.read()?;
        for t in tokens {
            if !all.iter().any(|x| x.app == t.app && x.nonce == t.nonce) {
                all.push(t.clone());
            }
        }
        self.write(&all)
    }

    fn list(&self, app: &str) -> Result<Vec<StoredToken>, TokenError> {
        Ok(self.read()?.into_iter().filter(|t| t.app == app).collect())
    }

    fn remove(&self, app: &str, nonce: &str) -> Result<bool, TokenError> {
        let mut all = self.read()?;
        let before = all.len();
        all.retain(|t| !(t.app == app && t.nonce == nonce));
        let removed = all.len() != before;
        if removed {
            self.write(&all)?;
        }
        Ok(removed)
    }

    fn prune(&self, min_epoch: u32) -> Result<(), TokenError> {
        let mut all = self.read()?;
        all.retain(|t| t.epoch >= min_epoch);
        self.write(&all)
    }

    fn key_pins(&self) -> Option<Arc<dyn KeyPins>> {
        Some(self.pins.clone())
    }
}
