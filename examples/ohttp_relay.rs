//! The privsvc OHTTP relay as a standalone server.
//!
//! ```text
//! cargo run --example ohttp_relay -- --rpc-url http://127.0.0.1:8545 --port 8090
//! LEDGER_RPC_URL=... RELAY_PORT=8090 ALLOW_HTTP_TARGETS=true cargo run --example ohttp_relay
//! ```
//!
//! `POST /ohttp` (header `x-privsvc-target`) forwards to relayers verified from their heartbeats
//! on the ledger; `GET /healthz` reports the number of verified targets. Each source address may
//! send at most `RATE_LIMIT_PER_MIN` (default 120) `POST /ohttp` requests a minute (429 beyond):
//! the relay is the only party that sees client addresses, so OHTTP traffic is limited here. The
//! listener keeps a peer's IP only as an unprintable value for that in-memory count; it is never
//! logged or stored. The `ohttp` crate's key traces are always silenced, whatever `RUST_LOG` says.
//!
//! Rounds: with `ROUND_MS` above 0, requests are held until the end of their round and then
//! forwarded together in a random order (at most `MAX_HELD` held at once, 503 beyond); each
//! request waits half a round on average. `RELAY_METRICS_BIND` serves `GET /metrics` (requests
//! forwarded, rounds, held, refused) on a separate listener, never on the public one.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use privsvc_ledger::{LedgerReader, RpcLedger};
use privsvc_ohttp::PrivateListener;
use privsvc_ohttp::{OhttpRelay, RelayConfig, SILENCE_OHTTP_LOGS};
use privsvc_ohttp::{DEFAULT_MAX_HELD, DEFAULT_RATE_LIMIT_PER_MIN};

/// Command-line options (each also read from the environment).
#[derive(Parser, Debug)]
#[command(about = "privsvc OHTTP relay")]
struct Args {
    /// Ledger JSON-RPC URL.
    #[arg(long, env = "LEDGER_RPC_URL", default_value = "http://127.0.0.1:8545")]
    rpc_url: String,
    /// Address to bind.
    #[arg(long, env = "RELAY_HOST", default_value = "127.0.0.1")]
    host: String,
    /// TCP port.
    #[arg(long, env = "RELAY_PORT", default_value_t = 8090)]
    port: u16,
    /// Seconds between rebuilds of the verified target set.
    #[arg(long, env = "RELAY_REFRESH_SECS", default_value_t = 60)]
    refresh_secs: u64,
    /// The relayers' heartbeat interval in milliseconds (HEARTBEAT_MS).
    #[arg(long, env = "HEARTBEAT_MS", default_value_t = 600_000)]
    heartbeat_ms: u64,
    /// Accept http:// relayers (local development only).
    #[arg(long, env = "ALLOW_HTTP_TARGETS", default_value_t = false)]
    allow_http: bool,
    /// `POST /ohttp` requests a minute per source address (1..=1000000; 429 beyond).
    #[arg(
        long,
        env = "RATE_LIMIT_PER_MIN",
        default_value_t = DEFAULT_RATE_LIMIT_PER_MIN,
        value_parser = clap::value_parser!(u32).range(1..=1_000_000)
    )]
    rate_limit_per_min: u32,
    /// Length of a forwarding round in milliseconds (0..=60000; 0 forwards each request at
    /// once).
    #[arg(
        long,
        env = "ROUND_MS",
        default_value_t = 0,
        value_parser = clap::value_parser!(u64).range(0..=60_000)
    )]
    round_ms: u64,
    /// Requests held for a round at once, at most (1..=100000; 503 beyond).
    #[arg(
        long,
        env = "MAX_HELD",
        default_value_t = DEFAULT_MAX_HELD as u64,
        value_parser = clap::value_parser!(u64).range(1..=100_000)
    )]
    max_held: u64,
    /// `host:port` of a separate listener serving `GET /metrics` (off when absent).
    #[arg(long, env = "RELAY_METRICS_BIND")]
    metrics_bind: Option<std::net::SocketAddr>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let user_filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(format!(
            "{user_filter},{SILENCE_OHTTP_LOGS}"
        ))?)
        .init();
    let args = Args::parse();

    let reader: Arc<dyn LedgerReader> = Arc::new(RpcLedger::new(args.rpc_url.clone())?);
    let chain_id = reader.chain_id().await?;
    let mut config = RelayConfig::default();
    config.refresh_interval = Duration::from_secs(args.refresh_secs.max(1));
    config.heartbeat_interval = Duration::from_millis(args.heartbeat_ms.max(1));
    config.allow_http = args.allow_http;
    config.rate_limit_per_min = args.rate_limit_per_min;
    config.round = Duration::from_millis(args.round_ms);
    config.max_held = usize::try_from(args.max_held)?;
    let relay = OhttpRelay::new(reader, config)?;
    let refresher = relay.spawn_refresh();
    let metrics = match args.metrics_bind {
        Some(bind) => {
            let tcp = tokio::net::TcpListener::bind(bind).await?;
            tracing::info!(listen = %tcp.local_addr()?, "relay metrics listening");
            let router = relay.metrics_router();
            Some(tokio::spawn(async move {
                let _ = axum::serve(PrivateListener::anonymous(tcp), router).await;
            }))
        }
        None => None,
    };

    let tcp = tokio::net::TcpListener::bind((args.host.as_str(), args.port)).await?;
    tracing::info!(
        listen = %tcp.local_addr()?,
        ledger = %args.rpc_url,
        chain_id,
        rate_limit_per_min = args.rate_limit_per_min,
        round_ms = args.round_ms,
        "OHTTP relay listening"
    );
    // The listener keeps each peer's IP (unprintable) for the per-address rate limit.
    axum::serve(PrivateListener::keeping_ip(tcp), relay.into_make_service())
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    refresher.abort();
    if let Some(metrics) = metrics {
        metrics.abort();
    }
    Ok(())
}
