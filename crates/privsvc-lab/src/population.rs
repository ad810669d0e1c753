//! The simulated population: users with their own wallets and network addresses, each running a
//! few sessions of the real `PrivateClient` over the compressed day, through the stack's RPC tap
//! and OHTTP relay tap. What they did is written down in a [`Truth`].

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256, U256};
use async_trait::async_trait;
use privsvc_client::{
    CreateParams, EntitiesQuery, Expires, LocalWallet, PrivateClient, ProveParams, Wallet,
};
use privsvc_ledger::{
    Entity, LedgerError, LedgerReader, PageQuery, QueryOptions, QueryPage, RpcLedger,
};
use privsvc_testkit::LocalStack;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::scenario::{Scenario, APP};
use crate::truth::{Scan, Session, Truth, User, Write, Written};

/// The network address of user `index`: 127.0.1.1, 127.0.1.2, ... then 127.0.2.1, ...
pub fn user_ip(index: usize) -> IpAddr {
    let n = index + 1;
    IpAddr::V4(Ipv4Addr::new(
        127,
        0,
        1 + (n / 250) as u8,
        (n % 250) as u8 + 1,
    ))
}

/// The address of user `index`'s other connection: `slot` 1 is the second address of the
/// user's device, 2 the user's second device (127.0.11.x and 127.0.21.x for the first 249
/// users, apart from every address of [`user_ip`]).
pub fn device_ip(index: usize, slot: u8) -> IpAddr {
    let n = index + 1;
    IpAddr::V4(Ipv4Addr::new(
        127,
        0,
        10 * slot + 1 + (n / 250) as u8,
        (n % 250) as u8 + 1,
    ))
}

/// A user of the population: the device, and how the user and the user's app behave.
#[derive(Clone)]
pub struct Person {
    /// The user's device at its usual address.
    pub device: Identity,
    /// The same device at its second address, for users who connect from two.
    pub roaming: Option<Identity>,
    /// The user's second device, if any.
    pub second: Option<Identity>,
    /// The app calls `my_entities` without `refresh` when a page opens and after each write.
    pub app_lists: bool,
}

impl Person {
    /// The truth's record of this user.
    pub fn user(&self) -> User {
        User {
            roaming_ip: self.roaming.as_ref().map(|i| i.ip),
            second_device_ip: self.second.as_ref().map(|i| i.ip),
            ..self.device.user()
        }
    }
}

/// A clock that is off by 5 minutes to nearly 2 hours behind, or 5 to 55 minutes ahead: as far
/// as a relayer still takes the envelope's hour (two hours back, one ahead).
fn clock_skew(rng: &mut StdRng) -> i64 {
    if rng.gen_bool(0.5) {
        -rng.gen_range(300..6_900)
    } else {
        rng.gen_range(300..3_300)
    }
}

/// `round(n * share)` distinct indices below `n`, drawn from `rng`.
fn chosen(n: usize, share: f64, rng: &mut StdRng) -> BTreeSet<usize> {
    let k = ((n as f64 * share).round() as usize).min(n);
    rand::seq::index::sample(rng, n, k).into_iter().collect()
}

/// Draws each user's devices and habits from the scenario's shares (a share of `n` users is
/// `round(n * share)` of them, so that a small population has each kind); persistent devices
/// keep their scan cache in `cache_dir`.
pub fn people(
    sc: &Scenario,
    ids: Vec<Identity>,
    cache_dir: &std::path::Path,
    rng: &mut StdRng,
) -> Result<Vec<Person>, crate::LabError> {
    let n = ids.len();
    let default_stores = chosen(n, sc.default_store_share, rng);
    let skewed = chosen(n, sc.skewed_clock_share, rng);
    let roaming = chosen(n, sc.roaming_share, rng);
    let second = chosen(n, sc.second_device_share, rng);
    let app_lists = chosen(n, sc.app_list_share, rng);
    let mut out = Vec::with_capacity(n);
    for (i, mut device) in ids.into_iter().enumerate() {
        device.default_stores = default_stores.contains(&i);
        if !device.default_stores {
            device.scan_cache = Some(cache_dir.join(format!("user-{}.scan", device.index)));
        }
        if skewed.contains(&i) {
            device.clock_skew_secs = clock_skew(rng);
        }
        let roaming = if roaming.contains(&i) {
            Some(device.elsewhere(device_ip(device.index, 1))?)
        } else {
            None
        };
        let second = if second.contains(&i) {
            let skew = if rng.gen_bool(sc.skewed_clock_share) {
                clock_skew(rng)
            } else {
                0
            };
            Some(device.other_device(device_ip(device.index, 2), skew)?)
        } else {
            None
        };
        out.push(Person {
            app_lists: app_lists.contains(&i),
            device,
            roaming,
            second,
        });
    }
    Ok(out)
}

