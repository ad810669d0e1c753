//! The attack lab in the test command (docs/PRIVACY.md).
//!
//! - `the_short_form_finds_no_open_channel`: the short form (seed 11, 12 users, a 75-second day,
//!   every active party) on the code as it is: every attack must have scored guesses, and every
//!   attack that is not a stated residual must stay within chance, so that a change that opens a
//!   channel fails the test command.
//! - `every_passive_attack_wins_when_its_leak_is_on`: the same population with every leak of
//!   `privsvc_lab::Leaks` switched on: each attack must win there. An attack that cannot win
//!   against a leaky client proves nothing.

use std::time::Duration;

use privsvc_lab::{Active, Leaks, Scenario};

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
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_short_form_finds_no_open_channel() {
    let report = privsvc_lab::run(Scenario::short())
        .await
        .expect("the lab runs");
    println!("{}\n\n{}", report.summary(), report.table());
    for id in EVERY_ATTACK {
        let scored = report.attack(id).map_or(0, |a| a.measured.trials);
        assert!(scored > 0, "attack {id} scored no guess");
    }
    let open: Vec<&str> = report.open_channels().iter().map(|a| a.id).collect();
    assert!(
        open.is_empty(),
        "attacks that beat chance and are not stated residuals: {open:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_passive_attack_wins_when_its_leak_is_on() {
    let scenario = Scenario {
        users: 10,
        day: Duration::from_secs(60),
        big_record_share: 0.4,
        leaks: Leaks::all(),
        active: Active::none(),
        ..Scenario::short()
    };
    let report = privsvc_lab::run(scenario).await.expect("the lab runs");
    println!("{}\n\n{}", report.summary(), report.table());
    for id in [
        "issue-to-spend",
        "timestamps",
        "wallet-named",
        "landing-listing",
        "polls-stop-relay",
        "cover-intersection",
        "size-class-relay",
        "onlooker-relayer-timing",
        "issuer-onlooker-wallet",
    ] {
        let a = report
            .attack(id)
            .unwrap_or_else(|| panic!("no result for {id}"));
        assert_eq!(
            a.verdict,
            privsvc_lab::stats::Verdict::Wins,
            "{id} does not win against its leak: {:?}",
            a.measured
        );
    }
}
