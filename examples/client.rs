//! A small command-line client for a running privsvc stack: write, list and prove records.
//!
//! ```text
//! export PRIVSVC_WALLET_KEY=0x…            # or --wallet-key-file key.hex
//! cargo run --example client -- --rpc-url http://127.0.0.1:8545 \
//!     --relayer http://127.0.0.1:8787 --app notes write --text "hello" --attr kind=note
//! cargo run --example client -- --rpc-url … --relayer … --app notes list
//! cargo run --example client -- --rpc-url … --relayer … --app notes prove 0x<entity key> \
//!     --challenge abc --verifier example.org
//! cargo run --example client -- --rpc-url … verify-proof proof.json --challenge abc --verifier example.org
//! ```
//!
//! Without `--relayer`, relayers are discovered from their heartbeats on the ledger. Tokens,
//! pins and the scan cache (with the records this device wrote) are kept between runs in the
//! device store under `--data-dir` (default `$PRIVSVC_DATA_DIR`, else the platform's data
//! directory): `list` and `prove` in a new process know a record `write` just wrote.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use privsvc::client::{
    verify_ownership_proof, AttrValue, CreateParams, EntitiesQuery, Expires, OwnershipProof,
    PrivateClient, ProofExpectation, ProveParams,
};
use privsvc::ledger::{LedgerReader, RpcLedger};
use privsvc::vault::LocalWallet;

#[derive(Parser)]
#[command(
    name = "privsvc-client",
    about = "Write, list and prove privsvc records"
)]
struct Cli {
    /// Ledger JSON-RPC URL.
    #[arg(long, env = "LEDGER_RPC_URL", default_value = "http://127.0.0.1:8545")]
    rpc_url: String,
    /// Relayer base URL (repeatable); default: discover from heartbeats.
    #[arg(long = "relayer")]
    relayers: Vec<String>,
    /// Send relayer calls through this OHTTP relay.
    #[arg(long)]
    ohttp_relay: Option<String>,
    /// App name (key namespace and default project).
    #[arg(long, default_value = "notes")]
    app: String,
    /// File holding the wallet's secp256k1 key as hex (else PRIVSVC_WALLET_KEY).
    #[arg(long)]
    wallet_key_file: Option<PathBuf>,
    /// Largest random delay before a submission, ms.
    #[arg(long, default_value_t = 0)]
    delay_ms_max: u64,
    /// Status polling interval, ms.
    #[arg(long, default_value_t = 500)]
    poll_ms: u64,
    /// Where the device store lives (default: $PRIVSVC_DATA_DIR, else the platform's data
    /// directory).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Keep tokens, pins and the scan cache in memory for this run only.
    #[arg(long)]
    memory_stores: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write one record.
    Write {
        /// The payload text.
        #[arg(long)]
        text: String,
        /// Content type kept in the envelope.
        #[arg(long, default_value = "text/plain")]
        content_type: String,
        /// Attribute `name=value` (a string) or `name:type=value` (type str, i32, u64, u256).
        #[arg(long = "attr")]
        attrs: Vec<String>,
        /// Lifetime in hours (rounded up to 1 h, 1 d, 7 d, 30 d or 90 d).
        #[arg(long, default_value_t = 24)]
        hours: u64,
        /// Write under this scope (records of a scope share an owner).
        #[arg(long)]
        scope: Option<String>,
        /// Encrypt the payload.
        #[arg(long)]
        encrypt: bool,
        /// Smallest acceptable batch.
        #[arg(long, default_value_t = 1)]
        min_anonymity: u64,
    },
    /// List your records, newest first.
    List {
        /// Keep only records with this attribute value (`name=value` or `name:type=value`).
        #[arg(long = "where")]
        filters: Vec<String>,
        /// Print the payload of each record.
        #[arg(long)]
        payloads: bool,
    },
    /// Print an ownership proof (JSON) for one of your records.
    Prove {
        /// The entity key (0x…).
        entity_key: String,
        /// The verifier's challenge.
        #[arg(long)]
        challenge: String,
        /// The verifier's name.
        #[arg(long)]
        verifier: String,
        /// Validity in seconds.
        #[arg(long, default_value_t = 300)]
        ttl: u64,
    },
    /// Check an ownership proof (JSON file, `-` for stdin) against the ledger.
    VerifyProof {
        /// The proof file.
        file: PathBuf,
        /// The challenge you issued.
        #[arg(long)]
        challenge: String,
        /// Your verifier name.
        #[arg(long)]
        verifier: String,
    },
}

