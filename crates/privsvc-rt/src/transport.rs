//! The `Transport` trait: how privsvc sends a request to a relayer or to the token issuer a
//! relayer runs, whatever carries it: plain HTTP ([`HttpTransport`], here), every call through
//! an OHTTP relay (`privsvc_ohttp::OhttpTransport`) or axum routers in the same process
//! (`privsvc_ohttp::InProcessTransport`, for tests). A client holds an `Arc<dyn Transport>` for
//! its relayer calls and gives the same one to its token wallet for the issuer's.
//!
//! [`Fetch`] (one HTTP exchange with an absolute URL) is what a transport sends with; a
//! `Transport` is one step above it: a call to a service at a base URL.

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::Address;
use async_trait::async_trait;

use crate::http::{Fetch, FetchRequest, HttpError, ReqwestFetch};

/// Time limit of one direct call ([`HttpTransport`]).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer a direct call reads ([`HttpTransport`]).
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// One request to a relayer (or issuer) endpoint, e.g. `POST /v1/records` with a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayerRequest {
    /// HTTP method, upper case (`GET`, `POST`).
    pub method: String,
    /// Path and query, starting with `/` (e.g. `/v1/records/abc`).
    pub path: String,
    /// Request body (JSON for every relayer endpoint), if any.
    pub body: Option<Vec<u8>>,
}

/// A relayer's (or issuer's) answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayerResponse {
    /// HTTP status code.
    pub status: u16,
    /// Response body.
    pub body: Vec<u8>,
}

/// Why a transport could not deliver a request or bring back its answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// A URL is not an absolute http(s) URL without credentials, query or fragment.
    #[error("invalid URL: {0}; expected an absolute http or https URL")]
    InvalidUrl(#[source] UrlError),
    /// The request cannot be sent as given (a path without a leading `/`, a bad method).
    #[error("invalid request: {0}")]
    InvalidRequest(#[source] RequestError),
    /// The service could not be reached, or its answer not read.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The carrier failed: an OHTTP relay or gateway refused, a gateway key is unknown, an
    /// in-process router is missing. The source is the carrier's own error
    /// (`privsvc_ohttp::OhttpError` for the OHTTP transports).
    #[error(transparent)]
    Carrier(Box<dyn std::error::Error + Send + Sync>),
}

/// What is wrong with a URL that must be an absolute http(s) URL with a host and without
/// credentials, query or fragment ([`RelayerUrl::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// The text is not an absolute URL; the source is the URL parser's error.
    #[error("it is not an absolute URL ({0})")]
    Parse(#[from] url::ParseError),
    /// The scheme is neither `http` nor `https`.
    #[error("its scheme is not http or https")]
    NotHttp,
    /// The URL has no host.
    #[error("it has no host")]
    NoHost,
    /// The URL carries a user name or a password.
    #[error("it carries credentials")]
    Credentials,
    /// The URL has a query.
    #[error("it has a query")]
    Query,
    /// The URL has a fragment.
    #[error("it has a fragment")]
    Fragment,
}

/// Why a [`RelayerRequest`] cannot be sent as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The path does not start with `/`.
    #[error("the path does not start with /")]
    RelativePath,
    /// The method is empty or holds a character other than an ASCII letter.
    #[error("the method is not a word of ASCII letters")]
    InvalidMethod,
}

impl From<UrlError> for TransportError {
    fn from(e: UrlError) -> Self {
        TransportError::InvalidUrl(e)
    }
}

impl From<RequestError> for TransportError {
    fn from(e: RequestError) -> Self {
        TransportError::InvalidRequest(e)
    }
}

/// Sends relayer (and issuer) requests. Object safe: clients hold an `Arc<dyn Transport>`.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait Transport: crate::MaybeSend + crate::MaybeSync {
    /// Send `request` to the service whose base URL is `relayer_url` and return its answer.
    /// A non-2xx status is an `Ok` answer; `Err` means the service could not be reached.
    async fn send(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, TransportError>;

    /// Whether this transport encapsulates requests to the relayers' gateway keys (OHTTP).
    /// Such a transport cannot ask a relayer who it is without a key, so a client finds the
    /// key in the heartbeats of the account that owns the relayer's URL and gives it with
    /// [`Transport::bind_relayer`] before its first call. Default: false.
    fn uses_gateway_keys(&self) -> bool {
        false
    }

    /// `relayer_url` belongs to `account` (docs/PROTOCOL.md §8.6): from now on use
    /// `gateway_key`, the key of that account's newest live heartbeat, or with `None` look the
    /// key up in that account's heartbeats only, never in another account's. Transports
    /// without gateway keys ignore it (the default). A wrapper around another transport should
    /// forward it.
    fn bind_relayer(
        &self,
        relayer_url: &str,
        account: Address,
        gateway_key: Option<&str>,
    ) -> Result<(), TransportError> {
        let _ = (relayer_url, account, gateway_key);
        Ok(())
    }

    /// Whether [`Transport::send_dummy`] sends anything: only a transport whose requests an
    /// onlooker cannot read (OHTTP) has cover traffic. Default: false.
    fn sends_dummies(&self) -> bool {
        false
    }

    /// Sends one dummy (cover traffic) to `relayer_url`: a request padded to at least
    /// `request_class` bytes that the relayer's gateway answers with a padded dummy, so that it
    /// looks like a real request and answer to everyone but the relayer. The default sends
    /// nothing.
    async fn send_dummy(
        &self,
        relayer_url: &str,
        request_class: usize,
    ) -> Result<(), TransportError> {
        let _ = (relayer_url, request_class);
        Ok(())
    }
}

