//! The local stack's process mode: the devnet and one relayer as separate processes (the
//! `devnet` and `relayer` examples, built beforehand), each started, SIGKILLed and started
//! again on the same data at will. What a reliability campaign needs (`examples/campaign.rs`):
//! a relayer that dies mid-write and a ledger that goes away, as in production; and a relayer
//! whose wall clock steps ([`ProcessStack::fake_relayer_clock`]: libfaketime, the relayer's
//! process only) or that refuses to start ([`ProcessStack::relayer_refuses_to_start`]).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use alloy_primitives::Address;
use privsvc_ledger::RpcLedger;

use crate::{Awaited, StackError};

/// Longest wait for the devnet to answer after a start.
const DEVNET_START: Duration = Duration::from_secs(60);
/// Longest wait for the relayer to answer as itself after a start (it exits and is started
/// again while the ledger does not answer).
const RELAYER_START: Duration = Duration::from_secs(180);

/// Where the Debian package `faketime` puts libfaketime (the first that exists is used).
pub const LIBFAKETIME: [&str; 3] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
];

/// Longest wait for a relayer that should refuse to start to exit.
const REFUSAL: Duration = Duration::from_secs(60);

/// How to run a [`ProcessStack`].
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// The directory of the built `devnet` and `relayer` example binaries.
    pub bins: PathBuf,
    /// The working directory: the devnet's `chain.sqlite`, the relayer's data directory and
    /// both processes' logs (`devnet.log`, `relayer.log`, appended to across restarts).
    pub dir: PathBuf,
    /// The devnet's block interval.
    pub block_time: Duration,
    /// The relayer's signing key (hex); its account is [`ProcessStack::relayer_address`].
    pub relayer_key: String,
    /// The relayer's further settings as environment variables (`MIN_BATCH`, `MAX_WAIT_MS`,
    /// ...); the ledger URL, key, binds and data directory are the stack's.
    pub relayer_env: Vec<(String, String)>,
    /// `RUST_LOG` of the relayer (the devnet logs warnings only).
    pub relayer_log: String,
}

/// The devnet and a relayer as child processes on 127.0.0.1, on ports picked at start (a new
/// one when another process took a port between two starts). Dropping it kills both.
pub struct ProcessStack {
    spec: ProcessSpec,
    relayer_address: Address,
    devnet_port: u16,
    relayer_port: u16,
    metrics_port: u16,
    devnet: Option<Child>,
    relayer: Option<Child>,
    /// libfaketime and its control file, when the relayer's clock is faked.
    faketime: Option<(PathBuf, PathBuf)>,
}

