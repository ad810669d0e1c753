//! The intake: what a submission goes through before the batcher sees it (docs/PROTOCOL.md §7
//! and §9.3): the body limit, the per-address rate limit (tokens off), validation, the token
//! check (tokens required), the free-space floor and the queue's capacity; then the durable
//! store, and the record is handed to the batcher over a channel.
//!
//! Idempotence: a valid submission whose sealed envelope is already stored (queued, in flight,
//! written or failed) is answered with the existing id, whatever its token: nothing is stored,
//! no token is spent, and the answer is the one the first submission got. The store finds the
//! digest before it spends a token; a refusal (no, invalid or spent token, full queue) is
//! answered only after the digest was looked up. The first submission's token, minAnonymity
//! and maxHoldMs stand.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use alloy_primitives::Address;
use axum::body::Body;
use axum::http::StatusCode;
use privsvc_ledger::LedgerReader;
use tokio::sync::mpsc;

use crate::clock::Timeline;
use crate::config::TokenMode;
use crate::diskspace::DiskFloor;
use crate::metrics::Metrics;
use crate::occupancy::Occupancy;
use crate::ratelimit::RateLimiter;
use crate::store::{envelope_sha256, SpentToken, Store, StoreError, StoredRecord};
use crate::tokencheck::{check_token, IssuerKeys, TokenRefusal};
use crate::validate::{validate_at, Limits, Submission};

/// Submit body limit (docs/PROTOCOL.md §9.3: 64 KiB).
pub const MAX_SUBMIT_BYTES: usize = 64 * 1024;

/// A refused submission: its status and reason.
pub(crate) type Refusal = (StatusCode, String);

/// The settings the intake applies.
#[derive(Debug, Clone)]
pub(crate) struct IntakeSettings {
    /// `TOKENS`.
    pub(crate) tokens: TokenMode,
    /// `RATE_LIMIT_PER_MIN` (tokens off).
    pub(crate) submissions_per_min: u32,
    /// `QUEUE_CAPACITY`.
    pub(crate) queue_capacity: usize,
    /// The limits a submission is validated against (the relayer's address, the largest
    /// minAnonymity and maxHoldMs).
    pub(crate) limits: Limits,
    /// The lab's leaky setting: no envelope idempotence (off in a deployment).
    pub(crate) resubmissions_stored_again: bool,
}

/// The intake of submissions: validates, checks tokens and limits, stores, and sends each
/// accepted record to the batcher.
pub(crate) struct Intake {
    /// Settings.
    pub(crate) settings: IntakeSettings,
    /// Issuer accepted for tokens.
    pub(crate) issuer: Option<Address>,
    /// The durable queue.
    pub(crate) store: Arc<Store>,
    /// Per-address limiter (tokens off).
    pub(crate) limiter: RateLimiter,
    /// Issuer key cache (tokens required).
    pub(crate) issuer_keys: IssuerKeys,
    /// The ledger reader (issuer keys).
    pub(crate) ledger: Arc<dyn LedgerReader>,
    /// Next arrival sequence number.
    pub(crate) seq: AtomicU64,
    /// Records held (a place is reserved here per accepted record).
    pub(crate) occupancy: Arc<Occupancy>,
    /// Counters.
    pub(crate) metrics: Arc<Metrics>,
    /// The relayer's time.
    pub(crate) time: Timeline,
    /// `DATA_DIR` and `MIN_FREE_BYTES`.
    pub(crate) floor: DiskFloor,
    /// The batcher's inbox.
    pub(crate) batcher: mpsc::UnboundedSender<StoredRecord>,
}

impl Intake {
    /// The id of the stored record with this envelope digest when there is one (a
    /// resubmission gets the first answer), else `refusal`.
    fn existing_or(&self, digest: &[u8; 32], refusal: Refusal) -> Result<String, Refusal> {
        match self.store.id_of_envelope(digest) {
            Ok(Some(id)) => Ok(id),
            Ok(None) => Err(refusal),
            Err(e) => {
                tracing::error!(error = %e, "cannot read the store");
                Err(refusal)
            }
        }
    }

