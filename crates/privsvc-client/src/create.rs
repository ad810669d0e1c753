//! `create_entity`: check, seal, submit through a random live relayer, poll, fail over.
//!
//! The write path holds no ledger reader and no issuer client of its own (docs/PROTOCOL.md §8.2):
//! it submits and polls through the relayer transport, spends a token the session's refills stored,
//! and learns whether a record landed only from the session's tail.

use std::collections::HashSet;
use std::time::Duration;

use alloy_primitives::{Address, B256};
use privsvc_attributes::{AttrValue, AttributeError, Attributes};
use privsvc_envelope::{expiry_bucket, expiry_seconds, EnvelopeBody};
use privsvc_rt::Instant;
use privsvc_vault::{RecordRef, Tag};
use rand::Rng;
use subtle::ConstantTimeEq;

use crate::cache::EntityCache;
use crate::client::PrivateClient;
use crate::error::PrivsvcError;
use crate::protocol::{RecordState, StatusResponse, SubmitRequest};
use crate::read::BatchId;
use crate::record::{CreateParams, CreateResult, MyRecord};
use crate::relayer_api::{fetch_status, submit, RelayerStatus, SubmitOutcome};

/// Consecutive unanswered status polls after which a relayer counts as gone.
const MAX_UNANSWERED_POLLS: u32 = 3;
/// Tails (started after the relayer's answer) a write waits for a record the relayer called
/// written when `minAnonymity` > 1.
const TAILS_FOR_WRITTEN: u32 = 3;

/// A record sealed and ready to submit (the same text goes to every relayer tried).
pub(crate) struct SealedRecord {
    pub(crate) record_ref: RecordRef,
    pub(crate) owner: Address,
    /// The record's tag: with the owner, how the client recognises the record in a listing.
    pub(crate) tag: Tag,
    /// Every attribute, `project` and `tag` included.
    pub(crate) attributes: Attributes,
    pub(crate) request: SubmitRequest,
}

/// How one relayer attempt ended.
enum Attempt {
    /// Written: the relayer's final status.
    Written(StatusResponse),
    /// The relayer refused a record that passed the client's own checks (400 or 413).
    Refused { status: u16, message: String },
    /// The relayer failed; `landing` says whether the record may still land, `blame` whether
    /// the relayer's own authenticated answers show the failure (an outer HTTP error, an answer
    /// that does not decapsulate or no answer may be the OHTTP relay's or the network's doing,
    /// and never marks the relayer bad).
    Failed {
        reason: String,
        landing: Landing,
        blame: bool,
    },
}

/// Whether a failed attempt may still put the record on the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Landing {
    /// The relayer answered that it will not write the record.
    No,
    /// The submission got no answer: the relayer may have accepted the record durably (the
    /// answer was lost) and then writes it within one batching round.
    Unanswered,
    /// The relayer accepted the record, then stopped answering or missed its deadline.
    Accepted,
}

/// Validates user attribute names and values; returns every problem at once.
pub(crate) fn user_attributes(input: &[(String, AttrValue)]) -> Result<Attributes, PrivsvcError> {
    let mut problems = Vec::new();
    let mut attrs = Attributes::new();
    for (name, value) in input {
        if let Some(reason) = privsvc_attributes::user_name_problem(name) {
            problems.push(AttributeError::Invalid {
                name: name.clone(),
                reason,
            });
            continue;
        }
        if attrs.contains(name) {
            problems.push(AttributeError::Invalid {
                name: name.clone(),
                reason: "is given twice".into(),
            });
            continue;
        }
        if let Err(e) = attrs.insert(name.clone(), value.clone()) {
            problems.push(e);
        }
    }
    // project and tag are added by the library.
    if attrs.len() + 2 > privsvc_attributes::MAX_ATTRIBUTES {
        problems.push(AttributeError::TooMany {
            count: attrs.len() + 2,
        });
    }
    if problems.is_empty() {
        Ok(attrs)
    } else {
        Err(PrivsvcError::InvalidAttributes { problems })
    }
}

