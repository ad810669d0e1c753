//! The active phases: after the simulated day, each active party attacks victims of its own,
//! one phase after another so that one attack does not disturb another's measurement. Each phase
//! scores its own guesses against what really happened.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use futures::StreamExt;
use privsvc_client::{CreateParams, EntitiesQuery, Expires, LocalWallet, PrivateClient};
use privsvc_ledger::Heartbeat;
use privsvc_ledger::{query_all, Create, CreationFlags, Entity, LedgerWriter, Operation, Select};
use privsvc_ohttp::{OhttpGateway, RelayerRequest};
use privsvc_testkit::{Action, Forwarder, Interceptor, TapRequest};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::attacks::ActiveOutcomes;
use crate::population::{Identity, World};
use crate::scenario::APP;

/// Dev account of the OHTTP relay's operator (publishes its own heartbeat).
const RELAY_ACCOUNT: usize = 3;
/// Dev account of the user who copies records.
const COPIER_ACCOUNT: usize = 4;
/// Answers at least this large are issue answers (the only ones above the 1 KiB class).
const ISSUE_ANSWER_BYTES: usize = 2_000;
/// The flooding user's address in the issuer-flood phase (no user of the population has it).
pub const FLOODER_IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 77));
/// The scan cache's resume granularity in the lab (blocks of 1 s): the first sessions of the
/// returning-sessions phase all fit in one unit.
const LAB_RESUME_BLOCKS: u64 = 64;
/// Relayer A's `ISSUER_RATE_LIMIT_PER_MIN` in the lab.
pub const ISSUER_LIMIT_PER_MIN: u32 = 20;
/// Issue requests of the issuer flood: more than the two one-minute windows a burst can touch
/// allow between them.
const ISSUER_FLOOD_REQUESTS: usize = 3 * ISSUER_LIMIT_PER_MIN as usize + 10;

/// Runs the active phases the scenario switches on and scores them.
pub async fn run_phases(world: &World, rng: &mut StdRng) -> ActiveOutcomes {
    let mut phases = Phases {
        world,
        next: world.scenario.users,
        out: ActiveOutcomes::default(),
    };
    let a = world.scenario.active.clone();
    let started = Instant::now();
    let log = |phase: &str| {
        eprintln!(
            "  [{:>5.0} s] active phase: {phase}",
            started.elapsed().as_secs_f64()
        )
    };
    if a.replay_submissions {
        log("replayed submissions");
        phases.replay_submissions(rng).await;
    }
    if a.replay_issue_requests {
        log("replayed issue requests");
        phases.replay_issue_requests(rng).await;
    }
    if a.ratchet {
        log("a position that counts down");
        phases.ratchet(rng).await;
    }
    if a.refusing_relayer {
        log("a refusing relayer");
        phases.refusal(rng).await;
    }
    if a.head_of_line {
        log("head-of-line: holds that can never be met");
        phases.head_of_line(rng).await;
    }
    if a.n_minus_one {
        log("n-1 with /healthz and filler records");
        phases.n_minus_one(rng, Isolation::Healthz).await;
        log("n-1 by flooding with filler records");
        phases.n_minus_one(rng, Isolation::Flood).await;
    }
    if a.copies {
        log("record copies");
        phases.copies(rng).await;
    }
    if a.key_substitution {
        log("gateway key substitution");
        phases.key_substitution(rng).await;
    }
    if a.issuer_flood {
        log("issuer flood through /v1/ohttp from one address");
        phases.issuer_flood(rng).await;
    }
    if a.relay_steering {
        log("relay steering: 400s made by the relay");
        phases.relay_steering(rng).await;
    }
    if a.heartbeat_spam {
        log("heartbeat spam: a stranger names relayers A and B");
        phases.heartbeat_spam(rng).await;
    }
    if a.returning_sessions {
        log("returning sessions with a scan cache");
        phases.returning_sessions(rng).await;
    }
    log("done");
    phases.out
}

/// The cover-drift phase (`Phases::cover_drift`), run after every other phase (it expires
/// every record of an hour); its guesses are added to `outcomes`.
pub async fn run_cover_drift(world: &World, rng: &mut StdRng, outcomes: &mut ActiveOutcomes) {
    // Victims are new users after every other phase's.
    let next = world.scenario.users + 1_000;
    let mut phases = Phases {
        world,
        next,
        out: std::mem::take(outcomes),
    };
    eprintln!("  active phase: cover drift (records of an hour expire)");
    phases.cover_drift(rng).await;
    *outcomes = phases.out;
}

/// The active phases' shared state: the world, the next free user index (each victim is a new
/// user at an address of its own), and the scored guesses.
pub(crate) struct Phases<'a> {
    pub(crate) world: &'a World,
    pub(crate) next: usize,
    pub(crate) out: ActiveOutcomes,
}

pub(crate) fn note(rng: &mut StdRng) -> CreateParams {
    CreateParams::new(
        format!("victim note {}", rng.gen::<u32>()).into_bytes(),
        "text/plain",
        Expires::Hours(1),
    )
    .attribute("kind", "note")
}

impl<'a> Phases<'a> {
    pub(crate) fn victims(&mut self, rng: &mut StdRng, n: usize) -> Vec<Identity> {
        let mut out = Vec::new();
        for _ in 0..n {
            if let Ok(id) = Identity::new(self.next, rng) {
                out.push(id);
            }
            self.next += 1;
        }
        out
    }

