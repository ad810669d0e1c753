//! Client options (docs/API.md §2.2) and their defaults.

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::Address;
use privsvc_ledger::LedgerReader;
use privsvc_ohttp::{Fetch, Transport};
use privsvc_tokens::{KeyPins, MemoryRelayerPins, RelayerPins, TokenSource, TokenStore};
use privsvc_vault::{Vault, Wallet};

use crate::protocol::InfoResponse;

/// Default random delay range before each submission, ms.
pub const DEFAULT_DELAY_MS: (u64, u64) = (0, 20_000);
/// Default `maxHoldMs` sent when `min_anonymity` is above 1.
pub const DEFAULT_MAX_HOLD_MS: u64 = 600_000;
/// Default status polling interval.
pub const DEFAULT_POLL: Duration = Duration::from_millis(2_000);
/// Default rarity threshold.
pub const DEFAULT_RARITY_K: usize = 3;
/// Default number of extra random batches fetched when reading.
pub const DEFAULT_COVER_BATCHES: usize = 2;
pub use privsvc_vault::DEFAULT_PROOF_TTL_SECONDS;
/// Default rate of the cover stream, slots per minute (0: no cover stream).
pub const DEFAULT_COVER_PER_MINUTE: f64 = 0.0;
/// Default share of the cover stream's dummies padded to the submission class.
pub const DEFAULT_COVER_SUBMISSION_SHARE: f64 = 0.1;
/// Ledger block time in seconds (the constant BLOCK_TIME_SECONDS, docs/PROTOCOL.md §4).
pub const BLOCK_TIME_SECONDS: u64 = 2;

/// How the client obtains rate-limit tokens.
#[derive(Clone, Default)]
pub enum TokenSupply {
    /// Fetch tokens with the wallet at session start when a relayer requires them.
    #[default]
    Auto,
    /// Take tokens from this source.
    Source(Arc<dyn TokenSource>),
}

impl std::fmt::Debug for TokenSupply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSupply::Auto => f.write_str("Auto"),
            TokenSupply::Source(_) => f.write_str("Source(..)"),
        }
    }
}

/// A relayer the client is told to use (docs/API.md §2.3, docs/PROTOCOL.md §8.6): its base URL
/// and, optionally, the account that runs it.
///
/// With an address, discovery is skipped for this relayer: only that account's heartbeat
/// gives the relayer's OHTTP gateway key (heartbeats of other accounts naming the URL are
/// ignored), and the relayer's `/v1/info` must answer that address. Without one, the URL
/// belongs to the account pinned for it on first use, or to the one account whose live
/// heartbeats name it (two accounts: refused as ambiguous). A plain URL converts into a
/// `RelayerRef` without an address, so `.relayers(["https://relayer.example"])` works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayerRef {
    /// The relayer's base URL.
    pub url: String,
    /// The relayer's account, when known out of band.
    pub address: Option<Address>,
}

impl RelayerRef {
    /// A relayer known by its URL only.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            address: None,
        }
    }

    /// A relayer known by its URL and account.
    pub fn with_address(url: impl Into<String>, address: Address) -> Self {
        Self {
            url: url.into(),
            address: Some(address),
        }
    }
}

impl From<&str> for RelayerRef {
    fn from(url: &str) -> Self {
        Self::new(url)
    }
}

impl From<String> for RelayerRef {
    fn from(url: String) -> Self {
        Self::new(url)
    }
}

impl From<&String> for RelayerRef {
    fn from(url: &String) -> Self {
        Self::new(url.as_str())
    }
}

impl From<(String, Address)> for RelayerRef {
    fn from((url, address): (String, Address)) -> Self {
        Self::with_address(url, address)
    }
}

impl From<(&str, Address)> for RelayerRef {
    fn from((url, address): (&str, Address)) -> Self {
        Self::with_address(url, address)
    }
}

