//! Reading live relayer heartbeats from the ledger (what the relay verifies targets against and
//! where `OhttpTransport` finds gateway keys).
//!
//! A heartbeat is a system entity with `project = "privsvc-7f3k"`, `privsvc_kind = "heartbeat"`
//! and a JSON payload `{url, address, chainId, version, ohttpKey?}`; it is live when it was
//! created within the last two heartbeat intervals.

use std::time::Duration;

use alloy_primitives::Address;
use privsvc_ledger::system::{lifetime_blocks, live_heartbeats_query, Heartbeat, PRIVSVC_PROJECT};
use privsvc_ledger::{query_all, AttributeSelect, LedgerReader, Select};

use crate::http_util::normalize_relayer_url;
use crate::OhttpError;

/// The `project` value of system entities.
pub const SYSTEM_PROJECT: &str = PRIVSVC_PROJECT;
/// Default heartbeat interval (`HEARTBEAT_MS`): 10 minutes.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration =
    Duration::from_millis(privsvc_ledger::system::HEARTBEAT_INTERVAL_MS);

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
/// `privsvc_ledger::system::live_heartbeats_query`).
pub fn live_window_blocks(interval: Duration) -> u64 {
    let interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX / 2);
    lifetime_blocks((2 * interval_ms).div_ceil(1000))
}

/// All live heartbeats, newest first, parsed with `privsvc_ledger::system::Heartbeat`.
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
