//! Clock and timers.

use std::fmt;
use std::future::Future;
use std::time::Duration;

/// A monotonic instant (`std`'s natively, `performance.now()` in wasm32).
pub use web_time::Instant;
/// Wall-clock time (`std`'s natively, `Date.now()` in wasm32).
pub use web_time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch by the wall clock (0 for a clock set before 1970).
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Wait `duration` without blocking the thread (tokio's timer natively, `setTimeout` in wasm32).
pub async fn sleep(duration: Duration) {
    #[cfg(not(target_arch = "wasm32"))]
    tokio::time::sleep(duration).await;
    #[cfg(target_arch = "wasm32")]
    gloo_timers::future::sleep(duration).await;
}

/// The time limit of [`timeout`] passed before the future finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the time limit passed")
    }
}

impl std::error::Error for Elapsed {}

/// Run `fut` for at most `limit`: its output, or [`Elapsed`] (the future is then dropped).
pub async fn timeout<F: Future>(limit: Duration, fut: F) -> Result<F::Output, Elapsed> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        tokio::time::timeout(limit, fut).await.map_err(|_| Elapsed)
    }
    #[cfg(target_arch = "wasm32")]
    {
        use futures::future::{select, Either};
        let fut = std::pin::pin!(fut);
        let timer = std::pin::pin!(sleep(limit));
        match select(fut, timer).await {
            Either::Left((out, _)) => Ok(out),
            Either::Right(((), _)) => Err(Elapsed),
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleep_waits_and_timeout_cuts() {
        let start = Instant::now();
        sleep(Duration::from_millis(30)).await;
        assert!(start.elapsed() >= Duration::from_millis(30));

        let late = timeout(Duration::from_millis(10), sleep(Duration::from_secs(30))).await;
        assert_eq!(late, Err(Elapsed));
        let on_time = timeout(Duration::from_secs(30), async { 7 }).await;
        assert_eq!(on_time, Ok(7));
    }

    #[test]
    fn wall_clock_is_after_2024() {
        // 2024-01-01T00:00:00Z
        assert!(now_unix_ms() > 1_704_067_200_000);
    }
}
