//! Relayer configuration: environment variables and command-line flags (flags win).
//!
//! | Variable | Flag | Default | Meaning |
//! |-|-|-|-|
//! | `LEDGER_RPC_URL` | `--rpc-url` | `http://127.0.0.1:8545` | ledger JSON-RPC endpoint |
//! | `CHAIN_ID` | `--chain-id` | read from the ledger | ledger network id (checked against the ledger) |
//! | `RELAYER_KEY_FILE` | `--key-file` | none | file holding the relayer's secp256k1 key (hex): THE way to pass the key (keep the file 0600) |
//! | `RELAYER_KEY` | none (env only) | none | the key itself, hex (used when no key file is given; discouraged: a process's environment is readable by its user's other processes and often ends up in logs) |
//! | `PUBLIC_URL` | `--public-url` | `http://<BIND>` | URL published in heartbeats |
//! | `BIND` | `--bind` | `127.0.0.1:8787` | listen address |
//! | `DATA_DIR` | `--data-dir` | `./privsvc-relayer-data` | directory of the SQLite queue |
//! | `MIN_BATCH` | `--min-batch` | 8 | flush as soon as this many records can be batched |
//! | `MAX_WAIT_MS` | `--max-wait-ms` | 30000 | flush when the oldest record waited this long |
//! | `MIN_INTERVAL_BLOCKS` | `--min-interval-blocks` | 1 | blocks between two batches, at least |
//! | `MAX_BATCH` | `--max-batch` | 100 | records per transaction, at most |
//! | `MAX_MIN_ANONYMITY` | `--max-min-anonymity` | 50 | largest `minAnonymity` accepted (<= MAX_BATCH) |
//! | `MAX_HOLD_MS` | `--max-hold-ms` | 600000 | largest `maxHoldMs` accepted |
//! | `TOKENS` | `--tokens` | `off` | `required` or `off` |
//! | `ISSUER` | `--issuer` | `off` | `on` mounts the token issuer on this relayer |
//! | `ISSUER_ADDRESS` | `--issuer-address` | this relayer when `ISSUER=on` | issuer whose keys are accepted |
//! | `ISSUER_URL` | `--issuer-url` | `PUBLIC_URL` when `ISSUER=on` | the issuer's base URL |
//! | `ISSUER_QUOTA` | `--issuer-quota` | 100 | tokens one wallet may obtain per app and day (`ISSUER=on`) |
//! | `ISSUER_CODES_FILE` | `--issuer-codes-file` | none | one-time attestation codes, one a line; when given, issuance needs one |
//! | `ISSUER_APPS` | `--issuer-apps` | none | comma-separated apps whose keys the issuer creates unasked: today's at start, each next day's during the day before (`ISSUER=on`) |
//! | `ISSUER_MAX_NEW_APPS` | `--issuer-max-new-apps` | 20 | apps a UTC day for which a first signed issue request may create a key (`ISSUER=on`; 0 = only `ISSUER_APPS`) |
//! | `ISSUER_MAX_ACTIVE_APPS` | `--issuer-max-active-apps` | 200 | apps outside `ISSUER_APPS` that get a next-day key, at most: the most used of the day's apps (most wallets, then most tokens issued); the others' keys lapse (`ISSUER=on`; 0 = only `ISSUER_APPS`) |
//! | `ISSUER_RATE_LIMIT_PER_MIN` | `--issuer-rate-limit-per-min` | 60 | requests a minute per source (IPv4 address, IPv6 /64) to `/v1/issuer/*` and `/v1/tokens/issue`, direct or inside `POST /v1/ohttp` from an address not in `OHTTP_RELAY_IPS` (`ISSUER=on`) |
//! | `OHTTP` | `--ohttp` | `off` | `on` serves `POST /v1/ohttp` |
//! | `OHTTP_SEED` | none (env only) | none | 32-byte hex seed of the gateway key (required with `OHTTP=on`) |
//! | `RATE_LIMIT_PER_MIN` | `--rate-limit-per-min` | 30 | submissions a minute per source (IPv4 address, IPv6 /64; tokens off), whether posted to `/v1/records` or inside `POST /v1/ohttp` from an address not in `OHTTP_RELAY_IPS` |
//! | `OHTTP_RELAY_IPS` | `--ohttp-relay-ips` | empty | comma-separated IPs of the OHTTP relays this relayer trusts to limit their clients: their `POST /v1/ohttp` (submissions and issuer requests inside) is not counted per address |
//! | `METRICS_BIND` | `--metrics-bind` | off | `host:port` of a separate listener serving `GET /metrics` (never served on `BIND`); `off` or empty: no metrics endpoint |
//! | `QUEUE_CAPACITY` | `--queue-capacity` | 10000 | queued records, at most (503 beyond) |
//! | `MIN_FREE_BYTES` | `--min-free-bytes` | 67108864 (64 MiB) | free space `DATA_DIR`'s filesystem keeps: below it new records are refused (503 with `Retry-After`) and `/healthz` says `ok: false`, so that the batches already accepted can still be recorded; 0 = no floor. Costs that much disk, never used for records |
//! | `HEARTBEAT_MS` | `--heartbeat-ms` | 600000 | heartbeat interval |
//! | `FLUSH_JITTER_MS` | `--flush-jitter-ms` | 1000 | each flush is delayed by a uniform random 0..=this many ms |
//! | `DECOYS_MAX` | `--decoys-max` | 0 | each batch transaction gets a uniformly random 0..=this many decoy records of the relayer's own (`decoys`; 0 = none) |
//! | `STATUS_RETENTION_MS` | `--status-retention-ms` | 3600000 | how long a finished status is kept |
//! | `LEDGER_TIMEOUT_MS` | `--ledger-timeout-ms` | 5000 | one ledger request gives up after this long (then it is retried with jittered backoff) |
//!
//! Bad values are refused by [`RelayerConfig::from_env_and_args`] with a message naming the
//! variable. The key is never logged (its `Debug` is redacted) and is zeroized on drop.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use alloy_primitives::Address;
use clap::Parser;
use zeroize::Zeroizing;

