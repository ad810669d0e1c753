//! privsvc-relayer (under construction).
#![forbid(unsafe_code)]
