//! A TCP listener for `axum::serve` that forgets peer addresses.
//!
//! `axum::serve` logs every accepted connection's remote address at TRACE level. Serving through
//! [`AnonymousListener`] hands axum an [`Anonymous`] address instead, so no log line and no
//! handler (`ConnectInfo`) can ever see the client's network address.
//!
//! ```no_run
//! # async fn run(router: axum::Router) -> std::io::Result<()> {
//! let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! axum::serve(privsvc_ohttp::AnonymousListener::new(tcp), router).await
//! # }
//! ```

use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// The address `AnonymousListener` reports: nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anonymous;

/// Wraps a [`TcpListener`]; accepted connections carry no peer address.
#[derive(Debug)]
pub struct AnonymousListener {
    inner: TcpListener,
}

impl AnonymousListener {
    /// Wrap a bound listener.
    pub fn new(inner: TcpListener) -> Self {
        Self { inner }
    }

    /// The local address (the port a test bound with `:0`, for instance).
    pub fn local_socket_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }
}

impl axum::serve::Listener for AnonymousListener {
    type Io = TcpStream;
    type Addr = Anonymous;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, _peer)) => {
                    // Nagle off: OHTTP messages are small request/response pairs.
                    let _ = stream.set_nodelay(true);
                    return (stream, Anonymous);
                }
                // Accept errors (e.g. too many open files): back off; the error names no peer.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr().map(|_| Anonymous)
    }
}
