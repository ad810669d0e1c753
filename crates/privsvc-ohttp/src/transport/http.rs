//! `HttpTransport`: plain HTTPS (or HTTP) calls straight to the relayer.

use std::sync::Arc;

use async_trait::async_trait;
use privsvc_rt::http::{Fetch, FetchRequest, ReqwestFetch};

use crate::http_util::normalize_relayer_url;
use crate::transport::{RelayerRequest, RelayerResponse, Transport};
use crate::{OhttpError, CALL_TIMEOUT, MAX_RESPONSE_BYTES};

/// Calls relayers directly (by default with reqwest and rustls). The relayer sees the client's
/// address; use [`crate::OhttpTransport`] to hide it.
#[derive(Clone)]
pub struct HttpTransport {
    fetch: Arc<dyn Fetch>,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpTransport")
    }
}

impl HttpTransport {
    /// A transport with its own client (30 s time limit per call, no redirects).
    pub fn new() -> Result<Self, OhttpError> {
        Ok(Self::with_fetch(Arc::new(ReqwestFetch::new(CALL_TIMEOUT)?)))
    }

    /// A transport using `client` (shares its connection pool).
    pub fn with_client(client: reqwest::Client) -> Self {
        Self::with_fetch(Arc::new(ReqwestFetch::with_client(client)))
    }

    /// A transport that sends every call with `fetch` (a host's own HTTP stack).
    pub fn with_fetch(fetch: Arc<dyn Fetch>) -> Self {
        Self { fetch }
    }
}

/// Build, send and read one direct relayer call.
pub(crate) async fn send_direct(
    fetch: &dyn Fetch,
    relayer_url: &str,
    request: &RelayerRequest,
) -> Result<RelayerResponse, OhttpError> {
    let base = normalize_relayer_url(relayer_url)?;
    if !request.path.starts_with('/') {
        return Err(OhttpError::InvalidUrl(request.path.clone()));
    }
    let method = request.method.to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(OhttpError::Transport(format!(
            "invalid method {:?}",
            request.method
        )));
    }
    let mut headers = vec![("accept".to_string(), "application/json".to_string())];
    if request.body.is_some() {
        headers.push(("content-type".into(), "application/json".into()));
    }
    let answer = fetch
        .fetch(
            FetchRequest {
                method,
                url: format!("{base}{}", request.path),
                headers,
                body: request.body.clone(),
            },
            CALL_TIMEOUT,
            MAX_RESPONSE_BYTES,
        )
        .await?;
    Ok(RelayerResponse {
        status: answer.status,
        body: answer.body,
    })
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl Transport for HttpTransport {
    async fn send(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, OhttpError> {
        send_direct(self.fetch.as_ref(), relayer_url, &request).await
    }
}