pub use crate::clock::Clock;

/// The default free-space floor of `DATA_DIR` (`MIN_FREE_BYTES`): 64 MiB, room for the WAL
/// between two checkpoints and for recording every batch of a full queue.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 64 * 1024 * 1024;

/// A bad configuration value, named by its variable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A value failed its check.
    #[error("invalid {name}: {reason}")]
    Invalid {
        /// The variable (as in the environment).
        name: &'static str,
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// The command line or an environment value could not be parsed; the source is the
    /// argument parser's error (its message lists what is accepted).
    #[error("{0}")]
    Parse(#[source] clap::Error),
}

fn invalid(name: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        name,
        reason: reason.into(),
    }
}

/// The relayer's secp256k1 signing key (32 bytes), zeroized on drop, never printed.
#[derive(Clone)]
pub struct RelayerKey(Zeroizing<[u8; 32]>);

impl RelayerKey {
    /// Parse a hex key (with or without `0x`, surrounding white space ignored).
    pub fn from_hex(text: &str) -> Result<Self, ConfigError> {
        let text = Zeroizing::new(text.trim().trim_start_matches("0x").to_string());
        let mut out = Zeroizing::new([0u8; 32]);
        hex::decode_to_slice(text.as_bytes(), out.as_mut_slice())
            .map_err(|_| invalid("RELAYER_KEY", "expected 32 bytes of hex (64 hex digits)"))?;
        if k256::ecdsa::SigningKey::from_slice(out.as_slice()).is_err() {
            return Err(invalid("RELAYER_KEY", "not a valid secp256k1 secret key"));
        }
        Ok(Self(out))
    }

    /// The raw key bytes (for building a ledger writer).
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The Ethereum address of the key.
    pub fn address(&self) -> Address {
        let sk = k256::ecdsa::SigningKey::from_slice(self.0.as_slice())
            .expect("checked at construction");
        Address::from_public_key(sk.verifying_key())
    }
}

impl fmt::Debug for RelayerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RelayerKey(<redacted>)")
    }
}

/// The 32-byte OHTTP gateway seed, zeroized on drop, never printed.
#[derive(Clone)]
pub struct OhttpSeed(Zeroizing<[u8; 32]>);

impl OhttpSeed {
    /// Wrap a seed.
    pub fn new(seed: [u8; 32]) -> Self {
        Self(Zeroizing::new(seed))
    }
    /// The seed bytes.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for OhttpSeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OhttpSeed(<redacted>)")
    }
}

/// The issuer's one-time attestation codes (never printed: `Debug` shows only how many).
#[derive(Clone)]
pub struct AttestationCodes(pub Vec<String>);

impl fmt::Debug for AttestationCodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AttestationCodes(<{} codes>)", self.0.len())
    }
}

/// Whether submissions need a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenMode {
    /// Tokens are not used; submissions are rate limited per source address.
    Off,
    /// Every submission must carry a valid, unspent token.
    Required,
}

/// When the relayer flushes a batch and how large it may be (`MIN_BATCH`, `MAX_WAIT_MS`,
/// `MIN_INTERVAL_BLOCKS`, `MAX_BATCH`, `MAX_MIN_ANONYMITY`, `MAX_HOLD_MS`, `FLUSH_JITTER_MS`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Batching {
    /// Flush as soon as this many records can be batched.
    pub min_batch: usize,
    /// Flush when the oldest record has waited this long (`MAX_WAIT_MS`).
    pub max_wait: Duration,
    /// Minimum blocks between two batch transactions.
    pub min_interval_blocks: u64,
    /// Records per transaction, at most.
    pub max_batch: usize,
    /// Largest `minAnonymity` accepted.
    pub max_min_anonymity: usize,
    /// Largest `maxHoldMs` accepted (`MAX_HOLD_MS`).
    pub max_hold: Duration,
    /// Upper bound of the random flush delay (`FLUSH_JITTER_MS`).
    pub flush_jitter: Duration,
    /// Decoy records per batch transaction, at most (`DECOYS_MAX`): each batch gets a uniformly
    /// random number from 0 to this; 0 (the default) adds none.
    pub decoys_max: usize,
}

impl Batching {
    /// [`Batching::max_hold`] in whole milliseconds (the protocol's `maxHoldMs`).
    pub fn max_hold_ms(&self) -> u64 {
        u64::try_from(self.max_hold.as_millis()).unwrap_or(u64::MAX)
    }
}

