//! Reading live relayer heartbeats from the ledger (what the relay verifies targets against and
//! where `OhttpTransport` finds gateway keys).
//!
//! A heartbeat is a system entity with `project = "privsvc-7f3k"`, `privsvc_kind = "heartbeat"`
//! and a JSON payload `{url, address, chainId, version, ohttpKey?}`; it is live when it was
//! created within the last two heartbeat intervals.

use std::time::Duration;

use alloy_primitives::Address;
use privsvc_ledger::{LedgerReader, QueryOptions, Select};
use serde::Deserialize;

use crate::http_util::normalize_relayer_url;
use crate::OhttpError;

/// The `project` value of system entities.
pub const SYSTEM_PROJECT: &str = "privsvc-7f3k";
/// Default heartbeat interval (`HEARTBEAT_MS`): 10 minutes.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(600);
/// Ledger block time.
const BLOCK_TIME_SECONDS: u64 = 2;
/// Page size of the heartbeat query.
const PAGE: u32 = 200;

/// A live heartbeat as the OHTTP code needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveHeartbeat {
    /// The relayer URL it names, normalised ([`normalize_relayer_url`]).
    pub url: String,
    /// The account that created the heartbeat entity.
    pub creator: Address,
    /// The address the payload claims.
    pub address: Option<Address>,
    /// The gateway key configuration (hex), when OHTTP is on.
    pub ohttp_key: Option<String>,
    /// Block of creation.
    pub created_at: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Payload {
    url: String,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    ohttp_key: Option<String>,
}

/// The number of blocks in two heartbeat intervals (the liveness window).
pub fn live_window_blocks(interval: Duration) -> u64 {
    (2 * interval.as_secs()).div_ceil(BLOCK_TIME_SECONDS).max(1)
}

/// All live heartbeats, newest first. Entities with an unreadable payload or URL are skipped.
pub async fn live_heartbeats(
    reader: &dyn LedgerReader,
    interval: Duration,
) -> Result<Vec<LiveHeartbeat>, OhttpError> {
    let expression =
        format!("project = str('{SYSTEM_PROJECT}') AND privsvc_kind = str('heartbeat')");
    let select = Select {
        key: true,
        creator: true,
        created_at: true,
        payload: true,
        ..Select::default()
    };
    let mut options = QueryOptions {
        select,
        limit: Some(PAGE),
        ..QueryOptions::default()
    };
    let mut entities = Vec::new();
    let head = loop {
        let page = reader.query(&expression, &options).await?;
        entities.extend(page.entities);
        match page.cursor {
            Some(cursor) => {
                options.at_block = Some(page.block_number);
                options.cursor = Some(cursor);
            }
            None => break page.block_number,
        }
    };
    let oldest = head.saturating_sub(live_window_blocks(interval));
    let mut live: Vec<LiveHeartbeat> = entities
        .into_iter()
        .filter_map(|e| {
            let created_at = e.created_at?;
            if created_at < oldest {
                return None;
            }
            let payload: Payload = serde_json::from_slice(e.payload.as_deref()?).ok()?;
            Some(LiveHeartbeat {
                url: normalize_relayer_url(&payload.url).ok()?,
                creator: e.creator?,
                address: payload.address.and_then(|a| a.parse().ok()),
                ohttp_key: payload.ohttp_key.filter(|k| !k.is_empty()),
                created_at,
            })
        })
        .collect();
    live.sort_by_key(|h| std::cmp::Reverse(h.created_at));
    Ok(live)
}
