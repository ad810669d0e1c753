//! privsvc-attributes (under construction).
#![forbid(unsafe_code)]
