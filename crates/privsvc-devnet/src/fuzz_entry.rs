//! Entry points shared by the devnet's fuzz targets (`fuzz/fuzz_targets/devnet_*.rs`) and their
//! stable seed replay (`tests/fuzz_seeds.rs`).
//!
//! Each takes bytes as a JSON-RPC client would send them, returns whether they were accepted,
//! and panics only when an invariant of an accepted input is broken.

use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{keccak256, U256};

use crate::chain::{decode_raw, Chain, Genesis, Params};
use crate::decode::{decode_call, Call, NodeOp, MAX_CELLS, MAX_PAYLOAD_BYTES};
use crate::query::parser::{MAX_PREDICATES, MAX_QUERY_BYTES};
use crate::query::{lexer::tokenize, parse};
use crate::types::Account;

/// A query text (`arkiv_query`'s first parameter; non-UTF-8 is refused as serde would).
/// Invariants: every error position lies within the text; an accepted query has at most
/// [`MAX_PREDICATES`] predicates, and its canonical text (when it fits the size limit) parses
/// to the same expression and renders to the same text again.
pub fn query(data: &[u8]) -> bool {
    let Ok(src) = std::str::from_utf8(data) else {
        return false;
    };
    if let Err(e) = tokenize(src) {
        assert!(e.position.is_none_or(|p| p <= src.len()), "lexer position");
    }
    let expr = match parse(src) {
        Ok(e) => e,
        Err(e) => {
            assert!(
                e.position.is_none_or(|p| p <= src.len()),
                "error position {:?} beyond the text ({} bytes)",
                e.position,
                src.len()
            );
            return false;
        }
    };
    assert!(expr.predicate_count() <= MAX_PREDICATES);
    let canonical = expr.to_string();
    if canonical.len() <= MAX_QUERY_BYTES {
        let again = parse(&canonical).expect("the canonical text of a query must parse");
        assert_eq!(again, expr, "canonical text parsed to another expression");
        assert_eq!(again.to_string(), canonical, "canonical text is not stable");
    }
    true
}

/// Balance given to the sender of a fuzzed transaction (10^21 wei).
const FUZZ_BALANCE: u128 = 1_000_000_000_000_000_000_000;

/// A raw signed transaction (`eth_sendRawTransaction`), decoded as the node does, then
/// submitted to a fresh in-memory chain (chain id 1337) on which its sender, whoever the
/// signature recovers to, holds 10^21 wei, and mined. Invariants of an accepted (decoded)
/// transaction: its hash is keccak256 of exactly the bytes received (so the hash the node
/// reports is the one the sender computed), and they are the canonical EIP-2718 encoding of what
/// was decoded; submitting and mining never panic; a transaction the pool took with the
/// sender's next nonce is mined with a receipt, and the sender never ends up richer.
pub fn raw_transaction(data: &[u8]) -> bool {
    let Ok(rec) = decode_raw(data) else {
        return false;
    };
    assert_eq!(
        rec.hash,
        keccak256(data),
        "hash is not keccak256 of the raw bytes"
    );
    let mut buf = data;
    let env =
        <alloy_consensus::TxEnvelope as alloy_eips::eip2718::Decodable2718>::decode_2718(&mut buf)
            .expect("decoded once already");
    assert_eq!(
        env.encoded_2718(),
        data,
        "accepted transaction bytes are not canonical"
    );
    assert!(matches!(rec.tx_type, 0 | 2));

    let funded = Account {
        balance: U256::from(FUZZ_BALANCE),
        ..Account::default()
    };
    let genesis = Genesis {
        number: 0,
        timestamp: 1_700_000_000,
        accounts: vec![(rec.from, funded)],
        entities: Vec::new(),
    };
    let params = Params {
        chain_id: 1337,
        gas_limit: 30_000_000,
        base_fee: 7,
    };
    let mut chain = Chain::open(params, genesis, None).expect("an in-memory chain opens");
    if chain.submit_raw(data).is_ok() {
        chain
            .mine(1_700_000_012)
            .expect("mining an in-memory chain works");
        if rec.nonce == 0 {
            let mined = chain.tx(&rec.hash).expect("a pooled transaction is known");
            assert!(
                mined.receipt.is_some(),
                "the next-nonce transaction was not mined"
            );
        }
        assert!(
            chain.account(&rec.from).balance <= U256::from(FUZZ_BALANCE),
            "the sender ended up richer"
        );
    }
    true
}

/// Calldata sent to the Arkiv address (`eth_call`, `eth_estimateGas`, a transaction's input),
/// decoded and validated as the node does. Invariants of accepted calldata: a batch is never
/// empty, no operation holds more than [`MAX_CELLS`] cells, and payloads stay within
/// [`MAX_PAYLOAD_BYTES`].
pub fn calldata(data: &[u8]) -> bool {
    let Ok(call) = decode_call(data) else {
        return false;
    };
    if let Call::Execute(ops) = call {
        assert!(!ops.is_empty(), "an empty batch was accepted");
        for op in &ops {
            match op {
                NodeOp::Create { attrs, payload, .. } => {
                    assert!(attrs.len() <= MAX_CELLS);
                    assert!(payload.len() <= MAX_PAYLOAD_BYTES);
                }
                NodeOp::Patch {
                    set,
                    unset,
                    payload,
                    ..
                } => {
                    assert!(set.len() + unset.len() <= MAX_CELLS);
                    assert!(payload
                        .as_ref()
                        .is_none_or(|p| p.len() <= MAX_PAYLOAD_BYTES));
                }
                _ => {}
            }
        }
    }
    true
}
