//! Fuzz the devnet's JSON-RPC request handling (envelope, batches, `arkiv_query` options and
//! cursors). See `privsvc_devnet::fuzz_entry::rpc_request` for the invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_devnet::fuzz_entry::rpc_request(data);
});
