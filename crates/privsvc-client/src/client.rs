//! `PrivateClient`: construction, relayer bookkeeping and the small members.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use alloy_primitives::{Address, Signature};
use privsvc_attributes::{AppName, AttrValue, Attributes};
use privsvc_fingerprint::CheckWarning;
use privsvc_ledger::LedgerReader;
use privsvc_ohttp::Transport;
use privsvc_vault::{DeriveOptions, KeyVault, Vault, Wallet};
#[cfg(not(target_arch = "wasm32"))]
use privsvc_vault::{IsolatedVault, VaultError};
use rand::seq::SliceRandom;

use crate::cache::EntityCache;
use crate::checks;
use crate::discover::{
    bind_issuers, contact_relayer, discover_relayers_pinned, heartbeat_relayers,
};
use crate::error::PrivsvcError;
use crate::options::{ClientBuilder, ClientOptions};
use crate::relayer_api::RelayerStatus;
use crate::rng::{ClientRng, Purpose};
use crate::scan::Scanner;
use crate::scan_cache::ScanCacheState;
use crate::session::{Lister, Ticks};
use crate::tokens::TokenManager;

/// The ledger reader used when none is given: the public test network (Tiramisu).
pub const DEFAULT_RPC_URL: &str = "https://rpc.tiramisu.db-chain.testnet.arkiv.network";

/// The privsvc client: writes records through relayers, finds and verifies the user's own records
/// and proves ownership of them. Build it with [`PrivateClient::builder`].
pub struct PrivateClient {
    pub(crate) options: ClientOptions,
    /// `options.app`, checked.
    pub(crate) app: AppName,
    pub(crate) vault: Arc<dyn Vault>,
    pub(crate) reader: Arc<dyn LedgerReader>,
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) relayers: Arc<Mutex<Vec<RelayerStatus>>>,
    pub(crate) tokens: Arc<TokenManager>,
    /// The session's scans, and the cache they keep (the listing and the user's records).
    pub(crate) scanner: Arc<Scanner>,
    pub(crate) chain_id: u64,
    pub(crate) keys_isolated: bool,
    /// Tells writes waiting for the tail that one ran.
    pub(crate) tail: Arc<Ticks>,
    /// The session's transport with its cover stream's slots.
    pub(crate) cover: Arc<crate::cover::CoverTransport>,
    /// The client's own randomness for writes (delays, relayer choice, polls after `written`).
    pub(crate) rng: Arc<ClientRng>,
    /// The device store the session keeps its tokens, pins and scan cache in, natively (none
    /// with memory stores, or when every part was given explicitly).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) device_store: Option<crate::device_store::DeviceStore>,
    /// What became of the scan cache at start.
    pub(crate) scan_cache_state: ScanCacheState,
    /// The session's background tasks (tail, refills, prefetches, status polls after
    /// `written`), stopped when the client is dropped.
    pub(crate) tasks: Mutex<Vec<privsvc_rt::AbortHandle>>,
}

impl Drop for PrivateClient {
    fn drop(&mut self) {
        let handles = self.tasks.get_mut().unwrap_or_else(|p| p.into_inner());
        for h in handles.drain(..) {
            h.abort();
        }
    }
}

impl std::fmt::Debug for PrivateClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateClient")
            .field("app", &self.options.app)
            .field("project", &self.options.project())
            .field("chain_id", &self.chain_id)
            .field("keys_isolated", &self.keys_isolated)
            .finish_non_exhaustive()
    }
}

impl PrivateClient {
    /// A builder for `app` (the key-derivation namespace and default project).
    pub fn builder(app: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(app)
    }

