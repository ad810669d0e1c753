//! The device store (docs/PROTOCOL.md §8.7): what a client keeps between sessions on one
//! device, in one place, sealed and authenticated under a key derived from the vault's root:
//! unspent tokens, issuer key pins, relayer pins and the scan cache (with the records this
//! device wrote). It is the client's default natively: one private directory per vault root,
//! chain and project under a data directory ([`default_data_dir`]); in the JS package the
//! browser's IndexedDB plays its part.
//!
//! Each part is a file of its own, its JSON sealed by [`crate::device_seal`] (`"PSVCDEV1" ||
//! part (1 byte) || nonce (12) || AES-256-GCM-SIV(part key, nonce, JSON, aad = "PSVCDEV1" ||
//! part || chain id (8, big-endian) || project)`), as the JS package seals its stores. A file
//! that does not open (another root, altered bytes, a planted file) is deleted with a warning
//! and the part starts empty: never trusted. The scan cache seals itself the same way
//! (`crate::scan_cache`). The directory's name is derived from the key too, so it names no
//! wallet. One process at a time holds a directory (a lock file); clients of one process share
//! it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use alloy_primitives::Address;
use privsvc_tokens::{KeyPins, RelayerPins, StoredToken, TokenError, TokenStore};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::device_seal::{Part, PartSealer};
use crate::error::PrivsvcError;
use crate::scan_cache::FileScanCache;

/// The environment variable that names the data directory.
pub const DATA_DIR_ENV: &str = "PRIVSVC_DATA_DIR";

/// The file of a part.
fn file_of(part: Part) -> &'static str {
    match part {
        Part::Tokens => "tokens.sealed",
        _ => "pins.sealed",
    }
}

/// The data directory of device stores when none is given: `$PRIVSVC_DATA_DIR`, else
/// `$XDG_DATA_HOME/privsvc`, else `$HOME/.local/share/privsvc`; `None` when none of them is set.
pub fn default_data_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(DATA_DIR_ENV) {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_DATA_HOME") {
        return Some(PathBuf::from(dir).join("privsvc"));
    }
    var("HOME").map(|h| {
        PathBuf::from(h)
            .join(".local")
            .join("share")
            .join("privsvc")
    })
}

/// Issuer key pins as the pins part keeps them.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct PinsFile {
    /// `(issuer, app, epoch)` to the pinned SPKI, hex.
    keys: Vec<(Address, String, u32, String)>,
    /// Relayer URL to its account.
    relayers: BTreeMap<String, Address>,
}

/// What became of a device store's parts when it was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Parts that did not open under this key and were discarded (file names).
    pub discarded: Vec<&'static str>,
}

struct Inner {
    dir: PathBuf,
    sealer: PartSealer,
    tokens: Mutex<Vec<StoredToken>>,
    pins: Mutex<PinsFile>,
    _lock: std::fs::File,
}

/// A device store: tokens, key pins, relayer pins and the scan cache of one vault root, chain
/// and project on this device (see the module documentation). Cheap to clone.
#[derive(Clone)]
pub struct DeviceStore {
    inner: Arc<Inner>,
    report: OpenReport,
}

impl std::fmt::Debug for DeviceStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceStore")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

/// The stores open in this process, by directory (clients of one process share one).
fn open_stores() -> &'static Mutex<HashMap<PathBuf, Weak<Inner>>> {
    static OPEN: std::sync::OnceLock<Mutex<HashMap<PathBuf, Weak<Inner>>>> =
        std::sync::OnceLock::new();
    OPEN.get_or_init(|| Mutex::new(HashMap::new()))
}

