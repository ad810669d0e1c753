//! The user-visible cost of the client with its default settings: how long a write
//! takes to `written` and to resolution for `minAnonymity` 1 and 3, and how many JSON-RPC
//! requests an idle session makes a minute (docs/BENCHMARKS.md, "Client: user-visible cost").
//!
//! ```text
//! cargo run --release --example client_cost             # 5 writes per minAnonymity, 3 idle minutes (about 4 min)
//! cargo run --release --example client_cost -- --quick  # 3 writes each, 1 idle minute (about 2 min)
//! ```
//!
//! Started here on loopback (`privsvc_testkit::LocalStack`, every party behind a recording tap):
//! the devnet with a block every 2 s, relayers A and B with the batching defaults of
//! `privsvc_relayer::RelayerConfig` (`MIN_BATCH=8`, `MAX_WAIT_MS=30000`, `FLUSH_JITTER_MS=1000`,
//! `MIN_INTERVAL_BLOCKS=1`), `TOKENS=off` (a write spends a token only once it is 60 s old and
//! the default first refill comes within 10 minutes, so a fresh session's first writes go to
//! relayers without tokens anyway), `OHTTP=on`, and the OHTTP relay.
//!
//! Every client is built as an application builds one, with the defaults: `SessionSchedule`
//! (a tail every 15 to 45 s), a random delay of 0 to 20 s before each submission, status polls
//! every 2 s, relayers discovered from heartbeats, every relayer call through the OHTTP relay.
//! Each client has its own source address (127.0.1.x), so the RPC tap tells them apart.
//! - Other users (the crowd) write to the same project at random moments, `--crowd-per-min`
//!   records a minute in all, so that batches can reach 3.
//! - The user's `minAnonymity` 1 session and `minAnonymity` 3 session each start a write every
//!   `--spacing` seconds. A transport wrapper notes when the relayer's status answer first says
//!   `written`; `create_entity` returning is the resolution.
//! - Meanwhile an idle session does nothing; its JSON-RPC requests are counted for
//!   `--idle-secs` after it was built, and grouped into tails (bursts more than 5 s apart).
//!
//! Log level: `RUST_LOG` (default `warn`).

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use async_trait::async_trait;
use clap::Parser;
use privsvc::client::{CreateParams, Expires, LocalWallet, PrivateClient};
use privsvc::devnet::BlockTime;
use privsvc::ledger::{LedgerReader, RpcLedger};
use privsvc::ohttp::{
    OhttpTransport, RelayerRequest, RelayerResponse, Transport, TransportError, SILENCE_OHTTP_LOGS,
};
use privsvc_testkit::{LocalStack, RelayerSpec};
use rand::Rng;

/// The app (key namespace and `project` attribute).
const APP: &str = "notes";
/// Arkiv's block time.
const BLOCK_TIME: Duration = Duration::from_secs(2);
/// RPC requests of one session closer together than this belong to one tail.
const TAIL_GAP: Duration = Duration::from_secs(5);
/// The write phase must end within this time.
const WRITE_LIMIT: Duration = Duration::from_secs(330);

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "Measure the client's user-visible cost with its default settings")]
struct Args {
    /// 3 writes per minAnonymity 10 s apart, 1 idle minute.
    #[arg(long)]
    quick: bool,
    /// Writes per minAnonymity (default 5; 3 with --quick).
    #[arg(long)]
    writes: Option<usize>,
    /// Seconds between the starts of two writes of one session (default 20; 10 with --quick).
    #[arg(long)]
    spacing: Option<u64>,
    /// Seconds the idle session is watched (default 180; 60 with --quick).
    #[arg(long)]
    idle_secs: Option<u64>,
    /// Records a minute the other users write to the project, in all (Poisson).
    #[arg(long, default_value_t = 12.0)]
    crowd_per_min: f64,
}

/// A relayer with the defaults of `privsvc_relayer::RelayerConfig` (the environment variables named),
/// except `TOKENS=off` and `OHTTP=on`.
fn relayer(name: &str) -> RelayerSpec {
    RelayerSpec::new(name).ohttp().with(|c| {
        // OHTTP_RELAY_IPS: the relay (through its tap) is not counted per address.
        c.limits.ohttp_relay_ips = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
        c.batching.min_batch = 8; // MIN_BATCH
        c.batching.max_wait = Duration::from_millis(30_000); // MAX_WAIT_MS
        c.batching.flush_jitter = Duration::from_millis(1_000); // FLUSH_JITTER_MS
        c.batching.min_interval_blocks = 1; // MIN_INTERVAL_BLOCKS
        c.batching.max_batch = 100; // MAX_BATCH
        c.batching.max_min_anonymity = 50; // MAX_MIN_ANONYMITY
        c.batching.max_hold = Duration::from_secs(600); // MAX_HOLD_MS
        c.limits.submissions_per_min = 30; // RATE_LIMIT_PER_MIN
    })
}

