//! The relayer's TCP listener for `axum::serve`.
//!
//! `axum::serve` logs each accepted connection's peer address (`{addr:?}`) at TRACE level. This
//! listener hands axum a [`PeerAddr`] whose `Debug` and `Display` print nothing of the address,
//! so no log line can hold it; handlers read it (as `ConnectInfo<PeerAddr>`) only for the
//! in-memory rate limit. With `keep = false` (tokens required: no rate limit) the address is
//! dropped at accept.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::net::{TcpListener, TcpStream};

/// A connection's source address, unprintable.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(Option<IpAddr>);

impl PeerAddr {
    /// The address, when kept (only the rate limiter may use it).
    pub fn ip(&self) -> Option<IpAddr> {
        self.0
    }
}

impl From<IpAddr> for PeerAddr {
    /// The source of a request served in-process through [`crate::Relayer::router`]
    /// (insert it as `ConnectInfo<PeerAddr>`), as the listener would have seen it.
    fn from(ip: IpAddr) -> Self {
        PeerAddr(Some(ip))
    }
}

impl fmt::Debug for PeerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<peer>")
    }
}

impl fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<peer>")
    }
}

/// Wraps a bound [`TcpListener`].
#[derive(Debug)]
pub struct PeerListener {
    inner: TcpListener,
    keep: bool,
}

impl PeerListener {
    /// Wrap `inner`; `keep` says whether the peer IP is kept for the rate limiter.
    pub fn new(inner: TcpListener, keep: bool) -> Self {
        Self { inner, keep }
    }
}

impl axum::serve::Listener for PeerListener {
    type Io = TcpStream;
    type Addr = PeerAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let addr = PeerAddr(self.keep.then(|| peer.ip()));
                    return (stream, addr);
                }
                // E.g. too many open files: back off; nothing about the peer is logged.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(PeerAddr(None))
    }
}

impl Connected<IncomingStream<'_, PeerListener>> for PeerAddr {
    fn connect_info(stream: IncomingStream<'_, PeerListener>) -> Self {
        *stream.remote_addr()
    }
}
