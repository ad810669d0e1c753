//! Token redemption checks (DESIGN 5): epoch accepted, issuer key read from the ledger,
//! signature valid. Whether it was spent before is the store's PRIMARY KEY on the token id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use alloy_primitives::Address;
use privsvc_ledger::LedgerReader;
use privsvc_tokens::{
    acceptable_epochs, fetch_issuer_key, verify_token, IssuerKey, TokenError, TokenRedemption,
};

/// Issuer keys read from the ledger, by (app, epoch). Only found keys are cached.
#[derive(Default)]
pub struct IssuerKeys {
    cache: Mutex<HashMap<(String, u32), Arc<IssuerKey>>>,
}

/// Why a token was refused (the 403 reason).
#[derive(Debug, thiserror::Error)]
pub enum TokenRefusal {
    /// The reason, for the client.
    #[error("{0}")]
    Refused(String),
    /// The ledger could not be read.
    #[error("cannot read the issuer key from the ledger: {0}")]
    Ledger(String),
}

impl IssuerKeys {
    /// The issuer's key for (app, epoch), read from the ledger.
    pub async fn get(
        &self,
        ledger: &dyn LedgerReader,
        issuer: Address,
        app: &str,
        epoch: u32,
    ) -> Result<Arc<IssuerKey>, TokenRefusal> {
        if let Some(k) = self
            .cache
            .lock()
            .expect("issuer key cache")
            .get(&(app.to_string(), epoch))
        {
            return Ok(k.clone());
        }
        let key = match fetch_issuer_key(ledger, issuer, app, epoch).await {
            Ok(k) => k,
            Err(TokenError::NoIssuerKey { .. }) => {
                return Err(TokenRefusal::Refused(format!(
                    "no issuer key on the ledger for this app and epoch {epoch}"
                )))
            }
            Err(TokenError::IssuerEquivocation { .. }) => {
                return Err(TokenRefusal::Refused(format!(
                    "the issuer published two keys for this app and epoch {epoch} (equivocation)"
                )))
            }
            Err(TokenError::Ledger(e)) => return Err(TokenRefusal::Ledger(e.to_string())),
            Err(e) => {
                return Err(TokenRefusal::Refused(format!(
                    "the issuer key is unusable: {e}"
                )))
            }
        };
        let key = Arc::new(key);
        self.cache
            .lock()
            .expect("issuer key cache")
            .insert((app.to_string(), epoch), key.clone());
        Ok(key)
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
    let key = keys.get(ledger, issuer, app, token.epoch).await?;
    let id = verify_token(&key, app, token)
        .map_err(|e| TokenRefusal::Refused(format!("token invalid: {e}")))?;
    // Whether it was spent before is decided by the store's insert (one transaction with the
    // record, PRIMARY KEY on the token id), which also covers concurrent redemptions.
    Ok((id, token.epoch))
}
