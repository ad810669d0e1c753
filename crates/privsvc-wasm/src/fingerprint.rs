//! Fingerprinting checks, coarsening helpers and attribute-name rules (docs/API.md §3.7).

use privsvc_attributes::Attributes;
use privsvc_fingerprint::{check_rarity, check_record, coarse, CheckWarning, RecordCheck};
use wasm_bindgen::prelude::*;

use crate::convert::{to_attributes, to_u64};
use crate::error::WasmError;

fn warnings_json(warnings: &[CheckWarning]) -> String {
    serde_json::to_string(warnings).unwrap_or_else(|_| "[]".into())
}

/// `coarse.day(t)`: `t` (Unix seconds or milliseconds) floored to the day, same unit.
#[wasm_bindgen(js_name = rawCoarseDay)]
pub fn raw_coarse_day(t: f64) -> Result<f64, WasmError> {
    Ok(coarse::day(to_u64("time", t)?) as f64)
}

/// `coarse.hour(t)`: `t` (Unix seconds or milliseconds) floored to the hour, same unit.
#[wasm_bindgen(js_name = rawCoarseHour)]
pub fn raw_coarse_hour(t: f64) -> Result<f64, WasmError> {
    Ok(coarse::hour(to_u64("time", t)?) as f64)
}

/// `coarse.geo(x, decimals)`: a coordinate rounded to `decimals` decimals.
#[wasm_bindgen(js_name = rawCoarseGeo)]
pub fn raw_coarse_geo(x: f64, decimals: u32) -> f64 {
    coarse::geo(x, decimals)
}

/// `coarse.bucket(x, step)`: `x` floored to a multiple of `step`.
#[wasm_bindgen(js_name = rawCoarseBucket)]
pub fn raw_coarse_bucket(x: f64, step: f64) -> Result<f64, WasmError> {
    if !(x.is_finite() && x.fract() == 0.0 && x.abs() <= crate::convert::MAX_SAFE_INTEGER) {
        return Err(WasmError::argument(
            "value",
            format!("{x} is not a safe integer"),
        ));
    }
    Ok(coarse::bucket(x as i64, to_u64("step", step)?) as f64)
}

/// `checkRecord`: warnings (JSON array of `{ code, attribute, message }`) for a record's
/// attributes (wire JSON), requested lifetime in seconds and stored payload, each optional.
#[wasm_bindgen(js_name = rawCheckRecord)]
pub fn raw_check_record(
    attributes: Option<String>,
    expires: Option<f64>,
    payload: Option<Vec<u8>>,
) -> Result<String, WasmError> {
    let attributes = attributes.as_deref().map(to_attributes).transpose()?;
    let expires = expires.map(|e| to_u64("expires", e)).transpose()?;
    let warnings = check_record(&RecordCheck {
        attributes: attributes.as_ref(),
        expires,
        payload: payload.as_deref(),
    });
    Ok(warnings_json(&warnings))
}

/// `checkRarity(attributes, existing, k)`: the `rare-combination` warnings (JSON) of
/// `attributes` (wire JSON) against `existing` (JSON array of wire attribute objects).
#[wasm_bindgen(js_name = rawCheckRarity)]
pub fn raw_check_rarity(attributes: &str, existing: &str, k: u32) -> Result<String, WasmError> {
    let attributes = to_attributes(attributes)?;
    let list: Vec<serde_json::Value> = serde_json::from_str(existing)
        .map_err(|e| WasmError::argument("existing records", e.to_string()))?;
    let existing = list
        .iter()
        .map(Attributes::from_wire)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(warnings_json(&check_rarity(
        &attributes,
        &existing,
        k as usize,
    )))
}

/// `expiryBucket(seconds)`: the lifetime rounded up to 1 h, 1 d, 7 d, 30 d or 90 d.
#[wasm_bindgen(js_name = rawExpiryBucket)]
pub fn raw_expiry_bucket(seconds: f64) -> Result<f64, WasmError> {
    Ok(privsvc_envelope::expiry_bucket(to_u64("expires", seconds)?)? as f64)
}

/// `nameProblem(name)`: why `name` is not a valid attribute name, or `undefined`.
#[wasm_bindgen(js_name = rawNameProblem)]
pub fn raw_name_problem(name: &str) -> Option<String> {
    privsvc_attributes::user_name_problem(name)
}
