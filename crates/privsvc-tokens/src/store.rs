//! Client token stores: where unspent tokens wait. [`memory_store`] keeps them in memory;
//! [`FileTokenStore`] keeps them in one JSON file, rewritten atomically on every change.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::acceptance::{KeyPins, MemoryKeyPins, SqliteKeyPins};
use crate::error::TokenError;
use crate::message::{epoch_of, now_ms};
use crate::protocol::TokenRedemption;

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
pub trait TokenStore: Send + Sync {
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
}

fn merge(into: &mut Vec<StoredToken>, tokens: &[StoredToken]) {
    for t in tokens {
        if !into.iter().any(|x| x.app == t.app && x.nonce == t.nonce) {
            into.push(t.clone());
        }
    }
}

/// The tokens of `app` in `all`.
fn of_app(all: &[StoredToken], app: &str) -> Vec<StoredToken> {
    all.iter().filter(|t| t.app == app).cloned().collect()
}

/// Removes the token (`app`, `nonce`) from `all`; whether it was there.
fn remove_token(all: &mut Vec<StoredToken>, app: &str, nonce: &str) -> bool {
    let before = all.len();
    all.retain(|t| !(t.app == app && t.nonce == nonce));
    all.len() != before
}

/// A store in memory (lost when the process ends).
#[derive(Default)]
pub struct MemoryTokenStore {
    tokens: Mutex<Vec<StoredToken>>,
    pins: Arc<MemoryKeyPins>,
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
}

/// File format of [`FileTokenStore`].
#[derive(Serialize, Deserialize)]
struct FileContents {
    version: u32,
    tokens: Vec<StoredToken>,
}

const FILE_VERSION: u32 = 1;

/// A store in one JSON file that survives restarts (the analogue of the browser store).
///
/// Every change writes a temporary file in the same directory, syncs it, renames it over the
/// store file and syncs the directory, so the file always holds either the old or the new
/// contents. A token is removed durably before it is handed out: after a crash it may be lost,
/// never used twice. One process at a time: the store holds an exclusive lock on `<file>.lock`.
pub struct FileTokenStore {
    path: PathBuf,
    tokens: Mutex<Vec<StoredToken>>,
    pins: Arc<SqliteKeyPins>,
    _lock: Mutex<rusqlite::Connection>,
}

impl std::fmt::Debug for FileTokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileTokenStore")
            .field("path", &self.path)
            .field("tokens", &self.lock().len())
            .finish()
    }
}

fn store_err(what: &str, path: &Path, e: impl std::fmt::Display) -> TokenError {
    TokenError::Store(format!("{what} {}: {e}", path.display()))
}

impl FileTokenStore {
    /// Open (or create) the store at `path`. Fails when another process has it open or the
    /// file is not a token store.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, TokenError> {
        let path = path.into();
        let dir = parent_dir(&path);
        std::fs::create_dir_all(&dir)
            .map_err(|e| store_err("cannot create directory for", &path, e))?;
        let lock = hold_lock(&path)?;
        let tokens = match std::fs::read(&path) {
            Ok(bytes) => {
                let c: FileContents = serde_json::from_slice(&bytes)
                    .map_err(|e| store_err("not a token store file", &path, e))?;
                if c.version != FILE_VERSION {
                    return Err(store_err(
                        "unsupported token store version in",
                        &path,
                        c.version,
                    ));
                }
                c.tokens
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(store_err("cannot read", &path, e)),
        };
        let pins = Arc::new(SqliteKeyPins::open(
            &Self::pins_path(&path),
            epoch_of(now_ms()),
        )?);
        Ok(FileTokenStore {
            path,
            tokens: Mutex::new(tokens),
            pins,
            _lock: Mutex::new(lock),
        })
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file of the store's issuer key pins: `<store file>.pins.sqlite`.
    pub fn pins_path(path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_os_string();
        name.push(".pins.sqlite");
        PathBuf::from(name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<StoredToken>> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Apply `change` to a copy, write it durably, then adopt it (memory never runs ahead of
    /// the file).
    fn update<T>(&self, change: impl FnOnce(&mut Vec<StoredToken>) -> T) -> Result<T, TokenError> {
        let mut tokens = self.lock();
        let mut next = tokens.clone();
        let out = change(&mut next);
        if next != *tokens {
            self.write(&next)?;
            *tokens = next;
        }
        Ok(out)
    }

    fn write(&self, tokens: &[StoredToken]) -> Result<(), TokenError> {
        let body = serde_json::to_vec(&FileContents {
            version: FILE_VERSION,
            tokens: tokens.to_vec(),
        })
        .map_err(|e| store_err("cannot encode", &self.path, e))?;
        let mut tmp_name = self.path.clone().into_os_string();
        tmp_name.push(format!(".tmp-{}", std::process::id()));
        let tmp = PathBuf::from(tmp_name);
        let result = (|| {
            let mut f = File::create(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
            drop(f);
            std::fs::rename(&tmp, &self.path)?;
            File::open(parent_dir(&self.path))?.sync_all()
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(|e| store_err("cannot write", &self.path, e))
    }
}

/// Hold an exclusive lock on `<path>.lock` for as long as the returned connection lives.
///
/// The lock is SQLite's (POSIX advisory locks, released by the OS when the process dies), taken
/// with an exclusive transaction that is never committed; a second opener, in this or another
/// process, gets "database is locked".
fn hold_lock(path: &Path) -> Result<rusqlite::Connection, TokenError> {
    let mut lock_name = path.to_path_buf().into_os_string();
    lock_name.push(".lock");
    let lock_err = |e: rusqlite::Error| {
        store_err("token store is in use by another store or process", path, e)
    };
    let conn = rusqlite::Connection::open(PathBuf::from(lock_name)).map_err(lock_err)?;
    conn.busy_timeout(std::time::Duration::ZERO)
        .map_err(lock_err)?;
    conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
        .map_err(lock_err)?;
    conn.execute_batch("BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS held (x INTEGER);")
        .map_err(lock_err)?;
    Ok(conn)
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

impl TokenStore for FileTokenStore {
    fn add(&self, tokens: &[StoredToken]) -> Result<(), TokenError> {
        self.update(|all| merge(all, tokens))
    }

    fn list(&self, app: &str) -> Result<Vec<StoredToken>, TokenError> {
        Ok(of_app(&self.lock(), app))
    }

    fn remove(&self, app: &str, nonce: &str) -> Result<bool, TokenError> {
        self.update(|all| remove_token(all, app, nonce))
    }

    fn prune(&self, min_epoch: u32) -> Result<(), TokenError> {
        self.update(|all| all.retain(|t| t.epoch >= min_epoch))
    }

    /// In `<store file>.pins.sqlite`: they survive restarts like the tokens.
    fn key_pins(&self) -> Option<Arc<dyn KeyPins>> {
        Some(self.pins.clone())
    }
}
