//! Integration tests of privsvc-relayer: one binary, one module per former test file.

#[path = "../common/mod.rs"]
mod common;
mod adversary;
mod adversary_issuer;
mod adversary_measure;
mod adversary_window;
mod faults;
mod fuzz_seeds;
mod planner_model;
mod relayer;
