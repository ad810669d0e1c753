//! Reliability campaign (issue 13): a real devnet and a real relayer as separate processes, load
//! from several concurrent writers through the relayer's HTTP API, SIGKILLs of the relayer, a
//! fault-injecting proxy between relayer and ledger with two devnet kills, then a drain and a
//! check from the ledger alone.
//!
//! ```text
//! cargo run --example campaign -- --kills 10 --fault-secs 60     # short form (tests)
//! cargo run --example campaign -- --kills 50 --fault-secs 180    # full form (docs/RELIABILITY.md)
//! ```
//!
//! Phases, each bounded (count and time, under 10 minutes):
//! 1. fault-free baseline (`--free-secs`): records written per second;
//! 2. `--kills` SIGKILLs of the relayer at random moments 0.2 to 3 s apart, each followed by a
//!    restart on the same data directory;
//! 3. `--fault-secs` with a proxy failing 20% of ledger calls (HTTP 500, dropped connection,
//!    delay past the relayer's request timeout, transaction applied but answer lost) and the
//!    devnet SIGKILLed and restarted (same `--db`) twice;
//! 4. drain (writers stopped, faults off) and check from the ledger: every 202-accepted record
//!    written exactly once, no one-time owner with two entities, no envelope twice, requests
//!    whose answer was lost written at most once.
//!
//! Exits non-zero on any loss or duplicate, or when less than `--min-ratio` (default one half)
//! of the fault-free rate was written under faults. All traffic stays on 127.0.0.1. The binaries are built first with
//! `cargo build --example devnet --example relayer` (same target directory; `--no-build` skips
//! it).

#[path = "../crates/privsvc-relayer/tests/common/faultproxy.rs"]
mod faultproxy;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_primitives::Address;
use anyhow::{bail, Context};
use clap::Parser;
use k256::ecdsa::SigningKey;
use privsvc::attributes::Attributes;
use privsvc::devnet::DEV_PRIVATE_KEYS;
use privsvc::envelope::{seal_envelope, EnvelopeBody};
use privsvc::ledger::{query_all, RpcLedger, Select};
use privsvc_testkit::{ProcessSpec, ProcessStack};
use rand::Rng;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The app and project of the campaign's records.
const APP: &str = "campaign";

/// Command-line options.
#[derive(Parser, Debug, Clone)]
#[command(
    about = "privsvc reliability campaign: kill -9s and ledger faults, checked from the ledger"
)]
struct Args {
    /// SIGKILLs of the relayer in phase 2.
    #[arg(long, default_value_t = 50)]
    kills: u32,
    /// Seconds of ledger faults in phase 3.
    #[arg(long, default_value_t = 180)]
    fault_secs: u64,
    /// Seconds of the fault-free baseline.
    #[arg(long, default_value_t = 30)]
    free_secs: u64,
    /// Concurrent writers.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Pause between two submissions of one writer, in ms.
    #[arg(long, default_value_t = 50)]
    pace_ms: u64,
    /// Fault probability per ledger call in phase 3.
    #[arg(long, default_value_t = 0.2)]
    fault_rate: f64,
    /// Devnet block interval in ms.
    #[arg(long, default_value_t = 500)]
    block_time_ms: u64,
    /// The relayer's ledger request timeout in ms (LEDGER_TIMEOUT_MS); proxy delays exceed it.
    #[arg(long, default_value_t = 2000)]
    ledger_timeout_ms: u64,
    /// Working directory (databases, logs); a fresh temporary one when absent.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Do not build the devnet and relayer examples first.
    #[arg(long)]
    no_build: bool,
    /// Least rate under faults, as a fraction of the fault-free rate, that passes (both forms
    /// are held to 0.5).
    #[arg(long, default_value_t = 0.5)]
    min_ratio: f64,
}

/// Where the devnet and relayer examples are: next to this example's own binary.
fn examples_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the campaign binary")?;
    Ok(exe
        .parent()
        .context("the campaign binary has no directory")?
        .to_path_buf())
}

