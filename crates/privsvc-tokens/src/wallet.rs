//! The client token wallet: obtains tokens from an issuer with the user's wallet, keeps them in
//! a store and hands them out through a [`TokenSource`].

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::Address;
use base64::Engine as _;
use privsvc_ledger::LedgerReader;
use privsvc_rt::{HttpTransport, RelayerRequest, RelayerResponse, Transport};
use privsvc_vault::Wallet;
use rand::{Rng as _, RngCore as _};

use crate::acceptance::{accept_issuer_key, KeyPins, MemoryKeyPins};
use crate::error::TokenError;
use crate::message::{epoch_of, now_ms, token_message, NONCE_BYTES};
use crate::protocol::issuance_message;
use crate::protocol::{
    ErrorBody, IssueRequest, IssueResponse, IssuerKeyResponse, TokenRedemption,
    MAX_TOKENS_PER_REQUEST,
};
use crate::source::{
    OnDemandIssuer, StoreTokenSource, TokenSource, DEFAULT_MAX_RIPE_MS, DEFAULT_MIN_AGE_MS,
};
use crate::store::{memory_store, StoredToken, TokenStore};
use crate::suite::{token_suite, IssuerKey};

/// Default window of [`TokenWallet::prefetch_later`]: 6 hours.
pub const DEFAULT_PREFETCH_WITHIN: Duration = Duration::from_secs(6 * 3600);
/// How long to wait for the issuer's key entity to become visible through the reader.
const KEY_VISIBLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a key read from the ledger is used before it is read again (keys change daily).
pub const KEY_READ_INTERVAL: Duration = Duration::from_secs(3600);
/// How often an issue request whose answer was lost is sent again, the same signed request
/// (the issuer answers a replay from its memory, at no cost to the quota).
const ISSUE_ATTEMPTS: usize = 3;

/// Settings of a [`TokenWallet`].
#[derive(Clone)]
#[non_exhaustive]
pub struct TokenWalletOptions {
    /// Signs issuance requests.
    pub wallet: Arc<dyn Wallet>,
    /// Reads issuer keys from the ledger.
    pub reader: Arc<dyn LedgerReader>,
    /// The issuer's address (creator of its key entities).
    pub issuer: Address,
    /// Base URL of the issuer (a relayer's `issuerUrl`), without trailing `/v1/...`.
    pub issuer_url: String,
    /// Where tokens wait; default [`memory_store`].
    pub store: Arc<dyn TokenStore>,
    /// Let the source start an issue request (in the background) when the store has none for
    /// the app (default false). The tokens are never spent by the write that caused the fetch:
    /// that write gets none.
    pub allow_on_demand: bool,
    /// Attestation code sent when [`TokenWallet::acquire`] is given none.
    pub attestation: Option<String>,
    /// Minimum age of a token before it is spent (default 60000 ms), counted from when it was
    /// obtained.
    pub min_age_ms: u64,
    /// Oldest ripening age of a token obtained while the source lives (default 3600000 ms):
    /// each ripens at its own random age between `min_age_ms` and this.
    pub max_ripe_ms: u64,
    /// Chain id named in issuance messages; `None` (default) = the reader's chain id.
    pub chain_id: Option<u64>,
    /// First key accepted per (issuer, app, epoch) (default: in memory, [`MemoryKeyPins`]).
    pub pins: Arc<dyn KeyPins>,
    /// Carries the calls to the issuer (default: [`HttpTransport`], direct HTTP that never
    /// follows redirects; a client passes its own relayer transport, OHTTP through its relay).
    pub transport: Arc<dyn Transport>,
    /// How long an acquisition waits after reading the issuer's key from the ledger itself
    /// (no key read by [`TokenWallet::read_key`] within [`KEY_READ_INTERVAL`]) before it sends
    /// the issue request (default zero). A private client sets its tail interval, so that the
    /// RPC and the issuer never see an issue request follow a read of its key by one round
    /// trip (docs/PROTOCOL.md §8.4).
    pub quiet_after_key_read: Duration,
}