    pub(crate) fn stack(&self) -> &'a privsvc_testkit::LocalStack {
        &self.world.stack
    }

    /// A victim's client, with `relayers` named or discovered, and `bad` relayers marked bad.
    pub(crate) async fn client(
        &self,
        id: &Identity,
        relayers: Option<Vec<String>>,
        bad: &[String],
        configure: impl FnOnce(privsvc_client::ClientBuilder) -> privsvc_client::ClientBuilder,
    ) -> Option<PrivateClient> {
        let mut b = self
            .world
            .client_builder(id, id.reader(self.stack()), 1)
            .rarity_k(0);
        if let Some(r) = relayers {
            b = b.relayers(r);
        }
        let client = self.world.build(configure(b)).await.ok()?;
        for url in bad {
            client.set_relayer_bad(url, true);
        }
        // Like an app whose user waits for the session to be ready: a ripe token when a
        // relayer requires them (the session's first refill, then the tokens' minimum age).
        if client.relayers().iter().any(|r| r.info.tokens_required) {
            let deadline = Instant::now() + Duration::from_secs(30);
            while client.ripe_tokens() == 0 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Some(client)
    }

    /// The RPC's view since `since`: each call's source address and its parsed JSON request
    /// (every call of a JSON-RPC batch on its own).
    pub(crate) fn rpc_since(&self, since: Instant) -> Vec<(IpAddr, Value)> {
        self.stack()
            .tap("rpc")
            .map(|tap| tap.exchanges())
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.at >= since)
            .flat_map(|e| {
                let calls = match serde_json::from_slice(&e.request.body) {
                    Ok(Value::Array(calls)) => calls,
                    Ok(call) => vec![call],
                    Err(_) => vec![Value::Null],
                };
                calls.into_iter().map(move |call| (e.request.source, call))
            })
            .collect()
    }

    /// A client that only reads (no wait for a ripe token), keeping its listing in `file`.
    async fn reading_client(
        &self,
        id: &Identity,
        file: &std::path::Path,
        granularity: u64,
    ) -> Option<PrivateClient> {
        let b = self
            .world
            .client_builder(id, id.reader(self.stack()), 1)
            .rarity_k(0)
            .scan_cache_file(file)
            .scan_cache_resume_blocks(granularity);
        self.world.build(b).await.ok()
    }

    async fn owned_by(&self, owner: Address) -> Vec<Entity> {
        let q = format!("$owner = addr({})", owner.to_checksum(None));
        let select = Select {
            key: true,
            owner: true,
            creator: true,
            created_at: true,
            ..Select::default()
        };
        query_all(self.stack().reader().as_ref(), &q, &select, None)
            .await
            .unwrap_or_default()
    }

    /// The relay replays every POST of the victims 3 times: a second entity, or an answer of
    /// another size or status, wins.
    async fn replay_submissions(&mut self, rng: &mut StdRng) {
        let Some(tap) = self.stack().tap("relay") else {
            return;
        };
        let victims = self.victims(rng, self.world.scenario.victims);
        let replayer = Arc::new(Replayer::new(victims.iter().map(|v| v.ip), 3, 1));
        tap.set_interceptor(Some(replayer.clone()));
        let started = Instant::now();
        // The victims write at the same time (each its own session); with the leak, to C.
        let this = &*self;
        let to = this
            .world
            .scenario
            .leaks
            .resubmissions_stored_again
            .then(|| vec![this.stack().url("C")]);
        let writes: Vec<(IpAddr, Option<Address>)> =
            futures::future::join_all(victims.iter().map(|v| {
                let (params, to) = (note(rng), to.clone());
                async move {
                    let client = this.client(v, to, &[], |b| b).await?;
                    let r = bounded(client.create_entity(params)).await;
                    Some((v.ip, r.map(|r| r.owner)))
                }
            }))
            .await
            .into_iter()
            .flatten()
            .collect();
        tokio::time::sleep(Duration::from_millis(
            self.world.scenario.max_wait_ms + 3_000,
        ))
        .await;
        tap.set_interceptor(None);
        let differing = replayer.differing(tap, started);
        for (ip, owner) in writes {
            let duplicate = match owner {
                Some(o) => self.owned_by(o).await.len() > 1,
                None => false,
            };
            self.out.push(
                "replay-submission",
                duplicate || differing.contains(&ip),
                0.0,
            );
        }
    }

    /// The relay replays every issue request of the victims 20 times: an answer of another size
    /// or status, or a victim who can no longer obtain tokens, wins.
    async fn replay_issue_requests(&mut self, rng: &mut StdRng) {
        let Some(tap) = self.stack().tap("relay") else {
            return;
        };
        let victims = self.victims(rng, self.world.scenario.victims);
        let replayer = Arc::new(Replayer::new(
            victims.iter().map(|v| v.ip),
            20,
            ISSUE_ANSWER_BYTES,
        ));
        tap.set_interceptor(Some(replayer.clone()));
        let started = Instant::now();
        let a_url = self.stack().url("A");
        // The victims write at the same time, to relayer A only (the write needs a token).
        let this = &*self;
        futures::future::join_all(victims.iter().map(|v| {
            let (params, a_url) = (note(rng), a_url.clone());
            async move {
                if let Some(client) = this.client(v, Some(vec![a_url]), &[], |b| b).await {
                    let _ = bounded(client.create_entity(params)).await;
                }
            }
        }))
        .await;
        tokio::time::sleep(Duration::from_secs(6)).await;
        tap.set_interceptor(None);
        let differing = replayer.differing(tap, started);
        let replayed = replayer.replayed_sources();
        for v in &victims {
            if !replayed.contains(&v.ip) {
                continue;
            }
            let starved = !self.can_still_get_tokens(v).await;
            self.out
                .push("replay-issue", starved || differing.contains(&v.ip), 0.0);
        }
    }

    /// Whether `v` can still obtain one token from A's issuer through the relay.
    async fn can_still_get_tokens(&self, v: &Identity) -> bool {
        let Some(relay) = self.stack().relay_url() else {
            return false;
        };
        let Some(transport) = self.ohttp_issuer_transport(&relay, v) else {
            return false;
        };
        self.token_wallet_of_a(v.wallet.clone(), v.reader(self.stack()), transport)
            .acquire(APP, 1, None)
            .await
            .is_ok()
    }

    /// Issuer calls of `id` to relayer A through the OHTTP endpoint `endpoint` (the relay, or
    /// A's own `/v1/ohttp`), sent from `id`'s address.
    fn ohttp_issuer_transport(
        &self,
        endpoint: &str,
        id: &Identity,
    ) -> Option<Arc<dyn privsvc_ohttp::Transport>> {
        let transport =
            privsvc_ohttp::OhttpTransport::new(endpoint, id.reader(self.stack())).ok()?;
        let transport = transport.with_fetch(Arc::new(privsvc_rt::ReqwestFetch::with_client(
            id.http.clone(),
        )));
        Some(Arc::new(transport))
    }

    /// A token wallet of `wallet` for relayer A's issuer over `transport`.
    fn token_wallet_of_a(
        &self,
        wallet: Arc<dyn privsvc_client::Wallet>,
        reader: Arc<dyn privsvc_ledger::LedgerReader>,
        transport: Arc<dyn privsvc_ohttp::Transport>,
    ) -> privsvc_tokens::TokenWallet {
        let a = self.stack().relayer("A");
        let mut o = privsvc_tokens::TokenWalletOptions::new(wallet, reader, a.address(), a.url());
        o.transport = transport;
        privsvc_tokens::TokenWallet::new(o)
    }

    /// One address with a fresh wallet per request asks A's issuer for a token through
    /// `POST /v1/ohttp` directly (not through the relay), many requests at once. A burst touches
    /// at most two of the limiter's one-minute windows, so at most twice the per-minute limit
    /// may be answered: each request past that is a trial, and an answered one wins.
    async fn issuer_flood(&mut self, rng: &mut StdRng) {
        let Ok(flooder) = Identity::at(usize::MAX, FLOODER_IP, rng) else {
            return;
        };
        let reader = flooder.reader(self.stack());
        let endpoint = format!("{}/v1/ohttp", self.stack().url("A"));
        let Some(transport) = self.ohttp_issuer_transport(&endpoint, &flooder) else {
            return;
        };
        let wallets: Vec<[u8; 32]> = (0..ISSUER_FLOOD_REQUESTS).map(|_| rng.gen()).collect();
        let this = &*self;
        let answered = futures::stream::iter(wallets)
            .map(|key| {
                let (reader, transport) = (reader.clone(), transport.clone());
                async move {
                    let wallet = Arc::new(LocalWallet::from_bytes(&key).ok()?);
                    let tokens = this.token_wallet_of_a(wallet, reader, transport);
                    bounded(tokens.acquire(APP, 1, None)).await
                }
            })
            .buffer_unordered(8)
            .filter_map(|x| async move { x })
            .count()
            .await;
        let allowed = 2 * ISSUER_LIMIT_PER_MIN as usize;
        let past = answered.saturating_sub(allowed);
        for i in 0..ISSUER_FLOOD_REQUESTS - allowed {
            self.out.push("issuer-flood", i < past, 0.0);
        }
    }

    /// Relayer C answers `queued` with a position that counts down forever: a write still
    /// waiting 40 s after it was asked for wins (its 4 s deadline, a batching round of the
    /// session's 1.5-4.5 s tails, the move to B and B's batch fit well inside; the ratchet it
    /// measures kept a write waiting for weeks).
    async fn ratchet(&mut self, rng: &mut StdRng) {
        let Some(interceptor) = self.relayer_interceptor("C", Behaviour::Ratchet) else {
            return;
        };
        let tap = self.stack().tap("C").expect("C has a tap");
        tap.set_interceptor(Some(interceptor));
        let (b, c) = (self.stack().url("B"), self.stack().url("C"));
        let victims = self.victims(rng, self.world.scenario.victims);
        let attempt = if self.world.scenario.leaks.long_attempts {
            Duration::from_secs(600)
        } else {
            Duration::from_secs(4)
        };
        // The victims' sessions start at the same time.
        let this = &*self;
        let clients = futures::future::join_all(victims.iter().map(|v| {
            let (b, c) = (b.clone(), c.clone());
            async move {
                this.client(v, Some(vec![c, b.clone()]), std::slice::from_ref(&b), |x| {
                    x.inclusion_timeout(attempt)
                })
                .await
            }
        }))
        .await;
        let mut tasks = Vec::new();
        for client in clients.into_iter().flatten() {
            let params = note(rng);
            tasks.push(tokio::spawn(async move {
                tokio::time::timeout(Duration::from_secs(40), client.create_entity(params))
                    .await
                    .is_err()
            }));
        }
        for t in tasks {
            let still_waiting = t.await.unwrap_or(false);
            self.out.push("ratchet", still_waiting, 0.0);
        }
        tap.set_interceptor(None);
    }

    /// Relayer C answers 400 to every submission: a write that fails wins.
    async fn refusal(&mut self, rng: &mut StdRng) {
        let Some(interceptor) = self.relayer_interceptor("C", Behaviour::Refuse) else {
            return;
        };
        let tap = self.stack().tap("C").expect("C has a tap");
        tap.set_interceptor(Some(interceptor));
        let (b, c) = (self.stack().url("B"), self.stack().url("C"));
        let victims = self.victims(rng, self.world.scenario.victims);
        // The victims write at the same time.
        let this = &*self;
        let outcomes = futures::future::join_all(victims.iter().map(|v| {
            let (params, b, c) = (note(rng), b.clone(), c.clone());
            // The leak: C alone, so that a refused write cannot move.
            let relayers = if this.world.scenario.leaks.refusal_ends_write {
                vec![c]
            } else {
                vec![c, b.clone()]
            };
            async move {
                let client = this
                    .client(v, Some(relayers), std::slice::from_ref(&b), |x| x)
                    .await?;
                Some(
                    tokio::time::timeout(Duration::from_secs(30), client.create_entity(params))
                        .await
                        .map_or(true, |r| r.is_err()),
                )
            }
        }))
        .await;
        for failed in outcomes.into_iter().flatten() {
            self.out.push("refusal", failed, 0.0);
        }
        tap.set_interceptor(None);
    }

    /// A user floods relayer C with [`FLOOD_HOLDS`] submissions whose holds can never be met
    /// (`minAnonymity` 10, each in a project of its own, more than C's `MAX_BATCH`), then the
    /// victims write to C: a write still waiting 20 s after it was asked for wins (C flushes a
    /// lone record after `MAX_WAIT_MS`, 4 s). Before revision 3 the planner looked only at the
    /// oldest `MAX_BATCH` records, and such a flood stalled every honest record behind it for
    /// `maxHoldMs`.
    async fn head_of_line(&mut self, rng: &mut StdRng) {
        let c = self.stack().url("C");
        let Some(flooder) = self.victims(rng, 1).pop() else {
            return;
        };
        let mut flood = Vec::new();
        let flood_started = Instant::now();
        for i in 0..FLOOD_HOLDS {
            // Memory stores: each flooding client starts empty, as on a fresh data directory,
            // and leaves nothing in the default one, which other runs share.
            let b = PrivateClient::builder(APP)
                .memory_stores(true)
                .project(format!("flood-{i}"))
                .wallet(flooder.wallet.clone())
                .reader(flooder.reader(self.stack()))
                .fetch(Arc::new(privsvc_rt::ReqwestFetch::with_client(
                    flooder.http.clone(),
                )))
                .relayers([c.clone()])
                .delay_ms(0, 0)
                .min_anonymity(10)
                .max_hold_ms(FLOOD_HOLD.as_millis() as u64)
                .rarity_k(0);
            let Ok(client) = self.world.build(b).await else {
                continue;
            };
            let params = note(rng);
            flood.push(tokio::spawn(async move {
                let _ = client.create_entity(params).await;
            }));
        }
        // The flood is queued before the victims arrive.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let victims = self.victims(rng, self.world.scenario.victims);
        let this = &*self;
        let outcomes = futures::future::join_all(victims.iter().map(|v| {
            let (params, c) = (note(rng), c.clone());
            async move {
                let client = this.client(v, Some(vec![c]), &[], |x| x).await?;
                Some(
                    tokio::time::timeout(Duration::from_secs(20), client.create_entity(params))
                        .await
                        .is_err(),
                )
            }
        }))
        .await;
        for t in flood {
            t.abort();
        }
        for stalled in outcomes.into_iter().flatten() {
            self.out.push("head-of-line", stalled, 0.0);
        }
        // The flood's holds expire before the next phase, which also uses C (its queue is
        // then empty again, and with `planner_oldest_only` no longer stalled).
        tokio::time::sleep_until((flood_started + FLOOD_HOLD + Duration::from_secs(2)).into())
            .await;
    }

    fn relayer_interceptor(
        &self,
        name: &str,
        behaviour: Behaviour,
    ) -> Option<Arc<dyn Interceptor>> {
        let seed = self.stack().ohttp_seed_of(name)?;
        let gateway = OhttpGateway::from_seed(&seed).ok()?;
        Some(Arc::new(RelayerActor {
            gateway,
            behaviour,
            fake: Mutex::new(BTreeMap::new()),
        }))
    }

    /// n-1 at relayer C, which also takes submissions straight from clients the relay never
    /// sees (a direct crowd). `Healthz`: the relay holds the target's submission until C's
    /// `/healthz` reads an empty queue (at most [`HOLD`]), then sends it with `MIN_BATCH - 1`
    /// filler records of its own, so that the batch flushes at once. It wins when C's queue
    /// was in truth empty at that moment (read by the lab from C's exact `METRICS_BIND`
    /// figures): the fillers then leave the target alone. Chance is how often the queue is
    /// empty at all, sampled every 100 ms through the phase (what a relay that releases at a
    /// moment of its own choosing, reading nothing, achieves).
    ///
    /// `Flood`: the relay first flushes C's queue with `MIN_BATCH` fillers, then sends the
    /// target with `MIN_BATCH - 1` more; a target alone with fillers in its batch wins, against
    /// the same chance. It needs no signal, which is why it is a stated residual.
    async fn n_minus_one(&mut self, rng: &mut StdRng, mode: Isolation) {
        let Some(tap) = self.stack().tap("relay") else {
            return;
        };
        let c = self.stack().url("C");
        let crowd = self.victims(rng, 2);
        let victims = self.victims(rng, self.world.scenario.victims);
        let Some(filler_id) = self.victims(rng, 1).pop() else {
            return;
        };
        let Some(filler) = self.direct_client(&filler_id, &c).await else {
            return;
        };
        let Some(metrics) = self.stack().relayer("C").metrics_addr() else {
            return;
        };
        let exact_healthz = format!("http://{metrics}/healthz");
        let isolator = Arc::new(Isolator {
            armed: Mutex::new(None),
            target_url: c.clone(),
            healthz: if self.world.scenario.leaks.exact_healthz {
                exact_healthz.clone()
            } else {
                format!("{c}/healthz")
            },
            exact_healthz,
            released_into_empty: Mutex::new(Vec::new()),
            http: reqwest::Client::new(),
            mode,
            filler: Arc::new(filler),
            min_batch: self.world.scenario.min_batch,
            filler_owners: Arc::new(Mutex::new(BTreeSet::new())),
        });
        tap.set_interceptor(Some(isolator.clone()));
        // The direct crowd writes to C all along, straight to C.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut crowd_tasks = Vec::new();
        for id in &crowd {
            let Some(client) = self.direct_client(id, &c).await else {
                continue;
            };
            crowd_tasks.push(spawn_crowd_writer(
                client,
                stop.clone(),
                rng.gen(),
                300..2_500,
            ));
        }
        // The lab's ground truth: C's exact queue, sampled through the phase.
        let sampler = {
            let (stop, isolator) = (stop.clone(), isolator.clone());
            tokio::spawn(async move {
                let (mut empty, mut all) = (0u32, 0u32);
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    if let Some(q) = isolator.exact_queue().await {
                        all += 1;
                        empty += u32::from(q == 0);
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                f64::from(empty) / f64::from(all.max(1))
            })
        };
        let mut targets = Vec::new();
        for v in &victims {
            tokio::time::sleep(Duration::from_millis(rng.gen_range(1_000..3_000))).await;
            let Some(client) = self
                .client(v, Some(vec![c.clone()]), &[], |b| b.delay_ms(0, 0))
                .await
            else {
                continue;
            };
            isolator.arm(v.ip);
            if let Some(r) = bounded(client.create_entity(note(rng))).await {
                targets.push(r.owner);
            }
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let chance = sampler.await.unwrap_or(1.0);
        tokio::time::sleep(Duration::from_millis(
            self.world.scenario.max_wait_ms + 2_000,
        ))
        .await;
        for t in crowd_tasks {
            t.abort();
        }
        tap.set_interceptor(None);
        match mode {
            Isolation::Healthz => {
                let released = std::mem::take(
                    &mut *isolator
                        .released_into_empty
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()),
                );
                for empty in released.into_iter().take(targets.len()) {
                    self.out.push("n-minus-one", empty, chance);
                }
            }
            Isolation::Flood => {
                let fillers = isolator
                    .filler_owners
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                let records = self.app_records().await;
                for owner in targets {
                    self.out.push(
                        "n-minus-one-flood",
                        isolated(&records, owner, &fillers),
                        chance,
                    );
                }
            }
        }
    }

    /// A client of `id` that writes straight to relayer `url` (no OHTTP relay, no delay), on
    /// its device's stores.
    pub(crate) async fn direct_client(&self, id: &Identity, url: &str) -> Option<PrivateClient> {
        let b = self
            .world
            .device_stores(PrivateClient::builder(APP), id)
            .wallet(id.wallet.clone())
            .reader(id.reader(self.stack()))
            .fetch(Arc::new(privsvc_rt::ReqwestFetch::with_client(
                id.http.clone(),
            )))
            .relayers([url.to_string()])
            .token_min_age_ms(self.world.scenario.token_min_age_ms)
            .delay_ms(0, 0)
            .poll_interval(self.world.scenario.poll)
            .rarity_k(0);
        self.world.build(b).await.ok()
    }

    async fn app_records(&self) -> Vec<Entity> {
        let select = Select {
            key: true,
            owner: true,
            creator: true,
            created_at: true,
            ..Select::default()
        };
        let e = format!("project = {}", privsvc_client::str_literal(APP));
        query_all(self.stack().reader().as_ref(), &e, &select, None)
            .await
            .unwrap_or_default()
    }

    /// Another user copies a record of each of a few users (create with the same payload and
    /// attributes, transfer to the owner); then each owner starts a new session and scans.
    /// `copies` wins when the owner's records include the copy; `copy-fetch` when the address
    /// that fetched the copy's batch is the owner's.
    async fn copies(&mut self, rng: &mut StdRng) {
        let Ok(writer) = self.stack().writer(COPIER_ACCOUNT).await else {
            return;
        };
        let truth = self
            .world
            .truth
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut by_user: BTreeMap<usize, B256> = BTreeMap::new();
        for w in &truth.writes {
            if let Ok(o) = &w.outcome {
                by_user.entry(w.user).or_insert(o.entity_key);
            }
        }
        let chosen: Vec<(usize, B256)> = by_user
            .into_iter()
            .take(self.world.scenario.victims)
            .collect();
        let reader = self.stack().reader();
        let copier = writer.address();
        let ids = self.world.ids.clone();
        // One copy at a time, its owner's new session scanning right after, so that the copy's
        // neighbours on the ledger are not other copies.
        for (user, key) in &chosen {
            let Some(id) = ids.get(*user) else { continue };
            let Ok(Some(original)) = reader.entity(*key, None).await else {
                continue;
            };
            let (Some(mut create), Some(owner)) = (copy_of(&original), original.owner) else {
                continue;
            };
            create.salt = rng.gen();
            let Ok(keys) = writer.predict_keys(&[create.salt]).await else {
                continue;
            };
            let ops = vec![
                Operation::Create(create),
                Operation::Transfer {
                    key: keys[0],
                    new_owner: owner,
                },
            ];
            if writer.execute(&ops).await.is_err() {
                continue;
            }
            let Ok(Some(copy)) = reader.entity(keys[0], None).await else {
                continue;
            };
            let block = copy.created_at.unwrap_or(0);
            let since = Instant::now();
            let accepted = match self.client(id, None, &[], |b| b).await {
                Some(client) => {
                    let mine = bounded(client.my_entities(&EntitiesQuery::new().refresh()))
                        .await
                        .unwrap_or_default();
                    let mut keys_found: Vec<B256> = mine.iter().map(|r| r.entity_key).collect();
                    if self.world.scenario.leaks.copies_accepted {
                        keys_found.extend(
                            copies_as_accepted_before(id.reader(self.stack()), &mine).await,
                        );
                    }
                    keys_found.contains(&keys[0])
                }
                None => false,
            };
            self.out.push("copies", accepted, 0.0);
            // The RPC's view since the copy landed: who fetched the copy's batch first.
            let fetchers: Vec<IpAddr> = self
                .rpc_since(since)
                .into_iter()
                .filter(|(_, body)| {
                    body["method"] == "arkiv_query"
                        && body["params"][0].as_str().is_some_and(|x| {
                            crate::attacks::batches_in(x).contains(&(block, copier))
                        })
                })
                .map(|(source, _)| source)
                .collect();
            let scanning = ids.len().max(1);
            self.out.push(
                "copy-fetch",
                fetchers.first() == Some(&id.ip),
                1.0 / scanning as f64,
            );
        }
    }

    /// Each victim runs a session with a scan cache (listing, scan, the cache saved), one after
    /// another, a block apart, all within one resume unit; then each comes back, in random
    /// order and from a new address, for a second session that resumes from the cache. The RPC
    /// guesses, for each second session, which first session it continues: the one whose
    /// listings were made at the resume block or closest after it. With a coarse resume block
    /// every first session ended in the unit the block starts, so the guess is at chance.
    async fn returning_sessions(&mut self, rng: &mut StdRng) {
        let granularity = if self.world.scenario.leaks.exact_resume_block {
            1
        } else {
            LAB_RESUME_BLOCKS
        };
        let victims = self.victims(rng, self.world.scenario.victims);
        // A directory of this phase's own, removed when the phase ends.
        let Ok(phase_dir) = tempfile::Builder::new()
            .prefix("privsvc-lab-resume-")
            .tempdir()
        else {
            return;
        };
        let dir = phase_dir.path().to_path_buf();
        let node = self.stack().devnet();
        // The first sessions start just after a resume boundary (a few blocks each fit in it).
        if let Ok(head) = self.stack().reader().block_number().await {
            let _ = node.mine_blocks(LAB_RESUME_BLOCKS - head % LAB_RESUME_BLOCKS + 1);
        }
        let since = Instant::now();
        let mut first = Vec::new();
        for v in &victims {
            let file = dir.join(format!("{}.scan", v.index));
            let Some(client) = self.reading_client(v, &file, granularity).await else {
                continue;
            };
            if bounded(client.my_entities(&EntitiesQuery::new()))
                .await
                .is_some()
            {
                first.push((v, file));
            }
            drop(client);
            let _ = node.mine_blocks(1);
        }
        let mut order: Vec<usize> = (0..first.len()).collect();
        rand::seq::SliceRandom::shuffle(order.as_mut_slice(), rng);
        let mut second = Vec::new();
        for i in order {
            let (v, file) = &first[i];
            let ip = crate::population::user_ip(self.next);
            self.next += 1;
            let Ok(moved) = v.elsewhere(ip) else {
                continue;
            };
            let Some(client) = self.reading_client(&moved, file, granularity).await else {
                continue;
            };
            let resumed = matches!(
                client.scan_cache_state(),
                privsvc_client::ScanCacheState::Resumed { .. }
            );
            drop(client);
            if resumed {
                second.push((v.ip, ip));
            }
        }
        drop(phase_dir);

        // The RPC's view: every listing since the phase began, by source address.
        let mut blocks_of: BTreeMap<IpAddr, Vec<u64>> = BTreeMap::new();
        let mut resume_of: BTreeMap<IpAddr, u64> = BTreeMap::new();
        for (source, body) in self.rpc_since(since) {
            let expression = body["params"][0].as_str().unwrap_or_default();
            if body["method"] != "arkiv_query"
                || !expression.starts_with("project = ")
                || expression.contains("$createdAt = ")
            {
                continue;
            }
            if let Some(b) = body["params"][1]["atBlock"]
                .as_str()
                .and_then(|q| u64::from_str_radix(q.trim_start_matches("0x"), 16).ok())
            {
                blocks_of.entry(source).or_default().push(b);
            }
            if let Some(r) = expression
                .split("$createdAt > u64(")
                .nth(1)
                .and_then(|rest| rest.split(')').next())
                .and_then(|b| b.parse().ok())
            {
                let lowest = resume_of.entry(source).or_insert(r);
                *lowest = (*lowest).min(r);
            }
        }
        let firsts: Vec<IpAddr> = first.iter().map(|(v, _)| v.ip).collect();
        let chance = 1.0 / firsts.len().max(1) as f64;
        for (was, now) in second {
            let Some(resume) = resume_of.get(&now) else {
                continue;
            };
            // The first sessions whose listings came closest after the resume block.
            let distance = |ip: &IpAddr| {
                blocks_of
                    .get(ip)
                    .into_iter()
                    .flatten()
                    .filter(|b| **b >= *resume)
                    .map(|b| b - resume)
                    .min()
                    .unwrap_or(u64::MAX)
            };
            let best = firsts.iter().map(distance).min().unwrap_or(u64::MAX);
            let closest: Vec<IpAddr> = firsts
                .iter()
                .copied()
                .filter(|ip| distance(ip) == best)
                .collect();
            let guess = crate::attacks::pick(&closest, rng);
            self.out.push("resume-link", guess == Some(was), chance);
        }
    }

    /// The relay's operator publishes a heartbeat naming relayer A's URL with the relay's own
    /// gateway key, and answers what is encapsulated to that key itself, forwarding it to A
    /// (a man in the middle). A victim whose submission the relay decrypted wins.
    async fn key_substitution(&mut self, rng: &mut StdRng) {
        let stack = self.stack();
        let (Some(tap), Some(relay_direct)) = (stack.tap("relay"), stack.relay_direct_url()) else {
            return;
        };
        let Ok(writer) = stack.writer(RELAY_ACCOUNT).await else {
            return;
        };
        let seed: [u8; 32] = rng.gen();
        let Ok(gateway) = OhttpGateway::from_seed(&seed) else {
            return;
        };
        let a_url = stack.url("A");
        let Some(a_seed) = stack.ohttp_seed_of("A") else {
            return;
        };
        let Ok(a_key) = OhttpGateway::from_seed(&a_seed).map(|g| g.public_key()) else {
            return;
        };
        let heartbeat = Heartbeat {
            url: a_url.clone(),
            address: writer.address(),
            chain_id: stack.devnet().chain_id(),
            version: privsvc_client::API_VERSION.into(),
            ohttp_key: Some(gateway.public_key()),
        };
        let salt: u128 = rng.gen();
        let Ok(keys) = writer.predict_keys(&[salt]).await else {
            return;
        };
        let Ok(create) = heartbeat.to_create(salt) else {
            return;
        };
        if writer.execute(&[Operation::Create(create)]).await.is_err() {
            return;
        }
        let mitm = Arc::new(Mitm {
            public_key: gateway.public_key(),
            gateway,
            address: writer.address(),
            target: a_url.clone(),
            real_key: a_key,
            relay: relay_direct,
            decrypted: Mutex::new(Vec::new()),
        });
        tap.set_interceptor(Some(mitm.clone()));
        let (b, c) = (stack.url("B"), stack.url("C"));
        let victims = self.victims(rng, self.world.scenario.victims);
        let leak = self.world.scenario.leaks.newest_heartbeat_identity;
        // The victims write at the same time (each its own session).
        let this = &*self;
        futures::future::join_all(victims.iter().map(|v| {
            let (params, a_url, bad) = (note(rng), a_url.clone(), [b.clone(), c.clone()]);
            async move {
                // The leak: the account of the newest heartbeat naming A's URL, from any
                // account, pinned as A's (the relay's own heartbeat is the newest).
                let pinned = if leak {
                    newest_heartbeat_account(v.reader(stack).as_ref(), &a_url).await
                } else {
                    None
                };
                let configure = |x: privsvc_client::ClientBuilder| match pinned {
                    Some(account) => {
                        x.relayers([privsvc_client::RelayerRef::with_address(a_url, account)])
                    }
                    None => x,
                };
                if let Some(client) = this.client(v, None, &bad, configure).await {
                    let _ =
                        tokio::time::timeout(Duration::from_secs(30), client.create_entity(params))
                            .await;
                }
            }
        }))
        .await;
        tap.set_interceptor(None);
        let decrypted = mitm
            .decrypted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for v in &victims {
            let read = decrypted
                .iter()
                .any(|(ip, path)| *ip == v.ip && path == "/v1/records");
            self.out.push("key-substitution", read, 0.0);
        }
        // Remove the heartbeat, so that nothing after this phase meets it.
        let _ = writer.execute(&[Operation::Delete { key: keys[0] }]).await;
    }
}

