//! privsvc-wasm: the privsvc client's building blocks compiled to WebAssembly for browsers and
//! Node.js 22.
//!
//! This crate is the low-level half of the `js/` package: `wasm-bindgen` generates its bindings
//! into `js/pkg/`, and the hand-written `js/index.js` turns them into the API of docs/API.md §3
//! (`KeyVault`, `WorkerVault`, `signOwnershipProof`, `checkRecord`, `coarse`, ...). Every exported
//! name here starts with `raw` or is a `Raw*` class: applications use `js/index.js`, never these.
//!
//! Values cross the boundary in the plainest form: hex strings for addresses, references and
//! signatures, `Uint8Array` for bytes, JSON text for structured values (attributes in their wire
//! form `{ name: { type, value } }`, warnings, proofs). Errors are JavaScript `Error`s whose
//! `name` is the error class (`NonDeterministicWalletError`, `PrivsvcError`, ...); the
//! package rethrows them as instances of those classes.
#![forbid(unsafe_code)]

#[cfg(target_arch = "wasm32")]
mod bridge;
#[cfg(target_arch = "wasm32")]
mod client;
#[cfg(target_arch = "wasm32")]
mod constants;
mod convert;
mod dev_wallet;
#[cfg(target_arch = "wasm32")]
mod device_seal;
mod envelope;
mod error;
#[cfg(target_arch = "wasm32")]
mod fetch;
mod fingerprint;
#[cfg(target_arch = "wasm32")]
mod js_ledger;
#[cfg(target_arch = "wasm32")]
mod js_scan_cache;
#[cfg(target_arch = "wasm32")]
mod js_tokens;
#[cfg(target_arch = "wasm32")]
mod js_traits;
#[cfg(target_arch = "wasm32")]
mod ohttp;
mod proof;
#[cfg(target_arch = "wasm32")]
mod reading;
#[cfg(target_arch = "wasm32")]
mod relayer_side;
#[cfg(target_arch = "wasm32")]
mod token_wallet;
mod typed;
mod vault;

#[cfg(target_arch = "wasm32")]
pub use client::{raw_discover_relayers, raw_verify_ownership_proof, raw_verify_record, RawClient};
#[cfg(target_arch = "wasm32")]
pub use constants::raw_constants;
pub use dev_wallet::RawLocalWallet;
#[cfg(target_arch = "wasm32")]
pub use device_seal::RawPartSealer;
pub use envelope::{
    raw_canonical_attributes, raw_envelope_digest, raw_hour_of, raw_open_envelope,
    raw_pad_envelope, raw_parse_envelope,
};
pub use error::WasmError;
pub use fingerprint::{
    raw_check_rarity, raw_check_record, raw_coarse_bucket, raw_coarse_day, raw_coarse_geo,
    raw_coarse_hour, raw_expiry_bucket, raw_name_problem,
};
#[cfg(target_arch = "wasm32")]
pub use ohttp::raw_ohttp_call;
pub use proof::{raw_check_proof, raw_sign_ownership_proof};
#[cfg(target_arch = "wasm32")]
pub use reading::{
    raw_acceptable_epochs, raw_epoch_of, raw_fetch_batches, raw_fetch_issuer_key,
    raw_heartbeat_relayers, raw_list_app,
};
#[cfg(target_arch = "wasm32")]
pub use relayer_side::{
    raw_import_issuer_key, raw_issuance_message, raw_token_id, raw_token_suite, raw_verify_token,
    RawOhttpGateway, RawOpened,
};
pub use typed::{raw_derivation_signer, raw_derivation_typed_data, raw_proof_typed_data};
pub use vault::{RawKeyVault, RawRandomVault, RawSigner};
