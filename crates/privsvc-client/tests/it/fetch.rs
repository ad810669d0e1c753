//! The client's `fetch` (docs/API.md §2.2: relayer and issuer calls): every relayer and issuer
//! call goes through the HTTP stack the caller gives, directly and through the OHTTP relay, and
//! none goes around it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use privsvc_client::PrivsvcError;
use privsvc_ohttp::{Fetch, FetchRequest, FetchResponse, HttpError, ReqwestFetch};
use privsvc_vault::LocalWallet;

use crate::common::*;

/// Passes requests to reqwest and writes down each one's method and URL, or refuses them all.
struct Recording {
    inner: ReqwestFetch,
    refuse: bool,
    seen: Mutex<Vec<(String, String)>>,
}

impl Recording {
    fn new(refuse: bool) -> Arc<Self> {
        Arc::new(Recording {
            inner: ReqwestFetch::new(Duration::from_secs(10)).unwrap(),
            refuse,
            seen: Mutex::new(Vec::new()),
        })
    }

    fn seen(&self) -> Vec<(String, String)> {
        self.seen.lock().unwrap().clone()
    }

    fn count(&self, method: &str, url: &str) -> usize {
        self.seen()
            .iter()
            .filter(|(m, u)| m == method && u == url)
            .count()
    }
}

#[async_trait]
impl Fetch for Recording {
    async fn fetch(
        &self,
        request: FetchRequest,
        timeout: Duration,
        max_body: usize,
    ) -> Result<FetchResponse, HttpError> {
        self.seen
            .lock()
            .unwrap()
            .push((request.method.clone(), request.url.clone()));
        if self.refuse {
            return Err(HttpError::Request("refused by the test's fetch".into()));
        }
        self.inner.fetch(request, timeout, max_body).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_relayer_and_issuer_calls_go_through_the_given_fetch() {
    let stack = Stack::start(StackOptions {
        ohttp: false,
        ..StackOptions::default()
    })
    .await;
    let fetch = Recording::new(false);
    let wallet = Arc::new(LocalWallet::random());
    let client = stack
        .builder(&wallet)
        .fetch(fetch.clone())
        .build()
        .await
        .expect("client builds with its own fetch");
    assert_eq!(client.relayers().len(), 2);
    for url in [&stack.a_url, &stack.b_url] {
        assert_eq!(fetch.count("GET", &format!("{url}/v1/info")), 1, "{url}");
    }
    ready(&client).await;

    let r = client
        .create_entity(note("through my fetch"))
        .await
        .unwrap();
    // The token came from relayer A's issuer, asked through the fetch.
    assert!(
        fetch.count("POST", &format!("{}/v1/tokens/issue", stack.a_url)) >= 1,
        "{:?}",
        fetch.seen()
    );
    assert_eq!(fetch.count("POST", &format!("{}/v1/records", r.relayer)), 1);
    assert!(fetch
        .seen()
        .iter()
        .any(|(m, u)| m == "GET" && u.starts_with(&format!("{}/v1/records/", r.relayer))));
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relayed_calls_go_through_the_given_fetch_and_a_refusing_fetch_reaches_no_one() {
    let stack = Stack::start(StackOptions::default()).await;
    let relay = stack.relay_url.clone().unwrap();
    let fetch = Recording::new(false);
    let wallet = Arc::new(LocalWallet::random());
    let before = stack.relayed();
    let client = stack
        .builder(&wallet)
        .fetch(fetch.clone())
        .build()
        .await
        .unwrap();
    ready(&client).await;
    client.create_entity(note("relayed")).await.unwrap();
    // Every call went to the relay, and every relayed call was one of the fetch's.
    let seen = fetch.seen();
    assert!(seen.len() >= 4, "{seen:?}");
    assert!(
        seen.iter()
            .all(|(m, u)| m == "POST" && u == &format!("{relay}/ohttp")),
        "{seen:?}"
    );
    assert_eq!(stack.relayed() - before, seen.len() as u64);

    // A fetch that refuses everything: the relayers are up, but the client reaches none.
    let refusing = Recording::new(true);
    let err = stack
        .builder(&Arc::new(LocalWallet::random()))
        .fetch(refusing.clone())
        .build()
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(err, PrivsvcError::NoRelayerAvailable { .. }),
        "{err:?}"
    );
    assert!(!refusing.seen().is_empty());
    stack.shutdown().await;
}
