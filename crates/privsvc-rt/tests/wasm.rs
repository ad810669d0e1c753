//! The wasm32 backends, run in Node.js by `scripts/wasm-check.sh`
//! (`wasm-bindgen-test-runner`): timers are `setTimeout`, tasks run on the event loop, the
//! clocks and the random generator are the host's. Natively this file is empty (the same
//! functions are tested on tokio in the crate's unit tests).
#![cfg(target_arch = "wasm32")]

use std::time::Duration;

use privsvc_rt::{fill_random, now_unix_ms, sleep, spawn, timeout, Elapsed, Instant};
use wasm_bindgen_test::wasm_bindgen_test;

#[wasm_bindgen_test]
async fn sleep_waits_on_the_host_timer() {
    let start = Instant::now();
    sleep(Duration::from_millis(40)).await;
    let waited = start.elapsed();
    // Node's timers run on the event loop's cached clock, which can lag `performance.now()` by
    // up to a millisecond: a 40 ms timer may be seen as 39.6 ms.
    assert!(waited >= Duration::from_millis(39), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
}

#[wasm_bindgen_test]
async fn timeout_cuts_a_long_wait_and_passes_a_short_one() {
    let start = Instant::now();
    let late = timeout(Duration::from_millis(20), sleep(Duration::from_secs(60))).await;
    assert_eq!(late, Err(Elapsed));
    assert!(start.elapsed() < Duration::from_secs(5));
    let on_time = timeout(Duration::from_secs(60), async {
        sleep(Duration::from_millis(5)).await;
        7
    })
    .await;
    assert_eq!(on_time, Ok(7));
}

#[wasm_bindgen_test]
async fn a_spawned_task_runs_and_an_aborted_one_gives_no_output() {
    let handle = spawn(async {
        sleep(Duration::from_millis(5)).await;
        40 + 2
    });
    assert_eq!(handle.await.unwrap(), 42);

    let (tx, mut rx) = futures::channel::oneshot::channel::<()>();
    let handle = spawn(async move {
        sleep(Duration::from_millis(200)).await;
        let _ = tx.send(());
    });
    handle.abort();
    assert!(handle.await.is_err(), "an aborted task has no output");
    sleep(Duration::from_millis(300)).await;
    assert_eq!(rx.try_recv(), Err(futures::channel::oneshot::Canceled));
}

#[wasm_bindgen_test]
fn wall_clock_and_randomness_come_from_the_host() {
    // 2024-01-01T00:00:00Z
    assert!(now_unix_ms() > 1_704_067_200_000);
    let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
    fill_random(&mut a);
    fill_random(&mut b);
    assert_ne!(a, [0u8; 32]);
    assert_ne!(a, b);
}

/// Base URL of the small HTTP server `scripts/wasm-check.sh` starts for this test (`/target`
/// answers 200, `/redirect` answers 307 to `/target`, `/silent` never answers).
const TEST_SERVER: Option<&str> = option_env!("PRIVSVC_RT_TEST_SERVER");

#[wasm_bindgen_test]
async fn fetch_is_bounded_and_a_redirected_answer_is_refused() {
    use privsvc_rt::{client, send, HttpError};
    let Some(base) = TEST_SERVER else {
        panic!("build with PRIVSVC_RT_TEST_SERVER set (scripts/wasm-check.sh does)");
    };
    let http = client(Duration::from_secs(5)).unwrap();

    let ok = send(http.get(format!("{base}/target")), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    assert_eq!(ok.text().await.unwrap(), "landed");

    let redirected = send(http.get(format!("{base}/redirect")), Duration::from_secs(5)).await;
    assert!(
        matches!(redirected, Err(HttpError::Redirected)),
        "{redirected:?}"
    );

    let start = Instant::now();
    let silent = send(
        http.get(format!("{base}/silent")),
        Duration::from_millis(300),
    )
    .await;
    assert!(matches!(silent, Err(HttpError::Client(_))), "{silent:?}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}
