//! End to end, the README's main job as a test: a devnet, relayer A (tokens required, token
//! issuer), relayer B (tokens off), both serving OHTTP, and an OHTTP relay, all real servers on
//! loopback in this process. Then:
//!
//! - `main_job_scenario`: what `examples/local_stack.rs` does (fresh wallet, note, encrypted note,
//!   scoped note, minAnonymity 2, `my_entities`, ownership proof checked by a third party), with
//!   one block per transaction instead of 2 s blocks;
//! - `load_1000_records_from_20_clients`: 1,000 records from 20 concurrent clients through both
//!   relayers; each is on the ledger exactly once and each client finds exactly its own.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use privsvc::client::{
    verify_ownership_proof, CreateParams, CreateResult, EntitiesQuery, Expires, LocalWallet,
    OwnershipProof, PrivateClient, ProofExpectation, ProofRejection, ProveParams, SessionSchedule,
    Wallet, COVER_WINDOW_BLOCKS,
};
use privsvc::devnet::Address;
use privsvc::ledger::{ArkivValue, LedgerReader, RpcLedger};
use privsvc::relayer::Relayer;
use privsvc_testkit::{LocalStack, RelayerSpec};

/// Batching of both relayers.
#[derive(Clone, Copy)]
struct Batching {
    min_batch: usize,
    max_wait_ms: u64,
    max_batch: usize,
}

struct Stack {
    inner: LocalStack,
    reader: Arc<dyn LedgerReader>,
    relay_url: String,
}

/// A relayer with `batching`, one block per transaction and OHTTP (gateway seed `seed`).
fn relayer(name: &str, batching: Batching, seed: u8) -> RelayerSpec {
    RelayerSpec::new(name)
        .ohttp_seed([seed; 32])
        .with(move |c| {
            c.batching.min_batch = batching.min_batch;
            c.batching.max_wait = Duration::from_millis(batching.max_wait_ms);
            c.batching.max_batch = batching.max_batch;
            c.batching.max_min_anonymity = 10;
        })
}

impl Stack {
    async fn start(batching: Batching) -> Stack {
        let inner = LocalStack::builder()
            .relayer(relayer("a", batching, 1).issuer())
            .relayer(relayer("b", batching, 2))
            // All 20 load clients share 127.0.0.1: the relay's per-address limit is real but
            // sized for the whole test.
            .ohttp_relay_with(|c| c.refresh_interval = Duration::from_secs(1))
            .start()
            .await
            .expect("the local stack starts");
        Stack {
            reader: inner.reader(),
            relay_url: inner.relay_url().expect("the stack has a relay"),
            inner,
        }
    }

    fn a(&self) -> &Relayer {
        self.inner.relayer("a")
    }

    fn b(&self) -> &Relayer {
        self.inner.relayer("b")
    }

    fn urls(&self) -> Vec<String> {
        self.inner.urls()
    }

    async fn shutdown(self) {
        self.inner.shutdown().await;
    }
}

/// Every live record of `project` on the ledger.
/// The session timers of the tests: a tail every 100 to 300 ms, status polls for up to 300 ms
/// after `written`, the first token refill within 50 ms, later ones every 2 to 4 s.
fn fast_schedule() -> SessionSchedule {
    SessionSchedule {
        tail: (Duration::from_millis(100), Duration::from_millis(300)),
        status_tail: (Duration::ZERO, Duration::from_millis(300)),
        status_horizon_rounds: (1.0, 3.0),
        refill_below: 5,
        first_refill: (Duration::ZERO, Duration::from_millis(50)),
        later_refill: (Duration::from_secs(2), Duration::from_secs(4)),
        scan: (Duration::from_millis(100), Duration::from_millis(300)),
        fetch_age_blocks: (16, 16),
    }
}

/// The user's latest batches are fetched only once their creation window is closed
/// (docs/PROTOCOL.md §8.4): mine past it before listing.
fn settle(stack: &Stack) {
    stack
        .inner
        .devnet()
        .mine_blocks(2 * COVER_WINDOW_BLOCKS)
        .expect("mining empty blocks");
}

async fn ledger_records(reader: &dyn LedgerReader, project: &str) -> Vec<privsvc::ledger::Entity> {
    privsvc::client::list_app(reader, project, None, None)
        .await
        .expect("listing the project")
        .entities
}

fn tag_of(e: &privsvc::ledger::Entity) -> Option<String> {
    e.attributes
        .as_ref()?
        .iter()
        .find_map(|a| match (&a.name[..], &a.value) {
            ("tag", ArkivValue::Str(s)) => Some(s.clone()),
            _ => None,
        })
}

