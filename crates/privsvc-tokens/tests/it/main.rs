//! Integration tests of privsvc-tokens: one binary, one module per former test file.

mod adversary;
mod fuzz_seeds;
mod issuer;
mod primitives;
mod relayer_pins;
mod stores;
