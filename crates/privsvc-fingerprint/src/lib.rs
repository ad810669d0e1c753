//! privsvc-fingerprint (under construction).
#![forbid(unsafe_code)]
