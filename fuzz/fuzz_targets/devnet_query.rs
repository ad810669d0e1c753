//! Fuzz the devnet's query lexer and parser (arkiv_query expressions).
//! See `privsvc_devnet::fuzz_entry::query` for the invariants checked on accepted inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_devnet::fuzz_entry::query(data);
});
