//! privsvc-client (under construction).
#![forbid(unsafe_code)]
