//! `InProcessTransport`: relayer calls answered by axum routers in the same process (tests,
//! single-binary demos). No socket is involved.

use std::collections::HashMap;
use std::sync::RwLock;

use async_trait::async_trait;
use axum::Router;

use crate::client::to_binary_request;
use crate::endpoint::dispatch;
use crate::transport::{RelayerRequest, RelayerResponse, Transport, TransportError};
use crate::OhttpError;
use privsvc_rt::{normalize_relayer_url, RelayerUrl};

/// Maps relayer URLs to routers and calls them with `tower::ServiceExt::oneshot`.
///
/// ```
/// # tokio_test_block_on(async {
/// use axum::{routing::get, Router};
/// use privsvc_ohttp::{InProcessTransport, RelayerRequest, Transport};
///
/// let transport = InProcessTransport::new()
///     .with_router("http://relayer.test", Router::new().route("/v1/info", get(|| async { "{}" })))
///     .unwrap();
/// let request = RelayerRequest { method: "GET".into(), path: "/v1/info".into(), body: None };
/// let answer = transport.send("http://relayer.test", request).await.unwrap();
/// assert_eq!((answer.status, answer.body.as_slice()), (200, &b"{}"[..]));
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Default)]
pub struct InProcessTransport {
    routers: RwLock<HashMap<String, Router>>,
}

impl std::fmt::Debug for InProcessTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let routers = self.routers.read().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("InProcessTransport")
            .field("relayers", &routers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl InProcessTransport {
    /// An empty transport.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builder form of [`InProcessTransport::insert`].
    pub fn with_router(self, relayer_url: &str, router: Router) -> Result<Self, OhttpError> {
        self.insert(relayer_url, router)?;
        Ok(self)
    }

    /// Serve `relayer_url` with `router` (replacing any previous one).
    pub fn insert(&self, relayer_url: &str, router: Router) -> Result<(), OhttpError> {
        let url = normalize_relayer_url(relayer_url)?;
        self.routers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(url, router);
        Ok(())
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl Transport for InProcessTransport {
    async fn send(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, TransportError> {
        let url = RelayerUrl::parse(relayer_url)?;
        let router = self
            .routers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(url.as_str())
            .cloned()
            .ok_or_else(|| TransportError::Carrier(Box::new(OhttpError::UnknownRelayer(url))))?;
        if !request.path.starts_with('/') {
            return Err(privsvc_rt::RequestError::RelativePath.into());
        }
        let (status, _headers, body, _) =
            dispatch(&router, to_binary_request(&request), false).await;
        Ok(RelayerResponse { status, body })
    }
}
