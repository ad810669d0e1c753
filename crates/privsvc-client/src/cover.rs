//! Cover traffic (docs/PROTOCOL.md §8.8): an open session sends a Poisson stream of padded
//! requests through the OHTTP relay to its relayers. Each moment of the stream is a *slot*:
//! the oldest real request waiting (a submission, a status poll, an issue request, an info
//! call) takes it; with none waiting, the slot carries a dummy that the relayer's gateway
//! answers with a padded dummy. An onlooker of the client's link, or the relay, sees the same
//! stream whether or not the user writes: a write changes which slots carry real requests, not
//! when requests leave.
//!
//! [`CoverTransport`] wraps the session's transport; until the session's schedule starts it
//! passes requests straight through (relayers are contacted at session start, itself a public
//! moment), and a transport that cannot send dummies (direct HTTP) is never paced.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use privsvc_ohttp::{RelayerRequest, RelayerResponse, Transport, TransportError};
use rand::Rng;
use tokio::sync::oneshot;

use crate::relayer_api::RelayerStatus;
use crate::rng::ClientRng;

/// The session's transport, with its requests released one per slot of the cover stream once
/// the stream runs.
pub(crate) struct CoverTransport {
    inner: Arc<dyn Transport>,
    /// Requests waiting for a slot, oldest first; `None` while not paced.
    waiting: Mutex<Option<VecDeque<oneshot::Sender<()>>>>,
}

