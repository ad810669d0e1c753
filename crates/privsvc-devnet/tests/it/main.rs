//! Integration tests of privsvc-devnet: one binary, one module per former test file.

mod arkiv_conformance;
mod common;
mod cors;
mod execution;
mod fuzz_seeds;
mod ledger_stack;
mod live_cheesecake;
mod operations;
