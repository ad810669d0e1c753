//! The gateway side of RFC 9458: key configurations derived from a seed, opening encapsulated
//! requests and sealing their responses. The cryptography and framing are the `ohttp` crate's.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use hkdf::Hkdf;
use ohttp::hpke::{Aead, Kdf, Kem};
use ohttp::{KeyConfig, Server, ServerResponse, SymmetricSuite};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::binary::{decode_padded_request, encode_padded_response, BinaryRequest};
use crate::OhttpError;

/// The key id of the configuration that [`OhttpGateway::from_seed`] derives.
pub const DEFAULT_KEY_ID: u8 = 1;
/// The shortest seed accepted, in bytes.
pub const MIN_SEED_BYTES: usize = 16;
/// HKDF salt of the seed-to-key derivation (domain separation).
const SEED_SALT: &[u8] = b"privsvc ohttp gateway key v1";

/// One live key configuration.
struct LiveKey {
    id: u8,
    server: Server,
    encoded: Vec<u8>,
}

/// Derive the key configuration `id` from `seed`: `ikm = HKDF-SHA256(salt = "privsvc ohttp
/// gateway key v1", ikm = seed, info = [id], 32 bytes)`, then the HPKE `DeriveKeyPair(ikm)` of
/// X25519-HKDF-SHA256, with the single suite HKDF-SHA256 / AES-128-GCM.
fn derive_key(id: u8, seed: &[u8]) -> Result<LiveKey, OhttpError> {
    if seed.len() < MIN_SEED_BYTES {
        return Err(OhttpError::WeakSeed(seed.len()));
    }
    let mut ikm = Zeroizing::new([0u8; 32]);
    Hkdf::<Sha256>::new(Some(SEED_SALT), seed)
        .expand(&[id], ikm.as_mut())
        .map_err(|_| OhttpError::Encapsulation("HKDF expand failed".into()))?;
    let suite = SymmetricSuite::new(Kdf::HkdfSha256, Aead::Aes128Gcm);
    let config = KeyConfig::derive(id, Kem::X25519Sha256, vec![suite], ikm.as_ref())
        .map_err(|e| OhttpError::Encapsulation(e.to_string()))?;
    let encoded = config
        .encode()
        .map_err(|e| OhttpError::Encapsulation(e.to_string()))?;
    let server = Server::new(config).map_err(|e| OhttpError::Encapsulation(e.to_string()))?;
    Ok(LiveKey {
        id,
        server,
        encoded,
    })
}

#[cfg_attr(not(feature = "server"), allow(dead_code))]
/// How many of the latest real answer times the gateway keeps to delay dummies with.
const LATENCY_SAMPLES: usize = 64;

/// What the gateway counts about the requests it opened: aggregates only, nothing about a
/// client or a request's content.
#[derive(Default)]
#[cfg_attr(not(feature = "server"), allow(dead_code))]
struct Served {
    /// Requests dispatched to the relayer's router.
    real: AtomicU64,
    /// Dummies answered by the gateway itself.
    dummies: AtomicU64,
    /// The time the latest real requests took to be answered (at most [`LATENCY_SAMPLES`]).
    latencies: Mutex<VecDeque<Duration>>,
}

/// Live keys; the last one is the current (published) key.
struct Keys {
    live: Vec<LiveKey>,
}

/// An OHTTP gateway with one or more live key configurations, selected by key id.
///
/// The current key (the one added last) is the one to publish as `ohttpKey`; older keys keep
/// working until removed, so a relayer can rotate keys without failing in-flight clients.
///
/// ```
/// use privsvc_ohttp::OhttpGateway;
/// let gateway = OhttpGateway::from_seed(&[7u8; 32]).unwrap();
/// // key id 1, X25519 (0x0020), a 32-byte key, one suite: HKDF-SHA256 (1) / AES-128-GCM (1)
/// assert!(gateway.public_key().starts_with("010020"));
/// assert!(gateway.public_key().ends_with("000400010001"));
/// ```
pub struct OhttpGateway {
    keys: RwLock<Keys>,
    served: Served,
}

impl std::fmt::Debug for OhttpGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OhttpGateway")
            .field("key_ids", &self.key_ids())
            .finish()
    }
}

impl OhttpGateway {
    /// A gateway whose only key (id 1) derives deterministically from `seed` (at least 16
    /// bytes; use 32 random bytes kept secret).
    pub fn from_seed(seed: &[u8]) -> Result<Self, OhttpError> {
        Ok(Self {
            keys: RwLock::new(Keys {
                live: vec![derive_key(DEFAULT_KEY_ID, seed)?],
            }),
            served: Served::default(),
        })
    }

    /// Builder form of [`OhttpGateway::add_key`].
    pub fn with_key(self, id: u8, seed: &[u8]) -> Result<Self, OhttpError> {
        self.add_key(id, seed)?;
        Ok(self)
    }

