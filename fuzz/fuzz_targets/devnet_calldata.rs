//! Fuzz the devnet's decoding of calldata sent to the Arkiv address.
//! See `privsvc_devnet::fuzz_entry::calldata` for the invariants checked on accepted inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_devnet::fuzz_entry::calldata(data);
});