impl TokenWalletOptions {
    /// Options with the defaults: memory store, no on-demand issuance, no attestation code,
    /// minimum age 60 s.
    pub fn new(
        wallet: Arc<dyn Wallet>,
        reader: Arc<dyn LedgerReader>,
        issuer: Address,
        issuer_url: impl Into<String>,
    ) -> Self {
        TokenWalletOptions {
            wallet,
            reader,
            issuer,
            issuer_url: issuer_url.into(),
            store: memory_store(),
            allow_on_demand: false,
            attestation: None,
            min_age_ms: DEFAULT_MIN_AGE_MS,
            max_ripe_ms: DEFAULT_MAX_RIPE_MS,
            chain_id: None,
            pins: Arc::new(MemoryKeyPins::default()),
            transport: Arc::new(HttpTransport::default()),
            quiet_after_key_read: Duration::ZERO,
        }
    }
}

/// The result of one acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    /// Tokens added to the store.
    pub count: usize,
    /// Tokens the issuer says the wallet may still obtain today.
    pub remaining: u32,
}

/// The keys a wallet read from the ledger, by (app, epoch), with when they were read.
type KeyCache = std::collections::HashMap<(String, u32), (IssuerKey, privsvc_rt::Instant)>;

/// Client-side token handling (docs/API.md §3.6: `TokenWallet`). Cheap to clone.
#[derive(Clone)]
pub struct TokenWallet {
    inner: Arc<TokenWalletOptions>,
    chain_id: Arc<tokio::sync::OnceCell<u64>>,
    keys: Arc<std::sync::Mutex<KeyCache>>,
}

impl TokenWallet {
    /// A wallet with `options`.
    pub fn new(options: TokenWalletOptions) -> Self {
        TokenWallet {
            inner: Arc::new(options),
            chain_id: Arc::new(tokio::sync::OnceCell::new()),
            keys: Arc::new(std::sync::Mutex::new(KeyCache::new())),
        }
    }

    /// Reads today's key of `app` from the ledger (accepted by the rules of
    /// [`accept_issuer_key`], pinned) and keeps it: issue requests within
    /// [`KEY_READ_INTERVAL`] use it without reading the ledger again. A client calls this on
    /// its own timer, so that no issue request follows a key read at once.
    pub async fn read_key(&self, app: &str) -> Result<(), TokenError> {
        let o = &self.inner;
        let epoch = epoch_of(now_ms());
        let key =
            accept_issuer_key(o.reader.as_ref(), o.pins.as_ref(), o.issuer, app, epoch).await?;
        self.keep_key(app, epoch, key);
        Ok(())
    }

    /// When the key of `app` for today was last read, if it is kept.
    pub fn key_read_at(&self, app: &str) -> Option<privsvc_rt::Instant> {
        let epoch = epoch_of(now_ms());
        self.lock_keys()
            .get(&(app.to_string(), epoch))
            .map(|(_, at)| *at)
    }

    fn keep_key(&self, app: &str, epoch: u32, key: IssuerKey) {
        self.lock_keys()
            .insert((app.to_string(), epoch), (key, privsvc_rt::Instant::now()));
    }

    /// The kept key of (`app`, `epoch`) when it was read within [`KEY_READ_INTERVAL`].
    fn kept_key(&self, app: &str, epoch: u32) -> Option<IssuerKey> {
        self.lock_keys()
            .get(&(app.to_string(), epoch))
            .filter(|(_, at)| at.elapsed() < KEY_READ_INTERVAL)
            .map(|(k, _)| k.clone())
    }

    fn lock_keys(&self) -> std::sync::MutexGuard<'_, KeyCache> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The settings in use.
    pub fn options(&self) -> &TokenWalletOptions {
        &self.inner
    }

    /// Fetch `count` tokens for `app` and today now, in requests of at most 20. `attestation`
    /// overrides the configured code; a code is one-time, so with a code `count` is at most 20.
    pub async fn acquire(
        &self,
        app: &str,
        count: usize,
        attestation: Option<&str>,
    ) -> Result<Acquired, TokenError> {
        let (tokens, remaining) = self.acquire_tokens(app, count, attestation).await?;
        Ok(Acquired {
            count: tokens.len(),
            remaining,
        })
    }

