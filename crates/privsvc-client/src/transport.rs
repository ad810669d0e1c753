//! The default transport: plain HTTP, or OHTTP through `ohttp_relay`.

use std::sync::Arc;

use privsvc_ledger::LedgerReader;
use privsvc_ohttp::{HttpTransport, OhttpTransport, Transport};

use crate::error::PrivsvcError;
use crate::options::ClientOptions;

/// The transport a client uses when none was given: [`OhttpTransport`] through the relay when
/// `ohttp_relay` is set (gateway keys from heartbeats), else [`HttpTransport`].
pub fn default_transport(
    options: &ClientOptions,
    reader: Arc<dyn LedgerReader>,
) -> Result<Arc<dyn Transport>, PrivsvcError> {
    Ok(match &options.ohttp_relay {
        Some(relay) => Arc::new(OhttpTransport::new(relay, reader)?),
        None => Arc::new(HttpTransport::new()?),
    })
}
