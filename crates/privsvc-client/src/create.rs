//! `create_entity`: check, seal, submit through a random live relayer, poll, recover or fail over.

use std::collections::HashSet;
use std::time::Duration;

use alloy_primitives::{Address, B256};
use privsvc_attributes::{AttrValue, Attributes};
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
use crate::record::{CreateParams, CreateResult};
use crate::relayer_api::{fetch_status, submit, RelayerStatus, SubmitOutcome};

/// Consecutive unanswered status polls after which a relayer counts as gone.
const MAX_UNANSWERED_POLLS: u32 = 3;
/// The shortest time a "written" answer may run ahead of the listing (a few blocks).
const CONFIRM_MIN_WINDOW: Duration = Duration::from_secs(10);

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
    /// The relayer refused the record as malformed: no other relayer will take it.
    Rejected { status: u16, message: String },
    /// The relayer failed; `landing` says whether the record may still land.
    Failed { reason: String, landing: Landing },
}

/// Whether a failed attempt may still put the record on the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Landing {
    /// The relayer answered that it will not write the record.
    No,
    /// The submission got no answer: the relayer may have accepted the record durably (the
    /// answer was lost) and then writes it within one batching round.
    Unanswered,
    /// The relayer accepted the record, then stopped answering or making progress.
    Accepted,
}

/// Validates user attribute names and values; returns every problem at once.
pub(crate) fn user_attributes(input: &[(String, AttrValue)]) -> Result<Attributes, PrivsvcError> {
    let mut problems = Vec::new();
    let mut attrs = Attributes::new();
    for (name, value) in input {
        if let Some(p) = privsvc_attributes::user_name_problem(name) {
            problems.push(format!("{name:?}: {p}"));
            continue;
        }
        if attrs.contains(name) {
            problems.push(format!("{name:?} is given twice"));
            continue;
        }
        if let Err(e) = attrs.insert(name.clone(), value.clone()) {
            problems.push(e.to_string());
        }
    }
    // project and tag are added by the library.
    if attrs.len() + 2 > privsvc_attributes::MAX_ATTRIBUTES {
        problems.push(format!(
            "{} attributes given, at most {} (a record holds {} with project and tag)",
            attrs.len(),
            privsvc_attributes::MAX_ATTRIBUTES - 2,
            privsvc_attributes::MAX_ATTRIBUTES
        ));
    }
    if problems.is_empty() {
        Ok(attrs)
    } else {
        Err(PrivsvcError::InvalidAttributes { problems })
    }
}

impl PrivateClient {
    /// Writes a record: checks (strict mode refuses on any warning), rounds the expiry up to a
    /// bucket, seals the envelope under a fresh one-time owner (or the scope's owner), waits a
    /// random delay, submits through a random live relayer with a token when needed, and polls.
    ///
    /// The client never names itself to the ledger: whether the record landed is learnt only
    /// from incremental listings of the project (records created since the last listed block,
    /// no payloads), matched locally by owner, tag and attributes; the batch size reported is
    /// counted in that listing, not taken from the relayer. When a relayer says "written", the
    /// listing must show the record within a few polls, or the relayer is not believed. When a
    /// relayer stops answering or its queue position does not improve within the inclusion
    /// timeout, the listing is consulted first (found: `recovered: true`) and only then is the
    /// same sealed envelope submitted to another relayer. When the submission itself gets no
    /// answer, the relayer may still have accepted the record, so the listing is watched for one
    /// batching round of that relayer (its clamped `maxWaitMs` plus its minimum gap between
    /// batches, at most the inclusion timeout) before another relayer is tried.
    ///
    /// The rarity check uses the last scan's listing (the session lists the project when it
    /// starts); a write never lists the project just before it submits.
    pub async fn create_entity(&self, params: CreateParams) -> Result<CreateResult, PrivsvcError> {
        let user = user_attributes(&params.attributes)?;
        let mut warnings = self.check(&params.attributes, params.expires, &params.payload);
        if self.options.rarity_k > 0 && !user.is_empty() {
            match self.cached_rarity(&user).await {
                Some(w) => warnings.extend(w),
                None => tracing::debug!("no listing cached yet: the rarity check is skipped"),
            }
        }
        if self.options.strict && !warnings.is_empty() {
            return Err(PrivsvcError::StrictRefusal { warnings });
        }
        let sealed = self.seal(&params, user).await?;
        let (lo, hi) = self.options.delay_ms;
        if hi > 0 {
            let ms = rand::thread_rng().gen_range(lo..=hi);
            privsvc_rt::sleep(Duration::from_millis(ms)).await;
        }
        let result = self.submit_sealed(&sealed, warnings).await?;
        let mut cache = self.cache.lock().await;
        cache.written.insert(result.entity_key, result.record_ref);
        cache.mark_stale();
        Ok(result)
    }

