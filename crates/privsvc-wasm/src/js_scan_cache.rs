//! `JsScanCache`: the client's [`ScanCacheStore`] over a JavaScript store made by
//! `js/store.js` (`browserScanCache`, IndexedDB; `fileScanCache`, a 0600 file in Node.js) or an
//! app's own object, through the adapter of `js/client.js`: `load()` resolves to the sealed blob
//! (an empty `Uint8Array` when there is none), `save(bytes)` and `clear()` to a string.

use async_trait::async_trait;
use privsvc_client::{PrivsvcError, ScanCacheStore};

use crate::bridge::{Arg, Bridge};

/// A scan cache kept by JavaScript.
pub struct JsScanCache {
    bridge: Bridge,
}

impl JsScanCache {
    /// The store behind `bridge` (the adapter of `js/client.js`).
    pub fn new(bridge: Bridge) -> Self {
        JsScanCache { bridge }
    }
}

fn store_error(e: String) -> PrivsvcError {
    PrivsvcError::ScanCache {
        path: None,
        source: format!("scanCache: {e}").into(),
    }
}

#[async_trait(?Send)]
impl ScanCacheStore for JsScanCache {
    async fn load(&self) -> Result<Option<Vec<u8>>, PrivsvcError> {
        let bytes = self
            .bridge
            .bytes("load", Vec::new())
            .await
            .map_err(store_error)?;
        Ok((!bytes.is_empty()).then_some(bytes))
    }

    async fn save(&self, sealed: Vec<u8>) -> Result<(), PrivsvcError> {
        self.bridge
            .string("save", vec![Arg::Bytes(sealed)])
            .await
            .map(drop)
            .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), PrivsvcError> {
        self.bridge
            .string("clear", Vec::new())
            .await
            .map(drop)
            .map_err(store_error)
    }
}
