//! Errors of the vault crate.

/// An error of a wallet or of a crate underneath (alloy, k256, serde_json) kept as a source
/// without its type becoming part of this crate's API.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a recovery code does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecoveryCodeError {
    /// The code does not have 24 words.
    #[error("it has {0} words, not 24")]
    WordCount(usize),
    /// A word is not in the BIP-39 English list.
    #[error("word {position} is not in the BIP-39 English list")]
    UnknownWord {
        /// The word's position, counted from 1.
        position: usize,
    },
    /// The BIP-39 checksum does not hold.
    #[error("the checksum does not match (a word is wrong or the order changed)")]
    Checksum,
    /// The words encode another number of bytes than 32.
    #[error("it encodes {0} bytes, not 32")]
    EntropyLength(usize),
    /// The BIP-39 decoder refused the code for another reason; the source is its error.
    #[error("{0}")]
    Mnemonic(#[source] bip39::Error),
}

impl From<bip39::Error> for RecoveryCodeError {
    fn from(e: bip39::Error) -> Self {
        match e {
            bip39::Error::UnknownWord(i) => RecoveryCodeError::UnknownWord { position: i + 1 },
            bip39::Error::InvalidChecksum => RecoveryCodeError::Checksum,
            other => RecoveryCodeError::Mnemonic(other),
        }
    }
}

/// Everything that can go wrong deriving keys or signing with a vault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VaultError {
    /// The wallet gave two different derivation signatures.
    #[error("the wallet gave two different signatures for the same derivation message; privsvc needs a deterministic (RFC 6979) signer")]
    NonDeterministicWallet,
    /// The wallet is a contract account.
    #[error("the wallet is a smart-contract account; privsvc needs an externally owned account (or use a random-root vault)")]
    SmartContractWallet,
    /// The wallet refused or failed to sign. The source is the wallet's error (its own words
    /// when it has no error type: `VaultError::Wallet("refused".into())`).
    #[error("wallet error: {0}")]
    Wallet(#[source] BoxError),
    /// A recovery code could not be parsed.
    #[error("invalid recovery code: {0}; expected the 24 English BIP-39 words given when the vault was created")]
    InvalidRecoveryCode(#[source] RecoveryCodeError),
    /// A ciphertext is shorter than its 12-byte nonce plus the 16-byte authentication tag.
    #[error("encrypted payload is {0} bytes; it must hold at least a 12-byte nonce and a 16-byte authentication tag")]
    CiphertextTooShort(usize),
    /// A ciphertext did not decrypt under this vault's key for the record.
    #[error("payload does not decrypt with this vault's key for the record (wrong vault, wrong record or tampered data)")]
    DecryptionFailed,
    /// A record reference was malformed. The source is the hex decoder's error (or the JS
    /// vault's words); the message never repeats the reference given.
    #[error("invalid record reference: {0}; expected 32 hexadecimal characters (16 bytes)")]
    InvalidRecordRef(#[source] BoxError),
    /// The envelope could not be sealed (invalid body, attribute types that differ from the
    /// body's `types`, oversize payload).
    #[error("cannot seal the envelope: {0}")]
    Envelope(#[from] privsvc_envelope::EnvelopeError),
    /// An EIP-712 structure could not be built or hashed; the source is the encoder's or the
    /// signature library's error.
    #[error("typed-data error: {0}")]
    TypedData(#[source] BoxError),
    /// An isolated vault was used after `terminate()` (or its key thread ended).
    #[error("the isolated vault has been terminated; create a new vault to continue")]
    Terminated,
    /// The operating system refused to start the isolated vault's key thread.
    #[error("cannot start the vault key thread: {0}")]
    KeyThread(#[source] std::io::Error),
    /// No valid secp256k1 scalar came out of the owner-key derivation (probability ~2^-32000).
    #[error("owner key derivation produced no valid secp256k1 scalar for this record")]
    NoValidOwnerKey,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_wallets_own_words_are_its_errors_source() {
        let refused = VaultError::Wallet("the user refused".into());
        assert_eq!(refused.to_string(), "wallet error: the user refused");
        assert_eq!(
            refused.source().map(|s| s.to_string()).as_deref(),
            Some("the user refused")
        );
    }
}