/// Every option of a [`crate::PrivateClient`]. Build it with [`crate::PrivateClient::builder`].
#[derive(Clone)]
#[non_exhaustive]
pub struct ClientOptions {
    /// Key-derivation namespace; also the default project.
    pub app: String,
    /// The user's wallet (either this or `vault`).
    pub wallet: Option<Arc<dyn Wallet>>,
    /// A ready key vault used instead of `wallet`.
    pub vault: Option<Arc<dyn Vault>>,
    /// Value of the `project` attribute (default: the app).
    pub project: Option<String>,
    /// The relayers to use, by URL and optionally account (default: discover live relayers
    /// from heartbeats).
    pub relayers: Option<Vec<RelayerRef>>,
    /// Where the client pins each relayer URL to its account on first use (default: the token
    /// store's pins, [`TokenStore::relayer_pins`]: in a file next to a `FileTokenStore`, in
    /// memory with the memory store; else in memory for the session). Once built, the
    /// client's options hold the pins in use.
    pub relayer_pins: Option<Arc<dyn RelayerPins>>,
    /// Send every relayer call through this OHTTP relay.
    pub ohttp_relay: Option<String>,
    /// Keep keys in an isolated thread (default false natively; the JS package's default is true
    /// in browsers).
    /// When the thread cannot start, the client warns and keeps the keys in-process
    /// ([`crate::PrivateClient::keys_isolated`] tells which).
    pub isolate_keys: bool,
    /// Reader for every ledger query (default: JSON-RPC to the public test network,
    /// [`crate::DEFAULT_RPC_URL`]).
    pub reader: Option<Arc<dyn LedgerReader>>,
    /// Random delay range before each submission, ms.
    pub delay_ms: (u64, u64),
    /// Smallest acceptable batch.
    pub min_anonymity: u64,
    /// How long the relayer may hold the record (default 600000 when `min_anonymity` > 1).
    pub max_hold_ms: Option<u64>,
    /// How long one relayer attempt may take from its 202 until the record is written, plus
    /// `maxHoldMs` when `min_anonymity` > 1 (default: [`default_inclusion_timeout`] from the
    /// chosen relayer's info). An absolute deadline: queue positions never extend it.
    pub inclusion_timeout: Option<Duration>,
    /// Status polling interval.
    pub poll_interval: Duration,
    /// Refuse a write when `check()` returns any warning.
    pub strict: bool,
    /// Warn when fewer than this many existing records share the attribute values; 0 disables.
    pub rarity_k: usize,
    /// Extra random batches fetched when reading.
    pub cover_batches: usize,
    /// Token mode.
    pub tokens: TokenSupply,
    /// Where auto mode keeps unspent tokens (default: the device store natively, see
    /// [`ClientOptions::data_dir`]; in memory with [`ClientOptions::memory_stores`]).
    pub token_store: Option<Arc<dyn TokenStore>>,
    /// One-time attestation code for issuers that need one.
    pub token_attestation: Option<String>,
    /// Minimum age of a token before auto mode spends it, counted from when it was obtained
    /// (default 60000 ms, [`privsvc_tokens::DEFAULT_MIN_AGE_MS`]; the random delay does not
    /// count).
    pub token_min_age_ms: u64,
    /// With `allow_on_demand`, the longest a write waits for tokens it fetched to ripen
    /// (default 90000 ms, [`privsvc_tokens::DEFAULT_RIPE_WAIT_MS`]).
    pub token_ripe_wait_ms: u64,
    /// The oldest age at which a token obtained in this session ripens: each ripens at its own
    /// random age between `token_min_age_ms` and this (default 3600000 ms,
    /// [`privsvc_tokens::DEFAULT_MAX_RIPE_MS`]), so that the moment it is spent says nothing of
    /// when it was issued. Tokens from earlier sessions ripen at `token_min_age_ms`.
    pub token_max_ripe_ms: u64,
    /// Where auto mode pins the first issuer key per (issuer, app, epoch) (default: the token
    /// store's pins, [`TokenStore::key_pins`]: on disk next to a `FileTokenStore`, in memory
    /// with the memory store).
    pub token_pins: Option<Arc<dyn KeyPins>>,
    /// Let a write that finds no ripe token fetch tokens from the issuer and spend one of them
    /// once `token_min_age_ms` old (default false). A timing risk, the app's explicit choice:
    /// the issuer sees an issue request a moment before the write's token is spent. Without
    /// it, a write spends only a token obtained before the write was requested, goes to a
    /// relayer that requires none, or fails with `NoRipeToken` at once.
    pub allow_on_demand: bool,
    /// The session's own timers: the tail, status polls after `written`, token refills
    /// ([`crate::SessionSchedule`]).
    pub schedule: crate::SessionSchedule,
    /// Seed of the client's own random choices (delays, relayer choice, its timers), for
    /// reproducible tests; `None` (the default) draws them from the operating system.
    pub seed: Option<u64>,
    /// Count a record as the app's only if a known relayer created it.
    pub trusted_relayers_only: bool,
    /// The transport to relayers (default: plain HTTP, or OHTTP when `ohttp_relay` is set).
    pub transport: Option<Arc<dyn Transport>>,
    /// The HTTP stack of relayer and issuer calls (JS `fetch`; default reqwest). Used by the
    /// default transport (direct or through `ohttp_relay`) and by direct issuer calls; not by
    /// a `transport` given here, nor by the ledger reader.
    pub fetch: Option<Arc<dyn Fetch>>,
    /// Where the session's listing is kept between sessions, sealed under the vault's
    /// scan-cache key (default: nowhere; see [`ScanCacheStore`](crate::ScanCacheStore)).
    pub scan_cache: Option<Arc<dyn crate::scan_cache::ScanCacheStore>>,
    /// The resume granularity of the scan cache in blocks (default
    /// [`crate::scan_cache::DEFAULT_RESUME_BLOCKS`], an hour): a returning session lists from the
    /// last multiple of it, never from the exact block its previous session reached.
    pub scan_cache_resume_blocks: u64,
    /// Where the device store lives natively (tokens, key pins, relayer pins and the scan cache
    /// kept between sessions, sealed under a key from the vault's root; see
    /// `crate::device_store`). Default: [`crate::device_store::default_data_dir`]. Stores given
    /// explicitly (`token_store`, `token_pins`, `relayer_pins`, `scan_cache`) are used instead
    /// of its parts.
    pub data_dir: Option<std::path::PathBuf>,
    /// Slots per minute of the session's cover stream (docs/PROTOCOL.md §8.8): through an
    /// OHTTP relay, an open session sends requests at the moments of a Poisson process of this
    /// rate, real ones when they wait, padded dummies otherwise. 0 (the default): none.
    pub cover_per_minute: f64,
    /// The share of the cover stream's dummies padded to the submission class (default 0.1).
    pub cover_submission_share: f64,
    /// Keep everything in memory for this session only (default false). Every session then
    /// starts with no tokens (each one's first write is a first spend the issuer can time), no
    /// pins (a stranger's heartbeat can make a relayer ambiguous) and no scan cache.
    pub memory_stores: bool,
    /// The session's first listing, started before the session ([`crate::FirstListing`]);
    /// used when the session resumes no scan cache, dropped otherwise.
    pub first_listing: Option<crate::FirstListing>,
    /// The attack lab's leaky setting (feature `lab-leaks`, never in a deployment): the
    /// envelope's `hour` from the device clock off by this many seconds, as before revision 4,
    /// instead of from the chain's time.
    #[cfg(feature = "lab-leaks")]
    #[doc(hidden)]
    pub lab_device_clock_hour: Option<i64>,
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("app", &self.app)
            .field("wallet", &self.wallet.as_ref().map(|w| w.address()))
            .field("vault", &self.vault.is_some())
            .field("project", &self.project)
            .field("relayers", &self.relayers)
            .field("relayer_pins", &self.relayer_pins.is_some())
            .field("ohttp_relay", &self.ohttp_relay)
            .field("isolate_keys", &self.isolate_keys)
            .field("reader", &self.reader.is_some())
            .field("delay_ms", &self.delay_ms)
            .field("min_anonymity", &self.min_anonymity)
            .field("max_hold_ms", &self.max_hold_ms)
            .field("inclusion_timeout", &self.inclusion_timeout)
            .field("poll_interval", &self.poll_interval)
            .field("strict", &self.strict)
            .field("rarity_k", &self.rarity_k)
            .field("cover_batches", &self.cover_batches)
            .field("tokens", &self.tokens)
            .field("token_store", &self.token_store.is_some())
            .field("token_attestation", &self.token_attestation.is_some())
            .field("token_max_ripe_ms", &self.token_max_ripe_ms)
            .field("allow_on_demand", &self.allow_on_demand)
            .field("schedule", &self.schedule)
            .field("seed", &self.seed.is_some())
            .field("trusted_relayers_only", &self.trusted_relayers_only)
            .field("transport", &self.transport.is_some())
            .field("fetch", &self.fetch.is_some())
            .field("scan_cache", &self.scan_cache.is_some())
            .field("scan_cache_resume_blocks", &self.scan_cache_resume_blocks)
            .field("data_dir", &self.data_dir)
            .field("cover_per_minute", &self.cover_per_minute)
            .field("cover_submission_share", &self.cover_submission_share)
            .field("memory_stores", &self.memory_stores)
            .field("first_listing", &self.first_listing)
            .finish()
    }
}