    /// Builds from options: derives the keys (asking the wallet twice), contacts or discovers the
    /// relayers, lists the project once, then starts the session's schedule: the tail (an
    /// incremental listing every 15 to 45 s) and, in auto token mode with a wallet, the token
    /// refills (at a random moment within 10 minutes when the store holds fewer than 5 usable
    /// tokens, then within 10 minutes to 6 hours each time it runs low), all on the session's
    /// own timers ([`crate::SessionSchedule`]), never because of a write.
    ///
    /// No call names the wallet to the ledger: a contract wallet is refused because its
    /// derivation signatures do not recover to its address.
    ///
    /// With `isolate_keys`, the keys go to an isolated key thread; when that thread cannot start,
    /// the client logs a warning and keeps the keys in-process (see
    /// [`PrivateClient::keys_isolated`]).
    pub async fn from_options(mut options: ClientOptions) -> Result<Self, PrivsvcError> {
        let app = AppName::new(options.app.as_str())?;
        if options.wallet.is_none() && options.vault.is_none() {
            return Err(PrivsvcError::Config(
                "either a wallet or a vault is required: call `wallet(...)` or `vault(...)`".into(),
            ));
        }
        let reader: Arc<dyn LedgerReader> = match &options.reader {
            Some(r) => r.clone(),
            None => Arc::new(privsvc_ledger::RpcLedger::new(DEFAULT_RPC_URL)?),
        };
        let chain_id = reader.chain_id().await?;
        let (vault, keys_isolated) = make_vault(&options, chain_id).await?;
        if vault.app() != options.app {
            return Err(PrivsvcError::Config(format!(
                "the vault was derived for app {:?}, the client is for {:?}",
                vault.app(),
                options.app
            )));
        }
        #[cfg(not(target_arch = "wasm32"))]
        let device_store = use_device_store(&mut options, vault.as_ref(), chain_id).await?;
        let carrier = match &options.transport {
            Some(t) => t.clone(),
            None => crate::transport::default_transport(&options, reader.clone())?,
        };
        // Every call of the session (relayers, issuers) takes a slot of the cover stream once
        // the schedule starts (when the stream is on and the carrier sends dummies).
        let cover = Arc::new(crate::cover::CoverTransport::new(carrier));
        let transport: Arc<dyn Transport> = cover.clone();
        // One set of relayer pins for the session (and, with a persistent store, beyond).
        let pins = options.effective_relayer_pins();
        options.relayer_pins = Some(pins);
        let rng = Arc::new(ClientRng::new(options.seed, Purpose::Write));
        let tokens = Arc::new(TokenManager::new(
            &options,
            reader.clone(),
            transport.clone(),
            Arc::new(ClientRng::new(options.seed, Purpose::Tokens)),
        ));
        let lister = Lister {
            reader: reader.clone(),
            vault: vault.clone(),
            project: options.project().to_string(),
            with_attributes: options.rarity_k > 0,
            first: options.first_listing.take(),
        };
        let scan_cache = scan_cache_of(&options, vault.as_ref(), chain_id).await;
        let (cache, scan_cache_state) = match &scan_cache {
            Some(c) => {
                let (cache, state) = c.load().await;
                (cache.unwrap_or_default(), state)
            }
            None => (EntityCache::default(), ScanCacheState::Off),
        };
        // Every session's first listing selects only the tags, resumed or not, and every
        // session counting rarity makes its own attribute listing at its first tail
        // (docs/PROTOCOL.md §8.1): the RPC sees the same listings from every such session.
        let mut cache = cache;
        cache.with_attributes = false;
        // Filled once the relayers answered (below), before the first scan.
        let relayers = Arc::new(Mutex::new(Vec::new()));
        let scanner = Arc::new(Scanner {
            vault: vault.clone(),
            reader: reader.clone(),
            lister,
            cache: Arc::new(tokio::sync::Mutex::new(cache)),
            relayers: relayers.clone(),
            scan_cache,
            app: options.app.clone(),
            cover_batches: options.cover_batches,
            trusted_relayers_only: options.trusted_relayers_only,
            fetch_age_blocks: options.schedule.fetch_age_blocks,
            rng: ClientRng::new(options.seed, Purpose::Scan),
            ticks: Ticks::new(),
        });
        let client = Self {
            options,
            app,
            vault,
            reader,
            transport,
            relayers,
            tokens,
            scanner,
            chain_id,
            keys_isolated,
            tail: Arc::new(Ticks::new()),
            cover,
            rng,
            scan_cache_state,
            #[cfg(not(target_arch = "wasm32"))]
            device_store,
            tasks: Mutex::new(Vec::new()),
        };
        // The session's first listing (only tags: docs/PROTOCOL.md §8.1) and its first scan,
        // which uses that listing (the session's start, like every scan, is not caused by a
        // write); the tail keeps the listing up to date from here on, and its first run lists
        // the attributes.
        // The relayers are contacted while the first listing is on its way.
        let contact = contact_relayers(
            &client.options,
            client.reader.as_ref(),
            client.transport.as_ref(),
            chain_id,
        );
        client.scanner.first_tick(contact).await?;
        client.start_schedule();
        Ok(client)
    }

