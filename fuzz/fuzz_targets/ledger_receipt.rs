//! Fuzz the decoding of a JSON-RPC answer to eth_getTransactionReceipt (receipt and logs).
//! See `privsvc_ledger::fuzz_entry::receipt` for the invariants checked on accepted inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_ledger::fuzz_entry::receipt(data);
});