/// The token issuer this relayer runs (`ISSUER=on` and the `ISSUER_*` settings) or, with
/// tokens required and the issuer elsewhere, trusts (`ISSUER_ADDRESS`, `ISSUER_URL`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct IssuerSettings {
    /// Mount the token issuer (`ISSUER=on`).
    pub on: bool,
    /// Issuer whose keys are accepted (defaults to this relayer when the issuer is on).
    pub address: Option<Address>,
    /// Issuer base URL (defaults to the public URL when the issuer is on).
    pub url: Option<String>,
    /// Tokens per wallet, app and day handed out by the issuer (`ISSUER_QUOTA`).
    pub quota: u32,
    /// One-time attestation codes the issuer requires (`None`: no codes needed).
    pub codes: Option<AttestationCodes>,
    /// Apps whose keys the issuer creates without being asked (`ISSUER_APPS`).
    pub apps: Vec<String>,
    /// New apps a UTC day that issue requests may create a key for (`ISSUER_MAX_NEW_APPS`).
    pub max_new_apps: u32,
    /// Apps outside `apps` that get a next-day key, at most (`ISSUER_MAX_ACTIVE_APPS`).
    pub max_active_apps: u32,
    /// Requests a minute per source address to the issuer routes (`ISSUER_RATE_LIMIT_PER_MIN`).
    pub requests_per_min: u32,
    /// How often the issuer checks whether a key is due (not a setting; tests shorten it).
    pub schedule_period: Duration,
}

/// Per-source limits and the queue's capacity (`RATE_LIMIT_PER_MIN`, `OHTTP_RELAY_IPS`,
/// `QUEUE_CAPACITY`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Limits {
    /// Submissions per minute per source address when tokens are off (direct, or inside
    /// `POST /v1/ohttp` from an address not in `ohttp_relay_ips`).
    pub submissions_per_min: u32,
    /// OHTTP relays whose `POST /v1/ohttp` is not counted per address (`OHTTP_RELAY_IPS`).
    pub ohttp_relay_ips: Vec<IpAddr>,
    /// Queued records, at most (503 beyond).
    pub queue_capacity: usize,
    /// Free bytes `DATA_DIR`'s filesystem keeps: below, new records are refused (503) and the
    /// health record is not ok (`MIN_FREE_BYTES`; 0 = no floor).
    pub min_free_bytes: u64,
}

/// Everything the relayer needs to run. Build it with [`RelayerConfig::from_env_and_args`], or
/// start from [`RelayerConfig::new`] (the documented defaults) and set fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RelayerConfig {
    /// Ledger JSON-RPC URL (used by the example main to build the reader and writer).
    pub rpc_url: String,
    /// Expected chain id; `None` = whatever the ledger reports.
    pub chain_id: Option<u64>,
    /// The signing key (used by the example main to build the writer).
    pub key: Option<RelayerKey>,
    /// Listen address.
    pub bind: SocketAddr,
    /// Public base URL (heartbeats, issuer URL); `None` = `http://<bound address>`.
    pub public_url: Option<String>,
    /// Directory of `relayer.sqlite`.
    pub data_dir: PathBuf,
    /// When batches are flushed and how large they may be.
    pub batching: Batching,
    /// Token requirement.
    pub tokens: TokenMode,
    /// The token issuer this relayer runs or trusts.
    pub issuer: IssuerSettings,
    /// OHTTP gateway seed; `Some` = `OHTTP=on`.
    pub ohttp_seed: Option<OhttpSeed>,
    /// Per-source limits and the queue's capacity.
    pub limits: Limits,
    /// Listen address of the `GET /metrics` listener; `None` = no metrics endpoint.
    pub metrics_bind: Option<SocketAddr>,
    /// Time between two heartbeats (`HEARTBEAT_MS`).
    pub heartbeat_interval: Duration,
    /// How long a finished status is kept (`STATUS_RETENTION_MS`).
    pub status_retention: Duration,
    /// Timeout of one ledger request (used by the example main to build the RPC client).
    pub ledger_timeout: Duration,
    /// How long to wait for a batch receipt before treating the batch as in doubt.
    pub receipt_timeout: Duration,
    /// Block time assumed when waiting for `min_interval_blocks`.
    pub block_time: Duration,
    /// The relayer's clocks: the system's ([`Clock::system`], the default); tests pass one
    /// whose wall clock they step ([`Clock::step_wall`]).
    pub clock: Clock,
    /// The attack lab's leaky settings (feature `lab-leaks`, never in a deployment).
    #[cfg(feature = "lab-leaks")]
    pub lab_leaks: crate::lab_leaks::LabLeaks,
}

