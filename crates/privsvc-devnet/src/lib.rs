//! An embedded Arkiv-compatible node (the "native" protocol of SDK 0.8.1) for privsvc development
//! and tests.
//!
//! It serves JSON-RPC over HTTP on 127.0.0.1 (single requests and batches):
//! `eth_chainId`, `net_version`, `eth_blockNumber`, `eth_getBlockByNumber`/`ByHash`,
//! `eth_getBalance`, `eth_getTransactionCount` (latest/pending), `eth_gasPrice`,
//! `eth_maxPriorityFeePerGas`, `eth_feeHistory`, `eth_estimateGas`, `eth_sendRawTransaction`,
//! `eth_getTransactionByHash`, `eth_getTransactionReceipt`, `eth_call` (`entityNonce`, and
//! simulation of `execute` with the ABI revert data in `error.data`, code 3), `eth_getCode`,
//! `eth_getLogs`, the polling filters (`eth_newFilter`, `eth_newBlockFilter`,
//! `eth_getFilterChanges`, `eth_getFilterLogs`, `eth_uninstallFilter`), `evm_mine`/`anvil_mine`,
//! and `arkiv_query`, `arkiv_getEntity`, `arkiv_getEntityCount`, `arkiv_getBlockTiming`.
//! Unknown methods get -32601. Requests are logged at debug level by method name only.
//!
//! Semantics follow docs/PROTOCOL.md §4.1: signed EIP-1559 and legacy (EIP-155)
//! transactions are verified (signature, chain id, nonce, balance for gas × fee, intrinsic gas);
//! `execute()` batches to `0x44…44` are decoded canonically and applied atomically with the
//! node's permissions, expiry resolution `max(expiresAt, block + minLifetime) > block`, key
//! derivation from the per-creator entity nonce, the native gas schedule (`exec.rs`), the five
//! events in operation order and the custom revert errors (`revert.rs`); a reverted batch gets a
//! status-0 receipt, consumes its nonce and gas, and changes nothing else.
//!
//! The node decodes and validates `execute()` calldata with its own ABI definitions (`abi.rs`,
//! `decode.rs`, `value.rs`, `revert.rs`), written from the Arkiv node's rules and not shared with
//! `privsvc-ledger`'s encoder. This is deliberate: the devnet is the test oracle for privsvc's
//! ledger code, and an oracle that reused the encoder's tables would accept the encoder's own
//! mistakes. Both are pinned to Arkiv's vectors (`conformance/arkiv/`).
//!
//! Blocks come on a timer ([`BlockTime::Interval`], 2 s by default) or one per transaction
//! ([`BlockTime::OnDemand`], plus [`DevnetHandle::mine`]). An entity is live at block `b` iff
//! `expiresAt > b`; every past block stays queryable (`atBlock`, `arkiv_getEntity(key, block)`,
//! historical `eth_call`): versions are kept with `[from, to)` validity and nothing is pruned.
//! Query results are ordered by internal creation id (oldest first); 0.8.1 has no server-side
//! ordering, so clients must not rely on it. Pending transactions are not persisted.
//!
//! Test helpers beyond the RPC surface: [`DevnetConfig::start_block`] and
//! [`DevnetConfig::genesis_entities`] (seeded datasets; the blocks below the genesis answer
//! `eth_getBlockByNumber` as empty blocks 2 s apart, so seeded entities have a creation time),
//! [`DevnetHandle::set_account`] (balance,
//! nonce, entity nonce), [`DevnetHandle::send_impersonated`] (replay calldata from any sender),
//! [`DevnetHandle::mine_blocks`], the dev keys [`DEV_PRIVATE_KEYS`] and [`DevSigner`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), privsvc_devnet::DevnetError> {
//! use privsvc_devnet::{Devnet, DevnetConfig};
//! let node = Devnet::start(DevnetConfig::on_demand()).await?;
//! println!("{} (chain {})", node.url(), node.chain_id());
//! node.mine()?;
//! node.shutdown().await;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod abi;
mod chain;
mod db;
mod decode;
mod entity;
mod error;
mod exec;
#[cfg(feature = "fuzzing")]
pub mod fuzz_entry;
mod query;
mod revert;
mod rpc;
mod select;
mod signer;
mod store;
mod types;
mod value;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Internals that the devnet's own tests (its ABI, decoder, query engine and gas schedule) and
/// the ledger benches reach; not part of the API (no stability promise).
#[doc(hidden)]
pub mod testing {
    /// The node's own `execute()` ABI.
    pub mod abi {
        pub use crate::abi::*;
    }
    /// Calldata decoding.
    pub mod decode {
        pub use crate::decode::*;
    }
    /// Execution: key derivation, the gas schedule.
    pub mod exec {
        pub use crate::exec::*;
    }
    /// The query engine.
    pub mod query {
        pub use crate::query::*;
    }
    /// The custom revert errors.
    pub mod revert {
        pub use crate::revert::*;
    }
    /// Projections (`select`).
    pub mod select {
        pub use crate::select::*;
    }
    /// Typed attribute values.
    pub mod value {
        pub use crate::value::*;
    }
}

