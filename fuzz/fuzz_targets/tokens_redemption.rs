//! Fuzz `privsvc_tokens::fuzz_entry::token_redemption`: any input is accepted or refused without
//! panicking, and accepted inputs keep the invariants the entry function checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_tokens::fuzz_entry::token_redemption(data);
});
