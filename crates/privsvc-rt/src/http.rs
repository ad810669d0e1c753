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

use std::time::Duration;

/// Why an HTTP exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The request could not be sent or its answer not received in time (the message leaves
    /// the URL out).
    #[error("{0}")]
    Request(String),
    /// The host followed a redirect (wasm32 only); privsvc never uses a redirected answer.
    #[error("the server answered with a redirect, which privsvc does not follow")]
    Redirected,
}

impl From<reqwest::Error> for HttpError {
    fn from(e: reqwest::Error) -> Self {
        HttpError::Request(e.without_url().to_string())
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
    async fn a_silent_server_is_given_up_on() {
        // Accepts the connection, never answers.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let http = client(Duration::from_millis(200)).unwrap();
        let start = std::time::Instant::now();
        let err = send(http.get(&url), Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(matches!(err, HttpError::Request(_)), "{err:?}");
        assert!(start.elapsed() < Duration::from_secs(5));
        drop(listener);
    }
}
