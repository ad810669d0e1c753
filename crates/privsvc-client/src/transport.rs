//! The default transport: plain HTTP, or OHTTP through `ohttp_relay`.

use std::sync::Arc;

use privsvc_ledger::LedgerReader;
use privsvc_ohttp::{HttpTransport, OhttpTransport, Transport};

use crate::error::PrivsvcError;
use crate::options::ClientOptions;

/// The transport a client uses when none was given: [`OhttpTransport`] through the relay when
/// `ohttp_relay` is set (gateway keys from heartbeats), else [`HttpTransport`]; both send
/// with `options.fetch` when it is set.
pub fn default_transport(
    options: &ClientOptions,
    reader: Arc<dyn LedgerReader>,
) -> Result<Arc<dyn Transport>, PrivsvcError> {
    Ok(match (&options.ohttp_relay, &options.fetch) {
        (Some(relay), None) => Arc::new(OhttpTransport::new(relay, reader)?),
        (Some(relay), Some(fetch)) => {
            Arc::new(OhttpTransport::new(relay, reader)?.with_fetch(fetch.clone()))
        }
        (None, None) => Arc::new(HttpTransport::new()?),
        (None, Some(fetch)) => Arc::new(HttpTransport::with_fetch(fetch.clone())),
    })
}