    /// Starts the tail, the scans and, in auto token mode with a wallet, the token refills.
    fn start_schedule(&self) {
        let tail = privsvc_rt::spawn(crate::session::run_tail(
            self.scanner.lister.clone(),
            self.scanner.cache.clone(),
            self.tail.clone(),
            Arc::new(ClientRng::new(self.options.seed, Purpose::Tail)),
            self.options.schedule.tail,
        ));
        self.keep(&tail);
        let scans = privsvc_rt::spawn(self.scanner.clone().run(
            self.options.schedule.scan,
            ClientRng::new(self.options.seed, Purpose::ScanTimer),
        ));
        self.keep(&scans);
        if self.options.cover_per_minute > 0.0 {
            let stream = privsvc_rt::spawn(crate::cover::run(
                self.cover.clone(),
                self.relayers.clone(),
                crate::cover::CoverSettings {
                    per_minute: self.options.cover_per_minute,
                    submission_share: self.options.cover_submission_share,
                },
                ClientRng::new(self.options.seed, Purpose::Cover),
            ));
            self.keep(&stream);
        }
        if self.tokens.fetches() {
            let infos = self
                .relayers()
                .into_iter()
                .map(|r| r.info)
                .collect::<Vec<_>>();
            let refills = privsvc_rt::spawn(self.tokens.clone().run_refills(
                self.app().to_string(),
                infos,
                self.options.schedule,
                Arc::new(ClientRng::new(self.options.seed, Purpose::Refill)),
            ));
            self.keep(&refills);
        }
    }

    /// Keeps a background task until the client is dropped.
    pub(crate) fn keep<T>(&self, task: &privsvc_rt::JoinHandle<T>) {
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(privsvc_rt::abort_handle(task));
    }

    /// Like the JS `prefetchLater` (docs/API.md §2.6): fetches `count` tokens of the app from the
    /// issuer of every relayer of the client that requires tokens, one token per issue request,
    /// each at its own random moment: one moment in each of `count` equal parts of `within`
    /// (default 6 hours), so the issuer can time neither the requests nor a write. Tokens obtained
    /// this way are spent like the others, only once `token_min_age_ms` old. Auto token mode with a
    /// wallet only. The task stops when the client is dropped; its result is how many tokens it
    /// added.
    pub fn prefetch_later(
        &self,
        count: usize,
        within: Option<Duration>,
    ) -> Result<privsvc_rt::JoinHandle<usize>, PrivsvcError> {
        if !self.tokens.fetches() {
            return Err(PrivsvcError::Config(
                "prefetch_later needs auto token mode and a wallet to sign issue requests".into(),
            ));
        }
        Ok(self.spawn_prefetch(
            count,
            within.unwrap_or(privsvc_tokens::DEFAULT_PREFETCH_WITHIN),
        ))
    }

    fn spawn_prefetch(&self, count: usize, within: Duration) -> privsvc_rt::JoinHandle<usize> {
        let infos = self
            .relayers()
            .into_iter()
            .map(|r| r.info)
            .collect::<Vec<_>>();
        let task = privsvc_rt::spawn(self.tokens.clone().prefetch(
            self.app().to_string(),
            infos,
            count,
            within,
            self.options.schedule.tail.1,
        ));
        self.keep(&task);
        task
    }

    /// Tokens of the app in auto mode's store that a write requested now could spend (obtained
    /// and at least `token_min_age_ms` old): 0 means a write goes to a relayer that requires no
    /// token, or fails with `NoRipeToken`. The session's refills keep the store stocked.
    pub fn ripe_tokens(&self) -> usize {
        self.tokens.ripe(self.app())
    }

    /// The app (key-derivation namespace).
    pub fn app(&self) -> &str {
        self.app.as_str()
    }

    /// The `project` attribute value in use.
    pub fn project(&self) -> &str {
        self.options.project()
    }

    /// The key vault in use.
    pub fn vault(&self) -> &Arc<dyn Vault> {
        &self.vault
    }

    /// Whether the client derived its keys on an isolated key thread. False when `isolate_keys`
    /// is off, when the key thread could not start (the keys are then in-process, and `build`
    /// logged a warning), and when a ready vault was given with `vault(...)` (the client does not
    /// know where that vault keeps its keys).
    pub fn keys_isolated(&self) -> bool {
        self.keys_isolated
    }

