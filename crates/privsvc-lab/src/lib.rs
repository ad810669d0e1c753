//! The attack lab: privacy measured the way an attacker would measure it.
//!
//! [`run`] starts the real stack on loopback (`privsvc_testkit::LocalStack`: the devnet, relayer
//! A with the token issuer, relayer B taking A's tokens, relayer C without tokens, the OHTTP
//! relay), every party fronted by a recording tap in its position, and a population of simulated
//! users (each with its own wallet and its own loopback address) who write and read records
//! through the real `PrivateClient` over a compressed day. Then each party's view is built from
//! the taps and the public ledger ([`views`]), never from a client's state; each attack guesses
//! from one view (or an allowed pair of views); the lab scores the guesses against what really
//! happened ([`truth`]) and reports the success rate, the chance rate and a 95% interval.
//!
//! `cargo run --release --features lab --example attack_lab` runs the documented scenario and
//! prints the table;
//! `docs/PRIVACY.md` holds the results and how to read them.
#![forbid(unsafe_code)]

pub mod active;
pub mod app;
pub mod attacks;
mod drift;
pub mod leaky;
pub mod ledger_view;
pub mod population;
pub mod report;
pub mod scenario;
pub mod stats;
mod steering;
pub mod truth;
pub mod views;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use privsvc_testkit::{BlockTime, LocalStack, RelayerSpec};
use rand::rngs::StdRng;
use rand::SeedableRng;

pub use report::LabReport;
pub use scenario::{Active, Defences, Leaks, Scenario};

use crate::population::{Identity, World};
use crate::report::PopulationFigures;
use crate::truth::Truth;
use crate::views::{ms_since, Views};