/// The canonical form of a relayer URL: an absolute http(s) URL without credentials, query or
/// fragment, scheme and host in lower case, without a trailing `/` ([`RelayerUrl`]'s text).
///
/// ```
/// use privsvc_rt::normalize_relayer_url;
/// assert_eq!(
///     normalize_relayer_url("HTTPS://Relayer.Example:8443/base/").unwrap(),
///     "https://relayer.example:8443/base"
/// );
/// assert!(normalize_relayer_url("ftp://x").is_err());
/// ```
pub fn normalize_relayer_url(raw: &str) -> Result<String, TransportError> {
    RelayerUrl::parse(raw).map(RelayerUrl::into_string)
}

/// A relayer URL (or an OHTTP relay's, or an issuer's) in canonical form: an absolute http(s)
/// URL with a host, without credentials, query or fragment, scheme and host in lower case,
/// without a trailing `/`. Two spellings of one URL are one `RelayerUrl`.
///
/// ```
/// use privsvc_rt::RelayerUrl;
/// let url = RelayerUrl::parse("HTTPS://Relayer.Example:8443/base/").unwrap();
/// assert_eq!(url, "https://relayer.example:8443/base");
/// assert_eq!(url.to_string(), "https://relayer.example:8443/base");
/// assert!(RelayerUrl::parse("https://user@relayer.example").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelayerUrl(String);

impl RelayerUrl {
    /// `raw` in canonical form; [`TransportError::InvalidUrl`] unless it is an absolute http(s)
    /// URL with a host and without credentials, query or fragment.
    pub fn parse(raw: &str) -> Result<Self, TransportError> {
        let url = url::Url::parse(raw.trim()).map_err(UrlError::Parse)?;
        let problem = if !matches!(url.scheme(), "http" | "https") {
            Some(UrlError::NotHttp)
        } else if url.host_str().is_none() {
            Some(UrlError::NoHost)
        } else if !url.username().is_empty() || url.password().is_some() {
            Some(UrlError::Credentials)
        } else if url.query().is_some() {
            Some(UrlError::Query)
        } else if url.fragment().is_some() {
            Some(UrlError::Fragment)
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(problem.into());
        }
        Ok(RelayerUrl(url.as_str().trim_end_matches('/').to_string()))
    }

    /// The canonical text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The canonical text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::fmt::Display for RelayerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for RelayerUrl {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<RelayerUrl> for String {
    fn from(url: RelayerUrl) -> String {
        url.0
    }
}

impl PartialEq<str> for RelayerUrl {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for RelayerUrl {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for RelayerUrl {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

/// Calls relayers (and their issuer) directly, by default with reqwest and rustls: a URL in
/// canonical form, a path starting with `/`, an upper-case method, JSON in and out, no
/// redirect followed, [`CALL_TIMEOUT`] and [`MAX_ANSWER_BYTES`]. The service sees the
/// caller's address; `privsvc_ohttp::OhttpTransport` hides it.
#[derive(Clone)]
pub struct HttpTransport {
    fetch: Arc<dyn Fetch>,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpTransport")
    }
}

impl Default for HttpTransport {
    /// [`HttpTransport::new`]; should its client fail to build (no TLS backend), a transport
    /// over reqwest's default client.
    fn default() -> Self {
        Self::new().unwrap_or_else(|_| Self::with_client(reqwest::Client::default()))
    }
}

impl HttpTransport {
    /// A transport with its own client ([`CALL_TIMEOUT`] per call, no redirects).
    pub fn new() -> Result<Self, TransportError> {
        Ok(Self::with_fetch(Arc::new(ReqwestFetch::new(CALL_TIMEOUT)?)))
    }

    /// A transport using `client` (shares its connection pool; it should not follow
    /// redirects).
    pub fn with_client(client: reqwest::Client) -> Self {
        Self::with_fetch(Arc::new(ReqwestFetch::with_client(client)))
    }

