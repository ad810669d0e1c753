//! Run the embedded Arkiv-compatible devnet as a standalone JSON-RPC node.
//!
//! ```text
//! cargo run --example devnet -- --port 8545 [--block-time-ms 2000] [--db chain.sqlite] [--chain-id 7738577]
//! ```
//!
//! `--block-time-ms 0` mines one block per transaction (on demand). Prints the URL, the chain id
//! and the well-known dev keys (public test keys: never use them on a real network).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use privsvc_devnet::{
    BlockTime, DevSigner, Devnet, DevnetConfig, DEV_PRIVATE_KEYS, TIRAMISU_CHAIN_ID,
};

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "Embedded Arkiv-compatible devnet (native protocol, SDK 0.8.1)")]
struct Args {
    /// TCP port on 127.0.0.1.
    #[arg(long, default_value_t = 8545)]
    port: u16,
    /// Block interval in milliseconds; 0 = one block per transaction.
    #[arg(long, default_value_t = 2000)]
    block_time_ms: u64,
    /// SQLite file for persistence (in memory when absent).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Chain id (default Tiramisu's 7738577; 1337 for the SDK's localhost chain).
    #[arg(long, default_value_t = TIRAMISU_CHAIN_ID)]
    chain_id: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let block_time = if args.block_time_ms == 0 {
        BlockTime::OnDemand
    } else {
        BlockTime::Interval(Duration::from_millis(args.block_time_ms))
    };
    let mut config = DevnetConfig::default();
    config.chain_id = args.chain_id;
    config.block_time = block_time;
    config.db_path = args.db;
    config.port = Some(args.port);
    let node = Devnet::start(config).await?;
    println!("Arkiv devnet listening on {}", node.url());
    println!("chain id {}", node.chain_id());
    println!("dev accounts (10 000 ETH each; public keys of the standard test mnemonic):");
    for (i, k) in DEV_PRIVATE_KEYS.iter().enumerate() {
        println!("  [{i}] {}  {k}", DevSigner::dev(i).address());
    }
    tokio::signal::ctrl_c().await?;
    node.shutdown().await;
    Ok(())
}
