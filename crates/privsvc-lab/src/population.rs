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
}

impl Identity {
    /// User `index` with a wallet drawn from `rng`.
    pub fn new(index: usize, rng: &mut StdRng) -> Result<Identity, crate::LabError> {
        Identity::at(index, user_ip(index), rng)
    }

    /// User `index` at the address `ip`, with a wallet drawn from `rng`.
    pub fn at(index: usize, ip: IpAddr, rng: &mut StdRng) -> Result<Identity, crate::LabError> {
        let key: [u8; 32] = rng.gen();
        let wallet = Arc::new(
            LocalWallet::from_bytes(&key).map_err(|e| crate::LabError::Setup(e.to_string()))?,
        );
        let http = http_from(ip)?;
        Ok(Identity {
            index,
            wallet,
            ip,
            http,
            tokens: privsvc_tokens::memory_store(),
            returning: false,
        })
    }

    /// The truth's record of this user.
    pub fn user(&self) -> User {
        User {
            index: self.index,
            wallet: self.wallet.address(),
            ip: self.ip,
            returning: self.returning,
        }
    }

    /// The same user (wallet and token store) at another address.
    pub fn elsewhere(&self, ip: IpAddr) -> Result<Identity, crate::LabError> {
        let http = http_from(ip)?;
        Ok(Identity {
            index: self.index,
            wallet: self.wallet.clone(),
            ip,
            http,
            tokens: self.tokens.clone(),
            returning: self.returning,
        })
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
        .map_err(|e| crate::LabError::Setup(format!("http client: {e}")))
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

    /// A client builder for `id` as an application builds one: relayers discovered from
    /// heartbeats, every relayer call through the OHTTP relay, the scenario's timings.
    pub fn client_builder(
        &self,
        id: &Identity,
        reader: Arc<dyn LedgerReader>,
        min_anonymity: u64,
    ) -> privsvc_client::ClientBuilder {
        let sc = &self.scenario;
        let mut b = PrivateClient::builder(APP)
            .wallet(id.wallet.clone())
            .reader(reader)
            .fetch(Arc::new(privsvc_rt::ReqwestFetch::with_client(
                id.http.clone(),
            )))
            .token_store(id.tokens.clone())
            .token_min_age_ms(sc.token_min_age_ms)
            .token_ripe_wait_ms(sc.token_min_age_ms * 4)
            .delay_ms(0, sc.delay_ms_max)
            .poll_interval(sc.poll)
            .schedule(lab_schedule(sc))
            .min_anonymity(min_anonymity);
        if sc.leaks.on_demand_tokens {
            b = b.allow_on_demand(true);
        }
        if let Some(relay) = self.stack.relay_url() {
            b = b.ohttp_relay(relay);
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
/// 15 to 45 s), status polls for up to 6 s after `written`, the first refill within 5 s of a
/// session's start, later ones 5 to 60 s apart. With the `on_demand_tokens` leak there are no
/// refills; with `no_poll_tail` the polls stop at `written`.
pub fn lab_schedule(sc: &Scenario) -> privsvc_client::SessionSchedule {
    let never = (Duration::from_secs(86_400), Duration::from_secs(86_400));
    privsvc_client::SessionSchedule {
        tail: (Duration::from_millis(1_500), Duration::from_millis(4_500)),
        status_tail: if sc.leaks.no_poll_tail {
            (Duration::ZERO, Duration::ZERO)
        } else {
            (Duration::ZERO, Duration::from_secs(6))
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

/// One session's plan, drawn from the lab's seeded randomness.
#[derive(Debug, Clone)]
struct SessionPlan {
    start: Duration,
    writes: Vec<WritePlan>,
    min_anonymity: u64,
    prove: bool,
}

#[derive(Debug, Clone)]
struct WritePlan {
    think: Duration,
    big: bool,
    scan_after: bool,
}

fn exp_delay(rng: &mut StdRng, mean: Duration) -> Duration {
    let u: f64 = rng.gen_range(1e-6..1.0);
    mean.mul_f64(-u.ln()).min(mean * 4)
}

fn plan_sessions(sc: &Scenario, rng: &mut StdRng) -> Vec<SessionPlan> {
    let count = rng.gen_range(1..=sc.max_sessions.max(1));
    // Session starts spread over the first 70% of the day, in order.
    let mut starts: Vec<Duration> = (0..count)
        .map(|_| sc.day.mul_f64(rng.gen_range(0.0..0.7)))
        .collect();
    starts.sort();
    starts
        .into_iter()
        .map(|start| {
            let writes = (0..rng.gen_range(1..=sc.max_writes.max(1)))
                .map(|_| WritePlan {
                    think: exp_delay(rng, sc.think),
                    big: rng.gen_bool(sc.big_record_share),
                    scan_after: rng.gen_bool(0.5),
                })
                .collect();
            SessionPlan {
                start,
                writes,
                min_anonymity: if rng.gen_bool(sc.k_anonymity_share) {
                    rng.gen_range(2..=3)
                } else {
                    1
                },
                prove: rng.gen_bool(sc.prove_share),
            }
        })
        .collect()
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
pub const PROLOGUE_SPREAD: Duration = Duration::from_secs(8);

/// The earlier day of the returning users ([`Identity::returning`]): each opens a session at a
/// random moment of [`PROLOGUE_SPREAD`], whose session-start refill fills its token store, and
/// closes it once the tokens are in (or after 20 s). Returns how many came back with tokens.
/// With the `on_demand_tokens` leak there is no earlier day: the client before revision 3
/// fetched tokens when a write found none, and a user with an empty store is what the leak's
/// attack needs.
pub async fn run_prologue(world: Arc<World>, ids: &[Identity], rng: &mut StdRng) -> usize {
    if world.scenario.leaks.on_demand_tokens {
        return 0;
    }
    let mut tasks = Vec::new();
    for id in ids.iter().filter(|i| i.returning).cloned() {
        let at = Instant::now() + PROLOGUE_SPREAD.mul_f64(rng.gen_range(0.0..1.0));
        let world = world.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            let Ok(client) = world
                .client_builder(&id, id.reader(&world.stack), 1)
                .build()
                .await
            else {
                return false;
            };
            let deadline = Instant::now() + Duration::from_secs(20);
            let has_tokens = || id.tokens.list(APP).is_ok_and(|l| !l.is_empty());
            while !has_tokens() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            drop(client);
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
pub async fn run_day(world: Arc<World>, ids: Vec<Identity>, day_start: Instant) {
    let mut rng = StdRng::seed_from_u64(world.scenario.seed);
    let mut tasks = Vec::new();
    for id in ids {
        let plans = plan_sessions(&world.scenario, &mut rng);
        let seed: u64 = rng.gen();
        let world = world.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed);
            for plan in plans {
                let at = day_start + plan.start;
                tokio::time::sleep_until(at.into()).await;
                run_session(&world, &id, &plan, &mut rng).await;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

async fn run_session(world: &World, id: &Identity, plan: &SessionPlan, rng: &mut StdRng) {
    let started = Instant::now();
    let session = world.record_session(Session {
        user: id.index,
        started,
        ended: started,
        error: None,
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
        .client_builder(id, reader, plan.min_anonymity)
        .build()
        .await
    {
        Ok(c) => c,
        Err(e) => {
            world.update_session(session, Instant::now(), Some(e.to_string()));
            return;
        }
    };
    let mut written: Vec<B256> = Vec::new();
    for w in &plan.writes {
        tokio::time::sleep(w.think).await;
        let params = CreateParams::new(payload(rng, w.big), "text/plain", Expires::Hours(1))
            .attribute("kind", "note");
        let requested = Instant::now();
        let outcome = client.create_entity(params).await;
        let resolved = Instant::now();
        let outcome = match outcome {
            Ok(r) => {
                written.push(r.entity_key);
                if let Ok(Some(e)) = world.stack.reader().entity(r.entity_key, None).await {
                    if let Some(b) = e.created_at {
                        own_blocks
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(b);
                    }
                }
                if world.scenario.leaks.list_on_landing {
                    let _ = privsvc_client::list_app(rpc.as_ref(), APP, None, None).await;
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
        if w.scan_after {
            scan(world, id, session, &client).await;
        }
    }
    tokio::time::sleep(exp_delay(rng, world.scenario.think)).await;
    scan(world, id, session, &client).await;
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
    world.update_session(session, Instant::now(), None);
}

async fn scan(world: &World, id: &Identity, session: usize, client: &PrivateClient) {
    let started = Instant::now();
    let found = client
        .my_entities(&EntitiesQuery::new().refresh())
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
