//! The scenario of a lab run: the population, its compressed day, the stack's timings, and the
//! leaks deliberately switched on to show that each attack can win.

use std::time::Duration;

/// The app (key namespace and `project`) of every simulated user.
pub const APP: &str = "lab";

/// Channels that a leaky setting opens on purpose, each the pattern an attack looks for. A lab
/// run with all of them off measures the code as it is; each attack's test turns its own on and
/// asserts that the attack wins there (an attack that cannot win against a leaky client proves
/// nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Leaks {
    /// After each batch fetch, also read the block timestamps of the user's own batches, and
    /// only those (what the client did before revision 3).
    pub timestamps_of_own_blocks: bool,
    /// At session start, ask the RPC for the code at the wallet's address.
    pub wallet_named: bool,
    /// Right after a write resolves, list the project at the RPC.
    pub list_on_landing: bool,
    /// Fetch tokens when a write needs one and spend them once ripe (`allowOnDemand`), with no
    /// scheduled refills.
    pub on_demand_tokens: bool,
    /// No cover batches: a scan fetches only the user's batches.
    pub no_covers: bool,
    /// Status polls stop the moment a record is written (no random tail of polls).
    pub no_poll_tail: bool,
    /// The n-1 relay reads relayer C's exact queue length (its `METRICS_BIND` `/healthz`), as
    /// the public `/healthz` showed it before revision 3.
    pub exact_healthz: bool,
    /// Issuer routes inside `POST /v1/ohttp` from the flooding user's address are not limited
    /// (its address is listed among relayer A's `OHTTP_RELAY_IPS`): before revision 3 no
    /// issuer route reached through `/v1/ohttp` counted against its source.
    pub issuer_unlimited_via_ohttp: bool,
    /// The ratchet phase's victims give a relayer attempt 10 minutes instead of 4 s (the client
    /// before revision 3 kept waiting while the queue position moved).
    pub long_attempts: bool,
    /// A scan's covers are drawn afresh each time among the app's newest batches (what the
    /// client before revision 3 did for a scan with nothing new of the user's) instead of the
    /// client's keyed covers.
    pub fresh_covers: bool,
    /// The key-substitution phase's victims take a relayer's account from the newest heartbeat
    /// naming its URL, from any account (the discovery before revision 3), and pin it.
    pub newest_heartbeat_identity: bool,
    /// After each listing, the copies phase's victims also take every entity that carries the
    /// tag, owner and envelope of one of their records (the client before revision 3 accepted a
    /// copy as the record), fetching its batch to read it.
    pub copies_accepted: bool,
    /// The refusal phase's victims cannot move a refused write (they name the refusing relayer
    /// alone): a 400 ends the write, as it did before revision 3.
    pub refusal_ends_write: bool,
    /// Every relayer writes a batch in the records' arrival order (no shuffle).
    pub arrival_order_kept: bool,
    /// Relayer C (tokens off) has no envelope idempotence, and the replayed-submissions
    /// phase's victims write to it: a replayed submission is written again.
    pub resubmissions_stored_again: bool,
    /// Relayer A's issuer signs a replayed issue request again at the wallet's expense (the
    /// issuer before revision 3 remembered no answer).
    pub issue_replays_signed_again: bool,
    /// Relayer C's planner looks for a batch among its oldest `MAX_BATCH` records only (the
    /// planner before revision 3).
    pub planner_oldest_only: bool,
    /// The returning-sessions phase's victims resume their scan cache from the exact block
    /// their previous session listed (resume granularity 1), not from a coarse boundary.
    pub exact_resume_block: bool,
    /// Right after a write resolves, fetch the batch that holds the record and two other
    /// batches of its window from the user's address (a scan made because a write landed).
    pub fetch_on_landing: bool,
    /// At every scan, also fetch the user's batches with covers fixed by the user's wallet
    /// (the same set from every address and device of the user).
    pub fixed_fetch_sets: bool,
    /// The cover-drift phase's victims also fetch their batch at every scan with covers ranked
    /// by a key of theirs among the batches of its window listed at that moment, whatever their
    /// lifetime (covers that change when their batches expire).
    pub covers_from_live_listing: bool,
    /// Users and devices on the default stores get a fresh in-memory token store (and relayer
    /// pins) in every session, as the client's default was: every session is a first spend,
    /// and a stranger's heartbeat makes a relayer's URL ambiguous for every session.
    pub memory_stores: bool,
    /// List the project from the user's address right before each write.
    pub list_before_write: bool,
    /// Once a session, read relayer A's issuer key from the user's address and at once ask
    /// A's issuer for tokens (a key read one round trip before an issue request).
    pub key_read_before_issue: bool,
    /// Query the ledger for the one-time owner of one of the session's records from the
    /// user's address (as a verification of the user's own record did).
    pub owner_query_on_verify: bool,
    /// The relay-steering phase's victims mark a relayer bad when the relay answers 400
    /// outside the encapsulation to a request for it.
    pub relay_errors_mark_bad: bool,
    /// Devices whose clock is off seal the envelope's `hour` from their own clock, as before
    /// revision 4 (the client's `lab-leaks` switch), instead of from the chain's time.
    pub device_clock_hour: bool,
    /// Every request through the OHTTP relay, submissions included, is padded to the smallest
    /// class that holds it (the ohttp crate's `lab-leaks` switch), as before the submission
    /// class of revision 4: a large record's submission shows its size.
    pub small_submissions: bool,
}