/// A user's network identity: the wallet, an HTTP client bound to the user's own address, and
/// the token store the user's sessions share (as a browser's persistent store would be).
#[derive(Clone)]
pub struct Identity {
    /// The user's index.
    pub index: usize,
    /// The wallet.
    pub wallet: Arc<LocalWallet>,
    /// The source address.
    pub ip: IpAddr,
    /// HTTP from that address (ledger, relay, issuer).
    pub http: reqwest::Client,
    /// The user's token store, kept across sessions.
    pub tokens: Arc<dyn privsvc_tokens::TokenStore>,
    /// The user comes back from an earlier day (see [`run_prologue`]).
    pub returning: bool,
    /// The device runs on the client's default stores: no token store and no scan cache are
    /// passed to its clients (`tokens` is then unused).
    pub default_stores: bool,
    /// Where the device keeps its scan cache between sessions (none: not kept).
    pub scan_cache: Option<std::path::PathBuf>,
    /// How far the device's clock is off, seconds (where the client reads it for the hour).
    pub clock_skew_secs: i64,
    /// Which of the user's devices this is (1: the first, 2: a second device).
    pub device: u8,
}

impl Identity {
    /// User `index` with a wallet drawn from `rng`.
    pub fn new(index: usize, rng: &mut StdRng) -> Result<Identity, crate::LabError> {
        Identity::at(index, user_ip(index), rng)
    }

    /// User `index` at the address `ip`, with a wallet drawn from `rng`.
    pub fn at(index: usize, ip: IpAddr, rng: &mut StdRng) -> Result<Identity, crate::LabError> {
        let key: [u8; 32] = rng.gen();
        let wallet =
            Arc::new(
                LocalWallet::from_bytes(&key).map_err(|e| crate::LabError::Setup {
                    what: "wallet",
                    source: e.into(),
                })?,
            );
        let http = http_from(ip)?;
        Ok(Identity {
            index,
            wallet,
            ip,
            http,
            tokens: privsvc_tokens::memory_store(),
            returning: false,
            default_stores: false,
            scan_cache: None,
            clock_skew_secs: 0,
            device: 1,
        })
    }

    /// The truth's record of this user.
    pub fn user(&self) -> User {
        User {
            index: self.index,
            wallet: self.wallet.address(),
            ip: self.ip,
            returning: self.returning,
            default_stores: self.default_stores,
            roaming_ip: None,
            second_device_ip: None,
        }
    }

    /// The same device (wallet, stores, scan cache, clock) at another address.
    pub fn elsewhere(&self, ip: IpAddr) -> Result<Identity, crate::LabError> {
        let http = http_from(ip)?;
        Ok(Identity {
            http,
            ip,
            ..self.clone()
        })
    }

    /// Another device of the same wallet at `ip`: the default stores, no scan cache, a clock
    /// off by `clock_skew_secs`.
    pub fn other_device(
        &self,
        ip: IpAddr,
        clock_skew_secs: i64,
    ) -> Result<Identity, crate::LabError> {
        let http = http_from(ip)?;
        Ok(Identity {
            index: self.index,
            wallet: self.wallet.clone(),
            ip,
            http,
            tokens: privsvc_tokens::memory_store(),
            returning: self.returning,
            default_stores: true,
            scan_cache: None,
            clock_skew_secs,
            device: 2,
        })
    }

    /// A name for this device's data directory: the same for the device at any address, its
    /// own for another device of the user.
    pub fn device_name(&self) -> String {
        format!(
            "user-{}-{}-{}.device",
            self.index,
            self.wallet.address(),
            self.device
        )
    }

    /// A reader of the stack's RPC from this user's address.
    pub fn reader(&self, stack: &LocalStack) -> Arc<dyn LedgerReader> {
        Arc::new(RpcLedger::with_client(self.http.clone(), stack.rpc_url()))
    }
}

/// HTTP from `ip` (ledger, relay, issuer): 30 s per call, no redirects.
fn http_from(ip: IpAddr) -> Result<reqwest::Client, crate::LabError> {
    reqwest::Client::builder()
        .local_address(ip)
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| crate::LabError::Setup {
            what: "http client",
            source: e.into(),
        })
}

