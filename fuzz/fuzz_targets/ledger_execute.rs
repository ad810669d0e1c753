//! Fuzz the node-side decoding of execute() calldata.
//! See `privsvc_ledger::fuzz_entry::execute` for the invariants checked on accepted inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_ledger::fuzz_entry::execute(data);
});
