//! Integration tests of privsvc-vault: one binary, one module per former test file.

mod conformance;
mod envelope;
mod fuzz_seeds;
mod vault;