/// The lab's side of a run: the stack, the scenario, what happened.
pub struct World {
    /// The stack.
    pub stack: LocalStack,
    /// The scenario.
    pub scenario: Scenario,
    /// When the run started (time zero of every view).
    pub epoch: Instant,
    /// Ground truth.
    pub truth: Mutex<Truth>,
    /// The population's identities.
    pub ids: Vec<Identity>,
    /// Where the devices keep their device stores for the run (one directory per device, as
    /// the client's default data directory is one per device; [`World::device_stores`]).
    pub store_dir: std::path::PathBuf,
    /// Clients of the run built with a device store outside `store_dir` ([`World::build`]).
    pub stores_outside_run: std::sync::atomic::AtomicUsize,
}

impl World {
    fn record_session(&self, s: Session) -> usize {
        let mut t = self.truth.lock().unwrap_or_else(|p| p.into_inner());
        t.sessions.push(s);
        t.sessions.len() - 1
    }

    fn update_session(&self, index: usize, ended: Instant, error: Option<String>) {
        let mut t = self.truth.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = t.sessions.get_mut(index) {
            s.ended = ended;
            s.error = error;
        }
    }

    /// Records a write.
    pub fn record_write(&self, w: Write) {
        self.truth
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .writes
            .push(w);
    }

    fn record_scan(&self, s: Scan) {
        self.truth
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .scans
            .push(s);
    }