    /// The token a submission spends (`None` with tokens off), or the 402/403 refusal.
    async fn token_of(&self, sub: &Submission, now: u64) -> Result<Option<SpentToken>, Refusal> {
        Ok(match (self.settings.tokens, &sub.token) {
            (TokenMode::Off, _) => None,
            (TokenMode::Required, None) => {
                return Err((
                    StatusCode::PAYMENT_REQUIRED,
                    "this relayer requires a token and none was sent".into(),
                ))
            }
            (TokenMode::Required, Some(t)) => {
                let issuer = self
                    .issuer
                    .ok_or((StatusCode::FORBIDDEN, "no issuer is configured".to_string()))?;
                let keys = &self.issuer_keys;
                match check_token(keys, self.ledger.as_ref(), issuer, &sub.app, t, now).await {
                    Ok((id, epoch)) => Some(SpentToken {
                        id,
                        epoch: u64::from(epoch),
                    }),
                    Err(TokenRefusal::Refused(r)) => return Err((StatusCode::FORBIDDEN, r)),
                    Err(e @ TokenRefusal::Ledger(_)) => {
                        self.metrics.ledger_error();
                        return Err((StatusCode::FORBIDDEN, e.to_string()));
                    }
                }
            }
        })
    }

    /// Accept the submission `body` from `peer` (the source its rate limit counts, if any):
    /// the new record's id (or the stored one's, for an envelope already stored), or the
    /// refusal.
    pub(crate) async fn accept(&self, peer: Option<IpAddr>, body: Body) -> Result<String, Refusal> {
        let bytes = axum::body::to_bytes(body, MAX_SUBMIT_BYTES)
            .await
            .map_err(|_| (StatusCode::PAYLOAD_TOO_LARGE, "body over 64 KB".to_string()))?;
        // The timeline for the rate limit's windows and the record's acceptance (its batch
        // window and hold); the wall clock for what the protocol names in wall time (the
        // envelope's hour window, token epochs).
        let now = self.time.now_ms();
        let wall = self.time.wall_ms();
        if self.settings.tokens == TokenMode::Off {
            if let Some(ip) = peer {
                if !self.limiter.allow(ip, now) {
                    return Err((
                        StatusCode::TOO_MANY_REQUESTS,
                        format!(
                            "more than {} submissions a minute from this address",
                            self.settings.submissions_per_min
                        ),
                    ));
                }
            }
        }
        let sub = validate_at(&bytes, &self.settings.limits, wall / 1000)
            .map_err(|r| (StatusCode::BAD_REQUEST, r))?;
        // The same sealed envelope again gets the first answer, nothing stored, no token spent:
        // the store's writer finds the digest before it looks at the token, and every refusal
        // below first looks the digest up ([`Intake::existing_or`]), so a copy without a token,
        // with a spent or invalid one, or arriving while the queue is full still gets its id. A
        // new envelope (the common case) costs no extra read.
        let envelope_digest = if self.settings.resubmissions_stored_again {
            // The lab's leaky setting: no two submissions share a digest, so none is
            // deduplicated.
            rand::random()
        } else {
            envelope_sha256(&sub.envelope)
        };
        let project = crate::project::project_key(&sub.attributes);
        let token = match self.token_of(&sub, wall).await {
            Ok(token) => token,
            Err(refusal) => return self.existing_or(&envelope_digest, refusal),
        };
        // Keep the disk's last bytes for recording the batches of records already accepted.
        // (Not logged per submission: the anchor task logs when the floor is crossed.)
        if self.floor.below().is_some() {
            return self.existing_or(
                &envelope_digest,
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the relayer's disk is nearly full; it accepts no new records for now".into(),
                ),
            );
        }
        if !self.occupancy.reserve(self.settings.queue_capacity) {
            return self.existing_or(
                &envelope_digest,
                (StatusCode::SERVICE_UNAVAILABLE, "queue full".into()),
            );
        }
        let record = StoredRecord {
            id: uuid::Uuid::new_v4().to_string(),
            seq: self.seq.fetch_add(1, Ordering::SeqCst),
            app: sub.app,
            project,
            envelope_digest,
            owner: sub.owner,
            envelope: sub.envelope,
            attributes: sub.attributes.canonical_json(),
            exp_seconds: sub.exp_seconds,
            min_anonymity: sub.min_anonymity,
            max_hold_ms: sub.max_hold_ms,
            token,
            accepted_ms: now,
        };
        let id = record.id.clone();
        let record = match self.store.insert(record).await {
            Ok(r) => r,
            Err(StoreError::AlreadyStored(id)) => {
                // An identical submission was stored meanwhile (e.g. in the same group commit).
                self.occupancy.release(1);
                return Ok(id);
            }
            Err(StoreError::TokenSpent) => {
                self.occupancy.release(1);
                return self.existing_or(
                    &envelope_digest,
                    (StatusCode::FORBIDDEN, "token already spent".into()),
                );
            }
            Err(e) => {
                self.occupancy.release(1);
                tracing::error!(error = %e, "cannot store a submission");
                return Err((
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the queue cannot store the record right now".into(),
                ));
            }
        };
        // Stored: a batcher that stopped meanwhile finds it in the store at the next start.
        let _ = self.batcher.send(record);
        Ok(id)
    }
}