/// When the relayer's answers about each submission arrived, as the client saw them.
#[derive(Default)]
struct Seen {
    /// Owner (lower-case hex) of each accepted submission: its id and when the 202 arrived.
    submitted: HashMap<String, (String, Instant)>,
    /// Submission id: when a status answer first said `written`.
    written: HashMap<String, Instant>,
}

/// The client's OHTTP transport, noting when submissions were accepted and written.
struct Timed {
    inner: OhttpTransport,
    seen: Arc<Mutex<Seen>>,
}

fn json(bytes: &[u8]) -> Option<serde_json::Value> {
    serde_json::from_slice(bytes).ok()
}

#[async_trait]
impl Transport for Timed {
    async fn send(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, TransportError> {
        let owner = (request.method == "POST" && request.path == "/v1/records")
            .then(|| request.body.as_deref().and_then(json))
            .flatten()
            .and_then(|v| v["owner"].as_str().map(str::to_lowercase));
        let status_of = request
            .path
            .strip_prefix("/v1/records/")
            .map(str::to_string);
        let answer = self.inner.send(relayer_url, request).await?;
        let now = Instant::now();
        let body = json(&answer.body);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some(owner), Some(id)) = (owner, body.as_ref().and_then(|v| v["id"].as_str())) {
            seen.submitted.insert(owner, (id.to_string(), now));
        }
        if let (Some(id), Some("written")) =
            (status_of, body.as_ref().and_then(|v| v["state"].as_str()))
        {
            seen.written.entry(id).or_insert(now);
        }
        Ok(answer)
    }

    fn uses_gateway_keys(&self) -> bool {
        self.inner.uses_gateway_keys()
    }

    fn bind_relayer(
        &self,
        relayer_url: &str,
        account: alloy_primitives::Address,
        gateway_key: Option<&str>,
    ) -> Result<(), TransportError> {
        self.inner.bind_relayer(relayer_url, account, gateway_key)
    }
}

/// One user's network identity: a source address of its own for the ledger and the relay.
fn http_from(ip: IpAddr) -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .local_address(ip)
        .timeout(Duration::from_secs(30))
        .build()?)
}

fn user_ip(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 1, n))
}

/// A client with every default but `min_anonymity`, `delay` when given, its source address and
/// the timing transport.
async fn client(
    stack: &LocalStack,
    ip: IpAddr,
    min_anonymity: u64,
    delay_ms: Option<(u64, u64)>,
) -> Result<(PrivateClient, Arc<Mutex<Seen>>)> {
    let http = http_from(ip)?;
    let reader: Arc<dyn LedgerReader> =
        Arc::new(RpcLedger::with_client(http.clone(), stack.rpc_url()));
    let relay = stack.relay_url().context("the stack has no OHTTP relay")?;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let transport = Timed {
        inner: OhttpTransport::new(&relay, reader.clone())?.with_client(http),
        seen: seen.clone(),
    };
    let mut b = PrivateClient::builder(APP)
        .wallet(Arc::new(LocalWallet::random()))
        .reader(reader)
        .ohttp_relay(relay)
        .transport(Arc::new(transport))
        .min_anonymity(min_anonymity);
    if let Some((lo, hi)) = delay_ms {
        b = b.delay_ms(lo, hi);
    }
    Ok((b.build().await?, seen))
}

/// One measured write.
#[derive(Debug, Clone)]
struct Timing {
    /// From the call to the relayer's 202 (seal and the random delay, then the submission).
    accepted: Duration,
    /// From the call to the first status answer saying `written`.
    written: Duration,
    /// From the call to `create_entity` returning.
    resolved: Duration,
    batch_size: u64,
}

