//! Integration tests of privsvc-relayer: one binary, one module per former test file.

mod adversary;
mod adversary_issuer;
mod adversary_measure;
mod adversary_window;
#[path = "../common/mod.rs"]
mod common;
mod cover;
mod faults;
mod fuzz_seeds;
mod machine;
mod planner_model;
mod relayer;