/// Whether `owner`'s record shares its batch with no other record of the app except the
/// attacker's fillers (whose one-time owners the attacker knows).
fn isolated(records: &[Entity], owner: Address, fillers: &BTreeSet<Address>) -> bool {
    let Some(mine) = records.iter().find(|r| r.owner == Some(owner)) else {
        return false;
    };
    let batch = (mine.created_at, mine.creator);
    !records.iter().any(|r| {
        r.key != mine.key
            && (r.created_at, r.creator) == batch
            && !r.owner.is_some_and(|o| fillers.contains(&o))
    })
}

/// The result of a victim's action, or `None` when it failed or took longer than a minute.
/// A crowd member's writes until `stop`: a note of an hour after each random gap of
/// `gap_ms`, each write bounded like every phase's.
pub(crate) fn spawn_crowd_writer(
    client: PrivateClient,
    stop: Arc<std::sync::atomic::AtomicBool>,
    seed: u64,
    gap_ms: std::ops::Range<u64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut n = 0u32;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            n += 1;
            tokio::time::sleep(Duration::from_millis(rng.gen_range(gap_ms.clone()))).await;
            let p = CreateParams::new(
                format!("crowd {n}").into_bytes(),
                "text/plain",
                Expires::Hours(1),
            )
            .attribute("kind", "note");
            let _ = bounded(client.create_entity(p)).await;
        }
    })
}

