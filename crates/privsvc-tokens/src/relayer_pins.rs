//! Which account a relayer URL belongs to, as a client first saw it
//! (docs/PROTOCOL.md §8.6).
//!
//! A relayer URL belongs to the one account whose live heartbeats name it. Anyone can publish a
//! heartbeat naming any URL, so a client pins `url -> account` the first time it uses a relayer
//! and, once pinned, ignores other accounts' heartbeats for that URL: a stranger's heartbeat can
//! neither take over nor block a relayer the client already knows. Pins live beside the token
//! store ([`crate::TokenStore::relayer_pins`]): in memory with the memory store, in a file next
//! to a file store ([`FileRelayerPins`], native only).
//!
//! URLs are compared as given: callers pass them normalised (the client uses
//! `privsvc_ohttp::normalize_relayer_url`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use alloy_primitives::Address;

use crate::error::TokenError;

/// The account pinned per relayer URL. Object safe: `Arc<dyn RelayerPins>`.
pub trait RelayerPins: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// The account pinned for `url`, if any.
    fn get(&self, url: &str) -> Result<Option<Address>, TokenError>;
    /// Pin `account` for `url` unless a pin exists; returns the account pinned afterwards (the
    /// first one wins). Durable before it returns.
    fn pin(&self, url: &str, account: Address) -> Result<Address, TokenError>;
    /// Remove the pin of `url` (for a relayer that really moved to another account); whether
    /// there was one. The next use pins again.
    fn unpin(&self, url: &str) -> Result<bool, TokenError>;
    /// Every pin, ordered by URL.
    fn list(&self) -> Result<Vec<(String, Address)>, TokenError>;
}

/// Relayer pins in memory (forgotten on exit; the pins of the memory token store).
#[derive(Debug, Default)]
pub struct MemoryRelayerPins {
    pins: Mutex<BTreeMap<String, Address>>,
}

