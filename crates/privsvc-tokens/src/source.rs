//! `TokenSource`: where a client draws the token for a submission.

use std::sync::Arc;

use async_trait::async_trait;
use rand::seq::SliceRandom as _;

use crate::error::TokenError;
use crate::message::{acceptable_epochs, now_ms};
use crate::protocol::TokenRedemption;
use crate::store::{StoredToken, TokenStore};

/// Default minimum age of a token before it is spent (60 s), so that issuance and spending are
/// not adjacent in time.
pub const DEFAULT_MIN_AGE_MS: u64 = 60_000;

/// A supply of tokens for submissions. Object safe: use it as `Arc<dyn TokenSource>`.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait TokenSource: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// One unspent token for `app`, removed from the supply; `None` when no token is ready.
    async fn take(&self, app: &str) -> Result<Option<TokenRedemption>, TokenError>;
    /// Return a token taken by [`TokenSource::take`] whose submission failed before any relayer
    /// saw it (never one a relayer may have received: it could be spent).
    async fn put_back(&self, app: &str, token: TokenRedemption) -> Result<(), TokenError>;
}

/// Default longest wait of [`TokenSource::take`] for a token to ripen (90 s: the default
/// minimum age and some margin).
pub const DEFAULT_RIPE_WAIT_MS: u64 = 90_000;

/// What fetches tokens into the store when the supply is empty and on-demand issuance is
/// allowed: a `TokenWallet`.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait OnDemandIssuer: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// Fetch `count` tokens of `app` from the issuer into the store the source reads.
    async fn fetch_into_store(&self, app: &str, count: usize) -> Result<(), TokenError>;
}

/// Tokens fetched when the supply of an app is empty and on-demand issuance is allowed.
pub const ON_DEMAND_TOKENS: usize = 5;

/// A [`TokenSource`] over a [`TokenStore`]: hands out tokens of an accepted epoch that are at
/// least `min_age_ms` old (their own age since they were obtained), in random order, each once.
/// With no ripe token it waits, at most `max_wait`, for the youngest-but-one to ripen; with a
/// wallet and on-demand allowed, an empty supply is refilled from the issuer first, and the
/// fresh tokens are spent only once ripe too: a write never spends a token issued for it.
pub struct StoreTokenSource {
    store: Arc<dyn TokenStore>,
    min_age_ms: u64,
    max_wait_ms: u64,
    on_demand: Option<Box<dyn OnDemandIssuer>>,
    /// Serialises on-demand refills, so concurrent writes start one issuance, not many.
    refill: tokio::sync::Mutex<()>,
}

impl StoreTokenSource {
    /// A source over `store` without on-demand issuance.
    pub fn new(store: Arc<dyn TokenStore>, min_age_ms: u64) -> Self {
        StoreTokenSource {
            store,
            min_age_ms,
            max_wait_ms: DEFAULT_RIPE_WAIT_MS,
            on_demand: None,
            refill: tokio::sync::Mutex::new(()),
        }
    }

    /// A source that fetches tokens through `issuer` (a `TokenWallet` writing into `store`)
    /// when none is ready.
    pub fn with_on_demand(
        store: Arc<dyn TokenStore>,
        min_age_ms: u64,
        issuer: impl OnDemandIssuer + 'static,
    ) -> Self {
        StoreTokenSource {
            store,
            min_age_ms,
            max_wait_ms: DEFAULT_RIPE_WAIT_MS,
            on_demand: Some(Box::new(issuer)),
            refill: tokio::sync::Mutex::new(()),
        }
    }

    /// The longest [`TokenSource::take`] waits for a token to ripen (default 90 s; 0 = never
    /// wait).
    pub fn with_max_wait_ms(mut self, max_wait_ms: u64) -> Self {
        self.max_wait_ms = max_wait_ms;
        self
    }

    /// Tokens of `app` for an accepted epoch at `now`.
    fn usable(&self, app: &str, now: u64) -> Result<Vec<StoredToken>, TokenError> {
        let epochs = acceptable_epochs(now);
        self.store.prune(epochs[1])?;
        Ok(self
            .store
            .list(app)?
            .into_iter()
            .filter(|t| epochs.contains(&t.epoch))
            .collect())
    }

    /// When the supply of `app` is empty, fetch [`ON_DEMAND_TOKENS`] from the issuer into the
    /// store (never handed out before they ripen).
    async fn refill_if_empty(&self, app: &str) -> Result<(), TokenError> {
        let Some(issuer) = &self.on_demand else {
            return Ok(());
        };
        let _guard = self.refill.lock().await;
        if !self.usable(app, now_ms())?.is_empty() {
            return Ok(());
        }
        issuer.fetch_into_store(app, ON_DEMAND_TOKENS).await
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

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl TokenSource for StoreTokenSource {
    async fn take(&self, app: &str) -> Result<Option<TokenRedemption>, TokenError> {
        let deadline = now_ms().saturating_add(self.max_wait_ms);
        // Refills per take, at most 2 (concurrent takers may empty the store in between).
        let mut refills = 0;
        loop {
            let now = now_ms();
            let (ready, unripe): (Vec<StoredToken>, Vec<StoredToken>) = self
                .usable(app, now)?
                .into_iter()
                .partition(|t| now.saturating_sub(t.obtained_ms) >= self.min_age_ms);
            if let Some(t) = self.take_from(ready)? {
                return Ok(Some(t));
            }
            if unripe.is_empty() {
                if self.on_demand.is_none() || refills == 2 {
                    return Ok(None);
                }
                refills += 1;
                self.refill_if_empty(app).await?;
                if self.usable(app, now_ms())?.is_empty() {
                    return Ok(None);
                }
                continue;
            }
            let ripe_at = unripe
                .iter()
                .map(|t| t.obtained_ms.saturating_add(self.min_age_ms))
                .min()
                .unwrap_or(u64::MAX);
            if ripe_at > deadline {
                return Ok(None);
            }
            let wait = ripe_at.saturating_sub(now_ms()).max(1);
            privsvc_rt::sleep(std::time::Duration::from_millis(wait)).await;
        }
    }

    async fn put_back(&self, app: &str, token: TokenRedemption) -> Result<(), TokenError> {
        token.nonce_bytes()?;
        self.store
            .add(&[StoredToken::from_redemption(app, &token, 0)])
    }
}