/// The user's session with `min_anonymity`: `n` writes started `spacing` apart.
async fn measure(
    stack: &LocalStack,
    ip: IpAddr,
    min_anonymity: u64,
    n: usize,
    spacing: Duration,
) -> Result<Vec<Result<Timing, String>>> {
    let (user, seen) = client(stack, ip, min_anonymity, None).await?;
    let user = Arc::new(user);
    let mut tasks = Vec::new();
    for i in 0..n {
        let (user, seen) = (user.clone(), seen.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(spacing * i as u32).await;
            let params = CreateParams::new(
                format!("measured write {i}, minAnonymity {min_anonymity}").into_bytes(),
                "text/plain",
                Expires::Hours(1),
            );
            let t0 = Instant::now();
            let r = user.create_entity(params).await;
            let resolved = t0.elapsed();
            let r = r.map_err(|e| e.to_string())?;
            let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            let owner = r.owner.to_string().to_lowercase();
            let (id, accepted_at) = seen
                .submitted
                .get(&owner)
                .cloned()
                .ok_or("no accepted submission seen")?;
            let written_at = seen
                .written
                .get(&id)
                .copied()
                .ok_or("no written status seen")?;
            Ok(Timing {
                accepted: accepted_at.duration_since(t0),
                written: written_at.duration_since(t0),
                resolved,
                batch_size: r.batch_size,
            })
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap_or_else(|e| Err(format!("task failed: {e}"))));
    }
    Ok(out)
}

/// Other users: records written to the project at random moments (a Poisson process of
/// `per_min` a minute), each submitted at once and forgotten.
fn start_crowd(
    user: Arc<PrivateClient>,
    per_min: f64,
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut n = 0u64;
        while !stop.load(Ordering::SeqCst) {
            let u: f64 = rand::thread_rng().gen_range(f64::EPSILON..1.0);
            tokio::time::sleep(Duration::from_secs_f64(-u.ln() * 60.0 / per_min)).await;
            n += 1;
            let (user, written) = (user.clone(), written.clone());
            tokio::spawn(async move {
                let params = CreateParams::new(
                    format!("crowd record {n}").into_bytes(),
                    "text/plain",
                    Expires::Hours(1),
                );
                match user.create_entity(params).await {
                    Ok(_) => {
                        written.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => eprintln!("  a crowd write failed: {e}"),
                }
            });
        }
    })
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    match v.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2,
    }
}

fn report(min_anonymity: u64, results: &[Result<Timing, String>]) -> bool {
    let ok: Vec<&Timing> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    println!();
    println!(
        "minAnonymity {min_anonymity}: {} of {} writes resolved",
        ok.len(),
        results.len()
    );
    for (i, r) in results.iter().enumerate() {
        match r {
            Ok(t) => println!(
                "  write {i}: accepted {:>6}  written {:>6}  resolved {:>6}  batch {}",
                secs(t.accepted),
                secs(t.written),
                secs(t.resolved),
                t.batch_size
            ),
            Err(e) => println!("  write {i}: FAILED: {e}"),
        }
    }
    if ok.is_empty() {
        return false;
    }
    let col = |f: fn(&Timing) -> Duration| -> (Duration, Duration) {
        let v: Vec<Duration> = ok.iter().map(|t| f(t)).collect();
        let max = v.iter().copied().max().unwrap_or_default();
        (median(v), max)
    };
    let (am, ax) = col(|t| t.accepted);
    let (wm, wx) = col(|t| t.written);
    let (rm, rx) = col(|t| t.resolved);
    let (qm, qx) = col(|t| t.written.saturating_sub(t.accepted));
    let (tm, tx) = col(|t| t.resolved.saturating_sub(t.written));
    println!(
        "  median / max: to written {} / {}, to resolution {} / {}",
        secs(wm),
        secs(wx),
        secs(rm),
        secs(rx)
    );
    println!(
        "  parts (median / max): call to 202 (random delay) {} / {}, 202 to written (batching, block, poll) {} / {}, written to resolution {} / {}",
        secs(am),
        secs(ax),
        secs(qm),
        secs(qx),
        secs(tm),
        secs(tx)
    );
    ok.len() == results.len()
}