    /// Builds the client of `b`, counting it in `stores_outside_run` when its device store is
    /// outside the run's directory: every client of the lab is built here, and a run's report
    /// must show none (the lab's tests check it).
    pub async fn build(
        &self,
        b: privsvc_client::ClientBuilder,
    ) -> Result<PrivateClient, privsvc_client::PrivsvcError> {
        let client = b.build().await?;
        if client
            .device_store()
            .is_some_and(|store| !store.dir().starts_with(&self.store_dir))
        {
            self.stores_outside_run
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(client)
    }

    /// `b` with the stores of `id`'s device: the device store in the device's directory under
    /// [`World::store_dir`], with the device's own token store and scan cache unless it runs on
    /// the default stores (memory stores with the `memory_stores` leak).
    ///
    /// A client of the lab left to the default data directory shares it with every other lab
    /// run of the machine (the same seed draws the same wallets, so the same stores). Until
    /// 2026-11-29 the lab's direct and flooding clients kept their whole stores there, and
    /// every device not on the default stores its pins.
    pub fn device_stores(
        &self,
        mut b: privsvc_client::ClientBuilder,
        id: &Identity,
    ) -> privsvc_client::ClientBuilder {
        if id.default_stores && self.scenario.leaks.memory_stores {
            // The client's default before revision 4: memory, new in every session.
            b = b.memory_stores(true);
        } else {
            // The device's data directory: the whole device store on the default stores, the
            // pins beside the device's own token store and scan cache otherwise.
            b = b.data_dir(self.store_dir.join(id.device_name()));
            if !id.default_stores {
                b = b.token_store(id.tokens.clone());
            }
        }
        if let Some(path) = &id.scan_cache {
            b = b.scan_cache_file(path);
        }
        b
    }

    /// A client builder for `id` as an application builds one: relayers discovered from
    /// heartbeats, every relayer call through the OHTTP relay, the scenario's timings; the
    /// device's token store and scan cache unless it runs on the default stores, and its
    /// clock.
    pub fn client_builder(
        &self,
        id: &Identity,
        reader: Arc<dyn LedgerReader>,
        min_anonymity: u64,
    ) -> privsvc_client::ClientBuilder {
        let sc = &self.scenario;
        let mut b = PrivateClient::builder(APP)
            .wallet(id.wallet.clone())
            .reader(reader.clone())
            .fetch(Arc::new(privsvc_rt::ReqwestFetch::with_client(
                id.http.clone(),
            )))
            .token_min_age_ms(sc.token_min_age_ms)
            .token_ripe_wait_ms(sc.token_min_age_ms * 4)
            // A session's own tokens ripen at random ages up to four minimum ages (the client's
            // default, an hour, is sixty: the lab's day is compressed).
            .token_max_ripe_ms(sc.token_min_age_ms * 4)
            .delay_ms(0, sc.delay_ms_max)
            .poll_interval(sc.poll)
            .schedule(lab_schedule(sc))
            .min_anonymity(min_anonymity);
        b = self.device_stores(b, id);
        if sc.leaks.device_clock_hour && id.clock_skew_secs != 0 {
            b = b.lab_device_clock_hour(id.clock_skew_secs);
        }
        if sc.leaks.on_demand_tokens {
            b = b.allow_on_demand(true);
        }
        if let Some(relay) = self.stack.relay_url() {
            b = b.ohttp_relay(relay.clone());
            if sc.leaks.small_submissions {
                // The transport the client would make, with the leaky padding.
                if let Ok(t) = privsvc_ohttp::OhttpTransport::new(&relay, reader.clone()) {
                    let fetch = Arc::new(privsvc_rt::ReqwestFetch::with_client(id.http.clone()));
                    b = b.transport(Arc::new(t.with_fetch(fetch).lab_small_submissions()));
                }
            }
        }
        if sc.defences.cover_per_minute > 0.0 {
            b = b.cover(sc.defences.cover_per_minute, 0.1);
        }
        if min_anonymity > 1 {
            b = b.max_hold_ms(20_000);
        }
        if sc.leaks.no_covers || sc.leaks.fresh_covers {
            b = b.cover_batches(0);
        }
        b
    }
}

/// The session timers of the compressed day: tails every 1.5 to 4.5 s (a tenth of the real
/// 15 to 45 s), status polls for up to `status_tail_max` (6 s, a tenth of the real 60 s) after
/// `written`, the first refill within 5 s of a
/// session's start, later ones 5 to 60 s apart. With the `on_demand_tokens` leak there are no
/// refills; with `no_poll_tail` the polls stop at `written`.
pub fn lab_schedule(sc: &Scenario) -> privsvc_client::SessionSchedule {
    let never = (Duration::from_secs(86_400), Duration::from_secs(86_400));
    privsvc_client::SessionSchedule {
        tail: (Duration::from_millis(1_500), Duration::from_millis(4_500)),
        status_tail: if sc.leaks.no_poll_tail {
            (Duration::ZERO, Duration::ZERO)
        } else {
            (Duration::ZERO, sc.status_tail_max)
        },
        // With `no_poll_tail` the polls stop at `written` (no horizon either).
        status_horizon_rounds: if sc.leaks.no_poll_tail {
            (0.0, 0.0)
        } else {
            (1.0, 3.0)
        },
        refill_below: 5,
        first_refill: if sc.leaks.on_demand_tokens {
            never
        } else {
            (Duration::ZERO, Duration::from_secs(5))
        },
        later_refill: if sc.leaks.on_demand_tokens {
            never
        } else {
            (Duration::from_secs(5), Duration::from_secs(60))
        },
        // A tenth of the real 1 to 3 minutes; fetch ages of 16 to 60 one-second blocks.
        scan: (Duration::from_secs(6), Duration::from_secs(18)),
        fetch_age_blocks: (16, 60),
    }
}

/// Which of a user's connections a session runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Connection {
    /// The device at its usual address.
    Device,
    /// The device at its second address.
    Roaming,
    /// The second device.
    SecondDevice,
}

/// One session's plan, drawn from the lab's seeded randomness.
#[derive(Debug, Clone)]
struct SessionPlan {
    start: Duration,
    connection: Connection,
    writes: Vec<WritePlan>,
    min_anonymity: u64,
    prove: bool,
    /// The app calls `check_rarity` before each write.
    rarity_check: bool,
    /// The app verifies one of the session's records with the user's own reader.
    verify_own: bool,
}

#[derive(Debug, Clone)]
struct WritePlan {
    think: Duration,
    big: bool,
    scan_after: bool,
    expires: Expires,
}

fn exp_delay(rng: &mut StdRng, mean: Duration) -> Duration {
    let u: f64 = rng.gen_range(1e-6..1.0);
    mean.mul_f64(-u.ln()).min(mean * 4)
}

