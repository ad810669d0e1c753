//! Opening a sealed envelope read from the ledger (docs/PROTOCOL.md §3): its body and the owner who
//! signed it over the entity's attributes.

use privsvc_envelope::{
    envelope_digest, envelope_signer, pad_envelope, parse_envelope, EnvelopeBody,
};
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

/// `parseEnvelope(envelope)`: the body of a sealed envelope and its signature, without
/// recovering the signer: JSON `{ v, app, exp, hour, ct, enc, types, data (base64), sig }`.
#[wasm_bindgen(js_name = rawParseEnvelope)]
pub fn raw_parse_envelope(envelope: &[u8]) -> Result<String, WasmError> {
    let sealed = parse_envelope(envelope)?;
    let mut m = sealed.body.to_json();
    m.insert(
        "sig".into(),
        serde_json::Value::String(format!("0x{}", hex::encode(sealed.signature))),
    );
    Ok(serde_json::Value::Object(m).to_string())
}

/// `envelopeDigest(body, attributes)`: the digest the owner signs (docs/PROTOCOL.md §3), hex.
/// `body` is JSON `{ app, exp, hour, ct, enc, data (base64) }`; its `types` are the
/// attributes' (wire JSON).
#[wasm_bindgen(js_name = rawEnvelopeDigest)]
pub fn raw_envelope_digest(body: &str, attributes: &str) -> Result<String, WasmError> {
    let attributes = to_attributes(attributes)?;
    let body = body_from_json(body, &attributes)?;
    Ok(format!("{}", envelope_digest(&body, &attributes)))
}

/// `padEnvelope(text)`: `text` right-padded with spaces to 512, 1024, 4096 or 16384 bytes.
#[wasm_bindgen(js_name = rawPadEnvelope)]
pub fn raw_pad_envelope(text: &str) -> Result<String, WasmError> {
    Ok(pad_envelope(text)?)
}

/// `canonicalAttributes(attributes)`: the RFC 8785 JSON of wire attributes.
#[wasm_bindgen(js_name = rawCanonicalAttributes)]
pub fn raw_canonical_attributes(attributes: &str) -> Result<String, WasmError> {
    Ok(to_attributes(attributes)?.canonical_json())
}

/// An envelope body from JSON `{ app, exp, hour, ct, enc, data (base64) }` with the types of
/// `attributes`.
fn body_from_json(
    text: &str,
    attributes: &privsvc_attributes::Attributes,
) -> Result<EnvelopeBody, WasmError> {
    #[derive(serde::Deserialize)]
    struct Input {
        app: String,
        exp: u64,
        hour: u64,
        ct: String,
        enc: bool,
        data: String,
    }
    let i: Input =
        serde_json::from_str(text).map_err(|e| WasmError::argument("body", e.to_string()))?;
    Ok(EnvelopeBody {
        app: i.app,
        exp: i.exp,
        hour: i.hour,
        ct: i.ct,
        enc: i.enc,
        types: attributes.types(),
        data: privsvc_envelope::from_base64(&i.data)?,
    })
}
