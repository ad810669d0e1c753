//! `TokenSource`: where a client draws the token for a submission.

use std::sync::Arc;

use async_trait::async_trait;
use hmac::{Hmac, Mac};
use rand::seq::SliceRandom as _;
use rand::RngCore as _;
use sha2::Sha256;

use crate::error::TokenError;
use crate::message::{acceptable_epochs, now_ms};
use crate::protocol::TokenRedemption;
use crate::store::{StoredToken, TokenStore};

/// Default minimum age of a token before it is spent (60 s), so that issuance and spending are
/// not adjacent in time.
pub const DEFAULT_MIN_AGE_MS: u64 = 60_000;

/// Default oldest ripening age of a token obtained in the current session (60 minutes): such a
/// token ripens at its own random age between the minimum age and this.
pub const DEFAULT_MAX_RIPE_MS: u64 = 3_600_000;

/// A supply of tokens for submissions. Object safe: use it as `Arc<dyn TokenSource>`.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait TokenSource: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// One unspent token for `app`, removed from the supply, for a write requested at
    /// `requested_ms` (Unix milliseconds): only a token obtained before the write was requested
    /// and ripe now; `None` at once when there is none. A source never waits for a token to
    /// ripen: a token spent the moment it ripens tells the issuer when it was issued.
    async fn take(
        &self,
        app: &str,
        requested_ms: u64,
    ) -> Result<Option<TokenRedemption>, TokenError>;
    /// Return a token taken by [`TokenSource::take`] whose submission failed before any relayer
    /// saw it (never one a relayer may have received: it could be spent).
    async fn put_back(&self, app: &str, token: TokenRedemption) -> Result<(), TokenError>;
}

/// Default longest wait of a write with on-demand issuance (`allow_on_demand`, the app's
/// explicit choice) for the tokens it fetched to ripen (90 s: the default minimum age and some
/// margin).
pub const DEFAULT_RIPE_WAIT_MS: u64 = 90_000;

/// What fetches tokens into the store when the supply is empty and on-demand issuance is
/// allowed: a `TokenWallet`.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait OnDemandIssuer: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// Fetch tokens of `app` from the issuer into the store the source reads (one issue
    /// request of the usual count).
    async fn fetch_into_store(&self, app: &str) -> Result<(), TokenError>;
}

/// When a token obtained at `obtained_ms` ripens, in a session that started at
/// `session_start_ms` with the secret `salt`: a token from an earlier session (obtained before
/// the session started) at `min_age_ms`; a token of this session at its own age drawn
/// uniformly in `[min_age_ms, max_ripe_ms]` from `salt` and its nonce, so that the moment it is
/// spent does not follow from when it was issued.
pub fn ripe_at_ms(
    token: &StoredToken,
    session_start_ms: u64,
    salt: &[u8; 32],
    min_age_ms: u64,
    max_ripe_ms: u64,
) -> u64 {
    let age = if token.obtained_ms < session_start_ms || max_ripe_ms <= min_age_ms {
        min_age_ms
    } else {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(salt).expect("any key length");
        mac.update(b"privsvc ripening v1");
        mac.update(token.app.as_bytes());
        mac.update(token.nonce.as_bytes());
        let h = mac.finalize().into_bytes();
        let x = u64::from_be_bytes(h[..8].try_into().expect("8 bytes"));
        let span = max_ripe_ms - min_age_ms + 1;
        min_age_ms + x % span
    };
    token.obtained_ms.saturating_add(age)
}

/// How the tokens of one session ripen: the session's start, a secret of the session, the
/// minimum age and the oldest ripening age (see [`ripe_at_ms`]).
#[derive(Clone)]
pub struct Ripening {
    /// When the session started (Unix milliseconds).
    pub session_start_ms: u64,
    salt: [u8; 32],
    /// Minimum age of every token.
    pub min_age_ms: u64,
    /// Oldest ripening age of a token obtained in this session.
    pub max_ripe_ms: u64,
}

impl std::fmt::Debug for Ripening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ripening")
            .field("session_start_ms", &self.session_start_ms)
            .field("min_age_ms", &self.min_age_ms)
            .field("max_ripe_ms", &self.max_ripe_ms)
            .finish_non_exhaustive()
    }
}

impl Ripening {
    /// A session starting now, with a fresh secret.
    pub fn starting_now(min_age_ms: u64, max_ripe_ms: u64) -> Self {
        let mut salt = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut salt);
        Ripening {
            session_start_ms: now_ms(),
            salt,
            min_age_ms,
            max_ripe_ms: max_ripe_ms.max(min_age_ms),
        }
    }

    /// When `token` ripens.
    pub fn ripe_at_ms(&self, token: &StoredToken) -> u64 {
        ripe_at_ms(
            token,
            self.session_start_ms,
            &self.salt,
            self.min_age_ms,
            self.max_ripe_ms,
        )
    }

    /// Whether `token` may be spent by a write requested at `requested_ms`, at `now`: obtained
    /// before the write was requested, and ripe.
    pub fn spendable(&self, token: &StoredToken, requested_ms: u64, now: u64) -> bool {
        token.obtained_ms < requested_ms && now >= self.ripe_at_ms(token)
    }
}

/// A [`TokenSource`] over a [`TokenStore`]: hands out tokens of an accepted epoch that were
/// obtained before the write was requested and are ripe ([`Ripening`]: tokens that were in the
/// store when the source was made at `min_age_ms`, later ones at their own random age up to
/// `max_ripe_ms`), in random order, each once. It never waits: with no such token it answers
/// `None` at once. With an on-demand issuer, a take that finds the supply empty starts one
/// issue request in the background (its tokens ripen like any other of the session's).
pub struct StoreTokenSource {
    store: Arc<dyn TokenStore>,
    ripening: Ripening,
    on_demand: Option<Arc<dyn OnDemandIssuer>>,
    /// Serialises on-demand refills, so concurrent writes start one issuance, not many.
    refilling: Arc<std::sync::atomic::AtomicBool>,
}