    /// Acquire at a random moment within `within` (default 6 hours) in a background task.
    pub fn prefetch_later(
        &self,
        app: &str,
        count: usize,
        within: Option<Duration>,
    ) -> privsvc_rt::JoinHandle<Result<Acquired, TokenError>> {
        let within = within.unwrap_or(DEFAULT_PREFETCH_WITHIN);
        let delay_ms = if within.is_zero() {
            0
        } else {
            rand::thread_rng().gen_range(0..u64::try_from(within.as_millis()).unwrap_or(u64::MAX))
        };
        let this = self.clone();
        let app = app.to_string();
        privsvc_rt::spawn(async move {
            privsvc_rt::sleep(Duration::from_millis(delay_ms)).await;
            this.acquire(&app, count, None).await
        })
    }

    /// Unspent tokens of `app` for an accepted epoch (whatever their age).
    pub fn available(&self, app: &str) -> Result<usize, TokenError> {
        crate::store::available_in(self.inner.store.as_ref(), app)
    }

    /// The [`TokenSource`] a client draws from: random order, only tokens obtained before the
    /// write was requested and ripe (tokens obtained from now on at their own random age up to
    /// `max_ripe_ms`), never a wait; with `allow_on_demand`, an empty supply starts an issue
    /// request in the background.
    pub fn source(&self) -> Arc<dyn TokenSource> {
        let o = &self.inner;
        let source = if o.allow_on_demand {
            StoreTokenSource::with_on_demand(o.store.clone(), o.min_age_ms, self.clone())
        } else {
            StoreTokenSource::new(o.store.clone(), o.min_age_ms)
        };
        Arc::new(source.with_max_ripe_ms(o.max_ripe_ms))
    }

    /// Acquire and store tokens; returns the stored tokens and the issuer's `remaining`.
    pub(crate) async fn acquire_tokens(
        &self,
        app: &str,
        count: usize,
        attestation: Option<&str>,
    ) -> Result<(Vec<StoredToken>, u32), TokenError> {
        if count == 0 {
            return Err(TokenError::NoTokensAsked);
        }
        let attestation = attestation
            .map(str::to_string)
            .or_else(|| self.inner.attestation.clone());
        if attestation.is_some() && count > MAX_TOKENS_PER_REQUEST {
            return Err(TokenError::AttestationCount {
                asked: count,
                max: MAX_TOKENS_PER_REQUEST,
            });
        }
        let epoch = epoch_of(now_ms());
        let key = self
            .issuer_key(
                app,
                epoch,
                attestation.clone(),
                count.min(MAX_TOKENS_PER_REQUEST),
            )
            .await?;
        let mut all = Vec::with_capacity(count);
        let mut remaining = 0;
        let mut left = count;
        while left > 0 {
            let n = left.min(MAX_TOKENS_PER_REQUEST);
            let (tokens, rem) = self
                .issue_batch(app, epoch, &key, n, attestation.clone())
                .await?;
            self.inner.store.add(&tokens)?;
            all.extend(tokens);
            remaining = rem;
            left -= n;
        }
        Ok((all, remaining))
    }

    /// The chain id named in issuance messages.
    async fn chain_id(&self) -> Result<u64, TokenError> {
        if let Some(id) = self.inner.chain_id {
            return Ok(id);
        }
        let reader = self.inner.reader.clone();
        Ok(*self
            .chain_id
            .get_or_try_init(|| async move { reader.chain_id().await })
            .await?)
    }