pub(crate) async fn bounded<T, E>(f: impl std::future::Future<Output = Result<T, E>>) -> Option<T> {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .ok()
        .and_then(Result::ok)
}

/// A create with the payload, content type and attributes of `e` (its salt to be set).
/// The account of the newest live heartbeat naming `url`, whoever created it (how the client
/// found a relayer's identity before revision 3).
async fn newest_heartbeat_account(
    reader: &dyn privsvc_ledger::LedgerReader,
    url: &str,
) -> Option<Address> {
    let url = privsvc_ohttp::normalize_relayer_url(url).ok()?;
    privsvc_client::heartbeat_relayers(reader)
        .await
        .ok()?
        .into_iter()
        .filter(|h| h.url == url)
        .max_by_key(|h| h.created_at)
        .map(|h| h.creator)
}

/// The copies the client before revision 3 accepted besides `mine`: every entity of the app
/// owned by the one-time owner of one of the user's records, fetched with that record's batch
/// (as a scan fetched every batch holding one of the user's tags), whose envelope is the
/// record's.
async fn copies_as_accepted_before(
    reader: Arc<dyn privsvc_ledger::LedgerReader>,
    mine: &[privsvc_client::MyRecord],
) -> Vec<B256> {
    let Ok(listing) = privsvc_client::list_app(reader.as_ref(), APP, None, None).await else {
        return Vec::new();
    };
    let known: BTreeSet<B256> = mine.iter().map(|r| r.entity_key).collect();
    let mut out = Vec::new();
    for row in listing.entities.iter().filter(|e| !known.contains(&e.key)) {
        let Some(record) = mine.iter().find(|r| Some(r.owner) == row.owner) else {
            continue;
        };
        let (Some(block), Some(creator)) = (row.created_at, row.creator) else {
            continue;
        };
        let batches = [
            privsvc_client::BatchId { block, creator },
            privsvc_client::BatchId {
                block: record.created_at,
                creator: record.creator,
            },
        ];
        let Ok(fetched) = privsvc_client::fetch_batches(reader.as_ref(), APP, &batches, None).await
        else {
            continue;
        };
        let payload_of = |key: B256| fetched.iter().find(|e| e.key == key).map(|e| &e.payload);
        if payload_of(row.key).is_some() && payload_of(row.key) == payload_of(record.entity_key) {
            out.push(row.key);
        }
    }
    out
}

