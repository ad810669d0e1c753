//! How a token wallet reaches its issuer: directly over HTTP (never following redirects), or
//! through any other carrier, for example a client's OHTTP relay.

use std::time::Duration;

use async_trait::async_trait;

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

/// Plain HTTP straight to the issuer; redirects are never followed (an answer 3xx is an error
/// status like any other).
#[derive(Debug, Clone)]
pub struct DirectIssuerTransport {
    http: reqwest::Client,
}

impl Default for DirectIssuerTransport {
    fn default() -> Self {
        DirectIssuerTransport {
            http: privsvc_rt::http::client(HTTP_TIMEOUT).unwrap_or_default(),
        }
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
        let url = format!("{}{path}", issuer_url.trim_end_matches('/'));
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| TokenError::Http(format!("bad HTTP method {method:?}")))?;
        let mut req = self.http.request(method, url);
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body);
        }
        let resp = privsvc_rt::http::send(req, HTTP_TIMEOUT)
            .await
            .map_err(|e| TokenError::Http(e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp.bytes().await.map_err(http_error)?.to_vec();
        Ok(IssuerReply { status, body })
    }
}

/// A transport error as `TokenError::Http`, with the URL left out.
fn http_error(e: reqwest::Error) -> TokenError {
    TokenError::Http(e.without_url().to_string())
}
