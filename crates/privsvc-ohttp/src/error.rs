//! Errors of the OHTTP crate.

use privsvc_rt::RelayerUrl;

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
    /// The source is the hex decoder's or the `ohttp` crate's error.
    #[error("invalid OHTTP gateway key: {0}; expected the hex of an RFC 9458 key configuration")]
    InvalidKey(#[source] BoxError),
    /// A request or response cannot be expressed in Binary HTTP (RFC 9292).
    #[error("cannot encode or decode Binary HTTP: {0}")]
    BinaryHttp(#[source] BinaryHttpError),
    /// Encapsulating a request or sealing a response failed; the source is the `ohttp` (or
    /// HKDF) crate's error.
    #[error("OHTTP encapsulation failed: {0}")]
    Encapsulation(#[source] BoxError),
    /// The relay (or the gateway behind it) refused the request without an encapsulated answer.
    #[error("the OHTTP relay answered {status}: {message}")]
    Refused {
        /// The HTTP status of the relay's answer (403 unverified target, 413 too large, 502 ...).
        status: u16,
        /// The `error` text of the answer, if any.
        message: String,
    },
    /// The encapsulated response could not be opened or decoded.
    /// The source is the `ohttp` crate's error, the Binary HTTP error of the plaintext, or
    /// what was wrong with the answer.
    #[error("cannot open the OHTTP response: {0}")]
    BadResponse(#[source] BoxError),
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
    NoGatewayKey(RelayerUrl),
    /// Live heartbeats of two or more accounts name one relayer URL, and no account was pinned
    /// or given for it: anyone can publish a heartbeat naming any URL, so neither is believed.
    #[error("relayer {relayer} is named by the live heartbeats of {} accounts ({}); it is refused as ambiguous: give its account with its URL (a relayer reference with an address), or use another relayer", .accounts.len(), accounts_text(.accounts))]
    AmbiguousRelayer {
        /// The relayer URL.
        relayer: RelayerUrl,
        /// The accounts whose live heartbeats name it, newest heartbeat first.
        accounts: Vec<alloy_primitives::Address>,
    },
    /// No live heartbeat of the relayer's account (or of any account) names the relayer URL,
    /// so its gateway key is unknown.
    #[error("no live heartbeat {} names relayer {relayer}; is the relayer running and publishing heartbeats on this ledger?", account_text(.account))]
    NoLiveHeartbeat {
        /// The relayer URL.
        relayer: RelayerUrl,
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
        relayer: RelayerUrl,
    },
    /// Reading the ledger failed.
    #[error("ledger error: {0}")]
    Ledger(#[from] privsvc_ledger::LedgerError),
    /// A URL is not an absolute http(s) URL; the source says what is wrong with it.
    #[error("invalid URL: {0}; expected an absolute http or https URL")]
    InvalidUrl(#[source] privsvc_rt::UrlError),
    /// The in-process transport has no router for this relayer URL.
    #[error("no in-process router registered for {0}")]
    UnknownRelayer(RelayerUrl),
}

/// An error of a crate underneath (`ohttp`, `bhttp`, `hex`, HKDF) kept as a source without its
/// type becoming part of this crate's API.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a message is not the Binary HTTP (RFC 9292) message privsvc carries in OHTTP.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BinaryHttpError {
    /// The `bhttp` crate could not encode or decode the message; the source is its error.
    #[error("{0}")]
    Codec(#[source] BoxError),
    /// A method, path, header name or header value is not UTF-8.
    #[error("{0} is not UTF-8")]
    NotUtf8(&'static str),
    /// A request without a method or a path starting with `/`.
    #[error("a request needs a method and a path starting with '/'")]
    NoMethodOrPath,
    /// A message read as a request is not one.
    #[error("not a request")]
    NotRequest,
    /// A message read as a response is not one.
    #[error("not a response")]
    NotResponse,
    /// A response status outside 200..=599.
    #[error("status {0} is not a final status")]
    NotFinalStatus(u16),
    /// Padding after the message holds a non-zero byte.
    #[error("non-zero bytes after the message (padding must be zero)")]
    NonZeroPadding,
    /// A request or response plaintext that does not measure exactly one size class.
    #[error("a {kind} of {len} bytes is not padded to a size class {classes:?}")]
    NotPadded {
        /// `request` or `response`.
        kind: &'static str,
        /// The plaintext's length.
        len: usize,
        /// The size classes of that kind.
        classes: &'static [usize],
    },
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
    fn a_bad_gateway_key_keeps_the_decoders_error_as_its_source() {
        let not_hex = crate::decode_gateway_key("zz").unwrap_err();
        assert!(matches!(not_hex, OhttpError::InvalidKey(_)), "{not_hex:?}");
        assert!(
            not_hex
                .source()
                .and_then(|s| s.downcast_ref::<hex::FromHexError>())
                .is_some(),
            "{not_hex:?}"
        );
        let not_a_config = crate::decode_gateway_key("00").unwrap_err();
        assert!(
            not_a_config
                .source()
                .and_then(|s| s.downcast_ref::<ohttp::Error>())
                .is_some(),
            "{not_a_config:?}"
        );
    }

    #[test]
    fn binary_http_failures_are_typed() {
        let unpadded = crate::decode_padded_response(&[0u8; 100]).unwrap_err();
        assert!(
            matches!(
                unpadded,
                OhttpError::BinaryHttp(BinaryHttpError::NotPadded {
                    kind: "response",
                    len: 100,
                    ..
                })
            ),
            "{unpadded:?}"
        );
        // A known-length response (framing indicator 1) read as a request is not one.
        let response = crate::encode_response(200, &[], b"").unwrap();
        let not_request = crate::decode_request(&response).unwrap_err();
        assert!(
            matches!(
                not_request,
                OhttpError::BinaryHttp(BinaryHttpError::NotRequest)
            ),
            "{not_request:?}"
        );
        let garbage = crate::decode_request(&[0xff; 8]).unwrap_err();
        assert!(
            matches!(garbage, OhttpError::BinaryHttp(BinaryHttpError::Codec(_))),
            "{garbage:?}"
        );
        assert!(
            garbage.source().and_then(|s| s.source()).is_some(),
            "{garbage:?}"
        );
    }

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
