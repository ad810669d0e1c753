//! privsvc-devnet (under construction).
#![forbid(unsafe_code)]
