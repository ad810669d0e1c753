//! The crate's error type and its JavaScript form.

use privsvc_attributes::AttributeError;
use privsvc_envelope::EnvelopeError;
use privsvc_vault::VaultError;
use wasm_bindgen::JsValue;

/// Everything a binding can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WasmError {
    /// A vault operation failed (wallet checks, recovery code, decryption...).
    #[error(transparent)]
    Vault(#[from] VaultError),
    /// An attribute name or value is invalid.
    #[error(transparent)]
    Attributes(#[from] AttributeError),
    /// An envelope could not be built or checked.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    /// An argument has the wrong form.
    #[error("invalid {what}: {reason}")]
    Argument {
        /// Which argument.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// An ownership proof was refused (the reason is meant for the verifier's user).
    #[error("{0}")]
    ProofRejected(#[source] privsvc_vault::ProofCheckError),
    /// An ownership proof is not the JSON of a proof; the source is the JSON decoder's error.
    #[error("the proof is malformed: {0}")]
    ProofMalformed(#[source] serde_json::Error),
}

impl WasmError {
    /// An [`WasmError::Argument`].
    pub fn argument(what: &'static str, reason: impl Into<String>) -> Self {
        WasmError::Argument {
            what,
            reason: reason.into(),
        }
    }

    /// The error class (docs/API.md §3.8) this error is thrown as in JavaScript.
    pub fn js_name(&self) -> &'static str {
        match self {
            WasmError::Vault(VaultError::NonDeterministicWallet) => "NonDeterministicWalletError",
            WasmError::Vault(VaultError::SmartContractWallet) => "SmartContractWalletError",
            WasmError::ProofRejected(_) | WasmError::ProofMalformed(_) => "ProofRejectedError",
            _ => "PrivsvcError",
        }
    }
}

impl From<WasmError> for JsValue {
    fn from(e: WasmError) -> JsValue {
        js_error(e.js_name(), &e.to_string())
    }
}

/// A JavaScript `Error` whose `name` is `name` (an error class of docs/API.md §3.8, which `js/`
/// rethrows as such).
pub(crate) fn js_error(name: &str, message: &str) -> JsValue {
    let error = js_sys::Error::new(message);
    error.set_name(name);
    error.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_refused_proof_keeps_its_typed_cause_and_its_js_class() {
        let not_json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let malformed = WasmError::ProofMalformed(not_json);
        assert_eq!(malformed.js_name(), "ProofRejectedError");
        assert!(
            malformed
                .to_string()
                .starts_with("the proof is malformed: "),
            "{malformed}"
        );
        assert!(
            malformed
                .source()
                .and_then(|s| s.downcast_ref::<serde_json::Error>())
                .is_some(),
            "{malformed:?}"
        );
        let rejected = WasmError::ProofRejected(privsvc_vault::ProofCheckError::WrongChallenge);
        assert_eq!(rejected.js_name(), "ProofRejectedError");
        assert_eq!(rejected.to_string(), "the proof answers another challenge");
    }
}