impl Leaks {
    /// Every leak at once.
    pub fn all() -> Self {
        Leaks {
            timestamps_of_own_blocks: true,
            wallet_named: true,
            list_on_landing: true,
            on_demand_tokens: true,
            no_covers: true,
            no_poll_tail: true,
            exact_healthz: true,
            issuer_unlimited_via_ohttp: true,
            long_attempts: true,
            fresh_covers: true,
            newest_heartbeat_identity: true,
            copies_accepted: true,
            refusal_ends_write: true,
            arrival_order_kept: true,
            resubmissions_stored_again: true,
            issue_replays_signed_again: true,
            planner_oldest_only: true,
            exact_resume_block: true,
            fetch_on_landing: true,
            fixed_fetch_sets: true,
            covers_from_live_listing: true,
            memory_stores: true,
            list_before_write: true,
            key_read_before_issue: true,
            owner_query_on_verify: true,
            relay_errors_mark_bad: true,
            device_clock_hour: true,
            small_submissions: true,
        }
    }
}

/// Which active parties act during a run (each in its own phase after the simulated day, on
/// victims of its own, so that one attack does not disturb another's measurement).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Active {
    /// The OHTTP relay replays submissions.
    pub replay_submissions: bool,
    /// The OHTTP relay replays issue requests.
    pub replay_issue_requests: bool,
    /// The OHTTP relay publishes a heartbeat naming a real relayer's URL with its own gateway key.
    pub key_substitution: bool,
    /// The OHTTP relay isolates a submission (n-1) with `/healthz` and filler records.
    pub n_minus_one: bool,
    /// Another user copies records (create and transfer to the owner).
    pub copies: bool,
    /// A relayer answers `queued` with a position that counts down forever.
    pub ratchet: bool,
    /// A relayer answers 400 to every submission.
    pub refusing_relayer: bool,
    /// A user floods a relayer with submissions whose holds can never be met.
    pub head_of_line: bool,
    /// A user with many wallets asks the issuer for tokens through `POST /v1/ohttp` from its
    /// own address, as fast as it can.
    pub issuer_flood: bool,
    /// Victims come back for a second session with their scan cache, from another address; the
    /// RPC (a passive party here: the phase only makes the sessions) tries to link each second
    /// session to the first by its resume block.
    pub returning_sessions: bool,
    /// The OHTTP relay answers 400 outside the encapsulation to a victim's first request for
    /// relayers A and B, so that the victim's writes go to relayer C.
    pub relay_steering: bool,
    /// Another user publishes heartbeats naming relayer A's and B's URLs from its own account
    /// while victims on the default stores start fresh sessions.
    pub heartbeat_spam: bool,
    /// Victims write long-lived records among short-lived ones, scan, and scan again once the
    /// short-lived records expired (the devnet mines past their lifetime); the RPC intersects
    /// the two fetch sets. Runs last: every record of an hour expires there.
    pub cover_drift: bool,
}

impl Default for Active {
    fn default() -> Self {
        Active {
            replay_submissions: true,
            replay_issue_requests: true,
            key_substitution: true,
            n_minus_one: true,
            copies: true,
            ratchet: true,
            refusing_relayer: true,
            head_of_line: true,
            issuer_flood: true,
            returning_sessions: true,
            relay_steering: true,
            heartbeat_spam: true,
            cover_drift: true,
        }
    }
}

impl Active {
    /// No active party.
    pub fn none() -> Self {
        Active {
            replay_submissions: false,
            replay_issue_requests: false,
            key_substitution: false,
            n_minus_one: false,
            copies: false,
            ratchet: false,
            refusing_relayer: false,
            head_of_line: false,
            issuer_flood: false,
            returning_sessions: false,
            relay_steering: false,
            heartbeat_spam: false,
            cover_drift: false,
        }
    }
}

