//! The token issuer: per-(app, epoch) keys kept durably and published on the ledger, and
//! issuance with every check of the 403 list of docs/PROTOCOL.md §9.5.
//!
//! Keys (docs/PROTOCOL.md §5.1): `GET /v1/issuer/key` never creates a key. Keys exist for the
//! configured apps (`ISSUER_APPS`), or after a first valid, wallet-signed issue request within
//! quota, at most `max_new_apps` new apps a UTC day. Day D+1's key of every configured or
//! active app is published during day D at a random moment of its second half
//! ([`next_day_moment`], [`next_day_due`], [`Issuer::run_key_schedule`]), so relayers and
//! clients can refuse a key created after its day began (see [`crate::acceptance`]).
//!
//! Idempotence (docs/PROTOCOL.md §5): issue requests are idempotent for their validity window. The
//! issuer remembers the answer to each signed issue request, keyed by (wallet, `ts`, SHA-256
//! of the blinded values), in its SQLite store until `ts` + [`MAX_CLOCK_SKEW_MS`]; the same
//! request again (an OHTTP relay replaying the encapsulated bytes, a client retrying) gets the
//! remembered answer, byte for byte, and costs no quota. Next-day keys go to at most
//! `max_active_apps` apps outside the configured ones ([`IssuerConfig::max_active_apps`]), so
//! apps kept alive by one request a day cannot make the daily publications grow without bound.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use alloy_primitives::{Address, Signature};
use base64::Engine as _;
use privsvc_attributes::AppName;
use privsvc_ledger::{LedgerError, LedgerReader, LedgerWriter, Revert};
use sha2::{Digest, Sha256};

use crate::issuer_store::{Committed, IssuerStore, RememberedAnswer, RequestKey, StoreError};
use crate::key_entity::{
    issuer_key_create, issuer_key_options, issuer_key_payload, issuer_key_query,
};
use crate::message::{epoch_of, now_ms, DAY_MS};
use crate::protocol::issuance_message;
use crate::protocol::{ErrorBody, IssueRequest, IssueResponse, IssuerKeyResponse};
use crate::signer::BlindSigner;
use crate::suite::{import_issuer_key, token_suite, IssuerKey, IssuerSecretKey, MODULUS_BYTES};

/// Most blinded values one issue request may carry (defined with the protocol).
pub use crate::protocol::MAX_TOKENS_PER_REQUEST;
/// Tolerated difference between a request's `ts` and the issuer's clock.
pub const MAX_CLOCK_SKEW_MS: u64 = 5 * 60 * 1000;
/// Default per-wallet quota per (app, epoch).
pub const DEFAULT_QUOTA: u32 = 100;
/// Longest accepted app name in bytes (an Arkiv string attribute).
pub const MAX_APP_BYTES: usize = privsvc_attributes::MAX_APP_NAME_BYTES;
/// Default of [`IssuerConfig::max_new_apps`] (`ISSUER_MAX_NEW_APPS`).
pub const DEFAULT_MAX_NEW_APPS: u32 = 20;
/// Default of [`IssuerConfig::max_active_apps`] (`ISSUER_MAX_ACTIVE_APPS`).
pub const DEFAULT_MAX_ACTIVE_APPS: u32 = 200;
/// Next-day keys are published no later than this long before midnight UTC.
pub const PUBLISH_MARGIN_MS: u64 = 15 * 60 * 1000;

/// The issuer's clock: epoch milliseconds. Injected in tests; [`now_ms`] otherwise.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Issuer settings. `Debug` leaves the attestation codes out.
#[derive(Clone)]
#[non_exhaustive]
pub struct IssuerConfig {
    /// Directory of the issuer database (keys, counters, used codes).
    pub data_dir: PathBuf,
    /// Chain id of the ledger the keys are published on (named in the issuance message).
    pub chain_id: u64,
    /// Tokens one wallet may obtain per (app, epoch).
    pub quota_per_wallet: u32,
    /// When `Some`, every issue request needs one of these one-time codes.
    pub attestation_codes: Option<Vec<String>>,
    /// Apps whose keys the issuer creates without being asked (`ISSUER_APPS`): today's at
    /// start, each next day's during the day before.
    pub apps: Vec<String>,
    /// Apps that issue requests may create a key for, per UTC day (`ISSUER_MAX_NEW_APPS`).
    pub max_new_apps: u32,
    /// Apps outside [`IssuerConfig::apps`] that get a next-day key, at most
    /// (`ISSUER_MAX_ACTIVE_APPS`): the most used of the day's active apps (most wallets, then
    /// most tokens issued, then by name).
    pub max_active_apps: u32,
    /// The clock (default [`now_ms`]).
    pub clock: Clock,
    /// The attack lab's leaky setting (feature `lab-leaks`, never in a deployment): a request
    /// answered before is forgotten and signed again at the wallet's expense (no idempotence),
    /// so that the lab can show its replay attack winning.
    #[cfg(feature = "lab-leaks")]
    pub lab_replays_signed_again: bool,
}

