//! Key vaults in the current thread (docs/PROTOCOL.md §1): `RawKeyVault` and the record signer.
//!
//! The same code runs in a page, in a Web Worker or in a Node.js `worker_threads` worker; the
//! package's `WorkerVault` runs it in a worker so that the page never holds the root.

use alloy_primitives::{Address, Signature};
use privsvc_envelope::EnvelopeBody;
use privsvc_vault::{
    tag_from_text, tag_to_text, KeyVault, OwnershipProofBody, RecordSigner, Tag, TAG_BYTES,
    TAG_TEXT_LEN,
};
use wasm_bindgen::prelude::*;

use crate::convert::{address_text, to_attributes, to_ref, to_signature, to_u64};
use crate::error::WasmError;

/// A user's keys for one app, held in this thread (`KeyVault`, docs/API.md §3.3).
#[wasm_bindgen]
pub struct RawKeyVault {
    inner: KeyVault,
}

/// A new random-root vault and its recovery code (returned by `RawKeyVault.random`).
#[wasm_bindgen]
pub struct RawRandomVault {
    vault: Option<RawKeyVault>,
    recovery_code: String,
}

#[wasm_bindgen]
impl RawRandomVault {
    /// Takes the vault out (once).
    #[wasm_bindgen(js_name = takeVault)]
    pub fn take_vault(&mut self) -> Result<RawKeyVault, WasmError> {
        self.vault
            .take()
            .ok_or_else(|| WasmError::argument("vault", "already taken"))
    }

    /// The 24-word recovery code; show it to the user once.
    #[wasm_bindgen(getter, js_name = recoveryCode)]
    pub fn recovery_code(&self) -> String {
        self.recovery_code.clone()
    }
}

#[wasm_bindgen]
impl RawKeyVault {
    /// The vault of a derivation signature already checked (`KeyVault.fromSignature`).
    #[wasm_bindgen(js_name = fromSignature)]
    pub fn from_signature(signature: &str, app: &str) -> Result<RawKeyVault, WasmError> {
        let signature = to_signature("derivation signature", signature)?;
        Ok(RawKeyVault {
            inner: KeyVault::from_signature(&signature, app),
        })
    }

    /// A random-root vault and its recovery code (`KeyVault.random`).
    pub fn random(app: &str) -> RawRandomVault {
        let (inner, code) = KeyVault::random(app);
        RawRandomVault {
            vault: Some(RawKeyVault { inner }),
            recovery_code: code.as_str().to_owned(),
        }
    }

    /// Restores a random-root vault from its 24-word recovery code.
    #[wasm_bindgen(js_name = fromRecoveryCode)]
    pub fn from_recovery_code(code: &str, app: &str) -> Result<RawKeyVault, WasmError> {
        Ok(RawKeyVault {
            inner: KeyVault::from_recovery_code(code, app)?,
        })
    }

    /// The app the keys are derived for.
    #[wasm_bindgen(getter)]
    pub fn app(&self) -> String {
        self.inner.app().to_owned()
    }

    /// A fresh random record reference (32 hex characters).
    #[wasm_bindgen(js_name = newRecord)]
    pub fn new_record(&self) -> String {
        self.inner.new_record().to_hex()
    }

    /// The reference of scope `name`.
    #[wasm_bindgen(js_name = scopeRecord)]
    pub fn scope_record(&self, name: &str) -> String {
        self.inner.scope_record(name).to_hex()
    }

    /// A tag for `record` in its ledger form (60 base64 characters).
    #[wasm_bindgen(js_name = makeTag)]
    pub fn make_tag(&self, record: &str) -> Result<String, WasmError> {
        Ok(tag_to_text(&self.inner.make_tag(&to_ref(record)?)))
    }

    /// Opens tags in their ledger form, concatenated (60 characters each, ASCII; the package
    /// joins the well-formed ones). The answer has 20 bytes for each tag this vault made, in
    /// input order: its index (u32, little-endian), then its record reference (16 bytes); tags
    /// that do not open are left out. A malformed tag is somebody else's.
    #[wasm_bindgen(js_name = openTagTexts)]
    pub fn open_tag_texts(&self, texts: &str) -> Result<Vec<u8>, WasmError> {
        if !texts.len().is_multiple_of(TAG_TEXT_LEN) {
            return Err(WasmError::argument("tags", "expected 60 characters each"));
        }
        let tags = texts
            .as_bytes()
            .chunks_exact(TAG_TEXT_LEN)
            .map(tag_from_ascii)
            .collect();
        Ok(self.opened(tags))
    }

    /// Opens raw tags, concatenated (44 bytes each); the answer is that of `openTagTexts`.
    #[wasm_bindgen(js_name = openTagBytes)]
    pub fn open_tag_bytes(&self, tags: &[u8]) -> Result<Vec<u8>, WasmError> {
        if !tags.len().is_multiple_of(TAG_BYTES) {
            return Err(WasmError::argument("tags", "expected 44 bytes each"));
        }
        let tags = tags
            .chunks_exact(TAG_BYTES)
            .map(|c| Tag::try_from(c).ok())
            .collect();
        Ok(self.opened(tags))
    }

    /// The one-time owner address of `record` (EIP-55).
    #[wasm_bindgen(js_name = addressOf)]
    pub fn address_of(&self, record: &str) -> Result<String, WasmError> {
        Ok(address_text(&self.inner.address_of(&to_ref(record)?)?))
    }

    /// The signer of `record`.
    pub fn signer(&self, record: &str) -> Result<RawSigner, WasmError> {
        Ok(RawSigner {
            inner: self.inner.signer(&to_ref(record)?)?,
        })
    }