/// How long a strict write waits, beyond one tail gap, for the session's attribute listing to
/// finish (a listing from the start of a project of a million records takes about a minute).
const ATTRIBUTE_LISTING_TIME: Duration = Duration::from_secs(120);
impl PrivateClient {
    /// Writes a record: checks (strict mode refuses on any warning), rounds the expiry up to a
    /// bucket, seals the envelope under a fresh one-time owner (or the scope's owner), waits a
    /// random delay, submits through a random live relayer with a token when needed, and polls.
    ///
    /// No on-demand reads (docs/PROTOCOL.md §8.3): nothing here reads the ledger or calls the
    /// issuer.
    /// - Tokens: only a token obtained before this call and at least `token_min_age_ms` old at
    ///   submission is spent; with none, a relayer that requires no token is chosen, else the
    ///   write fails with `NoRipeToken` at once (unless `allow_on_demand`).
    /// - Each attempt has an absolute deadline from its 202: the inclusion timeout, plus
    ///   `maxHoldMs` when `min_anonymity` > 1. Queue positions never extend it.
    /// - A relayer that refuses (400, 413) a record that passed the client's own checks is
    ///   marked bad and the write goes to another relayer with a fresh token.
    /// - With `min_anonymity` 1 the write resolves on the relayer's `written`; above 1 it
    ///   resolves at the first tail (the session's own incremental listing) that shows the
    ///   record, with the count of the project's records in its batch read there. The status
    ///   polls continue for a random 0 to 60 s after `written`.
    /// - When a relayer stops answering or misses its deadline, the tails of one batching
    ///   round are watched for the record (found: `recovered: true`) before the same sealed
    ///   envelope goes to another relayer: it is never written twice.
    ///
    /// The rarity check uses the session's last listing; a write never lists the project.
    /// Before the session's attribute listing (its first tail) there is nothing to count: a
    /// strict write waits for it (one tail gap and the listing's time at most, then fails with
    /// [`PrivsvcError::RarityUnavailable`]); any other write skips the check.
    pub async fn create_entity(&self, params: CreateParams) -> Result<CreateResult, PrivsvcError> {
        let requested_ms = privsvc_rt::now_unix_ms();
        let user = user_attributes(&params.attributes)?;
        let mut warnings = self.check(&params.attributes, params.expires, &params.payload);
        if self.options.rarity_k > 0 && !user.is_empty() {
            let mut rarity = self.cached_rarity(&user).await;
            if rarity.is_none() && self.options.strict {
                // A strict write is never sent unchecked: it waits for the session's attribute
                // listing (made at its first tail, on the tail's own timer).
                let mut done = self.tail.watch();
                let bound = self.tail_window(1).saturating_add(ATTRIBUTE_LISTING_TIME);
                let _ = privsvc_rt::timeout(bound, done.wait_for(|n| *n >= 1)).await;
                rarity = self.cached_rarity(&user).await;
                if rarity.is_none() {
                    return Err(PrivsvcError::RarityUnavailable);
                }
            }
            match rarity {
                Some(w) => warnings.extend(w),
                None => tracing::debug!("no attribute listing yet: the rarity check is skipped"),
            }
        }
        if self.options.strict && !warnings.is_empty() {
            return Err(PrivsvcError::StrictRefusal { warnings });
        }
        let sealed = self.seal(&params, user).await?;
        let (lo, hi) = self.options.delay_ms;
        if hi > 0 {
            let ms = self.rng.with(|r| r.gen_range(lo..=hi));
            privsvc_rt::sleep(Duration::from_millis(ms)).await;
        }
        let result = self.submit_sealed(&sealed, warnings, requested_ms).await?;
        // The session knows its own write: the next `my_entities` returns it at once, with no
        // request; a scheduled scan verifies it later. Nothing is read because of the write.
        self.record_own_write(&params, &sealed, &result).await;
        Ok(result)
    }