impl IssuerConfig {
    /// Defaults: quota [`DEFAULT_QUOTA`], no attestation codes, no configured apps,
    /// [`DEFAULT_MAX_NEW_APPS`] new apps a day, next-day keys for at most
    /// [`DEFAULT_MAX_ACTIVE_APPS`] other apps, the system clock.
    pub fn new(data_dir: impl Into<PathBuf>, chain_id: u64) -> Self {
        IssuerConfig {
            data_dir: data_dir.into(),
            chain_id,
            quota_per_wallet: DEFAULT_QUOTA,
            attestation_codes: None,
            apps: Vec::new(),
            max_new_apps: DEFAULT_MAX_NEW_APPS,
            max_active_apps: DEFAULT_MAX_ACTIVE_APPS,
            clock: Arc::new(now_ms),
            #[cfg(feature = "lab-leaks")]
            lab_replays_signed_again: false,
        }
    }
}

/// The moment of day `epoch` at which its next-day keys are published: uniformly random in the
/// second half of the day, at least `PUBLISH_MARGIN_MS` before its end.
pub fn next_day_moment(epoch: u32, rng: &mut impl rand::Rng) -> u64 {
    let half = u64::from(epoch) * DAY_MS + DAY_MS / 2;
    half + rng.gen_range(0..DAY_MS / 2 - PUBLISH_MARGIN_MS)
}

/// Whether next-day keys are due at `now_ms`, given the day's stored `moment_ms`: the moment
/// has passed and it is still the moment's day (the next day has its own moment).
pub fn next_day_due(now_ms: u64, moment_ms: u64) -> bool {
    now_ms >= moment_ms && epoch_of(now_ms) == epoch_of(moment_ms)
}

impl std::fmt::Debug for IssuerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuerConfig")
            .field("data_dir", &self.data_dir)
            .field("chain_id", &self.chain_id)
            .field("quota_per_wallet", &self.quota_per_wallet)
            .field(
                "attestation_codes",
                &self
                    .attestation_codes
                    .as_ref()
                    .map(|c| format!("<{} codes>", c.len())),
            )
            .field("apps", &self.apps)
            .field("max_new_apps", &self.max_new_apps)
            .field("max_active_apps", &self.max_active_apps)
            .finish()
    }
}

/// Why an issue request is refused (HTTP 403, `{ "error": "<this text>" }`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IssueRefusal {
    /// `epoch` is not today's UTC day.
    #[error("epoch is not today's UTC day ({today})")]
    EpochNotToday {
        /// Today's UTC day number.
        today: u32,
    },
    /// Zero or more than 20 blinded values.
    #[error("between 1 and 20 blinded values are required, got {0}")]
    BadCount(usize),
    /// `ts` is more than 5 minutes off the issuer's clock.
    #[error("ts is more than 5 minutes off the issuer's clock")]
    StaleTimestamp,
    /// `walletSignature` does not recover to `wallet`.
    #[error("walletSignature is not a personal_sign of the issuance message by wallet")]
    BadWalletSignature,
    /// The issuer requires an attestation code and none was sent.
    #[error("attestation code missing")]
    AttestationMissing,
    /// The code is unknown or was already used.
    #[error("attestation code unknown or already used")]
    AttestationUsed,
    /// The request names another issuer (a request signed for one issuer is not replayable to
    /// another).
    #[error("this request is for issuer {requested}, but this issuer is {actual}")]
    WrongIssuer {
        /// The issuer named in the request (EIP-55).
        requested: String,
        /// This issuer's address (EIP-55).
        actual: String,
    },
    /// The request names another chain.
    #[error("this request is for chain {requested}, but this issuer publishes on chain {actual}")]
    WrongChain {
        /// The chain id named in the request.
        requested: u64,
        /// The chain id of this issuer's ledger.
        actual: u64,
    },
    /// The day's limit of new apps is reached.
    #[error("this issuer creates keys for at most {max} new apps a UTC day and today's are taken; ask again tomorrow or ask the operator to add the app to ISSUER_APPS")]
    NewAppLimit {
        /// `ISSUER_MAX_NEW_APPS`.
        max: u32,
    },
    /// The app had a key yesterday but none was published for today before today began, so
    /// relayers would refuse a key created now.
    #[error("app {app:?} had a key yesterday but no tokens were issued for it, so no key was published for today in time; a key created now would be refused by relayers: ask again tomorrow")]
    AppLapsed {
        /// The app.
        app: String,
    },
    /// The wallet's quota for this app and day would be exceeded.
    #[error("quota exceeded: {remaining} tokens left for this wallet today")]
    QuotaExceeded {
        /// Tokens the wallet may still obtain.
        remaining: u32,
    },
}

