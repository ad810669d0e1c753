//! [`LocalStack`]: the devnet, the relayers and the OHTTP relay, started and wired together.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use privsvc_devnet::{BlockTime, Devnet, DevnetConfig, DevnetHandle, DEV_PRIVATE_KEYS};
use privsvc_ledger::{LedgerReader, RpcLedger, RpcWriter};
use privsvc_ohttp::{OhttpRelay, RelayConfig};
use privsvc_relayer::{OhttpSeed, Relayer, RelayerConfig, RelayerKey, TokenMode};
use tempfile::TempDir;
use tokio::task::JoinHandle;

use crate::error::{Awaited, StackError};
use crate::spec::{RelayerSpec, RelayerTokens};
use crate::tap::Tap;

/// How long `start` waits for every heartbeat to reach the ledger and for the relay to verify
/// every relayer.
const COME_UP_TIMEOUT: Duration = Duration::from_secs(30);
/// The address every server of the stack listens on.
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Builder of a [`LocalStack`]; see [`LocalStack::builder`].
#[derive(Debug)]
pub struct LocalStackBuilder {
    devnet: DevnetConfig,
    relayers: Vec<RelayerSpec>,
    relay: Option<RelayConfig>,
    record: bool,
}

impl Default for LocalStackBuilder {
    fn default() -> Self {
        Self {
            devnet: DevnetConfig::on_demand(),
            relayers: Vec::new(),
            relay: None,
            record: false,
        }
    }
}

impl LocalStackBuilder {
    /// Block production of the devnet (default: one block per transaction).
    pub fn block_time(mut self, block_time: BlockTime) -> Self {
        self.devnet.block_time = block_time;
        self
    }

    /// Any other devnet setting (chain id, prefunded accounts, persistence).
    pub fn devnet(mut self, configure: impl FnOnce(&mut DevnetConfig)) -> Self {
        configure(&mut self.devnet);
        self
    }

    /// Adds a relayer. Its defaults, before the spec's own settings: `RelayerConfig::for_tests`
    /// in a fresh temporary directory, the devnet's block interval (100 ms with one block per
    /// transaction), `MAX_WAIT_MS=100`, no flush jitter, no rate limit to speak of.
    pub fn relayer(mut self, spec: RelayerSpec) -> Self {
        self.relayers.push(spec);
        self
    }

    /// Adds an OHTTP relay with test settings: `http://` targets allowed, targets refreshed every
    /// 500 ms, no per-address limit to speak of (every client of a test shares 127.0.0.1).
    pub fn ohttp_relay(self) -> Self {
        self.ohttp_relay_with(|_| {})
    }

    /// Adds an OHTTP relay with the test settings of [`LocalStackBuilder::ohttp_relay`], then
    /// `configure`.
    pub fn ohttp_relay_with(mut self, configure: impl FnOnce(&mut RelayConfig)) -> Self {
        let mut config = RelayConfig::default();
        config.allow_http = true;
        config.refresh_interval = Duration::from_millis(500);
        config.rate_limit_per_min = 1_000_000;
        configure(&mut config);
        self.relay = Some(config);
        self
    }

    /// Fronts every party with a recording [`Tap`]: the RPC (`tap("rpc")`, what
    /// [`LocalStack::rpc_url`] points at), each relayer (its public URL, so heartbeats name the
    /// tap; it opens the OHTTP requests it can decrypt), and the OHTTP relay (`tap("relay")`).
    pub fn record_traffic(mut self) -> Self {
        self.record = true;
        self
    }

    /// Starts the devnet, each relayer in declaration order (waiting for all heartbeats), then
    /// the OHTTP relay (waiting until it verified every relayer).
    pub async fn start(self) -> Result<LocalStack, StackError> {
        let block_time = self.devnet.block_time;
        let devnet = Devnet::start(self.devnet).await?;
        let reader: Arc<dyn LedgerReader> = Arc::new(RpcLedger::new(devnet.url())?);
        let rpc_tap = if self.record {
            Some(Tap::start("rpc", LOOPBACK, Some(devnet.url()), None).await?)
        } else {
            None
        };
        let mut stack = LocalStack {
            devnet,
            reader,
            block_time,
            relayers: Vec::new(),
            relay: None,
            rpc_tap,
        };
        for (index, spec) in self.relayers.into_iter().enumerate() {
            let relayer = stack.start_relayer(index, spec, self.record).await?;
            stack.relayers.push(relayer);
        }
        stack.wait_for_heartbeats().await?;
        if let Some(config) = self.relay {
            stack.relay = Some(stack.start_relay(config, self.record).await?);
        }
        Ok(stack)
    }
}

