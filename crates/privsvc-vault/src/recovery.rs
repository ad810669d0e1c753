//! Recovery codes of random-root vaults: the 24-word English BIP-39 mnemonic of 32 random bytes.

use std::fmt;

use bip39::{Language, Mnemonic};
use zeroize::Zeroizing;

use crate::error::{RecoveryCodeError, VaultError};

/// Number of words in a recovery code.
pub const RECOVERY_WORDS: usize = 24;

/// A recovery code: 24 BIP-39 English words encoding a random root's 32 bytes of entropy.
///
/// The text is wiped from memory on drop and never printed by `Debug`.
#[derive(Clone)]
pub struct RecoveryCode {
    phrase: Zeroizing<String>,
    entropy: Zeroizing<[u8; 32]>,
}

impl RecoveryCode {
    /// The code of the given entropy.
    pub fn from_entropy(entropy: &[u8; 32]) -> Self {
        let mnemonic = Mnemonic::from_entropy_in(Language::English, entropy)
            .expect("32 bytes is a valid BIP-39 entropy length");
        // Built in place (the longest English word has 8 letters) so that no intermediate copy
        // of the words outlives this function.
        let mut phrase = Zeroizing::new(String::with_capacity(RECOVERY_WORDS * 9));
        for (i, word) in mnemonic.words().enumerate() {
            if i > 0 {
                phrase.push(' ');
            }
            phrase.push_str(word);
        }
        Self {
            phrase,
            entropy: Zeroizing::new(*entropy),
        }
    }

    /// Parses a code: 24 English words separated by white space, any letter case; the BIP-39
    /// checksum must hold.
    pub fn parse(code: &str) -> Result<Self, VaultError> {
        // Lower-cased into one buffer that is wiped on drop; twice the input length leaves room
        // for Unicode lower-casing that grows a character, so the buffer never reallocates.
        let mut normalized = Zeroizing::new(String::with_capacity(code.len() * 2));
        for word in code.split_whitespace() {
            if !normalized.is_empty() {
                normalized.push(' ');
            }
            normalized.extend(word.chars().flat_map(char::to_lowercase));
        }
        let count = normalized.split(' ').filter(|w| !w.is_empty()).count();
        if count != RECOVERY_WORDS {
            return Err(VaultError::InvalidRecoveryCode(
                RecoveryCodeError::WordCount(count),
            ));
        }
        let mnemonic = Mnemonic::parse_in_normalized(Language::English, &normalized)
            .map_err(|e| VaultError::InvalidRecoveryCode(e.into()))?;
        let (full, len) = mnemonic.to_entropy_array();
        let full = Zeroizing::new(full);
        let mut entropy = Zeroizing::new([0u8; 32]);
        if len != 32 {
            return Err(VaultError::InvalidRecoveryCode(
                RecoveryCodeError::EntropyLength(len),
            ));
        }
        entropy.copy_from_slice(&full[..32]);
        Ok(Self {
            phrase: normalized,
            entropy,
        })
    }

    /// The 24 words separated by single spaces (show this to the user once; it is a secret).
    pub fn as_str(&self) -> &str {
        &self.phrase
    }

    /// The words one by one.
    pub fn words(&self) -> impl Iterator<Item = &str> {
        self.phrase.split(' ')
    }

    /// The 32 bytes of entropy the code encodes.
    pub fn entropy(&self) -> &[u8; 32] {
        &self.entropy
    }
}

impl fmt::Debug for RecoveryCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RecoveryCode(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_normalisation() {
        let entropy = [7u8; 32];
        let code = RecoveryCode::from_entropy(&entropy);
        assert_eq!(code.words().count(), 24);
        let shouted = format!("  {}\n", code.as_str().to_uppercase().replace(' ', "\t "));
        let parsed = RecoveryCode::parse(&shouted).unwrap();
        assert_eq!(parsed.entropy(), &entropy);
        assert_eq!(parsed.as_str(), code.as_str());
        assert_eq!(format!("{code:?}"), "RecoveryCode(<redacted>)");
    }

    #[test]
    fn rejects_bad_codes() {
        let code = RecoveryCode::from_entropy(&[1u8; 32]);
        let words: Vec<&str> = code.words().collect();
        // 12 words.
        let short = words[..12].join(" ");
        assert!(matches!(
            RecoveryCode::parse(&short),
            Err(VaultError::InvalidRecoveryCode(
                RecoveryCodeError::WordCount(12)
            ))
        ));
        // Unknown word.
        let mut unknown = words.clone();
        unknown[3] = "privsvc";
        assert!(matches!(
            RecoveryCode::parse(&unknown.join(" ")),
            Err(VaultError::InvalidRecoveryCode(
                RecoveryCodeError::UnknownWord { position: 4 }
            ))
        ));
        // Swapped words break the checksum.
        let mut swapped = words.clone();
        let first = swapped[0];
        let position = swapped.iter().position(|w| *w != first).unwrap();
        swapped.swap(0, position);
        let err = RecoveryCode::parse(&swapped.join(" ")).unwrap_err();
        assert!(
            matches!(
                err,
                VaultError::InvalidRecoveryCode(RecoveryCodeError::Checksum)
            ),
            "{err:?}"
        );
        assert!(
            err.to_string().contains("the checksum does not match"),
            "{err}"
        );
    }
}