    /// The day's key, read from the ledger only and accepted by the rules of
    /// [`accept_issuer_key`]. When the ledger has none yet: ask the issuer whether it has one
    /// (`GET /v1/issuer/key`, which never creates a key); if not, send a signed issue request,
    /// which creates the app's key if the issuer allows it (HTTP 409), then wait for the key
    /// to be visible on the ledger.
    async fn issuer_key(
        &self,
        app: &str,
        epoch: u32,
        attestation: Option<String>,
        count: usize,
    ) -> Result<IssuerKey, TokenError> {
        if let Some(key) = self.kept_key(app, epoch) {
            return Ok(key);
        }
        let o = &self.inner;
        let read =
            accept_issuer_key(o.reader.as_ref(), o.pins.as_ref(), o.issuer, app, epoch).await;
        // Whatever the read found, the issuer hears from this wallet only a quiet interval
        // later.
        privsvc_rt::sleep(o.quiet_after_key_read).await;
        match read {
            Err(TokenError::NoIssuerKey { .. }) => {}
            Ok(key) => {
                self.keep_key(app, epoch, key.clone());
                return Ok(key);
            }
            other => return other,
        }
        let query = reqwest::Url::parse_with_params(
            "http://issuer/v1/issuer/key",
            &[("app", app.to_string()), ("epoch", epoch.to_string())],
        )
        .map_err(|e| TokenError::Request {
            what: "issuer key query",
            source: e.into(),
        })?;
        let path = format!("/v1/issuer/key?{}", query.query().unwrap_or_default());
        let resp = self.send("GET", &path, None).await?;
        let status = resp.status;
        if status == 404 {
            self.create_key(app, epoch, attestation, count).await?;
        } else if !(200..300).contains(&status) {
            return Err(TokenError::Refused {
                request: "GET /v1/issuer/key",
                status,
                reason: error_reason(&resp).unwrap_or_default(),
            });
        } else {
            let info: IssuerKeyResponse =
                serde_json::from_slice(&resp.body).map_err(|source| TokenError::IssuerAnswer {
                    what: "issuer key response",
                    source,
                })?;
            if info.issuer != o.issuer || info.app != app || info.epoch != epoch {
                return Err(TokenError::IssuerKeyMismatch);
            }
        }
        let deadline = privsvc_rt::Instant::now() + KEY_VISIBLE_TIMEOUT;
        loop {
            match accept_issuer_key(o.reader.as_ref(), o.pins.as_ref(), o.issuer, app, epoch).await
            {
                Err(TokenError::NoIssuerKey { .. }) if privsvc_rt::Instant::now() < deadline => {
                    privsvc_rt::sleep(Duration::from_millis(250)).await;
                }
                Ok(key) => {
                    self.keep_key(app, epoch, key.clone());
                    privsvc_rt::sleep(o.quiet_after_key_read).await;
                    return Ok(key);
                }
                other => return other,
            }
        }
    }