impl CoverTransport {
    /// `inner`, not paced yet.
    pub(crate) fn new(inner: Arc<dyn Transport>) -> Self {
        CoverTransport {
            inner,
            waiting: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<VecDeque<oneshot::Sender<()>>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// From now on every request waits for a slot.
    fn pace(&self) {
        let mut w = self.lock();
        if w.is_none() {
            *w = Some(VecDeque::new());
        }
    }

    /// Gives the slot to the oldest waiting request; `false` when none waits (the slot is a
    /// dummy's).
    fn release_one(&self) -> bool {
        let mut w = self.lock();
        let Some(queue) = w.as_mut() else {
            return false;
        };
        while let Some(tx) = queue.pop_front() {
            // A request whose caller went away does not use the slot.
            if tx.send(()).is_ok() {
                return true;
            }
        }
        false
    }

    /// Waits for a slot when the stream runs.
    async fn slot(&self) {
        let rx = {
            let mut w = self.lock();
            match w.as_mut() {
                None => return,
                Some(queue) => {
                    let (tx, rx) = oneshot::channel();
                    queue.push_back(tx);
                    rx
                }
            }
        };
        // A stream that stopped (the session ended) drops the senders: go on.
        let _ = rx.await;
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
impl Transport for CoverTransport {
    async fn send(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, TransportError> {
        self.slot().await;
        self.inner.send(relayer_url, request).await
    }

    fn uses_gateway_keys(&self) -> bool {
        self.inner.uses_gateway_keys()
    }

    fn bind_relayer(
        &self,
        relayer_url: &str,
        account: alloy_primitives::Address,
        gateway_key: Option<&str>,
    ) -> Result<(), TransportError> {
        self.inner.bind_relayer(relayer_url, account, gateway_key)
    }

    fn sends_dummies(&self) -> bool {
        self.inner.sends_dummies()
    }

    async fn send_dummy(
        &self,
        relayer_url: &str,
        request_class: usize,
    ) -> Result<(), TransportError> {
        self.inner.send_dummy(relayer_url, request_class).await
    }
}

/// The settings of a session's cover stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CoverSettings {
    /// Slots per minute (the Poisson rate); 0: no stream.
    pub(crate) per_minute: f64,
    /// The share of dummies padded to the submission class (the others to the smallest).
    pub(crate) submission_share: f64,
}

/// A wait drawn from the exponential distribution of mean `60 / per_minute` seconds.
fn next_gap(rng: &ClientRng, per_minute: f64) -> Duration {
    let u: f64 = rng.with(|r| r.gen_range(f64::EPSILON..1.0));
    Duration::from_secs_f64((-u.ln() * 60.0 / per_minute).min(86_400.0))
}

/// Runs the cover stream of a session until aborted: at each slot, the oldest waiting request
/// goes, or a dummy to a random relayer of `relayers` (not marked bad).
pub(crate) async fn run(
    transport: Arc<CoverTransport>,
    relayers: Arc<std::sync::Mutex<Vec<RelayerStatus>>>,
    settings: CoverSettings,
    rng: ClientRng,
) {
    if settings.per_minute <= 0.0 || !transport.sends_dummies() {
        return;
    }
    transport.pace();
    let mut next = privsvc_rt::Instant::now() + next_gap(&rng, settings.per_minute);
    loop {
        let now = privsvc_rt::Instant::now();
        if next > now {
            privsvc_rt::sleep_background(next - now).await;
        }
        next += next_gap(&rng, settings.per_minute);
        if transport.release_one() {
            continue;
        }
        let urls: Vec<String> = relayers
            .lock()
            .map(|r| r.iter().filter(|r| !r.bad).map(|r| r.url.clone()).collect())
            .unwrap_or_default();
        let (pick, big) = rng.with(|r| {
            (
                (!urls.is_empty()).then(|| r.gen_range(0..urls.len())),
                r.gen_bool(settings.submission_share.clamp(0.0, 1.0)),
            )
        });
        let Some(i) = pick else { continue };
        let class = if big {
            privsvc_ohttp::SUBMISSION_CLASS
        } else {
            privsvc_ohttp::REQUEST_CLASSES[0]
        };
        let (t, url) = (transport.clone(), urls[i].clone());
        // The dummy's answer is not waited for here: the next slot comes on time.
        drop(privsvc_rt::spawn(async move {
            if let Err(e) = t.send_dummy(&url, class).await {
                tracing::debug!(error = %e, "a cover request failed");
            }
        }));
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    /// Answers every request at once and counts dummies.
    #[derive(Default)]
    struct Counting {
        real: std::sync::atomic::AtomicUsize,
        dummies: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Transport for Counting {
        async fn send(
            &self,
            _: &str,
            _: RelayerRequest,
        ) -> Result<RelayerResponse, TransportError> {
            self.real.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(RelayerResponse {
                status: 200,
                body: Vec::new(),
            })
        }
        fn sends_dummies(&self) -> bool {
            true
        }
        async fn send_dummy(&self, _: &str, _: usize) -> Result<(), TransportError> {
            self.dummies
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        }
    }

    fn relayer() -> RelayerStatus {
        RelayerStatus {
            url: "http://r.example".into(),
            address: alloy_primitives::Address::ZERO,
            bad: false,
            info: serde_json::from_value(serde_json::json!({
                "address": "0x0000000000000000000000000000000000000000",
                "version": crate::protocol::API_VERSION,
                "chainId": 1, "minBatch": 1, "maxWaitMs": 1, "minIntervalBlocks": 1,
                "tokensRequired": false, "maxMinAnonymity": 1, "maxHoldMs": 1,
            }))
            .unwrap(),
        }
    }

    #[tokio::test]
    async fn slots_carry_real_requests_first_and_dummies_otherwise() {
        let inner = Arc::new(Counting::default());
        let t = Arc::new(CoverTransport::new(inner.clone()));
        // Not paced yet: a request goes at once.
        t.send("http://r.example", get()).await.unwrap();
        let stream = tokio::spawn(run(
            t.clone(),
            Arc::new(std::sync::Mutex::new(vec![relayer()])),
            CoverSettings {
                per_minute: 600.0, // a slot every 100 ms on average
                submission_share: 0.5,
            },
            ClientRng::new(Some(1), crate::rng::Purpose::Cover),
        ));
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Paced: five requests take five slots, about half a second.
        let started = std::time::Instant::now();
        let sends: Vec<_> = (0..5)
            .map(|_| {
                let t = t.clone();
                tokio::spawn(async move { t.send("http://r.example", get()).await })
            })
            .collect();
        for s in sends {
            s.await.unwrap().unwrap();
        }
        assert!(started.elapsed() >= Duration::from_millis(100), "not paced");
        let dummies_before = inner.dummies.load(std::sync::atomic::Ordering::SeqCst);
        // With nothing waiting, the slots carry dummies.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let dummies = inner.dummies.load(std::sync::atomic::Ordering::SeqCst) - dummies_before;
        assert!(
            (5..=40).contains(&dummies),
            "{dummies} dummies in 1.5 s at 10/s"
        );
        assert_eq!(inner.real.load(std::sync::atomic::Ordering::SeqCst), 6);
        stream.abort();
    }

    fn get() -> RelayerRequest {
        RelayerRequest {
            method: "GET".into(),
            path: "/v1/info".into(),
            body: None,
        }
    }
}