/// Asserts that every result is on the ledger exactly once (its owner holds one record of the
/// project, under its key, and no tag is repeated), and that nothing else is.
fn assert_exactly_once(results: &[CreateResult], on_ledger: &[privsvc::ledger::Entity]) {
    let mut per_owner: BTreeMap<Address, Vec<_>> = BTreeMap::new();
    let mut per_tag: BTreeMap<String, usize> = BTreeMap::new();
    for e in on_ledger {
        per_owner
            .entry(e.owner.expect("owner selected"))
            .or_default()
            .push(e.key);
        *per_tag
            .entry(tag_of(e).expect("every record has a tag"))
            .or_default() += 1;
    }
    assert_eq!(on_ledger.len(), results.len(), "records on the ledger");
    for r in results {
        assert_eq!(
            per_owner.get(&r.owner),
            Some(&vec![r.entity_key]),
            "owner {} holds exactly its one record",
            r.owner
        );
    }
    assert!(per_tag.values().all(|n| *n == 1), "a tag appears twice");
}

fn note(text: String) -> CreateParams {
    CreateParams::new(text.into_bytes(), "text/plain", Expires::Hours(1))
}

/// One of the scenario's writes.
struct Planned {
    text: &'static str,
    encrypted: bool,
    scope: Option<&'static str>,
    min_anonymity: u64,
}