    /// Adds a record this device just wrote to the session's records (unverified), and keeps
    /// it in the scan cache so that later sessions on this device have it too.
    async fn record_own_write(
        &self,
        params: &CreateParams,
        sealed: &SealedRecord,
        result: &CreateResult,
    ) {
        if result.entity_key == B256::ZERO {
            return;
        }
        let mut cache = self.scanner.cache.lock().await;
        let listed = cache.entries.get(&result.entity_key).map(|e| e.batch());
        let created_at = listed
            .map(|b| b.block)
            .or(result.block)
            .or(cache.block)
            .unwrap_or_default();
        let creator = listed
            .map(|b| b.creator)
            .or_else(|| {
                self.relayers()
                    .into_iter()
                    .find(|r| r.url == result.relayer)
                    .map(|r| r.address)
            })
            .unwrap_or_default();
        let exp = sealed.request.exp_seconds;
        cache.add_own_write(MyRecord {
            key: result.entity_key,
            entity_key: result.entity_key,
            owner: sealed.owner,
            creator,
            app: self.app().to_string(),
            content_type: params.content_type.clone(),
            data: params.payload.clone(),
            encrypted: params.encrypt,
            attributes: sealed.attributes.clone(),
            created_at,
            expires_at: created_at.saturating_add(exp / crate::options::BLOCK_TIME_SECONDS),
            exp_seconds: exp,
            envelope: sealed.request.envelope.trim_end_matches(' ').to_string(),
            record_ref: sealed.record_ref,
            verified: false,
        });
        if let Some(store) = &self.scanner.scan_cache {
            store.save_records(&cache).await;
        }
    }

    /// The envelope's `hour`: from the chain's time as the session last read it (the newest
    /// block's timestamp), never from the device clock, so that a skewed clock does not mark
    /// the user's records; the device clock only before the session has read any block.
    async fn envelope_hour(&self) -> u64 {
        #[cfg(feature = "lab-leaks")]
        if let Some(offset) = self.options.lab_device_clock_hour {
            return privsvc_envelope::hour_of(
                crate::proof::unix_now().saturating_add_signed(offset),
            );
        }
        self.chain_hour().await
    }

    /// The hour of the chain's time as the session last read it (the device clock only before
    /// any block timestamp was read).
    async fn chain_hour(&self) -> u64 {
        let now = self.scanner.cache.lock().await.chain_now();
        let seconds = now.unwrap_or_else(|| {
            tracing::warn!(
                "no block timestamp read yet: the envelope's hour comes from the device clock"
            );
            crate::proof::unix_now()
        });
        privsvc_envelope::hour_of(seconds)
    }

