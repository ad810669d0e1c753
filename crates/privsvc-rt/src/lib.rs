//! The few runtime services the privsvc client needs, in one place: timers ([`sleep`],
//! [`timeout`]), background tasks ([`spawn`]), the clock ([`Instant`], [`now_unix_ms`]),
//! randomness ([`fill_random`]), bounded HTTP without redirects ([`send`], [`Fetch`]) and the
//! relayer transports ([`Transport`]).
//!
//! Natively they are tokio's (a current-thread or multi-thread runtime must be running, as
//! before). In `wasm32-unknown-unknown` they are the host's event loop: tasks run with
//! `wasm-bindgen-futures`, timers are `setTimeout` (through `gloo-timers`, which works in pages,
//! workers and Node.js alike), the clock is `performance.now()`/`Date.now()` (through `web-time`)
//! and randomness is `crypto.getRandomValues` (getrandom's web backend).
//!
//! Every async trait of the client crates is `?Send` in wasm32 (the host's futures are not
//! `Send`; there is one thread), and `Send` natively, as it always was. Their supertraits are
//! [`MaybeSend`] + [`MaybeSync`]: `Send + Sync` natively, nothing in wasm32, so that a wallet,
//! vault or store backed by JavaScript objects can implement them there.
#![forbid(unsafe_code)]

mod http;
mod task;
mod time;
mod transport;

pub use http::{
    client, read_body, send, Fetch, FetchRequest, FetchResponse, HttpError, ReqwestFetch,
};
pub use task::{abort_handle, spawn, AbortHandle, JoinError, JoinHandle};
pub use time::{
    now_unix_ms, sleep, sleep_background, timeout, Elapsed, Instant, SystemTime, UNIX_EPOCH,
};
pub use transport::{
    normalize_relayer_url, HttpTransport, RelayerRequest, RelayerResponse, RelayerUrl,
    RequestError, Transport, TransportError, UrlError, CALL_TIMEOUT, MAX_ANSWER_BYTES,
};

/// `Send` natively; every type in wasm32 (one thread; JavaScript values are not `Send`).
#[cfg(not(target_arch = "wasm32"))]
pub trait MaybeSend: Send {}
#[cfg(not(target_arch = "wasm32"))]
impl<T: Send + ?Sized> MaybeSend for T {}

/// `Sync` natively; every type in wasm32 (one thread; JavaScript values are not `Sync`).
#[cfg(not(target_arch = "wasm32"))]
pub trait MaybeSync: Sync {}
#[cfg(not(target_arch = "wasm32"))]
impl<T: Sync + ?Sized> MaybeSync for T {}

/// `Send` natively; every type in wasm32 (one thread; JavaScript values are not `Send`).
#[cfg(target_arch = "wasm32")]
pub trait MaybeSend {}
#[cfg(target_arch = "wasm32")]
impl<T: ?Sized> MaybeSend for T {}

/// `Sync` natively; every type in wasm32 (one thread; JavaScript values are not `Sync`).
#[cfg(target_arch = "wasm32")]
pub trait MaybeSync {}
#[cfg(target_arch = "wasm32")]
impl<T: ?Sized> MaybeSync for T {}

/// Fill `buf` with bytes from the operating system's (or the browser's) secure generator.
pub fn fill_random(buf: &mut [u8]) {
    use rand::RngCore;
    rand::rngs::OsRng.fill_bytes(buf);
}
