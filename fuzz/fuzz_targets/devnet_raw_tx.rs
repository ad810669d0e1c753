//! Fuzz the devnet's eth_sendRawTransaction decoding (EIP-2718 envelope, signer recovery).
//! See `privsvc_devnet::fuzz_entry::raw_transaction` for the invariants checked on accepted inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_devnet::fuzz_entry::raw_transaction(data);
});
