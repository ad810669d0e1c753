//! Fuzz `parse_envelope`: any input must be accepted or refused without panicking, and every
//! accepted input must seal back to the same bytes (see `privsvc_envelope::fuzz_entry`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_envelope::fuzz_entry::parse_envelope_target(data);
});
