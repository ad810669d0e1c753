//! The relayer's JSON protocol as the client speaks it (docs/PROTOCOL.md §9).
//!
//! Field names as in docs/PROTOCOL.md §9 (camelCase on the wire).

use serde::{Deserialize, Serialize};

pub use privsvc_tokens::TokenRedemption;

/// The API version a relayer must report in `GET /v1/info`.
pub const API_VERSION: &str = "privsvc-relayer/1";

/// A relayer's `GET /v1/info` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InfoResponse {
    /// The relayer's account address (0x hex).
    pub address: String,
    /// API version identifier, `privsvc-relayer/1`.
    pub version: String,
    /// Ledger network id.
    pub chain_id: u64,
    /// Batch size setting.
    pub min_batch: u64,
    /// Wait setting, ms.
    pub max_wait_ms: u64,
    /// Block interval setting.
    pub min_interval_blocks: u64,
    /// Whether submission needs a token.
    pub tokens_required: bool,
    /// Address of the token issuer (only when tokens are required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Base URL of the token issuer (only when tokens are required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer_url: Option<String>,
    /// Upper bound accepted for `minAnonymity`.
    pub max_min_anonymity: u64,
    /// Upper bound accepted for `maxHoldMs`.
    pub max_hold_ms: u64,
    /// Gateway public key (hex), only when OHTTP is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ohttp_key: Option<String>,
}

/// Largest `maxWaitMs` the client believes from a relayer's info (10 minutes).
pub const MAX_WAIT_MS_LIMIT: u64 = 600_000;
/// Largest `minIntervalBlocks` the client believes.
pub const MIN_INTERVAL_BLOCKS_LIMIT: u64 = 1_000;
/// Largest queue figure (`minBatch`, `maxMinAnonymity`, `position`, `batchSize`) believed.
pub const QUEUE_FIGURE_LIMIT: u64 = 1_000_000;
/// Largest `maxHoldMs` believed (one day).
pub const MAX_HOLD_MS_LIMIT: u64 = 86_400_000;

impl InfoResponse {
    /// The info with every number clamped to what the client believes: a relayer that
    /// announces absurd waits cannot make the client wait forever or overflow its arithmetic.
    pub fn clamped(mut self) -> Self {
        self.max_wait_ms = self.max_wait_ms.min(MAX_WAIT_MS_LIMIT);
        self.min_interval_blocks = self.min_interval_blocks.min(MIN_INTERVAL_BLOCKS_LIMIT);
        self.min_batch = self.min_batch.min(QUEUE_FIGURE_LIMIT);
        self.max_min_anonymity = self.max_min_anonymity.min(QUEUE_FIGURE_LIMIT);
        self.max_hold_ms = self.max_hold_ms.min(MAX_HOLD_MS_LIMIT);
        self
    }
}

/// The body of `POST /v1/records`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmitRequest {
    /// Must equal the app inside the envelope.
    pub app: String,
    /// The one-time owner address (0x hex).
    pub owner: String,
    /// The sealed, padded envelope text.
    pub envelope: String,
    /// Attribute name to `{type, value}` (the wire form of `privsvc_attributes::to_wire`).
    pub attributes: serde_json::Map<String, serde_json::Value>,
    /// Expiry bucket in seconds; equals the envelope's `exp`.
    pub exp_seconds: u64,
    /// A rate-limit token (required when the relayer requires tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<TokenRedemption>,
    /// Smallest acceptable batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_anonymity: Option<u64>,
    /// How long the relayer may hold the record, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_hold_ms: Option<u64>,
}

/// The answer to an accepted submission (status 202).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitResponse {
    /// The submission id (a UUID) to poll.
    pub id: String,
}

/// The state of a submitted record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordState {
    /// Waiting in the relayer's queue.
    Queued,
    /// Written to the ledger.
    Written,
    /// Not written (for instance no batch of the required size formed in time).
    Failed,
}

