//! The one place where a node's JSON-RPC error becomes a [`LedgerError`]: whatever a caller
//! decides on gets its own variant here, from the node's code, message and data, so that no
//! caller ever reads a node's wording.
//!
//! - Revert data in `error.data` (a hex string, or an object with a `data` hex string: geth,
//!   reth and the Arkiv node, the devnet) is [`LedgerError::Reverted`] with the decoded error.
//! - A transaction refused by the pool or by the node's checks (asked of
//!   `eth_sendRawTransaction` or `eth_estimateGas` only: a query's error message may quote the
//!   query, whose text is anyone's) is read by its message, lower-cased, as geth, reth (the
//!   Arkiv node) and the devnet word it: "nonce too low" ([`LedgerError::NonceTooLow`]);
//!   "exceeds block gas limit" (geth's and reth's pool), "gas limit reached" (geth's block) and
//!   "intrinsic gas too high" (reth: the transaction's gas is above the block's)
//!   ([`LedgerError::ExceedsBlockGasLimit`]); "replacement transaction underpriced" and
//!   "replacement fee too low" ([`LedgerError::ReplacementUnderpriced`]); "already known",
//!   "known transaction" and "already imported" ([`LedgerError::AlreadyKnown`]). The codes do
//!   not tell these apart: geth answers -32000 for all of them, reth -32000 or -32003, and the
//!   Arkiv node's -32003 is also a query's literal error.
//! - Everything else is [`LedgerError::Rpc`] with the node's code, message and data.

use serde_json::Value;

use crate::codec::parse_hex;
use crate::error::{LedgerError, Revert, RpcError};

/// Methods that submit or size a transaction: their refusals are read by the message.
const TRANSACTION_METHODS: [&str; 2] = ["eth_sendRawTransaction", "eth_estimateGas"];

/// The [`LedgerError`] of the JSON-RPC error object `error` answered to `method`.
pub(crate) fn from_error_object(method: &str, error: &Value) -> LedgerError {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let data = error.get("data").filter(|d| !d.is_null()).cloned();
    classify(method, code, message, data)
}

/// The [`LedgerError`] of a node's error `code`, `message` and `data` answered to `method`.
pub(crate) fn classify(
    method: &str,
    code: i64,
    message: String,
    data: Option<Value>,
) -> LedgerError {
    if let Some(bytes) = data.as_ref().and_then(revert_data) {
        return LedgerError::Reverted(Revert::from_data(bytes));
    }
    let node = RpcError {
        code,
        message,
        data,
    };
    if TRANSACTION_METHODS.contains(&method) {
        return refusal(node);
    }
    LedgerError::Rpc(node)
}

/// The transaction refusal the node's message names, as geth, reth and the devnet word them;
/// [`LedgerError::Rpc`] when it names none.
fn refusal(node: RpcError) -> LedgerError {
    let m = node.message.to_ascii_lowercase();
    let has = |phrases: &[&str]| phrases.iter().any(|p| m.contains(p));
    if has(&["already known", "known transaction", "already imported"]) {
        LedgerError::AlreadyKnown
    } else if has(&["nonce too low"]) {
        LedgerError::NonceTooLow(node)
    } else if has(&[
        "exceeds block gas limit",
        "gas limit reached",
        "intrinsic gas too high",
    ]) {
        LedgerError::ExceedsBlockGasLimit(node)
    } else if has(&[
        "replacement transaction underpriced",
        "replacement fee too low",
    ]) {
        LedgerError::ReplacementUnderpriced(node)
    } else {
        LedgerError::Rpc(node)
    }
}

/// The revert data of an error's `data`: a hex string, or an object with a `data` hex string.
fn revert_data(data: &Value) -> Option<Vec<u8>> {
    let s = match data {
        Value::String(s) => s.as_str(),
        Value::Object(o) => o.get("data").and_then(Value::as_str)?,
        _ => return None,
    };
    parse_hex(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sent(code: i64, message: &str) -> LedgerError {
        classify("eth_sendRawTransaction", code, message.into(), None)
    }

    #[test]
    fn every_known_wording_of_a_refused_transaction_has_its_variant() {
        let nonce = [
            // the devnet, reth (the Arkiv node)
            (-32000, "nonce too low: next nonce 7, tx nonce 5"),
            (-32003, "nonce too low: next nonce 7, tx nonce 5"),
            // geth before and after 1.11
            (-32000, "nonce too low"),
            (
                -32000,
                "nonce too low: address 0x71562b71999873DB5b286dF957af199Ec94617F7, tx: 5 state: 7",
            ),
            (-32000, "Nonce too low"),
        ];
        for (code, m) in nonce {
            match sent(code, m) {
                LedgerError::NonceTooLow(node) => {
                    assert_eq!(
                        (node.code, node.message.as_str()),
                        (code, m),
                        "the node's words"
                    )
                }
                other => panic!("{m}: {other:?}"),
            }
        }
        let gas = [
            // the devnet, geth's and reth's pool
            "exceeds block gas limit",
            // geth's block
            "gas limit reached",
            // reth: a transaction's gas above the block's
            "intrinsic gas too high",
        ];
        for m in gas {
            assert!(
                matches!(sent(-32000, m), LedgerError::ExceedsBlockGasLimit { .. }),
                "{m}"
            );
        }
        for m in [
            "replacement transaction underpriced",
            "replacement fee too low",
        ] {
            assert!(
                matches!(sent(-32000, m), LedgerError::ReplacementUnderpriced { .. }),
                "{m}"
            );
        }
        for m in [
            "already known",
            "known transaction: 0xabc",
            "Transaction already imported",
        ] {
            assert!(matches!(sent(-32000, m), LedgerError::AlreadyKnown), "{m}");
        }
        // Refusals callers do not decide on stay the node's error, with its words.
        for m in [
            "intrinsic gas too low: have 21000, want 53000",
            "insufficient funds for gas * price + value",
            "transaction underpriced",
        ] {
            match sent(-32000, m) {
                LedgerError::Rpc(node) => {
                    assert_eq!((node.code, node.message.as_str()), (-32000, m))
                }
                other => panic!("{m}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_query_error_quoting_refusal_words_stays_a_query_error() {
        // The Arkiv node's -32003 is a literal error of a query, whose text is anyone's.
        let e = classify(
            "arkiv_query",
            -32003,
            "invalid literal in str('nonce too low')".into(),
            Some(json!({"position": 4, "message": "invalid literal"})),
        );
        assert!(
            matches!(e, LedgerError::Rpc(RpcError { code: -32003, .. })),
            "{e:?}"
        );
    }

    #[test]
    fn revert_data_is_decoded_whether_a_hex_string_or_an_object() {
        let data = "0x66a89f2a1111111111111111111111111111111111111111111111111111111111111111";
        for (method, d) in [
            ("eth_call", json!(data)),
            ("eth_estimateGas", json!({ "data": data })),
        ] {
            match classify(method, 3, "execution reverted".into(), Some(d)) {
                LedgerError::Reverted(r) => {
                    assert!(r.reason().starts_with("EntityNotFound(0x1111"), "{r}");
                    assert_eq!(r.selector(), Some([0x66, 0xa8, 0x9f, 0x2a]));
                }
                other => panic!("{other:?}"),
            }
        }
        let plain = classify("eth_call", -32601, "method not found".into(), None);
        assert!(matches!(
            plain,
            LedgerError::Rpc(RpcError { code: -32601, .. })
        ));
    }
}
