//! The attack lab in the test command (docs/PRIVACY.md).
//!
//! - `the_short_form_finds_no_open_channel`: the short form (seed 11, 12 users, a 75-second day,
//!   every active party) on the code as it is: every attack must have scored guesses (an
//!   abstaining one, `attacks::ABSTAINING`, may find no signal to act on), and every
//!   attack that is not a stated residual must stay within chance at the family-wise level
//!   (`stats::ALPHA_FAMILY`, an exact test, so that it holds for the three victims of an
//!   active phase too: thirty-odd attacks are judged at once, so a 95% level alone would fail
//!   most honest runs by luck), so that a change that opens a channel fails the test command.
//! - `every_attack_wins_when_its_leak_is_on`: the same population with every leak of
//!   `privsvc_lab::Leaks` switched on (the client's as the lab's stand-ins around the real
//!   client, the servers' through the relayer's `lab-leaks` feature) and every active party,
//!   24 users for enough guesses: every attack must beat chance there (one-sided at 95%,
//!   `stats::ALPHA_ONE_SIDED_95`), except two residuals no leak drives (`size-class-onlooker`,
//!   `n-minus-one-flood`). Every user counts as returning there, so `first-spend` scores the
//!   spends of the sessions on the default stores alone (fresh memory stores in every session,
//!   `Leaks::memory_stores`) and `issue-to-spend` every other spend. An attack that cannot win
//!   against a leaky setting proves nothing.
//!   Eight attacks are not asserted here. `landing-fetch`, `session-link`, `device-link`,
//!   `rarity-on-demand` and `cover-drift` (revision 4's channels) and `cover-intersection`:
//!   their stand-ins act around a client that now fetches on its own timer, and the client's
//!   own fetches drown them in this short run (measured: each within its interval of chance,
//!   `cover-intersection` on either side of it from run to run). `first-spend`: the stand-in
//!   (memory stores) leaves too few first spends in a 60-second day to separate from chance.
//!   `size-class-relay`: its baseline is one of the batch's writers (the relay knows who sent
//!   to the relayer before a batch landed), and batches of this run have about two writers,
//!   so the size shows little more than that (0.52 against 0.49 with the small-submissions
//!   leak). Each is shown winning on the code before revision 4 instead, in docs/PRIVACY.md's
//!   "Before revision 4" table (the documented 50-user run on that commit).
//!   The Referer and Cookie headers have their leaky control in the Chromium run
//!   (`js/test/browser/chromium.mjs`). `clock-hour` has a test of its own, below.
//! - `clock_hour_wins_when_envelopes_take_the_device_clock`: `clock-hour`'s leaky control, in
//!   days of their own. Its signal is the number of hours a device's clock is off, and only
//!   three numbers pass a relayer (two hours back, one ahead), so how well it links records
//!   depends on how the run's skewed devices fall on those three and on the minute of the hour
//!   (a clock minutes fast is in the next hour only near the hour's end). In the 24-user run
//!   above it had 11 to 16 records to score; a run on 2026-11-30 scored 1 of 11 (p = 0.30)
//!   and failed, and a simulation of that population misses about one run in fifteen. Here the
//!   users write more records a day (up to three sessions of four writes), and the leak must win
//!   in one of two days on fresh stacks (a simulation misses a day in about forty). The test
//!   command runs it after the two forms, not beside the leaky one (scripts/test.sh).

use std::time::Duration;

use privsvc_lab::{Active, Defences, Leaks, Scenario};

