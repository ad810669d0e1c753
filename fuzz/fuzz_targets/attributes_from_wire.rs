//! Fuzz the attribute wire parser: any input must be accepted or refused without panicking,
//! and every accepted input must round-trip through `to_wire` and the canonical form (see
//! `privsvc_attributes::fuzz_entry`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_attributes::fuzz_entry::attributes_from_wire(data);
});
