//! Token handling for a client: a caller-given `TokenSource`, or auto mode (one `TokenWallet`
//! per verified issuer). In auto mode tokens are fetched on the session's schedule (refills at
//! random moments when the store runs low), never because of a write; a write spends only a
//! token obtained before it was requested and ripe: tokens from earlier sessions at
//! `token_min_age_ms`, tokens of this session at their own random age up to
//! `token_max_ripe_ms` (docs/PROTOCOL.md §8.3). Issuer keys (and the issuers' heartbeats) are
//! read on the session's timer at most once an hour, and no issue request is sent within a
//! tail interval after a key read. Every issue request asks the same count.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use alloy_primitives::Address;
use privsvc_attributes::AppName;
use privsvc_ledger::LedgerReader;
use privsvc_ohttp::{HttpTransport, Transport};
use privsvc_tokens::{
    memory_store, KeyPins, MemoryKeyPins, TokenRedemption, TokenStore, TokenWallet,
    TokenWalletOptions,
};
use privsvc_vault::Wallet;
use rand::seq::SliceRandom as _;
use rand::Rng as _;

use crate::discover::heartbeat_relayers;
use crate::error::{PrivsvcError, UnusableIssuer};
use crate::options::{ClientOptions, TokenSupply};
use crate::protocol::InfoResponse;
use crate::rng::ClientRng;

/// Where the client's tokens come from.
pub(crate) struct TokenManager {
    mode: TokenSupply,
    wallet: Option<Arc<dyn Wallet>>,
    reader: Arc<dyn LedgerReader>,
    store: Arc<dyn TokenStore>,
    pins: Arc<dyn KeyPins>,
    attestation: Option<String>,
    /// How this session's tokens ripen.
    ripening: privsvc_tokens::Ripening,
    ripe_wait_ms: u64,
    /// How long an issue request waits after a key read made for it (the tail interval's
    /// longest: `SessionSchedule::tail.1`).
    key_read_quiet: std::time::Duration,
    allow_on_demand: bool,
    rng: Arc<ClientRng>,
    /// An issuer the refills found equivocating (reported by the writes that find no token).
    equivocation: Mutex<Option<(Address, AppName, u32, bool)>>,
    /// How issuer calls travel: through the client's OHTTP transport when it has a relay, else
    /// directly with the client's `fetch`; `None`: the token wallet's default (direct HTTP).
    issuer_transport: Option<Arc<dyn Transport>>,
    /// Wallets of verified issuers, by (issuer, issuer URL).
    wallets: Mutex<HashMap<(Address, String), TokenWallet>>,
}

impl TokenManager {
    /// `transport` is the client's transport to relayers; issuer calls use it when the client
    /// has an OHTTP relay (the issuer's relayer serves its issuer routes through `/v1/ohttp`).
    pub(crate) fn new(
        options: &ClientOptions,
        reader: Arc<dyn LedgerReader>,
        transport: Arc<dyn Transport>,
        rng: Arc<ClientRng>,
    ) -> Self {
        let store = options.token_store.clone().unwrap_or_else(memory_store);
        Self {
            mode: options.tokens.clone(),
            wallet: options.wallet.clone(),
            reader,
            pins: options
                .token_pins
                .clone()
                .or_else(|| store.key_pins())
                .unwrap_or_else(|| Arc::new(MemoryKeyPins::default())),
            store,
            attestation: options.token_attestation.clone(),
            ripening: privsvc_tokens::Ripening::starting_now(
                options.token_min_age_ms,
                options.token_max_ripe_ms,
            ),
            ripe_wait_ms: options.token_ripe_wait_ms,
            key_read_quiet: options.schedule.tail.1,
            allow_on_demand: options.allow_on_demand,
            rng,
            equivocation: Mutex::new(None),
            issuer_transport: match (&options.ohttp_relay, &options.fetch) {
                (Some(_), _) => Some(transport),
                (None, Some(fetch)) => {
                    Some(Arc::new(HttpTransport::with_fetch(fetch.clone())) as _)
                }
                (None, None) => None,
            },
            wallets: Mutex::new(HashMap::new()),
        }
    }