    /// The device store of the session (natively; `None` with memory stores, or when every
    /// part was given explicitly).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn device_store(&self) -> Option<&crate::device_store::DeviceStore> {
        self.device_store.as_ref()
    }

    /// What became of the scan cache when the session started: off, empty, resumed (from which
    /// block) or discarded (why).
    pub fn scan_cache_state(&self) -> ScanCacheState {
        self.scan_cache_state
    }

    /// The ledger reader in use.
    pub fn reader(&self) -> &Arc<dyn LedgerReader> {
        &self.reader
    }

    /// The options the client was built with.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// The ledger's chain id.
    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// Every relayer known to the session: url, address, bad flag and info.
    pub fn relayers(&self) -> Vec<RelayerStatus> {
        self.relayers.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Addresses of the reachable (not bad) relayers.
    pub fn relayer_addresses(&self) -> Vec<Address> {
        self.relayers()
            .into_iter()
            .filter(|r| !r.bad)
            .map(|r| r.address)
            .collect()
    }

    /// Marks a relayer bad for the rest of the session.
    pub(crate) fn mark_bad(&self, url: &str) {
        self.set_relayer_bad(url, true);
    }

    /// Sets or clears a relayer's `bad` flag. Writes go to relayers that are not bad first; bad
    /// ones are tried only when every other relayer failed. The client sets the flag itself
    /// when a relayer stops answering; use this to act on an out-of-band report.
    pub fn set_relayer_bad(&self, url: &str, bad: bool) {
        let url = privsvc_ohttp::normalize_relayer_url(url)
            .unwrap_or_else(|_| url.trim_end_matches('/').to_string());
        let mut rs = self.relayers.lock().unwrap_or_else(|p| p.into_inner());
        for r in rs.iter_mut().filter(|r| r.url == url) {
            r.bad = bad;
        }
    }

    /// A random relayer not in `tried`, preferring those not marked bad.
    pub(crate) fn pick_relayer(&self, tried: &HashSet<String>) -> Option<RelayerStatus> {
        let all = self.relayers();
        let good: Vec<&RelayerStatus> = all
            .iter()
            .filter(|r| !r.bad && !tried.contains(&r.url))
            .collect();
        if let Some(r) = self.rng.with(|rng| good.choose(rng).copied()) {
            return Some(r.clone());
        }
        let rest: Vec<&RelayerStatus> = all.iter().filter(|r| !tried.contains(&r.url)).collect();
        self.rng.with(|rng| rest.choose(rng).map(|r| (*r).clone()))
    }

    /// The owner address of scope `name`: every record written with `scope(name)` shares it.
    pub async fn scope_address(&self, name: &str) -> Result<Address, PrivsvcError> {
        let r = self.vault.scope_record(name).await?;
        Ok(self.vault.address_of(&r).await?)
    }

    /// Synchronous fingerprinting warnings for a record about to be written.
    pub fn check(
        &self,
        attributes: &[(String, AttrValue)],
        expires: privsvc_envelope::Expires,
        payload: &[u8],
    ) -> Vec<CheckWarning> {
        checks::check_input(attributes, expires, payload)
    }

    /// Rarity warnings: fewer than `k` (default `rarity_k`) of the project's records share these
    /// attribute values. Counted on the session's own listing, as its schedule keeps it: no
    /// request is made (a listing right before a write would tell the RPC a write is coming).
    /// Fails with [`PrivsvcError::RarityUnavailable`] when the session's listing carries no
    /// attributes (`rarity_k` 0 at build, or before the session's attribute listing, which its
    /// first tail makes).
    pub async fn check_rarity(
        &self,
        attributes: &Attributes,
        k: Option<usize>,
    ) -> Result<Vec<CheckWarning>, PrivsvcError> {
        let k = k.unwrap_or(self.options.rarity_k);
        let cache = self.scanner.cache.lock().await;
        if !cache.with_attributes {
            return Err(PrivsvcError::RarityUnavailable);
        }
        Ok(checks::rarity(&cache, attributes, k).unwrap_or_default())
    }

    /// Rarity warnings for a write, from the session's listing only; `None` when the session
    /// has not listed the project's attributes.
    pub(crate) async fn cached_rarity(&self, attributes: &Attributes) -> Option<Vec<CheckWarning>> {
        let cache = self.scanner.cache.lock().await;
        if !cache.with_attributes {
            return None;
        }
        checks::rarity(&cache, attributes, self.options.rarity_k)
    }
}

