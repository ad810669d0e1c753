//! Opening a sealed envelope read from the ledger (PROTOCOL 3): its body and the owner who
//! signed it over the entity's attributes.

use privsvc_envelope::{envelope_signer, parse_envelope};
use wasm_bindgen::prelude::*;

use crate::convert::{address_text, to_attributes};
use crate::error::WasmError;

/// Parses `envelope` (the entity payload as text) and recovers its signer over `attributes`
/// (wire JSON of the entity's attributes): JSON `{ app, exp, hour, ct, enc, data (hex), signer }`.
/// Fails when the envelope is malformed, its types differ from the attributes or nothing
/// recovers.
#[wasm_bindgen(js_name = rawOpenEnvelope)]
pub fn raw_open_envelope(envelope: &[u8], attributes: &str) -> Result<String, WasmError> {
    let sealed = parse_envelope(envelope)?;
    let attributes = to_attributes(attributes)?;
    let signer = envelope_signer(&sealed, &attributes)?;
    let b = &sealed.body;
    Ok(serde_json::json!({
        "app": b.app,
        "exp": b.exp,
        "hour": b.hour,
        "ct": b.ct,
        "enc": b.enc,
        "data": hex::encode(&b.data),
        "signer": address_text(&signer),
    })
    .to_string())
}

/// `floor(unix seconds / 3600)`: the `hour` of an envelope sealed at `now`.
#[wasm_bindgen(js_name = rawHourOf)]
pub fn raw_hour_of(now: f64) -> Result<f64, WasmError> {
    Ok(privsvc_envelope::hour_of(crate::convert::to_u64("now", now)?) as f64)
}