fn parse_attr(text: &str) -> Result<(String, AttrValue)> {
    let (lhs, value) = text
        .split_once('=')
        .ok_or_else(|| anyhow!("attribute {text:?}: expected name=value or name:type=value"))?;
    let (name, ty) = lhs.split_once(':').unwrap_or((lhs, "str"));
    let value = match ty {
        "str" => AttrValue::Str(value.to_string()),
        "i32" => AttrValue::I32(value.parse().context("i32 value")?),
        "u64" => AttrValue::U64(value.parse().context("u64 value")?),
        "u256" => AttrValue::U256(value.parse().context("u256 value")?),
        other => bail!("attribute {name:?}: unknown type {other:?} (str, i32, u64, u256)"),
    };
    Ok((name.to_string(), value))
}

fn wallet_key(cli: &Cli) -> Result<String> {
    if let Some(path) = &cli.wallet_key_file {
        return Ok(std::fs::read_to_string(path)
            .with_context(|| format!("reading {}", path.display()))?
            .trim()
            .to_string());
    }
    std::env::var("PRIVSVC_WALLET_KEY")
        .context("no wallet key: set PRIVSVC_WALLET_KEY or pass --wallet-key-file")
}

async fn client(
    cli: &Cli,
    reader: Arc<dyn LedgerReader>,
    min_anonymity: u64,
) -> Result<PrivateClient> {
    let wallet = LocalWallet::from_hex(&wallet_key(cli)?).context("wallet key")?;
    let mut builder = PrivateClient::builder(cli.app.clone())
        .wallet(Arc::new(wallet))
        .reader(reader)
        .delay_ms(0, cli.delay_ms_max)
        .min_anonymity(min_anonymity)
        .poll_interval(std::time::Duration::from_millis(cli.poll_ms));
    if !cli.relayers.is_empty() {
        builder = builder.relayers(cli.relayers.clone());
    }
    if let Some(relay) = &cli.ohttp_relay {
        builder = builder.ohttp_relay(relay.clone());
    }
    if let Some(dir) = &cli.data_dir {
        builder = builder.data_dir(dir.clone());
    }
    Ok(builder.memory_stores(cli.memory_stores).build().await?)
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let reader: Arc<dyn LedgerReader> = Arc::new(RpcLedger::new(&cli.rpc_url)?);
    match &cli.command {
        Command::Write {
            text,
            content_type,
            attrs,
            hours,
            scope,
            encrypt,
            min_anonymity,
        } => {
            let c = client(&cli, reader, *min_anonymity).await?;
            let mut params = CreateParams::new(
                text.as_bytes().to_vec(),
                content_type.clone(),
                Expires::Hours(*hours),
            )
            .encrypt(*encrypt);
            for a in attrs {
                let (n, v) = parse_attr(a)?;
                params = params.attribute(n, v);
            }
            if let Some(s) = scope {
                params = params.scope(s.clone());
            }
            let r = c.create_entity(params).await?;
            for w in &r.warnings {
                eprintln!("warning: {w}");
            }
            println!(
                "{}",
                serde_json::json!({
                    "entityKey": r.entity_key.to_string(),
                    "owner": r.owner.to_string(),
                    "txHash": r.tx_hash.to_string(),
                    "relayer": r.relayer,
                    "batchSize": r.batch_size,
                    "recovered": r.recovered,
                })
            );
        }
        Command::List { filters, payloads } => {
            let c = client(&cli, reader, 1).await?;
            let mut q = EntitiesQuery::new();
            for f in filters {
                let (n, v) = parse_attr(f)?;
                q = q.where_eq(n, v);
            }
            for r in c.my_entities(&q).await? {
                let mut line = r.summary();
                if *payloads {
                    line["data"] = serde_json::Value::String(r.to_text());
                }
                println!("{line}");
            }
        }
        Command::Prove {
            entity_key,
            challenge,
            verifier,
            ttl,
        } => {
            let c = client(&cli, reader, 1).await?;
            let key = entity_key.parse().context("entity key (0x + 64 hex)")?;
            let proof = c
                .prove_ownership(
                    key,
                    &ProveParams {
                        challenge: challenge.clone(),
                        verifier: verifier.clone(),
                        ttl_seconds: Some(*ttl),
                    },
                )
                .await?;
            println!("{}", serde_json::to_string_pretty(&proof)?);
        }
        Command::VerifyProof {
            file,
            challenge,
            verifier,
        } => {
            let text = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(file)
                    .with_context(|| format!("reading {}", file.display()))?
            };
            let proof: OwnershipProof = serde_json::from_str(&text).context("proof JSON")?;
            match verify_ownership_proof(
                &proof,
                &ProofExpectation {
                    challenge,
                    verifier,
                    reader: reader.as_ref(),
                    now: None,
                },
            )
            .await
            {
                Ok(()) => println!("ok: {} owns {}", proof.owner, proof.body.entity_key),
                Err(reason) => bail!("proof rejected: {reason}"),
            }
        }
    }
    Ok(())
}
