//! Fuzz the decoding of a JSON-RPC answer to arkiv_query (entities, block, cursor).
//! See `privsvc_ledger::fuzz_entry::query_page` for the invariants checked on accepted inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_ledger::fuzz_entry::query_page(data);
});
