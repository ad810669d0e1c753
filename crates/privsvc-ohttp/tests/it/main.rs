//! Integration tests of privsvc-ohttp: one binary, one module per former test file.

mod adversary;
mod adversary_identity;
#[path = "../common/mod.rs"]
mod common;
mod cover;
mod endpoint;
mod fuzz_seeds;
mod gateway;
mod heartbeat;
mod padding_vectors;
mod real_relayer;
#[path = "../reference/mod.rs"]
mod reference;
mod relay;
mod rfc_vectors;
mod rounds;
mod transports;