    /// Encrypts `data` for `record`: nonce(12) || ciphertext.
    pub fn encrypt(&self, record: &str, data: &[u8]) -> Result<Vec<u8>, WasmError> {
        Ok(self.inner.encrypt(&to_ref(record)?, data))
    }

    /// Decrypts a payload encrypted for `record`.
    pub fn decrypt(&self, record: &str, data: &[u8]) -> Result<Vec<u8>, WasmError> {
        Ok(self.inner.decrypt(&to_ref(record)?, data)?)
    }

    /// Cover scores (docs/PROTOCOL.md §8.4): 32 bytes per candidate, concatenated. `anchor` is one
    /// batch (`u64be(block) || creator`, 28 bytes) and `candidates` several, concatenated.
    #[wasm_bindgen(js_name = coverScores)]
    pub fn cover_scores(&self, anchor: &[u8], candidates: &[u8]) -> Result<Vec<u8>, WasmError> {
        let anchor: [u8; 28] = anchor
            .try_into()
            .map_err(|_| WasmError::argument("anchor batch", "expected 28 bytes"))?;
        if !candidates.len().is_multiple_of(28) {
            return Err(WasmError::argument("candidates", "expected 28 bytes each"));
        }
        let list: Vec<[u8; 28]> = candidates
            .chunks_exact(28)
            .map(|c| c.try_into().unwrap_or([0; 28]))
            .collect();
        Ok(self.inner.cover_scores(&anchor, &list).concat())
    }

    /// The key of the client's persisted scan cache (32 bytes; docs/PROTOCOL.md §8.7). It
    /// seals the cache and derives nothing else.
    #[wasm_bindgen(js_name = scanCacheKey)]
    pub fn scan_cache_key(&self) -> Vec<u8> {
        self.inner.scan_cache_key().to_vec()
    }
}

/// Size of one entry of `openTagTexts`/`openTagBytes`'s answer: an opened tag's index (u32,
/// little-endian) then its record reference (16 bytes).
const OPENED_BYTES: usize = 20;

impl RawKeyVault {
    /// Opens the well-formed tags (`None` is a malformed one) and packs the answer.
    fn opened(&self, tags: Vec<Option<Tag>>) -> Vec<u8> {
        let (slots, parsed): (Vec<u32>, Vec<Tag>) = (0u32..)
            .zip(tags)
            .filter_map(|(i, tag)| tag.map(|t| (i, t)))
            .unzip();
        let mut packed = Vec::new();
        for (slot, opened) in slots.iter().zip(self.inner.open_tags(&parsed)) {
            if let Some(r) = opened {
                let mut entry = [0u8; OPENED_BYTES];
                entry[..4].copy_from_slice(&slot.to_le_bytes());
                entry[4..].copy_from_slice(r.as_bytes());
                packed.extend_from_slice(&entry);
            }
        }
        packed
    }
}

/// A tag from its ledger form given as bytes; `None` unless it is base64 text of 44 bytes.
fn tag_from_ascii(text: &[u8]) -> Option<Tag> {
    std::str::from_utf8(text).ok().and_then(tag_from_text)
}

/// The signer of one record: its owner address, envelope and proof signatures (docs/API.md §3.3:
/// a signer exposes only `address`, `signEnvelope(body, attributes)` and `signProof(body)`).
#[wasm_bindgen]
pub struct RawSigner {
    inner: RecordSigner,
}

impl RawSigner {
    pub(crate) fn address_raw(&self) -> Address {
        self.inner.address()
    }

    pub(crate) fn sign_proof_body(
        &self,
        body: &OwnershipProofBody,
        chain_id: u64,
    ) -> Result<Signature, WasmError> {
        Ok(self.inner.sign_proof_on_chain(body, Some(chain_id))?)
    }
}

#[wasm_bindgen]
impl RawSigner {
    /// The record's one-time owner address (EIP-55).
    #[wasm_bindgen(getter)]
    pub fn address(&self) -> String {
        address_text(&self.inner.address())
    }

    /// Seals an envelope (docs/PROTOCOL.md §3): the padded envelope text. `attributes` is the
    /// record's wire JSON (with `project` and `tag`); `data` the stored payload (ciphertext when
    /// `enc`).
    #[wasm_bindgen(js_name = signEnvelope)]
    #[allow(clippy::too_many_arguments)]
    pub fn sign_envelope(
        &self,
        app: &str,
        exp: f64,
        hour: f64,
        ct: &str,
        enc: bool,
        data: Vec<u8>,
        attributes: &str,
    ) -> Result<String, WasmError> {
        let attributes = to_attributes(attributes)?;
        let body = EnvelopeBody {
            app: app.to_owned(),
            exp: to_u64("exp", exp)?,
            hour: to_u64("hour", hour)?,
            ct: ct.to_owned(),
            enc,
            types: attributes.types(),
            data,
        };
        Ok(self.inner.sign_envelope(&body, &attributes)?)
    }

    /// Signs an ownership proof body (JSON `{ entityKey, challenge, verifier, notBefore,
    /// notAfter }`) for `chainId` (default the privsvc network): the signature in hex.
    #[wasm_bindgen(js_name = signProof)]
    pub fn sign_proof(&self, body: &str, chain_id: Option<f64>) -> Result<String, WasmError> {
        let body = crate::convert::ProofBodyInput::parse(body)?;
        let chain = chain_id
            .map(|c| to_u64("chainId", c))
            .transpose()?
            .unwrap_or(privsvc_vault::NETWORK_CHAIN_ID);
        Ok(crate::convert::signature_hex(
            &self.sign_proof_body(&body, chain)?,
        ))
    }
}