    /// Ask the issuer to create the app's first key: a signed issue request for `count` tokens
    /// (the count of the acquisition it precedes, so that it looks like every other issue
    /// request) whose blinded values are random (no key exists to blind under). 409 = created;
    /// 200 = a key appeared meanwhile (the placeholders are discarded).
    async fn create_key(
        &self,
        app: &str,
        epoch: u32,
        attestation: Option<String>,
        count: usize,
    ) -> Result<(), TokenError> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let placeholders = (0..count.max(1))
            .map(|_| {
                let mut placeholder = [0u8; crate::suite::MODULUS_BYTES];
                rand::rngs::OsRng.fill_bytes(&mut placeholder[1..]);
                b64.encode(placeholder)
            })
            .collect();
        let resp = self
            .post_issue(app, epoch, placeholders, attestation)
            .await?;
        let status = resp.status;
        if status == 409 || (200..300).contains(&status) {
            return Ok(());
        }
        Err(TokenError::Refused {
            request: "POST /v1/tokens/issue",
            status,
            reason: error_reason(&resp).unwrap_or_else(|| "no reason given".into()),
        })
    }

    /// Sign and send an issue request (issuance message v2) for `blinded`. When the answer is
    /// lost (a transport error, or a 5xx), the same signed request is sent again, up to
    /// [`ISSUE_ATTEMPTS`] times in all: the issuer answers a replay from its memory, so a lost
    /// answer costs no quota and a new request is never signed for it.
    async fn post_issue(
        &self,
        app: &str,
        epoch: u32,
        blinded: Vec<String>,
        attestation: Option<String>,
    ) -> Result<RelayerResponse, TokenError> {
        let mut req = IssueRequest {
            issuer: self.inner.issuer,
            chain_id: self.chain_id().await?,
            app: app.to_string(),
            epoch,
            wallet: self.inner.wallet.address(),
            blinded,
            ts: now_ms(),
            wallet_signature: String::new(),
            attestation,
        };
        let text = issuance_message(&req, req.ts)?;
        let sig = self.inner.wallet.personal_sign(text.as_bytes()).await?;
        req.wallet_signature = format!("0x{}", hex::encode(sig.as_bytes()));
        let body = serde_json::to_vec(&req).map_err(|e| TokenError::Request {
            what: "issue request",
            source: e.into(),
        })?;
        let mut attempt = 1;
        loop {
            let answer = self
                .send("POST", "/v1/tokens/issue", Some(body.clone()))
                .await;
            let lost = match &answer {
                Err(_) => true,
                Ok(resp) => resp.status >= 500,
            };
            if !lost || attempt >= ISSUE_ATTEMPTS {
                return answer;
            }
            tracing::warn!(
                attempt,
                "an issue answer was lost; sending the same signed request again"
            );
            privsvc_rt::sleep(Duration::from_millis(500 * attempt as u64)).await;
            attempt += 1;
        }
    }

    /// One call to the issuer through the configured transport.
    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<RelayerResponse, TokenError> {
        let request = RelayerRequest {
            method: method.to_string(),
            path: path.to_string(),
            body,
        };
        Ok(self
            .inner
            .transport
            .send(&self.inner.issuer_url, request)
            .await?)
    }

    async fn issue_batch(
        &self,
        app: &str,
        epoch: u32,
        key: &IssuerKey,
        n: usize,
        attestation: Option<String>,
    ) -> Result<(Vec<StoredToken>, u32), TokenError> {
        let suite = token_suite();
        let mut pending = Vec::with_capacity(n);
        for _ in 0..n {
            let mut nonce = [0u8; NONCE_BYTES];
            rand::rngs::OsRng.fill_bytes(&mut nonce);
            let msg = token_message(app, epoch, &nonce)?;
            let blinded = suite.blind(key, &msg)?;
            pending.push((nonce, msg, blinded));
        }
        let b64 = base64::engine::general_purpose::STANDARD;
        let blinded = pending
            .iter()
            .map(|(_, _, b)| b64.encode(b.blinded_message()))
            .collect();
        let resp = self.post_issue(app, epoch, blinded, attestation).await?;
        let status = resp.status;
        if !(200..300).contains(&status) {
            let reason = match error_reason(&resp) {
                Some(reason) => reason,
                None if status == 403 => "no reason given".into(),
                None => String::new(),
            };
            return Err(TokenError::Refused {
                request: "POST /v1/tokens/issue",
                status,
                reason,
            });
        }
        let body: IssueResponse =
            serde_json::from_slice(&resp.body).map_err(|source| TokenError::IssuerAnswer {
                what: "issue response",
                source,
            })?;
        if body.blind_signatures.len() != n {
            return Err(TokenError::BlindSignatureCount {
                asked: n,
                got: body.blind_signatures.len(),
            });
        }
        let obtained_ms = now_ms();
        let mut tokens = Vec::with_capacity(n);
        for ((nonce, msg, blinded), bs) in pending.iter().zip(&body.blind_signatures) {
            let bs = b64.decode(bs).map_err(|_| TokenError::BadBlindSignature)?;
            let sig = suite.finalize(key, &bs, blinded, msg)?;
            let redemption = TokenRedemption::new(epoch, nonce, &sig);
            tokens.push(StoredToken::from_redemption(app, &redemption, obtained_ms));
        }
        Ok((tokens, body.remaining))
    }
}

/// The reason in an issuer's error answer (`{"error": ...}`), if it has one.
fn error_reason(resp: &RelayerResponse) -> Option<String> {
    serde_json::from_slice::<ErrorBody>(&resp.body)
        .ok()
        .map(|b| b.error)
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
impl OnDemandIssuer for TokenWallet {
    async fn fetch_into_store(&self, app: &str) -> Result<(), TokenError> {
        self.acquire_tokens(app, MAX_TOKENS_PER_REQUEST, None)
            .await
            .map(|_| ())
    }
}
