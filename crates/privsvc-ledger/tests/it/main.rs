//! Integration tests of privsvc-ledger: one binary, one module per former test file.

mod abi_props;
mod arkiv_conformance;
mod devnet_smoke;
mod fuzz_seeds;
mod node_errors;
mod query_batch;
