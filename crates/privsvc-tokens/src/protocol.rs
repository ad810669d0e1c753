//! Wire types of the issuer endpoints and of a token redemption (docs/PROTOCOL.md §5, §9.5).

use alloy_primitives::Address;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::{MalformedToken, TokenError};
use crate::message::{ISSUANCE_DOMAIN, NONCE_BYTES};
use sha2::{Digest, Sha256};

/// Most blinded values one issue request may carry.
pub const MAX_TOKENS_PER_REQUEST: usize = 20;

/// Field `token` of a submit request: `{epoch, nonce: hex, signature: base64}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRedemption {
    /// UTC day number the token was issued for.
    pub epoch: u32,
    /// The 32-byte nonce, as 64 hexadecimal characters.
    pub nonce: String,
    /// The RSA signature (256 bytes for a 2048-bit key), standard base64 with padding.
    pub signature: String,
}

impl TokenRedemption {
    /// Encode a redemption from raw parts.
    pub fn new(epoch: u32, nonce: &[u8; NONCE_BYTES], signature: &[u8]) -> Self {
        TokenRedemption {
            epoch,
            nonce: hex::encode(nonce),
            signature: base64::engine::general_purpose::STANDARD.encode(signature),
        }
    }

    /// The decoded nonce; fails unless it is exactly 64 hexadecimal characters.
    pub fn nonce_bytes(&self) -> Result<[u8; NONCE_BYTES], TokenError> {
        if self.nonce.len() != 2 * NONCE_BYTES {
            return Err(TokenError::Malformed(MalformedToken::NonceLength {
                got: self.nonce.len(),
                expected: 2 * NONCE_BYTES,
            }));
        }
        let mut out = [0u8; NONCE_BYTES];
        hex::decode_to_slice(&self.nonce, &mut out)
            .map_err(|e| TokenError::Malformed(MalformedToken::NonceNotHex(e)))?;
        Ok(out)
    }

    /// The decoded signature bytes; fails unless it is standard base64.
    pub fn signature_bytes(&self) -> Result<Vec<u8>, TokenError> {
        base64::engine::general_purpose::STANDARD
            .decode(&self.signature)
            .map_err(|e| TokenError::Malformed(MalformedToken::SignatureNotBase64(e)))
    }

    /// The token id (SHA-256 of the token message) of this redemption for `app`.
    pub fn token_id(&self, app: &str) -> Result<[u8; 32], TokenError> {
        let msg = crate::message::token_message(app, self.epoch, &self.nonce_bytes()?)?;
        Ok(crate::message::token_id(&msg))
    }
}

/// Body of `POST /v1/tokens/issue`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueRequest {
    /// The issuer the request is for (its address, the creator of its key entities).
    pub issuer: Address,
    /// The chain id of the ledger the issuer publishes its keys on.
    pub chain_id: u64,
    /// The app the tokens are for.
    pub app: String,
    /// Today's UTC day number.
    pub epoch: u32,
    /// The requesting wallet.
    pub wallet: Address,
    /// Blinded token messages, standard base64, 1 to 20 entries.
    pub blinded: Vec<String>,
    /// Request time, epoch milliseconds.
    pub ts: u64,
    /// Hex `personal_sign` of [`crate::issuance_message`] by `wallet` (65 bytes, `0x` optional).
    pub wallet_signature: String,
    /// One-time attestation code, when the issuer requires codes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attestation: Option<String>,
}

/// Response of `POST /v1/tokens/issue`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueResponse {
    /// One blind signature per blinded value, standard base64, same order.
    pub blind_signatures: Vec<String>,
    /// Tokens the wallet may still obtain for this app today.
    pub remaining: u32,
}

/// Response of `GET /v1/issuer/key`. The key itself is read from the ledger, never from here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuerKeyResponse {
    /// The issuer's address (creator of the key entity).
    pub issuer: Address,
    /// The app.
    pub app: String,
    /// The UTC day number.
    pub epoch: u32,
    /// The ledger entity holding the day's key, `0x`-hex.
    pub entity_key: String,
}

/// Body of every issuer error answer: `{ "error": "<reason>" }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Human-readable reason.
    pub error: String,
}

/// The EIP-191 `personal_sign` text a wallet signs to ask for tokens (LF line ends, no
/// trailing newline):
///
/// ```text
/// privsvc token issuance v2
/// issuer: {EIP-55 address of the issuer}
/// chain: {chain id}
/// app: {app}
/// epoch: {epoch}
/// ts: {ts}
/// blinded: {hex SHA-256 of the concatenated decoded blinded values}
/// ```
///
/// Uses `req.issuer`, `req.chain_id`, `req.app`, `req.epoch` and `req.blinded`; `ts` is given
/// separately. Naming the issuer and chain means a signed request cannot be replayed to another
/// issuer or on another network. Fails when a blinded value is not standard base64.
pub fn issuance_message(req: &IssueRequest, ts: u64) -> Result<String, TokenError> {
    let mut h = Sha256::new();
    for (i, b) in req.blinded.iter().enumerate() {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|source| {
                TokenError::Malformed(MalformedToken::BlindedNotBase64 { index: i, source })
            })?;
        h.update(&raw);
    }
    let digest = hex::encode(h.finalize());
    Ok(format!(
        "{ISSUANCE_DOMAIN}\nissuer: {}\nchain: {}\napp: {}\nepoch: {}\nts: {ts}\nblinded: {digest}",
        req.issuer.to_checksum(None),
        req.chain_id,
        req.app,
        req.epoch
    ))
}
