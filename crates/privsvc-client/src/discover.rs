//! Finding relayers from their heartbeat entities on the ledger.

use privsvc_ledger::LedgerReader;
use privsvc_ohttp::heartbeat::{live_heartbeats, DEFAULT_HEARTBEAT_INTERVAL};
use privsvc_ohttp::Transport;

pub use privsvc_ohttp::heartbeat::LiveHeartbeat;

use crate::error::PrivsvcError;
use crate::relayer_api::{fetch_info, RelayerStatus};

/// Every live heartbeat on the ledger (newest first), unverified.
pub async fn heartbeat_relayers(
    reader: &dyn LedgerReader,
) -> Result<Vec<LiveHeartbeat>, PrivsvcError> {
    Ok(live_heartbeats(reader, DEFAULT_HEARTBEAT_INTERVAL).await?)
}

/// Live relayers whose `GET /v1/info` (sent through `transport`) answers the heartbeat creator's
/// address and the heartbeat's `ohttpKey`. One entry per URL (the newest heartbeat wins).
pub async fn discover_relayers(
    reader: &dyn LedgerReader,
    transport: &dyn Transport,
) -> Result<Vec<RelayerStatus>, PrivsvcError> {
    let mut out: Vec<RelayerStatus> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for hb in heartbeat_relayers(reader).await? {
        if !seen.insert(hb.url.clone()) {
            continue;
        }
        if hb.address.is_some_and(|a| a != hb.creator) {
            tracing::warn!(relayer = %hb.url, "heartbeat payload names another address than its creator");
            continue;
        }
        match fetch_info(transport, &hb.url).await {
            Ok((address, info)) => {
                if address != hb.creator {
                    tracing::warn!(relayer = %hb.url, "relayer info address differs from its heartbeat creator");
                    continue;
                }
                if info.ohttp_key.as_deref().map(str::trim)
                    != hb.ohttp_key.as_deref().map(str::trim)
                {
                    tracing::warn!(relayer = %hb.url, "relayer info ohttpKey differs from its heartbeat");
                    continue;
                }
                out.push(RelayerStatus {
                    url: hb.url,
                    address,
                    bad: false,
                    info,
                });
            }
            Err(e) => {
                tracing::warn!(relayer = %hb.url, error = %e, "heartbeat relayer unreachable")
            }
        }
    }
    Ok(out)
}
