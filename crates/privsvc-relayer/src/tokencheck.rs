//! Token redemption checks (docs/PROTOCOL.md §5, §5.2): epoch accepted, issuer key read from the
//! ledger and accepted by the shared rules of `privsvc_tokens::accept_issuer_key` (no key created
//! after its day began for an established app; the first key accepted per (issuer, app, epoch) is
//! pinned, any other is equivocation), signature valid. Whether a token was spent before is the
//! store's PRIMARY KEY on the token id.
//!
//! Pins persist in `<DATA_DIR>/issuer_key_pins.sqlite` (0600), so a restart does not forget
//! them. An accepted key is re-read from the ledger at most every [`KEY_RECHECK`], and sooner
//! (at most every [`FAILED_RECHECK`]) after a token fails to verify under it, so a key the
//! issuer deleted and re-created is caught as equivocation while the relayer runs.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_primitives::Address;
use privsvc_ledger::LedgerReader;
use privsvc_tokens::{
    accept_issuer_key, acceptable_epochs, epoch_of, now_ms, verify_token, IssuerKey, KeyPins,
    MemoryKeyPins, SqliteKeyPins, TokenError, TokenRedemption,
};

/// File of the issuer key pins inside `DATA_DIR`.
pub const PINS_FILE: &str = "issuer_key_pins.sqlite";
/// An accepted key is read again from the ledger after this long.
pub const KEY_RECHECK: Duration = Duration::from_secs(30);
/// After a token fails to verify, the key is read again if its last read is older than this.
pub const FAILED_RECHECK: Duration = Duration::from_secs(1);

/// An accepted key and when it was last read from the ledger.
type CachedKey = (Arc<IssuerKey>, Instant);

/// Issuer keys accepted from the ledger, by (app, epoch), with the pins behind them.
pub struct IssuerKeys {
    pins: Arc<dyn KeyPins>,
    cache: Mutex<HashMap<(String, u32), CachedKey>>,
}

impl Default for IssuerKeys {
    /// Pins in memory only (forgotten on restart).
    fn default() -> Self {
        Self::with_pins(Arc::new(MemoryKeyPins::default()))
    }
}

/// Why a token was refused (the 403 reason).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenRefusal {
    /// The reason, for the client.
    #[error("{0}")]
    Refused(String),
    /// The ledger (or the pin store) could not be read.
    #[error("cannot read the issuer key from the ledger: {0}")]
    Ledger(String),
}

impl IssuerKeys {
    /// Keys checked against `pins`.
    pub fn with_pins(pins: Arc<dyn KeyPins>) -> Self {
        IssuerKeys {
            pins,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Keys whose pins persist in `<data_dir>/`[`PINS_FILE`].
    pub fn open(data_dir: &Path) -> Result<Self, TokenError> {
        let pins = SqliteKeyPins::open(&data_dir.join(PINS_FILE), epoch_of(now_ms()))?;
        Ok(Self::with_pins(Arc::new(pins)))
    }

    fn cached(&self, app: &str, epoch: u32) -> Option<CachedKey> {
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(app.to_string(), epoch))
            .cloned()
    }

    /// The issuer's key for (app, epoch): from the cache when read less than `max_age` ago,
    /// else read and accepted again from the ledger.
    pub async fn get(
        &self,
        ledger: &dyn LedgerReader,
        issuer: Address,
        app: &str,
        epoch: u32,
        max_age: Duration,
    ) -> Result<Arc<IssuerKey>, TokenRefusal> {
        if let Some((k, at)) = self.cached(app, epoch) {
            if at.elapsed() < max_age {
                return Ok(k);
            }
        }
        let accepted = accept_issuer_key(ledger, self.pins.as_ref(), issuer, app, epoch).await;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let key = match accepted {
            Ok(k) => Arc::new(k),
            Err(e) => {
                cache.remove(&(app.to_string(), epoch));
                return Err(refusal(e, epoch));
            }
        };
        cache.insert((app.to_string(), epoch), (key.clone(), Instant::now()));
        Ok(key)
    }
}

fn refusal(e: TokenError, epoch: u32) -> TokenRefusal {
    match e {
        TokenError::NoIssuerKey { .. } => TokenRefusal::Refused(format!(
            "no issuer key on the ledger for this app and epoch {epoch}"
        )),
        TokenError::IssuerEquivocation { .. } => TokenRefusal::Refused(format!(
            "the issuer published another key for this app and epoch {epoch} than the one first accepted (equivocation): its tokens are refused"
        )),
        TokenError::KeyTooLate { late_by_s, .. } => TokenRefusal::Refused(format!(
            "the issuer created its key for this app and epoch {epoch} {late_by_s} s after that day began although the app had a key the day before (a late key can tag its users): its tokens are refused"
        )),
        TokenError::Ledger(e) => TokenRefusal::Ledger(e.to_string()),
        e @ TokenError::Store { .. } => TokenRefusal::Ledger(e.to_string()),
        e => TokenRefusal::Refused(format!("the issuer key is unusable: {e}")),
    }
}

/// Check a redemption for `app`; returns (tokenId, epoch).
pub async fn check_token(
    keys: &IssuerKeys,
    ledger: &dyn LedgerReader,
    issuer: Address,
    app: &str,
    token: &TokenRedemption,
    now_ms: u64,
) -> Result<([u8; 32], u32), TokenRefusal> {
    if !acceptable_epochs(now_ms).contains(&token.epoch) {
        return Err(TokenRefusal::Refused(format!(
            "token from epoch {} is no longer accepted (only today and yesterday)",
            token.epoch
        )));
    }
    let key = keys
        .get(ledger, issuer, app, token.epoch, KEY_RECHECK)
        .await?;
    let id = match verify_token(&key, app, token) {
        Ok(id) => id,
        Err(e) => {
            // A key swapped on the ledger shows first as tokens that do not verify: read the
            // key again (rarely), so that equivocation is reported as such.
            keys.get(ledger, issuer, app, token.epoch, FAILED_RECHECK)
                .await?;
            return Err(TokenRefusal::Refused(format!("token invalid: {e}")));
        }
    };
    // Whether it was spent before is decided by the store's insert (one transaction with the
    // record, PRIMARY KEY on the token id), which also covers concurrent redemptions.
    Ok((id, token.epoch))
}
