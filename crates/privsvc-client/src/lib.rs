//! The privsvc client library: write records through relayers without revealing who wrote them,
//! find and verify one's own records, and prove ownership of them.
//!
//! Start with [`PrivateClient::builder`]; the free functions ([`verify_record`], [`list_app`],
//! [`fetch_batches`], [`discover_relayers`], [`sign_ownership_proof`],
//! [`verify_ownership_proof`]) work without a client.
//!
//! ```no_run
//! use std::sync::Arc;
//! use privsvc_client::{
//!     verify_ownership_proof, CreateParams, EntitiesQuery, Expires, LocalWallet, PrivateClient,
//!     ProofExpectation, ProveParams,
//! };
//! use privsvc_ledger::{LedgerReader, RpcLedger};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let reader: Arc<dyn LedgerReader> = Arc::new(RpcLedger::new("http://127.0.0.1:8545")?);
//! let client = PrivateClient::builder("notes")
//!     .wallet(Arc::new(LocalWallet::random()))
//!     .reader(reader.clone())
//!     .relayers(["http://127.0.0.1:8787"]) // or leave out to discover relayers from heartbeats
//!     .build()
//!     .await?;
//!
//! let written = client
//!     .create_entity(
//!         CreateParams::new(b"hello".to_vec(), "text/plain", Expires::Days(1))
//!             .attribute("kind", "note")
//!             .encrypt(true),
//!     )
//!     .await?;
//!
//! for record in client.my_entities(&EntitiesQuery::new()).await? {
//!     println!("{} {}", record.entity_key, record.to_text());
//! }
//!
//! let proof = client
//!     .prove_ownership(
//!         written.entity_key,
//!         &ProveParams {
//!             challenge: "nonce from the verifier".into(),
//!             verifier: "shop.example".into(),
//!             ttl_seconds: None,
//!         },
//!     )
//!     .await?;
//! let expect = ProofExpectation {
//!     challenge: "nonce from the verifier",
//!     verifier: "shop.example",
//!     reader: reader.as_ref(),
//!     now: None,
//! };
//! assert!(verify_ownership_proof(&proof, &expect).await.is_ok());
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod cache;
mod checks;
mod client;
mod cover;
mod covers;
mod create;
mod device_seal;
#[cfg(not(target_arch = "wasm32"))]
mod device_store;
mod discover;
mod entities;
mod error;
#[cfg(not(target_arch = "wasm32"))]
#[cfg(feature = "fuzzing")]
pub mod fuzz_entry;
mod options;
#[cfg(not(target_arch = "wasm32"))]
mod private_fs;
mod proof;
mod protocol;
mod read;
mod record;
mod relayer_api;
mod rng;
mod scan;
mod scan_cache;
mod schedule;
mod session;
mod snapshot;
mod tokens;
mod transport;
mod verify;

pub use cache::ScanStats;
pub use client::{PrivateClient, DEFAULT_RPC_URL};
pub use covers::COVER_WINDOW_BLOCKS;
pub use device_seal::{Part, PartSealer, MAGIC};
#[cfg(not(target_arch = "wasm32"))]
pub use device_store::{default_data_dir, DeviceStore, OpenReport, DATA_DIR_ENV};
pub use discover::{
    bind_issuers, contact_relayer, discover_relayers, discover_relayers_pinned, heartbeat_relayers,
    LiveHeartbeat, RelayerRef,
};
pub use entities::{EntitiesQuery, ProveParams};
pub use error::{BoxError, PrivsvcError, UnusableIssuer};
pub use options::{
    default_inclusion_timeout, ClientBuilder, ClientOptions, TokenSupply, BLOCK_TIME_SECONDS,
    DEFAULT_COVER_BATCHES, DEFAULT_COVER_PER_MINUTE, DEFAULT_COVER_SUBMISSION_SHARE,
    DEFAULT_DELAY_MS, DEFAULT_MAX_HOLD_MS, DEFAULT_POLL, DEFAULT_PROOF_TTL_SECONDS,
    DEFAULT_RARITY_K,
};
pub use privsvc_attributes::{AttrType, AttrValue, Attributes};
pub use privsvc_envelope::Expires;
pub use privsvc_fingerprint::{CheckWarning, WarningCode};
pub use privsvc_tokens::{IssueRequest, IssueResponse};
#[cfg(not(target_arch = "wasm32"))]
pub use privsvc_vault::IsolatedVault;
pub use privsvc_vault::{KeyVault, LocalWallet, RecordRef, Vault, Wallet};
pub use proof::{
    parse_signature, proof_signing_hash, proof_typed_data, sign_ownership_proof, signature_hex,
    unix_now, verify_ownership_proof, OwnershipProof, OwnershipProofBody, ProofExpectation,
    ProofParams, ProofRejection,
};
pub use protocol::{
    InfoResponse, RecordState, StatusResponse, SubmitRequest, SubmitResponse, TokenRedemption,
    API_VERSION, MAX_HOLD_MS_LIMIT, MAX_WAIT_MS_LIMIT, MIN_INTERVAL_BLOCKS_LIMIT,
    QUEUE_FIGURE_LIMIT,
};
pub use read::{
    addr_literal, batch_of, fetch_batches, list_app, query_pinned, str_literal, BatchId,
    FirstListing, Listing,
};
pub use record::{CreateParams, CreateResult, MyRecord};
pub use relayer_api::{fetch_info, fetch_status, submit, RelayerStatus, SubmitOutcome};
#[cfg(not(target_arch = "wasm32"))]
pub use scan_cache::FileScanCache;
pub use scan_cache::{
    resume_block, ScanCacheState, ScanCacheStore, DEFAULT_RESUME_BLOCKS, SCAN_CACHE_VERSION,
};
pub use schedule::SessionSchedule;
pub use transport::default_transport;
pub use verify::{
    attributes_from_ledger, block_timestamps, creation_timestamp, verify_record,
    verify_record_on_ledger, RejectReason, Unchecked, VerifiedRecord, VerifyOptions,
    RECORD_CONTENT_TYPE,
};