impl ClientOptions {
    /// Options with every default for `app`.
    pub fn new(app: impl Into<String>) -> Self {
        Self {
            app: app.into(),
            wallet: None,
            vault: None,
            project: None,
            relayers: None,
            relayer_pins: None,
            ohttp_relay: None,
            isolate_keys: false,
            reader: None,
            delay_ms: DEFAULT_DELAY_MS,
            min_anonymity: 1,
            max_hold_ms: None,
            inclusion_timeout: None,
            poll_interval: DEFAULT_POLL,
            strict: false,
            rarity_k: DEFAULT_RARITY_K,
            cover_batches: DEFAULT_COVER_BATCHES,
            tokens: TokenSupply::Auto,
            token_store: None,
            token_attestation: None,
            token_min_age_ms: privsvc_tokens::DEFAULT_MIN_AGE_MS,
            token_ripe_wait_ms: privsvc_tokens::DEFAULT_RIPE_WAIT_MS,
            token_max_ripe_ms: privsvc_tokens::DEFAULT_MAX_RIPE_MS,
            token_pins: None,
            allow_on_demand: false,
            schedule: crate::SessionSchedule::default(),
            seed: None,
            trusted_relayers_only: false,
            transport: None,
            fetch: None,
            scan_cache: None,
            scan_cache_resume_blocks: crate::scan_cache::DEFAULT_RESUME_BLOCKS,
            data_dir: None,
            cover_per_minute: DEFAULT_COVER_PER_MINUTE,
            cover_submission_share: DEFAULT_COVER_SUBMISSION_SHARE,
            memory_stores: false,
            first_listing: None,
            #[cfg(feature = "lab-leaks")]
            lab_device_clock_hour: None,
        }
    }