/// The JSON-RPC method names of one request body (a batch counts each call).
fn methods(body: &[u8]) -> Vec<String> {
    match json(body) {
        Some(serde_json::Value::Array(calls)) => calls
            .iter()
            .map(|c| c["method"].as_str().unwrap_or("?").to_string())
            .collect(),
        Some(v) => vec![v["method"].as_str().unwrap_or("?").to_string()],
        None => vec!["?".into()],
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(format!(
            "{filter},{SILENCE_OHTTP_LOGS}"
        )))
        .init();
    match run(Args::parse()).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            println!();
            println!("FAILED: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> Result<bool> {
    let started = Instant::now();
    let n = args.writes.unwrap_or(if args.quick { 3 } else { 5 });
    let spacing = Duration::from_secs(args.spacing.unwrap_or(if args.quick { 10 } else { 20 }));
    let idle = Duration::from_secs(args.idle_secs.unwrap_or(if args.quick { 60 } else { 180 }));

    let stack = LocalStack::builder()
        .block_time(BlockTime::Interval(BLOCK_TIME))
        .record_traffic()
        .relayer(relayer("A"))
        .relayer(relayer("B"))
        .ohttp_relay()
        .start()
        .await
        .context("starting the stack")?;
    println!("privsvc client cost: the whole stack on loopback, the client with its defaults");
    println!(
        "  devnet: a block every {} s; relayers A and B: MIN_BATCH=8 MAX_WAIT_MS=30000 FLUSH_JITTER_MS=1000 MIN_INTERVAL_BLOCKS=1 MAX_BATCH=100 TOKENS=off OHTTP=on; OHTTP relay",
        BLOCK_TIME.as_secs()
    );
    println!(
        "  client: default SessionSchedule (tail every 15-45 s, status polls 0-60 s after written), delay 0-20 s, polls every 2 s, through the OHTTP relay"
    );
    println!(
        "  load: other users write {} records a minute to the project; the user starts a write every {} s in a minAnonymity 1 and a minAnonymity 3 session ({n} each); an idle session is watched for {} s",
        args.crowd_per_min,
        spacing.as_secs(),
        idle.as_secs()
    );
    println!("  stack ready in {}", secs(started.elapsed()));

    // The idle session first, so that its watch covers the whole write phase.
    let idle_ip = user_ip(10);
    let (idle_client, _) = client(&stack, idle_ip, 1, None).await?;
    let idle_from = Instant::now();

    let stop = Arc::new(AtomicBool::new(false));
    let crowd_written = Arc::new(AtomicU64::new(0));
    let (crowd, _) = client(&stack, user_ip(200), 1, Some((0, 0))).await?;
    let crowd_task = start_crowd(
        Arc::new(crowd),
        args.crowd_per_min,
        stop.clone(),
        crowd_written.clone(),
    );

    let writes = async {
        tokio::join!(
            measure(&stack, user_ip(1), 1, n, spacing),
            measure(&stack, user_ip(3), 3, n, spacing)
        )
    };
    let (k1, k3) = tokio::time::timeout(WRITE_LIMIT, writes)
        .await
        .map_err(|_| {
            anyhow!(
                "the writes did not resolve within {} s",
                WRITE_LIMIT.as_secs()
            )
        })?;
    let (k1, k3) = (k1?, k3?);
    let writes_done = started.elapsed();
    let ok1 = report(1, &k1);
    let ok3 = report(3, &k3);

    // The idle session: its requests from `idle_from` for `idle`.
    let left = (idle_from + idle).saturating_duration_since(Instant::now());
    tokio::time::sleep(left).await;
    stop.store(true, Ordering::SeqCst);
    crowd_task.abort();
    let until = idle_from + idle;
    let rpc = stack.tap("rpc").context("no RPC tap")?.exchanges();
    let mine: Vec<_> = rpc.iter().filter(|e| e.request.source == idle_ip).collect();
    let startup = mine.iter().filter(|e| e.at < idle_from).count();
    let watched: Vec<_> = mine
        .iter()
        .filter(|e| e.at >= idle_from && e.at < until)
        .collect();
    let mut by_method: BTreeMap<String, usize> = BTreeMap::new();
    let mut calls = 0;
    for e in &watched {
        for m in methods(&e.request.body) {
            calls += 1;
            *by_method.entry(m).or_default() += 1;
        }
    }
    let mut tails = 0;
    let mut last: Option<Instant> = None;
    for e in &watched {
        if last.is_none_or(|l| e.at.duration_since(l) > TAIL_GAP) {
            tails += 1;
        }
        last = Some(e.at);
    }
    let minutes = idle.as_secs_f64() / 60.0;
    println!();
    println!(
        "Idle session ({idle_ip}): {startup} RPC requests to start (discovery, first listing), then {} in {} s: {:.1} a minute, {} tails, {:.1} requests a tail ({} JSON-RPC calls)",
        watched.len(),
        idle.as_secs(),
        watched.len() as f64 / minutes,
        tails,
        if tails > 0 {
            watched.len() as f64 / tails as f64
        } else {
            0.0
        },
        calls
    );
    let breakdown: Vec<String> = by_method.iter().map(|(m, c)| format!("{m} {c}")).collect();
    println!("  methods: {}", breakdown.join(", "));
    drop(idle_client);

    println!();
    println!(
        "Crowd: {} records written; relayers: A {} batches, B {} batches; writes done at {}, total run {}",
        crowd_written.load(Ordering::SeqCst),
        stack.relayer("A").health().await.batches,
        stack.relayer("B").health().await.batches,
        secs(writes_done),
        secs(started.elapsed())
    );
    stack.shutdown().await;
    Ok(ok1 && ok3)
}
