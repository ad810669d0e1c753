//! The main job: the whole privsvc stack in one process on loopback, and one user's session
//! against it, checked end to end.
//!
//! ```text
//! cargo run --release --example local_stack             # scenario + report; exit 0 when every check passed
//! cargo run --release --example local_stack -- --serve  # the same, then keep the stack running (Ctrl-C)
//! ```
//!
//! Started here, all on 127.0.0.1 with ephemeral ports:
//! - an embedded Arkiv devnet (chain 7738577, a block every 2 s, five prefunded dev accounts);
//! - relayer A (dev account 0): `TOKENS=required`, `ISSUER=on` (it runs the token issuer), `OHTTP=on`;
//! - relayer B (dev account 1): `TOKENS=off`, `OHTTP=on`;
//! - an OHTTP relay, forwarding only to relayers it verified from their heartbeats.
//!
//! Then, as an application would: a user with a fresh random wallet discovers the relayers from
//! their heartbeats and, with every relayer call going through the OHTTP relay, writes a note, an
//! encrypted note, a note in a scope and a note with `minAnonymity` 2. A second wallet writes a
//! record to each relayer every few hundred milliseconds meanwhile (the crowd the user hides in).
//! The user lists their records with `my_entities`, proves ownership of one, and a third party
//! checks the proof against the ledger with its own reader. Every step is checked; the exit code
//! is 0 only when all checks passed.
//!
//! Log level: `RUST_LOG` (default `warn`).

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use privsvc::client::{
    verify_ownership_proof, CreateParams, CreateResult, EntitiesQuery, Expires, LocalWallet,
    OwnershipProof, PrivateClient, PrivsvcError, ProofExpectation, ProofRejection, ProveParams,
    SessionSchedule, Wallet, COVER_WINDOW_BLOCKS,
};
use privsvc::devnet::{Address, BlockTime, DevnetHandle};
use privsvc::ledger::{LedgerReader, RpcLedger};
use privsvc::ohttp::SILENCE_OHTTP_LOGS;
use privsvc::relayer::Relayer;
use privsvc_testkit::{LocalStack, RelayerSpec};

/// The app (key namespace and `project` attribute) of the scenario.
const APP: &str = "notes";
/// Block interval of the devnet (Arkiv's block time).
/// Minimum token age of the demo clients (short, to keep the demo fast; the default is 60 s).
const TOKEN_MIN_AGE_MS: u64 = 2_000;
const BLOCK_TIME: Duration = Duration::from_secs(2);
/// The session timers of the demo's clients, and of the JS clients of `--serve` (its
/// `/config.json`): a tail every 200 to 500 ms (default 15 to 45 s), status polls for up to
/// 300 ms after `written`, the first token refill within 100 ms, later ones every 2 to 4 s.
fn demo_schedule() -> SessionSchedule {
    SessionSchedule {
        tail: (Duration::from_millis(200), Duration::from_millis(500)),
        status_tail: (Duration::ZERO, Duration::from_millis(300)),
        status_horizon_rounds: (1.0, 3.0),
        refill_below: 5,
        first_refill: (Duration::ZERO, Duration::from_millis(100)),
        later_refill: (Duration::from_secs(2), Duration::from_secs(4)),
        scan: (Duration::from_millis(300), Duration::from_millis(800)),
        fetch_age_blocks: (16, 16),
    }
}

/// [`demo_schedule`] as the JS package's `schedule` option.
fn demo_schedule_js() -> serde_json::Value {
    let ms = |(a, b): (Duration, Duration)| {
        serde_json::json!([a.as_millis() as u64, b.as_millis() as u64])
    };
    let s = demo_schedule();
    serde_json::json!({
        "tailMs": ms(s.tail),
        "statusTailMs": ms(s.status_tail),
        "refillBelow": s.refill_below,
        "firstRefillMs": ms(s.first_refill),
        "laterRefillMs": ms(s.later_refill),
        "scanMs": ms(s.scan),
        "fetchAgeBlocks": [s.fetch_age_blocks.0, s.fetch_age_blocks.1],
        "statusHorizonRounds": [s.status_horizon_rounds.0, s.status_horizon_rounds.1],
    })
}