    /// The relayer pins to use: `relayer_pins`, else the token store's, else new pins in
    /// memory (a new set on every call: keep the result).
    pub fn effective_relayer_pins(&self) -> Arc<dyn RelayerPins> {
        self.relayer_pins
            .clone()
            .or_else(|| self.token_store.as_ref().and_then(|s| s.relayer_pins()))
            .unwrap_or_else(|| Arc::new(MemoryRelayerPins::default()))
    }

    /// The project in use: the explicit one or the app.
    pub fn project(&self) -> &str {
        self.project.as_deref().unwrap_or(&self.app)
    }

    /// The `maxHoldMs` to send: the explicit value, or 600000 when `min_anonymity` > 1.
    pub fn effective_max_hold_ms(&self) -> Option<u64> {
        match self.max_hold_ms {
            Some(v) => Some(v),
            None if self.min_anonymity > 1 => Some(DEFAULT_MAX_HOLD_MS),
            None => None,
        }
    }

    /// The inclusion timeout for a relayer with `info`: the explicit value or the default formula.
    pub fn inclusion_timeout_for(&self, info: &InfoResponse) -> Duration {
        self.inclusion_timeout
            .unwrap_or_else(|| default_inclusion_timeout(info))
    }
}

/// The default inclusion timeout (docs/PROTOCOL.md §8.3): `3 × (maxWaitMs + 2 s ×
/// minIntervalBlocks) + 30 s`.
pub fn default_inclusion_timeout(info: &InfoResponse) -> Duration {
    let per_round = info
        .max_wait_ms
        .saturating_add((BLOCK_TIME_SECONDS * 1000).saturating_mul(info.min_interval_blocks));
    Duration::from_millis(per_round.saturating_mul(3).saturating_add(30_000))
}