impl DeviceStore {
    /// Opens (or creates) the store of `store_key` (the vault's scan-cache key) for `project`
    /// on `chain_id` under `data_dir`. Fails when the directory cannot be created or another
    /// process holds it.
    pub fn open(
        data_dir: &Path,
        store_key: &[u8; 32],
        chain_id: u64,
        project: &str,
    ) -> Result<DeviceStore, PrivsvcError> {
        let sealer = PartSealer::new(store_key, chain_id, project);
        let dir = data_dir.join(sealer.store_id());
        let mut open = open_stores().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(inner) = open.get(&dir).and_then(Weak::upgrade) {
            return Ok(DeviceStore {
                inner,
                report: OpenReport::default(),
            });
        }
        crate::private_fs::private_dir(data_dir).map_err(|e| store_error(data_dir, e))?;
        crate::private_fs::private_dir(&dir).map_err(|e| store_error(&dir, e))?;
        let lock = crate::private_fs::lock(&dir.join(".lock")).map_err(|e| {
            PrivsvcError::Store(format!(
                "{}: the device store is in use by another process ({e}); close it, or give this client another data directory or memory stores",
                dir.display()
            ))
        })?;
        let mut report = OpenReport::default();
        let mut inner = Inner {
            dir: dir.clone(),
            sealer,
            tokens: Mutex::new(Vec::new()),
            pins: Mutex::new(PinsFile::default()),
            _lock: lock,
        };
        let tokens: Vec<StoredToken> = inner.load(Part::Tokens, &mut report).unwrap_or_default();
        let pins: PinsFile = inner.load(Part::Pins, &mut report).unwrap_or_default();
        inner.tokens = Mutex::new(tokens);
        inner.pins = Mutex::new(pins);
        let inner = Arc::new(inner);
        open.insert(dir, Arc::downgrade(&inner));
        Ok(DeviceStore { inner, report })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// What became of the parts when the store was opened.
    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    /// The token store part (with the key pins and relayer pins beside it).
    pub fn token_store(&self) -> Arc<dyn TokenStore> {
        Arc::new(self.clone())
    }

    /// The issuer key pins.
    pub fn key_pins(&self) -> Arc<dyn KeyPins> {
        Arc::new(DeviceKeyPins(self.inner.clone()))
    }

    /// The relayer pins.
    pub fn relayer_pins(&self) -> Arc<dyn RelayerPins> {
        Arc::new(DeviceRelayerPins(self.inner.clone()))
    }

    /// The scan cache's file (sealed by the scan cache under the same root's key).
    pub fn scan_cache(&self) -> Arc<dyn crate::scan_cache::ScanCacheStore> {
        Arc::new(FileScanCache::new(self.inner.dir.join("scan.sealed")))
    }
}

fn store_error(path: &Path, e: impl std::fmt::Display) -> PrivsvcError {
    PrivsvcError::Store(format!("{}: {e}", path.display()))
}

impl Inner {
    /// The part's content, when its file exists and opens; a file that does not open is
    /// deleted (with a warning, and noted in `report`).
    fn load<T: for<'de> Deserialize<'de>>(&self, part: Part, report: &mut OpenReport) -> Option<T> {
        let path = self.dir.join(file_of(part));
        let sealed = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(file = file_of(part), error = %e, "a device store file cannot be read; starting it empty");
                return None;
            }
        };
        match self.open_part(part, &sealed) {
            Some(value) => Some(value),
            None => {
                tracing::warn!(
                    file = file_of(part),
                    "a device store file does not open under this vault's key; discarding it"
                );
                report.discarded.push(file_of(part));
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    fn open_part<T: for<'de> Deserialize<'de>>(&self, part: Part, sealed: &[u8]) -> Option<T> {
        let plain = self.sealer.open(part, sealed)?;
        serde_json::from_slice(&plain).ok()
    }

    /// Seals `value` and writes it durably over the part's file.
    fn save<T: Serialize>(&self, part: Part, value: &T) -> Result<(), TokenError> {
        let plain = Zeroizing::new(
            serde_json::to_vec(value).map_err(|e| TokenError::Store(format!("encode: {e}")))?,
        );
        let out = self.sealer.seal(part, &plain);
        let path = self.dir.join(file_of(part));
        crate::private_fs::write_atomically(&path, &out)
            .map_err(|e| TokenError::Store(format!("{}: {e}", path.display())))
    }

    fn tokens(&self) -> std::sync::MutexGuard<'_, Vec<StoredToken>> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pins(&self) -> std::sync::MutexGuard<'_, PinsFile> {
        self.pins.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `change` to a copy of the tokens, writes it durably, then adopts it (memory
    /// never runs ahead of the file).
    fn update_tokens<T>(
        &self,
        change: impl FnOnce(&mut Vec<StoredToken>) -> T,
    ) -> Result<T, TokenError> {
        let mut tokens = self.tokens();
        let mut next = tokens.clone();
        let out = change(&mut next);
        if next != *tokens {
            self.save(Part::Tokens, &next)?;
            *tokens = next;
        }
        Ok(out)
    }

    fn update_pins<T>(&self, change: impl FnOnce(&mut PinsFile) -> T) -> Result<T, TokenError> {
        let mut pins = self.pins();
        let mut next = pins.clone();
        let out = change(&mut next);
        self.save(Part::Pins, &next)?;
        *pins = next;
        Ok(out)
    }
}

impl TokenStore for DeviceStore {
    fn add(&self, tokens: &[StoredToken]) -> Result<(), TokenError> {
        self.inner.update_tokens(|all| {
            for t in tokens {
                if !all.iter().any(|x| x.app == t.app && x.nonce == t.nonce) {
                    all.push(t.clone());
                }
            }
        })
    }

    fn list(&self, app: &str) -> Result<Vec<StoredToken>, TokenError> {
        Ok(self
            .inner
            .tokens()
            .iter()
            .filter(|t| t.app == app)
            .cloned()
            .collect())
    }

    fn remove(&self, app: &str, nonce: &str) -> Result<bool, TokenError> {
        self.inner.update_tokens(|all| {
            let before = all.len();
            all.retain(|t| !(t.app == app && t.nonce == nonce));
            all.len() != before
        })
    }

    fn prune(&self, min_epoch: u32) -> Result<(), TokenError> {
        self.inner
            .update_tokens(|all| all.retain(|t| t.epoch >= min_epoch))
    }

    /// The device store's key pins.
    fn key_pins(&self) -> Option<Arc<dyn KeyPins>> {
        Some(DeviceStore::key_pins(self))
    }

    /// The device store's relayer pins.
    fn relayer_pins(&self) -> Option<Arc<dyn RelayerPins>> {
        Some(DeviceStore::relayer_pins(self))
    }
}

/// The key pins of a device store.
struct DeviceKeyPins(Arc<Inner>);

impl KeyPins for DeviceKeyPins {
    fn get(&self, issuer: Address, app: &str, epoch: u32) -> Result<Option<Vec<u8>>, TokenError> {
        Ok(self
            .0
            .pins()
            .keys
            .iter()
            .find(|(i, a, e, _)| *i == issuer && a == app && *e == epoch)
            .and_then(|(_, _, _, spki)| hex::decode(spki).ok()))
    }

    fn pin(
        &self,
        issuer: Address,
        app: &str,
        epoch: u32,
        spki: &[u8],
    ) -> Result<Vec<u8>, TokenError> {
        if let Some(pinned) = self.get(issuer, app, epoch)? {
            return Ok(pinned);
        }
        // Pins of days no relayer accepts any more are dropped as new ones come.
        let oldest = privsvc_tokens::acceptable_epochs(privsvc_tokens::now_ms())[1];
        self.0.update_pins(|p| {
            p.keys.retain(|(_, _, e, _)| *e >= oldest);
            p.keys
                .push((issuer, app.to_string(), epoch, hex::encode(spki)));
        })?;
        Ok(spki.to_vec())
    }
}

/// The relayer pins of a device store.
struct DeviceRelayerPins(Arc<Inner>);

impl RelayerPins for DeviceRelayerPins {
    fn get(&self, url: &str) -> Result<Option<Address>, TokenError> {
        Ok(self.0.pins().relayers.get(url).copied())
    }

    fn pin(&self, url: &str, account: Address) -> Result<Address, TokenError> {
        if let Some(pinned) = self.get(url)? {
            return Ok(pinned);
        }
        self.0
            .update_pins(|p| *p.relayers.entry(url.to_string()).or_insert(account))
    }

    fn unpin(&self, url: &str) -> Result<bool, TokenError> {
        if self.get(url)?.is_none() {
            return Ok(false);
        }
        self.0.update_pins(|p| p.relayers.remove(url).is_some())
    }

    fn list(&self) -> Result<Vec<(String, Address)>, TokenError> {
        Ok(self
            .0
            .pins()
            .relayers
            .iter()
            .map(|(u, a)| (u.clone(), *a))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(n: u8) -> StoredToken {
        StoredToken {
            app: "a".into(),
            epoch: privsvc_tokens::epoch_of(privsvc_tokens::now_ms()),
            nonce: hex::encode([n; 32]),
            signature: "sig".into(),
            obtained_ms: 1,
        }
    }

    #[test]
    fn parts_survive_a_reopen_sealed_and_only_under_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let issuer = Address::repeat_byte(3);
        let relayer = Address::repeat_byte(4);
        let path;
        {
            let store = DeviceStore::open(dir.path(), &[1; 32], 7, "notes").unwrap();
            path = store.dir().to_path_buf();
            store.add(&[token(1), token(2)]).unwrap();
            assert!(store.remove("a", &token(1).nonce).unwrap());
            store.key_pins().pin(issuer, "a", 5, b"spki").unwrap();
            store
                .relayer_pins()
                .pin("https://r.example", relayer)
                .unwrap();
            // A second client of this process shares it.
            let again = DeviceStore::open(dir.path(), &[1; 32], 7, "notes").unwrap();
            assert_eq!(again.list("a").unwrap().len(), 1);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o700);
            assert_eq!(mode(&path.join("tokens.sealed")), 0o600);
            assert_eq!(mode(&path.join("pins.sealed")), 0o600);
        }
        for file in ["tokens.sealed", "pins.sealed"] {
            let bytes = std::fs::read(path.join(file)).unwrap();
            assert!(!bytes.windows(3).any(|w| w == b"sig" || w == b"r.e"));
        }
        let store = DeviceStore::open(dir.path(), &[1; 32], 7, "notes").unwrap();
        assert!(store.open_report().discarded.is_empty());
        assert_eq!(store.list("a").unwrap(), vec![token(2)]);
        assert_eq!(
            store.key_pins().get(issuer, "a", 5).unwrap().unwrap(),
            b"spki"
        );
        assert_eq!(
            store.relayer_pins().get("https://r.example").unwrap(),
            Some(relayer)
        );
        // Another project or chain is another directory; another key too.
        assert_ne!(
            DeviceStore::open(dir.path(), &[1; 32], 8, "notes")
                .unwrap()
                .dir(),
            store.dir()
        );
        drop(store);

        // A planted or altered file is discarded, never trusted.
        let pins = path.join("pins.sealed");
        let mut bytes = std::fs::read(&pins).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&pins, &bytes).unwrap();
        let store = DeviceStore::open(dir.path(), &[1; 32], 7, "notes").unwrap();
        assert_eq!(store.open_report().discarded, vec!["pins.sealed"]);
        assert_eq!(store.relayer_pins().get("https://r.example").unwrap(), None);
        assert_eq!(
            store.list("a").unwrap(),
            vec![token(2)],
            "the other part is kept"
        );
    }
}
