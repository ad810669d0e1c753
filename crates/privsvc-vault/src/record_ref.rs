//! Record references: the 16-byte handle from which a record's owner key, tag and payload key derive.

use std::fmt;
use std::str::FromStr;

use rand::RngCore;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::VaultError;

/// A record reference (16 bytes): random for a new record, or derived from the root for a scope.
///
/// Displayed and serialised as 32 lowercase hexadecimal characters (no `0x`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordRef(pub [u8; 16]);

impl RecordRef {
    /// A fresh random reference (operating-system randomness).
    pub fn random() -> Self {
        let mut bytes = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        Self(bytes)
    }

    /// The 16 bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Lowercase hexadecimal form (32 characters, no prefix).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl From<[u8; 16]> for RecordRef {
    fn from(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }
}

impl fmt::Display for RecordRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for RecordRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecordRef({})", self.to_hex())
    }
}

impl FromStr for RecordRef {
    type Err = VaultError;

    /// Parses 32 hexadecimal characters, with or without a `0x` prefix.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let digits = s.strip_prefix("0x").unwrap_or(s);
        let mut bytes = [0u8; 16];
        hex::decode_to_slice(digits, &mut bytes)
            .map_err(|e| VaultError::InvalidRecordRef(Box::new(e)))?;
        Ok(Self(bytes))
    }
}

impl Serialize for RecordRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for RecordRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_reference_keeps_the_decoders_error_and_is_not_repeated() {
        let given = "00112233445566778899aabbccddeefg";
        let err = given.parse::<RecordRef>().unwrap_err();
        let source = std::error::Error::source(&err).expect("a source");
        assert!(
            source.downcast_ref::<hex::FromHexError>().is_some(),
            "{err:?}"
        );
        assert!(!err.to_string().contains("0011223344"), "{err}");
    }

    #[test]
    fn hex_round_trip_and_serde() {
        let r = RecordRef([0xab; 16]);
        assert_eq!(r.to_string(), "ab".repeat(16));
        assert_eq!(r.to_string().parse::<RecordRef>().unwrap(), r);
        assert_eq!(format!("0x{r}").parse::<RecordRef>().unwrap(), r);
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, format!("\"{}\"", "ab".repeat(16)));
        assert_eq!(serde_json::from_str::<RecordRef>(&json).unwrap(), r);
        assert!("abcd".parse::<RecordRef>().is_err());
        assert!("zz".repeat(16).parse::<RecordRef>().is_err());
    }

    #[test]
    fn random_refs_differ() {
        assert_ne!(RecordRef::random(), RecordRef::random());
    }
}
