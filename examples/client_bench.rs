//! Client benchmark: `my_entities` over an app with many records on the devnet, and tag opens/s.
//!
//! ```text
//! cargo run --release --example client_bench [-- --records 10000,100000 --mine 20 --new 100]
//! ```
//!
//! For each size N the devnet is seeded at genesis with N records of one app in batches of 50
//! (four relayer addresses, one batch per block): `--mine` of them are the user's (real sealed
//! envelopes signed by the user's one-time keys, tags by the user's vault), the others carry
//! another user's tags. A real relayer runs against the devnet so the client builds as usual.
//! Printed per size: the first scan (building the client, which lists the project once, plus
//! the first `my_entities`: open every tag, fetch the user's batches with their cover batches,
//! verify, decrypt), the resident memory before and after it and the process peak, a
//! `refresh` after `--new` records of another user landed in one batch (an incremental
//! listing), a scan with nothing new, the scan statistics, a full `list_app`, the vault's tag
//! opens per second (KeyVault in process and IsolatedVault on its key thread), and the floor:
//! the same listing requests as the first session's first listing (recorded by a reader that
//! wraps the client's), with today's full rows, sent again by a plain reqwest client, four at a
//! time, and each answer parsed with `serde_json::from_slice::<serde_json::Value>` and nothing
//! else; then the ratio of the first session to that floor, and the bytes per row of the
//! listing answers.
//!
//! Recorded figures are in docs/BENCHMARKS.md. About 10 minutes for `--records
//! 100000,300000,1000000` on two cores; 100 000 alone takes under a minute.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use privsvc::attributes::{AttrValue, Attributes};
use privsvc::client::{EntitiesQuery, PrivateClient};
use privsvc::devnet::{Bytes, Devnet, DevnetConfig, EntityData, StoredAttr, DEV_PRIVATE_KEYS};
use privsvc::envelope::EnvelopeBody;
use privsvc::ledger::{
    query_batch_body, str_literal, ArkivValue, Attribute, AttributeSelect, Create, CreationFlags,
    Entity, LedgerError, LedgerReader, LedgerWriter, Operation, PageQuery, QueryOptions, QueryPage,
    RpcLedger, RpcWriter, Select, TagPage,
};
use privsvc::relayer::{Relayer, RelayerConfig};
use privsvc::vault::{tag_to_text, IsolatedVault, KeyVault, Tag, Vault};

const APP: &str = "bench";
const PER_BATCH: u64 = 50;
const EXP: u64 = 86_400;

#[derive(Parser)]
struct Args {
    /// Record counts to benchmark, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    records: Vec<u64>,
    /// How many of the records are the user's.
    #[arg(long, default_value_t = 20)]
    mine: u64,
    /// Records of another user written after the first scan, before the timed refresh.
    #[arg(long, default_value_t = 100)]
    new: u64,
}

fn stored(attrs: &Attributes) -> Vec<StoredAttr> {
    attrs
        .arkiv_attributes()
        .into_iter()
        .map(|a| StoredAttr {
            name: a.name,
            type_id: a.type_id,
            value: Bytes::from(a.value),
        })
        .collect()
}

fn attrs_for(tag: &Tag, kind: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("project", APP).unwrap();
    a.insert("tag", AttrValue::Str(tag_to_text(tag))).unwrap();
    a.insert("kind", kind).unwrap();
    a
}

async fn sealed(
    vault: &KeyVault,
    record: &privsvc::vault::RecordRef,
    attrs: &Attributes,
    data: &[u8],
) -> Result<String> {
    let body = EnvelopeBody {
        app: APP.into(),
        exp: EXP,
        hour: privsvc::envelope::hour_of(privsvc::client::unix_now()),
        ct: "text/plain".into(),
        enc: false,
        types: attrs.types(),
        data: data.to_vec(),
    };
    Ok(Vault::sign_envelope(vault, record, &body, attrs).await?)
}

