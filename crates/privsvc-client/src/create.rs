//! `create_entity`: check, seal, submit through a random live relayer, poll, recover or fail over.

use std::collections::HashSet;
use std::time::Duration;

use alloy_primitives::{Address, B256};
use privsvc_attributes::{AttrValue, Attributes};
use privsvc_envelope::{expiry_bucket, expiry_seconds, EnvelopeBody};
use privsvc_ledger::Select;
use privsvc_vault::RecordRef;
use rand::Rng;
use tokio::time::Instant;

use crate::client::PrivateClient;
use crate::error::PrivsvcError;
use crate::protocol::{RecordState, StatusResponse, SubmitRequest};
use crate::read::{addr_literal, query_pinned};
use crate::record::{CreateParams, CreateResult};
use crate::relayer_api::{fetch_status, submit, RelayerStatus, SubmitOutcome};
use crate::verify::RECORD_CONTENT_TYPE;

/// Consecutive unanswered status polls after which a relayer counts as gone.
const MAX_UNANSWERED_POLLS: u32 = 3;

/// A record sealed and ready to submit (the same text goes to every relayer tried).
pub(crate) struct SealedRecord {
    pub(crate) record_ref: RecordRef,
    pub(crate) owner: Address,
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
    /// When a relayer stops answering or its queue position does not improve within the
    /// inclusion timeout, the owner is first looked up on the ledger (found: `recovered: true`)
    /// and only then is the same sealed envelope submitted to another relayer. When the
    /// submission itself gets no answer (connection refused or reset), the relayer may still have
    /// accepted the record, so the ledger is watched for one batching round of that relayer
    /// (its `maxWaitMs` plus its minimum gap between batches) before another relayer is tried.
    pub async fn create_entity(&self, params: CreateParams) -> Result<CreateResult, PrivsvcError> {
        let user = user_attributes(&params.attributes)?;
        let mut warnings = self.check(&params.attributes, params.expires, &params.payload);
        if self.options.rarity_k > 0 && !user.is_empty() {
            warnings.extend(self.check_rarity(&user, None).await?);
        }
        if self.options.strict && !warnings.is_empty() {
            return Err(PrivsvcError::StrictRefusal { warnings });
        }
        let sealed = self.seal(&params, user).await?;
        let (lo, hi) = self.options.delay_ms;
        if hi > 0 {
            let ms = rand::thread_rng().gen_range(lo..=hi);
            tokio::time::sleep(Duration::from_millis(ms)).await;
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
                        continue;
                    }
                }
            }
            match self.try_relayer(&relayer, &request).await {
                Attempt::Written(st) => {
                    return written_result(&relayer, st, sealed, warnings);
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
                        // Watch for as long as the relayer takes to write what it accepted.
                        Landing::Unanswered => {
                            relayer_round(&relayer.info) + self.options.poll_interval
                        }
                        // It already had the inclusion timeout: one more poll.
                        Landing::Accepted => self.options.poll_interval,
                    };
                    submitted_somewhere = true;
                    self.mark_bad(&relayer.url);
                    if let Some(found) = self.find_on_ledger(sealed, window).await? {
                        return Ok(recovered_result(found, sealed, warnings));
                    }
                }
            }
        }
        if submitted_somewhere {
            let window = self.options.poll_interval;
            if let Some(found) = self.find_on_ledger(sealed, window).await? {
                return Ok(recovered_result(found, sealed, warnings));
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
                timeout += Duration::from_millis(hold);
            }
        }
        let mut best: Option<u64> = None;
        let mut last_progress = Instant::now();
        let mut unanswered = 0u32;
        loop {
            tokio::time::sleep(self.options.poll_interval).await;
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

    /// Looks the sealed record up on the ledger by owner and envelope, every poll interval until
    /// `window` has passed (at least twice, so that a batch mined meanwhile is found).
    async fn find_on_ledger(
        &self,
        sealed: &SealedRecord,
        window: Duration,
    ) -> Result<Option<Found>, PrivsvcError> {
        let deadline = Instant::now() + window;
        let mut looks = 0u32;
        loop {
            if looks > 0 {
                let left = deadline.saturating_duration_since(Instant::now());
                if looks >= 2 && left.is_zero() {
                    return Ok(None);
                }
                let wait = if left.is_zero() {
                    self.options.poll_interval
                } else {
                    self.options.poll_interval.min(left)
                };
                tokio::time::sleep(wait).await;
            }
            looks += 1;
            let expression = format!("$owner = {}", addr_literal(&sealed.owner));
            let select = Select {
                key: true,
                creator: true,
                created_at: true,
                content_type: true,
                payload: true,
                ..Select::default()
            };
            let (_, entities) =
                query_pinned(self.reader.as_ref(), &expression, select, None).await?;
            let envelope = sealed.request.envelope.as_bytes();
            let hit = entities.into_iter().find(|e| {
                e.content_type.as_deref() == Some(RECORD_CONTENT_TYPE)
                    && e.payload.as_deref() == Some(envelope)
            });
            if let Some(e) = hit {
                let batch_size = match (e.creator, e.created_at) {
                    (Some(c), Some(b)) => crate::read::fetch_batches(
                        self.reader.as_ref(),
                        self.project(),
                        &[crate::read::BatchId {
                            block: b,
                            creator: c,
                        }],
                        None,
                    )
                    .await
                    .map(|v| v.len() as u64)
                    .unwrap_or(1),
                    _ => 1,
                };
                return Ok(Some(Found {
                    key: e.key,
                    batch_size,
                }));
            }
        }
    }
}

/// How long a relayer may take to write a record it accepted, when its queue is short: its
/// longest wait for a batch plus the smallest gap between its batches.
fn relayer_round(info: &crate::protocol::InfoResponse) -> Duration {
    let gap_ms = crate::options::BLOCK_TIME_SECONDS * 1000 * info.min_interval_blocks;
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

struct Found {
    key: B256,
    batch_size: u64,
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

fn written_result(
    relayer: &RelayerStatus,
    st: StatusResponse,
    sealed: &SealedRecord,
    warnings: Vec<crate::CheckWarning>,
) -> Result<CreateResult, PrivsvcError> {
    let bad = |what: &str| PrivsvcError::Protocol {
        relayer: relayer.url.clone(),
        message: format!("written status without a valid {what}"),
    };
    let entity_key: B256 = st
        .entity_key
        .as_deref()
        .and_then(|k| k.parse().ok())
        .ok_or_else(|| bad("entityKey"))?;
    let tx_hash: B256 = st
        .tx_hash
        .as_deref()
        .and_then(|k| k.parse().ok())
        .ok_or_else(|| bad("txHash"))?;
    Ok(CreateResult {
        entity_key,
        owner: sealed.owner,
        tx_hash,
        relayer: relayer.url.clone(),
        batch_size: st.batch_size.unwrap_or(1),
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
