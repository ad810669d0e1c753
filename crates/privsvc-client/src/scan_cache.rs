//! The persisted scan cache (docs/PROTOCOL.md §8.7): the session's listing kept between
//! sessions, sealed under the vault's scan-cache key, so that a returning session lists only the
//! records created since its resume block.
//!
//! The resume block is coarse and public: the last multiple of
//! [`ClientOptions::scan_cache_resume_blocks`](crate::ClientOptions::scan_cache_resume_blocks)
//! (default [`DEFAULT_RESUME_BLOCKS`], an hour of 2 s blocks) at or below the block the saving
//! session had listed. The cache keeps only the records created up to it, so every returning user
//! whose last session saved within the same hour resumes with the same listing query: the RPC
//! cannot tell them apart by where they resume.
//!
//! Sealed form: `"PSVCSCAN" || version (1 byte) || nonce (12) || AES-256-GCM-SIV(key, nonce,
//! snapshot, aad = "PSVCSCAN" || version || chain id (8, big-endian) || project)`. A cache that
//! does not open (another root, another chain or project, a version change, corruption) is
//! discarded, never trusted.

use std::sync::Arc;

use aes_gcm_siv::aead::{Aead, KeyInit, Payload};
use aes_gcm_siv::{Aes256GcmSiv, Nonce};
use async_trait::async_trait;
use rand::RngCore;

use crate::cache::EntityCache;
use crate::error::PrivsvcError;

/// The format version this build writes and reads.
pub const SCAN_CACHE_VERSION: u8 = 3;
/// The default resume granularity: 1,800 blocks (an hour of Arkiv's 2 s blocks).
pub const DEFAULT_RESUME_BLOCKS: u64 = 1_800;
/// The first bytes of a sealed cache.
const MAGIC: &[u8; 8] = b"PSVCSCAN";
const NONCE_BYTES: usize = 12;

/// Where a client keeps its sealed scan cache between sessions: one opaque blob per client (a
/// file, an IndexedDB record). The blob is already encrypted and authenticated.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait ScanCacheStore: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// The stored blob, `None` when there is none.
    async fn load(&self) -> Result<Option<Vec<u8>>, PrivsvcError>;
    /// Replaces the stored blob.
    async fn save(&self, sealed: Vec<u8>) -> Result<(), PrivsvcError>;
    /// Deletes the stored blob (a cache that does not open).
    async fn clear(&self) -> Result<(), PrivsvcError>;
}

/// The resume block of a listing made at `block`: the last multiple of `granularity` at or
/// below it (`granularity` 0 or 1: `block` itself).
pub fn resume_block(block: u64, granularity: u64) -> u64 {
    if granularity <= 1 {
        block
    } else {
        block - block % granularity
    }
}

fn aad(chain_id: u64, project: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(17 + project.len());
    aad.extend_from_slice(MAGIC);
    aad.push(SCAN_CACHE_VERSION);
    aad.extend_from_slice(&chain_id.to_be_bytes());
    aad.extend_from_slice(project.as_bytes());
    aad
}

/// Seals `snapshot` under `key` for the project on `chain_id`.
pub(crate) fn seal(key: &[u8; 32], chain_id: u64, project: &str, snapshot: &[u8]) -> Vec<u8> {
    let cipher = Aes256GcmSiv::new(key.into());
    let mut nonce = [0u8; NONCE_BYTES];
    rand::thread_rng().fill_bytes(&mut nonce);
    let aad = aad(chain_id, project);
    let sealed = cipher
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: snapshot,
                aad: &aad,
            },
        )
        .expect("AES-GCM-SIV seals any message under 64 GiB");
    let mut out = Vec::with_capacity(MAGIC.len() + 1 + NONCE_BYTES + sealed.len());
    out.extend_from_slice(MAGIC);
    out.push(SCAN_CACHE_VERSION);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    out
}

/// Why a stored cache was discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Discarded {
    /// Not a scan cache, or one of another format version.
    Version,
    /// It does not open under this vault's key for this chain and project (another root, or
    /// altered bytes).
    Key,
    /// It opened but its content is not a well-formed listing.
    Content,
}

/// Opens a sealed cache: the listing it holds, or why it is discarded.
pub(crate) fn open(
    key: &[u8; 32],
    chain_id: u64,
    project: &str,
    sealed: &[u8],
) -> Result<EntityCache, Discarded> {
    let head = MAGIC.len() + 1 + NONCE_BYTES;
    if sealed.len() < head || &sealed[..MAGIC.len()] != MAGIC {
        return Err(Discarded::Version);
    }
    if sealed[MAGIC.len()] != SCAN_CACHE_VERSION {
        return Err(Discarded::Version);
    }
    let nonce = Nonce::from_slice(&sealed[MAGIC.len() + 1..head]);
    let aad = aad(chain_id, project);
    let plain = Aes256GcmSiv::new(key.into())
        .decrypt(
            nonce,
            Payload {
                msg: &sealed[head..],
                aad: &aad,
            },
        )
        .map_err(|_| Discarded::Key)?;
    crate::snapshot::decode(&plain).ok_or(Discarded::Content)
}