const PLAN: [Planned; 4] = [
    Planned {
        text: "hello from a fresh wallet",
        encrypted: false,
        scope: None,
        min_anonymity: 1,
    },
    Planned {
        text: "only my wallet can read this",
        encrypted: true,
        scope: None,
        min_anonymity: 1,
    },
    Planned {
        text: "dear diary",
        encrypted: false,
        scope: Some("diary"),
        min_anonymity: 1,
    },
    Planned {
        text: "not alone in my batch",
        encrypted: false,
        scope: None,
        min_anonymity: 2,
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn main_job_scenario() {
    let started = Instant::now();
    let stack = Stack::start(Batching {
        min_batch: 2,
        max_wait_ms: 300,
        max_batch: 100,
    })
    .await;
    const APP: &str = "notes";
    let client = |wallet: &Arc<LocalWallet>, k: u64| {
        PrivateClient::builder(APP)
            .token_min_age_ms(TOKEN_MIN_AGE_MS)
            .schedule(fast_schedule())
            .wallet(wallet.clone())
            .reader(stack.reader.clone())
            .ohttp_relay(stack.relay_url.clone())
            .delay_ms(0, 200)
            .poll_interval(Duration::from_millis(100))
            .min_anonymity(k)
            .build()
    };

    // A fresh user: relayers discovered from heartbeats, every call through the OHTTP relay.
    let wallet = Arc::new(LocalWallet::random());
    let user = client(&wallet, 1).await.expect("client builds");
    let user_k2 = client(&wallet, 2).await.expect("second session builds");
    let mut found_urls: Vec<String> = user.relayers().into_iter().map(|r| r.url).collect();
    found_urls.sort();
    let mut urls = stack.urls();
    urls.sort();
    assert_eq!(found_urls, urls, "both relayers discovered");
    assert!(user
        .relayers()
        .iter()
        .any(|r| r.url == stack.a().url() && r.info.tokens_required));

    // The crowd: another wallet writing to each relayer until the user is done.
    let crowd_wallet = Arc::new(LocalWallet::random());
    let stop = Arc::new(AtomicBool::new(false));
    let mut crowd = Vec::new();
    for url in stack.urls() {
        let c = PrivateClient::builder(APP)
            .token_min_age_ms(TOKEN_MIN_AGE_MS)
            .schedule(fast_schedule())
            .wallet(crowd_wallet.clone())
            .reader(stack.reader.clone())
            .relayers([url])
            // The crowd writes back to back: at relayer A it fetches tokens when it has no
            // ripe one (the user under test does not).
            .allow_on_demand(true)
            .delay_ms(0, 0)
            .poll_interval(Duration::from_millis(100))
            .build()
            .await
            .unwrap();
        let stop = stop.clone();
        crowd.push(tokio::spawn(async move {
            let mut out = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                out.push(c.create_entity(note("crowd".into())).await.unwrap());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            out
        }));
    }

    let relayed_before = stack.inner.relayed();
    let writes = PLAN.iter().map(|p| {
        let c = if p.min_anonymity > 1 { &user_k2 } else { &user };
        let mut params = note(p.text.into())
            .attribute("kind", "note")
            .encrypt(p.encrypted);
        if let Some(s) = p.scope {
            params = params.scope(s);
        }
        c.create_entity(params)
    });
    let written: Vec<CreateResult> = futures::future::join_all(writes)
        .await
        .into_iter()
        .map(|r| r.expect("the user's write succeeds"))
        .collect();
    stop.store(true, Ordering::SeqCst);
    for (p, r) in PLAN.iter().zip(&written) {
        assert!(!r.recovered && !r.tx_hash.is_zero(), "{}", p.text);
        assert!(stack.urls().contains(&r.relayer));
        assert!(
            r.batch_size >= p.min_anonymity,
            "{}: batch {}",
            p.text,
            r.batch_size
        );
        assert_ne!(r.owner, wallet.address());
    }
    let owners: BTreeSet<Address> = written.iter().map(|r| r.owner).collect();
    assert_eq!(owners.len(), 4, "one-time owners");
    assert_eq!(written[2].owner, user.scope_address("diary").await.unwrap());
    assert!(
        stack.inner.relayed() >= relayed_before + 8,
        "submissions and polls went through the OHTTP relay"
    );
    // The encrypted payload is not readable on the ledger.
    let raw = stack
        .reader
        .entity(written[1].entity_key, None)
        .await
        .unwrap()
        .unwrap();
    let sealed = privsvc::envelope::parse_envelope(raw.payload.as_deref().unwrap()).unwrap();
    assert!(sealed.body.enc);
    assert!(!sealed
        .body
        .data
        .windows(PLAN[1].text.len())
        .any(|w| w == PLAN[1].text.as_bytes()));

    // my_entities: exactly the four, with their contents (one was written by the other session).
    settle(&stack);
    let mine = user
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    let found: BTreeSet<_> = mine.iter().map(|m| m.entity_key).collect();
    let expected: BTreeSet<_> = written.iter().map(|r| r.entity_key).collect();
    assert_eq!(found, expected);
    for (p, r) in PLAN.iter().zip(&written) {
        let m = mine.iter().find(|m| m.entity_key == r.entity_key).unwrap();
        assert_eq!(m.to_text(), p.text);
        assert_eq!(m.encrypted, p.encrypted);
        assert_eq!(m.owner, r.owner);
        assert!(m.creator == stack.a().address() || m.creator == stack.b().address());
    }

    // Ownership proof, as JSON to a third party with its own reader.
    let proof = user
        .prove_ownership(
            written[0].entity_key,
            &ProveParams {
                challenge: "c-42".into(),
                verifier: "shop.example".into(),
                ttl_seconds: Some(300),
            },
        )
        .await
        .unwrap();
    let received: OwnershipProof =
        serde_json::from_str(&serde_json::to_string(&proof).unwrap()).unwrap();
    let third_party = RpcLedger::new(stack.inner.devnet().url()).unwrap();
    let expect = ProofExpectation {
        challenge: "c-42",
        verifier: "shop.example",
        reader: &third_party,
        now: None,
    };
    verify_ownership_proof(&received, &expect)
        .await
        .expect("the proof verifies");
    assert_eq!(
        verify_ownership_proof(
            &received,
            &ProofExpectation {
                challenge: "c-43",
                ..expect
            }
        )
        .await,
        Err(ProofRejection::WrongChallenge)
    );
    let mut moved = received.clone();
    moved.body.entity_key = written[1].entity_key;
    assert!(verify_ownership_proof(&moved, &expect).await.is_err());

    // The crowd's records: on the ledger once each, found by the crowd only.
    let mut crowd_written = Vec::new();
    for t in crowd {
        crowd_written.extend(t.await.unwrap());
    }
    settle(&stack);
    let crowd_client = PrivateClient::builder(APP)
        .token_min_age_ms(TOKEN_MIN_AGE_MS)
        .schedule(fast_schedule())
        .wallet(crowd_wallet)
        .reader(stack.reader.clone())
        .relayers(stack.urls())
        .build()
        .await
        .unwrap();
    let crowd_found: BTreeSet<_> = crowd_client
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap()
        .iter()
        .map(|m| m.entity_key)
        .collect();
    let crowd_expected: BTreeSet<_> = crowd_written.iter().map(|r| r.entity_key).collect();
    assert_eq!(crowd_found, crowd_expected);
    let all: Vec<CreateResult> = written.iter().chain(&crowd_written).cloned().collect();
    // Scoped records share their owner: leave the scope out of the one-owner-one-record rule.
    let on_ledger = ledger_records(stack.reader.as_ref(), APP).await;
    assert_eq!(on_ledger.len(), all.len());
    let unscoped: Vec<CreateResult> = all
        .iter()
        .filter(|r| r.entity_key != written[2].entity_key)
        .cloned()
        .collect();
    let unscoped_ledger: Vec<_> = on_ledger
        .iter()
        .filter(|e| e.key != written[2].entity_key)
        .cloned()
        .collect();
    assert_exactly_once(&unscoped, &unscoped_ledger);
    eprintln!(
        "main job scenario: {} crowd records, {} relay requests, {:.1} s",
        crowd_written.len(),
        stack.inner.relayed(),
        started.elapsed().as_secs_f64()
    );
    stack.shutdown().await;
}

/// Minimum token age of the clients (short, to keep the test fast; the default is 60 s).
const TOKEN_MIN_AGE_MS: u64 = 1_000;
const CLIENTS: usize = 20;
const PER_CLIENT: usize = 50;
/// Status polling interval of the load clients. Every client goes through the OHTTP relay, so
/// every poll is one encapsulated call; the workspace's dev profile optimises the crypto
/// dependencies (HPKE, AES-GCM, X25519), which keeps a relayed call well under a millisecond of
/// CPU in debug builds.
const POLL_MS: u64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_1000_records_from_20_clients() {
    const APP: &str = "load";
    let stack = Stack::start(Batching {
        min_batch: 10,
        max_wait_ms: 100,
        max_batch: 100,
    })
    .await;
    let t = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let builder = PrivateClient::builder(APP)
            .token_min_age_ms(TOKEN_MIN_AGE_MS)
            .schedule(fast_schedule())
            .wallet(Arc::new(LocalWallet::random()))
            .reader(stack.reader.clone())
            .relayers(stack.urls())
            .delay_ms(0, 0)
            .ohttp_relay(stack.relay_url.clone())
            .poll_interval(Duration::from_millis(POLL_MS));
        clients.push(Arc::new(builder.build().await.expect("client builds")));
    }
    let built = t.elapsed();

    // Each client writes its records one after the other; the clients run concurrently.
    let t = Instant::now();
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for i in 0..PER_CLIENT {
                let r = client
                    .create_entity(note(format!("client {c} record {i}")))
                    .await
                    .unwrap_or_else(|e| panic!("client {c} record {i}: {e}"));
                out.push(r);
            }
            out
        }));
    }
    let mut per_client: Vec<Vec<CreateResult>> = Vec::new();
    for task in tasks {
        per_client.push(task.await.expect("writer task"));
    }
    let wrote = t.elapsed();
    let all: Vec<CreateResult> = per_client.iter().flatten().cloned().collect();
    assert_eq!(all.len(), CLIENTS * PER_CLIENT);

    // Exactly once on the ledger, through both relayers.
    let t = Instant::now();
    let on_ledger = ledger_records(stack.reader.as_ref(), APP).await;
    assert_exactly_once(&all, &on_ledger);
    let mut per_creator: BTreeMap<Address, usize> = BTreeMap::new();
    for e in &on_ledger {
        *per_creator.entry(e.creator.unwrap()).or_default() += 1;
    }
    assert_eq!(
        per_creator.keys().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from([stack.a().address(), stack.b().address()]),
        "both relayers wrote records"
    );
    let counted = t.elapsed();

    // Each client finds exactly its own records (once their creation windows are closed).
    settle(&stack);
    let t = Instant::now();
    let listings = futures::future::join_all(
        clients
            .iter()
            .map(|c| async move { c.my_entities(&EntitiesQuery::new().refresh()).await }),
    )
    .await;
    for (c, (listing, written)) in listings.into_iter().zip(&per_client).enumerate() {
        let found: BTreeSet<_> = listing
            .unwrap_or_else(|e| panic!("client {c} lists: {e}"))
            .iter()
            .map(|m| m.entity_key)
            .collect();
        let expected: BTreeSet<_> = written.iter().map(|r| r.entity_key).collect();
        assert_eq!(found, expected, "client {c} finds exactly its own records");
    }
    let listed = t.elapsed();

    let batches: BTreeSet<_> = all.iter().map(|r| r.tx_hash).collect();
    let recovered = all.iter().filter(|r| r.recovered).count();
    assert!(
        stack.inner.relayed() >= (CLIENTS * PER_CLIENT) as u64,
        "every submission went through the OHTTP relay"
    );
    eprintln!(
        "load: {} records from {CLIENTS} clients: clients built in {:.1} s, written in {:.1} s \
         ({} batches, A {} / B {} records, {recovered} recovered), counted in {:.1} s, \
         {CLIENTS} listings in {:.1} s; {} OHTTP relay requests",
        all.len(),
        built.as_secs_f64(),
        wrote.as_secs_f64(),
        batches.len(),
        per_creator[&stack.a().address()],
        per_creator[&stack.b().address()],
        counted.as_secs_f64(),
        listed.as_secs_f64(),
        stack.inner.relayed()
    );
    stack.shutdown().await;
}
