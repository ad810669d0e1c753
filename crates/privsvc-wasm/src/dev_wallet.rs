//! A wallet whose key is held in memory: the dev wallet of the web page on the devnet and of
//! tests. Never for real funds: the key sits in the page.

use alloy_dyn_abi::TypedData;
use futures::executor::block_on;
use privsvc_vault::{LocalWallet, Wallet};
use wasm_bindgen::prelude::*;

use crate::convert::{address_text, signature_hex};
use crate::error::WasmError;

/// An in-memory secp256k1 wallet (`devWallet` of `js/index.js` is built on it).
#[wasm_bindgen]
pub struct RawLocalWallet {
    inner: LocalWallet,
}

#[wasm_bindgen]
impl RawLocalWallet {
    /// A wallet with a fresh random key.
    pub fn random() -> RawLocalWallet {
        RawLocalWallet {
            inner: LocalWallet::random(),
        }
    }

    /// The wallet of a 32-byte private key in hex.
    #[wasm_bindgen(js_name = fromKey)]
    pub fn from_key(key: &str) -> Result<RawLocalWallet, WasmError> {
        Ok(RawLocalWallet {
            inner: LocalWallet::from_hex(key)?,
        })
    }

    /// The account address (EIP-55).
    #[wasm_bindgen(getter)]
    pub fn address(&self) -> String {
        address_text(&self.inner.address())
    }

    /// `eth_signTypedData_v4` over the typed data JSON: the signature in hex (v = 27/28).
    #[wasm_bindgen(js_name = signTypedData)]
    pub fn sign_typed_data(&self, typed_data: &str) -> Result<String, WasmError> {
        let typed: TypedData = serde_json::from_str(typed_data)
            .map_err(|e| WasmError::argument("typed data", e.to_string()))?;
        Ok(signature_hex(&block_on(
            self.inner.sign_typed_data(&typed),
        )?))
    }

    /// `personal_sign` (EIP-191) over `message`: the signature in hex (v = 27/28).
    #[wasm_bindgen(js_name = personalSign)]
    pub fn personal_sign(&self, message: &[u8]) -> Result<String, WasmError> {
        Ok(signature_hex(&block_on(self.inner.personal_sign(message))?))
    }
}
