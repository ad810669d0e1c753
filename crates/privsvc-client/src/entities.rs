//! `my_entities` (the user's records, from what the session's scans verified and what this
//! device wrote) and `prove_ownership`.

use alloy_primitives::B256;
use privsvc_attributes::AttrValue;
use privsvc_vault::RecordRef;

use crate::cache::ScanStats;
use crate::client::PrivateClient;
use crate::error::PrivsvcError;
use crate::proof::{sign_ownership_proof, OwnershipProof, ProofParams};
use crate::record::MyRecord;

/// Options of [`PrivateClient::my_entities`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntitiesQuery {
    /// Wait for the session's next scheduled scan (every 1 to 3 minutes by default) that
    /// starts after the call to finish. The client never lists or fetches because the app
    /// asked: a read right after a write would tell the RPC when the write landed.
    pub refresh: bool,
    /// Keep only records whose attributes have these values (filtered locally).
    pub where_: Vec<(String, AttrValue)>,
}

impl EntitiesQuery {
    /// Every record the session knows.
    pub fn new() -> Self {
        Self::default()
    }

    /// Wait for the session's next scheduled scan (see [`EntitiesQuery::refresh`]).
    pub fn refresh(mut self) -> Self {
        self.refresh = true;
        self
    }

    /// Keep only records with attribute `name` equal to `value`.
    pub fn where_eq(mut self, name: impl Into<String>, value: impl Into<AttrValue>) -> Self {
        self.where_.push((name.into(), value.into()));
        self
    }
}

/// Parameters of [`PrivateClient::prove_ownership`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProveParams {
    /// The verifier's challenge.
    pub challenge: String,
    /// The verifier's name.
    pub verifier: String,
    /// Validity in seconds (default 300).
    pub ttl_seconds: Option<u64>,
}

impl PrivateClient {
    /// The user's records of this project, newest first: those a scan verified, and those
    /// this device wrote (at once, with `verified: false` until a scheduled scan verifies
    /// them). Makes no request: the session's scans run on their own timer
    /// ([`crate::SessionSchedule::scan`]), and what they verified is in the cache. With
    /// `refresh`, waits first for the next scheduled scan to finish (at most one scan interval
    /// and 30 s); `where_` filters locally.
    pub async fn my_entities(&self, query: &EntitiesQuery) -> Result<Vec<MyRecord>, PrivsvcError> {
        if query.refresh {
            self.next_scan().await;
        }
        let cache = self.scanner.cache.lock().await;
        let head = cache.block.unwrap_or_default();
        let mut out: Vec<MyRecord> = cache
            .mine
            .values()
            .filter(|r| r.expires_at > head)
            .filter(|r| {
                query
                    .where_
                    .iter()
                    .all(|(n, v)| r.attributes.get(n) == Some(v))
            })
            .cloned()
            .collect();
        out.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| b.entity_key.cmp(&a.entity_key))
        });
        Ok(out)
    }

    /// What the latest scan listed, opened and fetched; `None` before the first scan.
    pub async fn last_scan(&self) -> Option<ScanStats> {
        self.scanner.cache.lock().await.last_scan.clone()
    }

    /// Waits for the session's next scheduled scan (one that starts after this call) and
    /// returns what the latest scan fetched.
    pub async fn scan_new(&self) -> Result<ScanStats, PrivsvcError> {
        self.next_scan().await;
        Ok(self.last_scan().await.unwrap_or_default())
    }

    /// Waits until a scan that started after this call has finished (at most one scan interval
    /// and 30 s).
    async fn next_scan(&self) {
        // The longest wait for the next scan to start, plus time for its reads to answer.
        let bound = self
            .options
            .schedule
            .scan
            .1
            .saturating_add(std::time::Duration::from_secs(30));
        self.scanner.ticks.next_started_after_now(bound).await;
    }

    /// An ownership proof for one of the user's records (found in the cache, among the records
    /// written in this session, or by a scan). Fails with `UnknownRecord` for any other key.
    pub async fn prove_ownership(
        &self,
        entity_key: B256,
        params: &ProveParams,
    ) -> Result<OwnershipProof, PrivsvcError> {
        let mut record_ref = self.known_ref(entity_key).await;
        if record_ref.is_none() {
            // Perhaps written by another device: found by the next scheduled scan, if at all.
            self.next_scan().await;
            record_ref = self.known_ref(entity_key).await;
        }
        let Some(record_ref) = record_ref else {
            return Err(PrivsvcError::UnknownRecord {
                entity_key: entity_key.to_string(),
            });
        };
        sign_ownership_proof(
            self.vault.as_ref(),
            &record_ref,
            &ProofParams {
                entity_key,
                challenge: params.challenge.clone(),
                verifier: params.verifier.clone(),
                ttl_seconds: params.ttl_seconds,
                chain_id: Some(self.chain_id),
                now: None,
            },
        )
        .await
    }

    async fn known_ref(&self, key: B256) -> Option<RecordRef> {
        let cache = self.scanner.cache.lock().await;
        cache.mine.get(&key).map(|r| r.record_ref).or_else(|| {
            // Listed and opened, not verified yet.
            cache.unverified.get(&key).copied()
        })
    }
}
