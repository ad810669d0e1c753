//! Fuzz the rendering of revert data (custom errors, Error(string), Panic(uint256)).
//! See `privsvc_ledger::fuzz_entry::revert` for the invariants checked on accepted inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_ledger::fuzz_entry::revert(data);
});