/// The sessions of `person`'s device (every other one from its second address for a roaming
/// user, who has at least two), then those of the second device, if any (one or two).
fn plan_sessions(sc: &Scenario, person: &Person, rng: &mut StdRng) -> Vec<SessionPlan> {
    let least = if person.roaming.is_some() { 2 } else { 1 };
    let count = rng.gen_range(least..=sc.max_sessions.max(least));
    // Session starts spread over the first 70% of the day, in order.
    let mut starts: Vec<Duration> = (0..count)
        .map(|_| sc.day.mul_f64(rng.gen_range(0.0..0.7)))
        .collect();
    starts.sort();
    let mut plans: Vec<SessionPlan> = starts
        .into_iter()
        .enumerate()
        .map(|(i, start)| {
            let connection = if person.roaming.is_some() && i % 2 == 1 {
                Connection::Roaming
            } else {
                Connection::Device
            };
            plan_session(sc, start, connection, rng)
        })
        .collect();
    if person.second.is_some() {
        let mut starts: Vec<Duration> = (0..rng.gen_range(1..=2))
            .map(|_| sc.day.mul_f64(rng.gen_range(0.0..0.7)))
            .collect();
        starts.sort();
        for start in starts {
            plans.push(plan_session(sc, start, Connection::SecondDevice, rng));
        }
    }
    plans
}

fn plan_session(
    sc: &Scenario,
    start: Duration,
    connection: Connection,
    rng: &mut StdRng,
) -> SessionPlan {
    let writes = (0..rng.gen_range(1..=sc.max_writes.max(1)))
        .map(|_| WritePlan {
            think: exp_delay(rng, sc.think),
            big: rng.gen_bool(sc.big_record_share),
            scan_after: rng.gen_bool(0.5),
            expires: if !rng.gen_bool(sc.long_lived_share) {
                Expires::Hours(1)
            } else if rng.gen_bool(0.5) {
                Expires::Days(1)
            } else {
                Expires::Weeks(1)
            },
        })
        .collect();
    SessionPlan {
        start,
        connection,
        writes,
        min_anonymity: if rng.gen_bool(sc.k_anonymity_share) {
            rng.gen_range(2..=3)
        } else {
            1
        },
        prove: rng.gen_bool(sc.prove_share),
        rarity_check: rng.gen_bool(sc.rarity_check_share),
        verify_own: rng.gen_bool(sc.verify_own_share),
    }
}

/// A record's payload: a short note, or one large enough for the 4 096-byte envelope.
fn payload(rng: &mut StdRng, big: bool) -> Vec<u8> {
    let len = if big {
        rng.gen_range(2_000..2_800)
    } else {
        rng.gen_range(10..120)
    };
    (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

/// How long the returning users' earlier day lasts: each opens its session at a random moment
/// of it.
pub const PROLOGUE_SPREAD: Duration = Duration::from_secs(20);

/// The earlier day of the returning users ([`Identity::returning`]): each opens a session at a
/// random moment of [`PROLOGUE_SPREAD`] and writes a record of a week (the app's records of
/// earlier days are still on the ledger; the session holds no ripe token yet, so the write goes
/// to a relayer that needs none); a device with a store of its own keeps the session open until
/// its session-start refill filled the store (at most 20 s). Returns how many came back with
/// tokens. With the `on_demand_tokens` leak nobody keeps tokens: the client before revision 3
/// fetched tokens when a write found none, and a user with an empty store is what the leak's
/// attack needs.
pub async fn run_prologue(world: Arc<World>, ids: &[Identity], rng: &mut StdRng) -> usize {
    let mut tasks = Vec::new();
    for id in ids.iter().filter(|i| i.returning).cloned() {
        let at = Instant::now() + PROLOGUE_SPREAD.mul_f64(rng.gen_range(0.0..1.0));
        let data = payload(rng, false);
        let world = world.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            let keep_tokens = !id.default_stores && !world.scenario.leaks.on_demand_tokens;
            let started = Instant::now();
            let session = world.record_session(Session {
                user: id.index,
                started,
                ended: started,
                error: None,
                ip: id.ip,
                default_stores: id.default_stores,
            });
            let Ok(client) = world
                .build(
                    world
                        .client_builder(&id, id.reader(&world.stack), 1)
                        .allow_on_demand(false),
                )
                .await
            else {
                world.update_session(session, Instant::now(), Some("no client".into()));
                return false;
            };
            let params =
                CreateParams::new(data, "text/plain", Expires::Weeks(1)).attribute("kind", "note");
            let requested = Instant::now();
            let outcome = client.create_entity(params).await;
            world.record_write(Write {
                user: id.index,
                session,
                requested,
                resolved: Instant::now(),
                outcome: outcome
                    .map(|r| Written {
                        entity_key: r.entity_key,
                        owner: r.owner,
                        relayer: r.relayer,
                    })
                    .map_err(|e| e.to_string()),
                min_anonymity: 1,
                big: false,
            });
            let deadline = Instant::now() + Duration::from_secs(20);
            let has_tokens = || keep_tokens && id.tokens.list(APP).is_ok_and(|l| !l.is_empty());
            while keep_tokens && !has_tokens() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            drop(client);
            world.update_session(session, Instant::now(), None);
            has_tokens()
        }));
    }
    let mut with_tokens = 0;
    for t in tasks {
        if matches!(t.await, Ok(true)) {
            with_tokens += 1;
        }
    }
    with_tokens
}

