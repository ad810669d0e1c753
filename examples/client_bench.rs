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
//! listing), a scan with nothing new, the scan statistics, a full `list_app` and the vault's tag
//! opens per second (KeyVault in process and IsolatedVault on its key thread).
//!
//! Recorded figures are in docs/BENCHMARKS.md. About 10 minutes for `--records
//! 100000,300000,1000000` on two cores; 100 000 alone takes under a minute.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use privsvc::attributes::{AttrValue, Attributes};
use privsvc::client::{EntitiesQuery, PrivateClient};
use privsvc::devnet::{Bytes, Devnet, DevnetConfig, EntityData, StoredAttr, DEV_PRIVATE_KEYS};
use privsvc::envelope::EnvelopeBody;
use privsvc::ledger::{
    ArkivValue, Attribute, Create, CreationFlags, LedgerReader, LedgerWriter, Operation, RpcLedger,
    RpcWriter,
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
    let rss_before = proc_status_kb("VmRSS");
    let cpu_before = proc_cpu_s();
    let t = Instant::now();
    // Building lists the project once (the listing the rarity check of writes uses).
    let client = PrivateClient::builder(APP)
        .vault(vault.clone())
        .reader(reader.clone())
        .relayers([relayer.url().to_string()])
        .scan_cache_file(&scan_file)
        .schedule(bench_schedule())
        .build()
        .await?;
    let build = t.elapsed();
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
    anyhow::ensure!(
        refresh_stats.listed as u64 == new,
        "the refresh listed {} records, {new} are new",
        refresh_stats.listed
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
