//! `RawPartSealer`: the sealing of the device store's parts (docs/PROTOCOL.md §8.7) for the JS
//! package's stores (`js/device_store.js`: IndexedDB in browsers, files in Node.js), the same
//! key, names and format as the native device store's (`privsvc_client::PartSealer`).

use privsvc_client::{Part, PartSealer};
use wasm_bindgen::prelude::*;
use zeroize::Zeroizing;

use crate::error::js_error;

fn part_of(part: u8) -> Result<Part, JsValue> {
    Part::from_byte(part).ok_or_else(|| {
        js_error(
            "PrivsvcError",
            "a device store part is 1 (tokens) or 2 (pins)",
        )
    })
}

/// Seals and opens the parts of one device store (one vault root, chain and project).
#[wasm_bindgen]
pub struct RawPartSealer {
    inner: PartSealer,
}

#[wasm_bindgen]
impl RawPartSealer {
    /// The sealer of the store of `key` (the vault's scan-cache key, 32 bytes) for `project` on
    /// `chain_id`.
    #[wasm_bindgen(constructor)]
    pub fn new(key: &[u8], chain_id: f64, project: &str) -> Result<RawPartSealer, JsValue> {
        let key: Zeroizing<[u8; 32]> = Zeroizing::new(
            key.try_into()
                .map_err(|_| js_error("PrivsvcError", "a device store key is 32 bytes"))?,
        );
        if !(chain_id.is_finite()
            && chain_id >= 0.0
            && chain_id.fract() == 0.0
            && chain_id <= 9_007_199_254_740_991.0)
        {
            return Err(js_error("PrivsvcError", "a chain id is a whole number"));
        }
        Ok(RawPartSealer {
            inner: PartSealer::new(&key, chain_id as u64, project),
        })
    }

    /// The store's name (32 hex characters, derived from the key: it names no wallet).
    #[wasm_bindgen(getter, js_name = storeId)]
    pub fn store_id(&self) -> String {
        self.inner.store_id()
    }

    /// `content` sealed as `part` (1 tokens, 2 pins).
    pub fn seal(&self, part: u8, content: &[u8]) -> Result<Vec<u8>, JsValue> {
        Ok(self.inner.seal(part_of(part)?, content))
    }

    /// The content of a sealed `part`, or `undefined` when it does not open under this store's
    /// key (never to be trusted then).
    pub fn open(&self, part: u8, sealed: &[u8]) -> Result<Option<Vec<u8>>, JsValue> {
        Ok(self.inner.open(part_of(part)?, sealed).map(|c| c.to_vec()))
    }
}
