//! Integration tests of privsvc-ohttp: one binary, one module per former test file.

#[path = "../common/mod.rs"]
mod common;
#[path = "../reference/mod.rs"]
mod reference;
mod adversary;
mod adversary_identity;
mod endpoint;
mod fuzz_seeds;
mod gateway;
mod heartbeat;
mod padding_vectors;
mod real_relayer;
mod relay;
mod rfc_vectors;
mod transports;