fn copy_of(e: &Entity) -> Option<Create> {
    let attrs = e.attributes.clone()?;
    let blocks = e.expires_at?.saturating_sub(e.created_at?);
    Some(Create {
        salt: 0,
        expires_at: 0,
        min_lifetime: blocks.max(1),
        flags: CreationFlags::default(),
        content_type: e
            .content_type
            .clone()
            .unwrap_or_else(|| "application/json".into()),
        payload: e.payload.clone()?,
        attributes: attrs,
    })
}

/// Replays the POSTs of chosen sources `times` times, a second after the original; only those
/// at least `min_bytes` long.
struct Replayer {
    sources: BTreeSet<IpAddr>,
    times: usize,
    /// Replays continue only when the first replay's answer is at least this large (1: all).
    min_answer: usize,
    replayed: Arc<Mutex<BTreeSet<IpAddr>>>,
}

impl Replayer {
    fn new(sources: impl Iterator<Item = IpAddr>, times: usize, min_answer: usize) -> Self {
        Replayer {
            sources: sources.collect(),
            times,
            min_answer,
            replayed: Arc::new(Mutex::new(BTreeSet::new())),
        }
    }

    fn replayed_handle(&self) -> Arc<Mutex<BTreeSet<IpAddr>>> {
        self.replayed.clone()
    }