/// Genesis entities: `n` records, `mine` of them signed by `me`.
async fn seed(n: u64, mine: u64, me: &KeyVault) -> Result<(Vec<EntityData>, u64)> {
    let (other, _) = KeyVault::random(APP);
    let creators: Vec<privsvc::devnet::Address> = (0..4)
        .map(|i| privsvc::devnet::Address::repeat_byte(0x10 + i))
        .collect();
    let blocks = n.div_ceil(PER_BATCH);
    let head = blocks + 1;
    // One valid envelope of another user, shared by the other records (never verified: only
    // the user's own records are).
    let other_ref = other.new_record();
    let other_tag = other.make_tag(&other_ref);
    let other_payload = Bytes::from(
        sealed(&other, &other_ref, &attrs_for(&other_tag, "a"), b"other")
            .await?
            .into_bytes(),
    );
    let mut mine_at: std::collections::BTreeSet<u64> = Default::default();
    while (mine_at.len() as u64) < mine.min(n) {
        let r = privsvc::devnet::B256::random();
        mine_at.insert(u64::from_be_bytes(r[..8].try_into().unwrap()) % n);
    }
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let block = i / PER_BATCH + 1;
        let kind = ["a", "b", "c"][(i % 3) as usize];
        let (owner, payload, attrs) = if mine_at.contains(&i) {
            let r = me.new_record();
            let attrs = attrs_for(&me.make_tag(&r), kind);
            let text = sealed(me, &r, &attrs, format!("record {i}").as_bytes()).await?;
            (me.address_of(&r)?, Bytes::from(text.into_bytes()), attrs)
        } else {
            let r = other.new_record();
            let attrs = attrs_for(&other.make_tag(&r), kind);
            (
                privsvc::devnet::Address::random(),
                other_payload.clone(),
                attrs,
            )
        };
        out.push(EntityData {
            key: privsvc::devnet::B256::random(),
            owner,
            creator: creators[(block % 4) as usize],
            created_at: block,
            updated_at: block,
            expires_at: block + EXP / 2,
            flags: 0,
            content_type: "application/json".into(),
            payload,
            attrs: stored(&attrs),
        });
    }
    Ok((out, head))
}

/// A `/proc/self/status` figure in KiB (0 where there is none).
fn proc_status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (user + system) of the process so far, in seconds (from `/proc/self/stat`, in
/// clock ticks of 1/100 s; 0 where there is none). The devnet shares the process, so this is
/// client and node together.
fn proc_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the command name (which may hold spaces) start after ')'.
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let utime: f64 = f.get(11)?.parse().ok()?;
            let stime: f64 = f.get(12)?.parse().ok()?;
            Some((utime + stime) / 100.0)
        })
        .unwrap_or(0.0)
}

/// A reader that passes every call to `inner` and, while `on`, records the project's listing
/// requests: the `arkiv_query` pages whose expression starts with `project = "<app>"`, grouped
/// as the client grouped them into requests (one `query_many` is one JSON-RPC batch).
struct Recording {
    inner: Arc<dyn LedgerReader>,
    prefix: String,
    on: AtomicBool,
    requests: Mutex<Vec<Vec<PageQuery>>>,
}

impl Recording {
    fn new(inner: Arc<dyn LedgerReader>, project: &str) -> Self {
        Recording {
            inner,
            prefix: format!("project = {}", str_literal(project)),
            on: AtomicBool::new(true),
            requests: Mutex::new(Vec::new()),
        }
    }

    fn record(&self, queries: &[PageQuery]) {
        if self.on.load(Ordering::Relaxed)
            && queries
                .iter()
                .all(|q| q.expression.starts_with(&self.prefix))
        {
            self.requests.lock().unwrap().push(queries.to_vec());
        }
    }

    /// Stops recording; the requests recorded so far, in the order they were sent.
    fn stop(&self) -> Vec<Vec<PageQuery>> {
        self.on.store(false, Ordering::Relaxed);
        std::mem::take(&mut self.requests.lock().unwrap())
    }
}

