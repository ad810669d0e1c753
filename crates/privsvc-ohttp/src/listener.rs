//! The one TCP listener for `axum::serve` that every privsvc server uses (the OHTTP relay, the
//! relayer, the gateway examples), so that a fix to what a server can learn or log of its
//! clients' addresses is made once.
//!
//! `axum::serve` logs every accepted connection's remote address at TRACE level. Serving through
//! [`PrivateListener`] hands axum a [`PeerIp`] instead, whose `Debug` and `Display` print
//! `<peer>`, so no log line can hold the address. [`PrivateListener::anonymous`] forgets the
//! address at accept; [`PrivateListener::keeping_ip`] keeps the IP (never the port) for an
//! in-memory rate limiter, the only reader of [`PeerIp::ip`].
//!
//! ```no_run
//! # async fn run(router: axum::Router) -> std::io::Result<()> {
//! let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! axum::serve(privsvc_ohttp::PrivateListener::anonymous(tcp), router).await
//! # }
//! ```

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::net::{TcpListener, TcpStream};

/// A connection's source IP as [`PrivateListener`] saw it (`None` when the listener forgets
/// addresses). It prints as `<peer>` (`Debug` and `Display`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PeerIp(Option<IpAddr>);

impl PeerIp {
    /// The address, when the listener kept it. Only an in-memory rate limiter may read it: it
    /// must never be logged, stored or passed on.
    pub fn ip(&self) -> Option<IpAddr> {
        self.0
    }
}

impl From<IpAddr> for PeerIp {
    /// The source of a request served in-process (insert it as `ConnectInfo<PeerIp>`), as
    /// [`PrivateListener::keeping_ip`] would have seen it.
    fn from(ip: IpAddr) -> Self {
        PeerIp(Some(ip))
    }
}

impl fmt::Debug for PeerIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<peer>")
    }
}

impl fmt::Display for PeerIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<peer>")
    }
}

/// Wraps a bound [`TcpListener`]; accepted connections carry an unprintable [`PeerIp`].
#[derive(Debug)]
pub struct PrivateListener {
    inner: TcpListener,
    keep_ip: bool,
}

impl PrivateListener {
    /// A listener whose connections carry no address at all.
    pub fn anonymous(inner: TcpListener) -> Self {
        Self {
            inner,
            keep_ip: false,
        }
    }

    /// A listener that keeps each connection's source IP (no port) for a rate limiter.
    pub fn keeping_ip(inner: TcpListener) -> Self {
        Self {
            inner,
            keep_ip: true,
        }
    }

    /// The local address (the port a test bound with `:0`, for instance).
    pub fn local_socket_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }
}

impl axum::serve::Listener for PrivateListener {
    type Io = TcpStream;
    type Addr = PeerIp;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, peer)) => {
                    // Nagle off: requests and answers here are small messages.
                    let _ = stream.set_nodelay(true);
                    return (stream, PeerIp(self.keep_ip.then(|| peer.ip())));
                }
                // Accept errors (e.g. too many open files): back off; the error names no peer.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr().map(|_| PeerIp(None))
    }
}

impl Connected<IncomingStream<'_, PrivateListener>> for PeerIp {
    fn connect_info(stream: IncomingStream<'_, PrivateListener>) -> Self {
        *stream.remote_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_ip_prints_nothing_of_the_address() {
        let p = PeerIp::from("192.0.2.7".parse::<IpAddr>().unwrap());
        assert_eq!(format!("{p:?} {p}"), "<peer> <peer>");
        assert_eq!(p.ip(), Some("192.0.2.7".parse().unwrap()));
    }

    #[tokio::test]
    async fn an_anonymous_listener_forgets_the_address_and_a_keeping_one_keeps_only_the_ip() {
        use axum::serve::Listener;
        for keep in [false, true] {
            let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = tcp.local_addr().unwrap();
            let mut l = if keep {
                PrivateListener::keeping_ip(tcp)
            } else {
                PrivateListener::anonymous(tcp)
            };
            let _client = TcpStream::connect(addr).await.unwrap();
            let (_io, peer) = l.accept().await;
            let want = keep.then(|| "127.0.0.1".parse().unwrap());
            assert_eq!(peer.ip(), want);
        }
    }
}
