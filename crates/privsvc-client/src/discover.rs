//! Finding relayers from their heartbeat entities on the ledger, and knowing who they are
//! (docs/PROTOCOL.md §8.6).
//!
//! A relayer URL belongs to the one account whose live heartbeats name it. Anyone can publish
//! a heartbeat naming any URL (the OHTTP relay's operator, say, naming a real relayer's URL
//! with a gateway key of its own), so:
//!
//! - a URL that live heartbeats of two accounts name is refused as ambiguous, unless the client
//!   pinned it or was given its account;
//! - the client pins `url -> account` on first use ([`RelayerPins`], beside the token store);
//!   once pinned, other accounts' heartbeats for that URL are ignored and reported with a
//!   warning, so a stranger's heartbeat can neither take over nor block a known relayer;
//! - the OHTTP gateway key comes only from that account's newest live heartbeat and is given to
//!   the transport ([`Transport::bind_relayer`]) before anything is sent; `/v1/info`, fetched
//!   through the relay, must agree with the heartbeat (address and key) and never supplies
//!   either;
//! - a relayer given as [`RelayerRef`] with an address skips discovery: only that account's
//!   heartbeat gives the key, and the relayer's `/v1/info` must answer that address.

use alloy_primitives::Address;
use privsvc_ledger::LedgerReader;
use privsvc_ohttp::Transport;
use privsvc_ohttp::{live_heartbeats, url_owner, UrlOwner, DEFAULT_HEARTBEAT_INTERVAL};
use privsvc_tokens::{MemoryRelayerPins, RelayerPins};

pub use privsvc_ohttp::LiveHeartbeat;

use crate::error::PrivsvcError;
pub use crate::options::RelayerRef;
use crate::relayer_api::{fetch_info, RelayerStatus};

/// Every live heartbeat on the ledger (newest first), unverified.
pub async fn heartbeat_relayers(
    reader: &dyn LedgerReader,
) -> Result<Vec<LiveHeartbeat>, PrivsvcError> {
    Ok(live_heartbeats(reader, DEFAULT_HEARTBEAT_INTERVAL).await?)
}

/// Live relayers, each owned by the one account whose live heartbeats name its URL, whose
/// `GET /v1/info` (sent through `transport`) answers that account's address and the key of
/// its newest heartbeat. A URL that heartbeats of two accounts name is left out (ambiguous).
///
/// Nothing is pinned beyond this call (fresh in-memory pins); a client uses
/// [`discover_relayers_pinned`] with its own pins.
pub async fn discover_relayers(
    reader: &dyn LedgerReader,
    transport: &dyn Transport,
) -> Result<Vec<RelayerStatus>, PrivsvcError> {
    discover_relayers_pinned(reader, transport, &MemoryRelayerPins::default()).await
}

/// [`discover_relayers`] with `pins`: a pinned URL belongs to its pinned account (other
/// accounts' heartbeats for it are ignored with a warning, a pinned account without a live
/// heartbeat leaves the URL out); an unpinned URL owned by one account is pinned to it once
/// its `/v1/info` agreed. One entry per URL, in the order of their newest heartbeats. A
/// relayer that cannot be used is left out with a warning saying why.
pub async fn discover_relayers_pinned(
    reader: &dyn LedgerReader,
    transport: &dyn Transport,
    pins: &dyn RelayerPins,
) -> Result<Vec<RelayerStatus>, PrivsvcError> {
    let heartbeats = heartbeat_relayers(reader).await?;
    let mut urls: Vec<&str> = Vec::new();
    for hb in &heartbeats {
        if !urls.contains(&hb.url.as_str()) {
            urls.push(&hb.url);
        }
    }
    let mut out = Vec::new();
    for url in urls {
        match contact_relayer(transport, Some(&heartbeats), pins, url, None).await {
            Ok(status) => out.push(status),
            Err(e) => tracing::warn!(relayer = %url, error = %e, "relayer not used"),
        }
    }
    Ok(out)
}