/// Builder of a [`crate::PrivateClient`]; every method sets one option of the table in
/// docs/API.md §2.2.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    pub(crate) options: ClientOptions,
}

impl ClientBuilder {
    /// A builder with every default for `app`.
    pub fn new(app: impl Into<String>) -> Self {
        Self {
            options: ClientOptions::new(app),
        }
    }

    /// The options collected so far.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// The user's wallet: derives the keys and signs token requests.
    pub fn wallet(mut self, wallet: Arc<dyn Wallet>) -> Self {
        self.options.wallet = Some(wallet);
        self
    }
    /// A ready key vault (e.g. random-root mode) instead of a wallet.
    pub fn vault(mut self, vault: Arc<dyn Vault>) -> Self {
        self.options.vault = Some(vault);
        self
    }
    /// The `project` attribute value (default: the app).
    pub fn project(mut self, project: impl Into<String>) -> Self {
        self.options.project = Some(project.into());
        self
    }
    /// The relayers to use (default: discovered from heartbeats): URLs, or [`RelayerRef`]s
    /// with the relayer's account to skip discovery.
    pub fn relayers<I, S>(mut self, relayers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<RelayerRef>,
    {
        self.options.relayers = Some(relayers.into_iter().map(Into::into).collect());
        self
    }
    /// Where to pin each relayer URL to its account on first use (default: the token
    /// store's relayer pins).
    pub fn relayer_pins(mut self, pins: Arc<dyn RelayerPins>) -> Self {
        self.options.relayer_pins = Some(pins);
        self
    }
    /// Send every relayer call through this OHTTP relay.
    pub fn ohttp_relay(mut self, relay_url: impl Into<String>) -> Self {
        self.options.ohttp_relay = Some(relay_url.into());
        self
    }
    /// Keep keys in an isolated thread; if it cannot start, warn and keep them in-process.
    pub fn isolate_keys(mut self, on: bool) -> Self {
        self.options.isolate_keys = on;
        self
    }
    /// The ledger reader for all queries.
    pub fn reader(mut self, reader: Arc<dyn LedgerReader>) -> Self {
        self.options.reader = Some(reader);
        self
    }
    /// Random delay range before each submission, ms.
    pub fn delay_ms(mut self, min: u64, max: u64) -> Self {
        self.options.delay_ms = (min.min(max), min.max(max));
        self
    }
    /// Smallest acceptable batch.
    pub fn min_anonymity(mut self, k: u64) -> Self {
        self.options.min_anonymity = k.max(1);
        self
    }
    /// How long the relayer may hold the record, ms.
    pub fn max_hold_ms(mut self, ms: u64) -> Self {
        self.options.max_hold_ms = Some(ms);
        self
    }
    /// Give up on a relayer whose queue position has not improved for this long.
    pub fn inclusion_timeout(mut self, timeout: Duration) -> Self {
        self.options.inclusion_timeout = Some(timeout);
        self
    }
    /// Status polling interval.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.options.poll_interval = interval;
        self
    }
    /// Refuse writes that `check()` warns about.
    pub fn strict(mut self, on: bool) -> Self {
        self.options.strict = on;
        self
    }
    /// Rarity threshold (0 disables the rarity check).
    pub fn rarity_k(mut self, k: usize) -> Self {
        self.options.rarity_k = k;
        self
    }
    /// Extra random batches fetched when reading.
    pub fn cover_batches(mut self, n: usize) -> Self {
        self.options.cover_batches = n;
        self
    }
    /// Token mode (`TokenSupply::Auto` or a `TokenSource`).
    pub fn tokens(mut self, tokens: TokenSupply) -> Self {
        self.options.tokens = tokens;
        self
    }
    /// Where auto mode keeps unspent tokens.
    pub fn token_store(mut self, store: Arc<dyn TokenStore>) -> Self {
        self.options.token_store = Some(store);
        self
    }
    /// One-time attestation code for issuers that need one.
    pub fn token_attestation(mut self, code: impl Into<String>) -> Self {
        self.options.token_attestation = Some(code.into());
        self
    }
    /// Minimum age (ms) of a token before auto mode spends it (default 60000).
    pub fn token_min_age_ms(mut self, ms: u64) -> Self {
        self.options.token_min_age_ms = ms;
        self
    }
    /// With `allow_on_demand`, the longest wait (ms) for fetched tokens to ripen (default 90000).
    pub fn token_ripe_wait_ms(mut self, ms: u64) -> Self {
        self.options.token_ripe_wait_ms = ms;
        self
    }
    /// Where the device store lives (default: `$PRIVSVC_DATA_DIR`, else the platform's data
    /// directory; see [`ClientOptions::data_dir`]).
    pub fn data_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.options.data_dir = Some(dir.into());
        self
    }
    /// The cover stream: `per_minute` slots a minute through the OHTTP relay, a share
    /// `submission_share` of the dummies in the submission class (see
    /// [`ClientOptions::cover_per_minute`]).
    pub fn cover(mut self, per_minute: f64, submission_share: f64) -> Self {
        self.options.cover_per_minute = per_minute.max(0.0);
        self.options.cover_submission_share = submission_share.clamp(0.0, 1.0);
        self
    }
    /// Keep tokens, pins and the scan cache in memory for this session only (see
    /// [`ClientOptions::memory_stores`]: every session becomes a first spend).
    pub fn memory_stores(mut self, on: bool) -> Self {
        self.options.memory_stores = on;
        self
    }
    /// The oldest ripening age of a token obtained in this session, ms (default 3600000).
    pub fn token_max_ripe_ms(mut self, ms: u64) -> Self {
        self.options.token_max_ripe_ms = ms;
        self
    }
    /// Where auto mode pins issuer keys (default: in memory for the session).
    pub fn token_pins(mut self, pins: Arc<dyn KeyPins>) -> Self {
        self.options.token_pins = Some(pins);
        self
    }
    /// Let a write fetch tokens when none is ripe (a timing risk: see
    /// [`ClientOptions::allow_on_demand`]).
    pub fn allow_on_demand(mut self, on: bool) -> Self {
        self.options.allow_on_demand = on;
        self
    }
    /// The session's timers (tail, status polls after `written`, token refills).
    pub fn schedule(mut self, schedule: crate::SessionSchedule) -> Self {
        self.options.schedule = schedule;
        self
    }
    /// Keep the session's listing between sessions in `store` (see [`ScanCacheStore`](crate::ScanCacheStore)).
    pub fn scan_cache(mut self, store: Arc<dyn crate::scan_cache::ScanCacheStore>) -> Self {
        self.options.scan_cache = Some(store);
        self
    }
    /// Keep the session's listing between sessions in the file `path` (mode 0600).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn scan_cache_file(self, path: impl Into<std::path::PathBuf>) -> Self {
        self.scan_cache(Arc::new(crate::scan_cache::FileScanCache::new(path)))
    }
    /// The scan cache's resume granularity in blocks (default an hour of blocks; 1 resumes from
    /// the exact block, which lets the RPC link a user's sessions: for tests only).
    pub fn scan_cache_resume_blocks(mut self, blocks: u64) -> Self {
        self.options.scan_cache_resume_blocks = blocks;
        self
    }

    /// The session's first listing, started before the vault ([`crate::FirstListing`]): only
    /// for a device that certainly keeps no scan cache for this session (the session drops it
    /// when it resumes one).
    pub fn first_listing(mut self, listing: crate::FirstListing) -> Self {
        self.options.first_listing = Some(listing);
        self
    }

    /// The attack lab's leaky setting (feature `lab-leaks`, never in a deployment): the
    /// envelope's `hour` from a device clock off by `secs` seconds, as before revision 4.
    #[cfg(feature = "lab-leaks")]
    #[doc(hidden)]
    pub fn lab_device_clock_hour(mut self, secs: i64) -> Self {
        self.options.lab_device_clock_hour = Some(secs);
        self
    }

    /// Seed the client's own random choices (reproducible tests).
    pub fn seed(mut self, seed: u64) -> Self {
        self.options.seed = Some(seed);
        self
    }
    /// Count a record as the app's only if a known relayer created it.
    pub fn trusted_relayers_only(mut self, on: bool) -> Self {
        self.options.trusted_relayers_only = on;
        self
    }
    /// The transport to relayers.
    pub fn transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.options.transport = Some(transport);
        self
    }
    /// The HTTP stack of relayer and issuer calls (JS `fetch`).
    pub fn fetch(mut self, fetch: Arc<dyn Fetch>) -> Self {
        self.options.fetch = Some(fetch);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(max_wait_ms: u64, min_interval_blocks: u64) -> InfoResponse {
        InfoResponse {
            address: "0x0000000000000000000000000000000000000001".into(),
            version: crate::protocol::API_VERSION.into(),
            chain_id: 1,
            min_batch: 1,
            max_wait_ms,
            min_interval_blocks,
            tokens_required: false,
            issuer: None,
            issuer_url: None,
            max_min_anonymity: 10,
            max_hold_ms: 600_000,
            ohttp_key: None,
        }
    }

    #[test]
    fn defaults_follow_the_table_in_docs_api() {
        let b = ClientBuilder::new("notes");
        let o = b.options();
        assert_eq!(o.project(), "notes");
        assert_eq!(o.delay_ms, (0, 20_000));
        assert_eq!(o.min_anonymity, 1);
        assert_eq!(o.effective_max_hold_ms(), None);
        assert_eq!(o.poll_interval, Duration::from_millis(2000));
        assert!(!o.strict);
        assert_eq!(o.rarity_k, 3);
        assert_eq!(o.cover_batches, 2);
        assert!(matches!(o.tokens, TokenSupply::Auto));
        assert!(!o.trusted_relayers_only);
        let o = ClientBuilder::new("notes")
            .min_anonymity(3)
            .project("p")
            .options;
        assert_eq!(o.effective_max_hold_ms(), Some(600_000));
        assert_eq!(o.project(), "p");
    }

    #[test]
    fn inclusion_timeout_formula() {
        // 3 × (5000 + 2000 × 2) + 30000 = 57000 ms
        assert_eq!(
            default_inclusion_timeout(&info(5000, 2)),
            Duration::from_millis(57_000)
        );
        let o = ClientBuilder::new("a")
            .inclusion_timeout(Duration::from_secs(4))
            .options;
        assert_eq!(
            o.inclusion_timeout_for(&info(5000, 2)),
            Duration::from_secs(4)
        );
        assert_eq!(
            ClientOptions::new("a").inclusion_timeout_for(&info(0, 0)),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn relayers_take_urls_and_references_with_addresses() {
        let account = Address::repeat_byte(1);
        let o = ClientBuilder::new("a")
            .relayers(["http://a.example", "http://b.example"])
            .options;
        assert_eq!(
            o.relayers,
            Some(vec![
                RelayerRef::new("http://a.example"),
                RelayerRef::new("http://b.example")
            ])
        );
        let urls = vec![String::from("http://c.example")];
        let o = ClientBuilder::new("a").relayers(&urls).options;
        assert_eq!(o.relayers.unwrap()[0].address, None);
        let o = ClientBuilder::new("a")
            .relayers([
                RelayerRef::with_address("http://a.example", account),
                ("http://b.example", account).into(),
            ])
            .options;
        let given = o.relayers.unwrap();
        assert!(given.iter().all(|r| r.address == Some(account)));
    }

    #[test]
    fn relayer_pins_default_to_the_token_stores() {
        let account = Address::repeat_byte(2);
        let store = privsvc_tokens::memory_store();
        let o = ClientBuilder::new("a").token_store(store.clone()).options;
        o.effective_relayer_pins()
            .pin("http://a.example", account)
            .unwrap();
        assert_eq!(
            store
                .relayer_pins()
                .unwrap()
                .get("http://a.example")
                .unwrap(),
            Some(account)
        );
        // Given pins win over the store's.
        let own: Arc<dyn RelayerPins> = Arc::new(MemoryRelayerPins::default());
        let o = ClientBuilder::new("a")
            .token_store(store)
            .relayer_pins(own.clone())
            .options;
        assert_eq!(
            o.effective_relayer_pins().get("http://a.example").unwrap(),
            None
        );
        assert!(Arc::ptr_eq(&o.effective_relayer_pins(), &own));
    }

    #[test]
    fn delay_range_is_ordered() {
        assert_eq!(
            ClientBuilder::new("a").delay_ms(9, 3).options.delay_ms,
            (3, 9)
        );
    }
}