/// Runs the population over the day starting at `day_start`; returns when every user finished.
/// A user's device runs its sessions one after another; a second device runs its own beside.
pub async fn run_day(world: Arc<World>, people: Vec<Person>, day_start: Instant) {
    let mut rng = StdRng::seed_from_u64(world.scenario.seed);
    let mut tasks = Vec::new();
    for person in people {
        let plans = plan_sessions(&world.scenario, &person, &mut rng);
        let (second, first): (Vec<SessionPlan>, Vec<SessionPlan>) = plans
            .into_iter()
            .partition(|p| p.connection == Connection::SecondDevice);
        for plans in [first, second] {
            let seed: u64 = rng.gen();
            let (world, person) = (world.clone(), person.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed);
                for plan in plans {
                    let at = day_start + plan.start;
                    tokio::time::sleep_until(at.into()).await;
                    let id = match plan.connection {
                        Connection::Device => &person.device,
                        Connection::Roaming => person.roaming.as_ref().unwrap_or(&person.device),
                        Connection::SecondDevice => {
                            person.second.as_ref().unwrap_or(&person.device)
                        }
                    };
                    run_session(&world, id, person.app_lists, &plan, &mut rng).await;
                }
            }));
        }
    }
    for t in tasks {
        let _ = t.await;
    }
}

async fn run_session(
    world: &World,
    id: &Identity,
    app_lists: bool,
    plan: &SessionPlan,
    rng: &mut StdRng,
) {
    let started = Instant::now();
    let session = world.record_session(Session {
        user: id.index,
        started,
        ended: started,
        error: None,
        ip: id.ip,
        default_stores: id.default_stores,
    });
    let own_blocks = Arc::new(Mutex::new(BTreeSet::new()));
    let rpc = id.reader(&world.stack);
    let leaks = &world.scenario.leaks;
    let reader: Arc<dyn LedgerReader> = if leaks.timestamps_of_own_blocks || leaks.fresh_covers {
        Arc::new(LeakyReader {
            inner: rpc.clone(),
            own_blocks: leaks.timestamps_of_own_blocks.then(|| own_blocks.clone()),
            fresh_covers: leaks.fresh_covers.then(|| FreshCovers {
                lab: world.stack.reader(),
                rng: Mutex::new(StdRng::seed_from_u64(rng.gen())),
            }),
        })
    } else {
        rpc.clone()
    };
    if world.scenario.leaks.wallet_named {
        let _ = rpc.code_at(id.wallet.address()).await;
    }
    let client = match world
        .build(world.client_builder(id, reader, plan.min_anonymity))
        .await
    {
        Ok(c) => c,
        Err(e) => {
            world.update_session(session, Instant::now(), Some(e.to_string()));
            return;
        }
    };
    let issue = match (leaks.key_read_before_issue, world.stack.relay_url()) {
        (true, Some(relay)) => {
            let at = Duration::from_millis(rng.gen_range(0..5_000));
            let a = world.stack.relayer("A");
            let issuer = crate::leaky::Issuer {
                relay,
                address: a.address(),
                url: a.url().to_string(),
            };
            let (wallet, http, rpc) = (id.wallet.clone(), id.http.clone(), rpc.clone());
            Some(tokio::spawn(async move {
                tokio::time::sleep(at).await;
                crate::leaky::key_read_then_issue(&issuer, wallet, http, rpc).await;
            }))
        }
        _ => None,
    };
    // The page opens: the app shows the user's records.
    if app_lists {
        list_view(world, id, session, &client).await;
    }
    let mut written: Vec<B256> = Vec::new();
    for w in &plan.writes {
        tokio::time::sleep(w.think).await;
        let params = CreateParams::new(payload(rng, w.big), "text/plain", w.expires)
            .attribute("kind", "note");
        if plan.rarity_check {
            let _ = client.check_rarity(&note_attributes(), None).await;
        }
        if leaks.list_before_write {
            let _ = privsvc_client::list_app(rpc.as_ref(), APP, None, None).await;
        }
        let requested = Instant::now();
        let outcome = client.create_entity(params).await;
        let resolved = Instant::now();
        let outcome = match outcome {
            Ok(r) => {
                written.push(r.entity_key);
                let batch = match world.stack.reader().entity(r.entity_key, None).await {
                    Ok(Some(e)) => privsvc_client::batch_of(&e),
                    _ => None,
                };
                if let Some(b) = batch {
                    own_blocks
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(b.block);
                }
                if leaks.list_on_landing {
                    let _ = privsvc_client::list_app(rpc.as_ref(), APP, None, None).await;
                }
                if let (true, Some(b)) = (leaks.fetch_on_landing, batch) {
                    crate::leaky::fetch_with_neighbours(&world.stack, rpc.as_ref(), b).await;
                }
                Ok(Written {
                    entity_key: r.entity_key,
                    owner: r.owner,
                    relayer: r.relayer,
                })
            }
            Err(e) => Err(e.to_string()),
        };
        world.record_write(Write {
            user: id.index,
            session,
            requested,
            resolved,
            outcome,
            min_anonymity: plan.min_anonymity,
            big: w.big,
        });
        // The app re-renders its list after the write.
        if app_lists {
            list_view(world, id, session, &client).await;
        }
        if w.scan_after {
            scan(world, id, session, &client, rpc.as_ref()).await;
        }
    }
    tokio::time::sleep(exp_delay(rng, world.scenario.think)).await;
    scan(world, id, session, &client, rpc.as_ref()).await;
    if let Some(key) = written.first() {
        if plan.verify_own {
            crate::app::verify_own_record(&world.stack, rpc.as_ref(), *key).await;
        }
        if leaks.owner_query_on_verify {
            crate::leaky::query_owner_of(&world.stack, rpc.as_ref(), *key).await;
        }
    }
    if plan.prove {
        if let Some(key) = written.first() {
            let _ = client
                .prove_ownership(
                    *key,
                    &ProveParams {
                        challenge: format!("challenge {}", rng.gen::<u64>()),
                        verifier: "shop.example".into(),
                        ttl_seconds: None,
                    },
                )
                .await;
        }
    }
    if let Some(task) = issue {
        let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
    }
    world.update_session(session, Instant::now(), None);
}

