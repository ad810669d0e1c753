//! The attack lab: a simulated population on the real stack, every party's view recorded from
//! outside, every known linking attack measured (`privsvc_lab`).
//!
//! ```text
//! cargo run --release --features lab --example attack_lab                    # the documented scenario (50 users)
//! cargo run --release --features lab --example attack_lab -- --short         # the test command's short form
//! cargo run --release --features lab --example attack_lab -- --leaks all     # every leak on: each attack must win
//! cargo run --release --features lab --example attack_lab -- --json lab.json # also write the report as JSON
//! ```
//!
//! Prints the scenario, then the table (party, attack, chance, measured, verdict). With `--check`
//! the exit code is 1 when an attack that is not a stated residual beats chance at the
//! family-wise level (`privsvc_lab::stats::ALPHA_FAMILY`, an exact test).

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use privsvc_lab::{Active, Leaks, Scenario};

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "Run every known linking attack against the real privsvc stack")]
struct Args {
    /// The short form of the test command (12 users, a 75-second day, seed 11).
    #[arg(long)]
    short: bool,
    /// Seed of the lab's choices.
    #[arg(long)]
    seed: Option<u64>,
    /// Simulated users.
    #[arg(long)]
    users: Option<usize>,
    /// Length of the compressed day, seconds.
    #[arg(long)]
    day_secs: Option<u64>,
    /// Leaks to switch on: `none`, `all`, or a comma list of timestamps, wallet, landing,
    /// on-demand, no-covers, no-poll-tail, exact-healthz, issuer-via-ohttp, long-attempts,
    /// fresh-covers, newest-heartbeat, copies-accepted, refusal-ends-write, arrival-order,
    /// resubmissions, issue-replays, oldest-only, exact-resume, fetch-on-landing,
    /// fixed-fetch-sets, live-covers, memory-stores, list-before-write, key-read-before-issue,
    /// owner-query, relay-errors, device-clock-hour, small-submissions.
    #[arg(long, default_value = "none")]
    leaks: String,
    /// The OHTTP relay's `ROUND_MS` (the network watcher's grid; default: the reference
    /// relay's 1000).
    #[arg(long)]
    round_ms: Option<u64>,
    /// The clients' cover stream, slots a minute (default 0: none).
    #[arg(long)]
    cover_per_minute: Option<f64>,
    /// The relayers' `DECOYS_MAX` (default 0).
    #[arg(long)]
    decoys: Option<usize>,
    /// The clients' longest status-poll tail after `written`, ms (default 6000: a tenth of
    /// the real 60 s, as the lab's other timers).
    #[arg(long)]
    status_tail_ms: Option<u64>,
    /// Run only the n-1 phases among the active ones (the network watcher's grid).
    #[arg(long)]
    only_n_minus_one: bool,
    /// Skip the active phases.
    #[arg(long)]
    passive_only: bool,
    /// Write the report as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Exit 1 when an attack that is not a residual beats chance.
    #[arg(long)]
    check: bool,
}

fn leaks(text: &str) -> Result<Leaks, String> {
    let mut l = Leaks::default();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part {
            "none" => {}
            "all" => l = Leaks::all(),
            "timestamps" => l.timestamps_of_own_blocks = true,
            "wallet" => l.wallet_named = true,
            "landing" => l.list_on_landing = true,
            "on-demand" => l.on_demand_tokens = true,
            "no-covers" => l.no_covers = true,
            "no-poll-tail" => l.no_poll_tail = true,
            "exact-healthz" => l.exact_healthz = true,
            "issuer-via-ohttp" => l.issuer_unlimited_via_ohttp = true,
            "long-attempts" => l.long_attempts = true,
            "fresh-covers" => l.fresh_covers = true,
            "newest-heartbeat" => l.newest_heartbeat_identity = true,
            "copies-accepted" => l.copies_accepted = true,
            "refusal-ends-write" => l.refusal_ends_write = true,
            "arrival-order" => l.arrival_order_kept = true,
            "resubmissions" => l.resubmissions_stored_again = true,
            "issue-replays" => l.issue_replays_signed_again = true,
            "oldest-only" => l.planner_oldest_only = true,
            "exact-resume" => l.exact_resume_block = true,
            "fetch-on-landing" => l.fetch_on_landing = true,
            "fixed-fetch-sets" => l.fixed_fetch_sets = true,
            "live-covers" => l.covers_from_live_listing = true,
            "memory-stores" => l.memory_stores = true,
            "list-before-write" => l.list_before_write = true,
            "key-read-before-issue" => l.key_read_before_issue = true,
            "owner-query" => l.owner_query_on_verify = true,
            "relay-errors" => l.relay_errors_mark_bad = true,
            "device-clock-hour" => l.device_clock_hour = true,
            "small-submissions" => l.small_submissions = true,
            other => return Err(format!("unknown leak {other:?}")),
        }
    }
    Ok(l)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error".into()),
        )
        .init();
    let mut scenario = if args.short {
        Scenario::short()
    } else {
        Scenario::default()
    };
    if let Some(s) = args.seed {
        scenario.seed = s;
    }
    if let Some(u) = args.users {
        scenario.users = u;
    }
    if let Some(d) = args.day_secs {
        scenario.day = Duration::from_secs(d);
    }
    match leaks(&args.leaks) {
        Ok(l) => scenario.leaks = l,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    }
    if let Some(r) = args.round_ms {
        scenario.defences.round_ms = r;
    }
    if let Some(c) = args.cover_per_minute {
        scenario.defences.cover_per_minute = c;
    }
    if let Some(d) = args.decoys {
        scenario.defences.decoys_max = d;
    }
    if let Some(t) = args.status_tail_ms {
        scenario.status_tail_max = Duration::from_millis(t);
    }
    if args.only_n_minus_one {
        scenario.active = Active {
            n_minus_one: true,
            ..Active::none()
        };
    }
    if args.passive_only {
        scenario.active = Active::none();
    }
    println!("privsvc attack lab: running the population on the local stack...");
    let report = match privsvc_lab::run(scenario).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("the lab could not run: {e}");
            return ExitCode::from(2);
        }
    };
    println!("\n{}\n", report.summary());
    println!("{}", report.table());
    if let Some(path) = &args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => {
                if let Err(e) = std::fs::write(path, text) {
                    eprintln!("cannot write {}: {e}", path.display());
                }
            }
            Err(e) => eprintln!("cannot encode the report: {e}"),
        }
    }
    let open = report.open_channels();
    if open.is_empty() {
        println!("Every attack that is not a stated residual is at chance.");
    } else {
        println!(
            "Open channels: {}",
            open.iter().map(|a| a.id).collect::<Vec<_>>().join(", ")
        );
    }
    let family = report.open_channels_family();
    if args.check && !family.is_empty() {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