/// Attacks of the short form, each of which must score guesses.
const EVERY_ATTACK: &[&str] = &[
    "issue-to-spend",
    "timestamps",
    "wallet-named",
    "landing-listing",
    "polls-stop-relay",
    "polls-stop-onlooker",
    "cover-intersection",
    "arrival-order",
    "onlooker-relayer-timing",
    "issuer-onlooker-wallet",
    "replay-submission",
    "replay-issue",
    "key-substitution",
    "n-minus-one",
    "copies",
    "copy-fetch",
    "ratchet",
    "refusal",
    "head-of-line",
    "issuer-flood",
    "resume-link",
    "landing-fetch",
    "session-link",
    "device-link",
    "cover-drift",
    "first-spend",
    "rarity-on-demand",
    "key-read-to-issue",
    "verify-own",
    "clock-hour",
    "relay-steering",
    "heartbeat-spam",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_short_form_finds_no_open_channel() {
    let report = privsvc_lab::run(Scenario::short())
        .await
        .expect("the lab runs");
    println!("{}\n\n{}", report.summary(), report.table());
    for id in EVERY_ATTACK {
        let Some(a) = report.attack(id) else {
            panic!("attack {id} did not run");
        };
        let abstains = privsvc_lab::attacks::ABSTAINING.contains(id);
        assert!(
            a.measured.trials > 0 || abstains,
            "attack {id} scored no guess"
        );
    }
    assert_eq!(
        report.population.stores_outside_run, 0,
        "every client of the run keeps its stores in the run's own directory"
    );
    let open: Vec<&str> = report.open_channels_family().iter().map(|a| a.id).collect();
    assert!(
        open.is_empty(),
        "attacks that beat chance and are not stated residuals: {open:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attack_wins_when_its_leak_is_on() {
    let scenario = Scenario {
        users: 24,
        day: Duration::from_secs(60),
        big_record_share: 0.4,
        victims: 6,
        // No random send delay: the client before revision 3 spent an on-demand token exactly
        // `minAgeMs` after fetching it, which is what `issue-to-spend` looks for.
        delay_ms_max: 0,
        // Every user is returning: the spends of sessions on a store of their own score in
        // `issue-to-spend`, those of sessions on the default stores in `first-spend`. With the
        // `on_demand_tokens` leak nobody keeps tokens from the earlier day (every store starts
        // empty) and the channel is the write's own on-demand fetch, whoever the wallet is.
        returning_share: 1.0,
        // More devices on the default stores, so that `first-spend` has spends to score.
        default_store_share: 0.4,
        // Every leak but `no_covers`: without covers the user's batches are the whole fetch
        // set, so the covers' attacks (`timestamps`, `cover-intersection`) have nothing to
        // find; `timestamps` wins here on its own leak, `cover-intersection` on the covers
        // drawn afresh for each scan (`fresh_covers`).
        leaks: Leaks {
            no_covers: false,
            ..Leaks::all()
        },
        // Every active party (the default).
        active: Active::default(),
        // The relay forwards at once, as before the watcher's defences: the leaks' stand-ins
        // were made against it.
        defences: Defences {
            round_ms: 0,
            ..Defences::default()
        },
        ..Scenario::short()
    };
    let report = privsvc_lab::run(scenario).await.expect("the lab runs");
    println!("{}\n\n{}", report.summary(), report.table());
    assert_eq!(
        report.population.stores_outside_run, 0,
        "every client of the run keeps its stores in the run's own directory"
    );
    for id in [
        "issue-to-spend",
        "timestamps",
        "wallet-named",
        "landing-listing",
        "polls-stop-relay",
        "polls-stop-onlooker",
        "onlooker-relayer-timing",
        "issuer-onlooker-wallet",
        "n-minus-one",
        "issuer-flood",
        "ratchet",
        "refusal",
        "copies",
        "copy-fetch",
        "key-substitution",
        "arrival-order",
        "replay-submission",
        "replay-issue",
        "head-of-line",
        "resume-link",
        "key-read-to-issue",
        "verify-own",
        "heartbeat-spam",
    ] {
        let a = report
            .attack(id)
            .unwrap_or_else(|| panic!("no result for {id}"));
        assert!(
            a.measured
                .beats_chance(privsvc_lab::stats::ALPHA_ONE_SIDED_95),
            "{id} does not win against its leak: {:?}",
            a.measured
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_hour_wins_when_envelopes_take_the_device_clock() {
    let mut days = Vec::new();
    for seed in [13, 17] {
        let scenario = Scenario {
            seed,
            users: 24,
            max_sessions: 3,
            max_writes: 4,
            day: Duration::from_secs(60),
            // Only the leak under test, and no active party: the day's records are the data.
            leaks: Leaks {
                device_clock_hour: true,
                ..Leaks::default()
            },
            active: Active::none(),
            ..Scenario::short()
        };
        let report = privsvc_lab::run(scenario).await.expect("the lab runs");
        let a = report
            .attack("clock-hour")
            .expect("no result for clock-hour");
        println!("day {seed}: {:?}", a.measured);
        if a.measured
            .beats_chance(privsvc_lab::stats::ALPHA_ONE_SIDED_95)
        {
            return;
        }
        days.push(a.measured);
    }
    panic!("clock-hour does not win against its leak in either day: {days:?}");
}
