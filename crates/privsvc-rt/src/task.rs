//! Background tasks.

#[cfg(not(target_arch = "wasm32"))]
use std::future::Future;

/// Handle of a task started with [`spawn`]: awaiting it gives the task's output, or a
/// [`JoinError`] when the task panicked or was aborted. Natively it is tokio's `JoinHandle`.
#[cfg(not(target_arch = "wasm32"))]
pub type JoinHandle<T> = tokio::task::JoinHandle<T>;

/// Why a task gave no output (tokio's `JoinError` natively).
#[cfg(not(target_arch = "wasm32"))]
pub type JoinError = tokio::task::JoinError;

/// Start `fut` in the background on the running tokio runtime.
#[cfg(not(target_arch = "wasm32"))]
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(fut)
}

#[cfg(target_arch = "wasm32")]
pub use wasm::{spawn, JoinError, JoinHandle};

#[cfg(target_arch = "wasm32")]
mod wasm {
    use std::fmt;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use futures::channel::oneshot;
    use futures::future::{AbortHandle, Abortable};

    /// Why a task gave no output: it was aborted (a panic aborts the whole wasm instance).
    #[derive(Debug)]
    pub struct JoinError;

    impl fmt::Display for JoinError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the task was aborted")
        }
    }

    impl std::error::Error for JoinError {}

    /// Handle of a task started with [`spawn`]; awaiting it gives the task's output.
    #[derive(Debug)]
    pub struct JoinHandle<T> {
        output: oneshot::Receiver<T>,
        abort: AbortHandle,
    }

    impl<T> JoinHandle<T> {
        /// Stop the task at its next await point.
        pub fn abort(&self) {
            self.abort.abort();
        }
    }

    impl<T> Future for JoinHandle<T> {
        type Output = Result<T, JoinError>;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            Pin::new(&mut self.output)
                .poll(cx)
                .map(|r| r.map_err(|_| JoinError))
        }
    }

    /// Start `fut` on the host's event loop (`wasm_bindgen_futures::spawn_local`).
    pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let (tx, rx) = oneshot::channel();
        let (abort, registration) = AbortHandle::new_pair();
        wasm_bindgen_futures::spawn_local(async move {
            if let Ok(out) = Abortable::new(fut, registration).await {
                let _ = tx.send(out);
            }
        });
        JoinHandle { output: rx, abort }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn spawned_task_gives_its_output() {
        let handle = spawn(async { 40 + 2 });
        assert_eq!(handle.await.unwrap(), 42);
    }
}