/// Parameters of a lab run. Times are wall-clock: the simulated day is compressed into
/// `day`, and the stack's and clients' timers are scaled to it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Scenario {
    /// Seed of the lab's own choices (who does what, when); the clients' own randomness is
    /// their own.
    pub seed: u64,
    /// Simulated users, each with its own wallet and network address.
    pub users: usize,
    /// Sessions per user, at most (at least 1).
    pub max_sessions: usize,
    /// Writes per session, at most (at least 1).
    pub max_writes: usize,
    /// Fraction of sessions whose writes ask for `minAnonymity` 2 or 3.
    pub k_anonymity_share: f64,
    /// Fraction of writes with a payload large enough for the 4 096-byte envelope.
    pub big_record_share: f64,
    /// Fraction of sessions that make an ownership proof.
    pub prove_share: f64,
    /// Fraction of users who come back holding tokens from an earlier day (fetched by a
    /// session of theirs before the day starts); the others are new wallets, whose first
    /// session's refill is their first issue request.
    pub returning_share: f64,
    /// Fraction of users whose app calls `my_entities` without `refresh` when a page opens and
    /// after each write (re-rendering its list), besides the refresh scans every user makes.
    /// (Each user share is `round(users * share)` users, drawn at random.)
    pub app_list_share: f64,
    /// Fraction of users on the client's default stores: no token store and no scan cache
    /// passed. The others keep a token store and a scan cache across their sessions (as a
    /// browser's persistent storage would).
    pub default_store_share: f64,
    /// Fraction of users with a second device: sessions of the same wallet from another address,
    /// with no scan cache and the default stores.
    pub second_device_share: f64,
    /// Fraction of users whose device also connects from a second address (same stores, same
    /// scan cache): every other session of theirs comes from there.
    pub roaming_share: f64,
    /// Fraction of devices whose clock is off (minutes to hours, either way), where the client
    /// reads it for the envelope's `hour`.
    pub skewed_clock_share: f64,
    /// Fraction of sessions whose app calls `check_rarity` before each write.
    pub rarity_check_share: f64,
    /// Fraction of sessions whose app verifies one of the user's records with the user's own
    /// reader (`verify_record_on_ledger`).
    pub verify_own_share: f64,
    /// Fraction of records written for a day or a week instead of an hour.
    pub long_lived_share: f64,
    /// Length of the simulated day.
    #[serde(with = "millis")]
    pub day: Duration,
    /// Mean think time between two actions of a session.
    #[serde(with = "millis")]
    pub think: Duration,
    /// Devnet block interval.
    #[serde(with = "millis")]
    pub block_time: Duration,
    /// Relayers' `MIN_BATCH`.
    pub min_batch: usize,
    /// Relayers' `MAX_WAIT_MS`.
    pub max_wait_ms: u64,
    /// Clients' token minimum age.
    pub token_min_age_ms: u64,
    /// Clients' random delay before a submission, at most.
    pub delay_ms_max: u64,
    /// Clients' status poll interval.
    #[serde(with = "millis")]
    pub poll: Duration,
    /// The longest status-poll tail after `written` (the client's `status_tail`, drawn from 0
    /// to this), for writes that land after their poll horizon.
    #[serde(with = "millis")]
    pub status_tail_max: Duration,
    /// Victims of each active phase.
    pub victims: usize,
    /// Leaks switched on.
    pub leaks: Leaks,
    /// Active parties.
    pub active: Active,
    /// The network watcher's defences of revision 4 (issue 31's grid).
    pub defences: Defences,
}

/// The settings of the defences against a network watcher (docs/PROTOCOL.md §8.8), the
/// factors of the lab's grid (docs/PRIVACY.md "What a network watcher sees"). The default is
/// the deployment default chosen from that grid: the reference relay's rounds
/// ([`privsvc_ohttp::RECOMMENDED_ROUND_MS`]), no cover stream, no decoys, and the submission
/// class (the protocol's rule; `Leaks::small_submissions` turns it off).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Defences {
    /// The OHTTP relay's `ROUND_MS` (0: forward at once).
    pub round_ms: u64,
    /// The clients' cover stream, slots per minute (0: none).
    pub cover_per_minute: f64,
    /// The relayers' `DECOYS_MAX` (0: no decoys).
    pub decoys_max: usize,
}

impl Default for Defences {
    fn default() -> Self {
        Defences {
            round_ms: privsvc_ohttp::RECOMMENDED_ROUND_MS,
            cover_per_minute: 0.0,
            decoys_max: 0,
        }
    }
}

mod millis {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
}

impl Default for Scenario {
    /// The documented run: 50 users over a 4-minute day.
    fn default() -> Self {
        Scenario {
            seed: 7,
            users: 50,
            max_sessions: 3,
            max_writes: 3,
            k_anonymity_share: 0.25,
            big_record_share: 0.1,
            prove_share: 0.2,
            returning_share: 0.75,
            app_list_share: 0.6,
            default_store_share: 0.2,
            second_device_share: 0.2,
            roaming_share: 0.2,
            skewed_clock_share: 0.2,
            rarity_check_share: 0.3,
            verify_own_share: 0.2,
            long_lived_share: 0.4,
            day: Duration::from_secs(240),
            think: Duration::from_secs(4),
            block_time: Duration::from_millis(1000),
            min_batch: 3,
            max_wait_ms: 4_000,
            token_min_age_ms: 3_000,
            delay_ms_max: 3_000,
            poll: Duration::from_millis(500),
            status_tail_max: Duration::from_secs(6),
            victims: 4,
            leaks: Leaks::default(),
            active: Active::default(),
            defences: Defences::default(),
        }
    }
}

impl Scenario {
    /// The short form of the test command: a fixed seed, 12 users, a 75-second day.
    pub fn short() -> Self {
        Scenario {
            seed: 11,
            users: 12,
            max_sessions: 2,
            max_writes: 2,
            day: Duration::from_secs(75),
            think: Duration::from_secs(3),
            victims: 3,
            ..Scenario::default()
        }
    }
}
