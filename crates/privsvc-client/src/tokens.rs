//! Token handling for a client: a caller-given `TokenSource`, or auto mode (one `TokenWallet`
//! per verified issuer, fetching tokens only when a write needs them and spending them only
//! once ripe).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use alloy_primitives::Address;
use privsvc_ledger::LedgerReader;
use privsvc_ohttp::{RelayerRequest, Transport};
use privsvc_tokens::{
    memory_store, DirectIssuerTransport, IssuerReply, IssuerTransport, KeyPins, MemoryKeyPins,
    TokenError, TokenRedemption, TokenSource, TokenStore, TokenWallet, TokenWalletOptions,
};
use privsvc_vault::Wallet;
use rand::Rng as _;

use crate::discover::heartbeat_relayers;
use crate::error::PrivsvcError;
use crate::options::{ClientOptions, Tokens};
use crate::protocol::InfoResponse;

/// Where the client's tokens come from.
pub(crate) struct TokenManager {
    mode: Tokens,
    wallet: Option<Arc<dyn Wallet>>,
    reader: Arc<dyn LedgerReader>,
    store: Arc<dyn TokenStore>,
    pins: Arc<dyn KeyPins>,
    attestation: Option<String>,
    min_age_ms: u64,
    ripe_wait_ms: u64,
    /// How issuer calls travel: through the client's OHTTP transport when it has a relay, else
    /// directly with the client's `fetch`; `None`: the token wallet's default (direct HTTP).
    issuer_transport: Option<Arc<dyn IssuerTransport>>,
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
            min_age_ms: options.token_min_age_ms,
            ripe_wait_ms: options.token_ripe_wait_ms,
            issuer_transport: match (&options.ohttp_relay, &options.fetch) {
                (Some(_), _) => Some(Arc::new(ThroughTransport(transport)) as _),
                (None, Some(fetch)) => {
                    Some(Arc::new(DirectIssuerTransport::with_fetch(fetch.clone())) as _)
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
                "a relayer requires tokens but the client has no wallet to fetch them: pass `tokens(Tokens::Source(..))`".into(),
            )
        })?;
        let (Some(issuer), Some(url)) = (&info.issuer, &info.issuer_url) else {
            return Err(PrivsvcError::Tokens(
                "the relayer requires tokens but names no issuer".into(),
            ));
        };
        let issuer: Address = issuer
            .parse()
            .map_err(|e| PrivsvcError::Tokens(format!("issuer address {issuer:?}: {e}")))?;
        let url = privsvc_ohttp::normalize_relayer_url(url).map_err(|e| {
            PrivsvcError::Tokens(format!("the relayer's issuerUrl is not usable: {e}"))
        })?;
        let key = (issuer, url.clone());
        if let Some(w) = self.lock().get(&key) {
            return Ok(w.clone());
        }
        let verified = heartbeat_relayers(self.reader.as_ref())
            .await?
            .iter()
            .any(|hb| hb.creator == issuer && hb.url == url);
        if !verified {
            return Err(PrivsvcError::Tokens(format!(
                "issuer {issuer} has no live heartbeat naming the relayer's issuerUrl {url}; no token is requested from it"
            )));
        }
        let mut o = TokenWalletOptions::new(user_wallet, self.reader.clone(), issuer, url);
        o.store = self.store.clone();
        o.pins = self.pins.clone();
        o.allow_on_demand = true;
        o.attestation = self.attestation.clone();
        o.min_age_ms = self.min_age_ms;
        o.ripe_wait_ms = self.ripe_wait_ms;
        if let Some(t) = &self.issuer_transport {
            o.transport = t.clone();
        }
        let w = TokenWallet::new(o);
        Ok(self.lock().entry(key).or_insert(w).clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Address, String), TokenWallet>> {
        self.wallets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One ripe token for a submission to a relayer with `info`: `NoTokenReady` when none
    /// ripens within the wait bound.
    pub(crate) async fn take(
        &self,
        app: &str,
        info: &InfoResponse,
    ) -> Result<TokenRedemption, PrivsvcError> {
        let source: Arc<dyn TokenSource> = match &self.mode {
            Tokens::Source(s) => s.clone(),
            Tokens::Auto => self.wallet_for(info).await?.source(),
        };
        source
            .take(app)
            .await?
            .ok_or_else(|| PrivsvcError::NoTokenReady {
                app: app.to_string(),
            })
    }
}

impl TokenManager {
    /// Whether this manager fetches tokens itself (auto mode with a wallet).
    pub(crate) fn fetches(&self) -> bool {
        matches!(self.mode, Tokens::Auto) && self.wallet.is_some()
    }

    /// SPEC `prefetchLater`, spread: `count` tokens of `app` from the issuer of each relayer in
    /// `infos` that requires tokens, one token per issue request, each request at its own
    /// moment of [`prefetch_moments`]. An issuer is verified (its heartbeat) only when its first
    /// moment comes. A failed acquisition is logged and the others still run. Returns how many
    /// tokens were added to the store.
    pub(crate) async fn prefetch(
        self: Arc<Self>,
        app: String,
        infos: Vec<InfoResponse>,
        count: usize,
        within: Duration,
    ) -> usize {
        let mut issuers: Vec<InfoResponse> = Vec::new();
        for info in infos.into_iter().filter(|i| i.tokens_required) {
            if !issuers
                .iter()
                .any(|i| i.issuer == info.issuer && i.issuer_url == info.issuer_url)
            {
                issuers.push(info);
            }
        }
        if issuers.is_empty() || !self.fetches() {
            return 0;
        }
        let start = privsvc_rt::Instant::now();
        let mut added = 0;
        for moment in prefetch_moments(count, within) {
            privsvc_rt::sleep(
                (start + moment).saturating_duration_since(privsvc_rt::Instant::now()),
            )
            .await;
            for info in &issuers {
                let got = match self.wallet_for(info).await {
                    Ok(w) => w.acquire(&app, 1, None).await.map_err(PrivsvcError::from),
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

/// Issuer calls carried by the client's relayer transport (OHTTP through the relay).
struct ThroughTransport(Arc<dyn Transport>);

#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
impl IssuerTransport for ThroughTransport {
    async fn send(
        &self,
        issuer_url: &str,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<IssuerReply, TokenError> {
        let res = self
            .0
            .send(
                issuer_url,
                RelayerRequest {
                    method: method.to_string(),
                    path: path.to_string(),
                    body,
                },
            )
            .await
            .map_err(|e| TokenError::Http(format!("through the OHTTP relay: {e}")))?;
        Ok(IssuerReply {
            status: res.status,
            body: res.body,
        })
    }
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