impl MemoryRelayerPins {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Address>> {
        self.pins.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl RelayerPins for MemoryRelayerPins {
    fn get(&self, url: &str) -> Result<Option<Address>, TokenError> {
        Ok(self.lock().get(url).copied())
    }

    fn pin(&self, url: &str, account: Address) -> Result<Address, TokenError> {
        Ok(*self.lock().entry(url.to_string()).or_insert(account))
    }

    fn unpin(&self, url: &str) -> Result<bool, TokenError> {
        Ok(self.lock().remove(url).is_some())
    }

    fn list(&self) -> Result<Vec<(String, Address)>, TokenError> {
        Ok(self.lock().iter().map(|(u, a)| (u.clone(), *a)).collect())
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub use self::file::FileRelayerPins;

#[cfg(not(target_arch = "wasm32"))]
mod file {
    use std::collections::BTreeMap;
    use std::fs::File;
    use std::io::Write as _;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    use alloy_primitives::Address;
    use rand::RngCore as _;
    use serde::{Deserialize, Serialize};

    use super::RelayerPins;
    use crate::error::TokenError;

    /// File format of [`FileRelayerPins`].
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct FileContents {
        version: u32,
        relayers: BTreeMap<String, Address>,
    }

    const FILE_VERSION: u32 = 1;

    /// Relayer pins in one JSON file `{"version": 1, "relayers": {url: account}}` that
    /// survives restarts (native only; `FileTokenStore` keeps its pins in
    /// `<store file>.relayers.json`).
    ///
    /// The file is created with mode 0600 and a missing directory with mode 0700 (Unix). Every
    /// change writes a new file under an unpredictable name (`.<file name>.<32 random hex>.tmp`,
    /// created exclusively, 0600) in the same directory, syncs it, renames it over the pin file
    /// and syncs the directory, so the file always holds the old or the new pins, and nobody
    /// can prepare (or link) the temporary file in advance. One process at a time, like the
    /// token store it sits beside.
    pub struct FileRelayerPins {
        path: PathBuf,
        pins: Mutex<BTreeMap<String, Address>>,
    }

    impl std::fmt::Debug for FileRelayerPins {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("FileRelayerPins")
                .field("path", &self.path)
                .field("pins", &self.lock().len())
                .finish()
        }
    }

    fn store_err(
        what: &'static str,
        path: &Path,
        e: impl Into<crate::error::BoxError>,
    ) -> TokenError {
        TokenError::store(what, Some(path), e)
    }

    fn parent_dir(path: &Path) -> PathBuf {
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    impl FileRelayerPins {
        /// Open (or create on the first pin) the pin file at `path`. Fails when the file
        /// exists and is not a relayer pin file, or its directory cannot be created.
        pub fn open(path: impl Into<PathBuf>) -> Result<Self, TokenError> {
            let path = path.into();
            let dir = parent_dir(&path);
            if !dir.is_dir() {
                let mut builder = std::fs::DirBuilder::new();
                builder.recursive(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::DirBuilderExt as _;
                    builder.mode(0o700);
                }
                builder.create(&dir).map_err(|e| {
                    store_err("relayer pins: cannot create the directory of", &path, e)
                })?;
            }
            let pins = match std::fs::read(&path) {
                Ok(bytes) => {
                    let c: FileContents = serde_json::from_slice(&bytes)
                        .map_err(|e| store_err("relayer pins: not a relayer pin file", &path, e))?;
                    if c.version != FILE_VERSION {
                        return Err(store_err(
                            "relayer pins: unsupported version in",
                            &path,
                            format!("version {}", c.version),
                        ));
                    }
                    c.relayers
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
                Err(e) => return Err(store_err("relayer pins: cannot read", &path, e)),
            };
            Ok(FileRelayerPins {
                path,
                pins: Mutex::new(pins),
            })
        }

        /// The pin file.
        pub fn path(&self) -> &Path {
            &self.path
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Address>> {
            self.pins.lock().unwrap_or_else(|p| p.into_inner())
        }

        /// Apply `change` to a copy, write it durably, then adopt it.
        fn update<T>(
            &self,
            change: impl FnOnce(&mut BTreeMap<String, Address>) -> T,
        ) -> Result<T, TokenError> {
            let mut pins = self.lock();
            let mut next = pins.clone();
            let out = change(&mut next);
            if next != *pins {
                self.write(&next)?;
                *pins = next;
            }
            Ok(out)
        }

        fn write(&self, pins: &BTreeMap<String, Address>) -> Result<(), TokenError> {
            let body = serde_json::to_vec(&FileContents {
                version: FILE_VERSION,
                relayers: pins.clone(),
            })
            .map_err(|e| store_err("relayer pins: cannot encode", &self.path, e))?;
            let dir = parent_dir(&self.path);
            let name = self
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "relayer-pins".into());
            let mut random = [0u8; 16];
            rand::rngs::OsRng.fill_bytes(&mut random);
            let tmp = dir.join(format!(".{name}.{}.tmp", hex::encode(random)));
            let result = (|| {
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::OpenOptionsExt as _;
                    options.mode(0o600);
                }
                let mut f = options.open(&tmp)?;
                f.write_all(&body)?;
                f.sync_all()?;
                drop(f);
                std::fs::rename(&tmp, &self.path)?;
                File::open(&dir)?.sync_all()
            })();
            if result.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            result.map_err(|e| store_err("relayer pins: cannot write", &self.path, e))
        }
    }

    impl RelayerPins for FileRelayerPins {
        fn get(&self, url: &str) -> Result<Option<Address>, TokenError> {
            Ok(self.lock().get(url).copied())
        }

        fn pin(&self, url: &str, account: Address) -> Result<Address, TokenError> {
            self.update(|pins| *pins.entry(url.to_string()).or_insert(account))
        }

        fn unpin(&self, url: &str) -> Result<bool, TokenError> {
            self.update(|pins| pins.remove(url).is_some())
        }

        fn list(&self) -> Result<Vec<(String, Address)>, TokenError> {
            Ok(self.lock().iter().map(|(u, a)| (u.clone(), *a)).collect())
        }
    }
}