    /// Seals a record: attributes with `project` and `tag`, payload (encrypted on request),
    /// signed and padded envelope.
    pub(crate) async fn seal(
        &self,
        params: &CreateParams,
        mut attrs: Attributes,
    ) -> Result<SealedRecord, PrivsvcError> {
        let exp = expiry_bucket(expiry_seconds(params.expires)).map_err(PrivsvcError::Expiry)?;
        let record_ref = match &params.scope {
            Some(name) => self.vault.scope_record(name).await?,
            None => self.vault.new_record(),
        };
        let owner = self.vault.address_of(&record_ref).await?;
        let tag = self.vault.make_tag(&record_ref).await?;
        let invalid = |e: AttributeError| PrivsvcError::InvalidAttributes { problems: vec![e] };
        attrs
            .insert("project", AttrValue::Str(self.project().to_string()))
            .map_err(invalid)?;
        attrs
            .insert("tag", AttrValue::Str(privsvc_vault::tag_to_text(&tag)))
            .map_err(invalid)?;
        let data = if params.encrypt {
            self.vault.encrypt(&record_ref, &params.payload).await?
        } else {
            params.payload.clone()
        };
        let body = EnvelopeBody {
            app: self.app().to_string(),
            exp,
            hour: self.envelope_hour().await,
            ct: params.content_type.clone(),
            enc: params.encrypt,
            types: attrs.types(),
            data,
        };
        let envelope = self.vault.sign_envelope(&record_ref, &body, &attrs).await?;
        let wire = match attrs.to_wire() {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        let request = SubmitRequest {
            app: self.app().to_string(),
            owner: owner.to_string(),
            envelope,
            attributes: wire,
            exp_seconds: exp,
            token: None,
            min_anonymity: (self.options.min_anonymity > 1).then_some(self.options.min_anonymity),
            max_hold_ms: self.options.effective_max_hold_ms(),
        };
        Ok(SealedRecord {
            record_ref,
            owner,
            tag,
            attributes: attrs,
            request,
        })
    }

    /// Submits a sealed record, failing over between relayers without ever writing it twice.
    pub(crate) async fn submit_sealed(
        &self,
        sealed: &SealedRecord,
        warnings: Vec<crate::CheckWarning>,
        requested_ms: u64,
    ) -> Result<CreateResult, PrivsvcError> {
        let mut tried = HashSet::new();
        // The longest inclusion timeout of the relayers tried: how long the last look waits.
        let mut longest_timeout = Duration::ZERO;
        let mut attempts = Vec::new();
        let mut submitted_somewhere = false;
        let mut token_failures = Vec::new();
        let mut refusals = Vec::new();
        while let Some(relayer) = self.pick_relayer(&tried) {
            tried.insert(relayer.url.clone());
            longest_timeout =
                longest_timeout.max(self.options.inclusion_timeout_for(&relayer.info));
            if let Some(reason) = unacceptable(&relayer, &sealed.request) {
                attempts.push(format!("{}: {reason}", relayer.url));
                continue;
            }
            let mut request = sealed.request.clone();
            if relayer.info.tokens_required {
                match self
                    .tokens
                    .take(&self.app, &relayer.info, requested_ms)
                    .await
                {
                    Ok(token) => request.token = Some(token),
                    Err(e) => {
                        attempts.push(format!("{}: no token: {e}", relayer.url));
                        token_failures.push(e);
                        continue;
                    }
                }
            }
            match self.try_relayer(&relayer, &request).await {
                Attempt::Written(st) => {
                    if self.options.min_anonymity <= 1 {
                        return Ok(claimed_result(&relayer, st, sealed, warnings));
                    }
                    // k > 1: the batch must show the record with its peers.
                    let timeout = self.options.inclusion_timeout_for(&relayer.info);
                    if let Some(found) = self
                        .await_tail(sealed, Duration::ZERO, TAILS_FOR_WRITTEN, timeout)
                        .await
                    {
                        return written_result(&relayer, st, found, sealed, warnings);
                    }
                    tracing::warn!(relayer = %relayer.url, "the relayer says written, the session's tails do not show the record");
                    attempts.push(format!(
                        "{}: said the record was written, the ledger does not show it",
                        relayer.url
                    ));
                    submitted_somewhere = true;
                    self.mark_bad(&relayer.url);
                }
                Attempt::Refused { status, message } => {
                    // The record passed our own checks: this relayer is not to be trusted with
                    // it. Another relayer gets it, with a fresh token.
                    tracing::warn!(relayer = %relayer.url, status, "the relayer refused a record that passed the client's checks");
                    attempts.push(format!("{}: refused ({status}): {message}", relayer.url));
                    self.mark_bad(&relayer.url);
                    refusals.push((relayer.url.clone(), status, message));
                }
                Attempt::Failed {
                    reason,
                    landing,
                    blame,
                } => {
                    tracing::warn!(relayer = %relayer.url, %reason, "relayer attempt failed");
                    attempts.push(format!("{}: {reason}", relayer.url));
                    if landing == Landing::No {
                        continue;
                    }
                    submitted_somewhere = true;
                    // Only the relayer's own authenticated answers mark it bad: an error the
                    // OHTTP relay or the network can make must not steer later writes.
                    if blame {
                        self.mark_bad(&relayer.url);
                    }
                    // Watch the tails of one batching round of that relayer: a record it
                    // accepted may still land, and must not be written twice.
                    // (Never longer than the inclusion timeout, and until a tail that started
                    // after it ended.)
                    let timeout = self.options.inclusion_timeout_for(&relayer.info);
                    let window = relayer_round(&relayer.info)
                        .min(timeout)
                        .saturating_add(self.options.poll_interval);
                    if let Some(found) = self.await_tail(sealed, window, 1, timeout).await {
                        return Ok(recovered_result(found, sealed, warnings));
                    }
                }
            }
        }
        if submitted_somewhere {
            if let Some(found) = self
                .await_tail(sealed, Duration::ZERO, 1, longest_timeout)
                .await
            {
                return Ok(recovered_result(found, sealed, warnings));
            }
        }
        if !submitted_somewhere && !token_failures.is_empty() {
            // An equivocating issuer is named as such; with no ripe token anywhere, say so.
            if let Some(pos) = token_failures
                .iter()
                .position(|e| matches!(e, PrivsvcError::IssuerEquivocation { .. }))
            {
                return Err(token_failures.swap_remove(pos));
            }
            if token_failures.len() == attempts.len()
                && token_failures
                    .iter()
                    .all(|e| matches!(e, PrivsvcError::NoRipeToken { .. }))
            {
                return Err(token_failures.swap_remove(0));
            }
        }
        if !submitted_somewhere && !refusals.is_empty() && refusals.len() == attempts.len() {
            // Every relayer refused it: the record itself is probably at fault.
            let (relayer, status, message) = refusals.swap_remove(0);
            return Err(PrivsvcError::Rejected {
                relayer,
                status,
                message,
            });
        }
        if attempts.is_empty() {
            return Err(PrivsvcError::NoRelayerAvailable {
                reason: "the session knows no relayer".into(),
            });
        }
        Err(PrivsvcError::AllRelayersFailed { attempts })
    }

    /// One attempt at `relayer`: submit, then poll until written, failed, or the attempt's
    /// absolute deadline (202 + inclusion timeout, + `maxHoldMs` when `min_anonymity` > 1).
    async fn try_relayer(&self, relayer: &RelayerStatus, request: &SubmitRequest) -> Attempt {
        let t = self.transport.as_ref();
        let id = match submit(t, &relayer.url, request).await {
            Ok(SubmitOutcome::Accepted(id)) => id,
            Ok(SubmitOutcome::Refused { status, message }) => {
                return match status {
                    400 | 413 => Attempt::Refused { status, message },
                    _ => Attempt::Failed {
                        reason: format!("refused with {status}: {message}"),
                        landing: Landing::No,
                        blame: false,
                    },
                };
            }
            Err(e) => {
                return Attempt::Failed {
                    reason: format!("no answer to the submission: {e}"),
                    landing: Landing::Unanswered,
                    blame: false,
                }
            }
        };
        let mut budget = self.options.inclusion_timeout_for(&relayer.info);
        if let Some(hold) = self.options.effective_max_hold_ms() {
            if self.options.min_anonymity > 1 {
                budget = budget.saturating_add(Duration::from_millis(hold));
            }
        }
        let accepted = Instant::now();
        let deadline = accepted + budget;
        let horizon = accepted + self.poll_horizon(&relayer.info);
        let mut unanswered = 0u32;
        loop {
            privsvc_rt::sleep(self.options.poll_interval).await;
            match fetch_status(t, &relayer.url, &id).await {
                Ok(Some(st)) => {
                    unanswered = 0;
                    match st.state {
                        RecordState::Written => {
                            self.keep_polling(&relayer.url, &id, horizon);
                            return Attempt::Written(st);
                        }
                        RecordState::Failed => {
                            return Attempt::Failed {
                                reason: format!(
                                    "the relayer failed the record: {}",
                                    st.error.unwrap_or_default()
                                ),
                                landing: Landing::No,
                                blame: false,
                            }
                        }
                        // A queue position never extends the deadline.
                        RecordState::Queued => {}
                    }
                }
                Ok(None) | Err(_) => {
                    unanswered += 1;
                    if unanswered >= MAX_UNANSWERED_POLLS {
                        return Attempt::Failed {
                            reason: "stopped answering status polls".into(),
                            landing: Landing::Accepted,
                            blame: false,
                        };
                    }
                }
            }
            if Instant::now() >= deadline {
                // The relayer's own answers kept the record queued past its deadline.
                return Attempt::Failed {
                    reason: format!("not written within {budget:?} of its acceptance"),
                    landing: Landing::Accepted,
                    blame: true,
                };
            }
        }
    }

    /// The poll horizon of a submission to a relayer with `info`: a uniform number of its
    /// batching rounds in [`crate::SessionSchedule::status_horizon_rounds`], drawn at the 202.
    fn poll_horizon(&self, info: &crate::protocol::InfoResponse) -> Duration {
        let round = relayer_round(info)
            .saturating_add(Duration::from_secs(crate::options::BLOCK_TIME_SECONDS));
        let (low, high) = self.options.schedule.status_horizon_rounds;
        let (low, high) = (low.max(0.0), high.max(low.max(0.0)));
        let rounds = if high > low {
            self.rng.with(|r| r.gen_range(low..=high))
        } else {
            low
        };
        round.mul_f64(rounds)
    }

    /// After `written`, the status polls of record `id` go on until the submission's poll
    /// `horizon` (drawn at its 202, independent of landing); a record written after its horizon
    /// is polled for a random while more (0 to 60 s by default). When they stop says nothing of
    /// when the record landed.
    fn keep_polling(&self, relayer_url: &str, id: &str, horizon: Instant) {
        let end = if Instant::now() < horizon {
            horizon
        } else {
            Instant::now() + self.rng.between(self.options.schedule.status_tail)
        };
        if end <= Instant::now() {
            return;
        }
        let (transport, url, id) = (
            self.transport.clone(),
            relayer_url.to_string(),
            id.to_string(),
        );
        let poll = self.options.poll_interval;
        let task = privsvc_rt::spawn(async move {
            loop {
                privsvc_rt::sleep_background(poll).await;
                if Instant::now() >= end {
                    break;
                }
                let _ = fetch_status(transport.as_ref(), &url, &id).await;
            }
        });
        self.keep(&task);
    }

    /// [`find_listed`] in the session's cache, the session's relayers trusted in a tie (as the
    /// scan's copy check trusts them).
    async fn find_listed(&self, sealed: &SealedRecord) -> Option<Found> {
        let trusted = self.scanner.copy_check_creators();
        let cache = self.scanner.cache.lock().await;
        find_listed(&cache, &sealed.tag, &sealed.attributes, &trusted)
    }

    /// How long `tails` tails take at most.
    fn tail_window(&self, tails: u32) -> Duration {
        self.options.schedule.tail.1.saturating_mul(tails)
    }

    /// Waits for a tail (the session's own listing) that shows the sealed record: for at least
    /// `at_least`, and until `tails` tails that started after this call have finished however
    /// long they took to list (a listing under way may have been made at a head before the
    /// record's block), but never past `at_least` plus `tails` tail gaps plus `slow` (the time
    /// allowed for slow listings: a relayer's inclusion timeout). The record is recognised
    /// locally by owner, tag and attributes; nothing is read here.
    async fn await_tail(
        &self,
        sealed: &SealedRecord,
        at_least: Duration,
        tails: u32,
        slow: Duration,
    ) -> Option<Found> {
        let mut done = self.tail.watch();
        let want = self.tail.started().saturating_add(u64::from(tails));
        let start = Instant::now();
        let min_end = start + at_least;
        let end = min_end + self.tail_window(tails).saturating_add(slow);
        loop {
            if let Some(found) = self.find_listed(sealed).await {
                return Some(found);
            }
            let now = Instant::now();
            let tails_done = *done.borrow_and_update() >= want;
            if (tails_done && now >= min_end) || now >= end {
                return None;
            }
            // Wake for the next tail, or once the minimum wait is over when the tails are done.
            let left = if tails_done { min_end - now } else { end - now };
            if let Ok(Err(_)) = privsvc_rt::timeout(left, done.changed()).await {
                // The tail loop is gone: nothing more will be listed.
                return self.find_listed(sealed).await;
            }
        }
    }
}

/// The sealed record in the cached listing: same tag and (when the listing has attributes) the
/// same attributes; the earliest if there are several (a relayer wrote it more than once, or
/// someone copied it: a record is its earliest entity, docs/PROTOCOL.md §8.4). By tag, not by
/// owner: listings do not select the owner (§8.1), and a copy transferred to the owner would
/// match an owner too. Its batch size is the number of the project's listed records its creator
/// made in its block.
fn find_listed(
    cache: &EntityCache,
    tag: &Tag,
    attributes: &Attributes,
    trusted: &[Address],
) -> Option<Found> {
    let matching: Vec<B256> = cache
        .entries
        .iter()
        .filter(|(_, e)| {
            e.tag
                .is_some_and(|t| bool::from(t.as_slice().ct_eq(tag.as_slice())))
        })
        .filter(|(_, e)| !cache.with_attributes || cache.same_attributes(e, attributes))
        .map(|(k, _)| *k)
        .collect();
    let key = cache.original_among(&matching, trusted)?;
    let e = cache.entries.get(&key)?;
    let batch: BatchId = e.batch();
    Some(Found {
        key,
        batch_size: u64::from(cache.batches.get(&batch).copied().unwrap_or(1)),
        block: e.created_at,
    })
}

/// How long a relayer may take to write a record it accepted, when its queue is short: its
/// longest wait for a batch plus the smallest gap between its batches.
fn relayer_round(info: &crate::protocol::InfoResponse) -> Duration {
    let gap_ms =
        (crate::options::BLOCK_TIME_SECONDS * 1000).saturating_mul(info.min_interval_blocks);
    Duration::from_millis(info.max_wait_ms.saturating_add(gap_ms))
}

/// Why a relayer cannot take this request's anonymity options, if it cannot.
fn unacceptable(relayer: &RelayerStatus, request: &SubmitRequest) -> Option<String> {
    if let Some(k) = request.min_anonymity {
        if k > relayer.info.max_min_anonymity {
            return Some(format!(
                "accepts minAnonymity up to {}, {k} asked",
                relayer.info.max_min_anonymity
            ));
        }
    }
    if let Some(ms) = request.max_hold_ms {
        if ms > relayer.info.max_hold_ms {
            return Some(format!(
                "holds records up to {} ms, {ms} ms asked",
                relayer.info.max_hold_ms
            ));
        }
    }
    None
}

/// The record as the listing shows it.
struct Found {
    key: B256,
    batch_size: u64,
    block: u64,
}

fn recovered_result(
    found: Found,
    sealed: &SealedRecord,
    warnings: Vec<crate::CheckWarning>,
) -> CreateResult {
    CreateResult {
        entity_key: found.key,
        owner: sealed.owner,
        tx_hash: B256::ZERO,
        relayer: String::new(),
        batch_size: found.batch_size,
        block: Some(found.block),
        recovered: true,
        warnings,
        record_ref: sealed.record_ref,
    }
}

/// The result of a write with `min_anonymity` 1, resolved on the relayer's `written`: entity
/// key, transaction hash and batch size are the relayer's word (figures clamped); the
/// session's tails bring the record into the cache later.
fn claimed_result(
    relayer: &RelayerStatus,
    st: StatusResponse,
    sealed: &SealedRecord,
    warnings: Vec<crate::CheckWarning>,
) -> CreateResult {
    let parse = |v: Option<&str>| v.and_then(|k| k.parse::<B256>().ok()).unwrap_or(B256::ZERO);
    CreateResult {
        entity_key: parse(st.entity_key.as_deref()),
        owner: sealed.owner,
        tx_hash: parse(st.tx_hash.as_deref()),
        relayer: relayer.url.clone(),
        batch_size: st.batch_size.unwrap_or(1),
        block: st.block.as_deref().and_then(|b| b.parse().ok()),
        recovered: false,
        warnings,
        record_ref: sealed.record_ref,
    }
}

/// The result of a write the relayer reported and a tail confirmed: entity key, block and
/// batch size from the ledger; the transaction hash is the relayer's word.
fn written_result(
    relayer: &RelayerStatus,
    st: StatusResponse,
    found: Found,
    sealed: &SealedRecord,
    warnings: Vec<crate::CheckWarning>,
) -> Result<CreateResult, PrivsvcError> {
    let claimed: Option<B256> = st.entity_key.as_deref().and_then(|k| k.parse().ok());
    if claimed != Some(found.key) || st.batch_size != Some(found.batch_size) {
        tracing::warn!(
            relayer = %relayer.url,
            claimed_batch = ?st.batch_size,
            ledger_batch = found.batch_size,
            block = found.block,
            "the relayer's status differs from the ledger; reporting the ledger"
        );
    }
    let tx_hash: B256 = st
        .tx_hash
        .as_deref()
        .and_then(|k| k.parse().ok())
        .unwrap_or(B256::ZERO);
    Ok(CreateResult {
        entity_key: found.key,
        owner: sealed.owner,
        tx_hash,
        relayer: relayer.url.clone(),
        batch_size: found.batch_size,
        block: Some(found.block),
        recovered: false,
        warnings,
        record_ref: sealed.record_ref,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The write path finds its record by the same rule as the scan's copy check: the earliest
    /// entity with its tag; within one block, the one the session's relayer created, and none
    /// when that does not single one out.
    #[test]
    fn the_write_path_finds_its_record_by_the_copy_checks_rule() {
        use privsvc_ledger::{ArkivValue, Attribute, Entity};
        let tag = [7u8; privsvc_vault::TAG_BYTES];
        let (relayer, stranger) = (Address::repeat_byte(0xaa), Address::repeat_byte(0xbb));
        let listed = |k: u8, creator: Address, block: u64| Entity {
            key: B256::repeat_byte(k),
            creator: Some(creator),
            created_at: Some(block),
            expires_at: Some(1_000),
            attributes: Some(vec![Attribute {
                name: "tag".into(),
                value: ArkivValue::Str(privsvc_vault::tag_to_text(&tag)),
            }]),
            ..Default::default()
        };
        let found = |rows: Vec<Entity>| {
            let mut cache = EntityCache::default();
            cache.add(rows);
            find_listed(&cache, &tag, &Attributes::new(), &[relayer]).map(|f| f.key)
        };
        // A stranger's copy in the record's block, with the lower key: the relayer's entity.
        assert_eq!(
            found(vec![listed(1, stranger, 5), listed(2, relayer, 5)]),
            Some(B256::repeat_byte(2))
        );
        // An earlier entity is the record, whoever created it (a copy comes later).
        assert_eq!(
            found(vec![listed(1, stranger, 4), listed(2, relayer, 5)]),
            Some(B256::repeat_byte(1))
        );
        // Two relayer entities in one block: neither can be told to be the record.
        assert_eq!(
            found(vec![listed(1, relayer, 5), listed(2, relayer, 5)]),
            None
        );
        assert_eq!(
            found(vec![listed(3, relayer, 5)]),
            Some(B256::repeat_byte(3))
        );
    }

    #[test]
    fn user_attributes_report_every_problem() {
        let ok = user_attributes(&[
            ("kind".into(), AttrValue::Str("note".into())),
            ("level".into(), AttrValue::I32(3)),
        ])
        .unwrap();
        assert_eq!(ok.len(), 2);
        let err = user_attributes(&[
            ("Kind".into(), AttrValue::Str("a".into())),
            ("tag".into(), AttrValue::Str("a".into())),
            ("x".into(), AttrValue::Str("a".into())),
            ("x".into(), AttrValue::Str("b".into())),
            ("y".into(), AttrValue::Str("\u{7}".into())),
        ])
        .unwrap_err();
        match err {
            PrivsvcError::InvalidAttributes { problems } => {
                assert_eq!(problems.len(), 4, "{problems:?}");
                let named = |i: usize, want: &str, says: &str| {
                    matches!(&problems[i], AttributeError::Invalid { name, reason }
                        if name == want && reason.contains(says))
                };
                assert!(named(0, "Kind", "lowercase"), "{problems:?}");
                assert!(named(1, "tag", "reserved"), "{problems:?}");
                assert!(named(2, "x", "twice"), "{problems:?}");
                assert!(
                    matches!(&problems[3], AttributeError::Invalid { name, .. } if name == "y"),
                    "{problems:?}"
                );
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn at_most_28_user_attributes() {
        let many = |n: usize| -> Vec<(String, AttrValue)> {
            (0..n)
                .map(|i| (format!("a{i}"), AttrValue::I32(i as i32)))
                .collect()
        };
        assert!(user_attributes(&many(28)).is_ok());
        match user_attributes(&many(29)) {
            Err(PrivsvcError::InvalidAttributes { problems }) => assert_eq!(
                problems,
                vec![AttributeError::TooMany { count: 31 }],
                "project and tag are counted"
            ),
            other => panic!("{other:?}"),
        }
    }
}
