//! Integration tests of privsvc-client: one binary, one module per former test file.

mod adversary;
mod adversary_tokens;
mod adversary_window;
#[path = "../common/mod.rs"]
mod common;
mod failover;
mod fetch;
mod fuzz_seeds;
mod proof;
mod scan_cache;
mod stack;
mod start;
mod transcript;
mod verify_record;
mod wallets;
