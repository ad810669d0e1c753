//! Bounded HTTP that never follows a redirect, natively and in wasm32.
//!
//! Natively, [`client`] is a `reqwest` client with a time limit per request (connecting
//! included) and redirects turned off: a 3xx answer comes back as it is, and callers treat it as
//! the error status it is.
//!
//! In wasm32, `reqwest` calls the host's `fetch`, which has no redirect policy in `reqwest` (the
//! browser follows redirects itself, `redirect: "follow"`) and no client-wide time limit. There,
//! [`send`] puts the time limit on every request (an `AbortController` that also covers reading
//! the body) and refuses any answer whose final URL is not the one requested: a redirect target's
//! answer is never used. The redirected request itself has then been sent by the host (for 307
//! and 308 with its body); privsvc bodies that cross a relay are OHTTP-encapsulated for the
//! gateway, so a redirect target learns nothing from them.
//!
//! Callers that send requests go through the [`Fetch`] trait: [`ReqwestFetch`] is the default,
//! and a host may bring its own HTTP stack (the JS client's `fetch` option, docs/API.md §3.1).

use std::time::Duration;

use async_trait::async_trait;

/// Why an HTTP exchange failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The HTTP client could not send the request or receive its answer in time; the source
    /// is the client's error with the URL taken out.
    #[error("{0}")]
    Client(#[source] reqwest::Error),
    /// A fetch adapter could not send the request or receive its answer, or the request cannot
    /// be expressed (an invalid method). The source is the adapter's own error (a host's HTTP
    /// stack brings its own error type; `"text".into()` makes one from words).
    #[error("{0}")]
    Request(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The host followed a redirect (wasm32 only); privsvc never uses a redirected answer.
    #[error("the server answered with a redirect, which privsvc does not follow")]
    Redirected,
    /// The answer's body is larger than the caller allows.
    #[error("the answer is {size} bytes, more than the {limit} allowed")]
    TooLarge {
        /// Bytes seen (or declared) so far.
        size: usize,
        /// The limit.
        limit: usize,
    },
}

impl From<reqwest::Error> for HttpError {
    fn from(e: reqwest::Error) -> Self {
        HttpError::Client(e.without_url())
    }
}

/// A client whose requests give up after `timeout` and never follow redirects (in wasm32 the
/// limit and the redirect rule are applied by [`send`]).
pub fn client(timeout: Duration) -> Result<reqwest::Client, HttpError> {
    #[cfg(not(target_arch = "wasm32"))]
    let builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none());
    #[cfg(target_arch = "wasm32")]
    let builder = {
        let _ = timeout;
        reqwest::Client::builder()
    };
    Ok(builder.build()?)
}

/// Send `request` and wait for the answer's head.
///
/// Natively this is `request.send()`: the client's own limits and redirect policy apply (see
/// [`client`]). In wasm32 the request gets `timeout` unless it has its own, and an answer that
/// came from another URL than the one requested is [`HttpError::Redirected`].
pub async fn send(
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<reqwest::Response, HttpError> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = timeout;
        Ok(request.send().await?)
    }
    #[cfg(target_arch = "wasm32")]
    {
        let (client, request) = request.build_split();
        let mut request = request?;
        if request.timeout().is_none() {
            *request.timeout_mut() = Some(timeout);
        }
        let asked = without_fragment(request.url());
        let response = client.execute(request).await?;
        if without_fragment(response.url()) != asked {
            return Err(HttpError::Redirected);
        }
        Ok(response)
    }
}

/// Read the body of `response`, at most `limit` bytes ([`HttpError::TooLarge`] beyond).
#[cfg(not(target_arch = "wasm32"))]
pub async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, HttpError> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if out.len() + chunk.len() > limit {
            return Err(HttpError::TooLarge {
                size: out.len() + chunk.len(),
                limit,
            });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Read the body of `response`, at most `limit` bytes. `fetch` gives the body whole in wasm32:
/// a declared length over the limit is refused before reading, any other body after.
#[cfg(target_arch = "wasm32")]
pub async fn read_body(response: reqwest::Response, limit: usize) -> Result<Vec<u8>, HttpError> {
    let too_large = |size: usize| HttpError::TooLarge { size, limit };
    if let Some(declared) = response.content_length() {
        if declared > limit as u64 {
            return Err(too_large(usize::try_from(declared).unwrap_or(usize::MAX)));
        }
    }
    let body = response.bytes().await?;
    if body.len() > limit {
        return Err(too_large(body.len()));
    }
    Ok(body.to_vec())
}

/// One HTTP request, as privsvc hands it to a [`Fetch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// Method, upper case (`GET`, `POST`).
    pub method: String,
    /// Absolute URL.
    pub url: String,
    /// Request headers (names lower case).
    pub headers: Vec<(String, String)>,
    /// Body, if any.
    pub body: Option<Vec<u8>>,
}