    fn replayed_sources(&self) -> BTreeSet<IpAddr> {
        self.replayed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The sources of the originals (after `since`) at least one of whose replays was answered
    /// with another status or another size.
    fn differing(&self, tap: &privsvc_testkit::Tap, since: Instant) -> BTreeSet<IpAddr> {
        let ex: Vec<privsvc_testkit::Exchange> = tap
            .exchanges()
            .into_iter()
            .filter(|e| e.at >= since)
            .collect();
        let mut out = BTreeSet::new();
        for original in ex
            .iter()
            .filter(|e| !e.injected && self.sources.contains(&e.request.source))
        {
            for replay in ex
                .iter()
                .filter(|e| e.injected && e.request.body == original.request.body)
            {
                if replay.status != original.status
                    || replay.response.len() != original.response.len()
                {
                    out.insert(original.request.source);
                }
            }
        }
        out
    }
}

#[async_trait]
impl Interceptor for Replayer {
    async fn intercept(&self, request: &TapRequest, forward: &Forwarder) -> Action {
        if request.method == "POST" && self.sources.contains(&request.source) {
            let (request, forward, times, min_answer) = (
                request.clone(),
                forward.clone(),
                self.times,
                self.min_answer,
            );
            let replayed = self.replayed_handle();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                // The first replay tells what the request was by the size of its answer.
                let probe = forward.send(&request).await;
                if probe.body.len() < min_answer {
                    return;
                }
                replayed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(request.source);
                for _ in 1..times {
                    forward.send(&request).await;
                }
            });
        }
        Action::Forward
    }
}

