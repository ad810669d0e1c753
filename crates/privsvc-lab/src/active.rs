//! The active phases: after the simulated day, each active party attacks victims of its own,
//! one phase after another so that one attack does not disturb another's measurement. Each phase
//! scores its own guesses against what really happened.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use privsvc_client::{CreateParams, EntitiesQuery, Expires, PrivateClient};
use privsvc_ledger::system::Heartbeat;
use privsvc_ledger::{
    query_all, Create, CreationFlags, Entity, LedgerWriter, Operation, Select,
};
use privsvc_ohttp::{OhttpGateway, RelayerRequest, Transport};
use privsvc_testkit::{Action, Forwarder, Interceptor, TapRequest};
use rand::rngs::StdRng;
use rand::Rng;
use serde_json::{json, Value};

use crate::attacks::ActiveOutcomes;
use crate::population::{Identity, World};
use crate::scenario::APP;

/// Dev account of the OHTTP relay's operator (publishes its own heartbeat).
const RELAY_ACCOUNT: usize = 3;
/// Dev account of the user who copies records.
const COPIER_ACCOUNT: usize = 4;
/// Requests at least this large are issue requests (the 32 KiB request class).
const ISSUE_REQUEST_BYTES: usize = 8_000;

/// Runs the active phases the scenario switches on and scores them.
pub async fn run_phases(world: &World, rng: &mut StdRng) -> ActiveOutcomes {
    let mut phases = Phases {
        world,
        next: world.scenario.users,
        out: ActiveOutcomes::default(),
    };
    let a = world.scenario.active.clone();
    if a.replay_submissions {
        phases.replay_submissions(rng).await;
    }
    if a.replay_issue_requests {
        phases.replay_issue_requests(rng).await;
    }
    if a.ratchet {
        phases.ratchet(rng).await;
    }
    if a.refusing_relayer {
        phases.refusal(rng).await;
    }
    if a.n_minus_one {
        phases.n_minus_one(rng, false).await;
        phases.n_minus_one(rng, true).await;
    }
    if a.copies {
        phases.copies(rng).await;
    }
    if a.key_substitution {
        phases.key_substitution(rng).await;
    }
    phases.out
}

struct Phases<'a> {
    world: &'a World,
    next: usize,
    out: ActiveOutcomes,
}

fn note(rng: &mut StdRng) -> CreateParams {
    CreateParams::new(
        format!("victim note {}", rng.gen::<u32>()).into_bytes(),
        "text/plain",
        Expires::Hours(1),
    )
    .attribute("kind", "note")
}

impl<'a> Phases<'a> {
    fn victims(&mut self, rng: &mut StdRng, n: usize) -> Vec<Identity> {
        let mut out = Vec::new();
        for _ in 0..n {
            if let Ok(id) = Identity::new(self.next, rng) {
                out.push(id);
            }
            self.next += 1;
        }
        out
    }