/// The attributes of every record of the population (what `check_rarity` is asked about).
fn note_attributes() -> privsvc_client::Attributes {
    let mut attrs = privsvc_client::Attributes::new();
    let _ = attrs.insert("kind", privsvc_client::AttrValue::Str("note".into()));
    attrs
}

/// `my_entities` with `refresh`: the user asks for an up-to-date list. With the
/// `fixed_fetch_sets` leak, the user's batches are fetched again with covers fixed by the
/// wallet.
async fn scan(
    world: &World,
    id: &Identity,
    session: usize,
    client: &PrivateClient,
    rpc: &dyn LedgerReader,
) {
    timed_listing(world, id, session, client, &EntitiesQuery::new().refresh()).await;
    if world.scenario.leaks.fixed_fetch_sets {
        let keys: Vec<B256> = {
            let t = world.truth.lock().unwrap_or_else(|p| p.into_inner());
            t.writes
                .iter()
                .filter(|w| w.user == id.index)
                .filter_map(|w| w.outcome.as_ref().ok().map(|o| o.entity_key))
                .collect()
        };
        crate::leaky::fetch_fixed_group(&world.stack, rpc, &keys, id.wallet.address()).await;
    }
}

/// `my_entities` without `refresh`: the app shows the user's records (a page opens, or the
/// list is drawn again after a write).
async fn list_view(world: &World, id: &Identity, session: usize, client: &PrivateClient) {
    timed_listing(world, id, session, client, &EntitiesQuery::new()).await;
}

/// One `my_entities` call with `query`, recorded in the truth as a scan of `session`.
async fn timed_listing(
    world: &World,
    id: &Identity,
    session: usize,
    client: &PrivateClient,
    query: &EntitiesQuery,
) {
    let started = Instant::now();
    let found = client
        .my_entities(query)
        .await
        .map(|r| r.len())
        .unwrap_or(0);
    world.record_scan(Scan {
        user: id.index,
        session,
        started,
        ended: Instant::now(),
        found,
    });
}

/// Cover batches the `fresh_covers` leak adds to each batch fetch.
const FRESH_COVERS: usize = 4;
/// The newest batches of the app the `fresh_covers` leak draws its covers from.
const FRESH_WINDOW: usize = 12;

