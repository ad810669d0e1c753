//! `OhttpTransport`: every relayer call goes through an OHTTP relay, encapsulated to the
//! relayer's gateway key.
//!
//! Relayer identity (docs/PROTOCOL.md §8.6): a relayer URL belongs to ONE account, and the
//! gateway key comes only from that account's heartbeats on the ledger. The account is bound by the
//! caller ([`Transport::bind_relayer`]; the client binds the account it pinned, was given or found
//! as the URL's only owner, with the key of that account's heartbeat), or learnt on the first
//! lookup: the one account whose live heartbeats name the URL (heartbeats of two accounts make it
//! ambiguous, [`OhttpError::AmbiguousRelayer`]); afterwards it stays bound for the transport's
//! lifetime and other accounts' heartbeats are ignored. Before a looked-up key is used, `GET
//! /v1/info` encapsulated to it must answer that account's address and the same `ohttpKey` through
//! the relay (a direct call would reveal the client's address); the answer only confirms, it never
//! supplies the address or the key.
//!
//! A 400 outside the encapsulation ([`OhttpError::GatewayRefused`]) fails that call only: the
//! key is never looked up again silently (a relay that could make the client re-read the
//! heartbeats whenever it likes could time that read to a heartbeat of its own), and the relayer
//! is not marked refused either, since the OHTTP relay can make such an answer itself and must
//! not steer the client away from a relayer; only the relayer's own answer inside the
//! encapsulation speaks for it. [`OhttpTransport::forget_gateway_key`] or a new binding makes
//! the next call look the key up again.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use alloy_primitives::Address;
use async_trait::async_trait;
use privsvc_ledger::LedgerReader;
use privsvc_rt::{Fetch, ReqwestFetch};

use crate::client::{ohttp_call, relay_call, to_binary_request, Padding};
use crate::ledger_heartbeats::{live_heartbeats, url_owner, DEFAULT_HEARTBEAT_INTERVAL};
use crate::transport::{RelayerRequest, RelayerResponse, Transport, TransportError};
use crate::{OhttpError, CALL_TIMEOUT};
use privsvc_rt::{normalize_relayer_url, RelayerUrl};

/// What the transport knows about one relayer URL.
#[derive(Clone, Default)]
struct Known {
    /// The account that owns the URL: bound by the caller, or learnt on the first lookup.
    account: Option<Address>,
    /// The gateway key in use, once known.
    key: Option<String>,
}

/// Sends every relayer call through the OHTTP relay at `relay_url`.
pub struct OhttpTransport {
    relay_url: String,
    fetch: Arc<dyn Fetch>,
    reader: Option<Arc<dyn LedgerReader>>,
    heartbeat_interval: Duration,
    relayers: RwLock<HashMap<String, Known>>,
    /// How request plaintexts are padded (the protocol's rule but for the lab's leaky setting).
    padding: Padding,
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
            relayers: RwLock::new(HashMap::new()),
            padding: Padding::AtLeast(0),
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

    /// The attack lab's leaky setting (feature `lab-leaks`, never in a deployment): pad every
    /// request, submissions included, to the smallest class that holds it, so that the size
    /// of a submission shows its envelope's size class again.
    #[cfg(feature = "lab-leaks")]
    pub fn lab_small_submissions(mut self) -> Self {
        self.padding = Padding::SmallestClass;
        self
    }

    /// Send one dummy (cover traffic, [`dummy_request`](crate::dummy_request)) to `relayer_url` through the relay,
    /// with the relayer's gateway key (known, or looked up as for any call): padded to at least
    /// `request_class` bytes, its answer to the class holding `response_class` bytes (0: that
    /// of a status answer).
    pub async fn send_dummy(
        &self,
        relayer_url: &str,
        request_class: usize,
        response_class: usize,
    ) -> Result<(), OhttpError> {
        let url = normalize_relayer_url(relayer_url)?;
        let key = self.gateway_key(&url).await?;
        crate::dummy::send_dummy(
            &self.relay_url,
            &url,
            &key,
            request_class,
            response_class,
            self.fetch.as_ref(),
        )
        .await
    }

    /// Use `key_hex` (an `ohttpKey`) for `relayer_url` without looking at the ledger; a bound
    /// account stays bound.
    pub fn set_gateway_key(&self, relayer_url: &str, key_hex: &str) -> Result<(), OhttpError> {
        crate::client::decode_gateway_key(key_hex)?;
        let url = normalize_relayer_url(relayer_url)?;
        let mut relayers = self.relayers.write().unwrap_or_else(|p| p.into_inner());
        let known = relayers.entry(url).or_default();
        known.key = Some(key_hex.trim().to_string());
        Ok(())
    }

    /// Drop the key of `relayer_url`: the next call looks the key up again, in the heartbeats
    /// of the account bound to the URL only (the binding stays).
    pub fn forget_gateway_key(&self, relayer_url: &str) {
        if let Ok(url) = normalize_relayer_url(relayer_url) {
            let mut relayers = self.relayers.write().unwrap_or_else(|p| p.into_inner());
            if let Some(known) = relayers.get_mut(&url) {
                known.key = None;
            }
        }
    }

    /// The account bound to `relayer_url` (given with [`Transport::bind_relayer`] or learnt
    /// on the first lookup), if any.
    pub fn relayer_account(&self, relayer_url: &str) -> Option<Address> {
        let url = normalize_relayer_url(relayer_url).ok()?;
        self.known(&url).and_then(|k| k.account)
    }

