//! Reliability campaign (issues 13 and 32): a real devnet and a real relayer as separate
//! processes, load from several concurrent writers through the relayer's HTTP API, SIGKILLs of
//! the relayer, a fault-injecting proxy between relayer and ledger with two devnet kills, then
//! the faults of a real machine (a partition from the ledger, a wall clock that steps, a disk
//! that fills, a database file that rots), then a drain and a check from the ledger alone.
//!
//! ```text
//! cargo run --example campaign -- --kills 10 --fault-secs 60 --partition-secs 20 --full-secs 15   # short form (tests)
//! cargo run --example campaign -- --kills 50 --fault-secs 180 --partition-secs 300 --full-secs 60 # full form (docs/RELIABILITY.md)
//! ```
//!
//! Phases, each bounded (count and time, under 10 minutes):
//! 1. fault-free baseline (`--free-secs`): records written per second;
//! 2. `--kills` SIGKILLs of the relayer at random moments 0.2 to 3 s apart, each followed by a
//!    restart on the same data directory;
//! 3. `--fault-secs` with a proxy failing 20% of ledger calls (HTTP 500, dropped connection,
//!    delay past the relayer's request timeout, transaction applied but answer lost) and the
//!    devnet SIGKILLed and restarted (same `--db`) twice;
//! 4. a partition of `--partition-secs` between the relayer and the ledger (the proxy answers
//!    nothing), then the time until the queue is back to its steady length;
//! 5. the relayer's wall clock stepped with libfaketime (its process only; its monotonic clock
//!    and the devnet's clock untouched): 2 hours back with two records queued (written within
//!    their batch window), 2 hours forward (no status within its retention lost), an hour slow
//!    (envelopes within an hour of their bound by the ledger's time failed, not written);
//! 6. `DATA_DIR` (a tmpfs the campaign mounts, so it must run as root) filled to its last byte
//!    while a backlog is being written, for `--full-secs`: submissions get 503 with
//!    `Retry-After`, `/healthz` says why, no status says `queued` for a record on the ledger, and
//!    once space is back every mined record is recorded without a restart;
//! 7. the database damaged while the relayer is down: a flipped bit in five stored envelopes
//!    (failed, never written) and a broken b-tree page (the relayer refuses to start, naming
//!    the file), then the backup restored;
//! 8. drain (writers stopped, faults off) and check from the ledger: every 202-accepted record
//!    written exactly once, no one-time owner with two entities, no envelope twice, requests
//!    whose answer was lost written at most once, and the campaign's own records of phases 5
//!    and 7 written or not as they must be.
//!
//! Exits non-zero on any loss, duplicate or failed check, or when less than `--min-ratio`
//! (default one half) of the fault-free rate was written under faults. All traffic stays on
//! 127.0.0.1. The binaries are built first with `cargo build --example devnet --example
//! relayer` (same target directory; `--no-build` skips it). Phase 5 needs libfaketime (`apt-get
//! install faketime`); phase 6 needs root, or `--skip-disk-full`, which the run then reports.

#[path = "../crates/privsvc-relayer/tests/common/faultproxy.rs"]
mod faultproxy;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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
use privsvc_testkit::{damage, ProcessSpec, ProcessStack};
use rand::Rng;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The app and project of the campaign's records.
const APP: &str = "campaign";

/// The relayer's `STATUS_RETENTION_MS` while its clock is stepped: short, so that pruning runs
/// every 15 s and a forward step has its chance to prune early.
const CLOCK_PHASE_RETENTION_MS: u64 = 60_000;

/// The relayer's `MIN_FREE_BYTES` in the campaign (its tmpfs is small).
const MIN_FREE_BYTES: u64 = 4 * 1024 * 1024;

/// The size of the tmpfs under `DATA_DIR` outside phase 6.
const TMPFS_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// The exact queue length at or below which the relayer has caught up (a few batches of the
/// writers' steady load).
const CAUGHT_UP: u64 = 200;

/// Command-line options.
#[derive(Parser, Debug, Clone)]
#[command(
    about = "privsvc reliability campaign: kill -9s, ledger faults, a partition, clock steps, a full disk and a damaged database, checked from the ledger"
)]
struct Args {
    /// SIGKILLs of the relayer in phase 2.
    #[arg(long, default_value_t = 50)]
    kills: u32,
    /// Seconds of ledger faults in phase 3.
    #[arg(long, default_value_t = 180)]
    fault_secs: u64,
    /// Seconds of the partition from the ledger in phase 4.
    #[arg(long, default_value_t = 300)]
    partition_secs: u64,
    /// Seconds `DATA_DIR` stays full in phase 6.
    #[arg(long, default_value_t = 60)]
    full_secs: u64,
    /// Leave out phase 6 (the full disk), which mounts a tmpfs and so needs root.
    #[arg(long)]
    skip_disk_full: bool,
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

/// The phases, for the figures of each.
const PHASES: [&str; 8] = [
    "baseline",
    "relayer SIGKILLs",
    "ledger faults",
    "partition",
    "clock steps",
    "disk full",
    "damaged database",
    "drain",
];
const PARTITION: usize = 3;
const CLOCK: usize = 4;
const DISK: usize = 5;
const DAMAGE: usize = 6;
const DRAIN: usize = 7;

/// Where the devnet and relayer examples are: next to this example's own binary.
fn examples_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the campaign binary")?;
    Ok(exe
        .parent()
        .context("the campaign binary has no directory")?
        .to_path_buf())
}