/// The command line and environment, as parsed by clap (every value optional: defaults and
/// checks live in [`RelayerConfig::from_env_and_args`]).
#[derive(Debug, Parser)]
#[command(name = "privsvc-relayer", about = "privsvc relayer")]
struct Cli {
    #[arg(long, env = "LEDGER_RPC_URL")]
    rpc_url: Option<String>,
    #[arg(long, env = "CHAIN_ID")]
    chain_id: Option<String>,
    #[arg(long, env = "RELAYER_KEY_FILE")]
    key_file: Option<PathBuf>,
    #[arg(long, env = "PUBLIC_URL")]
    public_url: Option<String>,
    #[arg(long, env = "BIND")]
    bind: Option<String>,
    #[arg(long, env = "DATA_DIR")]
    data_dir: Option<PathBuf>,
    #[arg(long, env = "MIN_BATCH")]
    min_batch: Option<String>,
    #[arg(long, env = "MAX_WAIT_MS")]
    max_wait_ms: Option<String>,
    #[arg(long, env = "MIN_INTERVAL_BLOCKS")]
    min_interval_blocks: Option<String>,
    #[arg(long, env = "MAX_BATCH")]
    max_batch: Option<String>,
    #[arg(long, env = "MAX_MIN_ANONYMITY")]
    max_min_anonymity: Option<String>,
    #[arg(long, env = "MAX_HOLD_MS")]
    max_hold_ms: Option<String>,
    #[arg(long, env = "TOKENS")]
    tokens: Option<String>,
    #[arg(long, env = "ISSUER")]
    issuer: Option<String>,
    #[arg(long, env = "ISSUER_ADDRESS")]
    issuer_address: Option<String>,
    #[arg(long, env = "ISSUER_URL")]
    issuer_url: Option<String>,
    #[arg(long, env = "ISSUER_QUOTA")]
    issuer_quota: Option<String>,
    #[arg(long, env = "ISSUER_CODES_FILE")]
    issuer_codes_file: Option<PathBuf>,
    #[arg(long, env = "ISSUER_APPS")]
    issuer_apps: Option<String>,
    #[arg(long, env = "ISSUER_MAX_NEW_APPS")]
    issuer_max_new_apps: Option<String>,
    #[arg(long, env = "ISSUER_MAX_ACTIVE_APPS")]
    issuer_max_active_apps: Option<String>,
    #[arg(long, env = "ISSUER_RATE_LIMIT_PER_MIN")]
    issuer_rate_limit_per_min: Option<String>,
    #[arg(long, env = "OHTTP")]
    ohttp: Option<String>,
    #[arg(long, env = "RATE_LIMIT_PER_MIN")]
    rate_limit_per_min: Option<String>,
    #[arg(long, env = "OHTTP_RELAY_IPS")]
    ohttp_relay_ips: Option<String>,
    #[arg(long, env = "METRICS_BIND")]
    metrics_bind: Option<String>,
    #[arg(long, env = "QUEUE_CAPACITY")]
    queue_capacity: Option<String>,
    #[arg(long, env = "MIN_FREE_BYTES")]
    min_free_bytes: Option<String>,
    #[arg(long, env = "HEARTBEAT_MS")]
    heartbeat_ms: Option<String>,
    #[arg(long, env = "FLUSH_JITTER_MS")]
    flush_jitter_ms: Option<String>,
    #[arg(long, env = "DECOYS_MAX")]
    decoys_max: Option<String>,
    #[arg(long, env = "STATUS_RETENTION_MS")]
    status_retention_ms: Option<String>,
    #[arg(long, env = "LEDGER_TIMEOUT_MS")]
    ledger_timeout_ms: Option<String>,
}

/// A duration given in milliseconds (`value`), within `min..=max` ms; `default` when absent.
fn millis(
    name: &'static str,
    value: Option<String>,
    default: Duration,
    min: u64,
    max: u64,
) -> Result<Duration, ConfigError> {
    let default = u64::try_from(default.as_millis()).unwrap_or(u64::MAX);
    Ok(Duration::from_millis(num(name, value, default, min, max)?))
}

fn num<T>(
    name: &'static str,
    value: Option<String>,
    default: T,
    min: T,
    max: T,
) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + fmt::Display + Copy,
{
    let Some(text) = value else {
        return Ok(default);
    };
    let v: T = text
        .trim()
        .parse()
        .map_err(|_| invalid(name, format!("expected an integer, got {text:?}")))?;
    if v < min || v > max {
        return Err(invalid(
            name,
            format!("{v} is out of range (allowed {min}..={max})"),
        ));
    }
    Ok(v)
}

fn on_off(name: &'static str, value: Option<String>) -> Result<bool, ConfigError> {
    match value.as_deref().map(str::trim) {
        None | Some("off") | Some("false") | Some("0") | Some("") => Ok(false),
        Some("on") | Some("true") | Some("1") => Ok(true),
        Some(other) => Err(invalid(name, format!("expected on or off, got {other:?}"))),
    }
}

/// The text of the file that setting `name` points at.
fn read_file(name: &'static str, path: &std::path::Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|e| invalid(name, format!("cannot read {}: {e}", path.display())))
}

/// Warn when the secret file that setting `name` points at is readable by other users than
/// its owner (it should be 0600). The path is the operator's own setting, not client data.
fn warn_if_shared(name: &'static str, path: &std::path::Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.permissions().mode() & 0o077 != 0 {
                tracing::warn!(
                    setting = name,
                    "the key file is readable by other users; make it 0600 (chmod 600)"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (name, path);
}

/// A comma-separated list of IP addresses (empty entries ignored).
fn ip_list(name: &'static str, value: Option<String>) -> Result<Vec<IpAddr>, ConfigError> {
    value
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse()
                .map_err(|_| invalid(name, format!("not an IP address: {t:?}")))
        })
        .collect()
}

/// `ISSUER_APPS`: comma-separated app names, each 1 to 128 bytes, no duplicates.
fn issuer_apps(text: &str) -> Result<Vec<String>, ConfigError> {
    let mut apps: Vec<String> = Vec::new();
    for app in text.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        if app.len() > privsvc_tokens::MAX_APP_BYTES {
            return Err(invalid(
                "ISSUER_APPS",
                format!(
                    "app {app:?} is longer than {} bytes",
                    privsvc_tokens::MAX_APP_BYTES
                ),
            ));
        }
        if !apps.iter().any(|a| a == app) {
            apps.push(app.to_string());
        }
    }
    Ok(apps)
}