/// Why a lab run could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    /// The stack did not start.
    #[error("stack: {0}")]
    Stack(#[from] privsvc_testkit::StackError),
    /// A ledger read failed.
    #[error("ledger: {0}")]
    Ledger(#[from] privsvc_ledger::LedgerError),
    /// The lab's own setup failed.
    #[error("setup: {what}: {source}")]
    Setup {
        /// What could not be set up (`scan cache directory`, `wallet`, `http client`).
        what: &'static str,
        /// The file system's, the wallet's or the HTTP client's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The three relayers and the relay, every party recorded.
async fn start_stack(sc: &Scenario) -> Result<LocalStack, LabError> {
    let (min_batch, max_wait_ms) = (sc.min_batch, sc.max_wait_ms);
    let leaks = sc.leaks.clone();
    let decoys_max = sc.defences.decoys_max;
    let round = Duration::from_millis(sc.defences.round_ms);
    let batching = move |c: &mut privsvc_relayer::RelayerConfig| {
        c.batching.min_batch = min_batch;
        c.batching.max_wait = Duration::from_millis(max_wait_ms);
        c.batching.flush_jitter = Duration::from_millis(500);
        c.batching.max_min_anonymity = 10;
        c.issuer.quota = 100;
        // A heartbeat a minute: a run lasts about as long as a heartbeat lives (600 blocks of
        // 1 s), and its phases mine blocks of their own.
        c.heartbeat_interval = Duration::from_secs(60);
        c.lab_leaks.arrival_order = leaks.arrival_order_kept;
        c.batching.decoys_max = decoys_max;
    };
    // The OHTTP relay reaches A from 127.0.0.1 (every user has an address of its own).
    let mut relay_ips = vec![IpAddr::from([127, 0, 0, 1])];
    if sc.leaks.issuer_unlimited_via_ohttp {
        relay_ips.push(active::FLOODER_IP);
    }
    let issue_replays_signed_again = sc.leaks.issue_replays_signed_again;
    let resubmissions_stored_again = sc.leaks.resubmissions_stored_again;
    let planner_oldest_only = sc.leaks.planner_oldest_only;
    let issuer_limits = move |c: &mut privsvc_relayer::RelayerConfig| {
        batching(c);
        c.issuer.requests_per_min = active::ISSUER_LIMIT_PER_MIN;
        c.limits.ohttp_relay_ips = relay_ips.clone();
        c.lab_leaks.issue_replays_signed_again = issue_replays_signed_again;
    };
    Ok(LocalStack::builder()
        .block_time(BlockTime::Interval(sc.block_time))
        .record_traffic()
        .relayer(RelayerSpec::new("A").issuer().ohttp().with(issuer_limits))
        .relayer(
            RelayerSpec::new("B")
                .tokens_from("A")
                .ohttp()
                .with(batching),
        )
        .relayer(RelayerSpec::new("C").ohttp().with(move |c| {
            batching(c);
            // Small enough for the head-of-line flood to overrun it.
            c.batching.max_batch = 10;
            // The exact figures, for the leaky n-1 setting (`Leaks::exact_healthz`).
            c.metrics_bind = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
            c.lab_leaks.resubmissions_stored_again = resubmissions_stored_again;
            c.lab_leaks.planner_oldest_only = planner_oldest_only;
        }))
        .ohttp_relay_with(move |r| r.round = round)
        .start()
        .await?)
}

/// The directory of one run's device stores and scan caches, removed when dropped. Each run
/// has its own: two runs of one process (the lab's two tests run at once) draw the same users,
/// with the same device names, from the same seed, and must not share their stores.
fn run_dir() -> Result<tempfile::TempDir, LabError> {
    tempfile::Builder::new()
        .prefix("privsvc-lab-")
        .tempdir()
        .map_err(|e| LabError::Setup {
            what: "scan cache directory",
            source: e.into(),
        })
}

/// Records when each block appeared, as the node (and so the RPC) knows it.
fn watch_blocks(
    stack: &LocalStack,
    epoch: Instant,
    seen: Arc<Mutex<BTreeMap<u64, f64>>>,
) -> tokio::task::JoinHandle<()> {
    let reader = privsvc_ledger::RpcLedger::new(stack.devnet().url());
    tokio::spawn(async move {
        let Ok(reader) = reader else { return };
        loop {
            if let Ok(n) = privsvc_ledger::LedgerReader::block_number(&reader).await {
                let t = ms_since(epoch, Instant::now());
                seen.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(n)
                    .or_insert(t);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

/// Runs `scenario` and measures every attack.
pub async fn run(scenario: Scenario) -> Result<LabReport, LabError> {
    let started = Instant::now();
    let stack = start_stack(&scenario).await?;
    let mut rng = StdRng::seed_from_u64(scenario.seed);
    let mut ids: Vec<Identity> = (0..scenario.users)
        .map(|i| Identity::new(i, &mut rng))
        .collect::<Result<_, _>>()?;
    let returning = (scenario.users as f64 * scenario.returning_share).round() as usize;
    for id in ids.iter_mut().take(returning) {
        id.returning = true;
    }
    // Persistent devices keep their device stores and scan caches here for the run.
    let run_dir = run_dir()?;
    let cache_dir = run_dir.path().to_path_buf();
    let people = population::people(&scenario, ids, &cache_dir, &mut rng)?;
    let ids: Vec<Identity> = people.iter().map(|p| p.device.clone()).collect();
    let devices = PopulationFigures {
        default_store_users: ids.iter().filter(|i| i.default_stores).count(),
        roaming_users: people.iter().filter(|p| p.roaming.is_some()).count(),
        second_devices: people.iter().filter(|p| p.second.is_some()).count(),
        skewed_clocks: people
            .iter()
            .flat_map(|p| std::iter::once(&p.device).chain(p.second.as_ref()))
            .filter(|i| i.clock_skew_secs != 0)
            .count(),
        app_listing_users: people.iter().filter(|p| p.app_lists).count(),
        ..PopulationFigures::default()
    };
    let epoch = Instant::now();
    let truth = Truth {
        users: people.iter().map(population::Person::user).collect(),
        ..Truth::default()
    };
    let world = Arc::new(World {
        stack,
        scenario: scenario.clone(),
        epoch,
        truth: Mutex::new(truth),
        ids: ids.clone(),
        store_dir: cache_dir.clone(),
        stores_outside_run: std::sync::atomic::AtomicUsize::new(0),
    });
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let watcher = watch_blocks(&world.stack, epoch, seen.clone());

    let with_tokens = population::run_prologue(world.clone(), &ids, &mut rng).await;
    eprintln!(
        "  the earlier day: {returning} returning users wrote a record, {with_tokens} hold tokens"
    );
    // The earlier day's tokens are ripe when the day starts.
    tokio::time::sleep(Duration::from_millis(scenario.token_min_age_ms + 500)).await;
    eprintln!(
        "  the simulated day: {} users, {} s",
        scenario.users,
        scenario.day.as_secs()
    );
    population::run_day(world.clone(), people, Instant::now()).await;
    // The day's last batches land before the active phases start.
    tokio::time::sleep(Duration::from_millis(scenario.max_wait_ms + 3_000)).await;
    let day_end = ms_since(epoch, Instant::now());
    let mut outcomes = active::run_phases(&world, &mut rng).await;
    // Let the last batches land.
    tokio::time::sleep(Duration::from_millis(scenario.max_wait_ms + 3_000)).await;
    // The ledger as it stands before the cover-drift phase, which expires every record of an
    // hour.
    let block_seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let ledger = ledger_view::read(&world.stack.devnet().url(), scenario::APP, block_seen).await?;
    if scenario.active.cover_drift {
        active::run_cover_drift(&world, &mut rng, &mut outcomes).await;
    }
    watcher.abort();
    drop(run_dir);

    let mut views = Views::from_stack(&world.stack, epoch, ledger);
    views.issuer = Some("A".into());
    let truth = world
        .truth
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let known = attacks::Known {
        min_age_ms: scenario.token_min_age_ms,
        delay_ms_max: scenario.delay_ms_max,
        tail_min_ms: population::lab_schedule(&scenario).tail.0.as_millis() as u64,
        max_wait_ms: scenario.max_wait_ms,
    };
    let mut attacks = attacks::passive(&views.until(day_end), &truth, known, scenario.seed);
    attacks.extend(attacks::active(&views, &truth, &outcomes));
    let population = PopulationFigures {
        sessions: truth.sessions.len(),
        failed_sessions: truth.sessions.iter().filter(|s| s.error.is_some()).count(),
        written: truth.writes.iter().filter(|w| w.outcome.is_ok()).count(),
        failed_writes: truth.writes.iter().filter(|w| w.outcome.is_err()).count(),
        write_errors: truth
            .writes
            .iter()
            .filter_map(|w| w.outcome.as_ref().err())
            .fold(std::collections::BTreeMap::new(), |mut m, e| {
                *m.entry(e.clone()).or_default() += 1;
                m
            }),
        scans: truth.scans.len(),
        rpc_calls: views.rpc.len(),
        relay_requests: views.relay.len(),
        relayer_requests: views.relayers.values().map(Vec::len).sum(),
        stores_outside_run: world
            .stores_outside_run
            .load(std::sync::atomic::Ordering::Relaxed),
        ..devices
    };
    let costs = costs(&views.until(day_end), &truth, epoch, day_end);
    if let Ok(world) = Arc::try_unwrap(world) {
        world.stack.shutdown().await;
    }
    Ok(LabReport {
        scenario,
        attacks,
        population,
        costs,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// What the day cost: write latency, relay bytes and requests per session, ledger records per
/// write (see [`report::Costs`]).
fn costs(views: &Views, truth: &Truth, epoch: Instant, day_end: f64) -> report::Costs {
    let of_day = |at: Instant| ms_since(epoch, at) <= day_end;
    let writes: Vec<_> = truth
        .writes
        .iter()
        .filter(|w| w.outcome.is_ok() && of_day(w.requested))
        .collect();
    let mut latency: Vec<f64> = writes
        .iter()
        .map(|w| {
            w.resolved
                .saturating_duration_since(w.requested)
                .as_secs_f64()
                * 1000.0
        })
        .collect();
    latency.sort_by(f64::total_cmp);
    let quantile = |q: f64| -> f64 {
        if latency.is_empty() {
            return 0.0;
        }
        let i = ((latency.len() - 1) as f64 * q).round() as usize;
        latency[i.min(latency.len() - 1)]
    };
    let session_minutes: f64 = truth
        .sessions
        .iter()
        .filter(|s| of_day(s.started))
        .map(|s| s.ended.saturating_duration_since(s.started).as_secs_f64() / 60.0)
        .sum();
    let relay: Vec<_> = views
        .relay
        .iter()
        .filter(|r| !r.injected && r.at <= day_end)
        .collect();
    let bytes: usize = relay
        .iter()
        .map(|r| r.request_bytes + r.response_bytes)
        .sum();
    // The day's records: those of blocks that appeared before its end.
    let day_records = views
        .ledger
        .records
        .iter()
        .filter(|r| views.ledger.time_of(r.block).is_some_and(|t| t <= day_end))
        .count();
    let per_minute = |x: f64| {
        if session_minutes > 0.0 {
            x / session_minutes
        } else {
            0.0
        }
    };
    let (idle, writing) = bytes_by_session_kind(&relay, truth, epoch, day_end);
    // The gas of the day's batch transactions (decoys and spends updates included).
    let day_gas: u64 = views
        .ledger
        .batch_order
        .keys()
        .filter(|(block, _, _)| views.ledger.time_of(*block).is_some_and(|t| t <= day_end))
        .map(|(_, _, tx)| *tx)
        .collect::<std::collections::BTreeSet<_>>()
        .iter()
        .filter_map(|tx| views.ledger.batch_gas.get(tx))
        .sum();
    report::Costs {
        write_median_ms: quantile(0.5),
        write_p95_ms: quantile(0.95),
        relay_bytes_per_session_minute: per_minute(bytes as f64),
        relay_requests_per_s_per_1000_sessions: per_minute(relay.len() as f64) / 60.0 * 1000.0,
        ledger_records_per_write: if !writes.is_empty() {
            day_records as f64 / writes.len() as f64
        } else {
            0.0
        },
        relay_bytes_per_idle_session_minute: idle,
        relay_bytes_per_writing_session_minute: writing,
        gas_per_1000_writes: if !writes.is_empty() {
            day_gas as f64 * 1000.0 / writes.len() as f64
        } else {
            0.0
        },
    }
}

/// Relay bytes a session-minute while no write is under way and while one is (from
/// `createEntity` to its result), `(idle, writing)`: a relay request belongs to the session open
/// at its source address then.
fn bytes_by_session_kind(
    relay: &[&views::RelayRequest],
    truth: &Truth,
    epoch: Instant,
    day_end: f64,
) -> (f64, f64) {
    let mut bytes = [0usize; 2];
    let mut minutes = [0f64; 2];
    for (i, s) in truth.sessions.iter().enumerate() {
        let (from, to) = (ms_since(epoch, s.started), ms_since(epoch, s.ended));
        if from > day_end {
            continue;
        }
        // The session's writing spans, merged.
        let mut spans: Vec<(f64, f64)> = truth
            .writes
            .iter()
            .filter(|w| w.session == i)
            .map(|w| {
                (
                    ms_since(epoch, w.requested).max(from),
                    ms_since(epoch, w.resolved).min(to),
                )
            })
            .filter(|(a, b)| a < b)
            .collect();
        spans.sort_by(|x, y| x.0.total_cmp(&y.0));
        let mut merged: Vec<(f64, f64)> = Vec::new();
        for (a, b) in spans {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let writing_ms: f64 = merged.iter().map(|(a, b)| b - a).sum();
        minutes[1] += writing_ms / 60_000.0;
        minutes[0] += ((to - from) - writing_ms).max(0.0) / 60_000.0;
        for r in relay
            .iter()
            .filter(|r| r.source == s.ip && r.at >= from && r.at <= to)
        {
            let kind = usize::from(merged.iter().any(|(a, b)| r.at >= *a && r.at <= *b));
            bytes[kind] += r.request_bytes + r.response_bytes;
        }
    }
    let rate = |k: usize| {
        if minutes[k] > 0.0 {
            bytes[k] as f64 / minutes[k]
        } else {
            0.0
        }
    };
    (rate(0), rate(1))
}

#[cfg(test)]
mod tests {
    /// Two runs at once (the lab's two tests, one process, one seed) keep their devices apart.
    #[test]
    fn runs_at_once_keep_their_devices_in_directories_of_their_own() {
        let (a, b) = (super::run_dir().unwrap(), super::run_dir().unwrap());
        assert_ne!(a.path(), b.path());
        let (a_path, b_path) = (a.path().to_path_buf(), b.path().to_path_buf());
        drop(a);
        assert!(
            !a_path.exists(),
            "a run's directory is removed when it ends"
        );
        assert!(b_path.is_dir(), "the other run's directory stays");
    }
}
