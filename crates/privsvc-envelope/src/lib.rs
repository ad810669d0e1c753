//! privsvc-envelope (under construction).
#![forbid(unsafe_code)]