    /// Seals a record: attributes with `project` and `tag`, payload (encrypted on request),
    /// signed and padded envelope.
    pub(crate) async fn seal(
        &self,
        params: &CreateParams,
        mut attrs: Attributes,
    ) -> Result<SealedRecord, PrivsvcError> {
        let exp = expiry_bucket(expiry_seconds(params.expires))
            .map_err(|e| PrivsvcError::Expiry(e.to_string()))?;
        let record_ref = match &params.scope {
            Some(name) => self.vault.scope_record(name).await?,
            None => self.vault.new_record(),
        };
        let owner = self.vault.address_of(&record_ref).await?;
        let tag = self.vault.make_tag(&record_ref).await?;
        let invalid = |e: privsvc_attributes::AttributeError| PrivsvcError::InvalidAttributes {
            problems: vec![e.to_string()],
        };
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
            hour: privsvc_envelope::hour_of(crate::proof::unix_now()),
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
    ) -> Result<CreateResult, PrivsvcError> {
        let mut tried = HashSet::new();
        let mut attempts = Vec::new();
        let mut submitted_somewhere = false;
        let mut token_failures = Vec::new();
        while let Some(relayer) = self.pick_relayer(&tried) {
            tried.insert(relayer.url.clone());
            if let Some(reason) = unacceptable(&relayer, &sealed.request) {
                attempts.push(format!("{}: {reason}", relayer.url));
                continue;
            }
            let mut request = sealed.request.clone();
            if relayer.info.tokens_required {
                match self.tokens.take(self.app(), &relayer.info).await {
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
                    // Believe the ledger, not the relayer: the record must be in the listing.
                    if let Some(found) = self.watch_ledger(sealed, self.confirm_window()).await? {
                        return written_result(&relayer, st, found, sealed, warnings);
                    }
                    tracing::warn!(relayer = %relayer.url, "the relayer says written, the ledger does not show the record");
                    attempts.push(format!(
                        "{}: said the record was written, the ledger does not show it",
                        relayer.url
                    ));
                    submitted_somewhere = true;
                    self.mark_bad(&relayer.url);
                }
                Attempt::Rejected { status, message } => {
                    return Err(PrivsvcError::Rejected {
                        relayer: relayer.url,
                        status,
                        message,
                    });
                }
                Attempt::Failed { reason, landing } => {
                    tracing::warn!(relayer = %relayer.url, %reason, "relayer attempt failed");
                    attempts.push(format!("{}: {reason}", relayer.url));
                    let window = match landing {
                        Landing::No => continue,
                        // Watch for as long as the relayer takes to write what it accepted,
                        // never longer than the inclusion timeout.
                        Landing::Unanswered => relayer_round(&relayer.info)
                            .saturating_add(self.options.poll_interval)
                            .min(self.options.inclusion_timeout_for(&relayer.info)),
                        // It already had the inclusion timeout: one more poll.
                        Landing::Accepted => self.options.poll_interval,
                    };
                    submitted_somewhere = true;
                    self.mark_bad(&relayer.url);
                    if let Some(found) = self.watch_ledger(sealed, window).await? {
                        return Ok(recovered_result(found, sealed, warnings));
                    }
                }
            }
        }
        if submitted_somewhere {
            let window = self.options.poll_interval;
            if let Some(found) = self.watch_ledger(sealed, window).await? {
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
                    .all(|e| matches!(e, PrivsvcError::NoTokenReady { .. }))
            {
                return Err(token_failures.swap_remove(0));
            }
        }
        if attempts.is_empty() {
            return Err(PrivsvcError::NoRelayerAvailable {
                reason: "the session knows no relayer".into(),
            });
        }
        Err(PrivsvcError::AllRelayersFailed { attempts })
    }

    async fn try_relayer(&self, relayer: &RelayerStatus, request: &SubmitRequest) -> Attempt {
        let t = self.transport.as_ref();
        let id = match submit(t, &relayer.url, request).await {
            Ok(SubmitOutcome::Accepted(id)) => id,
            Ok(SubmitOutcome::Refused { status, message }) => {
                return match status {
                    400 | 413 => Attempt::Rejected { status, message },
                    _ => Attempt::Failed {
                        reason: format!("refused with {status}: {message}"),
                        landing: Landing::No,
                    },
                };
            }
            Err(e) => {
                return Attempt::Failed {
                    reason: format!("no answer to the submission: {e}"),
                    landing: Landing::Unanswered,
                }
            }
        };
        let mut timeout = self.options.inclusion_timeout_for(&relayer.info);
        if let Some(hold) = self.options.effective_max_hold_ms() {
            if self.options.min_anonymity > 1 {
                timeout = timeout.saturating_add(Duration::from_millis(hold));
            }
        }
        let mut best: Option<u64> = None;
        let mut last_progress = Instant::now();
        let mut unanswered = 0u32;
        loop {
            privsvc_rt::sleep(self.options.poll_interval).await;
            match fetch_status(t, &relayer.url, &id).await {
                Ok(Some(st)) => {
                    unanswered = 0;
                    match st.state {
                        RecordState::Written => return Attempt::Written(st),
                        RecordState::Failed => {
                            return Attempt::Failed {
                                reason: format!(
                                    "the relayer failed the record: {}",
                                    st.error.unwrap_or_default()
                                ),
                                landing: Landing::No,
                            }
                        }
                        RecordState::Queued => {
                            if let Some(p) = st.position {
                                if best.is_none_or(|b| p < b) {
                                    best = Some(p);
                                    last_progress = Instant::now();
                                }
                            }
                        }
                    }
                }
                Ok(None) | Err(_) => {
                    unanswered += 1;
                    if unanswered >= MAX_UNANSWERED_POLLS {
                        return Attempt::Failed {
                            reason: "stopped answering status polls".into(),
                            landing: Landing::Accepted,
                        };
                    }
                }
            }
            if last_progress.elapsed() > timeout {
                return Attempt::Failed {
                    reason: format!("queue position did not improve within {timeout:?}"),
                    landing: Landing::Accepted,
                };
            }
        }
    }

    /// How long a "written" answer may run ahead of the listing: a few polls and blocks.
    fn confirm_window(&self) -> Duration {
        self.options
            .poll_interval
            .saturating_mul(3)
            .max(CONFIRM_MIN_WINDOW)
    }

    /// Watches incremental listings of the project for the sealed record, every poll interval
    /// until `window` has passed (at least twice, so that a batch mined meanwhile is found).
    /// The listings name the project and a block, never the record's owner, key or tag; the
    /// record is recognised locally by owner, tag and attributes.
    async fn watch_ledger(
        &self,
        sealed: &SealedRecord,
        window: Duration,
    ) -> Result<Option<Found>, PrivsvcError> {
        let start = Instant::now();
        let mut looks = 0u32;
        loop {
            if looks > 0 {
                let left = window.saturating_sub(start.elapsed());
                if looks >= 2 && left.is_zero() {
                    return Ok(None);
                }
                let wait = if left.is_zero() {
                    self.options.poll_interval
                } else {
                    self.options.poll_interval.min(left)
                };
                privsvc_rt::sleep(wait).await;
            }
            looks += 1;
            let mut cache = self.cache.lock().await;
            self.update_listing(&mut cache).await?;
            if let Some(found) = find_listed(&cache, sealed) {
                return Ok(Some(found));
            }
        }
    }
}

/// The sealed record in the cached listing: same owner, same tag and (when the listing has
/// attributes) the same attributes; the earliest if a relayer wrote it more than once. Its batch
/// size is the number of the project's listed records its creator made in its block.
fn find_listed(cache: &EntityCache, sealed: &SealedRecord) -> Option<Found> {
    let (key, e) = cache
        .entries
        .iter()
        .filter(|(_, e)| e.owner == sealed.owner)
        .filter(|(_, e)| {
            e.tag
                .is_some_and(|t| bool::from(t.as_slice().ct_eq(sealed.tag.as_slice())))
        })
        .filter(|(_, e)| !cache.with_attributes || cache.same_attributes(e, &sealed.attributes))
        .min_by_key(|(k, e)| (e.created_at, **k))?;
    let batch: BatchId = e.batch();
    Some(Found {
        key: *key,
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
        recovered: true,
        warnings,
        record_ref: sealed.record_ref,
    }
}

/// The result of a write the relayer reported and the listing confirmed: entity key, block and
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
        recovered: false,
        warnings,
        record_ref: sealed.record_ref,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
                assert!(problems[0].contains("lowercase"));
                assert!(problems[1].contains("reserved"));
                assert!(problems[2].contains("twice"));
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
        assert!(matches!(
            user_attributes(&many(29)),
            Err(PrivsvcError::InvalidAttributes { .. })
        ));
    }
}