/// Waits until `client` holds a ripe token when one of its relayers requires tokens (its
/// session's first refill, then the tokens' minimum age): a write spends only a token obtained
/// before it was requested.
async fn ripe(client: &PrivateClient) -> Result<()> {
    if !client.relayers().iter().any(|r| r.info.tokens_required) {
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.ripe_tokens() == 0 {
        if Instant::now() > deadline {
            bail!("no ripe token after 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The whole scenario must finish within this time.
const SCENARIO_LIMIT: Duration = Duration::from_secs(90);

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "Run the whole privsvc stack on loopback and check one user's session")]
struct Args {
    /// After the scenario, keep the stack running and print its URLs (Ctrl-C stops it).
    #[arg(long)]
    serve: bool,
    /// With --serve: serve the web example (examples/web and the js package) on this port of
    /// 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    web_port: u16,
}

/// The running servers (`privsvc_testkit::LocalStack`) and what the scenario uses of them.
struct Stack {
    inner: LocalStack,
    reader: Arc<dyn LedgerReader>,
    relay_url: String,
    /// The demo's data directory (the users' device stores), removed at the end.
    data: tempfile::TempDir,
}

/// Failed checks, collected so that the report shows all of them.
#[derive(Default)]
struct Checks {
    passed: usize,
    failed: Vec<String>,
}

impl Checks {
    fn check(&mut self, ok: bool, what: impl Into<String>) {
        if ok {
            self.passed += 1;
        } else {
            let what = what.into();
            println!("  CHECK FAILED: {what}");
            self.failed.push(what);
        }
    }
}

/// `0x1234…abcd` for a long hex value.
fn short(v: impl std::fmt::Display) -> String {
    let s = v.to_string();
    if s.len() <= 14 {
        return s;
    }
    format!("{}…{}", &s[..6], &s[s.len() - 4..])
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// A relayer with short timers: the same settings as the environment variables named in the
/// comments (see `privsvc_relayer::RelayerConfig`); `BIND=127.0.0.1:0` and `DATA_DIR=<temp dir>` come
/// from the test kit.
fn relayer(name: &str) -> RelayerSpec {
    RelayerSpec::new(name)
        .ohttp() // OHTTP=on, OHTTP_SEED=<random>
        .with(|c| {
            c.batching.min_batch = 2; // MIN_BATCH: flush as soon as two records can share a batch
            c.batching.max_wait = Duration::from_millis(1_500); // MAX_WAIT_MS: a lone record waits at most 1.5 s for company
            c.batching.flush_jitter = Duration::from_millis(200); // FLUSH_JITTER_MS
            c.batching.max_min_anonymity = 10; // MAX_MIN_ANONYMITY
            c.limits.submissions_per_min = 600; // RATE_LIMIT_PER_MIN (tokens off)
                                                // HEARTBEAT_MS: a heartbeat every 30 s (default 10 min), so that the relayers stay
                                                // live (a heartbeat lives 600 blocks) while tests mine empty blocks to settle.
            c.heartbeat_interval = Duration::from_millis(30_000);
        })
}

async fn start_stack() -> Result<Stack> {
    let inner = LocalStack::builder()
        .block_time(BlockTime::Interval(BLOCK_TIME))
        .relayer(relayer("A").issuer()) // TOKENS=required, ISSUER=on
        .relayer(relayer("B")) // TOKENS=off
        .ohttp_relay_with(|c| {
            c.refresh_interval = Duration::from_secs(5);
            // Every process here shares 127.0.0.1, so the per-address limit is set for the
            // whole demo rather than for one user.
            c.rate_limit_per_min = 6_000;
        })
        .start()
        .await
        .context("starting the stack")?;
    Ok(Stack {
        reader: inner.reader(),
        relay_url: inner.relay_url().context("the stack has no OHTTP relay")?,
        inner,
        data: tempfile::tempdir().context("a data directory for the demo's users")?,
    })
}

impl Stack {
    /// A client as an application builds one: relayers discovered from heartbeats, every relayer
    /// call through the OHTTP relay, a short random delay before each submission.
    async fn client(&self, wallet: &Arc<LocalWallet>, min_anonymity: u64) -> Result<PrivateClient> {
        Ok(PrivateClient::builder(APP)
            .token_min_age_ms(TOKEN_MIN_AGE_MS)
            // Tokens of this session ripen by 4 s here (an hour at most by default).
            .token_max_ripe_ms(2 * TOKEN_MIN_AGE_MS)
            .data_dir(self.data.path())
            .wallet(wallet.clone())
            .reader(self.reader.clone())
            .ohttp_relay(self.relay_url.clone())
            .delay_ms(0, 800)
            .poll_interval(Duration::from_millis(250))
            .min_anonymity(min_anonymity)
            .schedule(demo_schedule())
            .build()
            .await?)
    }

    /// A client pinned to one relayer (the crowd).
    async fn pinned(&self, wallet: &Arc<LocalWallet>, url: &str) -> Result<PrivateClient> {
        Ok(PrivateClient::builder(APP)
            .token_min_age_ms(TOKEN_MIN_AGE_MS)
            // Tokens of this session ripen by 4 s here (an hour at most by default).
            .token_max_ripe_ms(2 * TOKEN_MIN_AGE_MS)
            .data_dir(self.data.path())
            .wallet(wallet.clone())
            .reader(self.reader.clone())
            .relayers([url.to_string()])
            .delay_ms(0, 0)
            .poll_interval(Duration::from_millis(250))
            .rarity_k(0)
            .schedule(demo_schedule())
            .build()
            .await?)
    }

    fn name_of(&self, url: &str) -> &'static str {
        if url == self.a().url() {
            "A"
        } else if url == self.b().url() {
            "B"
        } else if url.is_empty() {
            "(recovered)"
        } else {
            "?"
        }
    }

    fn a(&self) -> &Relayer {
        self.inner.relayer("A")
    }

    fn b(&self) -> &Relayer {
        self.inner.relayer("B")
    }

    fn node(&self) -> &DevnetHandle {
        self.inner.devnet()
    }

    /// Mines enough empty blocks for the covers of every batch so far to be final: a scan
    /// fetches a batch only once `COVER_WINDOW_BLOCKS` blocks followed it.
    fn settle(&self) -> Result<()> {
        self.node()
            .mine_blocks(2 * COVER_WINDOW_BLOCKS)
            .context("mining empty blocks")?;
        Ok(())
    }

    async fn shutdown(self) {
        self.inner.shutdown().await;
    }
}

/// The crowd: another wallet writing to each relayer until told to stop.
struct Crowd {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Result<Vec<CreateResult>>>>,
    client: PrivateClient,
}

async fn start_crowd(stack: &Stack) -> Result<Crowd> {
    let wallet = Arc::new(LocalWallet::random());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for url in [stack.a().url(), stack.b().url()] {
        let client = stack.pinned(&wallet, url).await?;
        ripe(&client).await?;
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut written = Vec::new();
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let params = CreateParams::new(
                    format!("crowd record {n}").into_bytes(),
                    "text/plain",
                    Expires::Hours(1),
                );
                match client.create_entity(params).await {
                    Ok(r) => written.push(r),
                    // The crowd outran its refills: wait for the next one, as an app would.
                    Err(PrivsvcError::NoRipeToken { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Ok(written)
        }));
    }
    let client = stack.pinned(&wallet, stack.b().url()).await?;
    Ok(Crowd {
        stop,
        tasks,
        client,
    })
}

/// One of the user's writes and what it should read back as.
struct Planned {
    label: &'static str,
    text: &'static str,
    encrypted: bool,
    scope: Option<&'static str>,
    min_anonymity: u64,
}

const PLAN: [Planned; 4] = [
    Planned {
        label: "note",
        text: "hello from a fresh wallet",
        encrypted: false,
        scope: None,
        min_anonymity: 1,
    },
    Planned {
        label: "encrypted note",
        text: "only my wallet can read this",
        encrypted: true,
        scope: None,
        min_anonymity: 1,
    },
    Planned {
        label: "note in scope \"diary\"",
        text: "dear diary",
        encrypted: false,
        scope: Some("diary"),
        min_anonymity: 1,
    },
    Planned {
        label: "note, minAnonymity 2",
        text: "not alone in my batch",
        encrypted: false,
        scope: None,
        min_anonymity: 2,
    },
];

fn params(p: &Planned) -> CreateParams {
    let mut c = CreateParams::new(p.text.as_bytes().to_vec(), "text/plain", Expires::Hours(1))
        .attribute("kind", "note")
        .encrypt(p.encrypted);
    if let Some(s) = p.scope {
        c = c.scope(s);
    }
    c
}

async fn scenario(stack: &Stack, checks: &mut Checks, started: Instant) -> Result<()> {
    let wallet = Arc::new(LocalWallet::random());
    println!();
    println!(
        "User: a fresh random wallet {} writes to app {APP:?}",
        short(wallet.address())
    );
    let t = Instant::now();
    let user = stack
        .client(&wallet, 1)
        .await
        .context("building the client")?;
    let user_k2 = stack
        .client(&wallet, 2)
        .await
        .context("building the minAnonymity 2 client")?;
    // A write spends only a token obtained before it was requested: wait for the sessions'
    // first refills to ripen, so that relayer A (tokens required) can take writes too.
    ripe(&user).await?;
    ripe(&user_k2).await?;
    let relayers = user.relayers();
    println!(
        "  client ready in {}: {} relayers discovered from heartbeats, reached through the OHTTP relay",
        ms(t.elapsed()),
        relayers.len()
    );
    for r in &relayers {
        println!(
            "    {} {}  tokens {}  OHTTP key {}",
            stack.name_of(&r.url),
            r.url,
            if r.info.tokens_required {
                "required"
            } else {
                "off"
            },
            if r.info.ohttp_key.is_some() {
                "published"
            } else {
                "missing"
            }
        );
    }
    checks.check(relayers.len() == 2, "the client discovers both relayers");
    checks.check(
        relayers
            .iter()
            .any(|r| r.url == stack.a().url() && r.info.tokens_required),
        "relayer A requires tokens",
    );

    let crowd = start_crowd(stack).await.context("starting the crowd")?;
    println!("  meanwhile a second wallet writes a record to each relayer every 0.3 s (the crowd)");

    // The four writes run concurrently, each after the client's random delay (0 to 0.8 s).
    println!();
    println!(
        "Writes (each: seal, random delay, submit through the OHTTP relay, poll until written)"
    );
    let t_writes = Instant::now();
    let runs = PLAN.iter().map(|p| {
        let client = if p.min_anonymity > 1 { &user_k2 } else { &user };
        async move {
            let t = Instant::now();
            let r = client.create_entity(params(p)).await;
            (r, t.elapsed())
        }
    });
    let results = futures::future::join_all(runs).await;
    let writes_took = t_writes.elapsed();
    crowd.stop.store(true, Ordering::SeqCst);
    println!(
        "  {:<24} {:<8} {:>5}  {:<13} {:<13} {:>7}",
        "record", "relayer", "batch", "entity key", "owner", "time"
    );
    let mut written: Vec<(&Planned, CreateResult)> = Vec::new();
    let mut warned = 0;
    for (p, (r, took)) in PLAN.iter().zip(results) {
        match r {
            Ok(r) => {
                println!(
                    "  {:<24} {:<8} {:>5}  {:<13} {:<13} {:>7}",
                    p.label,
                    stack.name_of(&r.relayer),
                    r.batch_size,
                    short(r.entity_key),
                    short(r.owner),
                    secs(took)
                );
                warned += r.warnings.len();
                written.push((p, r));
            }
            Err(e) => checks.check(false, format!("writing the {}: {e}", p.label)),
        }
    }
    if let Some(w) = written.iter().flat_map(|(_, r)| &r.warnings).next() {
        println!("  {warned} fingerprinting warnings (expected on a fresh ledger, where every attribute value is rare), e.g.");
        println!("    {w}");
    }
    checks.check(written.len() == PLAN.len(), "all four records are written");
    for (p, r) in &written {
        checks.check(
            !r.recovered && !r.tx_hash.is_zero(),
            format!("the {} was written by a relayer transaction", p.label),
        );
        checks.check(
            r.batch_size >= p.min_anonymity.max(1),
            format!(
                "the {} shares its batch with at least {} records",
                p.label, p.min_anonymity
            ),
        );
    }
    let owners: BTreeSet<Address> = written.iter().map(|(_, r)| r.owner).collect();
    checks.check(
        owners.len() == written.len() && !owners.contains(&wallet.address()),
        "every record has its own one-time owner, never the wallet's address",
    );

    // What the ledger shows of the encrypted record: an envelope whose data is ciphertext.
    if let Some((p, r)) = written.iter().find(|(p, _)| p.encrypted) {
        let entity = stack.reader.entity(r.entity_key, None).await?;
        let sealed = entity
            .and_then(|e| e.payload)
            .and_then(|payload| privsvc::envelope::parse_envelope(&payload).ok());
        checks.check(
            sealed.as_ref().is_some_and(|s| {
                s.body.enc
                    && !s
                        .body
                        .data
                        .windows(p.text.len())
                        .any(|w| w == p.text.as_bytes())
            }),
            "the encrypted record's payload on the ledger is not readable",
        );
    }
    if let Some((_, r)) = written.iter().find(|(p, _)| p.scope.is_some()) {
        checks.check(
            r.owner == user.scope_address("diary").await?,
            "the scoped record is owned by the scope's address",
        );
    }

    // Listing: the user's records are found by opening tags, nothing else identifies them.
    println!();
    let t = Instant::now();
    // A scan fetches a batch once its covers are final (16 blocks later); `refresh` waits for
    // the session's next tail, which lists what is new.
    stack.settle()?;
    let mine = user.my_entities(&EntitiesQuery::new().refresh()).await?;
    let listed_in = t.elapsed();
    let scan = user.last_scan().await.unwrap_or_default();
    println!(
        "my_entities: {} records found in {} (listed {} records of the app, opened {} tags, {} matched, fetched {} batches of which {} cover batches)",
        mine.len(),
        ms(listed_in),
        scan.listed,
        scan.tags_opened,
        scan.matched,
        scan.batches_fetched,
        scan.cover_batches
    );
    for m in &mine {
        let scope = written
            .iter()
            .find(|(_, r)| r.entity_key == m.entity_key)
            .and_then(|(p, _)| p.scope)
            .map(|s| format!(" scope {s:?}"))
            .unwrap_or_default();
        println!(
            "  {}  block {:>3}  {}{}{}  {:?}",
            short(m.entity_key),
            m.created_at,
            m.content_type,
            if m.encrypted { " (decrypted)" } else { "" },
            scope,
            m.to_text()
        );
    }
    let found: BTreeSet<_> = mine.iter().map(|m| m.entity_key).collect();
    let expected: BTreeSet<_> = written.iter().map(|(_, r)| r.entity_key).collect();
    checks.check(
        found == expected,
        "my_entities finds exactly the user's records (including the one written by the second client session)",
    );
    for (p, r) in &written {
        let m = mine.iter().find(|m| m.entity_key == r.entity_key);
        checks.check(
            m.is_some_and(|m| {
                m.to_text() == p.text && m.encrypted == p.encrypted && m.owner == r.owner
            }),
            format!(
                "the {} reads back with its text, owner and encryption flag",
                p.label
            ),
        );
        checks.check(
            m.is_some_and(|m| m.creator == stack.a().address() || m.creator == stack.b().address()),
            format!("the {} was created by one of the relayers", p.label),
        );
    }

    // Ownership proof: signed by the record's one-time owner key, checked by a third party.
    println!();
    let Some((p, target)) = written.first() else {
        bail!("nothing was written: no proof to make");
    };
    let challenge = hex::encode(rand::random::<[u8; 16]>());
    let verifier = "shop.example";
    let t = Instant::now();
    let proof = user
        .prove_ownership(
            target.entity_key,
            &ProveParams {
                challenge: challenge.clone(),
                verifier: verifier.into(),
                ttl_seconds: Some(300),
            },
        )
        .await?;
    let signed_in = t.elapsed();
    let json = serde_json::to_string(&proof)?;
    println!(
        "Ownership proof of the {} ({}): owner {}, verifier {verifier:?}, challenge {}, {} bytes of JSON, signed in {}",
        p.label,
        short(target.entity_key),
        short(proof.owner),
        short(&challenge),
        json.len(),
        ms(signed_in)
    );

    // The verifier has only the JSON and its own connection to the ledger.
    let received: OwnershipProof = serde_json::from_str(&json)?;
    let third_party: Arc<dyn LedgerReader> = Arc::new(RpcLedger::new(stack.node().url())?);
    let expect = ProofExpectation {
        challenge: &challenge,
        verifier,
        reader: third_party.as_ref(),
        now: None,
    };
    let t = Instant::now();
    let verdict = verify_ownership_proof(&received, &expect).await;
    let verified_in = t.elapsed();
    match &verdict {
        Ok(()) => println!(
            "  third-party check (fresh reader, chain {}): VALID: {} owns it on the ledger now ({})",
            third_party.chain_id().await?,
            short(received.owner),
            ms(verified_in)
        ),
        Err(e) => println!("  third-party check: REJECTED: {e}"),
    }
    checks.check(
        verdict.is_ok(),
        "the ownership proof verifies against the ledger",
    );
    let wrong_challenge = verify_ownership_proof(
        &received,
        &ProofExpectation {
            challenge: "another challenge",
            ..expect
        },
    )
    .await;
    println!(
        "  the same proof against another challenge: {}",
        verdict_text(&wrong_challenge)
    );
    checks.check(
        wrong_challenge == Err(ProofRejection::WrongChallenge),
        "a proof for another challenge is rejected",
    );
    let mut moved = received.clone();
    if let Some((_, other)) = written.get(1) {
        moved.body.entity_key = other.entity_key;
        let other_record = verify_ownership_proof(&moved, &expect).await;
        println!(
            "  the same proof pointed at another of the user's records: {}",
            verdict_text(&other_record)
        );
        checks.check(
            other_record.is_err(),
            "a proof does not carry over to another record",
        );
    }

    // The crowd: its records are its own, and the user's never show up in its listing.
    let mut crowd_written = Vec::new();
    for task in crowd.tasks {
        match task.await {
            Ok(Ok(w)) => crowd_written.extend(w),
            Ok(Err(e)) => checks.check(false, format!("a crowd write failed: {e}")),
            Err(e) => checks.check(false, format!("a crowd task failed: {e}")),
        }
    }
    stack.settle()?;
    let crowd_found: BTreeSet<_> = crowd
        .client
        .my_entities(&EntitiesQuery::new().refresh())
        .await?
        .iter()
        .map(|m| m.entity_key)
        .collect();
    let crowd_expected: BTreeSet<_> = crowd_written.iter().map(|r| r.entity_key).collect();
    println!();
    println!(
        "Crowd: {} records written by the second wallet; its my_entities finds {} of them and {} of the user's",
        crowd_written.len(),
        crowd_found.intersection(&crowd_expected).count(),
        crowd_found.intersection(&found).count()
    );
    checks.check(
        crowd_found == crowd_expected,
        "the second wallet finds exactly its own records, none of the user's",
    );

    let (ha, hb) = (stack.a().health().await, stack.b().health().await);
    println!(
        "Relayers: A wrote {} batch transaction(s), B wrote {}; the OHTTP relay forwarded {} requests",
        ha.batches,
        hb.batches,
        stack.inner.relayed()
    );
    checks.check(
        stack.inner.relayed() >= 2 * PLAN.len() as u64,
        "the user's relayer calls went through the OHTTP relay",
    );
    println!();
    println!(
        "Timings: writes {} (all four, concurrently), listing {}, proof {} to sign and {} to verify; total run {} (stack start included)",
        secs(writes_took),
        ms(listed_in),
        ms(signed_in),
        ms(verified_in),
        secs(started.elapsed())
    );
    Ok(())
}

fn verdict_text(v: &Result<(), ProofRejection>) -> String {
    match v {
        Ok(()) => "ACCEPTED".into(),
        Err(e) => format!("rejected ({e})"),
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
    let args = Args::parse();
    match run(&args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            println!();
            println!("FAILED: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: &Args) -> Result<bool> {
    let started = Instant::now();
    println!("privsvc local stack: everything below runs in this process on 127.0.0.1");
    let stack = start_stack().await?;
    println!(
        "  devnet       {}  chain {}, a block every {} s, 5 prefunded dev accounts",
        stack.node().url(),
        stack.node().chain_id(),
        BLOCK_TIME.as_secs()
    );
    println!(
        "  relayer A    {}  account {}  TOKENS=required ISSUER=on OHTTP=on",
        stack.a().url(),
        short(stack.a().address())
    );
    println!(
        "  relayer B    {}  account {}  TOKENS=off OHTTP=on",
        stack.b().url(),
        short(stack.b().address())
    );
    println!(
        "  OHTTP relay  {}  forwards to the 2 relayers verified from their heartbeats",
        stack.relay_url
    );
    println!(
        "  batching: MIN_BATCH=2, MAX_WAIT_MS=1500, MAX_BATCH=100; stack ready in {}",
        secs(started.elapsed())
    );
    println!(
        "  tokens ripen for {TOKEN_MIN_AGE_MS} ms in this demo; the default is 60 s (a token is spent only that long after it was obtained)"
    );

    let mut checks = Checks::default();
    let outcome =
        tokio::time::timeout(SCENARIO_LIMIT, scenario(&stack, &mut checks, started)).await;
    let outcome = match outcome {
        Ok(r) => r,
        Err(_) => Err(anyhow!(
            "the scenario did not finish within {} s",
            SCENARIO_LIMIT.as_secs()
        )),
    };
    if let Err(e) = &outcome {
        checks.check(false, format!("{e:#}"));
    }
    println!();
    let ok = checks.failed.is_empty();
    if ok {
        println!("RESULT: OK, all {} checks passed", checks.passed);
    } else {
        println!(
            "RESULT: FAILED, {} of {} checks failed:",
            checks.failed.len(),
            checks.passed + checks.failed.len()
        );
        for f in &checks.failed {
            println!("  - {f}");
        }
    }

    if args.serve {
        let config = serde_json::json!({
            "app": APP,
            "relayers": [stack.a().url(), stack.b().url()],
            "ohttpRelay": stack.relay_url,
            "schedule": demo_schedule_js(),
        });
        let web = web::start(args.web_port, stack.node().url().to_string(), config).await?;
        serve(&stack, &web).await?;
    }
    stack.shutdown().await;
    Ok(ok)
}

async fn serve(stack: &Stack, web: &str) -> Result<()> {
    let rpc = stack.node().url();
    let relay = &stack.relay_url;
    println!();
    println!("Serving until Ctrl-C:");
    println!(
        "  ledger JSON-RPC  {rpc}  (chain {})",
        stack.node().chain_id()
    );
    println!(
        "  relayer A        {}  (token issuer at the same URL)",
        stack.a().url()
    );
    println!("  relayer B        {}", stack.b().url());
    println!("  OHTTP relay      {relay}  (clients POST to /ohttp)");
    println!("  web page         {web}/  (examples/web; the ledger RPC is proxied at {web}/rpc)");
    println!();
    println!("Try the command-line client from another terminal (any 32-byte key is a wallet):");
    println!("  export PRIVSVC_WALLET_KEY=0x$(od -An -tx1 -N32 /dev/urandom | tr -d ' \\n')");
    println!(
        "  cargo run --release --example client -- --rpc-url {rpc} --ohttp-relay {relay} --app {APP} write --text \"hello\" --attr kind=note --encrypt"
    );
    println!(
        "  cargo run --release --example client -- --rpc-url {rpc} --ohttp-relay {relay} --app {APP} list --payloads"
    );
    println!(
        "  cargo run --release --example client -- --rpc-url {rpc} --app {APP} prove 0x<entity key> --challenge abc --verifier shop.example > proof.json"
    );
    println!(
        "  cargo run --release --example client -- --rpc-url {rpc} verify-proof proof.json --challenge abc --verifier shop.example"
    );
    tokio::signal::ctrl_c().await?;
    println!("stopping");
    Ok(())
}

/// The web example's static route (`--serve`): `examples/web/` at `/`, the `js/` package at
/// `/privsvc/` (build it first with `scripts/js-test.sh --build-only`), and `POST /rpc` passed to
/// the devnet, so that the page reads the ledger from its own origin (no `Origin` header reaches
/// the RPC; the devnet answers cross-origin requests too, with CORS).
mod web {
    use std::net::SocketAddr;
    use std::path::{Component, Path, PathBuf};

    use anyhow::Result;
    use axum::body::Bytes;
    use axum::extract::{Path as UrlPath, State};
    use axum::http::{header, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::{get, post};
    use axum::Router;

    #[derive(Clone)]
    struct Web {
        root: PathBuf,
        rpc: String,
        config: serde_json::Value,
        http: reqwest::Client,
    }

    /// Starts the server on 127.0.0.1:`port`; its base URL. `config` is served at
    /// `/config.json` for the page (app, relayer and OHTTP relay URLs).
    pub async fn start(port: u16, rpc: String, config: serde_json::Value) -> Result<String> {
        let state = Web {
            root: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
            rpc,
            config,
            http: reqwest::Client::new(),
        };
        let app = Router::new()
            .route(
                "/",
                get(|s: State<Web>| async move { file(&s, "examples/web/index.html").await }),
            )
            .route("/rpc", post(rpc_proxy))
            .route(
                "/config.json",
                get(|s: State<Web>| async move { axum::Json(s.config.clone()) }),
            )
            .route(
                "/privsvc/{*path}",
                get(|s: State<Web>, UrlPath(p): UrlPath<String>| async move {
                    file(&s, &format!("js/{p}")).await
                }),
            )
            .route(
                "/{*path}",
                get(|s: State<Web>, UrlPath(p): UrlPath<String>| async move {
                    file(&s, &format!("examples/web/{p}")).await
                }),
            )
            .with_state(state);
        let listener =
            tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move {
            // No Nagle delay on answers (a browser's listing is hundreds of small round trips).
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            });
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("web server stopped: {e}");
            }
        });
        Ok(url)
    }

    fn content_type(path: &Path) -> &'static str {
        match path.extension().and_then(|e| e.to_str()) {
            Some("html") => "text/html; charset=utf-8",
            Some("js") | Some("mjs") => "text/javascript; charset=utf-8",
            Some("wasm") => "application/wasm",
            Some("css") => "text/css; charset=utf-8",
            Some("json") => "application/json",
            Some("png") => "image/png",
            _ => "application/octet-stream",
        }
    }

    /// A file under the repository root; only plain relative paths (no `..`, no hidden files,
    /// nothing under `node_modules`), else 404.
    async fn file(web: &Web, rel: &str) -> Response {
        let rel = Path::new(rel);
        let plain = rel.components().all(|c| match c {
            Component::Normal(name) => {
                let name = name.to_string_lossy();
                !name.starts_with('.') && name != "node_modules"
            }
            _ => false,
        });
        if !plain {
            return StatusCode::NOT_FOUND.into_response();
        }
        match tokio::fs::read(web.root.join(rel)).await {
            Ok(bytes) => (
                [
                    (header::CONTENT_TYPE, content_type(rel)),
                    (header::CACHE_CONTROL, "no-store"),
                ],
                bytes,
            )
                .into_response(),
            Err(_) => (StatusCode::NOT_FOUND, "not found").into_response(),
        }
    }

    async fn rpc_proxy(State(web): State<Web>, body: Bytes) -> Response {
        let answer = web
            .http
            .post(&web.rpc)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await;
        match answer {
            Ok(r) => {
                let status =
                    StatusCode::from_u16(r.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
                match r.bytes().await {
                    Ok(b) => {
                        (status, [(header::CONTENT_TYPE, "application/json")], b).into_response()
                    }
                    Err(_) => bad_gateway(),
                }
            }
            Err(_) => bad_gateway(),
        }
    }

    fn bad_gateway() -> Response {
        (
            StatusCode::BAD_GATEWAY,
            [(header::CONTENT_TYPE, "application/json")],
            r#"{"error":"the devnet did not answer"}"#,
        )
            .into_response()
    }
}
