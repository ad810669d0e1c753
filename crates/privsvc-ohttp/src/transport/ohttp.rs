//! `OhttpTransport`: every relayer call goes through an OHTTP relay, encapsulated to the
//! relayer's gateway key.
//!
//! Gateway keys come from the relayers' heartbeats on the ledger. Before a key is used for real
//! requests it is confirmed through the relay itself: `GET /v1/info`, encapsulated to the
//! candidate key, must answer the heartbeat creator's address and the same `ohttpKey`. (A direct
//! `/v1/info` call would reveal the client's address, which is what OHTTP exists to hide.) A
//! confirmed key is cached; when the gateway can no longer open requests (it rotated its key),
//! the key is looked up again once.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use alloy_primitives::Address;
use async_trait::async_trait;
use privsvc_ledger::LedgerReader;
use privsvc_rt::http::{Fetch, ReqwestFetch};

use crate::client::ohttp_call;
use crate::heartbeat::{live_heartbeats, DEFAULT_HEARTBEAT_INTERVAL};
use crate::http_util::normalize_relayer_url;
use crate::transport::{RelayerRequest, RelayerResponse, Transport};
use crate::{OhttpError, CALL_TIMEOUT};

#[derive(Clone)]
struct CachedKey {
    key: String,
    /// Set by the caller: never replaced by a ledger lookup.
    explicit: bool,
}

/// Sends every relayer call through the OHTTP relay at `relay_url`.
pub struct OhttpTransport {
    relay_url: String,
    fetch: Arc<dyn Fetch>,
    reader: Option<Arc<dyn LedgerReader>>,
    heartbeat_interval: Duration,
    keys: RwLock<HashMap<String, CachedKey>>,
}

impl std::fmt::Debug for OhttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OhttpTransport")
            .field("relay_url", &self.relay_url)
            .finish()
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Info {
    address: String,
    #[serde(default)]
    ohttp_key: Option<String>,
}

impl OhttpTransport {
    /// A transport through `relay_url` that reads gateway keys from heartbeats via `reader`.
    pub fn new(relay_url: &str, reader: Arc<dyn LedgerReader>) -> Result<Self, OhttpError> {
        let mut transport = Self::without_ledger(relay_url)?;
        transport.reader = Some(reader);
        Ok(transport)
    }

    /// A transport through `relay_url` that only uses keys set with
    /// [`OhttpTransport::set_gateway_key`].
    pub fn without_ledger(relay_url: &str) -> Result<Self, OhttpError> {
        Ok(Self {
            relay_url: normalize_relayer_url(relay_url)?,
            fetch: Arc::new(ReqwestFetch::new(CALL_TIMEOUT)?),
            reader: None,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            keys: RwLock::new(HashMap::new()),
        })
    }

    /// Use `client` for the calls to the relay.
    pub fn with_client(mut self, client: reqwest::Client) -> Self {
        self.fetch = Arc::new(ReqwestFetch::with_client(client));
        self
    }

    /// Send the calls to the relay with `fetch` (a host's own HTTP stack).
    pub fn with_fetch(mut self, fetch: Arc<dyn Fetch>) -> Self {
        self.fetch = fetch;
        self
    }

    /// The relayers' heartbeat interval (liveness = two intervals; default 10 minutes).
    pub fn with_heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// Use `key_hex` (an `ohttpKey`) for `relayer_url` without looking at the ledger.
    pub fn set_gateway_key(&self, relayer_url: &str, key_hex: &str) -> Result<(), OhttpError> {
        crate::client::decode_gateway_key(key_hex)?;
        let url = normalize_relayer_url(relayer_url)?;
        self.keys.write().unwrap_or_else(|p| p.into_inner()).insert(
            url,
            CachedKey {
                key: key_hex.trim().to_string(),
                explicit: true,
            },
        );
        Ok(())
    }

    /// Drop the cached key of `relayer_url`.
    pub fn forget_gateway_key(&self, relayer_url: &str) {
        if let Ok(url) = normalize_relayer_url(relayer_url) {
            self.keys
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&url);
        }
    }

    fn cached(&self, url: &str) -> Option<CachedKey> {
        self.keys
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(url)
            .cloned()
    }

    /// The gateway key used for `relayer_url`: cached, or found in the live heartbeats and
    /// confirmed through the relay.
    pub async fn gateway_key(&self, relayer_url: &str) -> Result<String, OhttpError> {
        let url = normalize_relayer_url(relayer_url)?;
        if let Some(cached) = self.cached(&url) {
            return Ok(cached.key);
        }
        let key = self.discover(&url).await?;
        self.keys.write().unwrap_or_else(|p| p.into_inner()).insert(
            url,
            CachedKey {
                key: key.clone(),
                explicit: false,
            },
        );
        Ok(key)
    }

    async fn discover(&self, url: &str) -> Result<String, OhttpError> {
        let reader = self
            .reader
            .as_ref()
            .ok_or_else(|| OhttpError::NoGatewayKey(url.to_string()))?;
        let heartbeats = live_heartbeats(reader.as_ref(), self.heartbeat_interval).await?;
        let mut tried = Vec::new();
        for heartbeat in heartbeats.into_iter().filter(|h| h.url == url) {
            let Some(key) = heartbeat.ohttp_key else {
                continue;
            };
            if heartbeat.address != Some(heartbeat.creator) || tried.contains(&key) {
                continue;
            }
            if self.confirm(url, &key, heartbeat.creator).await {
                return Ok(key);
            }
            tried.push(key);
        }
        Err(OhttpError::NoGatewayKey(url.to_string()))
    }

    /// `GET /v1/info` through the relay with `key`: the gateway must open it and answer
    /// `creator` and `key`.
    async fn confirm(&self, url: &str, key: &str, creator: Address) -> bool {
        let request = RelayerRequest {
            method: "GET".into(),
            path: "/v1/info".into(),
            body: None,
        };
        let Ok(answer) = ohttp_call(&self.relay_url, url, key, request, self.fetch.as_ref()).await
        else {
            return false;
        };
        if answer.status != 200 {
            return false;
        }
        serde_json::from_slice::<Info>(&answer.body).is_ok_and(|info| {
            info.address.parse::<Address>().ok() == Some(creator)
                && info
                    .ohttp_key
                    .is_some_and(|k| k.trim().eq_ignore_ascii_case(key.trim()))
        })
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl Transport for OhttpTransport {
    async fn send(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, OhttpError> {
        let url = normalize_relayer_url(relayer_url)?;
        let key = self.gateway_key(&url).await?;
        let first = ohttp_call(
            &self.relay_url,
            &url,
            &key,
            request.clone(),
            self.fetch.as_ref(),
        )
        .await;
        let answer = match first {
            // The gateway cannot open our request: its key changed. Look it up again, once.
            Err(OhttpError::Refused { status: 400, .. })
                if self.reader.is_some() && self.cached(&url).is_some_and(|c| !c.explicit) =>
            {
                self.forget_gateway_key(&url);
                let key = self.gateway_key(&url).await?;
                ohttp_call(&self.relay_url, &url, &key, request, self.fetch.as_ref()).await?
            }
            other => other?,
        };
        Ok(RelayerResponse {
            status: answer.status,
            body: answer.body,
        })
    }
}
