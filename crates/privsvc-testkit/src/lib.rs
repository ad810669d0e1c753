//! The whole privsvc stack on loopback, assembled in one place: an embedded Arkiv devnet, any
//! number of relayers (with or without tokens, the token issuer and OHTTP), and an OHTTP relay,
//! all real servers on 127.0.0.1 in this process.
//!
//! [`LocalStack::builder`] is what `examples/local_stack.rs`, `tests/e2e.rs`, the client's
//! integration tests and the attack lab start from; [`ProcessStack`] is its process mode (the
//! devnet and a relayer as separate processes, SIGKILLed and restarted at will), what the
//! reliability campaign (`examples/campaign.rs`) starts from. With [`LocalStackBuilder::record_traffic`]
//! every party's endpoint is fronted by a recording proxy ([`Tap`]) in that party's position:
//! the RPC sees each JSON-RPC request with its source address, each relayer sees the requests it
//! can decrypt, the OHTTP relay sees source, time, size and target. Those records are how the
//! attack lab measures what each party learns, from outside the client.
//!
//! ```no_run
//! # async fn demo() -> Result<(), privsvc_testkit::StackError> {
//! use privsvc_testkit::{LocalStack, RelayerSpec};
//! let stack = LocalStack::builder()
//!     .relayer(RelayerSpec::new("a").issuer().ohttp())
//!     .relayer(RelayerSpec::new("b").tokens_from("a").ohttp())
//!     .ohttp_relay()
//!     .start()
//!     .await?;
//! println!("relayer a at {}, relay at {:?}", stack.url("a"), stack.relay_url());
//! stack.shutdown().await;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

pub mod damage;
mod error;
mod processes;
mod spec;
mod stack;
mod tap;

pub use error::{Awaited, StackError};
pub use processes::{ProcessSpec, ProcessStack, LIBFAKETIME};
pub use spec::{RelayerSpec, RelayerTokens};
pub use stack::{LocalStack, LocalStackBuilder};
pub use tap::{
    Action, Exchange, Forwarded, Forwarder, Interceptor, OpenedRequest, Tap, TapRequest,
};

/// Re-exported so that users of the kit need not depend on the devnet crate for block timing.
pub use privsvc_devnet::BlockTime;