    /// Add (or replace) the key with id `id`, derived from `seed`, and make it the current key.
    pub fn add_key(&self, id: u8, seed: &[u8]) -> Result<(), OhttpError> {
        let key = derive_key(id, seed)?;
        let mut keys = self.keys.write().unwrap_or_else(|p| p.into_inner());
        keys.live.retain(|k| k.id != id);
        keys.live.push(key);
        Ok(())
    }

    /// Stop accepting key `id`. The last remaining key cannot be removed; returns whether a key
    /// was removed.
    pub fn remove_key(&self, id: u8) -> bool {
        let mut keys = self.keys.write().unwrap_or_else(|p| p.into_inner());
        if keys.live.len() <= 1 || !keys.live.iter().any(|k| k.id == id) {
            return false;
        }
        keys.live.retain(|k| k.id != id);
        true
    }

    /// The ids of the live keys, oldest first (the last one is current).
    pub fn key_ids(&self) -> Vec<u8> {
        let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
        keys.live.iter().map(|k| k.id).collect()
    }

    /// The current key configuration, hex encoded (RFC 9458 section 3): the `ohttpKey` of
    /// `/v1/info` and of heartbeats.
    pub fn public_key(&self) -> String {
        let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
        keys.live
            .last()
            .map(|k| hex::encode(&k.encoded))
            .unwrap_or_default()
    }

    /// The hex key configuration of live key `id`, if any.
    pub fn public_key_for(&self, id: u8) -> Option<String> {
        let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
        keys.live
            .iter()
            .find(|k| k.id == id)
            .map(|k| hex::encode(&k.encoded))
    }

    /// Requests opened and dispatched to the relayer's router (everything but dummies).
    pub fn real_requests(&self) -> u64 {
        self.served.real.load(Ordering::Relaxed)
    }

    /// Dummies ([`dummy_request`](crate::dummy_request)) the gateway answered itself.
    pub fn dummies_answered(&self) -> u64 {
        self.served.dummies.load(Ordering::Relaxed)
    }

    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    /// Count a real request, answered after `took`; the time is kept among the latest
    /// [`LATENCY_SAMPLES`] to delay dummies with.
    pub(crate) fn served_real(&self, took: Duration) {
        self.served.real.fetch_add(1, Ordering::Relaxed);
        let mut latencies = self
            .served
            .latencies
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if latencies.len() == LATENCY_SAMPLES {
            latencies.pop_front();
        }
        latencies.push_back(took);
    }

    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    /// Count a dummy; returns the delay of its answer: the time of the kept real answer
    /// `pick` (modulo how many are kept; the caller draws it at random), zero when none is kept.
    pub(crate) fn served_dummy(&self, pick: usize) -> Duration {
        self.served.dummies.fetch_add(1, Ordering::Relaxed);
        let latencies = self
            .served
            .latencies
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if latencies.is_empty() {
            return Duration::ZERO;
        }
        latencies[pick % latencies.len()]
    }

    /// Open an encapsulated request (`message/ohttp-req`). Returns the Binary HTTP request and
    /// the sealer for its response. Every failure (unknown key id, bad ciphertext, bad Binary
    /// HTTP, a plaintext not padded to a request class, non-zero padding) is the same
    /// [`OhttpError::Open`].
    pub fn open(&self, message: &[u8]) -> Result<(BinaryRequest, ResponseSealer), OhttpError> {
        let key_id = *message.first().ok_or(OhttpError::Open)?;
        let (plain, response) = {
            let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
            let key = keys
                .live
                .iter()
                .find(|k| k.id == key_id)
                .ok_or(OhttpError::Open)?;
            key.server
                .decapsulate(message)
                .map_err(|_| OhttpError::Open)?
        };
        let plain = Zeroizing::new(plain);
        let request = decode_padded_request(&plain).map_err(|_| OhttpError::Open)?;
        Ok((request, ResponseSealer { response }))
    }
}

/// Seals the response to one opened request (single use).
pub struct ResponseSealer {
    response: ServerResponse,
}

impl std::fmt::Debug for ResponseSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResponseSealer")
    }
}

impl ResponseSealer {
    /// Encode the response as known-length Binary HTTP padded to its response class, and
    /// encapsulate it (`message/ohttp-res`). `status` must be 200 to 599; a response over the
    /// largest class is [`OhttpError::TooLarge`].
    pub fn seal(
        self,
        status: u16,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Result<Vec<u8>, OhttpError> {
        let plain = encode_padded_response(status, headers, body)?;
        self.seal_padded(&plain)
    }

    /// Encapsulate an already padded plaintext (from
    /// [`crate::binary::encode_padded_response`]).
    pub(crate) fn seal_padded(self, plain: &[u8]) -> Result<Vec<u8>, OhttpError> {
        self.response
            .encapsulate(plain)
            .map_err(|e| OhttpError::Encapsulation(e.to_string()))
    }
}
