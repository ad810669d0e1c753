//! Fuzz the batched tag opener against `aes-gcm-siv`: on sealed, tampered and random tags they
//! must agree (see `privsvc_vault::fuzz_entry`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_vault::fuzz_entry::open_tags_target(data);
});
