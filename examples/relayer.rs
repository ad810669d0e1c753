//! Run a privsvc relayer configured from the environment and flags.
//!
//! ```text
//! LEDGER_RPC_URL=http://127.0.0.1:8545 RELAYER_KEY_FILE=./relayer.key \
//!   MIN_BATCH=8 MAX_WAIT_MS=30000 TOKENS=required ISSUER=on \
//!   cargo run --example relayer -- --bind 127.0.0.1:8787
//! ```
//!
//! Every variable and its default is listed in `privsvc_relayer::RelayerConfig`. Pass the key in a
//! 0600 file (`RELAYER_KEY_FILE`), not in the environment. With `DEVNET=on` the
//! example starts an in-process devnet (one block per transaction) and, when no key is given,
//! uses the devnet's first dev account: handy for trying the API locally.
//! Log level: `RUST_LOG` (default `info`); logs never hold client addresses or bodies.

use anyhow::Context;
use privsvc::devnet::{Devnet, DevnetConfig, DEV_PRIVATE_KEYS};
use privsvc::relayer::{Relayer, RelayerConfig, RelayerKey};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(format!(
            "{},{}",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            privsvc::ohttp::SILENCE_OHTTP_LOGS
        )))
        .init();
    let mut config = RelayerConfig::from_env_and_args(std::env::args())?;
    let devnet = if std::env::var("DEVNET").is_ok_and(|v| v == "on") {
        let node = Devnet::start(DevnetConfig::on_demand())
            .await
            .context("starting the in-process devnet")?;
        config.rpc_url = node.url();
        if config.key.is_none() {
            config.key = Some(RelayerKey::from_hex(DEV_PRIVATE_KEYS[0])?);
        }
        println!("devnet at {} (chain {})", node.url(), node.chain_id());
        Some(node)
    } else {
        None
    };
    let relayer = Relayer::start_on_ledger(config).await?;
    println!(
        "privsvc relayer {} listening on {}",
        relayer.address(),
        relayer.url()
    );
    if let Some(addr) = relayer.metrics_addr() {
        println!("metrics on http://{addr}/metrics (METRICS_BIND; not on the public listener)");
    }
    tokio::signal::ctrl_c().await?;
    relayer.shutdown().await;
    if let Some(node) = devnet {
        node.shutdown().await;
    }
    Ok(())
}