/// Contacts one relayer and checks who it is.
///
/// `url` must be normalised ([`privsvc_ohttp::normalize_relayer_url`]). `given` is an account
/// the caller was given with the URL ([`RelayerRef::address`]): it is used as is, neither
/// looked up in nor written to `pins`. Otherwise the account pinned for the URL is expected.
///
/// With `heartbeats` (needed when the transport [uses gateway keys](Transport::uses_gateway_keys);
/// always given by discovery), the URL's owner is the expected account, else the one account
/// whose live heartbeats name the URL ([`url_owner`]: two accounts are
/// `OhttpError::AmbiguousRelayer`); with an OHTTP transport the owner's newest heartbeat key
/// is bound before the first request. Then `GET /v1/info` must answer the owner's (or the
/// expected) address and, with heartbeats, the same `ohttpKey`. Without heartbeats nor an
/// expected account (a relayer reached directly by its URL the first time), `/v1/info` names
/// the account. An account learnt here is pinned.
pub async fn contact_relayer(
    transport: &dyn Transport,
    heartbeats: Option<&[LiveHeartbeat]>,
    pins: &dyn RelayerPins,
    url: &str,
    given: Option<Address>,
) -> Result<RelayerStatus, PrivsvcError> {
    let pinned = match given {
        Some(_) => None,
        None => pins.get(url)?,
    };
    let expected = given.or(pinned);
    let owner = match heartbeats {
        Some(heartbeats) => Some(url_owner(
            heartbeats,
            &privsvc_ohttp::RelayerUrl::parse(url)?,
            expected,
        )?),
        None => None,
    };
    let protocol = |message: String| PrivsvcError::Protocol {
        relayer: url.to_string(),
        message,
    };
    if let Some(owner) = &owner {
        report_ignored(url, owner, given.is_some());
    }
    if transport.uses_gateway_keys() {
        let owner = owner.as_ref().ok_or_else(|| {
            PrivsvcError::Config(format!(
                "relayer {url}: an OHTTP transport needs the relayer's heartbeats to find its gateway key"
            ))
        })?;
        let key = owner.ohttp_key().ok_or_else(|| {
            protocol(format!(
                "the newest heartbeat of its account {} publishes no ohttpKey (OHTTP is off there), so it cannot be reached through the OHTTP relay",
                owner.account
            ))
        })?;
        transport.bind_relayer(url, owner.account, Some(key))?;
    }
    let (address, info) = fetch_info(transport, url).await?;
    let account = owner.as_ref().map(|o| o.account).or(expected);
    if let Some(account) = account {
        if address != account {
            let whose = match (given, pinned) {
                (Some(_), _) => "the account it was given with",
                (None, Some(_)) => "the account pinned for it on first use",
                (None, None) => "the account whose heartbeats name it",
            };
            return Err(protocol(format!(
                "its /v1/info answers account {address}, {whose} is {account}; not used"
            )));
        }
    }
    if let Some(owner) = &owner {
        let answered = info.ohttp_key.as_deref().map(normalized_key);
        if answered != owner.ohttp_key().map(normalized_key) {
            return Err(protocol(format!(
                "its /v1/info ohttpKey differs from the newest heartbeat of its account {}; not used",
                owner.account
            )));
        }
    }
    if given.is_none() && pinned.is_none() {
        let now = pins.pin(url, address)?;
        if now != address {
            return Err(protocol(format!(
                "it was pinned to account {now} meanwhile, its /v1/info answers {address}; not used"
            )));
        }
    }
    Ok(RelayerStatus {
        url: url.to_string(),
        address,
        bad: false,
        info,
    })
}

/// Through a transport that [uses gateway keys](Transport::uses_gateway_keys), binds the
/// `issuerUrl` that each of `relayers` names to its `issuer` account, so that issuer calls
/// sent through the OHTTP relay are encapsulated only to a key of the issuer's own heartbeats
/// (the same account the client requires a live heartbeat of before it asks that issuer for
/// tokens), never to another account's heartbeat naming the issuer's URL. An issuer URL that
/// is one of `relayers` keeps the binding of that relayer's account; a second issuer account
/// for one URL is not bound (the first stays) and is reported.
pub fn bind_issuers(transport: &dyn Transport, relayers: &[RelayerStatus]) {
    if !transport.uses_gateway_keys() {
        return;
    }
    let mut bound: std::collections::HashMap<String, Address> = relayers
        .iter()
        .map(|r| (r.url.clone(), r.address))
        .collect();
    for relayer in relayers {
        let (Some(issuer), Some(issuer_url)) = (&relayer.info.issuer, &relayer.info.issuer_url)
        else {
            continue;
        };
        let (Ok(issuer), Ok(issuer_url)) = (
            issuer.parse::<Address>(),
            privsvc_ohttp::normalize_relayer_url(issuer_url),
        ) else {
            continue;
        };
        match bound.get(&issuer_url) {
            Some(account) if *account == issuer => {}
            Some(account) => tracing::warn!(
                relayer = %relayer.url,
                issuer_url = %issuer_url,
                issuer = %issuer,
                account = %account,
                "the relayer names an issuer whose URL belongs to another account; not rebound"
            ),
            None => match transport.bind_relayer(&issuer_url, issuer, None) {
                Ok(()) => {
                    bound.insert(issuer_url, issuer);
                }
                Err(e) => tracing::warn!(
                    relayer = %relayer.url,
                    issuer_url = %issuer_url,
                    error = %e,
                    "cannot bind the relayer's issuer URL"
                ),
            },
        }
    }
}

/// Warns about every other account whose live heartbeats name a pinned (or given) URL.
fn report_ignored(url: &str, owner: &UrlOwner, given: bool) {
    for other in &owner.ignored {
        tracing::warn!(
            relayer = %url,
            account = %owner.account,
            other = %other,
            given,
            "a live heartbeat of another account names this relayer's URL; ignored: the URL belongs to the account pinned (or given) for it"
        );
    }
}

fn normalized_key(key: &str) -> String {
    key.trim().trim_start_matches("0x").to_ascii_lowercase()
}
