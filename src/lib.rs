//! privsvc: write records to the Arkiv ledger without the ledger, the relayer or an onlooker
//! learning who wrote which record.
//!
//! This facade re-exports the workspace crates under short names. Applications usually need
//! only [`client`]; relayer operators compose [`relayer`], [`tokens`] and [`ohttp`].
#![forbid(unsafe_code)]

pub use privsvc_attributes as attributes;
pub use privsvc_client as client;
pub use privsvc_devnet as devnet;
pub use privsvc_envelope as envelope;
pub use privsvc_fingerprint as fingerprint;
pub use privsvc_ledger as ledger;
pub use privsvc_ohttp as ohttp;
pub use privsvc_relayer as relayer;
pub use privsvc_tokens as tokens;
pub use privsvc_vault as vault;