/// One relayer of the stack.
struct StackRelayer {
    spec: RelayerSpec,
    account: usize,
    seed: Option<[u8; 32]>,
    dir: TempDir,
    tap: Option<Tap>,
    handle: Option<Relayer>,
}

/// The running OHTTP relay.
struct StackRelay {
    relay: OhttpRelay,
    url: String,
    tap: Option<Tap>,
    tasks: Vec<JoinHandle<()>>,
}

/// The whole stack on loopback: see the crate documentation.
pub struct LocalStack {
    devnet: DevnetHandle,
    reader: Arc<dyn LedgerReader>,
    block_time: BlockTime,
    relayers: Vec<StackRelayer>,
    relay: Option<StackRelay>,
    rpc_tap: Option<Tap>,
}

impl std::fmt::Debug for LocalStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalStack")
            .field("devnet", &self.devnet.url())
            .field("relayers", &self.urls())
            .field("relay", &self.relay_url())
            .finish_non_exhaustive()
    }
}

impl LocalStack {
    /// A builder: no relayer and no relay until added; one block per transaction.
    pub fn builder() -> LocalStackBuilder {
        LocalStackBuilder::default()
    }

    /// The devnet.
    pub fn devnet(&self) -> &DevnetHandle {
        &self.devnet
    }

    /// A reader of the devnet (directly, never through the RPC tap).
    pub fn reader(&self) -> Arc<dyn LedgerReader> {
        self.reader.clone()
    }

    /// The RPC URL clients should use: the RPC tap's when traffic is recorded, else the devnet's.
    pub fn rpc_url(&self) -> String {
        match &self.rpc_tap {
            Some(tap) => tap.url().to_string(),
            None => self.devnet.url(),
        }
    }

    /// The running relayer called `name`.
    ///
    /// # Panics
    /// When the stack has no such relayer, or it is stopped: a test's own mistake.
    pub fn relayer(&self, name: &str) -> &Relayer {
        self.slot(name)
            .handle
            .as_ref()
            .unwrap_or_else(|| panic!("relayer {name:?} is stopped"))
    }

    /// The public URL of relayer `name` (its tap's when traffic is recorded).
    pub fn url(&self, name: &str) -> String {
        self.relayer(name).url().to_string()
    }

    /// The public URLs of every running relayer, in declaration order.
    pub fn urls(&self) -> Vec<String> {
        self.relayers
            .iter()
            .filter_map(|r| r.handle.as_ref().map(|h| h.url().to_string()))
            .collect()
    }

    /// The names of the relayers, in declaration order.
    pub fn relayer_names(&self) -> Vec<String> {
        self.relayers.iter().map(|r| r.spec.name.clone()).collect()
    }

    /// The dev account index relayer `name` writes from.
    pub fn account_of(&self, name: &str) -> usize {
        self.slot(name).account
    }

    /// The OHTTP gateway seed of relayer `name`, when it serves OHTTP.
    pub fn ohttp_seed_of(&self, name: &str) -> Option<[u8; 32]> {
        self.slot(name).seed
    }

    /// The OHTTP relay's URL (its tap's when traffic is recorded).
    pub fn relay_url(&self) -> Option<String> {
        self.relay.as_ref().map(|r| match &r.tap {
            Some(tap) => tap.url().to_string(),
            None => r.url.clone(),
        })
    }

    /// The OHTTP relay's own URL, behind its tap.
    pub fn relay_direct_url(&self) -> Option<String> {
        self.relay.as_ref().map(|r| r.url.clone())
    }

    /// The OHTTP relay.
    pub fn relay(&self) -> Option<&OhttpRelay> {
        self.relay.as_ref().map(|r| &r.relay)
    }