    /// A transport that sends every call with `fetch` (a host's own HTTP stack).
    pub fn with_fetch(fetch: Arc<dyn Fetch>) -> Self {
        Self { fetch }
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl Transport for HttpTransport {
    async fn send(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, TransportError> {
        let base = normalize_relayer_url(relayer_url)?;
        if !request.path.starts_with('/') {
            return Err(RequestError::RelativePath.into());
        }
        let method = request.method.to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(RequestError::InvalidMethod.into());
        }
        let mut headers = vec![("accept".to_string(), "application/json".to_string())];
        if request.body.is_some() {
            headers.push(("content-type".into(), "application/json".into()));
        }
        let answer = self
            .fetch
            .fetch(
                FetchRequest {
                    method,
                    url: format!("{base}{}", request.path),
                    headers,
                    body: request.body,
                },
                CALL_TIMEOUT,
                MAX_ANSWER_BYTES,
            )
            .await?;
        Ok(RelayerResponse {
            status: answer.status,
            body: answer.body,
        })
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::http::FetchResponse;
    use std::sync::Mutex;

    /// A fetch that records what it was asked and answers 200 `{}`.
    #[derive(Default)]
    struct Recording(Mutex<Vec<FetchRequest>>);

    #[async_trait]
    impl Fetch for Recording {
        async fn fetch(
            &self,
            request: FetchRequest,
            _: Duration,
            _: usize,
        ) -> Result<FetchResponse, HttpError> {
            self.0.lock().unwrap().push(request);
            Ok(FetchResponse {
                status: 200,
                content_type: Some("application/json".into()),
                body: b"{}".to_vec(),
            })
        }
    }

    fn request(method: &str, path: &str, body: Option<&[u8]>) -> RelayerRequest {
        RelayerRequest {
            method: method.into(),
            path: path.into(),
            body: body.map(<[u8]>::to_vec),
        }
    }

    #[tokio::test]
    async fn a_direct_call_goes_to_the_canonical_url_with_json_headers() {
        let fetch = Arc::new(Recording::default());
        let t = HttpTransport::with_fetch(fetch.clone());
        let answer = t
            .send(
                "HTTP://Relayer.Example/base/",
                request("post", "/v1/tokens/issue", Some(b"{}")),
            )
            .await
            .unwrap();
        assert_eq!(answer.status, 200);
        let sent = fetch.0.lock().unwrap().pop().unwrap();
        assert_eq!(sent.method, "POST");
        assert_eq!(sent.url, "http://relayer.example/base/v1/tokens/issue");
        assert!(sent
            .headers
            .contains(&("content-type".into(), "application/json".into())));
    }

    #[tokio::test]
    async fn bad_urls_paths_and_methods_are_refused_before_sending() {
        let fetch = Arc::new(Recording::default());
        let t = HttpTransport::with_fetch(fetch.clone());
        let url_error = |e| Some(TransportError::InvalidUrl(e));
        let request_error = |e| Some(TransportError::InvalidRequest(e));
        for (url, req, want) in [
            (
                "ftp://relayer.example",
                request("GET", "/v1/info", None),
                url_error(UrlError::NotHttp),
            ),
            (
                "https://user:pw@relayer.example",
                request("GET", "/v1/info", None),
                url_error(UrlError::Credentials),
            ),
            (
                "https://relayer.example/?q=1",
                request("GET", "/v1/info", None),
                url_error(UrlError::Query),
            ),
            (
                "https://relayer.example/#top",
                request("GET", "/v1/info", None),
                url_error(UrlError::Fragment),
            ),
            (
                "relayer.example",
                request("GET", "/v1/info", None),
                url_error(UrlError::Parse(url::ParseError::RelativeUrlWithoutBase)),
            ),
            (
                "https://relayer.example",
                request("GET", "v1/info", None),
                request_error(RequestError::RelativePath),
            ),
            (
                "https://relayer.example",
                request("G T", "/v1/info", None),
                request_error(RequestError::InvalidMethod),
            ),
            (
                "https://relayer.example",
                request("", "/v1/info", None),
                request_error(RequestError::InvalidMethod),
            ),
        ] {
            let err = t.send(url, req).await.unwrap_err();
            let same = match (&err, &want) {
                (TransportError::InvalidUrl(a), Some(TransportError::InvalidUrl(b))) => a == b,
                (TransportError::InvalidRequest(a), Some(TransportError::InvalidRequest(b))) => {
                    a == b
                }
                _ => false,
            };
            assert!(same, "{url} {err:?}, expected {want:?}");
        }
        let parse = RelayerUrl::parse("not a url").unwrap_err();
        let source = std::error::Error::source(&parse).expect("the reason is the source");
        assert!(source.downcast_ref::<UrlError>().is_some(), "{source:?}");
        assert!(
            std::error::Error::source(source)
                .and_then(|e| e.downcast_ref::<url::ParseError>())
                .is_some(),
            "the URL parser's error is kept: {parse:?}"
        );
        assert!(fetch.0.lock().unwrap().is_empty(), "nothing was sent");
    }
}
