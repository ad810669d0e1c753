//! [`FileTokenStore`]: client tokens in one JSON file that survives restarts, with the issuer
//! key pins in an SQLite file and the relayer pins in a JSON file next to it (feature `sqlite`,
//! native only).

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::acceptance::KeyPins;
use crate::error::TokenError;
use crate::message::{epoch_of, now_ms};
use crate::relayer_pins::{FileRelayerPins, RelayerPins};
use crate::sqlite_pins::SqliteKeyPins;
use crate::store::{merge, of_app, remove_token, StoredToken, TokenStore};

/// File format of [`FileTokenStore`].
#[derive(Serialize, Deserialize)]
struct FileContents {
    version: u32,
    tokens: Vec<StoredToken>,
}

const FILE_VERSION: u32 = 1;

/// A store in one JSON file that survives restarts (the analogue of the browser store).
///
/// The file is private: 0600 in a directory created 0700, each change written to a temporary
/// file with an unpredictable name.
///
/// Every change writes a temporary file in the same directory, syncs it, renames it over the
/// store file and syncs the directory, so the file always holds either the old or the new
/// contents. A token is removed durably before it is handed out: after a crash it may be lost,
/// never used twice. One process at a time: the store holds an exclusive lock on `<file>.lock`.
pub struct FileTokenStore {
    path: PathBuf,
    tokens: Mutex<Vec<StoredToken>>,
    pins: Arc<SqliteKeyPins>,
    relayer_pins: Arc<FileRelayerPins>,
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

fn store_err(what: &'static str, path: &Path, e: impl Into<crate::error::BoxError>) -> TokenError {
    TokenError::store(what, Some(path), e)
}

impl FileTokenStore {
    /// Open (or create) the store at `path`. Fails when another process has it open or the
    /// file is not a token store.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, TokenError> {
        let path = path.into();
        let dir = parent_dir(&path);
        private_dir(&dir).map_err(|e| store_err("cannot create directory for", &path, e))?;
        let lock = hold_lock(&path)?;
        let tokens = match std::fs::read(&path) {
            Ok(bytes) => {
                let c: FileContents = serde_json::from_slice(&bytes)
                    .map_err(|e| store_err("not a token store file", &path, e))?;
                if c.version != FILE_VERSION {
                    return Err(store_err(
                        "unsupported token store version in",
                        &path,
                        format!("version {}", c.version),
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
        let relayer_pins = Arc::new(FileRelayerPins::open(Self::relayer_pins_path(&path))?);
        Ok(FileTokenStore {
            path,
            tokens: Mutex::new(tokens),
            pins,
            relayer_pins,
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

    /// The file of the store's relayer pins ([`FileRelayerPins`]):
    /// `<store file>.relayers.json`.
    pub fn relayer_pins_path(path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_os_string();
        name.push(".relayers.json");
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
        // An unpredictable name, created only if absent, readable by the owner alone: nobody
        // can plant a file or a link where the tokens are about to be written.
        let mut tmp_name = self.path.clone().into_os_string();
        tmp_name.push(format!(".tmp-{:032x}", rand::random::<u128>()));
        let tmp = PathBuf::from(tmp_name);
        let result = (|| {
            let mut f = private_file(&tmp)?;
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

/// Creates `dir` (and missing parents) with mode 0700 on Unix.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates `path`, which must not exist, with mode 0600 on Unix.
fn private_file(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
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

    /// In `<store file>.relayers.json`: they survive restarts like the tokens.
    fn relayer_pins(&self) -> Option<Arc<dyn RelayerPins>> {
        Some(self.relayer_pins.clone())
    }
}