    /// Requests the OHTTP relay forwarded to a relayer (0 without a relay).
    pub fn relayed(&self) -> u64 {
        self.relay().map_or(0, OhttpRelay::forwarded)
    }

    /// The tap in front of `party` when traffic is recorded: `"rpc"`, `"relay"` or a relayer's
    /// name.
    pub fn tap(&self, party: &str) -> Option<&Tap> {
        match party {
            "rpc" => self.rpc_tap.as_ref(),
            "relay" => self.relay.as_ref().and_then(|r| r.tap.as_ref()),
            name => self
                .relayers
                .iter()
                .find(|r| r.spec.name == name)
                .and_then(|r| r.tap.as_ref()),
        }
    }

    /// A ledger writer for dev account `account` on the devnet.
    pub async fn writer(&self, account: usize) -> Result<Arc<RpcWriter>, StackError> {
        let key = dev_key(account)?;
        Ok(Arc::new(
            RpcWriter::connect(RpcLedger::new(self.devnet.url())?, key.bytes()).await?,
        ))
    }

    /// Stops relayer `name` and starts it again on the same queue database (and behind the
    /// same tap), with `configure` applied after its spec's settings.
    pub async fn restart_relayer(
        &mut self,
        name: &str,
        configure: impl Fn(&mut RelayerConfig),
    ) -> Result<(), StackError> {
        let index = self.index_of(name);
        if let Some(h) = self.relayers[index].handle.take() {
            h.shutdown().await;
        }
        let mut config = self.config_for(&self.relayers[index])?;
        configure(&mut config);
        let handle = self.launch(&self.relayers[index], config).await?;
        self.relayers[index].handle = Some(handle);
        Ok(())
    }

    /// Stops relayer `name` cleanly (its port then refuses connections).
    pub async fn stop_relayer(&mut self, name: &str) {
        let index = self.index_of(name);
        if let Some(h) = self.relayers[index].handle.take() {
            h.shutdown().await;
        }
    }

    /// Stops relayer `name` as in a crash (no clean-up).
    pub async fn crash_relayer(&mut self, name: &str) {
        let index = self.index_of(name);
        if let Some(h) = self.relayers[index].handle.take() {
            h.crash().await;
        }
    }

    /// Stops the relay, the relayers and the devnet.
    pub async fn shutdown(mut self) {
        if let Some(relay) = self.relay.take() {
            for t in relay.tasks {
                t.abort();
            }
        }
        for r in self.relayers.drain(..) {
            if let Some(h) = r.handle {
                h.shutdown().await;
            }
        }
        self.devnet.shutdown().await;
    }

    fn index_of(&self, name: &str) -> usize {
        self.relayers
            .iter()
            .position(|r| r.spec.name == name)
            .unwrap_or_else(|| panic!("the stack has no relayer {name:?}"))
    }

    fn slot(&self, name: &str) -> &StackRelayer {
        &self.relayers[self.index_of(name)]
    }

    async fn start_relayer(
        &self,
        index: usize,
        spec: RelayerSpec,
        record: bool,
    ) -> Result<StackRelayer, StackError> {
        if self.relayers.iter().any(|r| r.spec.name == spec.name) {
            return Err(StackError::Config(format!(
                "two relayers are called {:?}",
                spec.name
            )));
        }
        let account = spec.account.unwrap_or(index);
        let seed = spec
            .ohttp
            .then(|| spec.ohttp_seed.unwrap_or_else(rand::random));
        let tap = if record {
            Some(Tap::start(&spec.name, LOOPBACK, None, seed.as_ref()).await?)
        } else {
            None
        };
        let mut relayer = StackRelayer {
            spec,
            account,
            seed,
            dir: TempDir::new()?,
            tap,
            handle: None,
        };
        let config = self.config_for(&relayer)?;
        relayer.handle = Some(self.launch(&relayer, config).await?);
        Ok(relayer)
    }

