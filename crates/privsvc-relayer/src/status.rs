//! The answer to `GET /v1/records/{id}` (docs/PROTOCOL.md §9.4): one shape and one length for
//! every state.
//!
//! Every answer, whatever the record's state (queued, written, failed), an unknown id (404) or
//! a store error (500), is built by [`answer`]: the same JSON object with every field in the
//! same order (`null` where the state has no value), followed by spaces up to exactly
//! [`STATUS_BODY_BYTES`] bytes. Whoever sees only the length of an answer (an onlooker on a TLS
//! link) learns nothing of the state; inside OHTTP every status answer is in the smallest
//! response class. No queue figure is given: how many records wait ahead of one is not public.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::batcher::Unrecorded;
use crate::store::{Store, StoreError, StoredState};

/// Where a record's status is read: the records the batcher knows are on the ledger but the
/// store has not recorded yet (never "queued"), else the store (one indexed read per id,
/// whatever its state and however many records are queued; never the in-memory queue).
#[derive(Clone)]
pub(crate) struct Statuses {
    /// The durable queue.
    pub(crate) store: Arc<Store>,
    /// What the batcher publishes of the records on the ledger the store has not recorded.
    pub(crate) unrecorded: watch::Receiver<Unrecorded>,
}

impl Statuses {
    /// The status and body answering `GET /v1/records/{id}`.
    pub(crate) fn answer(&self, id: &str) -> (StatusCode, Vec<u8>) {
        let unrecorded = self.unrecorded.borrow().get(id).cloned();
        let state = match unrecorded {
            Some(w) => Ok(Some(StoredState::Written(w))),
            None => self.store.state(id),
        };
        answer(id, state)
    }
}

/// Length of every status answer's body, in bytes (JSON followed by spaces).
pub const STATUS_BODY_BYTES: usize = 512;
/// Longest id echoed in an answer; a longer id (never a record's) is answered with `id: null`.
const MAX_ECHOED_ID_BYTES: usize = 64;

/// The id as echoed: record ids are UUIDs; anything that is not short and made of letters,
/// digits and `-` is not echoed (its JSON escape could be longer than the whole answer).
fn echoed_id(id: &str) -> Value {
    let plain = id.len() <= MAX_ECHOED_ID_BYTES
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if plain {
        Value::String(id.to_string())
    } else {
        Value::Null
    }
}

/// The fields of one answer, in their one order.
fn fields(id: &str, state: Option<&str>, written: Option<&crate::store::WrittenInfo>) -> Value {
    json!({
        "id": echoed_id(id),
        "state": state,
        "entityKey": written.map(|w| w.entity_key.to_string()),
        "txHash": written.map(|w| w.tx_hash.to_string()),
        "block": written.map(|w| w.block.to_string()),
        "batchSize": written.map(|w| w.batch_size),
        "error": Value::Null,
    })
}

/// Bytes `c` takes inside a JSON string (escapes included).
fn json_len(c: char) -> usize {
    serde_json::to_string(&c.to_string()).map_or(6, |s| s.len() - 2)
}

/// `value` with its `error` set to `message` (cut on a character boundary, with an ellipsis,
/// when the JSON would not fit), padded with spaces to exactly [`STATUS_BODY_BYTES`].
fn padded(mut value: Value, message: Option<&str>) -> Vec<u8> {
    value["error"] = Value::String(String::new());
    // The text with an empty message: `message` may take the rest (its quotes are counted).
    let room = STATUS_BODY_BYTES.saturating_sub(value.to_string().len());
    value["error"] = match message {
        None => Value::Null,
        Some(m) if m.chars().map(json_len).sum::<usize>() <= room => Value::String(m.into()),
        Some(m) => {
            let ellipsis = json_len('…');
            let mut used = 0;
            let mut cut: String = m
                .chars()
                .take_while(|&c| {
                    used += json_len(c);
                    used + ellipsis <= room
                })
                .collect();
            cut.push('…');
            Value::String(cut)
        }
    };
    let mut text = value.to_string().into_bytes();
    text.resize(STATUS_BODY_BYTES, b' ');
    text
}

