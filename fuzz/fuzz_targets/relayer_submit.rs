//! Fuzz the relayer's validation of a POST /v1/records body.
//! See `privsvc_relayer::testing::fuzz_entry::submit_body` for the invariants checked on accepted inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_relayer::testing::fuzz_entry::submit_body(data);
});