    fn stack(&self) -> &'a privsvc_testkit::LocalStack {
        &self.world.stack
    }

    /// A victim's client, with `relayers` named or discovered, and `bad` relayers marked bad.
    async fn client(
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
        let client = configure(b).build().await.ok()?;
        for url in bad {
            client.set_relayer_bad(url, true);
        }
        Some(client)
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
        let replayer = Arc::new(Replayer::new(victims.iter().map(|v| v.ip), 3, 0));
        tap.set_interceptor(Some(replayer.clone()));
        let started = Instant::now();
        let mut writes = Vec::new();
        for v in &victims {
            let Some(client) = self.client(v, None, &[], |b| b).await else {
                continue;
            };
            let r = client.create_entity(note(rng)).await;
            writes.push((v.ip, r.ok().map(|r| r.owner)));
        }
        tokio::time::sleep(Duration::from_millis(self.world.scenario.max_wait_ms + 3_000)).await;
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
            ISSUE_REQUEST_BYTES,
        ));
        tap.set_interceptor(Some(replayer.clone()));
        let started = Instant::now();
        let a_url = self.stack().url("A");
        for v in &victims {
            // Relayer A only: the write needs a token.
            if let Some(client) = self.client(v, Some(vec![a_url.clone()]), &[], |b| b).await {
                let _ = client.create_entity(note(rng)).await;
            }
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
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
        let stack = self.stack();
        let (Some(relay), a) = (stack.relay_url(), stack.relayer("A")) else {
            return false;
        };
        let reader = v.reader(stack);
        let Ok(transport) = privsvc_ohttp::OhttpTransport::new(&relay, reader.clone()) else {
            return false;
        };
        let transport = transport.with_fetch(Arc::new(
            privsvc_rt::http::ReqwestFetch::with_client(v.http.clone()),
        ));
        let mut o = privsvc_tokens::TokenWalletOptions::new(
            v.wallet.clone(),
            reader,
            a.address(),
            a.url(),
        );
        o.transport = Arc::new(ThroughOhttp(Arc::new(transport)));
        privsvc_tokens::TokenWallet::new(o)
            .acquire(APP, 1, None)
            .await
            .is_ok()
    }

    /// Relayer C answers `queued` with a position that counts down forever: a write still
    /// waiting after its inclusion timeout and a margin wins.
    async fn ratchet(&mut self, rng: &mut StdRng) {
        let Some(interceptor) = self.relayer_interceptor("C", Behaviour::Ratchet) else {
            return;
        };
        let tap = self.stack().tap("C").expect("C has a tap");
        tap.set_interceptor(Some(interceptor));
        let (b, c) = (self.stack().url("B"), self.stack().url("C"));
        let victims = self.victims(rng, self.world.scenario.victims);
        let mut tasks = Vec::new();
        for v in &victims {
            let Some(client) = self
                .client(v, Some(vec![c.clone(), b.clone()]), std::slice::from_ref(&b), |x| {
                    x.inclusion_timeout(Duration::from_secs(4))
                })
                .await
            else {
                continue;
            };
            let params = note(rng);
            tasks.push(tokio::spawn(async move {
                tokio::time::timeout(Duration::from_secs(16), client.create_entity(params))
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
        for v in &victims {
            let Some(client) = self
                .client(v, Some(vec![c.clone(), b.clone()]), std::slice::from_ref(&b), |x| x)
                .await
            else {
                continue;
            };
            let failed = tokio::time::timeout(Duration::from_secs(30), client.create_entity(note(rng)))
                .await
                .map_or(true, |r| r.is_err());
            self.out.push("refusal", failed, 0.0);
        }
        tap.set_interceptor(None);
    }

    fn relayer_interceptor(&self, name: &str, behaviour: Behaviour) -> Option<Arc<dyn Interceptor>> {
        let seed = self.stack().ohttp_seed_of(name)?;
        let gateway = OhttpGateway::from_seed(&seed).ok()?;
        Some(Arc::new(RelayerActor {
            gateway,
            behaviour,
            fake: Mutex::new(BTreeMap::new()),
        }))
    }

    /// n-1 at relayer C: while the target's request waits at the relay, the relay holds every
    /// other client's requests to C; it releases the target when C's public `/healthz` reads an
    /// empty queue (at most 3 s), or, with `fillers`, after C's longest wait and together with
    /// its own filler records. A target alone with no other honest record in its batch wins.
    async fn n_minus_one(&mut self, rng: &mut StdRng, fillers: bool) {
        let Some(tap) = self.stack().tap("relay") else {
            return;
        };
        let c = self.stack().url("C");
        let crowd = self.victims(rng, 3);
        let victims = self.victims(rng, self.world.scenario.victims);
        let filler_id = self.victims(rng, 1).pop();
        let filler = match &filler_id {
            Some(f) if fillers => self.client(f, Some(vec![c.clone()]), &[], |b| b.delay_ms(0, 0)).await.map(Arc::new),
            _ => None,
        };
        let isolator = Arc::new(Isolator {
            targets: victims.iter().map(|v| v.ip).collect(),
            target_url: c.clone(),
            healthz: format!("{c}/healthz"),
            http: reqwest::Client::new(),
            holding: Arc::new(tokio::sync::RwLock::new(())),
            use_healthz: !fillers,
            hold_for: Duration::from_millis(self.world.scenario.max_wait_ms + 1_500),
            filler,
            min_batch: self.world.scenario.min_batch,
            filler_owners: Arc::new(Mutex::new(BTreeSet::new())),
        });
        tap.set_interceptor(Some(isolator.clone()));
        // The crowd writes to C all along.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut crowd_tasks = Vec::new();
        for id in &crowd {
            let Some(client) = self.client(id, Some(vec![c.clone()]), &[], |b| b.delay_ms(0, 500)).await else {
                continue;
            };
            let stop = stop.clone();
            crowd_tasks.push(tokio::spawn(async move {
                let mut n = 0u32;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    n += 1;
                    let p = CreateParams::new(format!("crowd {n}").into_bytes(), "text/plain", Expires::Hours(1)).attribute("kind", "note");
                    let _ = client.create_entity(p).await;
                }
            }));
        }
        let mut owners = Vec::new();
        for v in &victims {
            tokio::time::sleep(Duration::from_millis(rng.gen_range(500..2_000))).await;
            let Some(client) = self.client(v, Some(vec![c.clone()]), &[], |b| b.delay_ms(0, 0)).await else {
                continue;
            };
            if let Ok(r) = client.create_entity(note(rng)).await {
                owners.push(r.owner);
            }
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for t in crowd_tasks {
            t.abort();
        }
        tap.set_interceptor(None);
        // Score: the target's batch holds no other honest record of the app.
        tokio::time::sleep(Duration::from_millis(self.world.scenario.max_wait_ms + 2_000)).await;
        let filler_owners = isolator.filler_owners.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let baseline = self.isolation_baseline().await;
        for owner in owners {
            let isolated = self.isolated(owner, &filler_owners).await;
            self.out.push(
                if fillers { "n-minus-one-filler" } else { "n-minus-one" },
                isolated,
                baseline,
            );
        }
    }

    /// The share of the day's records that sat alone (no other honest record of the app) in
    /// their batch: how often an attacker guessing the lone record would be right anyway.
    async fn isolation_baseline(&self) -> f64 {
        let truth = self.world.truth.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let writers = truth.writer_of_entity();
        let records = self.app_records().await;
        let mut per_batch: BTreeMap<(u64, Address), usize> = BTreeMap::new();
        for r in &records {
            if writers.contains_key(&r.key) {
                if let (Some(b), Some(c)) = (r.created_at, r.creator) {
                    *per_batch.entry((b, c)).or_default() += 1;
                }
            }
        }
        let lone = writers
            .keys()
            .filter(|k| {
                records.iter().find(|r| r.key == **k).and_then(|r| {
                    Some(per_batch.get(&(r.created_at?, r.creator?)).copied().unwrap_or(0) == 1)
                }) == Some(true)
            })
            .count();
        lone as f64 / writers.len().max(1) as f64
    }

    async fn app_records(&self) -> Vec<Entity> {
        let select = Select {
            key: true,
            owner: true,
            creator: true,
            created_at: true,
            ..Select::default()
        };
        let e = format!("project = {}", privsvc_client::read::str_literal(APP));
        query_all(self.stack().reader().as_ref(), &e, &select, None)
            .await
            .unwrap_or_default()
    }

    /// Whether `owner`'s record shares its batch with no other record of the app except the
    /// attacker's fillers (owned by one-time owners of `filler_wallet`, which the attacker knows).
    async fn isolated(&self, owner: Address, filler_owners: &BTreeSet<Address>) -> bool {
        let records = self.app_records().await;
        let Some(mine) = records.iter().find(|r| r.owner == Some(owner)) else {
            return false;
        };
        let batch = (mine.created_at, mine.creator);
        !records.iter().any(|r| {
            r.key != mine.key
                && (r.created_at, r.creator) == batch
                && !r.owner.is_some_and(|o| filler_owners.contains(&o))
        })
    }

    /// Another user copies a record of each of a few users (create with the same payload and
    /// attributes, transfer to the owner); then each owner starts a new session and scans.
    /// `copies` wins when the owner's records include the copy; `copy-fetch` when the address
    /// that fetched the copy's batch is the owner's.
    async fn copies(&mut self, rng: &mut StdRng) {
        let Ok(writer) = self.stack().writer(COPIER_ACCOUNT).await else {
            return;
        };
        let truth = self.world.truth.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut by_user: BTreeMap<usize, B256> = BTreeMap::new();
        for w in &truth.writes {
            if let Ok(o) = &w.outcome {
                by_user.entry(w.user).or_insert(o.entity_key);
            }
        }
        let chosen: Vec<(usize, B256)> = by_user.into_iter().take(self.world.scenario.victims).collect();
        let reader = self.stack().reader();
        let mut copies: Vec<(usize, B256, u64)> = Vec::new();
        for (user, key) in &chosen {
            let Ok(Some(original)) = reader.entity(*key, None).await else {
                continue;
            };
            let Some(copy) = copy_of(&original) else { continue };
            let Some(owner) = original.owner else { continue };
            let salt: u128 = rng.gen();
            let Ok(keys) = writer.predict_keys(&[salt]).await else {
                continue;
            };
            let mut create = copy;
            create.salt = salt;
            let ops = vec![
                Operation::Create(create),
                Operation::Transfer {
                    key: keys[0],
                    new_owner: owner,
                },
            ];
            if writer.execute(&ops).await.is_ok() {
                if let Ok(Some(e)) = reader.entity(keys[0], None).await {
                    copies.push((*user, keys[0], e.created_at.unwrap_or(0)));
                }
            }
        }
        let copier = writer.address();
        let started = crate::views::ms_since(self.world.epoch, Instant::now());
        let ids = self.world.ids.clone();
        let mut accepted = BTreeMap::new();
        for (user, copy_key, _) in &copies {
            let Some(id) = ids.get(*user) else { continue };
            let Some(client) = self.client(id, None, &[], |b| b).await else {
                continue;
            };
            let mine = client
                .my_entities(&EntitiesQuery::new().refresh())
                .await
                .unwrap_or_default();
            accepted.insert(*user, mine.iter().any(|r| r.entity_key == *copy_key));
        }
        // The RPC's view of this phase: who fetched each copy's batch.
        let rpc: Vec<crate::views::RpcCall> = {
            let tap = self.stack().tap("rpc");
            let mut calls = Vec::new();
            if let Some(tap) = tap {
                for e in tap.exchanges() {
                    let at = crate::views::ms_since(self.world.epoch, e.at);
                    if at < started {
                        continue;
                    }
                    let body: Value = serde_json::from_slice(&e.request.body).unwrap_or(Value::Null);
                    if body["method"] == "arkiv_query" {
                        calls.push(crate::views::RpcCall {
                            at,
                            source: e.request.source,
                            method: "arkiv_query".into(),
                            params: body["params"].clone(),
                            request_bytes: e.request.body.len(),
                            response_bytes: e.response.len(),
                        });
                    }
                }
            }
            calls
        };
        let scanning: BTreeSet<IpAddr> = rpc.iter().map(|c| c.source).collect();
        for (user, _, block) in &copies {
            let Some(id) = ids.get(*user) else { continue };
            self.out
                .push("copies", accepted.get(user).copied().unwrap_or(false), 0.0);
            let fetchers: Vec<IpAddr> = rpc
                .iter()
                .filter(|c| {
                    c.params[0].as_str().is_some_and(|e| {
                        crate::attacks::batches_in(e).contains(&(*block, copier))
                    })
                })
                .map(|c| c.source)
                .collect();
            let guess = fetchers.first().copied();
            self.out.push(
                "copy-fetch",
                guess == Some(id.ip),
                1.0 / scanning.len().max(1) as f64,
            );
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
        for v in &victims {
            if let Some(client) = self.client(v, None, &[b.clone(), c.clone()], |x| x).await {
                let _ = tokio::time::timeout(Duration::from_secs(30), client.create_entity(note(rng))).await;
            }
        }
        tap.set_interceptor(None);
        let decrypted = mitm.decrypted.lock().unwrap_or_else(|p| p.into_inner()).clone();
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

/// A create with the payload, content type and attributes of `e` (its salt to be set).
fn copy_of(e: &Entity) -> Option<Create> {
    let attrs = e.attributes.clone()?;
    let blocks = e.expires_at?.saturating_sub(e.created_at?);
    Some(Create {
        salt: 0,
        expires_at: 0,
        min_lifetime: blocks.max(1),
        flags: CreationFlags::default(),
        content_type: e.content_type.clone().unwrap_or_else(|| "application/json".into()),
        payload: e.payload.clone()?,
        attributes: attrs,
    })
}

/// Replays the POSTs of chosen sources `times` times, a second after the original; only those
/// at least `min_bytes` long.
struct Replayer {
    sources: BTreeSet<IpAddr>,
    times: usize,
    min_bytes: usize,
    replayed: Mutex<BTreeSet<IpAddr>>,
}

impl Replayer {
    fn new(sources: impl Iterator<Item = IpAddr>, times: usize, min_bytes: usize) -> Self {
        Replayer {
            sources: sources.collect(),
            times,
            min_bytes,
            replayed: Mutex::new(BTreeSet::new()),
        }
    }

    fn replayed_sources(&self) -> BTreeSet<IpAddr> {
        self.replayed.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The sources of the originals (after `since`) at least one of whose replays was answered
    /// with another status or another size.
    fn differing(&self, tap: &privsvc_testkit::Tap, since: Instant) -> BTreeSet<IpAddr> {
        let ex: Vec<privsvc_testkit::Exchange> =
            tap.exchanges().into_iter().filter(|e| e.at >= since).collect();
        let mut out = BTreeSet::new();
        for original in ex.iter().filter(|e| !e.injected && self.sources.contains(&e.request.source)) {
            for replay in ex
                .iter()
                .filter(|e| e.injected && e.request.body == original.request.body)
            {
                if replay.status != original.status || replay.response.len() != original.response.len() {
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
        if request.method == "POST"
            && self.sources.contains(&request.source)
            && request.body.len() >= self.min_bytes
        {
            self.replayed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(request.source);
            let (request, forward, times) = (request.clone(), forward.clone(), self.times);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                for _ in 0..times {
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
        let answer: Option<(u16, Value)> = match (self.behaviour, inner.method.as_str(), inner.path.as_str()) {
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
                    (200, json!({ "id": id, "state": "queued", "position": *position }))
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

/// The relay's n-1 attack on relayer C (see [`Phases::n_minus_one`]).
struct Isolator {
    targets: BTreeSet<IpAddr>,
    target_url: String,
    healthz: String,
    http: reqwest::Client,
    /// Held for writing while a target is being isolated: other requests to C wait for it.
    holding: Arc<tokio::sync::RwLock<()>>,
    use_healthz: bool,
    hold_for: Duration,
    filler: Option<Arc<PrivateClient>>,
    min_batch: usize,
    /// The one-time owners of the relay's own filler records (the attacker knows them).
    filler_owners: Arc<Mutex<BTreeSet<Address>>>,
}

impl Isolator {
    async fn queue_is_empty(&self) -> bool {
        let Ok(r) = self.http.get(&self.healthz).send().await else {
            return false;
        };
        r.json::<Value>()
            .await
            .ok()
            .and_then(|v| v["queue"].as_u64())
            == Some(0)
    }
}

#[async_trait]
impl Interceptor for Isolator {
    async fn intercept(&self, request: &TapRequest, _forward: &Forwarder) -> Action {
        let to_c = request.header("x-privsvc-target").map(|t| t.trim_end_matches('/'))
            == Some(self.target_url.trim_end_matches('/'));
        if !to_c {
            return Action::Forward;
        }
        if !self.targets.contains(&request.source) {
            // Everyone else waits while a target is being isolated.
            let _ = self.holding.read().await;
            return Action::Forward;
        }
        let guard = self.holding.clone().write_owned().await;
        if self.use_healthz {
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline && !self.queue_is_empty().await {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        } else {
            tokio::time::sleep(self.hold_for).await;
        }
        if let Some(filler) = &self.filler {
            for i in 1..self.min_batch {
                let (filler, owners) = (filler.clone(), self.filler_owners.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let p = CreateParams::new(format!("filler {i}").into_bytes(), "text/plain", Expires::Hours(1)).attribute("kind", "note");
                    if let Ok(r) = filler.create_entity(p).await {
                        owners.lock().unwrap_or_else(|p| p.into_inner()).insert(r.owner);
                    }
                });
            }
        }
        // Others stay held a little longer, until the target's batch formed.
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            drop(guard);
        });
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
        let to_target = request.header("x-privsvc-target").map(|t| t.trim_end_matches('/'))
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
        let fetch = privsvc_rt::http::ReqwestFetch::with_client(reqwest::Client::new());
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

/// Issuer calls through an OHTTP transport (for the lab's own token acquisitions).
struct ThroughOhttp(Arc<dyn Transport>);

#[async_trait]
impl privsvc_tokens::IssuerTransport for ThroughOhttp {
    async fn send(
        &self,
        issuer_url: &str,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<privsvc_tokens::IssuerReply, privsvc_tokens::TokenError> {
        let res = self
            .0
            .send(
                issuer_url,
                RelayerRequest {
                    method: method.to_string(),
                    path: path.to_string(),
                    body,
                },
            )
            .await
            .map_err(|e| privsvc_tokens::TokenError::Http(e.to_string()))?;
        Ok(privsvc_tokens::IssuerReply {
            status: res.status,
            body: res.body,
        })
    }
}