    fn known(&self, url: &str) -> Option<Known> {
        self.relayers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(url)
            .cloned()
    }

    /// The gateway key used for `relayer_url`: known, or found in the live heartbeats of the
    /// URL's account and confirmed through the relay.
    pub async fn gateway_key(&self, relayer_url: &str) -> Result<String, OhttpError> {
        let url = RelayerUrl::parse(relayer_url)?;
        let known = self.known(url.as_str()).unwrap_or_default();
        if let Some(key) = known.key {
            return Ok(key);
        }
        let (account, key) = self.discover(&url, known.account).await?;
        let mut relayers = self.relayers.write().unwrap_or_else(|p| p.into_inner());
        let entry = relayers.entry(url.to_string()).or_default();
        match entry.account {
            // Bound to another account meanwhile: that binding stands.
            Some(bound) if bound != account => return Err(OhttpError::NoGatewayKey(url)),
            _ => entry.account = Some(account),
        }
        Ok(entry.key.get_or_insert(key).clone())
    }

    /// The URL's owner (the bound account, else the only account whose live heartbeats name
    /// it) and the newest of its keys that the gateway confirms through the relay.
    async fn discover(
        &self,
        url: &RelayerUrl,
        expected: Option<Address>,
    ) -> Result<(Address, String), OhttpError> {
        let reader = self
            .reader
            .as_ref()
            .ok_or_else(|| OhttpError::NoGatewayKey(url.clone()))?;
        let heartbeats = live_heartbeats(reader.as_ref(), self.heartbeat_interval).await?;
        let owner = url_owner(&heartbeats, url, expected)?;
        for other in &owner.ignored {
            tracing::warn!(
                relayer = %url,
                account = %owner.account,
                other = %other,
                "a heartbeat of another account names this relayer's URL; ignored"
            );
        }
        let mut tried: Vec<&str> = Vec::new();
        for heartbeat in &owner.heartbeats {
            let Some(key) = heartbeat.ohttp_key.as_deref() else {
                continue;
            };
            if tried.contains(&key) {
                continue;
            }
            if self.confirm(url.as_str(), key, owner.account).await {
                return Ok((owner.account, key.to_string()));
            }
            tried.push(key);
        }
        Err(OhttpError::NoGatewayKey(url.clone()))
    }

    /// `GET /v1/info` through the relay with `key`: the gateway must open it and answer
    /// `account` and `key`. The answer only confirms what the heartbeat says.
    async fn confirm(&self, url: &str, key: &str, account: Address) -> bool {
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
            info.address.parse::<Address>().ok() == Some(account)
                && info
                    .ohttp_key
                    .is_some_and(|k| k.trim().eq_ignore_ascii_case(key.trim()))
        })
    }
}

impl OhttpTransport {
    /// [`Transport::send`] with the OHTTP error.
    async fn call(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, OhttpError> {
        let url = RelayerUrl::parse(relayer_url)?;
        let key = self.gateway_key(url.as_str()).await?;
        let answer = match relay_call(
            &self.relay_url,
            url.as_str(),
            &key,
            &to_binary_request(&request),
            self.padding,
            self.fetch.as_ref(),
        )
        .await
        {
            // The gateway cannot open a well-formed request (its key changed), or the relay
            // says so: this call fails; the key is never looked up again by itself, and the
            // relayer is not marked: the relay can make this answer.
            Err(OhttpError::Refused { status: 400, .. }) => {
                tracing::warn!(
                    relayer = %url,
                    "a 400 outside the encapsulation (the relayer's gateway, or the relay in front of it)"
                );
                return Err(OhttpError::GatewayRefused { relayer: url });
            }
            other => other?,
        };
        Ok(RelayerResponse {
            status: answer.status,
            body: answer.body,
        })
    }

    /// [`Transport::bind_relayer`] with the OHTTP error.
    fn bind(
        &self,
        relayer_url: &str,
        account: Address,
        gateway_key: Option<&str>,
    ) -> Result<(), OhttpError> {
        if let Some(key) = gateway_key {
            crate::client::decode_gateway_key(key)?;
        }
        let url = normalize_relayer_url(relayer_url)?;
        let mut relayers = self.relayers.write().unwrap_or_else(|p| p.into_inner());
        let known = relayers.entry(url).or_default();
        if let Some(key) = gateway_key {
            known.key = Some(key.trim().to_string());
        } else if known.account != Some(account) {
            known.key = None;
        }
        known.account = Some(account);
        Ok(())
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl Transport for OhttpTransport {
    async fn send(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, TransportError> {
        Ok(self.call(relayer_url, request).await?)
    }

    fn uses_gateway_keys(&self) -> bool {
        true
    }

    /// Binds `relayer_url` to `account`: with `gateway_key`, that key is used from now on (it
    /// replaces any key, one set by hand included); with `None`, the key is looked up in
    /// `account`'s heartbeats (a key already known is kept when the account does not change).
    /// Lifts a refusal of the relayer.
    fn bind_relayer(
        &self,
        relayer_url: &str,
        account: Address,
        gateway_key: Option<&str>,
    ) -> Result<(), TransportError> {
        Ok(self.bind(relayer_url, account, gateway_key)?)
    }

    fn sends_dummies(&self) -> bool {
        true
    }

    /// [`OhttpTransport::send_dummy`], its answer in the status answer's class.
    async fn send_dummy(
        &self,
        relayer_url: &str,
        request_class: usize,
    ) -> Result<(), TransportError> {
        Ok(OhttpTransport::send_dummy(self, relayer_url, request_class, 0).await?)
    }
}