    /// The token wallet of the issuer named in `info` (auto mode with a wallet only), once the
    /// issuer is verified: its `issuerUrl` must be the URL of the issuer's own live heartbeat.
    /// Nothing is sent to the issuer before that.
    async fn wallet_for(&self, info: &InfoResponse) -> Result<TokenWallet, PrivsvcError> {
        let user_wallet = self.wallet.clone().ok_or_else(|| {
            PrivsvcError::Config(
                "a relayer requires tokens but the client has no wallet to fetch them: pass `tokens(TokenSupply::Source(..))`".into(),
            )
        })?;
        let (Some(issuer), Some(url)) = (&info.issuer, &info.issuer_url) else {
            return Err(PrivsvcError::IssuerNotUsable(UnusableIssuer::NotNamed));
        };
        let issuer: Address = issuer
            .parse()
            .map_err(|e| PrivsvcError::IssuerNotUsable(UnusableIssuer::BadAddress(e)))?;
        let issuer_url = privsvc_ohttp::RelayerUrl::parse(url)
            .map_err(|e| PrivsvcError::IssuerNotUsable(UnusableIssuer::BadUrl(e)))?;
        let url = issuer_url.as_str().to_string();
        let key = (issuer, url.clone());
        if let Some(w) = self.lock().get(&key) {
            return Ok(w.clone());
        }
        let verified = heartbeat_relayers(self.reader.as_ref())
            .await?
            .iter()
            .any(|hb| hb.creator == issuer && hb.url == url);
        if !verified {
            return Err(PrivsvcError::IssuerNotUsable(UnusableIssuer::NoHeartbeat {
                issuer,
                url: issuer_url,
            }));
        }
        let mut o = TokenWalletOptions::new(user_wallet, self.reader.clone(), issuer, url);
        o.store = self.store.clone();
        o.pins = self.pins.clone();
        o.allow_on_demand = false;
        o.attestation = self.attestation.clone();
        o.min_age_ms = self.ripening.min_age_ms;
        o.max_ripe_ms = self.ripening.max_ripe_ms;
        o.quiet_after_key_read = self.key_read_quiet;
        if let Some(t) = &self.issuer_transport {
            o.transport = t.clone();
        }
        let w = TokenWallet::new(o);
        Ok(self.lock().entry(key).or_insert(w).clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Address, String), TokenWallet>> {
        self.wallets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The token of a submission to a relayer with `info`, for a write requested at
    /// `requested_ms`: a caller's source is told when the write was requested (it never
    /// waits); in auto mode only a token obtained before the write was requested and ripe now
    /// is spent, else `NoRipeToken` at once. With `allow_on_demand`, a write that finds none
    /// fetches tokens and spends one of them once `min_age_ms` old (the app's explicit choice;
    /// a timing risk).
    pub(crate) async fn take(
        &self,
        app: &AppName,
        info: &InfoResponse,
        requested_ms: u64,
    ) -> Result<TokenRedemption, PrivsvcError> {
        let not_ready = || PrivsvcError::NoRipeToken { app: app.clone() };
        let app = app.as_str();
        if let TokenSupply::Source(s) = &self.mode {
            return s.take(app, requested_ms).await?.ok_or_else(not_ready);
        }
        if let Some(t) = self.take_ripe(app, requested_ms)? {
            return Ok(t);
        }
        if !(self.allow_on_demand && self.wallet.is_some()) {
            // An issuer caught equivocating is named as such, not as a missing token.
            let equivocation = self
                .equivocation
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            return Err(match equivocation {
                Some((issuer, app, epoch, pinned)) => PrivsvcError::IssuerEquivocation {
                    issuer,
                    app,
                    epoch,
                    pinned,
                },
                None => not_ready(),
            });
        }
        let wallet = self.wallet_for(info).await?;
        wallet
            .acquire(app, privsvc_tokens::MAX_TOKENS_PER_REQUEST, None)
            .await?;
        // Spent only once ripe: wait for the fresh tokens' minimum age (bounded).
        let min_age = self.ripening.min_age_ms;
        let deadline = privsvc_rt::Instant::now()
            + Duration::from_millis(min_age.saturating_add(self.ripe_wait_ms));
        loop {
            if let Some(t) = self.take_aged(app, min_age)? {
                return Ok(t);
            }
            if privsvc_rt::Instant::now() >= deadline {
                return Err(not_ready());
            }
            privsvc_rt::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A random token of `app` for an accepted epoch that a write requested at `requested_ms`
    /// may spend now (obtained before it, ripe), removed from the store.
    fn take_ripe(
        &self,
        app: &str,
        requested_ms: u64,
    ) -> Result<Option<TokenRedemption>, PrivsvcError> {
        let now = privsvc_rt::now_unix_ms();
        self.take_where(app, |t| self.ripening.spendable(t, requested_ms, now))
    }

    /// A random token of `app` at least `min_age_ms` old (on-demand issuance only).
    fn take_aged(
        &self,
        app: &str,
        min_age_ms: u64,
    ) -> Result<Option<TokenRedemption>, PrivsvcError> {
        let now = privsvc_rt::now_unix_ms();
        self.take_where(app, |t| now.saturating_sub(t.obtained_ms) >= min_age_ms)
    }

    fn take_where(
        &self,
        app: &str,
        spendable: impl Fn(&privsvc_tokens::StoredToken) -> bool,
    ) -> Result<Option<TokenRedemption>, PrivsvcError> {
        let now = privsvc_rt::now_unix_ms();
        let epochs = privsvc_tokens::acceptable_epochs(now);
        self.store.prune(epochs[1])?;
        let mut ripe: Vec<_> = self
            .store
            .list(app)?
            .into_iter()
            .filter(|t| epochs.contains(&t.epoch))
            .filter(|t| spendable(t))
            .collect();
        self.rng.with(|r| ripe.shuffle(r));
        for t in ripe {
            if self.store.remove(&t.app, &t.nonce)? {
                return Ok(Some(t.redemption()));
            }
        }
        Ok(None)
    }

    /// Tokens of `app` for an accepted epoch that a write requested now could spend (obtained
    /// and ripe; none with a caller's token source).
    pub(crate) fn ripe(&self, app: &str) -> usize {
        if !matches!(self.mode, TokenSupply::Auto) {
            return 0;
        }
        let now = privsvc_rt::now_unix_ms();
        let epochs = privsvc_tokens::acceptable_epochs(now);
        self.store
            .list(app)
            .map(|l| {
                l.iter()
                    .filter(|t| epochs.contains(&t.epoch))
                    .filter(|t| self.ripening.spendable(t, now.saturating_add(1), now))
                    .count()
            })
            .unwrap_or(0)
    }

    /// Tokens of `app` for an accepted epoch in the store, ripe or not.
    fn usable(&self, app: &str) -> usize {
        let epochs = privsvc_tokens::acceptable_epochs(privsvc_rt::now_unix_ms());
        self.store
            .list(app)
            .map(|l| l.iter().filter(|t| epochs.contains(&t.epoch)).count())
            .unwrap_or(0)
    }

    /// The session's token schedule. On a timer like the tail's (a random wait in
    /// `schedule.tail` each time): verifies each issuer of `infos` (its `issuerUrl` must be its
    /// own live heartbeat's) and reads its key of the day when it has not been read within the
    /// hour. Refills at a random moment of `schedule.first_refill`, then of
    /// `schedule.later_refill` each time: when the store holds fewer than
    /// `schedule.refill_below` usable tokens of `app`, one issue request of the per-request
    /// maximum to each issuer (skipped when the issuer said less than that is left of today's
    /// quota), never within one tail interval after a key read. Runs until aborted.
    pub(crate) async fn run_refills(
        self: Arc<Self>,
        app: String,
        infos: Vec<InfoResponse>,
        schedule: crate::SessionSchedule,
        rng: Arc<ClientRng>,
    ) {
        let issuers = distinct_issuers(infos);
        if issuers.is_empty() || !self.fetches() {
            return;
        }
        let start = privsvc_rt::Instant::now();
        let mut next = start + rng.between(schedule.tail);
        let mut refill_at = start + rng.between(schedule.first_refill);
        let mut last_key_read: Option<privsvc_rt::Instant> = None;
        // When each issuer's key was last read (or tried: a new app's first key does not
        // exist until its first issue request makes the issuer publish it).
        let mut key_tried: HashMap<usize, privsvc_rt::Instant> = HashMap::new();
        // What each issuer said is left of today's quota, by epoch.
        let mut left: HashMap<usize, (u32, u32)> = HashMap::new();
        loop {
            rng.tick(&mut next, schedule.tail).await;
            for (i, info) in issuers.iter().enumerate() {
                let Ok(w) = self.wallet_for(info).await else {
                    continue;
                };
                let fresh =
                    |at: &privsvc_rt::Instant| at.elapsed() < privsvc_tokens::KEY_READ_INTERVAL;
                let stale = !w.key_read_at(&app).is_some_and(|at| fresh(&at))
                    && !key_tried.get(&i).is_some_and(fresh);
                if stale {
                    let now = privsvc_rt::Instant::now();
                    last_key_read = Some(now);
                    key_tried.insert(i, now);
                    if let Err(e) = w.read_key(&app).await {
                        tracing::debug!(error = %e, "the issuer's key of the day cannot be read yet");
                        self.note_equivocation(&PrivsvcError::from(e));
                    }
                }
            }
            let now = privsvc_rt::Instant::now();
            if now < refill_at {
                continue;
            }
            // Never right after a key read: the issuer and the RPC together must not see an
            // issue request follow a read of its key.
            if last_key_read.is_some_and(|at| now.duration_since(at) < schedule.tail.1) {
                continue;
            }
            refill_at = now + rng.between(schedule.later_refill);
            if self.usable(&app) >= schedule.refill_below {
                continue;
            }
            let epoch = privsvc_tokens::epoch_of(privsvc_rt::now_unix_ms());
            for (i, info) in issuers.iter().enumerate() {
                if matches!(left.get(&i), Some((e, n)) if *e == epoch && (*n as usize) < MAX_PER_REQUEST)
                {
                    continue;
                }
                let got = match self.wallet_for(info).await {
                    Ok(w) => w
                        .acquire(&app, MAX_PER_REQUEST, None)
                        .await
                        .map_err(PrivsvcError::from),
                    Err(e) => Err(e),
                };
                match got {
                    Ok(a) => {
                        left.insert(i, (epoch, a.remaining));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "a scheduled token refill failed");
                        self.note_equivocation(&e);
                    }
                }
            }
        }
    }
}

/// Tokens one issue request carries, at most.
const MAX_PER_REQUEST: usize = privsvc_tokens::MAX_TOKENS_PER_REQUEST;

/// The relayers of `infos` that require tokens, one per (issuer, issuer URL).
fn distinct_issuers(infos: Vec<InfoResponse>) -> Vec<InfoResponse> {
    let mut issuers: Vec<InfoResponse> = Vec::new();
    for info in infos.into_iter().filter(|i| i.tokens_required) {
        if !issuers
            .iter()
            .any(|i| i.issuer == info.issuer && i.issuer_url == info.issuer_url)
        {
            issuers.push(info);
        }
    }
    issuers
}

impl TokenManager {
    /// Whether this manager fetches tokens itself (auto mode with a wallet).
    pub(crate) fn fetches(&self) -> bool {
        matches!(self.mode, TokenSupply::Auto) && self.wallet.is_some()
    }

    /// Remembers an issuer found equivocating, for the writes that find no token to name it.
    fn note_equivocation(&self, e: &PrivsvcError) {
        if let PrivsvcError::IssuerEquivocation {
            issuer,
            app,
            epoch,
            pinned,
        } = e
        {
            *self.equivocation.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((*issuer, app.clone(), *epoch, *pinned));
        }
    }

    /// `prefetch_later`, spread (docs/API.md §2.6): at least `count` tokens of `app` from the
    /// issuer of each relayer in `infos` that requires tokens, in issue requests of the usual
    /// count (the per-request maximum), each at its own moment of [`prefetch_moments`]. An
    /// issuer is verified (its heartbeat) only when its first moment comes; a key not read
    /// within the hour is read then, and the request waits one tail interval after the read. A
    /// failed acquisition is logged and the others still run. Returns how many tokens were
    /// added to the store.
    pub(crate) async fn prefetch(
        self: Arc<Self>,
        app: String,
        infos: Vec<InfoResponse>,
        count: usize,
        within: Duration,
        tail_quiet: Duration,
    ) -> usize {
        let issuers = distinct_issuers(infos);
        if issuers.is_empty() || !self.fetches() {
            return 0;
        }
        let start = privsvc_rt::Instant::now();
        let mut added = 0;
        let requests = count.div_ceil(MAX_PER_REQUEST);
        for moment in prefetch_moments(requests, within) {
            privsvc_rt::sleep(
                (start + moment).saturating_duration_since(privsvc_rt::Instant::now()),
            )
            .await;
            for info in &issuers {
                let got = match self.wallet_for(info).await {
                    Ok(w) => {
                        if w.key_read_at(&app)
                            .is_none_or(|at| at.elapsed() >= privsvc_tokens::KEY_READ_INTERVAL)
                        {
                            let _ = w.read_key(&app).await;
                            privsvc_rt::sleep(tail_quiet).await;
                        }
                        w.acquire(&app, MAX_PER_REQUEST, None)
                            .await
                            .map_err(PrivsvcError::from)
                    }
                    Err(e) => Err(e),
                };
                match got {
                    Ok(a) => added += a.count,
                    Err(e) => {
                        tracing::warn!(error = %e, "a prefetch of tokens failed; writes fetch on demand")
                    }
                }
            }
        }
        added
    }
}

/// The moments (offsets from now, increasing) of a prefetch of `count` tokens within
/// `within`: one uniformly random moment in each of `count` equal parts of the window. The
/// issuer sees requests at random times unrelated to writes and never a burst.
pub(crate) fn prefetch_moments(count: usize, within: Duration) -> Vec<Duration> {
    if count == 0 {
        return Vec::new();
    }
    let slot = within.as_nanos() / count as u128;
    let mut rng = rand::thread_rng();
    (0..count as u128)
        .map(|i| {
            let offset = if slot == 0 { 0 } else { rng.gen_range(0..slot) };
            let nanos = i * slot + offset;
            Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_moments_fall_one_in_each_part_of_the_window() {
        let within = Duration::from_secs(600);
        for _ in 0..100 {
            let m = prefetch_moments(6, within);
            assert_eq!(m.len(), 6);
            for (i, t) in m.iter().enumerate() {
                assert!(*t >= within / 6 * i as u32 && *t < within / 6 * (i as u32 + 1));
            }
        }
        assert!(prefetch_moments(0, within).is_empty());
        assert_eq!(prefetch_moments(3, Duration::ZERO), vec![Duration::ZERO; 3]);
    }
}
