//! Token handling for a client: a caller-given `TokenSource`, or auto mode (one `TokenWallet`
//! per issuer, fetching the day's tokens at session start).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use alloy_primitives::Address;
use privsvc_ledger::LedgerReader;
use privsvc_tokens::{
    memory_store, TokenRedemption, TokenSource, TokenStore, TokenWallet, TokenWalletOptions,
};
use privsvc_vault::Wallet;

use crate::error::PrivsvcError;
use crate::options::{ClientOptions, Tokens};
use crate::protocol::InfoResponse;
use crate::relayer_api::RelayerStatus;

/// Tokens fetched per issuer at session start in auto mode.
pub const AUTO_TOKENS_PER_SESSION: usize = 10;

/// Where the client's tokens come from.
pub(crate) struct TokenManager {
    mode: Tokens,
    wallet: Option<Arc<dyn Wallet>>,
    reader: Arc<dyn LedgerReader>,
    store: Arc<dyn TokenStore>,
    attestation: Option<String>,
    wallets: Mutex<HashMap<Address, TokenWallet>>,
}

impl TokenManager {
    pub(crate) fn new(options: &ClientOptions, reader: Arc<dyn LedgerReader>) -> Self {
        Self {
            mode: options.tokens.clone(),
            wallet: options.wallet.clone(),
            reader,
            store: options.token_store.clone().unwrap_or_else(memory_store),
            attestation: options.token_attestation.clone(),
            wallets: Mutex::new(HashMap::new()),
        }
    }

    /// The token wallet of the issuer named in `info` (auto mode with a wallet only).
    fn wallet_for(&self, info: &InfoResponse) -> Result<TokenWallet, PrivsvcError> {
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
        let mut wallets = self.wallets.lock().unwrap_or_else(|p| p.into_inner());
        let w = wallets.entry(issuer).or_insert_with(|| {
            let mut o =
                TokenWalletOptions::new(user_wallet, self.reader.clone(), issuer, url.clone());
            o.store = self.store.clone();
            o.allow_on_demand = true;
            o.attestation = self.attestation.clone();
            TokenWallet::new(o)
        });
        Ok(w.clone())
    }

    /// Auto mode: starts fetching the day's tokens for every issuer a relayer requires.
    pub(crate) fn start(&self, app: &str, relayers: &[RelayerStatus]) {
        if !matches!(self.mode, Tokens::Auto) || self.wallet.is_none() {
            return;
        }
        for r in relayers.iter().filter(|r| r.info.tokens_required) {
            match self.wallet_for(&r.info) {
                Ok(w) => {
                    let app = app.to_string();
                    tokio::spawn(async move {
                        if let Err(e) = w.acquire(&app, AUTO_TOKENS_PER_SESSION, None).await {
                            tracing::warn!(error = %e, "fetching the day's tokens failed");
                        }
                    });
                }
                Err(e) => tracing::warn!(error = %e, "cannot fetch tokens"),
            }
        }
    }

    /// One token for a submission to a relayer with `info`.
    pub(crate) async fn take(
        &self,
        app: &str,
        info: &InfoResponse,
    ) -> Result<TokenRedemption, PrivsvcError> {
        let source: Arc<dyn TokenSource> = match &self.mode {
            Tokens::Source(s) => s.clone(),
            Tokens::Auto => self.wallet_for(info)?.source(),
        };
        source
            .take(app)
            .await?
            .ok_or_else(|| PrivsvcError::Tokens("no token available for this app today".into()))
    }
}
