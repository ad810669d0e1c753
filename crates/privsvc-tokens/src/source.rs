//! `TokenSource`: where a client draws the token for a submission.

use std::sync::Arc;

use async_trait::async_trait;
use rand::seq::SliceRandom as _;

use crate::error::TokenError;
use crate::message::{acceptable_epochs, now_ms};
use crate::protocol::TokenRedemption;
use crate::store::{StoredToken, TokenStore};
use crate::wallet::TokenWallet;

/// Default minimum age of a token before it is spent (60 s), so that issuance and spending are
/// not adjacent in time.
pub const DEFAULT_MIN_AGE_MS: u64 = 60_000;

/// A supply of tokens for submissions. Object safe: use it as `Arc<dyn TokenSource>`.
#[async_trait]
pub trait TokenSource: Send + Sync {
    /// One unspent token for `app`, removed from the supply; `None` when no token is ready.
    async fn take(&self, app: &str) -> Result<Option<TokenRedemption>, TokenError>;
    /// Return a token taken by [`TokenSource::take`] whose submission failed before any relayer
    /// saw it (never one a relayer may have received: it could be spent).
    async fn put_back(&self, app: &str, token: TokenRedemption) -> Result<(), TokenError>;
}

/// A [`TokenSource`] over a [`TokenStore`]: hands out tokens of an accepted epoch that are at
/// least `min_age_ms` old, in random order, each once. With a wallet and on-demand allowed, an
/// empty supply is refilled from the issuer right away (the fresh token is then used without
/// waiting, which lets the issuer correlate issuance and submission by time).
pub struct StoreTokenSource {
    store: Arc<dyn TokenStore>,
    min_age_ms: u64,
    on_demand: Option<TokenWallet>,
}

impl StoreTokenSource {
    /// A source over `store` without on-demand issuance.
    pub fn new(store: Arc<dyn TokenStore>, min_age_ms: u64) -> Self {
        StoreTokenSource {
            store,
            min_age_ms,
            on_demand: None,
        }
    }

    /// A source that fetches a token from `wallet`'s issuer when none is ready.
    pub fn with_on_demand(
        store: Arc<dyn TokenStore>,
        min_age_ms: u64,
        wallet: TokenWallet,
    ) -> Self {
        StoreTokenSource {
            store,
            min_age_ms,
            on_demand: Some(wallet),
        }
    }

    /// Take a random token among `candidates` (retrying if a concurrent taker wins one).
    fn take_from(
        &self,
        mut candidates: Vec<StoredToken>,
    ) -> Result<Option<TokenRedemption>, TokenError> {
        candidates.shuffle(&mut rand::thread_rng());
        for t in candidates {
            if self.store.remove(&t.app, &t.nonce)? {
                return Ok(Some(t.redemption()));
            }
        }
        Ok(None)
    }
}

#[async_trait]
impl TokenSource for StoreTokenSource {
    async fn take(&self, app: &str) -> Result<Option<TokenRedemption>, TokenError> {
        let now = now_ms();
        let epochs = acceptable_epochs(now);
        self.store.prune(epochs[1])?;
        let ready: Vec<StoredToken> = self
            .store
            .list(app)?
            .into_iter()
            .filter(|t| {
                epochs.contains(&t.epoch) && now.saturating_sub(t.obtained_ms) >= self.min_age_ms
            })
            .collect();
        if let Some(t) = self.take_from(ready)? {
            return Ok(Some(t));
        }
        let Some(wallet) = &self.on_demand else {
            return Ok(None);
        };
        let (fresh, _) = wallet.acquire_tokens(app, 1, None).await?;
        self.take_from(fresh)
    }

    async fn put_back(&self, app: &str, token: TokenRedemption) -> Result<(), TokenError> {
        token.nonce_bytes()?;
        self.store
            .add(&[StoredToken::from_redemption(app, &token, 0)])
    }
}
