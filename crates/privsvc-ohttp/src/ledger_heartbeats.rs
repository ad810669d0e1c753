//! Reading live relayer heartbeats from the ledger (what the relay verifies targets against and
//! where `OhttpTransport` finds gateway keys).
//!
//! A heartbeat is a system entity with `project = "privsvc-7f3k"`, `privsvc_kind = "heartbeat"`
//! and a JSON payload `{url, address, chainId, version, ohttpKey?}`; it is live when it was
//! created within the last two heartbeat intervals.

use std::time::Duration;

use alloy_primitives::Address;
use privsvc_ledger::{lifetime_blocks, live_heartbeats_query, Heartbeat};
use privsvc_ledger::{query_all, AttributeSelect, LedgerReader, Select};

use crate::OhttpError;
use privsvc_rt::{normalize_relayer_url, RelayerUrl};

/// Default heartbeat interval (`HEARTBEAT_MS`): 10 minutes.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration =
    Duration::from_millis(privsvc_ledger::HEARTBEAT_INTERVAL_MS);

/// A live heartbeat as the OHTTP code needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveHeartbeat {
    /// The relayer URL it names, normalised ([`normalize_relayer_url`]).
    pub url: String,
    /// The account that created the heartbeat entity.
    pub creator: Address,
    /// The address the payload claims (always the creator: other heartbeats are dropped).
    pub address: Option<Address>,
    /// The gateway key configuration (hex), when OHTTP is on.
    pub ohttp_key: Option<String>,
    /// Block of creation.
    pub created_at: u64,
}

/// The number of blocks in two heartbeat intervals (the liveness window; the same rounding as
/// `privsvc_ledger::live_heartbeats_query`).
pub fn live_window_blocks(interval: Duration) -> u64 {
    let interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX / 2);
    lifetime_blocks((2 * interval_ms).div_ceil(1000))
}

/// All live heartbeats, newest first, parsed with `privsvc_ledger::Heartbeat`.
/// Entities that do not parse (bad payload, `url` attribute differing from the payload, payload
/// address differing from the creator) or whose URL is not an http(s) URL are skipped.
pub async fn live_heartbeats(
    reader: &dyn LedgerReader,
    interval: Duration,
) -> Result<Vec<LiveHeartbeat>, OhttpError> {
    let head = reader.block_number().await?;
    let interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX / 2);
    let expression = live_heartbeats_query(head, interval_ms);
    let select = Select {
        key: true,
        creator: true,
        created_at: true,
        payload: true,
        attributes: AttributeSelect::All,
        ..Select::default()
    };
    let entities = query_all(reader, &expression, &select, Some(head)).await?;
    let oldest = head.saturating_sub(live_window_blocks(interval));
    let mut live: Vec<LiveHeartbeat> = entities
        .iter()
        .filter_map(|e| {
            let created_at = e.created_at?;
            let creator = e.creator?;
            if created_at < oldest {
                return None;
            }
            let heartbeat = Heartbeat::from_entity(e).ok()?;
            Some(LiveHeartbeat {
                url: normalize_relayer_url(&heartbeat.url).ok()?,
                creator,
                address: Some(heartbeat.address),
                ohttp_key: heartbeat.ohttp_key.filter(|k| !k.trim().is_empty()),
                created_at,
            })
        })
        .collect();
    live.sort_by_key(|h| std::cmp::Reverse(h.created_at));
    Ok(live)
}

/// Who owns a relayer URL according to the live heartbeats (docs/PROTOCOL.md §8.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlOwner {
    /// The one account whose heartbeats give the URL's gateway key and whose address the
    /// relayer's `/v1/info` must answer.
    pub account: Address,
    /// That account's live heartbeats naming the URL, newest first (may be empty only when the
    /// account was given and none of its heartbeats is live).
    pub heartbeats: Vec<LiveHeartbeat>,
    /// Other accounts whose live heartbeats name the URL too, ignored because the owner was
    /// pinned or given (a caller reports them).
    pub ignored: Vec<Address>,
}

impl UrlOwner {
    /// The gateway key of the owner's newest live heartbeat, if it publishes one.
    pub fn ohttp_key(&self) -> Option<&str> {
        self.heartbeats.first().and_then(|h| h.ohttp_key.as_deref())
    }
}

