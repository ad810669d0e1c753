//! Which issuer key a relayer or client accepts for (app, epoch) (docs/PROTOCOL.md §5.2),
//! shared by both:
//!
//! 1. The key is read from the ledger only ([`fetch_issuer_key_entity`]); two distinct keys of
//!    the issuer for one (app, epoch) are [`TokenError::IssuerEquivocation`].
//! 2. A key for epoch D whose entity was created (the timestamp of its `$createdAt` block) at
//!    or after the start of D is refused ([`TokenError::KeyTooLate`]), unless the issuer
//!    published no key for that app for D-1 (a new app). An honest issuer publishes D's key
//!    during D-1; a key made during D could be made for a few users (tagging them).
//! 3. The first key accepted for (issuer, app, epoch) is pinned ([`KeyPins`]); any other key
//!    later (a second one, or one re-created after deleting the first) is
//!    [`TokenError::IssuerEquivocation`]. A pin for D-1 also makes the app established, so
//!    deleting yesterday's key does not make a late key acceptable to anyone who saw it.

use std::collections::HashMap;
use std::sync::Mutex;

use alloy_primitives::Address;
use privsvc_attributes::AppName;
use privsvc_ledger::{LedgerError, LedgerReader};

use crate::error::TokenError;
use crate::message::app_name;
use crate::message::DAY_MS;
use crate::published_key::fetch_issuer_key_entity;
use crate::suite::IssuerKey;

/// Pins stay this many days after their epoch (issuer keys live 7 days on the ledger).
pub const PIN_RETENTION_DAYS: u32 = 8;

/// The first key accepted per (issuer, app, epoch). Object safe: `Arc<dyn KeyPins>`.
pub trait KeyPins: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// The pinned SPKI of (`issuer`, `app`, `epoch`), if any.
    fn get(&self, issuer: Address, app: &str, epoch: u32) -> Result<Option<Vec<u8>>, TokenError>;
    /// Pin `spki` unless a pin exists; returns the SPKI pinned afterwards (the first one wins).
    fn pin(
        &self,
        issuer: Address,
        app: &str,
        epoch: u32,
        spki: &[u8],
    ) -> Result<Vec<u8>, TokenError>;
}

/// Pins in memory (forgotten on exit; for clients without a data directory, and tests).
#[derive(Debug, Default)]
pub struct MemoryKeyPins {
    pins: Mutex<HashMap<(Address, String, u32), Vec<u8>>>,
}

impl KeyPins for MemoryKeyPins {
    fn get(&self, issuer: Address, app: &str, epoch: u32) -> Result<Option<Vec<u8>>, TokenError> {
        let pins = self.pins.lock().unwrap_or_else(|p| p.into_inner());
        Ok(pins.get(&(issuer, app.to_string(), epoch)).cloned())
    }

    fn pin(
        &self,
        issuer: Address,
        app: &str,
        epoch: u32,
        spki: &[u8],
    ) -> Result<Vec<u8>, TokenError> {
        let mut pins = self.pins.lock().unwrap_or_else(|p| p.into_inner());
        Ok(pins
            .entry((issuer, app.to_string(), epoch))
            .or_insert_with(|| spki.to_vec())
            .clone())
    }
}

fn equivocation(issuer: Address, app: AppName, epoch: u32) -> TokenError {
    TokenError::IssuerEquivocation {
        issuer,
        app,
        epoch,
        keys: 2,
        pinned: true,
    }
}

/// The issuer's key for (`app`, `epoch`) if the rules above accept it; pins it.
///
/// Errors: [`TokenError::NoIssuerKey`], [`TokenError::IssuerEquivocation`] (two keys on the
/// ledger, or a key other than the pinned one), [`TokenError::KeyTooLate`], or the ledger's or
/// the pin store's failure.
pub async fn accept_issuer_key(
    reader: &dyn LedgerReader,
    pins: &dyn KeyPins,
    issuer: Address,
    app: &str,
    epoch: u32,
) -> Result<IssuerKey, TokenError> {
    let app_name = app_name(app)?;
    let published = fetch_issuer_key_entity(reader, issuer, app, epoch).await?;
    let spki = published.key.spki();
    if let Some(pinned) = pins.get(issuer, app, epoch)? {
        return if pinned.as_slice() == spki {
            Ok(published.key)
        } else {
            Err(equivocation(issuer, app_name, epoch))
        };
    }
    let created_s = reader
        .block_timestamp(published.created_at)
        .await?
        .ok_or_else(|| {
            TokenError::Ledger(LedgerError::Decode(privsvc_ledger::AnswerError::NoBlock(
                published.created_at,
            )))
        })?;
    let day_start_s = u64::from(epoch) * (DAY_MS / 1000);
    if created_s >= day_start_s && is_established(reader, pins, issuer, app, epoch).await? {
        return Err(TokenError::KeyTooLate {
            issuer,
            app: app_name,
            epoch,
            late_by_s: created_s - day_start_s,
        });
    }
    if pins.pin(issuer, app, epoch, spki)?.as_slice() != spki {
        return Err(equivocation(issuer, app_name, epoch));
    }
    Ok(published.key)
}

/// Whether the issuer had a key for `app` on the day before `epoch` (pinned, or on the ledger).
async fn is_established(
    reader: &dyn LedgerReader,
    pins: &dyn KeyPins,
    issuer: Address,
    app: &str,
    epoch: u32,
) -> Result<bool, TokenError> {
    let Some(previous) = epoch.checked_sub(1) else {
        return Ok(false);
    };
    if pins.get(issuer, app, previous)?.is_some() {
        return Ok(true);
    }
    match fetch_issuer_key_entity(reader, issuer, app, previous).await {
        Ok(_) | Err(TokenError::IssuerEquivocation { .. }) | Err(TokenError::InvalidKey(_)) => {
            Ok(true)
        }
        Err(TokenError::NoIssuerKey { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(feature = "sqlite")]
pub use crate::sqlite_pins::SqliteKeyPins;
