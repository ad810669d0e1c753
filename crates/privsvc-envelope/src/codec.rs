//! Standard base64 with padding, as used for the envelope's `data`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::EnvelopeError;

/// Encodes bytes as standard base64 with padding.
pub fn to_base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Decodes standard base64 with padding; refuses other alphabets, missing padding, white space
/// and non-zero trailing bits (so each byte string has exactly one accepted text).
pub fn from_base64(text: &str) -> Result<Vec<u8>, EnvelopeError> {
    STANDARD
        .decode(text)
        .map_err(|e| EnvelopeError::Base64(e.to_string()))
}