impl StoreTokenSource {
    /// A source over `store` without on-demand issuance; the session starts now.
    pub fn new(store: Arc<dyn TokenStore>, min_age_ms: u64) -> Self {
        StoreTokenSource {
            store,
            ripening: Ripening::starting_now(min_age_ms, DEFAULT_MAX_RIPE_MS),
            on_demand: None,
            refilling: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        }
    }

    /// A source that starts an issue request through `issuer` (a `TokenWallet` writing into
    /// `store`) when the supply is empty.
    pub fn with_on_demand(
        store: Arc<dyn TokenStore>,
        min_age_ms: u64,
        issuer: impl OnDemandIssuer + 'static,
    ) -> Self {
        StoreTokenSource {
            on_demand: Some(Arc::new(issuer)),
            ..StoreTokenSource::new(store, min_age_ms)
        }
    }

    /// The oldest ripening age of a token obtained in this session (default
    /// [`DEFAULT_MAX_RIPE_MS`]).
    pub fn with_max_ripe_ms(mut self, max_ripe_ms: u64) -> Self {
        self.ripening.max_ripe_ms = max_ripe_ms.max(self.ripening.min_age_ms);
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

    /// Starts one issue request in the background, unless one is under way.
    fn refill_later(&self, app: &str) {
        let Some(issuer) = self.on_demand.clone() else {
            return;
        };
        if self
            .refilling
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let (app, flag) = (app.to_string(), self.refilling.clone());
        drop(privsvc_rt::spawn(async move {
            if let Err(e) = issuer.fetch_into_store(&app).await {
                tracing::warn!(error = %e, "an on-demand token refill failed");
            }
            flag.store(false, std::sync::atomic::Ordering::SeqCst);
        }));
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
    async fn take(
        &self,
        app: &str,
        requested_ms: u64,
    ) -> Result<Option<TokenRedemption>, TokenError> {
        let now = now_ms();
        let usable = self.usable(app, now)?;
        if usable.is_empty() {
            self.refill_later(app);
            return Ok(None);
        }
        let ready: Vec<StoredToken> = usable
            .into_iter()
            .filter(|t| self.ripening.spendable(t, requested_ms, now))
            .collect();
        self.take_from(ready)
    }

    async fn put_back(&self, app: &str, token: TokenRedemption) -> Result<(), TokenError> {
        token.nonce_bytes()?;
        self.store
            .add(&[StoredToken::from_redemption(app, &token, 0)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(nonce: u8, obtained_ms: u64) -> StoredToken {
        StoredToken {
            app: "a".into(),
            epoch: 1,
            nonce: hex::encode([nonce; 32]),
            signature: String::new(),
            obtained_ms,
        }
    }

    #[test]
    fn earlier_sessions_tokens_ripen_at_the_minimum_this_sessions_at_their_own_age() {
        let salt = [7u8; 32];
        let start = 1_000_000;
        let old = token(1, start - 5);
        assert_eq!(
            ripe_at_ms(&old, start, &salt, 60_000, 3_600_000),
            start - 5 + 60_000
        );
        let mut ages = Vec::new();
        for n in 0..200u8 {
            let t = token(n, start + 10);
            let at = ripe_at_ms(&t, start, &salt, 60_000, 3_600_000);
            let age = at - t.obtained_ms;
            assert!((60_000..=3_600_000).contains(&age), "{age}");
            // The same token, the same age.
            assert_eq!(at, ripe_at_ms(&t, start, &salt, 60_000, 3_600_000));
            ages.push(age);
        }
        // Spread over the range, not stuck at the minimum.
        let low = ages.iter().filter(|a| **a < 1_830_000).count();
        assert!((60..140).contains(&low), "{low} of 200 in the lower half");
        // Another session's secret gives other ages.
        let other = ripe_at_ms(&token(3, start + 10), start, &[8u8; 32], 60_000, 3_600_000);
        let same = ripe_at_ms(&token(3, start + 10), start, &salt, 60_000, 3_600_000);
        assert_ne!(other, same);
    }

    #[tokio::test]
    async fn a_source_never_waits_and_spends_only_tokens_obtained_before_the_request() {
        let store = crate::memory_store();
        let now = now_ms();
        let epoch = crate::epoch_of(now);
        let mut old = token(1, now - 120_000);
        old.epoch = epoch;
        let mut fresh = token(2, now - 1_000);
        fresh.epoch = epoch;
        store.add(&[old.clone(), fresh.clone()]).unwrap();
        let source = StoreTokenSource::new(store.clone(), 60_000);
        // A write requested before the old token was obtained gets nothing, at once.
        let started = std::time::Instant::now();
        assert!(source.take("a", now - 200_000).await.unwrap().is_none());
        assert!(started.elapsed() < std::time::Duration::from_millis(100));
        // Requested now: the ripe one; the unripe one is never handed out, nor waited for.
        let t = source
            .take("a", now)
            .await
            .unwrap()
            .expect("the ripe token");
        assert_eq!(t.nonce, old.nonce);
        let started = std::time::Instant::now();
        assert!(source.take("a", now).await.unwrap().is_none());
        assert!(started.elapsed() < std::time::Duration::from_millis(100));
        assert_eq!(store.list("a").unwrap().len(), 1);
    }
}