/// Everything an issuer call can fail with; the router maps each to an HTTP status.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IssuerError {
    /// Malformed request (400).
    #[error("{0}")]
    BadRequest(String),
    /// The issuer has no published key for this app and epoch (404). `GET /v1/issuer/key`
    /// never creates one.
    #[error("no key for app {:?}, epoch {epoch}: keys exist for the issuer's configured apps and after a first valid, wallet-signed POST /v1/tokens/issue", .app.as_str())]
    NoKey {
        /// The app.
        app: AppName,
        /// The UTC day number.
        epoch: u32,
    },
    /// The request created the day's first key for the app (409): its blinded values cannot be
    /// under that key; read the key from the ledger and ask again.
    #[error("no key for app {:?}, epoch {epoch} existed: this request created and published one; read it from the ledger and send a new request with values blinded under it", .app.as_str())]
    KeyCreated {
        /// The app.
        app: AppName,
        /// The UTC day number.
        epoch: u32,
    },
    /// Refused issuance (403).
    #[error(transparent)]
    Refused(#[from] IssueRefusal),
    /// The ledger failed while publishing or checking the key (502).
    #[error("ledger error while publishing the issuer key: {0}")]
    Ledger(#[from] LedgerError),
    /// The ledger holds a different key for this (app, epoch): the issuer lost its state and
    /// refuses to equivocate (500).
    #[error("the ledger already holds a different key of this issuer for app {:?}, epoch {epoch}; refusing to publish a second one (restore the issuer data directory)", .app.as_str())]
    KeyConflict {
        /// The app.
        app: AppName,
        /// The UTC day number.
        epoch: u32,
    },
    /// The database failed (500).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Key generation or signing failed (500).
    #[error("issuer internal error: {step}: {source}")]
    Internal {
        /// The operation that failed.
        step: &'static str,
        /// The RSA, DER, JSON or task error, or what went wrong.
        #[source]
        source: crate::error::BoxError,
    },
}

/// [`IssuerError::Internal`] of `step` because of `source`.
fn internal(step: &'static str, source: impl Into<crate::error::BoxError>) -> IssuerError {
    IssuerError::Internal {
        step,
        source: source.into(),
    }
}

/// The loaded keys, one lockable slot per (app, epoch).
type KeySlots = Mutex<HashMap<(String, u32), Arc<tokio::sync::Mutex<Option<DayKey>>>>>;

/// One day's key of one app, loaded.
struct DayKey {
    signer: Arc<BlindSigner>,
    public: IssuerKey,
    entity_key: Option<String>,
}

/// The token issuer. Share it as `Arc<Issuer>` (see [`crate::issuer_router`]).
pub struct Issuer {
    config: IssuerConfig,
    store: Arc<IssuerStore>,
    writer: Arc<dyn LedgerWriter>,
    reader: Arc<dyn LedgerReader>,
    codes: Option<HashSet<[u8; 32]>>,
    keys: KeySlots,
    /// Wakes the key schedule ([`Issuer::run_key_schedule`]) before its period ends: an app's
    /// first tokens of the day after the day's moment make its next-day key due at once.
    schedule_wake: tokio::sync::Notify,
}

fn code_hash(code: &str) -> [u8; 32] {
    Sha256::digest(code.as_bytes()).into()
}

impl Issuer {
    /// Open the issuer's database in `config.data_dir`. `writer` must be the one serialized
    /// writer of the issuer's account (the relayer's), `reader` reads the same ledger.
    pub fn open(
        config: IssuerConfig,
        writer: Arc<dyn LedgerWriter>,
        reader: Arc<dyn LedgerReader>,
    ) -> Result<Self, IssuerError> {
        let store = Arc::new(IssuerStore::open(&config.data_dir)?);
        store.prune(epoch_of((config.clock)()).saturating_sub(1))?;
        let codes = config
            .attestation_codes
            .as_ref()
            .map(|c| c.iter().map(|s| code_hash(s)).collect());
        Ok(Issuer {
            config,
            store,
            writer,
            reader,
            codes,
            keys: Mutex::new(HashMap::new()),
            schedule_wake: tokio::sync::Notify::new(),
        })
    }

    /// The issuer's address: the creator of its key entities.
    pub fn address(&self) -> Address {
        self.writer.address()
    }

    /// The settings in use.
    pub fn config(&self) -> &IssuerConfig {
        &self.config
    }

    fn now(&self) -> u64 {
        (self.config.clock)()
    }

    /// `GET /v1/issuer/key`: the published key entity of (`app`, `epoch`), where `epoch` is
    /// today or tomorrow. Reads the issuer's database only: it never generates a key nor
    /// sends a transaction ([`IssuerError::NoKey`] when there is none).
    pub async fn issuer_key(
        &self,
        app: &str,
        epoch: u32,
    ) -> Result<IssuerKeyResponse, IssuerError> {
        let app_name = check_app(app)?;
        let today = epoch_of(self.now());
        if epoch != today && epoch != today.saturating_add(1) {
            return Err(IssuerError::BadRequest(format!(
                "epoch {epoch} is not today's UTC day ({today}) nor tomorrow's"
            )));
        }
        let entity_key = self
            .store
            .key(app, epoch)?
            .and_then(|k| k.entity_key)
            .ok_or_else(|| IssuerError::NoKey {
                app: app_name,
                epoch,
            })?;
        Ok(IssuerKeyResponse {
            issuer: self.address(),
            app: app.to_string(),
            epoch,
            entity_key,
        })
    }

    /// New apps created by issue requests today (the count `max_new_apps` limits).
    pub fn new_apps_today(&self) -> Result<u32, IssuerError> {
        Ok(self.store.new_app_count(epoch_of(self.now()))?)
    }

    /// One step of the key schedule at the issuer's clock: today's key of every configured
    /// app when missing, any stored key not yet published (today's or tomorrow's), and, once
    /// the day's random moment ([`next_day_moment`]) has passed, tomorrow's key of every
    /// configured app and of the [`IssuerConfig::max_active_apps`] most used other apps that
    /// were issued tokens today. Failures are logged and retried at the next step; returns
    /// how many keys failed.
    pub async fn publish_due_keys(&self) -> usize {
        let now = self.now();
        let today = epoch_of(now);
        let mut wanted: Vec<(String, u32)> = self
            .config
            .apps
            .iter()
            .map(|a| (a.clone(), today))
            .collect();
        match self.store.unpublished(today) {
            Ok(rows) => wanted.extend(rows),
            Err(e) => tracing::error!(error = %e, "issuer key schedule: cannot read the store"),
        }
        let moment = self
            .store
            .publish_moment(today, next_day_moment(today, &mut rand::rngs::OsRng));
        match moment {
            Ok(moment) if next_day_due(now, moment) => {
                let mut apps: BTreeSet<String> = self.config.apps.iter().cloned().collect();
                match self.store.ranked_active_apps(today) {
                    Ok(active) => {
                        let max = usize::try_from(self.config.max_active_apps).unwrap_or(0);
                        let others = active
                            .into_iter()
                            .filter(|a| !self.config.apps.contains(a))
                            .take(max);
                        apps.extend(others);
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "issuer key schedule: cannot read the store")
                    }
                }
                wanted.extend(apps.into_iter().map(|a| (a, today + 1)));
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "issuer key schedule: cannot read the store"),
        }
        let mut failed = 0;
        let mut done = HashSet::new();
        for (app, epoch) in wanted {
            if !done.insert((app.clone(), epoch)) {
                continue;
            }
            if let Err(e) = self.day_key(&app, epoch).await {
                failed += 1;
                tracing::error!(epoch, error = %e, "issuer key schedule: key not published");
            }
        }
        failed
    }

    /// Run [`Issuer::publish_due_keys`] now and then every `period` until `stop` turns true
    /// (or its sender is dropped), and at once when an issuance makes an app's next-day key due
    /// (an app first issued tokens in the last moments of the day would otherwise lapse: its
    /// next-day key must be on the ledger before the next day begins).
    pub async fn run_key_schedule(
        self: Arc<Self>,
        period: Duration,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            if *stop.borrow() {
                return;
            }
            self.publish_due_keys().await;
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = self.schedule_wake.notified() => {}
                changed = stop.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// The public key of (`app`, `epoch`) if the issuer holds one (for tests and operators).
    pub async fn public_key(
        &self,
        app: &str,
        epoch: u32,
    ) -> Result<Option<IssuerKey>, IssuerError> {
        match self.store.key(app, epoch)? {
            None => Ok(None),
            Some(k) => {
                let sk = IssuerSecretKey::from_der(&k.secret_der)
                    .map_err(|e| internal("stored key unreadable", e))?;
                Ok(Some(IssuerKey::from_secret(&sk).map_err(|e| {
                    internal("public part of the stored key", e)
                })?))
            }
        }
    }

    /// `POST /v1/tokens/issue`.
    ///
    /// A signed request answered before within its validity window (the same wallet, `ts` and
    /// blinded values) gets that answer again, byte for byte once serialized, and costs no
    /// quota: 200 with the same blind signatures and `remaining`, or 409 when it created the
    /// app's key. Refusals are not remembered: nothing happened, so a copy is judged anew.
    pub async fn issue(&self, req: &IssueRequest) -> Result<IssueResponse, IssuerError> {
        let now = self.now();
        let (blinded, request) = self.check_request(req, now)?;
        if let Some(answer) = self.store.remembered(&request, now)? {
            #[cfg(feature = "lab-leaks")]
            if self.config.lab_replays_signed_again {
                self.store.forget(&request)?;
                return self.issue_new(req, blinded, &request, now).await;
            }
            tracing::debug!("issue request answered again");
            return replayed(req, answer);
        }
        match self.issue_new(req, blinded, &request, now).await {
            // A copy of this request that was being answered at the same time won: its answer.
            Err(IssuerError::Refused(
                refusal @ (IssueRefusal::AttestationUsed | IssueRefusal::QuotaExceeded { .. }),
            )) => match self.store.remembered(&request, self.now())? {
                Some(answer) => replayed(req, answer),
                None => Err(refusal.into()),
            },
            other => other,
        }
    }

    /// Every check of a request that needs no state: epoch, count, `ts`, app, issuer, chain,
    /// blinded values, the wallet's signature. Returns the decoded blinded values and the
    /// request's replay key.
    fn check_request(
        &self,
        req: &IssueRequest,
        now: u64,
    ) -> Result<(Vec<Vec<u8>>, RequestKey), IssuerError> {
        let today = epoch_of(now);
        if req.epoch != today {
            return Err(IssueRefusal::EpochNotToday { today }.into());
        }
        let n = req.blinded.len();
        if n == 0 || n > MAX_TOKENS_PER_REQUEST {
            return Err(IssueRefusal::BadCount(n).into());
        }
        if req.ts.abs_diff(now) > MAX_CLOCK_SKEW_MS {
            return Err(IssueRefusal::StaleTimestamp.into());
        }
        check_app(&req.app)?;
        if req.issuer != self.address() {
            return Err(IssueRefusal::WrongIssuer {
                requested: req.issuer.to_checksum(None),
                actual: self.address().to_checksum(None),
            }
            .into());
        }
        if req.chain_id != self.config.chain_id {
            return Err(IssueRefusal::WrongChain {
                requested: req.chain_id,
                actual: self.config.chain_id,
            }
            .into());
        }
        let mut blinded = Vec::with_capacity(n);
        let mut digest = Sha256::new();
        for (i, b) in req.blinded.iter().enumerate() {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|_| {
                    IssuerError::BadRequest(format!("blinded[{i}] is not standard base64"))
                })?;
            if raw.len() != MODULUS_BYTES {
                return Err(IssuerError::BadRequest(format!(
                    "blinded[{i}] is {} bytes, expected {MODULUS_BYTES}",
                    raw.len()
                )));
            }
            digest.update(&raw);
            blinded.push(raw);
        }
        let message =
            issuance_message(req, req.ts).map_err(|e| IssuerError::BadRequest(e.to_string()))?;
        if recover_wallet(&req.wallet_signature, &message) != Some(req.wallet) {
            return Err(IssueRefusal::BadWalletSignature.into());
        }
        let request = RequestKey {
            wallet: req.wallet.to_string(),
            ts: req.ts,
            blinded_digest: digest.finalize().into(),
        };
        Ok((blinded, request))
    }

    /// A checked request not answered before: attestation code, quota, the app's key, then
    /// sign and count (the answer is remembered in the same transaction).
    async fn issue_new(
        &self,
        req: &IssueRequest,
        blinded: Vec<Vec<u8>>,
        request: &RequestKey,
        now: u64,
    ) -> Result<IssueResponse, IssuerError> {
        let code = match &self.codes {
            None => None,
            Some(codes) => {
                let code = req
                    .attestation
                    .as_deref()
                    .filter(|c| !c.is_empty())
                    .ok_or(IssueRefusal::AttestationMissing)?;
                let h = code_hash(code);
                if !codes.contains(&h) || self.store.code_used(&h)? {
                    return Err(IssueRefusal::AttestationUsed.into());
                }
                Some(h)
            }
        };
        let quota = self.config.quota_per_wallet;
        let issued = self.store.issued(&req.app, req.epoch, &request.wallet)?;
        let count = u32::try_from(blinded.len()).unwrap_or(u32::MAX);
        if issued.saturating_add(count) > quota {
            return Err(IssueRefusal::QuotaExceeded {
                remaining: quota.saturating_sub(issued),
            }
            .into());
        }
        let expires = answer_expiry(req.ts);

        if self.store.key(&req.app, req.epoch)?.is_none() {
            return self.create_for_request(req, request, expires, now).await;
        }
        let (signer, _, _) = self.day_key(&req.app, req.epoch).await?;
        // Each signature is checked (s^e = m) inside `BlindSigner::sign` before it is returned.
        let signatures = tokio::task::spawn_blocking(move || {
            blinded
                .iter()
                .map(|b| signer.sign(b))
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| internal("signing task", e))?
        .map_err(|e| match e {
            crate::TokenError::Malformed(m) => IssuerError::BadRequest(m.to_string()),
            other => internal("blind signing", other),
        })?;
        let blind_signatures: Vec<String> = signatures
            .iter()
            .map(|s| base64::engine::general_purpose::STANDARD.encode(s))
            .collect();
        let response = |total: u32| IssueResponse {
            blind_signatures: blind_signatures.clone(),
            remaining: quota.saturating_sub(total),
        };
        let committed = self.store.commit_issue(
            &req.app,
            req.epoch,
            count,
            quota,
            code.as_ref(),
            request,
            expires,
            self.now(),
            |total| serde_json::to_vec(&response(total)).unwrap_or_default(),
        );
        match committed {
            Ok(Committed::Issued(total)) => {
                tracing::debug!(count, "issued tokens");
                self.wake_for_next_day_key(&req.app, req.epoch, now);
                Ok(response(total))
            }
            Ok(Committed::Replay(answer)) => replayed(req, answer),
            Err(StoreError::QuotaExceeded) => {
                let issued = self.store.issued(&req.app, req.epoch, &request.wallet)?;
                Err(IssueRefusal::QuotaExceeded {
                    remaining: quota.saturating_sub(issued),
                }
                .into())
            }
            Err(StoreError::CodeUsed) => Err(IssueRefusal::AttestationUsed.into()),
            Err(e) => Err(e.into()),
        }
    }

    /// Wakes the key schedule when tokens of `app` were just issued for today, the day's moment
    /// has passed and the app has no key for tomorrow yet: the schedule decides whether the app
    /// gets one (configured, or among the most used apps of the day).
    fn wake_for_next_day_key(&self, app: &str, epoch: u32, now: u64) {
        let today = epoch_of(now);
        if epoch != today {
            return;
        }
        let due = self
            .store
            .publish_moment(today, next_day_moment(today, &mut rand::rngs::OsRng))
            .is_ok_and(|moment| next_day_due(now, moment));
        if due && matches!(self.store.key(app, today + 1), Ok(None)) {
            self.schedule_wake.notify_one();
        }
    }

    /// A valid, signed request within quota for an app without a key today: create and publish
    /// the key if the app may have one. Always an error (`KeyCreated`, remembered for the
    /// request's validity window before the key is made, or why not), unless a copy of the
    /// request was answered first (then that answer).
    async fn create_for_request(
        &self,
        req: &IssueRequest,
        request: &RequestKey,
        expires: u64,
        now: u64,
    ) -> Result<IssueResponse, IssuerError> {
        let (app, epoch) = (req.app.as_str(), req.epoch);
        let configured = self.config.apps.iter().any(|a| a == app);
        if !configured {
            if self.store.key(app, epoch.saturating_sub(1))?.is_some() {
                return Err(IssueRefusal::AppLapsed {
                    app: app.to_string(),
                }
                .into());
            }
            if !self
                .store
                .reserve_new_app(app, epoch, self.config.max_new_apps)?
            {
                return Err(IssueRefusal::NewAppLimit {
                    max: self.config.max_new_apps,
                }
                .into());
            }
        }
        let created = IssuerError::KeyCreated {
            app: check_app(app)?,
            epoch,
        };
        let answer = RememberedAnswer {
            status: 409,
            body: serde_json::to_vec(&ErrorBody {
                error: created.to_string(),
            })
            .unwrap_or_default(),
        };
        // Remembered first: a copy arriving while the key is made gets this 409 too, and is
        // not signed under the new key at the wallet's expense.
        let remembered = self.store.remember(request, epoch, expires, now, &answer)?;
        if remembered != answer {
            return replayed(req, remembered);
        }
        match self.day_key(app, epoch).await {
            Ok(_) => {
                tracing::info!(epoch, "created a key for a new app");
                Err(created)
            }
            Err(e) => {
                // Nothing was created: a copy of the request may try again.
                if let Err(forget) = self.store.forget(request) {
                    tracing::error!(error = %forget, "issuer: cannot forget an answer");
                }
                Err(e)
            }
        }
    }

    /// The loaded key of (`app`, `epoch`): generated once, stored, then published once.
    async fn day_key(
        &self,
        app: &str,
        epoch: u32,
    ) -> Result<(Arc<BlindSigner>, IssuerKey, String), IssuerError> {
        let slot = {
            let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
            keys.retain(|(_, e), _| *e + 1 >= epoch);
            keys.entry((app.to_string(), epoch)).or_default().clone()
        };
        let mut slot = slot.lock().await;
        if slot.is_none() {
            *slot = Some(self.load_or_generate(app, epoch).await?);
        }
        let day = slot.as_mut().expect("loaded above");
        if day.entity_key.is_none() {
            let entity_key = self.publish(app, epoch, &day.public).await?;
            self.store.set_entity_key(app, epoch, &entity_key)?;
            day.entity_key = Some(entity_key);
        }
        let entity_key = day.entity_key.clone().expect("published above");
        Ok((day.signer.clone(), day.public.clone(), entity_key))
    }

    async fn load_or_generate(&self, app: &str, epoch: u32) -> Result<DayKey, IssuerError> {
        let stored = match self.store.key(app, epoch)? {
            Some(k) => k,
            None => {
                // A new key: forget keys and counters no one needs any more (yesterday's stay:
                // they decide whether an app is new; a next-day key is made the day before).
                self.store.prune(epoch.saturating_sub(2))?;
                let store = self.store.clone();
                let app_owned = app.to_string();
                tokio::task::spawn_blocking(move || {
                    let sk = token_suite()
                        .generate_key()
                        .map_err(|e| internal("key generation failed", e))?;
                    let der = zeroize::Zeroizing::new(
                        sk.to_der()
                            .map_err(|e| internal("key encoding failed", e))?,
                    );
                    Ok::<_, IssuerError>(store.insert_key(&app_owned, epoch, &der)?)
                })
                .await
                .map_err(|e| internal("key generation task", e))??
            }
        };
        let secret = IssuerSecretKey::from_der(&stored.secret_der)
            .map_err(|e| internal("stored key unreadable", e))?;
        let public =
            IssuerKey::from_secret(&secret).map_err(|e| internal("public part of the key", e))?;
        let signer = BlindSigner::new(&secret).map_err(|e| internal("signer of the key", e))?;
        Ok(DayKey {
            signer: Arc::new(signer),
            public,
            entity_key: stored.entity_key,
        })
    }

    /// Publish `key` unless the ledger already has it (a crash after publishing); refuse when
    /// the ledger has a different key.
    async fn publish(&self, app: &str, epoch: u32, key: &IssuerKey) -> Result<String, IssuerError> {
        if let Some(existing) = self.find_published(app, epoch, key).await? {
            return Ok(existing);
        }
        let op = issuer_key_create(app, epoch, key.spki(), rand::random::<u128>())?;
        let receipt = self.writer.execute(&[op]).await?;
        if !receipt.success {
            return Err(IssuerError::Ledger(LedgerError::Reverted(
                Revert::from_reason(
                    receipt
                        .revert_reason
                        .unwrap_or_else(|| "unknown reason".into()),
                ),
            )));
        }
        let created = receipt.created.first().ok_or_else(|| {
            IssuerError::Ledger(LedgerError::Decode(
                privsvc_ledger::AnswerError::NoCreatedEntity,
            ))
        })?;
        tracing::info!(epoch, "published issuer key");
        Ok(created.key.to_string())
    }

    async fn find_published(
        &self,
        app: &str,
        epoch: u32,
        key: &IssuerKey,
    ) -> Result<Option<String>, IssuerError> {
        let issuer = self.address();
        let page = self
            .reader
            .query(
                &issuer_key_query(issuer, app, epoch)?,
                &issuer_key_options(),
            )
            .await?;
        let mut found = None;
        for entity in &page.entities {
            if let Some(spki) = issuer_key_payload(entity, issuer, app, epoch) {
                match import_issuer_key(&spki) {
                    Ok(k) if &k == key => found = Some(entity.key.to_string()),
                    _ => {
                        return Err(IssuerError::KeyConflict {
                            app: check_app(app)?,
                            epoch,
                        })
                    }
                }
            }
        }
        Ok(found)
    }
}

/// Until when the answer to a request with `ts` is remembered: the end of its validity window
/// (a copy after it is refused as stale).
fn answer_expiry(ts: u64) -> u64 {
    ts.saturating_add(MAX_CLOCK_SKEW_MS)
}

/// The remembered answer to `req` as the issuer's result: the 200 body, or the 409 of a
/// request that created the app's key.
fn replayed(req: &IssueRequest, answer: RememberedAnswer) -> Result<IssueResponse, IssuerError> {
    match answer.status {
        200 => serde_json::from_slice(&answer.body)
            .map_err(|e| internal("remembered answer unreadable", e)),
        409 => Err(IssuerError::KeyCreated {
            app: check_app(&req.app)?,
            epoch: req.epoch,
        }),
        other => Err(internal(
            "remembered answer",
            format!("unexpected status {other}"),
        )),
    }
}

/// `app` as an app name the issuer serves: 1 to [`MAX_APP_BYTES`] bytes without control
/// characters. It is a line of the signed issuance message (a line break would let one
/// request's text read as another's) and a `str` attribute of the key entity (which the ledger
/// refuses with control characters).
fn check_app(app: &str) -> Result<AppName, IssuerError> {
    let name = AppName::new(app)
        .map_err(|_| IssuerError::BadRequest(format!("app must be 1 to {MAX_APP_BYTES} bytes")))?;
    if app.chars().any(char::is_control) {
        return Err(IssuerError::BadRequest(
            "app must not contain control characters (line breaks included)".into(),
        ));
    }
    Ok(name)
}

/// The address that signed `message` with EIP-191 `personal_sign`, if `sig_hex` parses.
fn recover_wallet(sig_hex: &str, message: &str) -> Option<Address> {
    let raw = hex::decode(sig_hex.strip_prefix("0x").unwrap_or(sig_hex)).ok()?;
    let sig = Signature::try_from(raw.as_slice()).ok()?;
    sig.recover_address_from_msg(message.as_bytes()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng as _;

    #[test]
    fn next_day_moments_fall_in_the_second_half_before_the_margin() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let epoch = 20_000u32;
        let start = u64::from(epoch) * DAY_MS;
        let mut earliest = u64::MAX;
        let mut latest = 0;
        for _ in 0..10_000 {
            let m = next_day_moment(epoch, &mut rng);
            assert!(m >= start + DAY_MS / 2, "{m} is in the first half");
            assert!(m < start + DAY_MS - PUBLISH_MARGIN_MS, "{m} is too late");
            earliest = earliest.min(m);
            latest = latest.max(m);
        }
        // Spread over the window, not a constant (10 000 draws: the extremes are within an
        // hour of the window's ends with overwhelming probability).
        assert!(earliest < start + DAY_MS / 2 + 3_600_000, "{earliest}");
        assert!(
            latest > start + DAY_MS - PUBLISH_MARGIN_MS - 3_600_000,
            "{latest}"
        );
    }

    #[test]
    fn next_day_keys_are_due_from_the_moment_to_the_end_of_its_day() {
        let day = 20_000u64 * DAY_MS;
        let moment = day + DAY_MS / 2 + 1_000;
        assert!(!next_day_due(day, moment));
        assert!(!next_day_due(moment - 1, moment));
        assert!(next_day_due(moment, moment));
        assert!(next_day_due(day + DAY_MS - 1, moment));
        // The next day has its own moment.
        assert!(!next_day_due(day + DAY_MS, moment));
    }
}
