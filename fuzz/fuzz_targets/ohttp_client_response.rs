//! Fuzz `privsvc_ohttp::fuzz_entry::client_response`: the client's decapsulation of an
//! encapsulated response and the padded Binary HTTP decoding behind it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = privsvc_ohttp::fuzz_entry::client_response(data);
});
