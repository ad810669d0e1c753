//! The lower-level helpers used by relayers (docs/API.md §3.6): token verification (`verifyToken`,
//! `tokenId`, `tokenSuite`, `importIssuerKey`, `issuanceMessage`) and the OHTTP gateway side
//! (`OhttpGateway.fromSeed`). Everything here is the Rust crates' code.

use js_sys::{Object, Reflect, Uint8Array};
use privsvc_ohttp::{OhttpGateway, ResponseSealer};
use privsvc_tokens::{IssueRequest, TokenRedemption};
use wasm_bindgen::prelude::*;

use crate::error::WasmError;

fn token_error(e: privsvc_tokens::TokenError) -> WasmError {
    WasmError::argument("token", e.to_string())
}

/// `verifyToken(key, token, app)`: the token id (hex) of a redemption `{ epoch, nonce,
/// signature }` (JSON) that verifies for `app` under the issuer key `spki` (DER); fails
/// otherwise. Whether its day is accepted and whether it was spent is the caller's business.
#[wasm_bindgen(js_name = rawVerifyToken)]
pub fn raw_verify_token(spki: &[u8], app: &str, token: &str) -> Result<String, WasmError> {
    let key = privsvc_tokens::import_issuer_key(spki).map_err(token_error)?;
    let token: TokenRedemption =
        serde_json::from_str(token).map_err(|e| WasmError::argument("token", e.to_string()))?;
    let id = privsvc_tokens::verify_token(&key, app, &token).map_err(token_error)?;
    Ok(hex::encode(id))
}

/// `tokenId(prepared)`: SHA-256 of a prepared token message, hex.
#[wasm_bindgen(js_name = rawTokenId)]
pub fn raw_token_id(prepared: &[u8]) -> String {
    hex::encode(privsvc_tokens::token_id(prepared))
}

/// `tokenSuite()`: the RFC 9474 suite name tokens use.
#[wasm_bindgen(js_name = rawTokenSuite)]
pub fn raw_token_suite() -> String {
    privsvc_tokens::SUITE_NAME.to_string()
}

/// `importIssuerKey(spki)`: checks an issuer key (SPKI DER, RSA of the suite's size) and
/// answers its canonical DER.
#[wasm_bindgen(js_name = rawImportIssuerKey)]
pub fn raw_import_issuer_key(spki: &[u8]) -> Result<Vec<u8>, WasmError> {
    let key = privsvc_tokens::import_issuer_key(spki).map_err(token_error)?;
    Ok(key.spki().to_vec())
}

/// `issuanceMessage(req, ts)`: the text a wallet signs for an issue request (JSON).
#[wasm_bindgen(js_name = rawIssuanceMessage)]
pub fn raw_issuance_message(request: &str, ts: f64) -> Result<String, WasmError> {
    let req: IssueRequest =
        serde_json::from_str(request).map_err(|e| WasmError::argument("request", e.to_string()))?;
    let ts = crate::convert::to_u64("ts", ts)?;
    privsvc_tokens::issuance_message(&req, ts).map_err(token_error)
}

/// The gateway side of OHTTP: opens requests encapsulated to its key, seals their responses.
#[wasm_bindgen]
pub struct RawOhttpGateway {
    inner: OhttpGateway,
}

#[wasm_bindgen]
impl RawOhttpGateway {
    /// The gateway whose X25519 key comes from `seed` (at least 32 bytes).
    #[wasm_bindgen(js_name = fromSeed)]
    pub fn from_seed(seed: &[u8]) -> Result<RawOhttpGateway, WasmError> {
        let inner = OhttpGateway::from_seed(seed)
            .map_err(|e| WasmError::argument("seed", e.to_string()))?;
        Ok(RawOhttpGateway { inner })
    }

    /// The key configuration to publish (`ohttpKey`, hex).
    #[wasm_bindgen(getter, js_name = publicKey)]
    pub fn public_key(&self) -> String {
        self.inner.public_key()
    }

    /// Opens `message` (`message/ohttp-req`): `{ method, path, headers, body }` (headers an
    /// array of `[name, value]`, body a `Uint8Array`) and the sealer of its response.
    pub fn open(&self, message: &[u8]) -> Result<RawOpened, WasmError> {
        let (request, sealer) = self
            .inner
            .open(message)
            .map_err(|e| WasmError::argument("message", e.to_string()))?;
        let out = Object::new();
        let set = |k: &str, v: &JsValue| Reflect::set(&out, &k.into(), v).map(drop);
        let headers = js_sys::Array::new();
        for (name, value) in &request.headers {
            headers.push(&js_sys::Array::of2(&name.into(), &value.into()));
        }
        let fill = set("method", &request.method.as_str().into())
            .and_then(|_| set("path", &request.path.as_str().into()))
            .and_then(|_| set("headers", &headers))
            .and_then(|_| set("body", &Uint8Array::from(request.body.as_slice()).into()));
        fill.map_err(|_| WasmError::argument("message", "cannot build the request object"))?;
        Ok(RawOpened {
            request: out.into(),
            sealer: Some(sealer),
        })
    }
}

/// An opened request and the single-use sealer of its response.
#[wasm_bindgen]
pub struct RawOpened {
    request: JsValue,
    sealer: Option<ResponseSealer>,
}

#[wasm_bindgen]
impl RawOpened {
    /// The request `{ method, path, headers, body }`.
    #[wasm_bindgen(getter)]
    pub fn request(&self) -> JsValue {
        self.request.clone()
    }

    /// Seals the response (`status`, headers as JSON `[[name, value]]`, body): the
    /// `message/ohttp-res` bytes. Only once.
    pub fn seal(&mut self, status: u16, headers: &str, body: &[u8]) -> Result<Vec<u8>, WasmError> {
        let sealer = self
            .sealer
            .take()
            .ok_or_else(|| WasmError::argument("response", "this response was already sealed"))?;
        let headers: Vec<(String, String)> = serde_json::from_str(headers)
            .map_err(|e| WasmError::argument("headers", e.to_string()))?;
        sealer
            .seal(status, &headers, body)
            .map_err(|e| WasmError::argument("response", e.to_string()))
    }
}