/// An answer, read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    /// Status code; a redirect status comes back as it is.
    pub status: u16,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body.
    pub body: Vec<u8>,
}

/// How privsvc sends a request to a relayer, an OHTTP relay or an issuer. [`ReqwestFetch`] is
/// the default; a host can bring its own (the JS client's `fetch` option). An implementation
/// must not follow redirects (a 3xx answer comes back as it is, or as
/// [`HttpError::Redirected`]), must give up after `timeout`, and must refuse a body over
/// `max_body` bytes with [`HttpError::TooLarge`]. Object safe: `Arc<dyn Fetch>`.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait Fetch: crate::MaybeSend + crate::MaybeSync {
    /// Send `request` and read its answer.
    async fn fetch(
        &self,
        request: FetchRequest,
        timeout: Duration,
        max_body: usize,
    ) -> Result<FetchResponse, HttpError>;
}

/// The default [`Fetch`]: a `reqwest` client made by [`client`], sent with [`send`].
#[derive(Debug, Clone)]
pub struct ReqwestFetch {
    client: reqwest::Client,
}

impl ReqwestFetch {
    /// A fetch with its own client whose requests give up after `timeout`.
    pub fn new(timeout: Duration) -> Result<Self, HttpError> {
        Ok(ReqwestFetch {
            client: client(timeout)?,
        })
    }

    /// A fetch over `client` (shares its connection pool; it should not follow redirects).
    pub fn with_client(client: reqwest::Client) -> Self {
        ReqwestFetch { client }
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl Fetch for ReqwestFetch {
    async fn fetch(
        &self,
        request: FetchRequest,
        timeout: Duration,
        max_body: usize,
    ) -> Result<FetchResponse, HttpError> {
        let method = reqwest::Method::from_bytes(request.method.as_bytes())
            .map_err(|e| HttpError::Request(Box::new(e)))?;
        let mut builder = self.client.request(method, &request.url);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        if let Some(body) = request.body {
            builder = builder.body(body);
        }
        let response = send(builder, timeout).await?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = read_body(response, max_body).await?;
        Ok(FetchResponse {
            status,
            content_type,
            body,
        })
    }
}

/// `url` without its `#fragment` (fetch reports final URLs without it).
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn without_fragment(url: &reqwest::Url) -> reqwest::Url {
    let mut url = url.clone();
    url.set_fragment(None);
    url
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A one-shot HTTP server on 127.0.0.1 that answers every request with `answer`.
    fn serve_once(answer: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            if let Ok((mut conn, _)) = listener.accept() {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(answer.as_bytes());
            }
        });
        format!("http://{addr}/")
    }

    #[tokio::test]
    async fn a_redirect_comes_back_as_it_is() {
        let url = serve_once(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:9/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        );
        let http = client(Duration::from_secs(5)).unwrap();
        let resp = send(http.get(&url), Duration::from_secs(5)).await.unwrap();
        assert_eq!(resp.status().as_u16(), 307);
    }

    #[tokio::test]
    async fn reqwest_fetch_reads_a_bounded_body_and_passes_redirects_back() {
        let fetch = ReqwestFetch::new(Duration::from_secs(5)).unwrap();
        let get = |url: String| FetchRequest {
            method: "GET".into(),
            url,
            headers: vec![("accept".into(), "application/json".into())],
            body: None,
        };
        let url = serve_once(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\nconnection: close\r\n\r\n{\"ok\":true}",
        );
        let answer = fetch
            .fetch(get(url), Duration::from_secs(5), 11)
            .await
            .unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.content_type.as_deref(), Some("application/json"));
        assert_eq!(answer.body, br#"{"ok":true}"#);

        let url = serve_once(
            "HTTP/1.1 200 OK\r\ncontent-length: 11\r\nconnection: close\r\n\r\n{\"ok\":true}",
        );
        let err = fetch
            .fetch(get(url), Duration::from_secs(5), 10)
            .await
            .unwrap_err();
        assert!(
            matches!(err, HttpError::TooLarge { limit: 10, .. }),
            "{err:?}"
        );

        let url = serve_once(
            "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:9/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        );
        let answer = fetch
            .fetch(get(url), Duration::from_secs(5), 10)
            .await
            .unwrap();
        assert_eq!(answer.status, 302);
    }

    #[tokio::test]
    async fn a_silent_server_is_given_up_on() {
        // Accepts the connection, never answers.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let http = client(Duration::from_millis(200)).unwrap();
        let start = std::time::Instant::now();
        let err = send(http.get(&url), Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(matches!(err, HttpError::Client(_)), "{err:?}");
        assert!(start.elapsed() < Duration::from_secs(5));
        drop(listener);
    }
}
