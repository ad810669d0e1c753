//! `HttpTransport`: plain HTTPS (or HTTP) calls straight to the relayer.

use async_trait::async_trait;

use crate::http_util::{normalize_relayer_url, read_response};
use crate::transport::{RelayerRequest, RelayerResponse, Transport};
use crate::{OhttpError, CALL_TIMEOUT, MAX_RESPONSE_BYTES};

/// Calls relayers directly with reqwest (rustls). The relayer sees the client's address; use
/// [`crate::OhttpTransport`] to hide it.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    client: reqwest::Client,
}

impl HttpTransport {
    /// A transport with its own client (30 s time limit per call, no redirects).
    pub fn new() -> Result<Self, OhttpError> {
        let client = privsvc_rt::http::client(CALL_TIMEOUT)
            .map_err(|e| OhttpError::Transport(e.to_string()))?;
        Ok(Self { client })
    }

    /// A transport using `client` (shares its connection pool).
    pub fn with_client(client: reqwest::Client) -> Self {
        Self { client }
    }
}

/// Build, send and read one direct relayer call.
pub(crate) async fn send_direct(
    client: &reqwest::Client,
    relayer_url: &str,
    request: &RelayerRequest,
) -> Result<RelayerResponse, OhttpError> {
    let base = normalize_relayer_url(relayer_url)?;
    if !request.path.starts_with('/') {
        return Err(OhttpError::InvalidUrl(request.path.clone()));
    }
    let method = reqwest::Method::from_bytes(request.method.to_ascii_uppercase().as_bytes())
        .map_err(|_| OhttpError::Transport(format!("invalid method {:?}", request.method)))?;
    let mut builder = client
        .request(method, format!("{base}{}", request.path))
        .header(reqwest::header::ACCEPT, "application/json");
    if let Some(body) = &request.body {
        builder = builder
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone());
    }
    let response = privsvc_rt::http::send(builder, CALL_TIMEOUT)
        .await
        .map_err(|e| OhttpError::Transport(e.to_string()))?;
    let status = response.status().as_u16();
    let body = read_response(response, MAX_RESPONSE_BYTES).await?;
    Ok(RelayerResponse { status, body })
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl Transport for HttpTransport {
    async fn send(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, OhttpError> {
        send_direct(&self.client, relayer_url, &request).await
    }
}