#[async_trait::async_trait]
impl LedgerReader for Recording {
    async fn chain_id(&self) -> Result<u64, LedgerError> {
        self.inner.chain_id().await
    }
    async fn block_number(&self) -> Result<u64, LedgerError> {
        self.inner.block_number().await
    }
    async fn query(
        &self,
        expression: &str,
        options: &QueryOptions,
    ) -> Result<QueryPage, LedgerError> {
        self.record(&[PageQuery {
            expression: expression.to_owned(),
            options: options.clone(),
        }]);
        self.inner.query(expression, options).await
    }
    async fn query_many(&self, queries: &[PageQuery]) -> Result<Vec<QueryPage>, LedgerError> {
        self.record(queries);
        self.inner.query_many(queries).await
    }
    async fn query_tags_many(&self, queries: &[PageQuery]) -> Result<Vec<TagPage>, LedgerError> {
        self.record(queries);
        self.inner.query_tags_many(queries).await
    }
    async fn entity(
        &self,
        key: privsvc::devnet::B256,
        at_block: Option<u64>,
    ) -> Result<Option<Entity>, LedgerError> {
        self.inner.entity(key, at_block).await
    }
    async fn code_at(&self, address: privsvc::devnet::Address) -> Result<Vec<u8>, LedgerError> {
        self.inner.code_at(address).await
    }
    async fn entity_nonce(&self, address: privsvc::devnet::Address) -> Result<u64, LedgerError> {
        self.inner.entity_nonce(address).await
    }
    async fn balance(
        &self,
        address: privsvc::devnet::Address,
    ) -> Result<alloy_primitives::U256, LedgerError> {
        self.inner.balance(address).await
    }
    async fn block_timestamp(&self, number: u64) -> Result<Option<u64>, LedgerError> {
        self.inner.block_timestamp(number).await
    }
    async fn head_timestamp(&self) -> Result<Option<u64>, LedgerError> {
        self.inner.head_timestamp().await
    }
    async fn creation_tx(
        &self,
        key: privsvc::devnet::B256,
        created_at: u64,
    ) -> Result<Option<privsvc::devnet::B256>, LedgerError> {
        self.inner.creation_tx(key, created_at).await
    }
}

/// The projection of today's first listing: key, owner, creator, creation and expiry blocks,
/// and every attribute (for the rarity check). The floor asks for these rows whatever the
/// client asked for.
fn full_rows() -> Select {
    Select {
        key: true,
        owner: true,
        creator: true,
        created_at: true,
        expires_at: true,
        attributes: AttributeSelect::All,
        ..Select::default()
    }
}

/// What the floor fetched.
struct Floor {
    time: Duration,
    requests: usize,
    pages: usize,
    rows: usize,
    bytes: usize,
}

