//! The sealing of the device store's parts (docs/PROTOCOL.md §8.7), apart from where they are
//! kept: natively in files (`crate::device_store`), in the JS package in IndexedDB or in files
//! of Node.js (through the wasm bindings). The same key, names and format everywhere.
//!
//! A sealed part is `"PSVCDEV1" || part (1 byte) || nonce (12) || AES-256-GCM-SIV(part key,
//! nonce, content, aad = "PSVCDEV1" || part || chain id (8, big-endian) || project)`, with
//! `store key = HKDF-SHA256(scan-cache key, info = "privsvc device store v1")` and `part key =
//! HKDF-SHA256(store key, info = "privsvc device store v1" || part)`. A store's name is
//! `hex(HMAC-SHA256(store key, "privsvc device store id v1" || chain id (8, big-endian) ||
//! project)[0..16])`: derived from the key, it names no wallet.

use aes_gcm_siv::aead::{Aead, KeyInit, Payload};
use aes_gcm_siv::{Aes256GcmSiv, Nonce};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use zeroize::Zeroizing;

/// The first bytes of a sealed part.
pub const MAGIC: &[u8; 8] = b"PSVCDEV1";
/// Bytes of a sealed part's nonce.
const NONCE_BYTES: usize = 12;
/// The HKDF info of the store key, and the prefix of each part key's.
const STORE_INFO: &[u8] = b"privsvc device store v1";

/// The parts of a device store that are sealed here (the scan cache seals itself,
/// `crate::scan_cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Part {
    /// Unspent tokens.
    Tokens = 1,
    /// Issuer key pins and relayer pins.
    Pins = 2,
}

impl Part {
    /// The part of a byte (1 tokens, 2 pins), if any.
    pub fn from_byte(b: u8) -> Option<Part> {
        match b {
            1 => Some(Part::Tokens),
            2 => Some(Part::Pins),
            _ => None,
        }
    }
}

fn hkdf(key: &[u8; 32], info: &[u8]) -> Zeroizing<[u8; 32]> {
    let mut out = Zeroizing::new([0u8; 32]);
    hkdf::Hkdf::<Sha256>::new(None, key)
        .expand(info, out.as_mut())
        .expect("32 bytes is a valid HKDF length");
    out
}

/// Seals and opens the parts of one store (one vault root, chain and project).
pub struct PartSealer {
    key: Zeroizing<[u8; 32]>,
    chain_id: u64,
    project: String,
}

impl std::fmt::Debug for PartSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartSealer")
            .field("chain_id", &self.chain_id)
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

impl PartSealer {
    /// The sealer of the store of `scan_cache_key` (the vault's) for `project` on `chain_id`.
    pub fn new(scan_cache_key: &[u8; 32], chain_id: u64, project: &str) -> PartSealer {
        PartSealer {
            key: hkdf(scan_cache_key, STORE_INFO),
            chain_id,
            project: project.to_string(),
        }
    }

    /// The store's name (32 hex characters): a directory natively, a key prefix in IndexedDB.
    pub fn store_id(&self) -> String {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(self.key.as_ref()).expect("any key length");
        mac.update(b"privsvc device store id v1");
        mac.update(&self.chain_id.to_be_bytes());
        mac.update(self.project.as_bytes());
        hex::encode(&mac.finalize().into_bytes()[..16])
    }

    fn part_key(&self, part: Part) -> Zeroizing<[u8; 32]> {
        let mut info = STORE_INFO.to_vec();
        info.push(part as u8);
        hkdf(&self.key, &info)
    }

    fn aad(&self, part: Part) -> Vec<u8> {
        let mut aad = MAGIC.to_vec();
        aad.push(part as u8);
        aad.extend_from_slice(&self.chain_id.to_be_bytes());
        aad.extend_from_slice(self.project.as_bytes());
        aad
    }

    /// `content` sealed as `part`, under a fresh random nonce.
    pub fn seal(&self, part: Part, content: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let sealed = Aes256GcmSiv::new(self.part_key(part).as_ref().into())
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: content,
                    aad: &self.aad(part),
                },
            )
            .expect("AES-GCM-SIV seals any message a store holds");
        let mut out = MAGIC.to_vec();
        out.push(part as u8);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// The content of a sealed `part`, or `None` when it does not open under this store's key
    /// (another root, chain, project or part; altered or planted bytes): never trusted then.
    pub fn open(&self, part: Part, sealed: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
        let head = MAGIC.len() + 1 + NONCE_BYTES;
        if sealed.len() < head
            || &sealed[..MAGIC.len()] != MAGIC
            || sealed[MAGIC.len()] != part as u8
        {
            return None;
        }
        Aes256GcmSiv::new(self.part_key(part).as_ref().into())
            .decrypt(
                Nonce::from_slice(&sealed[MAGIC.len() + 1..head]),
                Payload {
                    msg: &sealed[head..],
                    aad: &self.aad(part),
                },
            )
            .ok()
            .map(Zeroizing::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_opens_only_under_its_key_chain_project_and_part() {
        let s = PartSealer::new(&[1; 32], 7, "notes");
        let sealed = s.seal(Part::Pins, b"{\"a\":1}");
        assert_eq!(&sealed[..9], b"PSVCDEV1\x02");
        assert_eq!(
            s.open(Part::Pins, &sealed).unwrap().as_slice(),
            b"{\"a\":1}"
        );
        assert!(s.open(Part::Tokens, &sealed).is_none());
        for other in [
            PartSealer::new(&[2; 32], 7, "notes"),
            PartSealer::new(&[1; 32], 8, "notes"),
            PartSealer::new(&[1; 32], 7, "other"),
        ] {
            assert!(other.open(Part::Pins, &sealed).is_none());
            assert_ne!(other.store_id(), s.store_id());
        }
        let mut altered = sealed.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert!(s.open(Part::Pins, &altered).is_none());
        assert!(s.open(Part::Pins, b"PSVCDEV1\x02").is_none());
        assert_eq!(s.store_id().len(), 32);
        assert_eq!(
            s.store_id(),
            PartSealer::new(&[1; 32], 7, "notes").store_id()
        );
    }
}