pub use abi::ARKIV_ADDRESS;
/// Primitive types used in this crate's API (re-exported for convenience).
pub use alloy_primitives::{Address, Bytes, B256, U256};
pub use chain::{CallRequest, Genesis};
pub use entity::{EntityData, StoredAttr};
pub use error::DevnetError;
pub use signer::{DevSigner, DEV_PRIVATE_KEYS};
pub use types::Account;

use chain::{Chain, Params};
use rpc::Node;

/// Tiramisu's chain id, the devnet default so privsvc code sees its production network id.
pub const TIRAMISU_CHAIN_ID: u64 = 7_738_577;
/// Default block interval (Arkiv's BLOCK_TIME).
pub const DEFAULT_BLOCK_TIME: Duration = Duration::from_secs(2);

/// How blocks are produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockTime {
    /// One block every interval (empty blocks included).
    Interval(Duration),
    /// One block right after every accepted transaction, and on [`DevnetHandle::mine`].
    OnDemand,
}

/// Devnet configuration.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DevnetConfig {
    /// Chain id; default [`TIRAMISU_CHAIN_ID`] (7738577). Use 1337 for the SDK's `localhost` chain.
    pub chain_id: u64,
    /// Block production; default every 2 s.
    pub block_time: BlockTime,
    /// Prefunded accounts; default the five dev accounts with 10 000 ETH each.
    pub prefund: Vec<(Address, U256)>,
    /// SQLite file for persistence; in memory when `None`.
    pub db_path: Option<PathBuf>,
    /// TCP port on 127.0.0.1; an ephemeral port when `None`.
    pub port: Option<u16>,
    /// Block gas limit; default 200 000 000.
    pub gas_limit: u64,
    /// Base fee per gas in wei (constant); default 1 gwei.
    pub base_fee: u64,
    /// Number of the genesis block; default 0.
    pub start_block: u64,
    /// Entities present at genesis (seeded datasets).
    pub genesis_entities: Vec<EntityData>,
}

impl Default for DevnetConfig {
    fn default() -> Self {
        let eth = U256::from(10u64).pow(U256::from(18u64));
        Self {
            chain_id: TIRAMISU_CHAIN_ID,
            block_time: BlockTime::Interval(DEFAULT_BLOCK_TIME),
            prefund: (0..DEV_PRIVATE_KEYS.len())
                .map(|i| (DevSigner::dev(i).address(), eth * U256::from(10_000u64)))
                .collect(),
            db_path: None,
            port: None,
            gas_limit: 200_000_000,
            base_fee: 1_000_000_000,
            start_block: 0,
            genesis_entities: Vec::new(),
        }
    }
}

impl DevnetConfig {
    /// The defaults with blocks mined on demand ([`BlockTime::OnDemand`]): what tests use.
    pub fn on_demand() -> Self {
        DevnetConfig {
            block_time: BlockTime::OnDemand,
            ..Default::default()
        }
    }
}

/// The devnet entry point.
pub struct Devnet;

