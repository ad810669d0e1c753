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

/// Wait `duration` in a background task: like [`sleep`], but in Node.js the timer does not keep
/// the process alive (it is `unref`'d), so a session's schedule never holds a script open.
/// Natively it is [`sleep`].
pub async fn sleep_background(duration: Duration) {
    #[cfg(not(target_arch = "wasm32"))]
    tokio::time::sleep(duration).await;
    #[cfg(target_arch = "wasm32")]
    unref::sleep(duration).await;
}

#[cfg(target_arch = "wasm32")]
mod unref {
    use std::time::Duration;

    use wasm_bindgen::prelude::*;
    use wasm_bindgen::JsCast;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(js_name = setTimeout)]
        fn set_timeout(handler: &js_sys::Function, ms: f64) -> JsValue;
    }

    /// `setTimeout`, then `unref()` on the handle where it has one (Node.js).
    pub(super) async fn sleep(duration: Duration) {
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let callback = Closure::once_into_js(move || {
            let _ = tx.send(());
        });
        let handle = set_timeout(callback.unchecked_ref(), duration.as_millis() as f64);
        if let Ok(unref) = js_sys::Reflect::get(&handle, &JsValue::from_str("unref")) {
            if let Some(f) = unref.dyn_ref::<js_sys::Function>() {
                let _ = f.call0(&handle);
            }
        }
        let _ = rx.await;
    }
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
