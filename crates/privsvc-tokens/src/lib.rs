//! privsvc-tokens (under construction).
#![forbid(unsafe_code)]