/// What became of the scan cache when the session started ([`crate::PrivateClient::scan_cache_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScanCacheState {
    /// No cache: no store in the options, or a vault that gives no scan-cache key.
    Off,
    /// The store held no cache (or could not be read): the session listed from the start.
    Empty,
    /// The session resumed from the cache's resume block.
    Resumed {
        /// The resume block: the first listing named the records created after it.
        block: u64,
    },
    /// The stored cache did not open and was deleted: the session listed from the start.
    Discarded {
        /// Why.
        reason: &'static str,
    },
}

/// The scan cache of a client: its store and key, and the resume block it last saved.
pub(crate) struct ScanCache {
    pub(crate) store: Arc<dyn ScanCacheStore>,
    key: privsvc_vault::Secret32,
    chain_id: u64,
    project: String,
    granularity: u64,
    /// The resume block and the records' generation last saved.
    saved: tokio::sync::Mutex<(Option<u64>, u64)>,
}

impl ScanCache {
    /// The cache of `store` under `key`.
    pub(crate) fn new(
        store: Arc<dyn ScanCacheStore>,
        key: privsvc_vault::Secret32,
        chain_id: u64,
        project: &str,
        granularity: u64,
    ) -> Self {
        ScanCache {
            store,
            key,
            chain_id,
            project: project.to_owned(),
            granularity,
            saved: tokio::sync::Mutex::new((None, 0)),
        }
    }

    /// The stored listing when it opens (a cache that does not is deleted from the store), and
    /// what became of it.
    pub(crate) async fn load(&self) -> (Option<EntityCache>, ScanCacheState) {
        let sealed = match self.store.load().await {
            Ok(Some(s)) => s,
            Ok(None) => return (None, ScanCacheState::Empty),
            Err(e) => {
                tracing::warn!(error = %e, "the scan cache cannot be read; listing from the start");
                return (None, ScanCacheState::Empty);
            }
        };
        let why = match open(&self.key, self.chain_id, &self.project, &sealed) {
            Ok(cache) => {
                *self.saved.lock().await = (cache.block, cache.records_generation);
                let block = cache.block.unwrap_or_default();
                return (Some(cache), ScanCacheState::Resumed { block });
            }
            Err(Discarded::Version) => "it is not of this version",
            Err(Discarded::Key) => "it does not open under this vault's key",
            Err(Discarded::Content) => "its content is malformed",
        };
        tracing::warn!(reason = why, "discarding the scan cache");
        if let Err(e) = self.store.clear().await {
            tracing::warn!(error = %e, "the scan cache cannot be deleted");
        }
        (None, ScanCacheState::Discarded { reason: why })
    }

    /// Saves the listing of `cache` up to its resume block and the user's records, when that
    /// block moved since the last save (at most once per resume unit) or the user's records
    /// changed, once the cache was scanned.
    pub(crate) async fn save(&self, cache: &EntityCache) {
        if cache.block.is_none() || !cache.scanned {
            return;
        }
        self.save_if_changed(cache).await;
    }

    /// Saves the user's records of `cache` now that they changed (a write of this device), with
    /// the listing up to the last resume block saved (or none).
    pub(crate) async fn save_records(&self, cache: &EntityCache) {
        self.save_if_changed(cache).await;
    }

    async fn save_if_changed(&self, cache: &EntityCache) {
        let mut saved = self.saved.lock().await;
        // The listing only up to a resume block a scan reached; before the first scan, none.
        let resume = match (cache.block, cache.scanned) {
            (Some(block), true) => resume_block(block, self.granularity),
            _ => saved.0.unwrap_or(0),
        };
        let moved = saved.0.is_none_or(|s| s < resume);
        if !moved && saved.1 == cache.records_generation {
            return;
        }
        let snapshot = crate::snapshot::encode(cache, resume);
        let sealed = seal(&self.key, self.chain_id, &self.project, &snapshot);
        match self.store.save(sealed).await {
            Ok(()) => {
                *saved = (
                    Some(resume.max(saved.0.unwrap_or(0))),
                    cache.records_generation,
                )
            }
            Err(e) => tracing::warn!(error = %e, "the scan cache cannot be saved"),
        }
    }
}

/// A scan cache in one file, written with mode 0600 (its directory 0700) through a temporary
/// file renamed into place.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone)]
pub struct FileScanCache {
    path: std::path::PathBuf,
}

#[cfg(not(target_arch = "wasm32"))]
impl FileScanCache {
    /// The cache at `path` (created on the first save).
    pub fn new(path: impl Into<std::path::PathBuf>) -> Self {
        FileScanCache { path: path.into() }
    }