/// A record a writer got 202 for.
#[derive(Clone)]
struct Accepted {
    owner: Address,
    id: String,
    phase: usize,
}

/// What the writers saw.
#[derive(Default)]
struct Tally {
    accepted: Mutex<Vec<Accepted>>,
    /// Owners of requests whose answer was lost (may or may not be accepted).
    unanswered: Mutex<Vec<Address>>,
    refused: AtomicU64,
    /// 503 answers, and those of them without `Retry-After`.
    unavailable: AtomicU64,
    no_retry_after: AtomicU64,
}

/// What steers the writers.
struct Control {
    /// The relayer's URL (a restart may move it to another port).
    url: Mutex<String>,
    stop: AtomicBool,
    paused: AtomicBool,
    phase: AtomicUsize,
}

/// A submit body sealed as if at `hour`, and its owner.
fn record_body_at(hour: u64) -> (Value, Address) {
    let key = SigningKey::random(&mut rand::thread_rng());
    let owner = Address::from_public_key(key.verifying_key());
    let mut attrs = Attributes::new();
    attrs.insert("project", APP).expect("valid attribute");
    let mut data = [0u8; 16];
    rand::thread_rng().fill(&mut data);
    let body = EnvelopeBody {
        app: APP.into(),
        exp: 86_400,
        hour,
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

/// The hour of the real clock (the writers', the devnet's).
fn real_hour() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    privsvc::envelope::hour_of(now)
}

fn record_body() -> (Value, Address) {
    record_body_at(real_hour())
}

async fn writer(ctl: Arc<Control>, pace: Duration, tally: Arc<Tally>) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client");
    // Bounded: at most one submission per pace for at most an hour.
    let deadline = Instant::now() + Duration::from_secs(3_600);
    while !ctl.stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        if ctl.paused.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let phase = ctl.phase.load(Ordering::SeqCst);
        let (body, owner) = record_body();
        let url = ctl.url.lock().unwrap().clone();
        match http
            .post(format!("{url}/v1/records"))
            .json(&body)
            .send()
            .await
        {
            Ok(r) if r.status().as_u16() == 202 => {
                let id = r
                    .json::<Value>()
                    .await
                    .ok()
                    .and_then(|v| v["id"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                tally
                    .accepted
                    .lock()
                    .unwrap()
                    .push(Accepted { owner, id, phase });
            }
            Ok(r) => {
                if r.status().as_u16() == 503 {
                    tally.unavailable.fetch_add(1, Ordering::SeqCst);
                    if r.headers().get("retry-after").is_none() {
                        tally.no_retry_after.fetch_add(1, Ordering::SeqCst);
                    }
                }
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

/// The owners of the campaign's records on the ledger (a lighter read than
/// [`ledger_records`]: no payloads).
async fn ledger_owners(devnet_url: &str, relayer: Address) -> anyhow::Result<HashSet<Address>> {
    let ledger = RpcLedger::with_timeout(devnet_url, Duration::from_secs(30))?;
    let expr = format!("$creator = addr({relayer}) AND project = str('{APP}')");
    let select = Select {
        key: true,
        owner: true,
        ..Select::default()
    };
    let mut last = None;
    for _ in 0..20 {
        match query_all(&ledger, &expr, &select, None).await {
            Ok(es) => return Ok(es.into_iter().filter_map(|e| e.owner).collect()),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    bail!("cannot read the ledger: {last:?}")
}

async fn written_count(devnet_url: &str, relayer: Address) -> anyhow::Result<usize> {
    Ok(ledger_records(devnet_url, relayer).await?.len())
}

/// The exact health record from the relayer's `METRICS_BIND` listener at `url`.
async fn exact_health(url: &str) -> Option<Value> {
    reqwest::Client::new()
        .get(format!("{url}/healthz"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()
}

/// The exact queue length from the relayer's `METRICS_BIND` listener at `url`.
async fn queue_len(url: &str) -> Option<u64> {
    exact_health(url).await?["queue"].as_u64()
}

fn random_pause() -> Duration {
    Duration::from_millis(rand::thread_rng().gen_range(200..=3_000))
}

/// A tmpfs mounted under the relayer's `DATA_DIR`, unmounted when dropped.
struct Tmpfs {
    at: PathBuf,
}

impl Tmpfs {
    fn mount(at: &Path, bytes: u64) -> anyhow::Result<Tmpfs> {
        std::fs::create_dir_all(at)?;
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={bytes},mode=0700"))
            .arg("privsvc-campaign")
            .arg(at)
            .status()
            .context("running mount")?;
        if !status.success() {
            bail!("mount -t tmpfs on {} failed", at.display());
        }
        Ok(Tmpfs {
            at: at.to_path_buf(),
        })
    }

    fn resize(&self, bytes: u64) -> anyhow::Result<()> {
        let status = std::process::Command::new("mount")
            .arg("-o")
            .arg(format!("remount,size={bytes}"))
            .arg(&self.at)
            .status()
            .context("running mount -o remount")?;
        if !status.success() {
            bail!("resizing the tmpfs on {} failed", self.at.display());
        }
        Ok(())
    }

    /// Bytes its files take (allocated blocks).
    fn used(&self) -> anyhow::Result<u64> {
        use std::os::unix::fs::MetadataExt;
        let mut used = 0;
        for entry in std::fs::read_dir(&self.at)? {
            used += entry?.metadata()?.blocks() * 512;
        }
        Ok(used)
    }

    /// Fills it to its last byte with a file `filler`; returns the bytes written.
    fn fill(&self) -> anyhow::Result<u64> {
        use std::io::Write;
        let mut f = std::fs::File::create(self.at.join("filler"))?;
        let mut written = 0u64;
        for chunk in [1 << 20, 4096] {
            let block = vec![0x5a_u8; chunk];
            while f.write_all(&block).is_ok() {
                written += chunk as u64;
            }
        }
        Ok(written)
    }

    fn unfill(&self) -> anyhow::Result<()> {
        Ok(std::fs::remove_file(self.at.join("filler"))?)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.at)
            .status();
    }
}

/// What must become of one of the campaign's own records.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    Written,
    NotWritten,
}

/// What was measured of one phase besides the ledger's figures.
#[derive(Default, Clone)]
struct PhaseNote {
    recovery_secs: Option<f64>,
    note: String,
}

/// The run: the stack, the proxy, the writers' control and the checks.
struct Run {
    args: Args,
    stack: ProcessStack,
    proxy: faultproxy::FaultProxy,
    devnet_url: String,
    relayer_address: Address,
    ctl: Arc<Control>,
    tally: Arc<Tally>,
    http: reqwest::Client,
    /// The campaign's own records: owner, what must become of it, phase.
    own: Vec<(Address, Expect, usize)>,
    notes: Vec<PhaseNote>,
    failed: Vec<String>,
    tmpfs: Option<Tmpfs>,
    relayer_restarts: u64,
}

impl Run {
    fn url(&self) -> String {
        self.ctl.url.lock().unwrap().clone()
    }

    fn enter(&self, phase: usize) {
        self.ctl.phase.store(phase, Ordering::SeqCst);
    }

    fn note(&mut self, phase: usize, recovery: Option<Duration>, note: String) {
        println!("  {note}");
        self.notes[phase] = PhaseNote {
            recovery_secs: recovery.map(|d| d.as_secs_f64()),
            note,
        };
    }

    /// Pause the writers and let their requests in flight end.
    async fn pause_writers(&self) {
        self.ctl.paused.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    /// SIGKILL the relayer and start it again behind the proxy.
    async fn restart_relayer(&mut self) -> anyhow::Result<()> {
        self.stack.kill_relayer();
        self.stack.start_relayer(&self.proxy.url).await?;
        *self.ctl.url.lock().unwrap() = self.stack.relayer_url();
        self.relayer_restarts += 1;
        Ok(())
    }

    /// Wait until the relayer's wall clock, as its heartbeats show it (`lastBeat`, every 2 s),
    /// runs `offset_secs` off the real clock.
    async fn relayer_clock_at(&self, offset_secs: i64) -> anyhow::Result<()> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            let real = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis() as i64;
            if let Some(beat) = exact_health(&self.stack.metrics_url())
                .await
                .and_then(|h| h["lastBeat"].as_i64())
            {
                if (beat - real - offset_secs * 1_000).abs() < 10_000 {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        bail!("the relayer's clock did not move to {offset_secs:+} s (libfaketime)")
    }

    /// Submit one of the campaign's own records; its id.
    async fn submit_own(
        &mut self,
        body: &Value,
        owner: Address,
        expect: Expect,
    ) -> anyhow::Result<String> {
        let r = self
            .http
            .post(format!("{}/v1/records", self.url()))
            .json(body)
            .send()
            .await?;
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        if status.as_u16() != 202 {
            bail!("a campaign record was refused: {status} {v}");
        }
        self.own
            .push((owner, expect, self.ctl.phase.load(Ordering::SeqCst)));
        Ok(v["id"].as_str().unwrap_or_default().to_string())
    }

    async fn status(&self, id: &str) -> (u16, Value) {
        match self
            .http
            .get(format!("{}/v1/records/{id}", self.url()))
            .send()
            .await
        {
            Ok(r) => (r.status().as_u16(), r.json().await.unwrap_or(Value::Null)),
            Err(_) => (0, Value::Null),
        }
    }

    /// Poll until every record of `ids` is in `state`; how long that took, or `None` after
    /// `within`.
    async fn wait_states(&self, ids: &[String], state: &str, within: Duration) -> Option<Duration> {
        let start = Instant::now();
        let mut rest: Vec<&String> = ids.iter().collect();
        while start.elapsed() < within {
            let mut still = Vec::new();
            for id in rest {
                if self.status(id).await.1["state"] != state {
                    still.push(id);
                }
            }
            rest = still;
            if rest.is_empty() {
                return Some(start.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    }

    /// Wait until the exact queue holds at most `queue` records; how long that took.
    async fn queue_down_to(&self, queue: u64, within: Duration) -> Option<Duration> {
        let start = Instant::now();
        while start.elapsed() < within {
            if queue_len(&self.stack.metrics_url())
                .await
                .is_some_and(|q| q <= queue)
            {
                return Some(start.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        None
    }

    /// Statuses of `records` that say `queued` although their owner has held an entity on the
    /// ledger for 5 s (time enough for the relayer to see the batch's receipt: a batch in
    /// flight is `queued` until then), and how many of them did not answer 200.
    async fn queued_but_on_ledger(&self, records: &[Accepted]) -> anyhow::Result<(usize, usize)> {
        let owners = ledger_owners(&self.devnet_url, self.relayer_address).await?;
        let on_ledger: Vec<&Accepted> = records
            .iter()
            .filter(|a| owners.contains(&a.owner))
            .collect();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (mut wrong, mut unknown) = (0, 0);
        for a in on_ledger {
            let (code, v) = self.status(&a.id).await;
            if code != 200 {
                unknown += 1;
            } else if v["state"] == "queued" {
                wrong += 1;
            }
        }
        Ok((wrong, unknown))
    }

    /// Phase 4: a partition between the relayer and the ledger.
    async fn partition(&mut self) -> anyhow::Result<()> {
        let secs = self.args.partition_secs;
        println!("phase 4: a partition of {secs} s between the relayer and the ledger");
        self.enter(PARTITION);
        self.proxy.state.set_partitioned(true);
        let start = Instant::now();
        let mut failing_seen = false;
        while start.elapsed() < Duration::from_secs(secs) {
            if let Some(h) = exact_health(&self.stack.metrics_url()).await {
                failing_seen |= h["ledgerFailing"] == true && h["ok"] == false;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // The backlog alone: how long the relayer takes to write it once the ledger is back.
        self.pause_writers().await;
        let backlog = queue_len(&self.stack.metrics_url()).await.unwrap_or(0);
        self.proxy.state.set_partitioned(false);
        let recovery = self.queue_down_to(0, Duration::from_secs(540)).await;
        self.ctl.paused.store(false, Ordering::SeqCst);
        let held = self.proxy.state.held.load(Ordering::SeqCst);
        if recovery.is_none() {
            self.failed.push(
                "the relayer did not write its backlog within 9 minutes of the partition".into(),
            );
        }
        if !failing_seen && secs >= 20 {
            self.failed
                .push("/healthz never said ledgerFailing during the partition".into());
        }
        let note = format!(
            "{held} ledger calls unanswered; ledgerFailing seen: {failing_seen}; a backlog of {backlog} records written {:.1} s after the partition (writers paused meanwhile)",
            recovery.map_or(f64::NAN, |d| d.as_secs_f64())
        );
        self.note(PARTITION, recovery, note);
        Ok(())
    }

    /// Phase 5: the relayer's wall clock stepped back, forward, and an hour slow.
    async fn clock_steps(&mut self) -> anyhow::Result<()> {
        println!("phase 5: the relayer's wall clock stepped (libfaketime): 2 h back, 2 h forward, 1 h slow");
        self.enter(CLOCK);
        self.pause_writers().await;
        self.stack.fake_relayer_clock(true)?;
        self.stack
            .set_relayer_env("STATUS_RETENTION_MS", &CLOCK_PHASE_RETENTION_MS.to_string());
        // A batch window longer than libfaketime's second before the relayer sees a step.
        self.stack.set_relayer_env("MAX_WAIT_MS", "5000");
        self.restart_relayer().await?;
        if self
            .queue_down_to(0, Duration::from_secs(120))
            .await
            .is_none()
        {
            bail!("the relayer's queue did not empty before the clock steps");
        }

        // Two records, fewer than MIN_BATCH, nothing after them: they wait for their window
        // (MAX_WAIT_MS, 5 s here), which a step back of 2 hours must not move.
        let mut two = Vec::new();
        for _ in 0..2 {
            let (b, owner) = record_body();
            two.push(self.submit_own(&b, owner, Expect::Written).await?);
        }
        self.stack.set_relayer_clock_offset(-7_200)?;
        let back = self
            .wait_states(&two, "written", Duration::from_secs(60))
            .await;
        self.relayer_clock_at(-7_200).await?;
        match back {
            Some(d) if d <= Duration::from_secs(15) => {}
            Some(d) => self.failed.push(format!(
                "after a step back of 2 h, 2 queued records took {:.1} s (window 5 s)",
                d.as_secs_f64()
            )),
            None => self
                .failed
                .push("after a step back of 2 h, 2 queued records were not written in 60 s".into()),
        }

        // Forward 2 hours: no status within its retention (60 s) may be pruned.
        self.stack.set_relayer_clock_offset(0)?;
        self.relayer_clock_at(0).await?;
        self.ctl.paused.store(false, Ordering::SeqCst);
        let mark = self.tally.accepted.lock().unwrap().len();
        tokio::time::sleep(Duration::from_secs(20)).await;
        let recent: Vec<Accepted> = self.tally.accepted.lock().unwrap()[mark..].to_vec();
        self.stack.set_relayer_clock_offset(7_200)?;
        self.relayer_clock_at(7_200).await?;
        // Pruning runs every retention / 4 (15 s): at least one pass after the step.
        tokio::time::sleep(Duration::from_secs(16)).await;
        let step = (recent.len() / 400).max(1);
        let sample: Vec<&Accepted> = recent.iter().step_by(step).collect();
        let mut lost = 0;
        for a in &sample {
            if self.status(&a.id).await.0 == 404 {
                lost += 1;
            }
        }
        if lost > 0 {
            self.failed.push(format!(
                "after a step forward of 2 h, {lost} of {} statuses within their retention were gone",
                sample.len()
            ));
        }

        // An hour slow: it accepts envelopes sealed 3 hours before the ledger's hour, whose
        // bound is then less than an hour away by the ledger's time: failed, never written.
        self.stack.set_relayer_clock_offset(-3_600)?;
        self.relayer_clock_at(-3_600).await?;
        let mut late = Vec::new();
        for _ in 0..5 {
            let (b, owner) = record_body_at(real_hour() - 3);
            late.push(self.submit_own(&b, owner, Expect::NotWritten).await?);
        }
        let settled = self
            .wait_states(&late, "failed", Duration::from_secs(60))
            .await;
        let mut too_late = 0;
        for id in &late {
            let v = self.status(id).await.1;
            if v["error"]
                .as_str()
                .is_some_and(|e| e.contains("too late to write"))
            {
                too_late += 1;
            }
        }
        if settled.is_none() || too_late != late.len() {
            self.failed.push(format!(
                "on a relayer 1 h slow, {too_late} of {} envelopes near their bound were failed as too late",
                late.len()
            ));
        }
        self.stack.set_relayer_clock_offset(0)?;
        self.stack.fake_relayer_clock(false)?;
        self.stack.set_relayer_env("STATUS_RETENTION_MS", "3600000");
        self.stack.set_relayer_env("MAX_WAIT_MS", "1000");
        self.restart_relayer().await?;
        let note = format!(
            "2 h back: 2 queued records written {:.1} s after the step (window 5 s); 2 h forward: {} of {} sampled statuses kept; 1 h slow: {too_late} of {} near-bound envelopes failed, not written",
            back.map_or(f64::NAN, |d| d.as_secs_f64()),
            sample.len() - lost,
            sample.len(),
            late.len()
        );
        self.note(CLOCK, back, note);
        Ok(())
    }

    /// Phase 6: `DATA_DIR` full to its last byte while batches are being written.
    async fn disk_full(&mut self) -> anyhow::Result<()> {
        if self.tmpfs.is_none() {
            println!("phase 6: SKIPPED (--skip-disk-full)");
            self.note(DISK, None, "skipped (--skip-disk-full)".into());
            return Ok(());
        }
        let secs = self.args.full_secs;
        println!("phase 6: DATA_DIR full for {secs} s while batches are being written");
        self.enter(DISK);
        let log = self.stack_log_len();
        let unavailable = self.tally.unavailable.load(Ordering::SeqCst);
        let no_retry_after = self.tally.no_retry_after.load(Ordering::SeqCst);
        let db = self.stack.relayer_db();
        // Full at a moment a mined batch is about to be recorded: the write-ahead log emptied
        // first (so that the next commit needs new space), then every byte taken. Again, up to
        // ten times (each held 5 s), until a batch in flight was caught.
        let mut filler = 0;
        let mut caught = 0;
        let mut start = Instant::now();
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let tmpfs = self.tmpfs.as_ref().expect("mounted");
            tmpfs.resize(tmpfs.used()? + 16 * 1024 * 1024)?;
            damage::truncate_wal(&db)?;
            filler = tmpfs.fill()?;
            start = Instant::now();
            tokio::time::sleep(Duration::from_secs(5)).await;
            caught = self.stack_log_count(log, "cannot record a mined batch");
            if caught > 0 {
                break;
            }
            tmpfs.unfill()?;
            tmpfs.resize(TMPFS_BYTES)?;
        }
        let mut reasons: HashSet<String> = HashSet::new();
        let mut not_ok = false;
        while start.elapsed() < Duration::from_secs(secs.max(4)) {
            if let Some(h) = exact_health(&self.stack.metrics_url()).await {
                if h["ok"] == false && h["storeFailing"] == true {
                    not_ok = true;
                    if let Some(r) = h["reason"].as_str() {
                        // The kind of reason, without its figures.
                        reasons.insert(r.split(':').next().unwrap_or(r).to_string());
                    }
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // Every record accepted in this phase (the batch caught in flight is among them).
        let recent: Vec<Accepted> = self
            .tally
            .accepted
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.phase == DISK)
            .cloned()
            .collect();
        let (wrong_full, _) = self.queued_but_on_ledger(&recent).await?;
        if caught > 0 {
            let tmpfs = self.tmpfs.as_ref().expect("mounted");
            tmpfs.unfill()?;
            tmpfs.resize(TMPFS_BYTES)?;
        }
        let back = Instant::now();
        let mut recovery = None;
        while back.elapsed() < Duration::from_secs(120) {
            if exact_health(&self.stack.metrics_url())
                .await
                .is_some_and(|h| h["storeFailing"] == false)
            {
                recovery = Some(back.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        self.queue_down_to(CAUGHT_UP, Duration::from_secs(540))
            .await;
        let (wrong_after, unknown) = self.queued_but_on_ledger(&recent).await?;
        let refused = self.tally.unavailable.load(Ordering::SeqCst) - unavailable;
        let missing = self.tally.no_retry_after.load(Ordering::SeqCst) - no_retry_after;
        if caught == 0 {
            self.failed.push(
                "ten times, the full disk caught no mined batch before it was recorded".into(),
            );
        }
        if !not_ok {
            self.failed
                .push("/healthz never said ok: false while DATA_DIR was full".into());
        }
        if wrong_full + wrong_after > 0 {
            self.failed.push(format!(
                "{} statuses said queued for records on the ledger (disk full: {wrong_full}, after: {wrong_after})",
                wrong_full + wrong_after
            ));
        }
        if refused == 0 || missing > 0 {
            self.failed.push(format!(
                "while DATA_DIR was full: {refused} submissions got 503, {missing} of them without Retry-After"
            ));
        }
        if recovery.is_none() {
            self.failed
                .push("the store still failed 2 minutes after space came back".into());
        }
        let mut reasons: Vec<String> = reasons.into_iter().collect();
        reasons.sort();
        let note = format!(
            "filler {filler} bytes; mined batches the store could not record at first: {caught}, each recorded once space was back, without a restart; {refused} submissions refused with 503 and Retry-After; /healthz not ok, reasons: {}; statuses queued for records on the ledger: {} (of the phase's {}; {unknown} not answered); store healthy {:.1} s after space came back",
            reasons.join(" | "),
            wrong_full + wrong_after,
            recent.len(),
            recovery.map_or(f64::NAN, |d| d.as_secs_f64())
        );
        self.note(DISK, recovery, note);
        Ok(())
    }

    /// Phase 7: the database damaged while the relayer is down.
    async fn damaged_database(&mut self) -> anyhow::Result<()> {
        println!("phase 7: the database damaged while the relayer is down");
        self.enter(DAMAGE);
        self.pause_writers().await;
        // Twenty records that stay queued (the ledger is cut off), then the relayer dies.
        self.proxy.state.set_partitioned(true);
        let mut records = Vec::new();
        for i in 0..20 {
            let (b, owner) = record_body();
            let expect = if i < 5 {
                Expect::NotWritten
            } else {
                Expect::Written
            };
            let id = self.submit_own(&b, owner, expect).await?;
            records.push((id, b));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.stack.kill_relayer();
        self.proxy.state.set_partitioned(false);
        let db = self.stack.relayer_db();
        damage::checkpoint(&db)?;
        // A flipped bit in the middle of five stored envelopes: SQLite cannot see it.
        let mut flipped = 0;
        for (_, b) in &records[..5] {
            let envelope = b["envelope"].as_str().unwrap_or_default().as_bytes();
            flipped += damage::flip_bit(&db, envelope, envelope.len() / 3)?;
        }
        if flipped != 5 {
            self.failed.push(format!(
                "{flipped} of 5 envelopes to damage were found in the file"
            ));
        }
        let start = Instant::now();
        self.stack.start_relayer(&self.proxy.url).await?;
        *self.ctl.url.lock().unwrap() = self.stack.relayer_url();
        self.relayer_restarts += 1;
        let good: Vec<String> = records[5..].iter().map(|(id, _)| id.clone()).collect();
        let bad: Vec<String> = records[..5].iter().map(|(id, _)| id.clone()).collect();
        let written = self
            .wait_states(&good, "written", Duration::from_secs(120))
            .await;
        let failed = self
            .wait_states(&bad, "failed", Duration::from_secs(60))
            .await;
        let recovery = start.elapsed();
        let mut named = 0;
        for id in &bad {
            if self.status(id).await.1["error"]
                .as_str()
                .is_some_and(|e| e.contains("stored copy of this record is damaged"))
            {
                named += 1;
            }
        }
        if written.is_none() || failed.is_none() || named != bad.len() {
            self.failed.push(format!(
                "after a flipped bit in 5 stored envelopes: the 15 others written: {}, {named} of 5 failed as damaged",
                written.is_some()
            ));
        }
        // A broken b-tree page: the relayer refuses to start, naming the file and what to do.
        self.stack.kill_relayer();
        damage::checkpoint(&db)?;
        let backup = db.with_extension("sqlite.backup");
        std::fs::copy(&db, &backup)?;
        damage::break_table_root(&db, "batches")?;
        let refusal = self.stack.relayer_refuses_to_start(&self.proxy.url).await;
        let refused_clearly = match &refusal {
            Ok(log) => log.contains(&db.display().to_string()) && log.contains("quick_check"),
            Err(_) => false,
        };
        if !refused_clearly {
            self.failed.push(format!(
                "a broken b-tree page did not stop the relayer with an error naming the file: {refusal:?}"
            ));
        }
        std::fs::copy(&backup, &db)?;
        std::fs::remove_file(&backup)?;
        for suffix in ["-wal", "-shm"] {
            let mut companion = db.as_os_str().to_owned();
            companion.push(suffix);
            let _ = std::fs::remove_file(PathBuf::from(companion));
        }
        self.stack.start_relayer(&self.proxy.url).await?;
        *self.ctl.url.lock().unwrap() = self.stack.relayer_url();
        self.relayer_restarts += 1;
        self.ctl.paused.store(false, Ordering::SeqCst);
        let note = format!(
            "{flipped} envelopes damaged: {named} failed as damaged, not written; the 15 others written; all settled {:.1} s after the restart; a broken page: refused to start naming the file: {refused_clearly}",
            recovery.as_secs_f64()
        );
        self.note(DAMAGE, Some(recovery), note);
        Ok(())
    }

    /// The relayer log's length now.
    fn stack_log_len(&self) -> u64 {
        std::fs::metadata(self.log_path()).map_or(0, |m| m.len())
    }

    /// Lines of the relayer log after `from` that contain `needle`.
    fn stack_log_count(&self, from: u64, needle: &str) -> usize {
        let text = std::fs::read(self.log_path()).unwrap_or_default();
        let from = usize::try_from(from).unwrap_or(0).min(text.len());
        String::from_utf8_lossy(&text[from..])
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }

    fn log_path(&self) -> PathBuf {
        self.stack
            .relayer_data_dir()
            .parent()
            .map(|d| d.join("relayer.log"))
            .unwrap_or_default()
    }
}

/// `id -u`.
fn uid() -> anyhow::Result<u32> {
    let out = std::process::Command::new("id")
        .arg("-u")
        .output()
        .context("running id -u")?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
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
    if args.fault_secs > 540
        || args.free_secs > 540
        || args.partition_secs > 540
        || args.full_secs > 540
        || args.kills > 200
    {
        bail!("each phase must stay under 10 minutes: --fault-secs/--free-secs/--partition-secs/--full-secs <= 540, --kills <= 200");
    }
    if !args.skip_disk_full && uid()? != 0 {
        bail!(
            "phase 6 (a full disk) mounts a tmpfs under the relayer's DATA_DIR and needs root \
             (id -u is {}): run the campaign as root, as CI does, or pass --skip-disk-full to \
             leave that phase out (the run then reports it as skipped)",
            uid()?
        );
    }
    if !privsvc_testkit::LIBFAKETIME
        .iter()
        .any(|p| Path::new(p).exists())
    {
        bail!("phase 5 (clock steps) needs libfaketime: apt-get install faketime");
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
            ("MIN_FREE_BYTES", MIN_FREE_BYTES.to_string()),
        ]),
        relayer_log: std::env::var("CAMPAIGN_RELAYER_LOG").unwrap_or_else(|_| "warn".into()),
    })?;
    // DATA_DIR on a filesystem of its own, which phase 6 fills.
    let tmpfs = if args.skip_disk_full {
        None
    } else {
        Some(Tmpfs::mount(&stack.relayer_data_dir(), TMPFS_BYTES)?)
    };
    let relayer_address = stack.relayer_address();
    let (mut relayer_restarts, mut devnet_restarts) = (0u64, 0u64);
    let mut devnet_url = stack.start_devnet().await?;
    stack.start_relayer(&devnet_url).await?;
    let ctl = Arc::new(Control {
        url: Mutex::new(stack.relayer_url()),
        stop: AtomicBool::new(false),
        paused: AtomicBool::new(false),
        phase: AtomicUsize::new(0),
    });
    let tally = Arc::new(Tally::default());
    let mut writers = Vec::new();
    for _ in 0..args.writers {
        writers.push(tokio::spawn(writer(
            ctl.clone(),
            Duration::from_millis(args.pace_ms),
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
    ctl.phase.store(1, Ordering::SeqCst);
    let phase = Instant::now();
    for i in 0..args.kills {
        if phase.elapsed() > Duration::from_secs(540) {
            bail!("phase 2 exceeded 9 minutes after {i} kills");
        }
        tokio::time::sleep(random_pause()).await;
        stack.kill_relayer();
        stack.start_relayer(&devnet_url).await?;
        *ctl.url.lock().unwrap() = stack.relayer_url();
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
    ctl.phase.store(2, Ordering::SeqCst);
    let proxy = faultproxy::FaultProxy::start(
        &devnet_url,
        0,
        Duration::from_millis(args.ledger_timeout_ms + 1_000),
    )
    .await;
    stack.kill_relayer();
    stack.start_relayer(&proxy.url).await?;
    *ctl.url.lock().unwrap() = stack.relayer_url();
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

    // Phases 4 to 7: the faults of a real machine.
    let mut run = Run {
        args: args.clone(),
        stack,
        proxy,
        devnet_url: devnet_url.clone(),
        relayer_address,
        ctl: ctl.clone(),
        tally: tally.clone(),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()?,
        own: Vec::new(),
        notes: vec![PhaseNote::default(); PHASES.len()],
        failed: Vec::new(),
        tmpfs,
        relayer_restarts,
    };
    run.partition().await?;
    run.clock_steps().await?;
    run.disk_full().await?;
    run.damaged_database().await?;

    // Phase 8: drain and check.
    run.enter(DRAIN);
    ctl.stop.store(true, Ordering::SeqCst);
    for w in writers {
        let _ = w.await;
    }
    println!("phase 8: drain");
    let drain = Instant::now();
    loop {
        match queue_len(&run.stack.metrics_url()).await {
            Some(0) => break,
            _ if drain.elapsed() > Duration::from_secs(540) => {
                bail!("the relayer did not drain within 9 minutes");
            }
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    let drain_secs = drain.elapsed().as_secs_f64();
    let on_ledger = ledger_records(&devnet_url, run.relayer_address).await?;
    run.stack.kill_relayer();
    run.stack.kill_devnet();

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
        .filter(|a| !per_owner.contains_key(&a.owner))
        .count();
    let owners_twice = per_owner.values().filter(|n| **n > 1).count();
    let unanswered_written = unanswered
        .iter()
        .filter(|o| per_owner.contains_key(*o))
        .count();
    let duplicates = owners_twice + envelope_twice;
    let own_wrong = run
        .own
        .iter()
        .filter(|(owner, expect, _)| {
            let n = per_owner.get(owner).copied().unwrap_or(0);
            match expect {
                Expect::Written => n != 1,
                Expect::NotWritten => n != 0,
            }
        })
        .count();
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
        "refused (4xx/5xx)         {} ({} of them 503)",
        tally.refused.load(Ordering::SeqCst),
        tally.unavailable.load(Ordering::SeqCst)
    );
    println!("written (on the ledger)   {}", on_ledger.len());
    println!("lost                      {lost}");
    println!("duplicates                {duplicates} (owners with two entities {owners_twice}, envelopes twice {envelope_twice})");
    println!(
        "campaign's own records    {} ({own_wrong} not as they must be)",
        run.own.len()
    );
    println!("relayer restarts          {}", run.relayer_restarts);
    println!("devnet restarts           {}", devnet_restarts);
    println!("faults injected           {faults}");
    println!("fault-free rate           {free_rate:.1} records/s");
    println!("written under faults      {fault_written} ({fault_rate:.1} records/s, {:.0}% of fault-free)", ratio * 100.0);
    println!("time to drain             {drain_secs:.1} s");
    println!();
    println!("| phase | accepted | written | lost | duplicated | failed by design, not written | recovery |");
    println!("|-|-|-|-|-|-|-|");
    for (i, name) in PHASES.iter().enumerate() {
        // The writers' records, and the campaign's own of the phase.
        let mut mine: Vec<(Address, Expect)> = accepted
            .iter()
            .filter(|a| a.phase == i)
            .map(|a| (a.owner, Expect::Written))
            .collect();
        mine.extend(
            run.own
                .iter()
                .filter(|(_, _, p)| *p == i)
                .map(|(o, e, _)| (*o, *e)),
        );
        if mine.is_empty() && run.notes[i].note.is_empty() {
            continue;
        }
        let on = |o: &Address| per_owner.get(o).copied().unwrap_or(0);
        let written = mine.iter().filter(|(o, _)| on(o) > 0).count();
        let lost = mine
            .iter()
            .filter(|(o, e)| *e == Expect::Written && on(o) == 0)
            .count();
        let by_design = mine
            .iter()
            .filter(|(o, e)| *e == Expect::NotWritten && on(o) == 0)
            .count();
        let twice = mine.iter().filter(|(o, _)| on(o) > 1).count();
        let recovery = run.notes[i]
            .recovery_secs
            .map_or("-".to_string(), |s| format!("{s:.1} s"));
        println!(
            "| {name} | {} | {written} | {lost} | {twice} | {by_design} | {recovery} |",
            mine.len()
        );
    }
    for (i, name) in PHASES.iter().enumerate() {
        if !run.notes[i].note.is_empty() {
            println!("{name}: {}", run.notes[i].note);
        }
    }

    let mut failed = std::mem::take(&mut run.failed);
    if lost > 0 {
        failed.push(format!("{lost} accepted records lost"));
    }
    if duplicates > 0 {
        failed.push(format!("{duplicates} duplicates"));
    }
    if own_wrong > 0 {
        failed.push(format!(
            "{own_wrong} of the campaign's own records written when they must not be, or not written once"
        ));
    }
    if ratio < args.min_ratio {
        failed.push(format!(
            "under faults {fault_rate:.1}/s, less than {} of the fault-free {free_rate:.1}/s",
            args.min_ratio
        ));
    }
    // A failing run keeps the relayer's files: out of the tmpfs before it is unmounted.
    if !failed.is_empty() && run.tmpfs.is_some() {
        let kept = dir.join("relayer.kept");
        std::fs::create_dir_all(&kept)?;
        for entry in std::fs::read_dir(run.stack.relayer_data_dir())? {
            let entry = entry?;
            if entry.file_type()?.is_file() && entry.file_name() != "filler" {
                std::fs::copy(entry.path(), kept.join(entry.file_name()))?;
            }
        }
        println!("the relayer's files are kept in {}", kept.display());
    }
    drop(run.tmpfs.take());
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