/// The answer to `GET /v1/records/:id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusResponse {
    /// The submission id.
    pub id: String,
    /// The record's state.
    pub state: RecordState,
    /// Number of requests ahead (only when queued).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// Ledger entity key (hex), when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_key: Option<String>,
    /// Batch transaction hash (hex), when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_hash: Option<String>,
    /// Block number (decimal string), when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<String>,
    /// Records in the batch, when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u64>,
    /// Human-readable reason, when failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl StatusResponse {
    /// The status with its queue figures clamped to [`QUEUE_FIGURE_LIMIT`].
    pub fn clamped(mut self) -> Self {
        self.position = self.position.map(|p| p.min(QUEUE_FIGURE_LIMIT));
        self.batch_size = self.batch_size.map(|b| b.min(QUEUE_FIGURE_LIMIT));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_info_numbers_are_clamped() {
        let text = format!(
            r#"{{"address":"0x0000000000000000000000000000000000000001","version":"privsvc-relayer/1",
            "chainId":1,"minBatch":{m},"maxWaitMs":{m},"minIntervalBlocks":{m},"tokensRequired":false,
            "maxMinAnonymity":{m},"maxHoldMs":{m}}}"#,
            m = u64::MAX
        );
        let info: InfoResponse = serde_json::from_str::<InfoResponse>(&text)
            .unwrap()
            .clamped();
        assert_eq!(info.max_wait_ms, 600_000);
        assert_eq!(info.min_interval_blocks, 1_000);
        assert_eq!(info.min_batch, 1_000_000);
        assert_eq!(info.max_min_anonymity, 1_000_000);
        assert_eq!(info.max_hold_ms, 86_400_000);
        let st = StatusResponse {
            id: "a".into(),
            state: RecordState::Queued,
            position: Some(u64::MAX),
            entity_key: None,
            tx_hash: None,
            block: None,
            batch_size: Some(u64::MAX),
            error: None,
        }
        .clamped();
        assert_eq!(
            (st.position, st.batch_size),
            (Some(1_000_000), Some(1_000_000))
        );
    }

    #[test]
    fn info_uses_spec_field_names() {
        let text = r#"{"address":"0x0000000000000000000000000000000000000001","version":"privsvc-relayer/1",
            "chainId":7738577,"minBatch":2,"maxWaitMs":1000,"minIntervalBlocks":1,"tokensRequired":false,
            "maxMinAnonymity":10,"maxHoldMs":600000}"#;
        let info: InfoResponse = serde_json::from_str(text).unwrap();
        assert_eq!(info.chain_id, 7738577);
        assert_eq!(info.max_hold_ms, 600000);
        assert!(info.issuer.is_none() && info.ohttp_key.is_none());
        let back = serde_json::to_value(&info).unwrap();
        assert!(back.get("issuerUrl").is_none());
        assert_eq!(back["minIntervalBlocks"], 1);
    }

    #[test]
    fn status_round_trip() {
        let text = r#"{"id":"a","state":"written","entityKey":"0x01","txHash":"0x02","block":"17","batchSize":3}"#;
        let st: StatusResponse = serde_json::from_str(text).unwrap();
        assert_eq!(st.state, RecordState::Written);
        assert_eq!(st.batch_size, Some(3));
        assert_eq!(serde_json::to_value(&st).unwrap()["entityKey"], "0x01");
        let q: StatusResponse =
            serde_json::from_str(r#"{"id":"b","state":"queued","position":4}"#).unwrap();
        assert_eq!(q.position, Some(4));
    }

    #[test]
    fn submit_omits_absent_options() {
        let req = SubmitRequest {
            app: "a".into(),
            owner: "0x00".into(),
            envelope: "{}".into(),
            attributes: serde_json::Map::new(),
            exp_seconds: 3600,
            token: None,
            min_anonymity: Some(3),
            max_hold_ms: None,
        };
        let v = serde_json::to_value(&req).unwrap();
        assert_eq!(v["expSeconds"], 3600);
        assert_eq!(v["minAnonymity"], 3);
        assert!(v.get("token").is_none() && v.get("maxHoldMs").is_none());
    }
}
