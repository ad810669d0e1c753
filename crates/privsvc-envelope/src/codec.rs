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
        .map_err(|e| EnvelopeError::Base64(e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Base64Error;

    #[test]
    fn each_refusal_says_which_rule_by_type() {
        let cases = [
            (
                "AA=A",
                Base64Error::InvalidByte {
                    offset: 2,
                    byte: b'=',
                },
            ),
            ("AAAAA", Base64Error::InvalidLength(5)),
            (
                "AB==",
                Base64Error::NonZeroTrailingBits {
                    offset: 1,
                    byte: b'B',
                },
            ),
            ("AA", Base64Error::InvalidPadding),
        ];
        for (text, want) in cases {
            assert_eq!(
                from_base64(text),
                Err(EnvelopeError::Base64(want)),
                "{text}"
            );
        }
        assert_eq!(from_base64("AA==").unwrap(), vec![0]);
    }
}