fn free_port() -> Result<u16, StackError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Whether nothing listens on `port` of 127.0.0.1 (the port can be bound).
fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// SIGKILLs `child` and reaps it (immediate).
fn kill(child: Option<Child>) {
    if let Some(mut c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
}

impl ProcessStack {
    /// A stack described by `spec`; nothing runs until [`ProcessStack::start_devnet`].
    pub fn new(spec: ProcessSpec) -> Result<ProcessStack, StackError> {
        let key = privsvc_relayer::RelayerKey::from_hex(&spec.relayer_key)
            .map_err(|e| StackError::Config(format!("the relayer key: {e}")))?;
        std::fs::create_dir_all(&spec.dir)?;
        Ok(ProcessStack {
            relayer_address: key.address(),
            spec,
            devnet_port: free_port()?,
            relayer_port: free_port()?,
            metrics_port: free_port()?,
            devnet: None,
            relayer: None,
            faketime: None,
        })
    }

    /// The relayer's data directory (`DATA_DIR`).
    pub fn relayer_data_dir(&self) -> PathBuf {
        self.spec.dir.join("relayer")
    }

    /// The relayer's queue database.
    pub fn relayer_db(&self) -> PathBuf {
        self.relayer_data_dir().join("relayer.sqlite")
    }

    /// Sets (or adds) one of the relayer's environment variables, from its next start on.
    pub fn set_relayer_env(&mut self, name: &str, value: &str) {
        self.spec.relayer_env.retain(|(k, _)| k != name);
        self.spec
            .relayer_env
            .push((name.to_string(), value.to_string()));
    }

    /// From the relayer's next start on, runs it under libfaketime (`on`), or not: its wall
    /// clock is then offset by [`ProcessStack::set_relayer_clock_offset`] (0 at first) while it
    /// runs, and its monotonic clock is left alone (`DONT_FAKE_MONOTONIC=1`), as an NTP step or
    /// a VM restore would. Only the relayer's process: the devnet keeps the real time. An error
    /// names the package to install when libfaketime is missing.
    pub fn fake_relayer_clock(&mut self, on: bool) -> Result<(), StackError> {
        if !on {
            self.faketime = None;
            return Ok(());
        }
        let lib = LIBFAKETIME
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .ok_or_else(|| {
                StackError::Config(format!(
                    "libfaketime is not installed (looked for {}): apt-get install faketime",
                    LIBFAKETIME.join(", ")
                ))
            })?;
        let control = self.spec.dir.join("relayer-clock.faketime");
        std::fs::write(&control, "+0\n")?;
        self.faketime = Some((lib, control));
        Ok(())
    }

    /// Steps the faked wall clock of the running relayer to the real time plus `secs` (negative:
    /// behind); libfaketime reads it at the relayer's next reading of its clock.
    pub fn set_relayer_clock_offset(&self, secs: i64) -> Result<(), StackError> {
        let (_, control) = self.faketime.as_ref().ok_or_else(|| {
            StackError::Config("the relayer's clock is not faked (fake_relayer_clock)".into())
        })?;
        std::fs::write(control, format!("{secs:+}\n"))?;
        Ok(())
    }

    /// The devnet's JSON-RPC URL.
    pub fn devnet_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.devnet_port)
    }

    /// The relayer's URL.
    pub fn relayer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.relayer_port)
    }

    /// The URL of the relayer's metrics listener (`METRICS_BIND`: the exact `/healthz`).
    pub fn metrics_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.metrics_port)
    }

    /// The relayer's account.
    pub fn relayer_address(&self) -> Address {
        self.relayer_address
    }

    fn log(&self, name: &str) -> Result<std::fs::File, StackError> {
        Ok(std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.spec.dir.join(name))?)
    }

    /// Starts the devnet on its chain database and waits until it answers (as itself, not
    /// another process on the port); returns its URL.
    pub async fn start_devnet(&mut self) -> Result<String, StackError> {
        for _ in 0..5 {
            let mut child = Command::new(self.spec.bins.join("devnet"))
                .arg("--port")
                .arg(self.devnet_port.to_string())
                .arg("--block-time-ms")
                .arg(self.spec.block_time.as_millis().to_string())
                .arg("--db")
                .arg(self.spec.dir.join("chain.sqlite"))
                .env("RUST_LOG", "warn")
                .stdout(Stdio::from(self.log("devnet.log")?))
                .stderr(Stdio::from(self.log("devnet.log")?))
                .spawn()
                .map_err(|e| {
                    StackError::Config(format!(
                        "cannot start {}: {e} (build the devnet example first)",
                        self.spec.bins.join("devnet").display()
                    ))
                })?;
            let ledger = RpcLedger::with_timeout(self.devnet_url(), Duration::from_secs(2))?;
            let start = Instant::now();
            let mut up = false;
            while start.elapsed() < DEVNET_START {
                if child.try_wait()?.is_some() {
                    break;
                }
                if ledger
                    .call("eth_blockNumber", serde_json::json!([]))
                    .await
                    .is_ok()
                {
                    // Answered: make sure it is this child, not another process on the port.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    up = child.try_wait()?.is_none();
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if up {
                self.devnet = Some(child);
                return Ok(self.devnet_url());
            }
            kill(Some(child));
            self.devnet_port = free_port()?;
        }
        Err(StackError::Timeout(Awaited::DevnetStart {
            log: self.spec.dir.join("devnet.log"),
        }))
    }

    /// SIGKILLs the devnet.
    pub fn kill_devnet(&mut self) {
        kill(self.devnet.take());
    }

    /// Starts the relayer on the ledger at `rpc_url` (the devnet, or a proxy in front of it)
    /// and waits until its `/healthz` answers with its own address. A relayer that exits (its
    /// port taken, the ledger not answering at start) is started again, on a new port when
    /// its own was taken, for at most three minutes.
    pub async fn start_relayer(&mut self, rpc_url: &str) -> Result<(), StackError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| StackError::Config(format!("HTTP client: {e}")))?;
        let start = Instant::now();
        while start.elapsed() < RELAYER_START {
            let mut child = self.spawn_relayer(rpc_url)?;
            loop {
                if child.try_wait()?.is_some() {
                    if !port_is_free(self.relayer_port) {
                        self.relayer_port = free_port()?;
                    }
                    if !port_is_free(self.metrics_port) {
                        self.metrics_port = free_port()?;
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    break;
                }
                if self.answers_as_itself(&http).await && child.try_wait()?.is_none() {
                    self.relayer = Some(child);
                    return Ok(());
                }
                if start.elapsed() > RELAYER_START {
                    kill(Some(child));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Err(StackError::Timeout(Awaited::RelayerStart {
            within: RELAYER_START,
            log: self.spec.dir.join("relayer.log"),
        }))
    }

    /// Starts the relayer process on the ledger at `rpc_url` (under libfaketime when its clock
    /// is faked).
    fn spawn_relayer(&self, rpc_url: &str) -> Result<Child, StackError> {
        let mut command = Command::new(self.spec.bins.join("relayer"));
        command
            .env("LEDGER_RPC_URL", rpc_url)
            .env("RELAYER_KEY", &self.spec.relayer_key)
            .env("BIND", format!("127.0.0.1:{}", self.relayer_port))
            .env("METRICS_BIND", format!("127.0.0.1:{}", self.metrics_port))
            .env("DATA_DIR", self.relayer_data_dir())
            .envs(self.spec.relayer_env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", &self.spec.relayer_log)
            .stdout(Stdio::from(self.log("relayer.log")?))
            .stderr(Stdio::from(self.log("relayer.log")?));
        if let Some((lib, control)) = &self.faketime {
            command
                .env("LD_PRELOAD", lib)
                .env("FAKETIME_TIMESTAMP_FILE", control)
                // Read at every call: with a cache, a step back can leave the old offset in
                // force (the cache's age is counted on the faked clock).
                .env("FAKETIME_NO_CACHE", "1")
                .env("DONT_FAKE_MONOTONIC", "1");
        }
        command.spawn().map_err(|e| {
            StackError::Config(format!(
                "cannot start {}: {e} (build the relayer example first)",
                self.spec.bins.join("relayer").display()
            ))
        })
    }

    /// Starts the relayer on the ledger at `rpc_url` expecting it to refuse (a damaged
    /// database): waits at most a minute for it to exit and returns what it logged. An error
    /// when it serves instead (it is then SIGKILLed) or does not exit in time.
    pub async fn relayer_refuses_to_start(&mut self, rpc_url: &str) -> Result<String, StackError> {
        let log = self.spec.dir.join("relayer.log");
        let before = std::fs::metadata(&log).map_or(0, |m| m.len());
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| StackError::Config(format!("HTTP client: {e}")))?;
        let mut child = self.spawn_relayer(rpc_url)?;
        let start = Instant::now();
        loop {
            if child.try_wait()?.is_some() {
                break;
            }
            if self.answers_as_itself(&http).await || start.elapsed() > REFUSAL {
                kill(Some(child));
                return Err(StackError::Config(
                    "the relayer did not refuse to start".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let text = std::fs::read(&log)?;
        let from = usize::try_from(before).unwrap_or(0).min(text.len());
        Ok(String::from_utf8_lossy(&text[from..]).into_owned())
    }

    /// Whether the relayer's `/healthz` answers with this stack's relayer address.
    async fn answers_as_itself(&self, http: &reqwest::Client) -> bool {
        let Ok(answer) = http
            .get(format!("{}/healthz", self.relayer_url()))
            .send()
            .await
        else {
            return false;
        };
        let Ok(health) = answer.json::<serde_json::Value>().await else {
            return false;
        };
        health["address"]
            .as_str()
            .and_then(|a| a.parse::<Address>().ok())
            == Some(self.relayer_address)
    }

    /// SIGKILLs the relayer.
    pub fn kill_relayer(&mut self) {
        kill(self.relayer.take());
    }
}

impl Drop for ProcessStack {
    fn drop(&mut self) {
        // Never leave a child behind, whatever ended the run.
        kill(self.relayer.take());
        kill(self.devnet.take());
    }
}