    /// The relayer's configuration: test defaults, tokens, OHTTP, its tap's URL, then the spec.
    fn config_for(&self, r: &StackRelayer) -> Result<RelayerConfig, StackError> {
        let mut c = RelayerConfig::for_tests(r.dir.path());
        c.rpc_url = self.devnet.url();
        c.block_time = match self.block_time {
            BlockTime::Interval(d) => d,
            _ => Duration::from_millis(100),
        };
        c.batching.max_wait = Duration::from_millis(100);
        c.batching.flush_jitter = Duration::from_millis(0);
        match &r.spec.tokens {
            RelayerTokens::Off => {}
            RelayerTokens::Issuer => {
                c.tokens = TokenMode::Required;
                c.issuer.on = true;
            }
            RelayerTokens::From(name) => {
                let issuer = self
                    .relayers
                    .iter()
                    .find(|o| &o.spec.name == name && o.spec.tokens == RelayerTokens::Issuer)
                    .and_then(|o| o.handle.as_ref())
                    .ok_or_else(|| {
                        StackError::Config(format!(
                            "relayer {:?} takes tokens from {name:?}, which is not an issuer declared before it",
                            r.spec.name
                        ))
                    })?;
                c.tokens = TokenMode::Required;
                c.issuer.address = Some(issuer.address());
                c.issuer.url = Some(issuer.url().to_string());
            }
        }
        c.ohttp_seed = r.seed.map(OhttpSeed::new);
        if let Some(tap) = &r.tap {
            c.public_url = Some(tap.url().to_string());
        }
        for configure in &r.spec.configure {
            configure(&mut c);
        }
        Ok(c)
    }

    async fn launch(
        &self,
        r: &StackRelayer,
        mut config: RelayerConfig,
    ) -> Result<Relayer, StackError> {
        config.key = Some(dev_key(r.account)?);
        config.rpc_url = self.devnet.url();
        let handle =
            Relayer::start_on_ledger(config)
                .await
                .map_err(|source| StackError::Relayer {
                    name: r.spec.name.clone(),
                    source: Box::new(source),
                })?;
        if let Some(tap) = &r.tap {
            tap.set_target(&format!("http://{}", handle.local_addr()));
        }
        Ok(handle)
    }

    async fn wait_for_heartbeats(&self) -> Result<(), StackError> {
        let deadline = Instant::now() + COME_UP_TIMEOUT;
        for r in &self.relayers {
            let Some(h) = &r.handle else { continue };
            while h.health().await.heartbeat.is_empty() {
                if Instant::now() > deadline {
                    return Err(StackError::Timeout(Awaited::Heartbeat {
                        relayer: r.spec.name.clone(),
                    }));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(())
    }

    async fn start_relay(
        &self,
        config: RelayConfig,
        record: bool,
    ) -> Result<StackRelay, StackError> {
        let relay = OhttpRelay::new(self.reader.clone(), config)?;
        let deadline = Instant::now() + COME_UP_TIMEOUT;
        let expected = self.relayers.len();
        while relay.refresh().await? < expected {
            if Instant::now() > deadline {
                return Err(StackError::Timeout(Awaited::RelayTargets {
                    verified: relay.targets().len(),
                    expected,
                }));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut tasks = vec![relay.spawn_refresh()];
        let listener = tokio::net::TcpListener::bind((LOOPBACK, 0)).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let served = relay.clone();
        tasks.push(tokio::spawn(async move {
            // Through the relay's own listener, so its per-address limit is the real one.
            if let Err(e) = served.serve(listener).await {
                tracing::warn!(error = %e, "the OHTTP relay stopped");
            }
        }));
        let tap = if record {
            Some(Tap::start("relay", LOOPBACK, Some(url.clone()), None).await?)
        } else {
            None
        };
        Ok(StackRelay {
            relay,
            url,
            tap,
            tasks,
        })
    }
}

/// The key of dev account `account` of the devnet.
fn dev_key(account: usize) -> Result<RelayerKey, StackError> {
    let key = DEV_PRIVATE_KEYS.get(account).ok_or_else(|| {
        StackError::Config(format!(
            "there are {} dev accounts, {account} asked",
            DEV_PRIVATE_KEYS.len()
        ))
    })?;
    RelayerKey::from_hex(key).map_err(|e| StackError::Config(e.to_string()))
}
