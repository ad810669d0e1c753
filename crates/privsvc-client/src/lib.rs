//! The privsvc client library: write records through relayers without revealing who wrote them,
//! find and verify one's own records, and prove ownership of them.
//!
//! Start with [`PrivateClient::builder`]; the free functions ([`verify_record`], [`list_app`],
//! [`fetch_batches`], [`discover_relayers`], [`sign_ownership_proof`],
//! [`verify_ownership_proof`]) work without a client.
#![forbid(unsafe_code)]

mod cache;
mod checks;
mod client;
mod create;
pub mod discover;
mod entities;
mod error;
pub mod options;
pub mod proof;
pub mod protocol;
pub mod read;
pub mod record;
pub mod relayer_api;
mod tokens;
mod transport;
pub mod verify;

pub use client::PrivateClient;
pub use discover::{discover_relayers, heartbeat_relayers, LiveHeartbeat};
pub use entities::{EntitiesQuery, ProveParams, ScanStats};
pub use error::PrivsvcError;
pub use options::{default_inclusion_timeout, ClientBuilder, ClientOptions, Tokens};
pub use privsvc_attributes::{AttrType, AttrValue, Attributes};
pub use privsvc_envelope::Expires;
pub use privsvc_fingerprint::{CheckWarning, WarningCode};
pub use privsvc_tokens::{IssueRequest, IssueResponse};
pub use privsvc_vault::{IsolatedVault, KeyVault, LocalWallet, RecordRef, Vault, Wallet};
pub use proof::{
    proof_signing_hash, proof_typed_data, sign_ownership_proof, verify_ownership_proof,
    OwnershipProof, OwnershipProofBody, ProofExpectation, ProofParams, ProofRejection,
};
pub use protocol::{
    InfoResponse, RecordState, StatusResponse, SubmitRequest, SubmitResponse, TokenRedemption,
    API_VERSION,
};
pub use read::{fetch_batches, list_app, BatchId, Listing};
pub use record::{CreateParams, CreateResult, MyRecord};
pub use relayer_api::RelayerStatus;
pub use transport::default_transport;
pub use verify::{verify_record, RejectReason, VerifiedRecord, VerifyOptions};
