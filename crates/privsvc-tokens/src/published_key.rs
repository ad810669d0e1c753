//! Reading an issuer's key for (app, epoch) from the ledger, and detecting equivocation.

use alloy_primitives::Address;
use privsvc_ledger::LedgerReader;

use crate::error::TokenError;
use crate::key_entity::{issuer_key_options, issuer_key_payload, issuer_key_query};
use crate::message::app_name;
use crate::suite::{import_issuer_key, IssuerKey};

/// Upper bound on result pages read for one key lookup (200 entities a page).
const MAX_PAGES: usize = 10;

/// The issuer's key for (`app`, `epoch`), read from the ledger only (never from the issuer's
/// HTTP answer).
///
/// Fails with [`TokenError::InvalidApp`] when `app` is not an app name (1 to 128 bytes), with
/// [`TokenError::NoIssuerKey`] when there is no key and with
/// [`TokenError::IssuerEquivocation`] when the issuer published two distinct keys (a payload
/// that is not a valid key counts as a distinct key). It applies no timing rule and no pin:
/// relayers and clients use [`crate::accept_issuer_key`].
pub async fn fetch_issuer_key(
    reader: &dyn LedgerReader,
    issuer: Address,
    app: &str,
    epoch: u32,
) -> Result<IssuerKey, TokenError> {
    Ok(fetch_issuer_key_entity(reader, issuer, app, epoch)
        .await?
        .key)
}

/// The issuer's key for (`app`, `epoch`) as on the ledger, with when it was created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedKey {
    /// The key.
    pub key: IssuerKey,
    /// The earliest creation block (`$createdAt`) among the issuer's entities holding it.
    pub created_at: u64,
}

/// Like [`fetch_issuer_key`], also returning the creation block of the key's entity (the
/// earliest, when the issuer published the same key more than once).
pub async fn fetch_issuer_key_entity(
    reader: &dyn LedgerReader,
    issuer: Address,
    app: &str,
    epoch: u32,
) -> Result<PublishedKey, TokenError> {
    let app_name = app_name(app)?;
    let expression = issuer_key_query(issuer, app, epoch)?;
    let mut options = issuer_key_options();
    let mut distinct: Vec<(Result<IssuerKey, TokenError>, u64)> = Vec::new();
    for _ in 0..MAX_PAGES {
        let page = reader.query(&expression, &options).await?;
        // Pin later pages to the block of the first one.
        options.at_block = Some(page.block_number);
        for entity in &page.entities {
            let Some(spki) = issuer_key_payload(entity, issuer, app, epoch) else {
                continue;
            };
            let created = entity.created_at.unwrap_or(page.block_number);
            let key = import_issuer_key(&spki);
            let seen = distinct.iter_mut().find(|(k, _)| match (k, &key) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            });
            match seen {
                Some((_, at)) => *at = (*at).min(created),
                None => distinct.push((key, created)),
            }
        }
        match page.cursor {
            Some(c) => options.cursor = Some(c),
            None => break,
        }
    }
    match distinct.len() {
        0 => Err(TokenError::NoIssuerKey {
            issuer,
            app: app_name,
            epoch,
        }),
        1 => {
            let (key, created_at) = distinct.pop().expect("one key");
            Ok(PublishedKey {
                key: key?,
                created_at,
            })
        }
        keys => Err(TokenError::IssuerEquivocation {
            issuer,
            app: app_name,
            epoch,
            keys,
            pinned: false,
        }),
    }
}
