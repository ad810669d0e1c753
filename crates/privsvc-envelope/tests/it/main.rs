//! Integration tests of privsvc-envelope: one binary, one module per former test file.

mod conformance;
mod envelope;
mod fuzz_seeds;