fn http_url(name: &'static str, text: String) -> Result<String, ConfigError> {
    let parsed = url::Url::parse(text.trim())
        .map_err(|e| invalid(name, format!("not a URL ({e}): {text:?}")))?;
    if parsed.scheme() != "http" && parsed.scheme() != "https" {
        return Err(invalid(name, "expected an http:// or https:// URL"));
    }
    Ok(text.trim().trim_end_matches('/').to_string())
}

impl RelayerConfig {
    /// The ledger reader and writer this configuration names: JSON-RPC at `rpc_url` with
    /// `ledger_timeout` per call, the writer signing with `key` (the chain id read from the
    /// node). Without a key this is [`crate::RelayerError::Config`] naming `RELAYER_KEY_FILE`.
    pub async fn connect_ledger(
        &self,
    ) -> Result<
        (
            std::sync::Arc<dyn privsvc_ledger::LedgerReader>,
            std::sync::Arc<dyn privsvc_ledger::LedgerWriter>,
        ),
        crate::RelayerError,
    > {
        let key = self.key.as_ref().ok_or_else(|| {
            invalid(
                "RELAYER_KEY_FILE",
                "a key is required: the relayer signs its batches (RELAYER_KEY_FILE, a 0600 file \
                 holding the hex key)",
            )
        })?;
        let url = url::Url::parse(&self.rpc_url)
            .map_err(|e| invalid("LEDGER_RPC_URL", format!("not a URL ({e})")))?;
        let ledger = |source: privsvc_ledger::LedgerError| crate::RelayerError::LedgerConnect {
            url: url.clone(),
            source: Box::new(source),
        };
        let connect = || {
            privsvc_ledger::RpcLedger::with_timeout(self.rpc_url.clone(), self.ledger_timeout)
                .map_err(ledger)
        };
        let reader = std::sync::Arc::new(connect()?);
        let writer = privsvc_ledger::RpcWriter::connect(connect()?, key.bytes())
            .await
            .map_err(ledger)?;
        Ok((reader, std::sync::Arc::new(writer)))
    }

