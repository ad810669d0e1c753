//! Token handling for a client: a caller-given `TokenSource`, or auto mode (one `TokenWallet`
//! per verified issuer, fetching tokens only when a write needs them and spending them only
//! once ripe).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use alloy_primitives::Address;
use privsvc_ledger::LedgerReader;
use privsvc_ohttp::{RelayerRequest, Transport};
use privsvc_tokens::{
    memory_store, IssuerReply, IssuerTransport, KeyPins, MemoryKeyPins, TokenError,
    TokenRedemption, TokenSource, TokenStore, TokenWallet, TokenWalletOptions,
};
use privsvc_vault::Wallet;

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
    /// The client's OHTTP transport, when it has a relay: issuer calls go through it too.
    via_relay: Option<Arc<dyn IssuerTransport>>,
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
            via_relay: options
                .ohttp_relay
                .as_ref()
                .map(|_| Arc::new(ThroughTransport(transport)) as Arc<dyn IssuerTransport>),
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
        if let Some(t) = &self.via_relay {
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