/// The session reader with the leaks that change what a scan reads.
/// `timestamps_of_own_blocks`: after every batch fetch, reads the timestamps of the user's own
/// blocks among the fetched ones, and only those. `fresh_covers`: every batch fetch is joined
/// by a fetch of [`FRESH_COVERS`] batches drawn afresh among the app's [`FRESH_WINDOW`] newest.
struct LeakyReader {
    inner: Arc<dyn LedgerReader>,
    own_blocks: Option<Arc<Mutex<BTreeSet<u64>>>>,
    fresh_covers: Option<FreshCovers>,
}

/// Where the `fresh_covers` leak finds the app's batches (the lab's own, unobserved reader)
/// and its coin.
struct FreshCovers {
    lab: Arc<dyn LedgerReader>,
    rng: Mutex<StdRng>,
}

impl LeakyReader {
    async fn read_own_timestamps(&self, expression: &str) {
        let Some(own_blocks) = &self.own_blocks else {
            return;
        };
        let own: Vec<u64> = own_blocks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .copied()
            .filter(|b| expression.contains(&format!("$createdAt = u64({b})")))
            .collect();
        for b in own {
            let _ = self.inner.block_timestamp(b).await;
        }
    }

    async fn fetch_fresh_covers(&self, expression: &str) {
        let Some(fresh) = &self.fresh_covers else {
            return;
        };
        let fetched = crate::attacks::batches_in(expression);
        if fetched.is_empty() {
            return;
        }
        let Ok(listing) = privsvc_client::list_app(fresh.lab.as_ref(), APP, None, None).await
        else {
            return;
        };
        let mut newest: Vec<(u64, Address)> = listing
            .entities
            .iter()
            .filter_map(|e| Some((e.created_at?, e.creator?)))
            .filter(|b| !fetched.contains(b))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        newest.reverse();
        newest.truncate(FRESH_WINDOW);
        let covers: Vec<privsvc_client::BatchId> = {
            let mut rng = fresh.rng.lock().unwrap_or_else(|p| p.into_inner());
            rand::seq::SliceRandom::choose_multiple(newest.as_slice(), &mut *rng, FRESH_COVERS)
                .map(|(block, creator)| privsvc_client::BatchId {
                    block: *block,
                    creator: *creator,
                })
                .collect()
        };
        if !covers.is_empty() {
            let _ = privsvc_client::fetch_batches(self.inner.as_ref(), APP, &covers, None).await;
        }
    }
}

#[async_trait]
impl LedgerReader for LeakyReader {
    async fn chain_id(&self) -> Result<u64, LedgerError> {
        self.inner.chain_id().await
    }
    async fn block_number(&self) -> Result<u64, LedgerError> {
        self.inner.block_number().await
    }
    async fn query(&self, e: &str, o: &QueryOptions) -> Result<QueryPage, LedgerError> {
        let page = self.inner.query(e, o).await?;
        if o.select.payload && o.cursor.is_none() {
            self.read_own_timestamps(e).await;
            self.fetch_fresh_covers(e).await;
        }
        Ok(page)
    }
    async fn query_many(&self, queries: &[PageQuery]) -> Result<Vec<QueryPage>, LedgerError> {
        if queries.iter().any(|q| q.options.select.payload) {
            // Page by page, so that each batch fetch leaks as `query` makes it.
            let mut pages = Vec::with_capacity(queries.len());
            for q in queries {
                pages.push(self.query(&q.expression, &q.options).await?);
            }
            return Ok(pages);
        }
        self.inner.query_many(queries).await
    }
    async fn entity(&self, k: B256, b: Option<u64>) -> Result<Option<Entity>, LedgerError> {
        self.inner.entity(k, b).await
    }
    async fn block_timestamp(&self, n: u64) -> Result<Option<u64>, LedgerError> {
        self.inner.block_timestamp(n).await
    }
    async fn code_at(&self, a: Address) -> Result<Vec<u8>, LedgerError> {
        self.inner.code_at(a).await
    }
    async fn entity_nonce(&self, a: Address) -> Result<u64, LedgerError> {
        self.inner.entity_nonce(a).await
    }
    async fn balance(&self, a: Address) -> Result<U256, LedgerError> {
        self.inner.balance(a).await
    }
    async fn creation_tx(&self, key: B256, created_at: u64) -> Result<Option<B256>, LedgerError> {
        self.inner.creation_tx(key, created_at).await
    }
}
