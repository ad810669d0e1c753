//! How a token wallet reaches its issuer: directly over HTTP (never following redirects), or
//! through any other carrier, for example a client's OHTTP relay.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use privsvc_rt::http::{Fetch, FetchRequest, ReqwestFetch};

use crate::error::TokenError;

/// Time limit of one direct HTTP exchange with the issuer.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// An issuer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerReply {
    /// HTTP status code.
    pub status: u16,
    /// Response body.
    pub body: Vec<u8>,
}

/// Carries the wallet's calls to an issuer. Object safe: `Arc<dyn IssuerTransport>`.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait IssuerTransport: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// Send `method` (`GET`, `POST`) for `path` (path and query, starting with `/`) with a JSON
    /// `body` to the issuer at base URL `issuer_url`. A non-2xx status is an `Ok` answer; `Err`
    /// means the issuer could not be reached.
    async fn send(
        &self,
        issuer_url: &str,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<IssuerReply, TokenError>;
}

/// Longest issuer answer read (an issue response of 20 tokens is a few kilobytes).
const MAX_ISSUER_ANSWER_BYTES: usize = 256 * 1024;

/// Plain HTTP straight to the issuer (by default with reqwest); redirects are never followed
/// (an answer 3xx is an error status like any other).
#[derive(Clone)]
pub struct DirectIssuerTransport {
    fetch: Arc<dyn Fetch>,
}

impl std::fmt::Debug for DirectIssuerTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DirectIssuerTransport")
    }
}

impl Default for DirectIssuerTransport {
    fn default() -> Self {
        let fetch = ReqwestFetch::new(HTTP_TIMEOUT)
            .unwrap_or_else(|_| ReqwestFetch::with_client(reqwest::Client::default()));
        DirectIssuerTransport::with_fetch(Arc::new(fetch))
    }
}

impl DirectIssuerTransport {
    /// Calls to the issuer sent with `fetch` (a host's own HTTP stack).
    pub fn with_fetch(fetch: Arc<dyn Fetch>) -> Self {
        DirectIssuerTransport { fetch }
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl IssuerTransport for DirectIssuerTransport {
    async fn send(
        &self,
        issuer_url: &str,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<IssuerReply, TokenError> {
        let mut headers = vec![("accept".to_string(), "application/json".to_string())];
        if body.is_some() {
            headers.push(("content-type".into(), "application/json".into()));
        }
        let request = FetchRequest {
            method: method.to_ascii_uppercase(),
            url: format!("{}{path}", issuer_url.trim_end_matches('/')),
            headers,
            body,
        };
        let answer = self
            .fetch
            .fetch(request, HTTP_TIMEOUT, MAX_ISSUER_ANSWER_BYTES)
            .await
            .map_err(|e| TokenError::Http(e.to_string()))?;
        Ok(IssuerReply {
            status: answer.status,
            body: answer.body,
        })
    }
}