/// What the writers saw.
#[derive(Default)]
struct Tally {
    /// Owners of 202-accepted records.
    accepted: Mutex<Vec<Address>>,
    /// Owners of requests whose answer was lost (may or may not be accepted).
    unanswered: Mutex<Vec<Address>>,
    refused: AtomicU64,
}

fn record_body() -> (Value, Address) {
    let key = SigningKey::random(&mut rand::thread_rng());
    let owner = Address::from_public_key(key.verifying_key());
    let mut attrs = Attributes::new();
    attrs.insert("project", APP).expect("valid attribute");
    let mut data = [0u8; 16];
    rand::thread_rng().fill(&mut data);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let body = EnvelopeBody {
        app: APP.into(),
        exp: 86_400,
        hour: privsvc::envelope::hour_of(now),
        ct: "application/octet-stream".into(),
        enc: false,
        types: attrs.types(),
        data: data.to_vec(),
    };
    let sealed = seal_envelope(&body, &attrs, &key).expect("seal");
    (
        json!({
            "app": APP,
            "owner": owner.to_string(),
            "envelope": sealed,
            "attributes": attrs.to_wire(),
            "expSeconds": 86_400,
        }),
        owner,
    )
}

async fn writer(url: Arc<Mutex<String>>, pace: Duration, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client");
    // Bounded: at most one submission per pace for at most an hour.
    let deadline = Instant::now() + Duration::from_secs(3_600);
    while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        let (body, owner) = record_body();
        let url = url.lock().unwrap().clone();
        match http
            .post(format!("{url}/v1/records"))
            .json(&body)
            .send()
            .await
        {
            Ok(r) if r.status().as_u16() == 202 => tally.accepted.lock().unwrap().push(owner),
            Ok(r) => {
                if tally.refused.fetch_add(1, Ordering::SeqCst) == 0 {
                    let status = r.status();
                    let text = r.text().await.unwrap_or_default();
                    eprintln!("first refusal: {status} {text}");
                }
            }
            Err(_) => tally.unanswered.lock().unwrap().push(owner),
        }
        tokio::time::sleep(pace).await;
    }
}