/// What a relayer in the lab's hands does to submissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// Accept, then answer `queued` with a position one lower at every poll, forever.
    Ratchet,
    /// Answer 400 to every submission.
    Refuse,
}

/// A relayer's tap turned active: it holds the relayer's gateway key, so it opens requests and
/// answers them itself.
struct RelayerActor {
    gateway: OhttpGateway,
    behaviour: Behaviour,
    fake: Mutex<BTreeMap<String, u64>>,
}

#[async_trait]
impl Interceptor for RelayerActor {
    async fn intercept(&self, request: &TapRequest, _forward: &Forwarder) -> Action {
        if request.path != "/v1/ohttp" {
            return Action::Forward;
        }
        let Ok((inner, sealer)) = self.gateway.open(&request.body) else {
            return Action::Forward;
        };
        let answer: Option<(u16, Value)> =
            match (self.behaviour, inner.method.as_str(), inner.path.as_str()) {
                (Behaviour::Refuse, "POST", "/v1/records") => {
                    Some((400, json!({ "error": "the envelope is malformed" })))
                }
                (Behaviour::Ratchet, "POST", "/v1/records") => {
                    let id = format!("{:032x}", rand::random::<u128>());
                    self.fake
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(id.clone(), 1_000_000);
                    Some((202, json!({ "id": id })))
                }
                (Behaviour::Ratchet, "GET", path) => {
                    let id = path.trim_start_matches("/v1/records/").to_string();
                    let mut fake = self.fake.lock().unwrap_or_else(|p| p.into_inner());
                    fake.get_mut(&id).map(|position| {
                        *position = position.saturating_sub(1);
                        (
                            200,
                            json!({ "id": id, "state": "queued", "position": *position }),
                        )
                    })
                }
                _ => None,
            };
        let Some((status, body)) = answer else {
            return Action::Forward;
        };
        let headers = vec![("content-type".to_string(), "application/json".to_string())];
        match sealer.seal(status, &headers, body.to_string().as_bytes()) {
            Ok(sealed) => Action::Respond {
                status: 200,
                content_type: Some("message/ohttp-res".into()),
                body: sealed,
            },
            Err(_) => Action::Forward,
        }
    }
}

