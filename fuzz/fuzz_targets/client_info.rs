//! Fuzz the client's parsing of a GET /v1/info answer.
//! See `privsvc_client::fuzz_entry::info` for the invariants checked on accepted inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_client::fuzz_entry::info(data);
});
