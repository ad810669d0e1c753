//! Fuzz the client's parsing of a heartbeat entity from arkiv_query.
//! See `privsvc_client::fuzz_entry::heartbeat` for the invariants checked on accepted inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_client::fuzz_entry::heartbeat(data);
});