/// The owner of relayer URL `url` (normalised, as in [`LiveHeartbeat::url`]) among `heartbeats`.
///
/// - With `expected` (an account the caller pinned on first use, or was given with the URL):
///   that account, with its own heartbeats only; other accounts' heartbeats for the URL are
///   listed in [`UrlOwner::ignored`], so a stranger's heartbeat can neither take the URL over
///   nor block it. When none of the expected account's heartbeats is live:
///   [`OhttpError::NoLiveHeartbeat`].
/// - Without: the one account whose live heartbeats name the URL. Two or more accounts:
///   [`OhttpError::AmbiguousRelayer`] (anyone can publish a heartbeat naming any URL, so the
///   newest heartbeat must never win). None: [`OhttpError::NoLiveHeartbeat`].
pub fn url_owner(
    heartbeats: &[LiveHeartbeat],
    url: &RelayerUrl,
    expected: Option<Address>,
) -> Result<UrlOwner, OhttpError> {
    let naming: Vec<&LiveHeartbeat> = heartbeats.iter().filter(|h| *url == h.url).collect();
    let mut accounts: Vec<Address> = Vec::new();
    for h in &naming {
        if !accounts.contains(&h.creator) {
            accounts.push(h.creator);
        }
    }
    let account = match expected {
        Some(account) => account,
        None => match accounts.as_slice() {
            [] => {
                return Err(OhttpError::NoLiveHeartbeat {
                    relayer: url.clone(),
                    account: None,
                })
            }
            [one] => *one,
            _ => {
                return Err(OhttpError::AmbiguousRelayer {
                    relayer: url.clone(),
                    accounts,
                })
            }
        },
    };
    let mut own: Vec<LiveHeartbeat> = naming
        .iter()
        .filter(|h| h.creator == account)
        .map(|h| (*h).clone())
        .collect();
    if own.is_empty() {
        return Err(OhttpError::NoLiveHeartbeat {
            relayer: url.clone(),
            account: Some(account),
        });
    }
    own.sort_by_key(|h| std::cmp::Reverse(h.created_at));
    Ok(UrlOwner {
        account,
        heartbeats: own,
        ignored: accounts.into_iter().filter(|a| *a != account).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> RelayerUrl {
        RelayerUrl::parse(text).unwrap()
    }

    fn beat(url: &str, creator: u8, key: &str, created_at: u64) -> LiveHeartbeat {
        let creator = Address::repeat_byte(creator);
        LiveHeartbeat {
            url: url.to_string(),
            creator,
            address: Some(creator),
            ohttp_key: Some(key.to_string()),
            created_at,
        }
    }

    #[test]
    fn one_account_owns_a_url() {
        let beats = [
            beat("http://a", 1, "k2", 9),
            beat("http://b", 2, "kb", 8),
            beat("http://a", 1, "k1", 5),
        ];
        let owner = url_owner(&beats, &url("http://a"), None).unwrap();
        assert_eq!(owner.account, Address::repeat_byte(1));
        assert_eq!(owner.heartbeats.len(), 2);
        assert_eq!(owner.ohttp_key(), Some("k2"));
        assert!(owner.ignored.is_empty());
    }

    #[test]
    fn two_accounts_make_a_url_ambiguous_unless_one_is_expected() {
        let beats = [beat("http://a", 3, "evil", 9), beat("http://a", 1, "k1", 5)];
        match url_owner(&beats, &url("http://a"), None) {
            Err(OhttpError::AmbiguousRelayer { relayer, accounts }) => {
                assert_eq!(relayer, "http://a");
                assert_eq!(
                    accounts,
                    vec![Address::repeat_byte(3), Address::repeat_byte(1)]
                );
            }
            other => panic!("{other:?}"),
        }
        let owner = url_owner(&beats, &url("http://a"), Some(Address::repeat_byte(1))).unwrap();
        assert_eq!(owner.ohttp_key(), Some("k1"));
        assert_eq!(owner.ignored, vec![Address::repeat_byte(3)]);
    }

    #[test]
    fn an_expected_account_without_a_live_heartbeat_is_not_replaced() {
        let beats = [beat("http://a", 3, "evil", 9)];
        assert!(matches!(
            url_owner(&beats, &url("http://a"), Some(Address::repeat_byte(1))),
            Err(OhttpError::NoLiveHeartbeat {
                account: Some(_),
                ..
            })
        ));
        assert!(matches!(
            url_owner(&beats, &url("http://other"), None),
            Err(OhttpError::NoLiveHeartbeat { account: None, .. })
        ));
    }
}