/// The status and body answering `GET /v1/records/{id}` from the store's view of `id`.
pub(crate) fn answer(
    id: &str,
    state: Result<Option<StoredState>, StoreError>,
) -> (StatusCode, Vec<u8>) {
    match state {
        Ok(Some(StoredState::Queued)) | Ok(Some(StoredState::Sending)) => (
            StatusCode::OK,
            padded(fields(id, Some("queued"), None), None),
        ),
        Ok(Some(StoredState::Written(w))) => (
            StatusCode::OK,
            padded(fields(id, Some("written"), Some(&w)), None),
        ),
        Ok(Some(StoredState::Failed(e))) => (
            StatusCode::OK,
            padded(fields(id, Some("failed"), None), Some(&e)),
        ),
        Ok(None) => (
            StatusCode::NOT_FOUND,
            padded(fields(id, None, None), Some("unknown record id")),
        ),
        // A damaged record: the answer names the record and the field (the log does not).
        Err(e @ StoreError::Damaged { .. }) => {
            tracing::error!("cannot read a record's status (damaged store)");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                padded(fields(id, None, None), Some(&e.to_string())),
            )
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot read a record's state");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                padded(
                    fields(id, None, None),
                    Some("the relayer cannot read its queue right now"),
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::WrittenInfo;
    use alloy_primitives::B256;

    const ID: &str = "6f1c1f2e-8f8a-4c1e-9d43-0c5d1b9e7a21";

    fn keys(body: &[u8]) -> Vec<String> {
        let v: Value = serde_json::from_slice(body).expect("JSON with trailing spaces");
        v.as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn every_state_has_the_same_fields_and_length() {
        let written = WrittenInfo {
            entity_key: B256::repeat_byte(0xab),
            tx_hash: B256::repeat_byte(0xcd),
            block: u64::MAX,
            batch_size: u64::MAX,
        };
        let answers = [
            answer(ID, Ok(Some(StoredState::Queued))),
            answer(ID, Ok(Some(StoredState::Sending))),
            answer(ID, Ok(Some(StoredState::Written(written)))),
            answer(ID, Ok(Some(StoredState::Failed("no batch formed".into())))),
            answer(ID, Ok(Some(StoredState::Failed("\u{1}\"é".repeat(400))))),
            answer(ID, Ok(None)),
            answer(&"x".repeat(10_000), Ok(None)),
            answer("\"\\\u{1}", Ok(None)),
            answer(ID, Err(StoreError::Closed)),
        ];
        let first = keys(&answers[0].1);
        assert_eq!(
            first,
            [
                "id",
                "state",
                "entityKey",
                "txHash",
                "block",
                "batchSize",
                "error"
            ]
        );
        for (status, body) in &answers {
            assert_eq!(body.len(), STATUS_BODY_BYTES, "{status}");
            assert_eq!(keys(body), first, "{status}");
        }
        let v: Value = serde_json::from_slice(&answers[0].1).unwrap();
        assert_eq!(v["state"], "queued");
        assert!(v.get("position").is_none());
        let v: Value = serde_json::from_slice(&answers[2].1).unwrap();
        assert_eq!(
            (v["state"].as_str(), v["batchSize"].as_u64()),
            (Some("written"), Some(u64::MAX))
        );
        let v: Value = serde_json::from_slice(&answers[4].1).unwrap();
        let cut = v["error"].as_str().unwrap();
        assert!(cut.ends_with('…') && cut.chars().count() > 30, "{cut}");
        let v: Value = serde_json::from_slice(&answers[5].1).unwrap();
        assert_eq!(
            (answers[5].0, v["id"].as_str()),
            (StatusCode::NOT_FOUND, Some(ID))
        );
        let v: Value = serde_json::from_slice(&answers[6].1).unwrap();
        assert!(v["id"].is_null());
        assert_eq!(answers[8].0, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