    /// The file's path.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn write(&self, sealed: &[u8]) -> std::io::Result<()> {
        crate::private_fs::write_atomically(&self.path, sealed)
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn io_error(path: &std::path::Path, e: std::io::Error) -> PrivsvcError {
    PrivsvcError::ScanCache {
        path: Some(path.to_path_buf()),
        source: Box::new(e),
    }
}

#[cfg(not(target_arch = "wasm32"))]
#[async_trait]
impl ScanCacheStore for FileScanCache {
    async fn load(&self) -> Result<Option<Vec<u8>>, PrivsvcError> {
        match std::fs::read(&self.path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(&self.path, e)),
        }
    }

    /// Writes in place, on the caller's thread: a cache is small, and a process that cannot
    /// start a thread must still keep it.
    async fn save(&self, sealed: Vec<u8>) -> Result<(), PrivsvcError> {
        self.write(&sealed).map_err(|e| io_error(&self.path, e))
    }

    async fn clear(&self) -> Result<(), PrivsvcError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error(&self.path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store in memory.
    struct Memory(std::sync::Mutex<Option<Vec<u8>>>);

    #[async_trait]
    impl ScanCacheStore for Memory {
        async fn load(&self) -> Result<Option<Vec<u8>>, PrivsvcError> {
            Ok(self.0.lock().unwrap().clone())
        }
        async fn save(&self, sealed: Vec<u8>) -> Result<(), PrivsvcError> {
            *self.0.lock().unwrap() = Some(sealed);
            Ok(())
        }
        async fn clear(&self) -> Result<(), PrivsvcError> {
            *self.0.lock().unwrap() = None;
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_listing_without_attributes_is_resumed_with_the_users_records() {
        let store = Arc::new(Memory(std::sync::Mutex::new(None)));
        let key = privsvc_vault::Secret32::new([5; 32]);
        let cache = ScanCache::new(store.clone(), key.clone(), 7, "notes", 1);
        let mut listing = EntityCache::default();
        listing.finish_listing(40);
        listing.scanned = true;
        let record = crate::record::MyRecord {
            key: alloy_primitives::B256::repeat_byte(1),
            entity_key: alloy_primitives::B256::repeat_byte(1),
            owner: alloy_primitives::Address::repeat_byte(2),
            creator: alloy_primitives::Address::repeat_byte(3),
            app: "notes".into(),
            content_type: "text/plain".into(),
            data: b"mine".to_vec(),
            encrypted: false,
            attributes: privsvc_attributes::Attributes::new(),
            created_at: 30,
            expires_at: 1_000,
            exp_seconds: 3_600,
            envelope: "{}".into(),
            record_ref: privsvc_vault::RecordRef([4; 16]),
            verified: false,
        };
        listing.add_own_write(record.clone());
        cache.save(&listing).await;
        // Every session resumes a listing of tags alone (docs/PROTOCOL.md §8.1): one that
        // checks rarity makes its attribute listing at its first tail, whatever its cache held.
        let again = ScanCache::new(store, key, 7, "notes", 1);
        let (loaded, state) = again.load().await;
        assert_eq!(state, ScanCacheState::Resumed { block: 40 });
        let loaded = loaded.expect("the cache opens");
        assert!(!loaded.with_attributes);
        assert_eq!(loaded.block, Some(40));
        assert_eq!(loaded.mine.get(&record.entity_key), Some(&record));
    }

    #[test]
    fn resume_blocks_are_coarse() {
        assert_eq!(resume_block(5_399, 1_800), 3_600);
        assert_eq!(resume_block(3_600, 1_800), 3_600);
        assert_eq!(resume_block(1_799, 1_800), 0);
        assert_eq!(resume_block(1_234, 1), 1_234);
        assert_eq!(resume_block(1_234, 0), 1_234);
    }

    #[test]
    fn a_cache_opens_only_under_its_key_chain_project_and_version() {
        let mut cache = EntityCache::default();
        cache.finish_listing(3_700);
        let snapshot = crate::snapshot::encode(&cache, 3_600);
        let sealed = seal(&[1; 32], 7, "notes", &snapshot);
        let opened = open(&[1; 32], 7, "notes", &sealed).expect("opens");
        assert_eq!(opened.block, Some(3_600));
        assert_eq!(
            open(&[2; 32], 7, "notes", &sealed).err(),
            Some(Discarded::Key)
        );
        assert_eq!(
            open(&[1; 32], 8, "notes", &sealed).err(),
            Some(Discarded::Key)
        );
        assert_eq!(
            open(&[1; 32], 7, "other", &sealed).err(),
            Some(Discarded::Key)
        );
        let mut older = sealed.clone();
        older[MAGIC.len()] = SCAN_CACHE_VERSION - 1;
        assert_eq!(
            open(&[1; 32], 7, "notes", &older).err(),
            Some(Discarded::Version)
        );
        let mut flipped = sealed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(
            open(&[1; 32], 7, "notes", &flipped).err(),
            Some(Discarded::Key)
        );
        assert_eq!(
            open(&[1; 32], 7, "notes", b"junk").err(),
            Some(Discarded::Version)
        );
    }
}
