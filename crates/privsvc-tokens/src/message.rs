//! The token message, token ids, UTC day numbers and the issuance message (docs/PROTOCOL.md §5).

use privsvc_attributes::AppName;
use sha2::{Digest, Sha256};

use crate::error::TokenError;

/// Domain prefix of every token message.
pub const TOKEN_DOMAIN: &[u8] = b"privsvc token v1";
/// Length of a token nonce in bytes.
pub const NONCE_BYTES: usize = 32;
/// Milliseconds in a UTC day.
pub const DAY_MS: u64 = 86_400_000;
/// First line of the issuance message (the message names the issuer and the chain).
pub const ISSUANCE_DOMAIN: &str = "privsvc token issuance v2";

/// The message a token signs:
/// `"privsvc token v1" || u16be(len app) || app || u32be(epoch) || nonce(32)`.
///
/// Fails when `app` is not an app name: empty or longer than
/// [`privsvc_attributes::MAX_APP_NAME_BYTES`] (128) bytes.
pub fn token_message(
    app: &str,
    epoch: u32,
    nonce: &[u8; NONCE_BYTES],
) -> Result<Vec<u8>, TokenError> {
    let app = app_name(app)?;
    let app = app.as_str();
    let app_len =
        u16::try_from(app.len()).map_err(|_| TokenError::InvalidApp { len: app.len() })?;
    let mut m = Vec::with_capacity(TOKEN_DOMAIN.len() + 2 + app.len() + 4 + NONCE_BYTES);
    m.extend_from_slice(TOKEN_DOMAIN);
    m.extend_from_slice(&app_len.to_be_bytes());
    m.extend_from_slice(app.as_bytes());
    m.extend_from_slice(&epoch.to_be_bytes());
    m.extend_from_slice(nonce);
    Ok(m)
}

/// `app` as an app name, or [`TokenError::InvalidApp`].
pub(crate) fn app_name(app: &str) -> Result<AppName, TokenError> {
    AppName::new(app).map_err(|e| TokenError::InvalidApp { len: e.len })
}

/// The token id: SHA-256 of the (prepared) token message. Relayers keep spent ids.
///
/// The suite is deterministic, so the prepared message is the token message itself.
pub fn token_id(message: &[u8]) -> [u8; 32] {
    Sha256::digest(message).into()
}

/// The UTC day number of a time in epoch milliseconds.
pub fn epoch_of(ms: u64) -> u32 {
    u32::try_from(ms / DAY_MS).unwrap_or(u32::MAX)
}

/// The epochs a relayer accepts at `ms`: today and yesterday (in that order).
pub fn acceptable_epochs(ms: u64) -> [u32; 2] {
    let today = epoch_of(ms);
    [today, today.saturating_sub(1)]
}

/// The current time in epoch milliseconds.
pub fn now_ms() -> u64 {
    privsvc_rt::SystemTime::now()
        .duration_since(privsvc_rt::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