    /// The documented defaults (the table above: what a relayer started with no variable set
    /// runs with), storing its data in `data_dir`. Set the fields that differ, then start it
    /// with [`crate::Relayer::start_on_ledger`].
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            rpc_url: "http://127.0.0.1:8545".into(),
            chain_id: None,
            key: None,
            bind: SocketAddr::from(([127, 0, 0, 1], 8787)),
            public_url: None,
            data_dir: data_dir.into(),
            batching: Batching {
                min_batch: 8,
                max_wait: Duration::from_secs(30),
                min_interval_blocks: 1,
                max_batch: 100,
                max_min_anonymity: 50,
                max_hold: Duration::from_secs(600),
                flush_jitter: Duration::from_secs(1),
                decoys_max: 0,
            },
            tokens: TokenMode::Off,
            issuer: IssuerSettings {
                on: false,
                address: None,
                url: None,
                quota: 100,
                codes: None,
                apps: Vec::new(),
                max_new_apps: 20,
                max_active_apps: privsvc_tokens::DEFAULT_MAX_ACTIVE_APPS,
                requests_per_min: 60,
                schedule_period: Duration::from_secs(60),
            },
            ohttp_seed: None,
            limits: Limits {
                submissions_per_min: 30,
                ohttp_relay_ips: Vec::new(),
                queue_capacity: 10_000,
                min_free_bytes: DEFAULT_MIN_FREE_BYTES,
            },
            metrics_bind: None,
            heartbeat_interval: Duration::from_secs(600),
            status_retention: Duration::from_secs(3_600),
            ledger_timeout: Duration::from_secs(5),
            receipt_timeout: Duration::from_secs(30),
            block_time: Duration::from_secs(2),
            clock: Clock::system(),
            #[cfg(feature = "lab-leaks")]
            lab_leaks: crate::lab_leaks::LabLeaks::default(),
        }
    }

    /// [`RelayerConfig::new`] made quick for tests: any free port, a batch of one after 200 ms,
    /// no flush jitter, no per-source limits. Only with the `testing` feature (tests, benches,
    /// `privsvc-testkit`); not part of the API.
    #[cfg(any(test, feature = "testing"))]
    pub fn for_tests(data_dir: impl Into<PathBuf>) -> Self {
        let mut c = Self::new(data_dir);
        c.bind = SocketAddr::from(([127, 0, 0, 1], 0));
        c.batching.min_batch = 1;
        c.batching.max_wait = Duration::from_millis(200);
        c.batching.flush_jitter = Duration::ZERO;
        c.issuer.requests_per_min = 1_000_000;
        c.limits.submissions_per_min = 1_000_000;
        c
    }

    /// The leaky settings in force: `RelayerConfig::lab_leaks` with the `lab-leaks` feature,
    /// none without it.
    pub(crate) fn leaks(&self) -> crate::lab_leaks::LabLeaks {
        #[cfg(feature = "lab-leaks")]
        return self.lab_leaks;
        #[cfg(not(feature = "lab-leaks"))]
        crate::lab_leaks::LabLeaks::default()
    }

    /// Read the configuration from the environment and the given command line (`args[0]` is the
    /// program name). Flags override variables. Refuses bad values with a message naming them.
    pub fn from_env_and_args<I, T>(args: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let cli = Cli::try_parse_from(args).map_err(ConfigError::Parse)?;
        let env_key = std::env::var("RELAYER_KEY").ok().map(Zeroizing::new);
        let env_seed = std::env::var("OHTTP_SEED").ok().map(Zeroizing::new);
        Self::from_cli(cli, env_key, env_seed)
    }

    fn from_cli(
        cli: Cli,
        env_key: Option<Zeroizing<String>>,
        env_seed: Option<Zeroizing<String>>,
    ) -> Result<Self, ConfigError> {
        // Every default below is the field's value in `new` (one place for each).
        let mut c = Self::new(
            cli.data_dir
                .unwrap_or_else(|| PathBuf::from("./privsvc-relayer-data")),
        );
        c.rpc_url = http_url(
            "LEDGER_RPC_URL",
            cli.rpc_url.unwrap_or_else(|| c.rpc_url.clone()),
        )?;
        c.chain_id = match cli.chain_id {
            None => None,
            Some(t) => Some(num("CHAIN_ID", Some(t), 0u64, 1, u64::MAX)?),
        };
        c.key = match (cli.key_file, env_key) {
            (Some(path), _) => {
                warn_if_shared("RELAYER_KEY_FILE", &path);
                let text = Zeroizing::new(read_file("RELAYER_KEY_FILE", &path)?);
                Some(RelayerKey::from_hex(&text).map_err(|_| {
                    invalid(
                        "RELAYER_KEY_FILE",
                        "the file must hold a 32-byte secp256k1 key as 64 hex digits",
                    )
                })?)
            }
            (None, Some(text)) => Some(RelayerKey::from_hex(&text)?),
            (None, None) => None,
        };
        c.bind = match cli.bind {
            None => c.bind,
            Some(t) => t
                .trim()
                .parse()
                .map_err(|_| invalid("BIND", format!("expected host:port, got {t:?}")))?,
        };
        c.public_url = cli
            .public_url
            .map(|u| http_url("PUBLIC_URL", u))
            .transpose()?;
        c.batching.min_batch = num("MIN_BATCH", cli.min_batch, c.batching.min_batch, 1, 10_000)?;
        c.batching.max_wait = millis(
            "MAX_WAIT_MS",
            cli.max_wait_ms,
            c.batching.max_wait,
            0,
            86_400_000,
        )?;
        c.batching.min_interval_blocks = num(
            "MIN_INTERVAL_BLOCKS",
            cli.min_interval_blocks,
            c.batching.min_interval_blocks,
            0,
            100_000,
        )?;
        c.batching.max_batch = num("MAX_BATCH", cli.max_batch, c.batching.max_batch, 1, 1_000)?;
        c.batching.max_min_anonymity = num(
            "MAX_MIN_ANONYMITY",
            cli.max_min_anonymity,
            c.batching.max_min_anonymity.min(c.batching.max_batch),
            1,
            10_000,
        )?;
        c.batching.max_hold = millis(
            "MAX_HOLD_MS",
            cli.max_hold_ms,
            c.batching.max_hold,
            0,
            86_400_000,
        )?;
        c.tokens = match cli.tokens.as_deref().map(str::trim) {
            None | Some("off") | Some("") | Some("false") => TokenMode::Off,
            Some("required") | Some("on") | Some("true") => TokenMode::Required,
            Some(other) => {
                return Err(invalid(
                    "TOKENS",
                    format!("expected required or off, got {other:?}"),
                ))
            }
        };
        c.issuer.on = on_off("ISSUER", cli.issuer)?;
        c.issuer.address = cli
            .issuer_address
            .map(|t| {
                t.trim()
                    .parse::<Address>()
                    .map_err(|_| invalid("ISSUER_ADDRESS", format!("not an address: {t:?}")))
            })
            .transpose()?;
        c.issuer.url = cli
            .issuer_url
            .map(|u| http_url("ISSUER_URL", u))
            .transpose()?;
        c.issuer.quota = num(
            "ISSUER_QUOTA",
            cli.issuer_quota,
            c.issuer.quota,
            1,
            1_000_000,
        )?;
        c.issuer.codes = match cli.issuer_codes_file {
            None => None,
            Some(path) => {
                let text = read_file("ISSUER_CODES_FILE", &path)?;
                let codes: Vec<String> = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect();
                if codes.is_empty() {
                    return Err(invalid("ISSUER_CODES_FILE", "the file holds no code"));
                }
                Some(AttestationCodes(codes))
            }
        };
        c.issuer.apps = match cli.issuer_apps {
            None => Vec::new(),
            Some(text) => issuer_apps(&text)?,
        };
        c.issuer.max_new_apps = num(
            "ISSUER_MAX_NEW_APPS",
            cli.issuer_max_new_apps,
            c.issuer.max_new_apps,
            0,
            10_000,
        )?;
        c.issuer.max_active_apps = num(
            "ISSUER_MAX_ACTIVE_APPS",
            cli.issuer_max_active_apps,
            c.issuer.max_active_apps,
            0,
            100_000,
        )?;
        c.issuer.requests_per_min = num(
            "ISSUER_RATE_LIMIT_PER_MIN",
            cli.issuer_rate_limit_per_min,
            c.issuer.requests_per_min,
            1,
            1_000_000,
        )?;
        let ohttp_on = on_off("OHTTP", cli.ohttp)?;
        c.ohttp_seed = if ohttp_on {
            let text = env_seed
                .ok_or_else(|| invalid("OHTTP_SEED", "required when OHTTP=on (64 hex digits)"))?;
            let mut seed = [0u8; 32];
            hex::decode_to_slice(text.trim().trim_start_matches("0x"), &mut seed)
                .map_err(|_| invalid("OHTTP_SEED", "expected 32 bytes of hex (64 hex digits)"))?;
            let s = OhttpSeed::new(seed);
            seed.iter_mut().for_each(|b| *b = 0);
            Some(s)
        } else {
            None
        };
        c.limits.submissions_per_min = num(
            "RATE_LIMIT_PER_MIN",
            cli.rate_limit_per_min,
            c.limits.submissions_per_min,
            1,
            1_000_000,
        )?;
        c.limits.ohttp_relay_ips = ip_list("OHTTP_RELAY_IPS", cli.ohttp_relay_ips)?;
        c.metrics_bind = match cli.metrics_bind.as_deref().map(str::trim) {
            None | Some("") | Some("off") => None,
            Some(t) => Some(t.parse().map_err(|_| {
                invalid(
                    "METRICS_BIND",
                    format!("expected host:port or off, got {t:?}"),
                )
            })?),
        };
        c.limits.queue_capacity = num(
            "QUEUE_CAPACITY",
            cli.queue_capacity,
            c.limits.queue_capacity,
            1,
            10_000_000,
        )?;
        c.limits.min_free_bytes = num(
            "MIN_FREE_BYTES",
            cli.min_free_bytes,
            c.limits.min_free_bytes,
            0,
            u64::MAX,
        )?;
        c.heartbeat_interval = millis(
            "HEARTBEAT_MS",
            cli.heartbeat_ms,
            c.heartbeat_interval,
            1_000,
            86_400_000,
        )?;
        c.batching.flush_jitter = millis(
            "FLUSH_JITTER_MS",
            cli.flush_jitter_ms,
            c.batching.flush_jitter,
            0,
            60_000,
        )?;
        c.batching.decoys_max = num("DECOYS_MAX", cli.decoys_max, c.batching.decoys_max, 0, 100)?;
        c.status_retention = millis(
            "STATUS_RETENTION_MS",
            cli.status_retention_ms,
            c.status_retention,
            1_000,
            86_400_000 * 7,
        )?;
        c.ledger_timeout = millis(
            "LEDGER_TIMEOUT_MS",
            cli.ledger_timeout_ms,
            c.ledger_timeout,
            100,
            600_000,
        )?;
        c.validate()?;
        Ok(c)
    }

    /// Cross-field checks (also run by [`crate::Relayer::start`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.batching.min_batch > self.batching.max_batch {
            return Err(invalid(
                "MIN_BATCH",
                format!(
                    "{} is larger than MAX_BATCH ({})",
                    self.batching.min_batch, self.batching.max_batch
                ),
            ));
        }
        if self.batching.max_min_anonymity > self.batching.max_batch {
            return Err(invalid(
                "MAX_MIN_ANONYMITY",
                format!(
                    "{} is larger than MAX_BATCH ({}): such a batch can never form",
                    self.batching.max_min_anonymity, self.batching.max_batch
                ),
            ));
        }
        if self.tokens == TokenMode::Required && !self.issuer.on && self.issuer.address.is_none() {
            return Err(invalid(
                "ISSUER_ADDRESS",
                "TOKENS=required needs ISSUER=on or the issuer's address",
            ));
        }
        if self.tokens == TokenMode::Required && !self.issuer.on && self.issuer.url.is_none() {
            return Err(invalid(
                "ISSUER_URL",
                "TOKENS=required needs ISSUER=on or the issuer's URL",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<RelayerConfig, ConfigError> {
        let cli = Cli::try_parse_from(std::iter::once("relayer").chain(args.iter().copied()))
            .map_err(ConfigError::Parse)?;
        RelayerConfig::from_cli(cli, None, None)
    }

    #[tokio::test]
    async fn connecting_the_ledger_without_a_key_names_the_key_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RelayerConfig::for_tests(dir.path().to_path_buf());
        c.key = None;
        let Err(e) = c.connect_ledger().await else {
            panic!("a relayer without a key cannot write")
        };
        assert!(e.to_string().contains("RELAYER_KEY_FILE"), "{e}");
    }

    #[tokio::test]
    async fn connecting_a_ledger_that_does_not_answer_names_its_url() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RelayerConfig::for_tests(dir.path().to_path_buf());
        c.key = Some(RelayerKey::from_hex(&"11".repeat(32)).unwrap());
        // A port nothing listens on (bound, then released).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        c.rpc_url = format!("http://127.0.0.1:{port}");
        c.ledger_timeout = Duration::from_secs(2);
        let Err(e) = c.connect_ledger().await else {
            panic!("no ledger answers there")
        };
        assert!(e.to_string().contains(&c.rpc_url), "{e}");
    }

    #[test]
    fn an_unknown_flag_keeps_the_parsers_error() {
        let Err(ConfigError::Parse(e)) = parse(&["--no-such-flag"]) else {
            panic!("an unknown flag must be refused");
        };
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument);
        assert!(e.to_string().contains("--no-such-flag"), "{e}");
    }

    #[test]
    fn new_holds_the_defaults_a_relayer_without_settings_runs_with() {
        let parsed = parse(&["--data-dir", "/tmp/relayer-defaults"]).unwrap();
        let built = RelayerConfig::new("/tmp/relayer-defaults");
        assert_eq!(format!("{parsed:?}"), format!("{built:?}"));
        assert_eq!(built.bind, "127.0.0.1:8787".parse().unwrap());
        assert_eq!(
            (built.batching.min_batch, built.batching.max_wait),
            (8, Duration::from_secs(30))
        );
        assert_eq!(built.batching.flush_jitter, Duration::from_secs(1));
        let quick = RelayerConfig::for_tests("/tmp/relayer-defaults");
        assert_eq!(
            (quick.batching.min_batch, quick.batching.flush_jitter),
            (1, Duration::ZERO)
        );
        assert_eq!(quick.batching.max_batch, built.batching.max_batch);
    }

    #[test]
    fn defaults_are_documented_values() {
        // The env may hold values in a developer shell; the flags are enough for this check.
        let c = parse(&["--min-batch", "8"]).unwrap();
        assert_eq!(c.batching.min_batch, 8);
        assert_eq!(c.batching.max_batch, 100);
        assert_eq!(c.limits.submissions_per_min, 30);
        assert!(c.limits.ohttp_relay_ips.is_empty());
        assert_eq!(c.metrics_bind, None);
        let c = parse(&[
            "--ohttp-relay-ips",
            "10.0.0.1, ::1",
            "--metrics-bind",
            "127.0.0.1:9100",
        ])
        .unwrap();
        assert_eq!(c.limits.ohttp_relay_ips.len(), 2);
        assert_eq!(c.metrics_bind, Some("127.0.0.1:9100".parse().unwrap()));
        assert_eq!(c.tokens, TokenMode::Off);
        assert!(c.ohttp_seed.is_none());
        assert_eq!(c.issuer.max_new_apps, 20);
        assert_eq!(c.issuer.max_active_apps, 200);
        assert_eq!(c.issuer.requests_per_min, 60);
        assert_eq!(c.batching.decoys_max, 0);
        assert_eq!(
            parse(&["--decoys-max", "5"]).unwrap().batching.decoys_max,
            5
        );
        let c = parse(&["--issuer-max-active-apps", "0"]).unwrap();
        assert_eq!(c.issuer.max_active_apps, 0);
        assert!(c.issuer.apps.is_empty());
        let c = parse(&["--issuer-apps", " notes, chat ,,notes"]).unwrap();
        assert_eq!(c.issuer.apps, vec!["notes".to_string(), "chat".to_string()]);
    }

    #[test]
    fn bad_values_are_refused_with_their_name() {
        let e = parse(&["--min-batch", "zero"]).unwrap_err().to_string();
        assert!(e.contains("MIN_BATCH"), "{e}");
        let e = parse(&["--max-batch", "5000"]).unwrap_err().to_string();
        assert!(e.contains("MAX_BATCH") && e.contains("out of range"), "{e}");
        let e = parse(&["--min-batch", "20", "--max-batch", "10"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("MIN_BATCH"), "{e}");
        let e = parse(&["--tokens", "maybe"]).unwrap_err().to_string();
        assert!(e.contains("TOKENS"), "{e}");
        let e = parse(&["--tokens", "required"]).unwrap_err().to_string();
        assert!(e.contains("ISSUER_ADDRESS"), "{e}");
        let e = parse(&["--ohttp", "on"]).unwrap_err().to_string();
        assert!(e.contains("OHTTP_SEED"), "{e}");
        let e = parse(&["--ohttp-relay-ips", "10.0.0.1,relay"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("OHTTP_RELAY_IPS"), "{e}");
        let e = parse(&["--metrics-bind", "everywhere"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("METRICS_BIND"), "{e}");
        let e = parse(&["--rpc-url", "ftp://x"]).unwrap_err().to_string();
        assert!(e.contains("LEDGER_RPC_URL"), "{e}");
        let e = parse(&["--issuer-max-new-apps", "many"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ISSUER_MAX_NEW_APPS"), "{e}");
        let e = parse(&["--issuer-max-active-apps", "lots"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ISSUER_MAX_ACTIVE_APPS"), "{e}");
        let e = parse(&["--issuer-rate-limit-per-min", "0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ISSUER_RATE_LIMIT_PER_MIN"), "{e}");
        let e = parse(&["--decoys-max", "101"]).unwrap_err().to_string();
        assert!(
            e.contains("DECOYS_MAX") && e.contains("out of range"),
            "{e}"
        );
        let long = "x".repeat(129);
        let e = parse(&["--issuer-apps", &long]).unwrap_err().to_string();
        assert!(e.contains("ISSUER_APPS"), "{e}");
    }

    #[test]
    fn key_is_never_printed() {
        let k = RelayerKey::from_hex(
            "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
        )
        .unwrap();
        let shown = format!("{k:?}");
        assert!(!shown.contains("ac0974"), "{shown}");
        assert_eq!(
            k.address().to_string(),
            "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
        );
        assert!(RelayerKey::from_hex("00").is_err());
        assert!(RelayerKey::from_hex(&"00".repeat(32)).is_err());
    }
}