impl ClientBuilder {
    /// Builds the client (see [`PrivateClient::from_options`]).
    pub async fn build(self) -> Result<PrivateClient, PrivsvcError> {
        PrivateClient::from_options(self.options).await
    }
}

/// Opens the device store (unless the app asked for memory stores, or gave every part) and
/// puts its parts into `options` where the app gave none.
#[cfg(not(target_arch = "wasm32"))]
async fn use_device_store(
    options: &mut ClientOptions,
    vault: &dyn Vault,
    chain_id: u64,
) -> Result<Option<crate::device_store::DeviceStore>, PrivsvcError> {
    let every_part_given = options.token_store.is_some()
        && options.token_pins.is_some()
        && options.relayer_pins.is_some()
        && options.scan_cache.is_some();
    if options.memory_stores || every_part_given {
        return Ok(None);
    }
    let Some(dir) = options
        .data_dir
        .clone()
        .or_else(crate::device_store::default_data_dir)
    else {
        tracing::warn!("no data directory ($PRIVSVC_DATA_DIR, $XDG_DATA_HOME or $HOME): tokens, pins and the scan cache are kept in memory for this session only");
        return Ok(None);
    };
    let key = match vault.scan_cache_key().await {
        Ok(Some(key)) => key,
        Ok(None) => {
            tracing::warn!("the vault gives no store key: tokens, pins and the scan cache are kept in memory for this session only");
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    let store = crate::device_store::DeviceStore::open(&dir, &key, chain_id, options.project())?;
    // The pins that go with a token store the app gave stay with it.
    let given = options.token_store.clone();
    if options.token_store.is_none() {
        options.token_store = Some(store.token_store());
    }
    if options.token_pins.is_none() && given.as_ref().and_then(|s| s.key_pins()).is_none() {
        options.token_pins = Some(store.key_pins());
    }
    if options.relayer_pins.is_none() && given.as_ref().and_then(|s| s.relayer_pins()).is_none() {
        options.relayer_pins = Some(store.relayer_pins());
    }
    if options.scan_cache.is_none() {
        options.scan_cache = Some(store.scan_cache());
    }
    Ok(Some(store))
}

/// The session's scan cache: the options' store under the vault's scan-cache key; `None`
/// without a store, or with a vault that gives no key (a warning says so).
async fn scan_cache_of(
    options: &ClientOptions,
    vault: &dyn Vault,
    chain_id: u64,
) -> Option<crate::scan_cache::ScanCache> {
    let store = options.scan_cache.clone()?;
    match vault.scan_cache_key().await {
        Ok(Some(key)) => Some(crate::scan_cache::ScanCache::new(
            store,
            key,
            chain_id,
            options.project(),
            options.scan_cache_resume_blocks,
        )),
        Ok(None) => {
            tracing::warn!("the vault gives no scan-cache key; the listing is not kept");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "no scan-cache key from the vault; the listing is not kept");
            None
        }
    }
}

/// The vault to use and whether its keys are on an isolated key thread. No ledger call: a
/// contract wallet is refused by the derivation itself (its signatures do not recover to its
/// address), so the RPC is never told the wallet's address.
async fn make_vault(
    options: &ClientOptions,
    chain_id: u64,
) -> Result<(Arc<dyn Vault>, bool), PrivsvcError> {
    if let Some(v) = &options.vault {
        return Ok((v.clone(), false));
    }
    let wallet: &Arc<dyn Wallet> = options.wallet.as_ref().ok_or_else(|| {
        PrivsvcError::Config(
            "either a wallet or a vault is required: call `wallet(...)` or `vault(...)`".into(),
        )
    })?;
    let opts = DeriveOptions::for_chain(chain_id);
    if !options.isolate_keys {
        let vault = KeyVault::from_wallet(wallet.as_ref(), &options.app, &opts).await?;
        return Ok((Arc::new(vault), false));
    }
    // Ask the wallet once (it signs twice), so that a fallback does not ask again.
    let signature = KeyVault::sign_derivation(wallet.as_ref(), &options.app, &opts).await?;
    isolated_vault(&signature, &options.app)
}

/// The isolated vault of a derivation signature, or the in-process one when the key thread
/// cannot start.
#[cfg(not(target_arch = "wasm32"))]
fn isolated_vault(
    signature: &Signature,
    app: &str,
) -> Result<(Arc<dyn Vault>, bool), PrivsvcError> {
    match IsolatedVault::from_signature(signature, app) {
        Ok(vault) => Ok((Arc::new(vault), true)),
        // The thread could not be spawned, or it ended before it held the keys.
        Err(e @ (VaultError::KeyThread(_) | VaultError::Terminated)) => {
            // As for the JS `isolateKeys` (docs/API.md §3.1): when the worker cannot start, warn
            // and keep the keys in-process.
            // The error says why the thread did not start; it carries no key material.
            tracing::warn!(
                app = %app,
                error = %e,
                "the isolated key thread cannot start; keeping the keys in-process"
            );
            Ok((Arc::new(KeyVault::from_signature(signature, app)), false))
        }
        Err(e) => Err(e.into()),
    }
}

/// In wasm32 the keys are isolated by the page's Web Worker vault (passed as `vault`), not here:
/// without one, warn and keep the keys in-process, as for a worker that cannot start
/// (docs/API.md §3.1, `isolateKeys`).
#[cfg(target_arch = "wasm32")]
fn isolated_vault(
    signature: &Signature,
    app: &str,
) -> Result<(Arc<dyn Vault>, bool), PrivsvcError> {
    tracing::warn!(
        app = %app,
        "no key worker here (pass a worker vault); keeping the keys in-process"
    );
    Ok((Arc::new(KeyVault::from_signature(signature, app)), false))
}

/// The session's relayers (docs/PROTOCOL.md §8.6): the given ones, each checked
/// against its given or pinned account (and, through an OHTTP relay, bound to the gateway key
/// of that account's heartbeat), or the discovered ones; see [`contact_relayer`]. A relayer
/// on another chain, unreachable, ambiguous or disagreeing with its heartbeat is left out with
/// the reason; none left is [`PrivsvcError::NoRelayerAvailable`].
async fn contact_relayers(
    options: &ClientOptions,
    reader: &dyn LedgerReader,
    transport: &dyn Transport,
    chain_id: u64,
) -> Result<Vec<RelayerStatus>, PrivsvcError> {
    let pins = options.effective_relayer_pins();
    let mut out: Vec<RelayerStatus> = Vec::new();
    let mut problems = Vec::new();
    match &options.relayers {
        Some(given) => {
            // Through an OHTTP relay a relayer is reached only with the key of its account's
            // heartbeat; directly, its /v1/info is first-hand and no heartbeat is read.
            let heartbeats = if transport.uses_gateway_keys() {
                Some(heartbeat_relayers(reader).await?)
            } else {
                None
            };
            for relayer in given {
                let url = privsvc_ohttp::normalize_relayer_url(&relayer.url)?;
                if out.iter().any(|r| r.url == url) {
                    continue;
                }
                match contact_relayer(
                    transport,
                    heartbeats.as_deref(),
                    pins.as_ref(),
                    &url,
                    relayer.address,
                )
                .await
                {
                    Ok(status) if status.info.chain_id == chain_id => out.push(status),
                    Ok(status) => problems.push(format!(
                        "{url} writes to chain {}, the reader is on chain {chain_id}",
                        status.info.chain_id
                    )),
                    Err(e) => {
                        tracing::warn!(relayer = %url, error = %e, "relayer not usable at start");
                        problems.push(format!("{url}: {e}"))
                    }
                }
            }
        }
        None => {
            for r in discover_relayers_pinned(reader, transport, pins.as_ref()).await? {
                if r.info.chain_id == chain_id {
                    out.push(r);
                }
            }
            if out.is_empty() {
                problems.push(
                    "no live relayer heartbeat on the ledger that names its relayer unambiguously and agrees with its /v1/info".into(),
                );
            }
        }
    }
    if out.is_empty() {
        return Err(PrivsvcError::NoRelayerAvailable {
            reason: problems.join("; "),
        });
    }
    bind_issuers(transport, &out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_app_that_is_not_an_app_name_is_refused_before_anything_else() {
        for (app, len) in [(String::new(), 0), ("a".repeat(129), 129)] {
            let err = PrivateClient::from_options(ClientOptions::new(app))
                .await
                .unwrap_err();
            assert!(
                matches!(&err, PrivsvcError::InvalidApp(e) if e.len == len),
                "{err}"
            );
            assert!(err.to_string().contains("1 to 128 bytes"), "{err}");
        }
    }
}
