//! Errors of the OHTTP crate.

/// Everything that can go wrong encapsulating, relaying or opening an OHTTP exchange.
///
/// Gateway-side open failures are deliberately opaque ([`OhttpError::Open`]): the gateway never
/// tells a sender *why* a message could not be opened (wrong key id, bad ciphertext, bad Binary
/// HTTP), so that it cannot be used as an oracle.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OhttpError {
    /// The relayer or relay could not be reached; the source says why.
    #[error("transport error: {0}")]
    Transport(#[source] privsvc_rt::TransportError),
    /// An encapsulated request could not be opened (one opaque error for every cause).
    #[error("the encapsulated request cannot be opened")]
    Open,
    /// A gateway seed is too short to derive a key from.
    #[error("gateway seed too short: {0} bytes given, at least 16 needed")]
    WeakSeed(usize),
    /// A gateway key configuration (`ohttpKey`) is not valid hex or not a supported key config.
    #[error("invalid OHTTP gateway key: {0}; expected the hex of an RFC 9458 key configuration")]
    InvalidKey(String),
    /// A request or response cannot be expressed in Binary HTTP (RFC 9292).
    #[error("cannot encode or decode Binary HTTP: {0}")]
    BinaryHttp(String),
    /// Encapsulating a request or sealing a response failed.
    #[error("OHTTP encapsulation failed: {0}")]
    Encapsulation(String),
    /// The relay (or the gateway behind it) refused the request without an encapsulated answer.
    #[error("the OHTTP relay answered {status}: {message}")]
    Refused {
        /// The HTTP status of the relay's answer (403 unverified target, 413 too large, 502 ...).
        status: u16,
        /// The `error` text of the answer, if any.
        message: String,
    },
    /// The encapsulated response could not be opened or decoded.
    #[error("cannot open the OHTTP response: {0}")]
    BadResponse(String),
    /// A message exceeds the size limit.
    #[error("message too large: {size} bytes, the limit is {limit}")]
    TooLarge {
        /// Size of the message (or of its part read so far).
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// No usable gateway key is known for a relayer.
    #[error("no verified OHTTP gateway key for relayer {0}; is OHTTP on and its heartbeat live?")]
    NoGatewayKey(String),
    /// Live heartbeats of two or more accounts name one relayer URL, and no account was pinned
    /// or given for it: anyone can publish a heartbeat naming any URL, so neither is believed.
    #[error("relayer {relayer} is named by the live heartbeats of {} accounts ({}); it is refused as ambiguous: give its account with its URL (a relayer reference with an address), or use another relayer", .accounts.len(), accounts_text(.accounts))]
    AmbiguousRelayer {
        /// The relayer URL.
        relayer: String,
        /// The accounts whose live heartbeats name it, newest heartbeat first.
        accounts: Vec<alloy_primitives::Address>,
    },
    /// No live heartbeat of the relayer's account (or of any account) names the relayer URL,
    /// so its gateway key is unknown.
    #[error("no live heartbeat {} names relayer {relayer}; is the relayer running and publishing heartbeats on this ledger?", account_text(.account))]
    NoLiveHeartbeat {
        /// The relayer URL.
        relayer: String,
        /// The account that owns the URL (pinned or given), when one is known.
        account: Option<alloy_primitives::Address>,
    },
    /// The relayer's gateway (or the relay in front of it) answered 400 outside the
    /// encapsulation to a well-formed request: the key from the relayer's heartbeat may no
    /// longer open there, or the relay made the answer. The key is never replaced silently
    /// ([`crate::OhttpTransport::forget_gateway_key`] or a new binding looks it up again), and
    /// the relayer is not marked bad: only its own answer inside the encapsulation can do that.
    #[error("the OHTTP gateway of relayer {relayer} (or the relay in front of it) refused a well-formed request (400) outside the encapsulation: the key of the relayer's heartbeat may not open there, or the relay made the answer; the key is not looked up again silently; retry, use another relayer, or start a new session once the relayer publishes a heartbeat with its current key")]
    GatewayRefused {
        /// The relayer URL.
        relayer: String,
    },
    /// Reading the ledger failed.
    #[error("ledger error: {0}")]
    Ledger(#[from] privsvc_ledger::LedgerError),
    /// A URL is not an absolute http(s) URL.
    #[error("invalid URL {0:?}: expected an absolute http or https URL")]
    InvalidUrl(String),
    /// The in-process transport has no router for this relayer URL.
    #[error("no in-process router registered for {0}")]
    UnknownRelayer(String),
}

fn accounts_text(accounts: &[alloy_primitives::Address]) -> String {
    accounts
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn account_text(account: &Option<alloy_primitives::Address>) -> String {
    match account {
        Some(a) => format!("of its account {a}"),
        None => "of any account".to_string(),
    }
}

impl From<privsvc_rt::HttpError> for OhttpError {
    fn from(e: privsvc_rt::HttpError) -> Self {
        match e {
            privsvc_rt::HttpError::TooLarge { size, limit } => OhttpError::TooLarge { size, limit },
            other => OhttpError::Transport(other.into()),
        }
    }
}

impl From<privsvc_rt::TransportError> for OhttpError {
    /// A transport's error as the OHTTP error it carries (or stands for).
    fn from(e: privsvc_rt::TransportError) -> Self {
        use privsvc_rt::TransportError;
        match e {
            TransportError::InvalidUrl(url) => OhttpError::InvalidUrl(url),
            TransportError::Http(e) => e.into(),
            TransportError::Carrier(c) => match c.downcast::<OhttpError>() {
                Ok(e) => *e,
                Err(c) => OhttpError::Transport(TransportError::Carrier(c)),
            },
            other => OhttpError::Transport(other),
        }
    }
}

impl From<OhttpError> for privsvc_rt::TransportError {
    /// An OHTTP failure as a transport's error: the OHTTP error is its source (a transport
    /// failure is itself).
    fn from(e: OhttpError) -> Self {
        match e {
            OhttpError::InvalidUrl(url) => privsvc_rt::TransportError::InvalidUrl(url),
            OhttpError::Transport(e) => e,
            other => privsvc_rt::TransportError::Carrier(Box::new(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use privsvc_rt::HttpError;
    use privsvc_rt::TransportError;
    use std::error::Error as _;

    #[test]
    fn a_transport_failure_keeps_its_source_both_ways() {
        let e = OhttpError::from(HttpError::Request("connection refused".into()));
        assert!(
            matches!(
                e,
                OhttpError::Transport(TransportError::Http(HttpError::Request(_)))
            ),
            "{e:?}"
        );
        assert_eq!(
            e.source().map(|s| s.to_string()).as_deref(),
            Some("connection refused")
        );
        // Back as a transport's error it is the transport failure itself, not a carrier's.
        let back = TransportError::from(e);
        assert!(
            matches!(back, TransportError::Http(HttpError::Request(_))),
            "{back:?}"
        );
        let too_large = OhttpError::from(HttpError::TooLarge { size: 9, limit: 8 });
        assert!(matches!(
            too_large,
            OhttpError::TooLarge { size: 9, limit: 8 }
        ));
    }
}