/// The floor under a first listing: the recorded `requests` sent again to `url` with a plain
/// reqwest client, four at a time in the recorded order (as the client has four requests in
/// flight), each answer parsed into a `serde_json::Value` and nothing else. Every page asks for
/// [`full_rows`] and follows the floor's own cursors (a cursor is bound to the projection): the
/// page of a range waits for the answer to its previous page, as in the client.
async fn floor(url: &str, requests: &[Vec<PageQuery>]) -> Result<Floor> {
    use futures::StreamExt;
    use tokio::sync::oneshot;

    // Each page's cursor goes to the next page of the same expression (its range), if any.
    let pages: usize = requests.iter().map(Vec::len).sum();
    let mut senders: Vec<Option<oneshot::Sender<Option<String>>>> = Vec::with_capacity(pages);
    let mut receivers: Vec<Option<oneshot::Receiver<Option<String>>>> = Vec::with_capacity(pages);
    for _ in 0..pages {
        let (tx, rx) = oneshot::channel();
        senders.push(Some(tx));
        receivers.push(Some(rx));
    }
    let mut last: HashMap<&str, usize> = HashMap::new();
    let mut plan = Vec::with_capacity(requests.len());
    let mut index = 0;
    for request in requests {
        let mut asked = Vec::with_capacity(request.len());
        for q in request {
            let wait = match q.options.cursor {
                Some(_) => {
                    let previous = *last
                        .get(q.expression.as_str())
                        .context("a recorded page with a cursor and no first page")?;
                    Some(
                        receivers[previous]
                            .take()
                            .context("two next pages of one page")?,
                    )
                }
                None => None,
            };
            last.insert(&q.expression, index);
            asked.push((q, wait, senders[index].take().expect("one sender per page")));
            index += 1;
        }
        plan.push(asked);
    }

    let http = reqwest::Client::new();
    let t = Instant::now();
    let answers: Vec<Result<(usize, usize)>> = futures::stream::iter(plan)
        .map(|asked| {
            let http = http.clone();
            async move {
                let mut queries = Vec::with_capacity(asked.len());
                let mut next = Vec::with_capacity(asked.len());
                for (q, wait, tx) in asked {
                    let mut q = q.clone();
                    q.options.select = full_rows();
                    if let Some(rx) = wait {
                        q.options.cursor = Some(
                            rx.await
                                .ok()
                                .flatten()
                                .context("the floor's range ended before the client's")?,
                        );
                    }
                    queries.push(q);
                    next.push(Some(tx));
                }
                let batch = query_batch_body(&queries, 1);
                // One page is one call, not a batch of one (as the client's reader sends it).
                let body = if queries.len() == 1 {
                    batch[1..batch.len() - 1].to_owned()
                } else {
                    batch
                };
                let bytes = http
                    .post(url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await?
                    .bytes()
                    .await?;
                let answer: serde_json::Value = serde_json::from_slice(&bytes)?;
                let answers = match answer {
                    serde_json::Value::Array(a) => a,
                    one => vec![one],
                };
                let mut rows = 0;
                for a in &answers {
                    let id = a["id"].as_u64().context("an answer without an id")?;
                    let result = &a["result"];
                    rows += result["data"].as_array().map_or(0, Vec::len);
                    let cursor = result["cursor"].as_str().map(str::to_owned);
                    let slot = usize::try_from(id.wrapping_sub(1)).ok();
                    if let Some(tx) = slot.and_then(|i| next.get_mut(i)?.take()) {
                        // The next page of the range may not be asked for (the client split it).
                        let _ = tx.send(cursor);
                    }
                }
                anyhow::Ok((bytes.len(), rows))
            }
        })
        .buffered(4)
        .collect()
        .await;
    let time = t.elapsed();
    let (mut bytes, mut rows) = (0, 0);
    for a in answers {
        let (b, r) = a?;
        bytes += b;
        rows += r;
    }
    Ok(Floor {
        time,
        requests: requests.len(),
        pages,
        rows,
        bytes,
    })
}

async fn run(n: u64, mine: u64, new: u64) -> Result<()> {
    let (me, _code) = KeyVault::random(APP);
    let t = Instant::now();
    let (entities, head) = seed(n, mine, &me).await?;
    let seed_time = t.elapsed();
    let mut devnet_config = DevnetConfig::on_demand();
    devnet_config.start_block = head;
    devnet_config.genesis_entities = entities;
    let node = Devnet::start(devnet_config).await.context("devnet")?;
    let reader: Arc<dyn LedgerReader> = Arc::new(RpcLedger::new(node.url())?);
    let mut secret = [0u8; 32];
    hex::decode_to_slice(&DEV_PRIVATE_KEYS[0][2..], &mut secret)?;
    let writer = Arc::new(RpcWriter::connect(RpcLedger::new(node.url())?, &secret).await?);
    let dir = tempfile::tempdir()?;
    let relayer =
        Relayer::start(RelayerConfig::for_tests(dir.path()), reader.clone(), writer).await?;

    // The head just past a resume boundary (an hour of blocks): the scan cache the first session
    // saves holds every seeded record, as for a user who comes back within the hour.
    let boundary = privsvc::client::DEFAULT_RESUME_BLOCKS;
    node.mine_blocks(boundary - head % boundary + 100)?;
    let scan_file = dir.path().join("notes.scan");

    let vault: Arc<dyn Vault> = Arc::new(me);
    // The first session's reader records its first listing's requests for the floor.
    let recording = Arc::new(Recording::new(reader.clone(), APP));
    let rss_before = proc_status_kb("VmRSS");
    let cpu_before = proc_cpu_s();
    let t = Instant::now();
    // Building lists the project once (the listing the rarity check of writes uses).
    let client = PrivateClient::builder(APP)
        .vault(vault.clone())
        .reader(recording.clone())
        .relayers([relayer.url().to_string()])
        .scan_cache_file(&scan_file)
        .schedule(bench_schedule())
        .build()
        .await?;
    let build = t.elapsed();
    let listing_requests = recording.stop();
    let t = Instant::now();
    let records = client.my_entities(&EntitiesQuery::new()).await?;
    let first_scan = t.elapsed();
    let first = build + first_scan;
    let first_cpu = proc_cpu_s() - cpu_before;
    let rss_after = proc_status_kb("VmRSS");
    let peak = proc_status_kb("VmHWM");
    let stats = client.last_scan().await.context("scan statistics")?;
    anyhow::ensure!(
        records.len() as u64 == mine.min(n),
        "found {} of my {} records",
        records.len(),
        mine
    );

    // `new` records of another user land in one batch; then a refresh lists only them.
    let (stranger, _) = KeyVault::random(APP);
    let mut secret = [0u8; 32];
    hex::decode_to_slice(&DEV_PRIVATE_KEYS[1][2..], &mut secret)?;
    let other_writer = RpcWriter::connect(RpcLedger::new(node.url())?, &secret).await?;
    let ops: Vec<Operation> = (0..new)
        .map(|i| {
            let r = stranger.new_record();
            let tag = tag_to_text(&stranger.make_tag(&r));
            let attr = |name: &str, value: String| Attribute {
                name: name.into(),
                value: ArkivValue::Str(value),
            };
            Operation::Create(Create {
                salt: u128::from(i),
                expires_at: 0,
                min_lifetime: EXP / 2,
                flags: CreationFlags::default(),
                content_type: "application/json".into(),
                payload: b"{}".to_vec(),
                attributes: vec![
                    attr("project", APP.into()),
                    attr("tag", tag),
                    attr("kind", "a".into()),
                ],
            })
        })
        .collect();
    if !ops.is_empty() {
        let receipt = other_writer.execute(&ops).await?;
        anyhow::ensure!(receipt.success, "the batch of new records reverted");
    }
    let t = Instant::now();
    let again = client.my_entities(&EntitiesQuery::new().refresh()).await?;
    let refresh = t.elapsed();
    let refresh_stats = client.last_scan().await.context("scan statistics")?;
    anyhow::ensure!(again.len() == records.len());
    // The session's tail (every 100 to 300 ms here) may list the new records before the scan
    // that `refresh` waits for: that scan then lists none of them. Its first run is the
    // attribute listing (docs/PROTOCOL.md §8.1), which lists the project again from the start:
    // when no scan ran since, the refresh's scan counts those rows too.
    let listed = refresh_stats.listed as u64;
    anyhow::ensure!(
        listed == new || listed == 0 || listed >= n + new,
        "the refresh listed {listed} records, {new} are new"
    );
    let t = Instant::now();
    client.scan_new().await?;
    let incremental = t.elapsed();

    // Tag opens per second, on every tag of the app.
    let t = Instant::now();
    let listing = privsvc::client::list_app(reader.as_ref(), APP, None, None).await?;
    let list_full = t.elapsed();
    let tags: Vec<Tag> = listing
        .entities
        .iter()
        .filter_map(|e| {
            e.attributes
                .as_ref()?
                .iter()
                .find_map(|a| match (&a.name[..], &a.value) {
                    ("tag", privsvc::ledger::ArkivValue::Str(s)) => {
                        privsvc::vault::tag_from_text(s)
                    }
                    _ => None,
                })
        })
        .collect();
    let t = Instant::now();
    let opened = vault.open_tags(&tags).await?;
    let local_rate = tags.len() as f64 / t.elapsed().as_secs_f64();
    anyhow::ensure!(opened.iter().flatten().count() as u64 == mine.min(n));
    let (iso, _) = IsolatedVault::random(APP)?;
    let t = Instant::now();
    iso.open_tags(&tags).await?;
    let iso_rate = tags.len() as f64 / t.elapsed().as_secs_f64();

    // A returning session: the cache is loaded, only what is new since its resume block is
    // listed, the user's records are fetched and verified again.
    drop(client);
    // The floor, with the first session's client gone.
    let floor = floor(&node.url(), &listing_requests).await?;
    let cache_mib = std::fs::metadata(&scan_file)?.len() as f64 / (1024.0 * 1024.0);
    let t = Instant::now();
    let returning = PrivateClient::builder(APP)
        .vault(vault.clone())
        .reader(reader.clone())
        .relayers([relayer.url().to_string()])
        .scan_cache_file(&scan_file)
        .build()
        .await?;
    let returning_build = t.elapsed();
    anyhow::ensure!(
        matches!(
            returning.scan_cache_state(),
            privsvc::client::ScanCacheState::Resumed { .. }
        ),
        "the returning session did not resume: {:?}",
        returning.scan_cache_state()
    );
    let t = Instant::now();
    let back = returning.my_entities(&EntitiesQuery::new()).await?;
    let returning_scan = t.elapsed();
    anyhow::ensure!(
        back.len() == records.len(),
        "the returning session lost records"
    );

    println!(
        "records {n:>7}: first session {:>6.3} s / floor {:>6.3} s = {:.2} x the floor (the floor: the first listing's {} requests, {} pages, {} rows of {:.0} bytes, with every attribute, reqwest + serde_json::Value only; {:.1} MiB)",
        first.as_secs_f64(),
        floor.time.as_secs_f64(),
        first.as_secs_f64() / floor.time.as_secs_f64(),
        floor.requests,
        floor.pages,
        floor.rows,
        floor.bytes as f64 / floor.rows.max(1) as f64,
        floor.bytes as f64 / (1024.0 * 1024.0),
    );
    println!(
        "records {n:>7}: seed {:>6.2} s | first scan {:>6.3} s (build listing {:>6.3} s + my_entities {:>6.3} s; {:>7.0} rows/s; CPU {:>6.2} s client and devnet), RSS {} MiB -> {} MiB, peak {} MiB | refresh after {new} new {:>6.3} s (listed {}), nothing new {:>6.3} s | listed {} opened {} matched {} batches fetched {} (cover {}) | list_app (all fields) {:>6.3} s | tag opens/s KeyVault {:>9.0}, IsolatedVault {:>9.0} | returning session {:>6.3} s (build with the cache {:>6.3} s + my_entities {:>6.3} s), cache {:.1} MiB",
        seed_time.as_secs_f64(),
        first.as_secs_f64(),
        build.as_secs_f64(),
        first_scan.as_secs_f64(),
        n as f64 / first.as_secs_f64(),
        first_cpu,
        rss_before / 1024,
        rss_after / 1024,
        peak / 1024,
        refresh.as_secs_f64(),
        refresh_stats.listed,
        incremental.as_secs_f64(),
        stats.listed,
        stats.tags_opened,
        stats.matched,
        stats.batches_fetched,
        stats.cover_batches,
        list_full.as_secs_f64(),
        local_rate,
        iso_rate,
        (returning_build + returning_scan).as_secs_f64(),
        returning_build.as_secs_f64(),
        returning_scan.as_secs_f64(),
        cache_mib,
    );
    relayer.shutdown().await;
    node.shutdown().await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(())
}

/// The session's timers with a tail every 100 to 300 ms: `refresh` waits for the next tail, and
/// the bench measures the scan, not the wait (a default tail is 15 to 45 s away).
fn bench_schedule() -> privsvc::client::SessionSchedule {
    privsvc::client::SessionSchedule {
        tail: (Duration::from_millis(100), Duration::from_millis(300)),
        scan: (Duration::from_millis(100), Duration::from_millis(300)),
        fetch_age_blocks: (16, 16),
        ..Default::default()
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    for n in args.records {
        run(n, args.mine, args.new).await?;
    }
    Ok(())
}