/// A running devnet. Dropping it without [`DevnetHandle::shutdown`] stops the tasks as well.
pub struct DevnetHandle {
    addr: SocketAddr,
    chain_id: u64,
    node: Arc<Node>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Devnet {
    /// Start a devnet in this process (requires a Tokio runtime).
    pub async fn start(config: DevnetConfig) -> Result<DevnetHandle, DevnetError> {
        if let BlockTime::Interval(d) = config.block_time {
            if d.is_zero() {
                return Err(DevnetError::Config(
                    "block interval must be positive; use BlockTime::OnDemand".into(),
                ));
            }
        }
        let db = match &config.db_path {
            Some(p) => Some(db::Db::open(p)?),
            None => None,
        };
        let genesis = Genesis {
            number: config.start_block,
            timestamp: unix_now(),
            accounts: config
                .prefund
                .iter()
                .map(|(a, b)| {
                    (
                        *a,
                        Account {
                            balance: *b,
                            ..Default::default()
                        },
                    )
                })
                .collect(),
            entities: config.genesis_entities.clone(),
        };
        let params = Params {
            chain_id: config.chain_id,
            gas_limit: config.gas_limit,
            base_fee: config.base_fee,
        };
        let chain = Chain::open(params, genesis, db)?;
        let node = Arc::new(Node {
            chain: Mutex::new(chain),
            on_demand: config.block_time == BlockTime::OnDemand,
            filters: Mutex::new(Default::default()),
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.port.unwrap_or(0)))
            .await
            .map_err(|e| DevnetError::Server(format!("cannot bind 127.0.0.1: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| DevnetError::Server(e.to_string()))?;
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = Vec::new();
        let app = rpc::router(node.clone());
        // No Nagle delay on answers: a client's listing is hundreds of pages, one round trip each.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let mut rx = stop_rx.clone();
        tasks.push(tokio::spawn(async move {
            let shutdown = async move {
                let _ = rx.wait_for(|s| *s).await;
            };
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::warn!(error = %e, "devnet server stopped");
            }
        }));
        if let BlockTime::Interval(every) = config.block_time {
            let node = node.clone();
            let mut rx = stop_rx;
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.tick().await;
                loop {
                    tokio::select! {
                        _ = tick.tick() => {
                            if let Err(e) = node.lock().mine(unix_now()) {
                                tracing::warn!(error = %e, "block production failed");
                            }
                        }
                        _ = rx.wait_for(|s| *s) => break,
                    }
                }
            }));
        }
        tracing::info!(%addr, chain_id = config.chain_id, "devnet listening");
        Ok(DevnetHandle {
            addr,
            chain_id: config.chain_id,
            node,
            stop,
            tasks,
        })
    }
}

impl DevnetHandle {
    /// The JSON-RPC URL (`http://127.0.0.1:<port>`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The chain id.
    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// The head block number.
    pub fn block_number(&self) -> u64 {
        self.node.lock().head().number
    }

    /// Mine one block now (including pooled transactions). Returns its number.
    pub fn mine(&self) -> Result<u64, DevnetError> {
        self.node.lock().mine(unix_now())
    }

    /// Mine `n` blocks. Returns the new head number.
    pub fn mine_blocks(&self, n: u64) -> Result<u64, DevnetError> {
        let mut chain = self.node.lock();
        let mut last = chain.head().number;
        for _ in 0..n {
            last = chain.mine(unix_now())?;
        }
        Ok(last)
    }

    /// Account state at head.
    pub fn account(&self, address: Address) -> Account {
        self.node.lock().account(&address)
    }

    /// Overwrite an account's balance, nonce and entity nonce (test setup).
    pub fn set_account(&self, address: Address, account: Account) -> Result<(), DevnetError> {
        self.node.lock().set_account(address, account)
    }

    /// Send an unsigned transaction from any address (impersonation, test setup such as replaying
    /// live transactions). Mines it at once in on-demand mode. Returns the transaction hash.
    pub fn send_impersonated(
        &self,
        from: Address,
        to: Address,
        input: Bytes,
        gas: Option<u64>,
    ) -> Result<B256, DevnetError> {
        let mut chain = self.node.lock();
        let req = CallRequest {
            from: Some(from),
            to: Some(to),
            input,
            value: U256::ZERO,
            gas,
        };
        let hash = chain
            .submit_impersonated(&req)
            .map_err(|e| DevnetError::Config(e.0))?;
        if self.node.on_demand {
            chain.mine(unix_now())?;
        }
        Ok(hash)
    }

    /// Stop the server and block production.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for DevnetHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}
