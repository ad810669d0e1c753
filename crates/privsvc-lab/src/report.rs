//! The lab's report: the scenario, the table of attacks, and what to do with it.

use std::fmt::Write as _;

use crate::attacks::AttackResult;
use crate::scenario::Scenario;
use crate::stats::Verdict;

/// What a lab run found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LabReport {
    /// The scenario.
    pub scenario: Scenario,
    /// Every attack's result.
    pub attacks: Vec<AttackResult>,
    /// Records written, writes failed, sessions, scans.
    pub population: PopulationFigures,
    /// What the defences cost: latency, bytes, relay load, ledger records.
    pub costs: Costs,
    /// Wall time of the run, seconds.
    pub seconds: f64,
}

/// What a run's settings cost the population and the servers (docs/PRIVACY.md "What a network
/// watcher sees"), over the simulated day.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Costs {
    /// Median time from `create_entity` to `written`, ms.
    pub write_median_ms: f64,
    /// 95th percentile of the same, ms.
    pub write_p95_ms: f64,
    /// Bytes through the OHTTP relay (requests and answers) per session-minute, over every
    /// session of the day.
    pub relay_bytes_per_session_minute: f64,
    /// Relay requests a second per 1,000 open sessions.
    pub relay_requests_per_s_per_1000_sessions: f64,
    /// Records of the app on the ledger per record a user wrote (decoys raise it above 1).
    pub ledger_records_per_write: f64,
    /// Relay bytes a session-minute while no write of the session is under way.
    pub relay_bytes_per_idle_session_minute: f64,
    /// Relay bytes a session-minute while a write of the session is under way (from
    /// `create_entity` to its result).
    pub relay_bytes_per_writing_session_minute: f64,
    /// Gas of the day's batch transactions per 1,000 records users wrote (decoys and spends
    /// updates included).
    pub gas_per_1000_writes: f64,
}

impl Costs {
    /// One line for the summary.
    pub fn line(&self) -> String {
        format!(
            "costs: write latency median {:.0} ms, p95 {:.0} ms; relay {:.0} bytes a \
             session-minute ({:.0} idle, {:.0} writing), {:.1} requests/s per 1,000 sessions; \
             {:.2} ledger records and {:.0} gas a write",
            self.write_median_ms,
            self.write_p95_ms,
            self.relay_bytes_per_session_minute,
            self.relay_bytes_per_idle_session_minute,
            self.relay_bytes_per_writing_session_minute,
            self.relay_requests_per_s_per_1000_sessions,
            self.ledger_records_per_write,
            self.gas_per_1000_writes / 1000.0
        )
    }
}

/// What the population did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PopulationFigures {
    /// Sessions started.
    pub sessions: usize,
    /// Sessions whose client could not be built.
    pub failed_sessions: usize,
    /// Records written.
    pub written: usize,
    /// Writes that failed.
    pub failed_writes: usize,
    /// The failed writes' errors, each with how many writes failed with it.
    pub write_errors: std::collections::BTreeMap<String, usize>,
    /// `myEntities` calls.
    pub scans: usize,
    /// Requests each party saw: RPC calls, relay requests, relayer requests.
    pub rpc_calls: usize,
    /// Relay requests.
    pub relay_requests: usize,
    /// Requests the relayers saw.
    pub relayer_requests: usize,
    /// Users on the client's default stores.
    pub default_store_users: usize,
    /// Users whose device also sent from a second address.
    pub roaming_users: usize,
    /// Users with a second device.
    pub second_devices: usize,
    /// Devices whose clock was off.
    pub skewed_clocks: usize,
    /// Users whose app lists without `refresh` when a page opens and after writes.
    pub app_listing_users: usize,
    /// Clients whose device store was outside the run's directory: in the default data
    /// directory, say, which every run of the machine shares (must be 0; `World::build`).
    pub stores_outside_run: usize,
}

impl LabReport {
    /// The attack `id`.
    pub fn attack(&self, id: &str) -> Option<&AttackResult> {
        self.attacks.iter().find(|a| a.id == id)
    }

    /// Attacks that beat chance and are not residuals of the design.
    pub fn open_channels(&self) -> Vec<&AttackResult> {
        self.attacks
            .iter()
            .filter(|a| a.verdict == Verdict::Wins && !a.residual)
            .collect()
    }

    /// The attacks that beat chance at the family-wise level [`crate::stats::ALPHA_FAMILY`]
    /// and are not stated residuals: what the test command and `--check` fail on.
    pub fn open_channels_family(&self) -> Vec<&AttackResult> {
        self.attacks
            .iter()
            .filter(|a| !a.residual && a.measured.beats_chance(crate::stats::ALPHA_FAMILY))
            .collect()
    }

    /// The table in Markdown.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| party | attack | trials | chance | measured (95% CI) | p | verdict |\n|-|-|-|-|-|-|-|"
        );
        for a in &self.attacks {
            let m = &a.measured;
            let verdict = match (a.verdict, a.residual) {
                (Verdict::NoData, _) => "no data".to_string(),
                (Verdict::AtChance, _) => "at chance".to_string(),
                (Verdict::Wins, true) => "**wins** (residual)".to_string(),
                (Verdict::Wins, false) => "**WINS**".to_string(),
            };
            let _ = writeln!(
                out,
                "| {} | {} (`{}`) | {} | {:.3} | {:.3} ({:.3}-{:.3}) | {:.2e} | {} |",
                a.party,
                a.attack,
                a.id,
                m.trials,
                m.chance,
                m.rate,
                m.low,
                m.high,
                m.p_value,
                verdict
            );
        }
        out
    }

    /// The scenario and population in a few lines.
    pub fn summary(&self) -> String {
        let s = &self.scenario;
        let p = &self.population;
        format!(
            "seed {}, {} users ({:.0}% returning with tokens, at most {} sessions of at most {} \
             writes), day {} s, blocks {} ms, \
             MIN_BATCH {}, MAX_WAIT_MS {}, token min age {} ms, delay 0-{} ms, leaks {:?}\n\
             {} sessions ({} failed to start), {} records written, {} writes failed, {} scans; \
             seen: {} RPC calls, {} relay requests, {} relayer requests; {:.0} s\n\
             users: {} on the default stores, {} from two addresses, {} with a second device, \
             {} listing without refresh; {} devices with a clock off",
            s.seed,
            s.users,
            s.returning_share * 100.0,
            s.max_sessions,
            s.max_writes,
            s.day.as_secs(),
            s.block_time.as_millis(),
            s.min_batch,
            s.max_wait_ms,
            s.token_min_age_ms,
            s.delay_ms_max,
            s.leaks,
            p.sessions,
            p.failed_sessions,
            p.written,
            p.failed_writes,
            p.scans,
            p.rpc_calls,
            p.relay_requests,
            p.relayer_requests,
            self.seconds,
            p.default_store_users,
            p.roaming_users,
            p.second_devices,
            p.app_listing_users,
            p.skewed_clocks
        ) + &format!(
            "\ndefences: ROUND_MS {}, cover {}/min, DECOYS_MAX {}, submission class {}\n{}",
            s.defences.round_ms,
            s.defences.cover_per_minute,
            s.defences.decoys_max,
            if s.leaks.small_submissions {
                "off"
            } else {
                "on"
            },
            self.costs.line()
        ) + &if p.stores_outside_run > 0 {
            format!(
                "\n{} client(s) kept their device store outside the run's directory",
                p.stores_outside_run
            )
        } else {
            String::new()
        } + &p
            .write_errors
            .iter()
            .map(|(e, n)| format!("\n  {n} write(s) failed with: {e}"))
            .collect::<String>()
    }
}