/// How the relay isolates a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isolation {
    /// Wait until `/healthz` reads an empty queue, then send the target with fillers.
    Healthz,
    /// Flush the queue with fillers first, then send the target with fillers.
    Flood,
}

/// Submissions with unmeetable holds in the head-of-line phase: more than relayer C's
/// `MAX_BATCH` in the lab (10).
const FLOOD_HOLDS: usize = 14;
/// The flood's `maxHoldMs`: longer than the victims are watched (2 s after the flood, for 20 s).
const FLOOD_HOLD: Duration = Duration::from_secs(25);

/// How long the n-1 relay holds a target at most (`MAX_WAIT_MS` and the flush jitter empty
/// any queue within it).
const HOLD: Duration = Duration::from_secs(6);

/// The relay's n-1 attack on relayer C (see [`Phases::n_minus_one`]).
struct Isolator {
    /// The source whose next request to C is the target submission.
    /// The source whose next request to C is the target submission.
    armed: Mutex<Option<IpAddr>>,
    target_url: String,
    /// The `/healthz` the relay reads: C's public one, or with `Leaks::exact_healthz` the
    /// exact one.
    healthz: String,
    /// C's exact `/healthz` (`METRICS_BIND`): the lab's ground truth, not the relay's view.
    exact_healthz: String,
    /// For each target, whether C's queue was in truth empty when the relay released it.
    released_into_empty: Mutex<Vec<bool>>,
    http: reqwest::Client,
    mode: Isolation,
    filler: Arc<PrivateClient>,
    min_batch: usize,
    /// The one-time owners of the relay's own filler records (the attacker knows them).
    filler_owners: Arc<Mutex<BTreeSet<Address>>>,
}

impl Isolator {
    fn arm(&self, ip: IpAddr) {
        *self.armed.lock().unwrap_or_else(|p| p.into_inner()) = Some(ip);
    }

    async fn queue_at(&self, url: &str) -> Option<u64> {
        let r = self.http.get(url).send().await.ok()?;
        r.json::<Value>().await.ok()?["queue"].as_u64()
    }

    /// What the relay reads: whether `/healthz` shows an empty queue.
    async fn queue_is_empty(&self) -> bool {
        self.queue_at(&self.healthz).await == Some(0)
    }

    /// C's exact queue length (ground truth).
    async fn exact_queue(&self) -> Option<u64> {
        self.queue_at(&self.exact_healthz).await
    }

    /// Sends `n` filler records to C, each on its own task.
    fn fillers(&self, n: usize) -> Vec<tokio::task::JoinHandle<()>> {
        (0..n)
            .map(|i| {
                let (filler, owners) = (self.filler.clone(), self.filler_owners.clone());
                tokio::spawn(async move {
                    let p = CreateParams::new(
                        format!("filler {i}").into_bytes(),
                        "text/plain",
                        Expires::Hours(1),
                    )
                    .attribute("kind", "note");
                    if let Some(r) = bounded(filler.create_entity(p)).await {
                        owners
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(r.owner);
                    }
                })
            })
            .collect()
    }
}

#[async_trait]
impl Interceptor for Isolator {
    async fn intercept(&self, request: &TapRequest, _forward: &Forwarder) -> Action {
        let to_c = request
            .header("x-privsvc-target")
            .map(|t| t.trim_end_matches('/'))
            == Some(self.target_url.trim_end_matches('/'));
        let target = {
            let mut armed = self.armed.lock().unwrap_or_else(|p| p.into_inner());
            to_c && *armed == Some(request.source) && armed.take().is_some()
        };
        if !target {
            return Action::Forward;
        }
        match self.mode {
            Isolation::Healthz => {
                let deadline = Instant::now() + HOLD;
                while Instant::now() < deadline && !self.queue_is_empty().await {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let empty = self.exact_queue().await == Some(0);
                self.released_into_empty
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(empty);
            }
            Isolation::Flood => {
                // Flush whatever is queued: MIN_BATCH fillers make a batch at once.
                for t in self.fillers(self.min_batch) {
                    let _ = t.await;
                }
            }
        }
        // The target goes now, its companions right behind it.
        drop(self.fillers(self.min_batch.saturating_sub(1)));
        tokio::time::sleep(Duration::from_millis(20)).await;
        Action::Forward
    }
}

/// The relay as a man in the middle for the relayer whose URL its own heartbeat names.
struct Mitm {
    gateway: OhttpGateway,
    public_key: String,
    address: Address,
    target: String,
    real_key: String,
    relay: String,
    decrypted: Mutex<Vec<(IpAddr, String)>>,
}

#[async_trait]
impl Interceptor for Mitm {
    async fn intercept(&self, request: &TapRequest, _forward: &Forwarder) -> Action {
        let to_target = request
            .header("x-privsvc-target")
            .map(|t| t.trim_end_matches('/'))
            == Some(self.target.trim_end_matches('/'));
        if !to_target {
            return Action::Forward;
        }
        let Ok((inner, sealer)) = self.gateway.open(&request.body) else {
            return Action::Forward;
        };
        self.decrypted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((request.source, inner.path.clone()));
        let fetch = privsvc_rt::ReqwestFetch::with_client(reqwest::Client::new());
        let answer = privsvc_ohttp::ohttp_call(
            &self.relay,
            &self.target,
            &self.real_key,
            RelayerRequest {
                method: inner.method.clone(),
                path: inner.path.clone(),
                body: (!inner.body.is_empty()).then(|| inner.body.clone()),
            },
            &fetch,
        )
        .await;
        let (status, mut body) = match answer {
            Ok(a) => (a.status, a.body),
            Err(_) => (502, b"{\"error\":\"unreachable\"}".to_vec()),
        };
        if inner.path == "/v1/info" {
            if let Ok(mut info) = serde_json::from_slice::<Value>(&body) {
                info["address"] = json!(self.address.to_checksum(None));
                info["ohttpKey"] = json!(self.public_key);
                body = info.to_string().into_bytes();
            }
        }
        let headers = vec![("content-type".to_string(), "application/json".to_string())];
        match sealer.seal(status, &headers, &body) {
            Ok(sealed) => Action::Respond {
                status: 200,
                content_type: Some("message/ohttp-res".into()),
                body: sealed,
            },
            Err(_) => Action::Forward,
        }
    }
}
