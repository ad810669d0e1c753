//! Several `arkiv_query` pages in one JSON-RPC batch (one HTTP request), as
//! [`crate::LedgerReader::query_many`] asks for them: the request body, and the pages of the
//! answer matched to the queries by id.

use serde_json::{json, Value};

use super::{fast, query_page_from_json, result_of};
use crate::answer::AnswerError;
use crate::entity::{PageQuery, QueryPage};
use crate::error::{ChannelError, LedgerError};
use crate::wire;

/// The JSON-RPC batch body asking for `queries` as `arkiv_query` calls with the ids
/// `first_id`, `first_id + 1`, ... in order. The key is always selected (as
/// [`super::RpcLedger`] asks: every entity is identified by it).
pub fn query_batch_body(queries: &[PageQuery], first_id: u64) -> String {
    let calls: Vec<Value> = queries
        .iter()
        .zip(first_id..)
        .map(|(q, id)| {
            let mut options = q.options.clone();
            options.select.key = true;
            json!({
                "jsonrpc": "2.0",
                "id": id,
                "method": "arkiv_query",
                "params": [q.expression, wire::query_options_to_json(&options)],
            })
        })
        .collect();
    Value::Array(calls).to_string()
}

/// The pages of `body`, the answer to [`query_batch_body`] of `count` queries from `first_id`,
/// in the order asked (a node may answer a batch in any order: answers are matched by id).
///
/// `Ok(None)` when the answer is not a batch answer at all (a node or proxy that does not take
/// batches answers with one error object): ask page by page instead. A JSON-RPC error in any
/// answer is [`LedgerError::Rpc`]; a batch answer with missing, extra or repeated ids is
/// [`LedgerError::Decode`].
pub fn decode_query_batch_answer(
    body: &[u8],
    first_id: u64,
    count: usize,
) -> Result<Option<Vec<QueryPage>>, LedgerError> {
    let is_array = body
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'[');
    if !is_array {
        return Ok(None);
    }
    if let Some(pages) = fast::query_pages(body, first_id, count) {
        return Ok(Some(pages));
    }
    let answers: Vec<Value> = serde_json::from_slice(body)
        .map_err(|e| LedgerError::Transport(ChannelError::NotJsonRpc(e)))?;
    let mut results: Vec<Option<Value>> = vec![None; count];
    for answer in answers {
        let slot = answer
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|id| id.checked_sub(first_id))
            .and_then(|slot| usize::try_from(slot).ok())
            .filter(|slot| *slot < count)
            .ok_or_else(|| LedgerError::Decode(AnswerError::UnknownBatchId))?;
        if results[slot].is_some() {
            return Err(AnswerError::RepeatedBatchId.into());
        }
        results[slot] = Some(result_of("arkiv_query", answer)?);
    }
    results
        .into_iter()
        .map(|r| {
            let r = r.ok_or_else(|| LedgerError::Decode(AnswerError::MissingBatchAnswer))?;
            query_page_from_json(&r)
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entity::QueryOptions;

    fn page_json(key_byte: u8, cursor: Option<&str>) -> Value {
        let mut result = json!({
            "data": [{"key": format!("0x{}", hex::encode([key_byte; 32])), "createdAt": "0x5"}],
            "blockNumber": "0x9",
        });
        if let Some(c) = cursor {
            result["cursor"] = json!(c);
        }
        result
    }

    #[test]
    fn the_body_asks_each_query_with_its_id_and_the_key() {
        let queries = vec![
            PageQuery {
                expression: "project = str('a')".into(),
                options: QueryOptions::default(),
            },
            PageQuery {
                expression: "project = str('b')".into(),
                options: QueryOptions {
                    cursor: Some("c1".into()),
                    ..QueryOptions::default()
                },
            },
        ];
        let body: Value = serde_json::from_str(&query_batch_body(&queries, 7)).unwrap();
        let calls = body.as_array().unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0]["id"], 7);
        assert_eq!(calls[1]["id"], 8);
        assert_eq!(calls[1]["method"], "arkiv_query");
        assert_eq!(calls[1]["params"][0], "project = str('b')");
        assert_eq!(calls[1]["params"][1]["cursor"], "c1");
        assert_eq!(calls[0]["params"][1]["select"]["key"], true);
    }

    #[test]
    fn answers_in_any_order_come_back_in_the_order_asked() {
        let body = json!([
            {"jsonrpc": "2.0", "id": 11, "result": page_json(2, None)},
            {"jsonrpc": "2.0", "id": 10, "result": page_json(1, Some("next"))},
        ])
        .to_string();
        let pages = decode_query_batch_answer(body.as_bytes(), 10, 2)
            .unwrap()
            .unwrap();
        assert_eq!(pages[0].entities[0].key.0, [1; 32]);
        assert_eq!(pages[0].cursor.as_deref(), Some("next"));
        assert_eq!(pages[1].entities[0].key.0, [2; 32]);
        assert_eq!(pages[1].cursor, None);
    }

    #[test]
    fn an_error_in_one_answer_fails_the_batch() {
        let body = json!([
            {"jsonrpc": "2.0", "id": 1, "result": page_json(1, None)},
            {"jsonrpc": "2.0", "id": 2, "error": {"code": -32006, "message": "block unavailable"}},
        ])
        .to_string();
        match decode_query_batch_answer(body.as_bytes(), 1, 2) {
            Err(LedgerError::Rpc(node)) => assert_eq!(node.code, -32006),
            other => panic!("expected the RPC error, got {other:?}"),
        }
    }

    #[test]
    fn missing_repeated_and_unknown_ids_are_refused() {
        let one = |id: u64| json!({"jsonrpc": "2.0", "id": id, "result": page_json(1, None)});
        let which = |e: &AnswerError| match e {
            AnswerError::MissingBatchAnswer => "missing",
            AnswerError::RepeatedBatchId => "repeated",
            AnswerError::UnknownBatchId => "unknown",
            _ => "another error",
        };
        for (answers, count, expected) in [
            (json!([one(1)]), 2, "missing"),
            (json!([one(1), one(1)]), 2, "repeated"),
            (json!([one(1), one(5)]), 2, "unknown"),
        ] {
            let body = answers.to_string();
            match decode_query_batch_answer(body.as_bytes(), 1, count) {
                Err(LedgerError::Decode(e)) => assert_eq!(which(&e), expected, "{body}: {e:?}"),
                other => panic!("{body} was accepted: {other:?}"),
            }
        }
    }

    #[test]
    fn a_single_object_answer_means_ask_page_by_page() {
        let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "batches are not supported"}}).to_string();
        assert!(decode_query_batch_answer(body.as_bytes(), 1, 2)
            .unwrap()
            .is_none());
    }
}