/// The campaign's records on the ledger: owner and payload of each entity the relayer created
/// with `project = campaign`, read directly from the devnet.
async fn ledger_records(
    devnet_url: &str,
    relayer: Address,
) -> anyhow::Result<Vec<(Address, Vec<u8>)>> {
    let ledger = RpcLedger::with_timeout(devnet_url, Duration::from_secs(30))?;
    let expr = format!("$creator = addr({relayer}) AND project = str('{APP}')");
    let select = Select {
        key: true,
        owner: true,
        payload: true,
        ..Select::default()
    };
    let mut last = None;
    for _ in 0..20 {
        match query_all(&ledger, &expr, &select, None).await {
            Ok(es) => {
                return Ok(es
                    .into_iter()
                    .map(|e| (e.owner.unwrap_or_default(), e.payload.unwrap_or_default()))
                    .collect())
            }
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    bail!("cannot read the ledger: {last:?}")
}

async fn written_count(devnet_url: &str, relayer: Address) -> anyhow::Result<usize> {
    Ok(ledger_records(devnet_url, relayer).await?.len())
}

/// The exact queue length from the relayer's `METRICS_BIND` listener at `url`.
async fn queue_len(url: &str) -> Option<u64> {
    let v: Value = reqwest::Client::new()
        .get(format!("{url}/healthz"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    v["queue"].as_u64()
}

fn random_pause() -> Duration {
    Duration::from_millis(rand::thread_rng().gen_range(200..=3_000))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.writers == 0 || args.writers > 64 {
        bail!("--writers must be 1..=64");
    }
    if !(0.0..=1.0).contains(&args.fault_rate) {
        bail!("--fault-rate must be within 0..=1");
    }
    if !(0.0..=1.0).contains(&args.min_ratio) {
        bail!("--min-ratio must be within 0..=1");
    }
    if args.fault_secs > 540 || args.free_secs > 540 || args.kills > 200 {
        bail!("each phase must stay under 10 minutes: --fault-secs/--free-secs <= 540, --kills <= 200");
    }
    if !args.no_build {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--example", "devnet", "--example", "relayer"])
            .status()
            .context("running cargo build")?;
        if !status.success() {
            bail!("cargo build --example devnet --example relayer failed");
        }
    }
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("privsvc-campaign-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)?;
    println!("campaign directory: {}", dir.display());
    let env = |pairs: &[(&str, String)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect::<Vec<_>>()
    };
    let mut stack = ProcessStack::new(ProcessSpec {
        bins: examples_dir()?,
        dir: dir.clone(),
        block_time: Duration::from_millis(args.block_time_ms),
        // A public dev key of the devnet (never a real key).
        relayer_key: DEV_PRIVATE_KEYS[0].to_string(),
        relayer_env: env(&[
            ("MIN_BATCH", "8".into()),
            ("MAX_WAIT_MS", "1000".into()),
            ("FLUSH_JITTER_MS", "200".into()),
            ("HEARTBEAT_MS", "2000".into()),
            ("LEDGER_TIMEOUT_MS", args.ledger_timeout_ms.to_string()),
            ("RATE_LIMIT_PER_MIN", "1000000".into()),
            ("QUEUE_CAPACITY", "100000".into()),
        ]),
        relayer_log: std::env::var("CAMPAIGN_RELAYER_LOG").unwrap_or_else(|_| "warn".into()),
    })?;
    let relayer_address = stack.relayer_address();
    let (mut relayer_restarts, mut devnet_restarts) = (0u64, 0u64);
    let mut devnet_url = stack.start_devnet().await?;
    stack.start_relayer(&devnet_url).await?;
    // The writers follow the relayer if a restart has to move it to another port.
    let relayer_url = Arc::new(Mutex::new(stack.relayer_url()));

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut writers = Vec::new();
    for _ in 0..args.writers {
        writers.push(tokio::spawn(writer(
            relayer_url.clone(),
            Duration::from_millis(args.pace_ms),
            stop.clone(),
            tally.clone(),
        )));
    }

    // Phase 1: fault-free baseline.
    println!("phase 1: {} s fault-free", args.free_secs);
    let before = written_count(&devnet_url, relayer_address).await?;
    let t = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.free_secs)).await;
    let free_written = written_count(&devnet_url, relayer_address).await? - before;
    let free_rate = free_written as f64 / t.elapsed().as_secs_f64();
    println!("  written {free_written} ({free_rate:.1}/s)");

    // Phase 2: SIGKILLs of the relayer.
    println!("phase 2: {} SIGKILLs of the relayer", args.kills);
    let phase = Instant::now();
    for i in 0..args.kills {
        if phase.elapsed() > Duration::from_secs(540) {
            bail!("phase 2 exceeded 9 minutes after {i} kills");
        }
        tokio::time::sleep(random_pause()).await;
        stack.kill_relayer();
        stack.start_relayer(&devnet_url).await?;
        *relayer_url.lock().unwrap() = stack.relayer_url();
        relayer_restarts += 1;
    }
    println!(
        "  {} restarts in {:.0} s",
        relayer_restarts,
        phase.elapsed().as_secs_f64()
    );

    // Phase 3: ledger faults and two devnet kills.
    println!(
        "phase 3: {} s with {:.0}% of ledger calls failing, devnet killed twice",
        args.fault_secs,
        args.fault_rate * 100.0
    );
    let proxy = faultproxy::FaultProxy::start(
        &devnet_url,
        0,
        Duration::from_millis(args.ledger_timeout_ms + 1_000),
    )
    .await;
    stack.kill_relayer();
    stack.start_relayer(&proxy.url).await?;
    *relayer_url.lock().unwrap() = stack.relayer_url();
    relayer_restarts += 1;
    let before = written_count(&devnet_url, relayer_address).await?;
    proxy.state.set_rate(args.fault_rate);
    let t = Instant::now();
    let fault_window = Duration::from_secs(args.fault_secs);
    for k in 1..=2u32 {
        let at = fault_window * k / 3;
        if let Some(wait) = at.checked_sub(t.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        stack.kill_devnet();
        tokio::time::sleep(Duration::from_millis(500)).await;
        devnet_url = stack.start_devnet().await?;
        proxy.state.set_upstream(&devnet_url);
        devnet_restarts += 1;
    }
    if let Some(wait) = fault_window.checked_sub(t.elapsed()) {
        tokio::time::sleep(wait).await;
    }
    let fault_elapsed = t.elapsed().as_secs_f64();
    proxy.state.set_rate(0.0);
    let fault_written = written_count(&devnet_url, relayer_address)
        .await?
        .saturating_sub(before);
    let fault_rate = fault_written as f64 / fault_elapsed;
    let faults = proxy.state.faults();
    println!("  written {fault_written} ({fault_rate:.1}/s), {faults} faults injected");

    // Phase 4: drain and check.
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        let _ = w.await;
    }
    println!("phase 4: drain");
    let drain = Instant::now();
    loop {
        match queue_len(&stack.metrics_url()).await {
            Some(0) => break,
            _ if drain.elapsed() > Duration::from_secs(540) => {
                bail!("the relayer did not drain within 9 minutes");
            }
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    let drain_secs = drain.elapsed().as_secs_f64();
    let on_ledger = ledger_records(&devnet_url, relayer_address).await?;
    stack.kill_relayer();
    stack.kill_devnet();

    let mut per_owner: HashMap<Address, usize> = HashMap::new();
    let mut payloads: HashSet<[u8; 32]> = HashSet::new();
    let mut envelope_twice = 0usize;
    for (owner, payload) in &on_ledger {
        *per_owner.entry(*owner).or_default() += 1;
        if !payloads.insert(Sha256::digest(payload).into()) {
            envelope_twice += 1;
        }
    }
    let accepted = tally.accepted.lock().unwrap().clone();
    let unanswered = tally.unanswered.lock().unwrap().clone();
    let lost = accepted
        .iter()
        .filter(|o| !per_owner.contains_key(*o))
        .count();
    let owners_twice = per_owner.values().filter(|n| **n > 1).count();
    let unanswered_written = unanswered
        .iter()
        .filter(|o| per_owner.contains_key(*o))
        .count();
    let duplicates = owners_twice + envelope_twice;
    let ratio = if free_rate > 0.0 {
        fault_rate / free_rate
    } else {
        0.0
    };

    println!();
    println!("accepted (202)            {}", accepted.len());
    println!(
        "answer lost               {} ({} of them written)",
        unanswered.len(),
        unanswered_written
    );
    println!(
        "refused (4xx/5xx)         {}",
        tally.refused.load(Ordering::SeqCst)
    );
    println!("written (on the ledger)   {}", on_ledger.len());
    println!("lost                      {lost}");
    println!("duplicates                {duplicates} (owners with two entities {owners_twice}, envelopes twice {envelope_twice})");
    println!("relayer restarts          {}", relayer_restarts);
    println!("devnet restarts           {}", devnet_restarts);
    println!("faults injected           {faults}");
    println!("fault-free rate           {free_rate:.1} records/s");
    println!("written under faults      {fault_written} ({fault_rate:.1} records/s, {:.0}% of fault-free)", ratio * 100.0);
    println!("time to drain             {drain_secs:.1} s");

    let mut failed = Vec::new();
    if lost > 0 {
        failed.push(format!("{lost} accepted records lost"));
    }
    if duplicates > 0 {
        failed.push(format!("{duplicates} duplicates"));
    }
    if ratio < args.min_ratio {
        failed.push(format!(
            "under faults {fault_rate:.1}/s, less than {} of the fault-free {free_rate:.1}/s",
            args.min_ratio
        ));
    }
    if failed.is_empty() {
        println!("PASS");
        // A passing run leaves nothing behind in a directory of its own making (its databases
        // and logs are kept for a failing one); in a `--dir` of the caller's, the logs stay.
        if args.dir.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            let _ = std::fs::remove_dir_all(dir.join("relayer"));
        }
        Ok(())
    } else {
        println!("FAIL: {}", failed.join("; "));
        std::process::exit(1);
    }
}
