//! Entry points shared by the client's fuzz targets (`fuzz/fuzz_targets/client_*.rs`) and their
//! stable seed replay (`tests/it/fuzz_seeds.rs`): what a relayer or a ledger node sends the
//! client during discovery.
//!
//! Each returns whether the input was accepted and panics only when an invariant of an accepted
//! input is broken.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use alloy_primitives::Address;
use privsvc_ledger::entity_from_json;
use privsvc_ledger::Heartbeat;
use privsvc_ohttp::{
    normalize_relayer_url, RelayerRequest, RelayerResponse, Transport, TransportError,
};

use crate::protocol::{InfoResponse, API_VERSION};
use crate::relayer_api::fetch_info;

/// A transport answering every request with status 200 and a fixed body.
struct Canned(Vec<u8>);

impl Transport for Canned {
    fn send<'life0, 'life1, 'async_trait>(
        &'life0 self,
        _relayer_url: &'life1 str,
        _request: RelayerRequest,
    ) -> Pin<Box<dyn Future<Output = Result<RelayerResponse, TransportError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        let body = self.0.clone();
        Box::pin(async move { Ok(RelayerResponse { status: 200, body }) })
    }
}

/// Runs a future that never waits (every await in it is immediately ready).
fn now<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the future waited although nothing it awaits can wait"),
    }
}

/// A `GET /v1/info` answer body (status 200), through [`fetch_info`]. Invariants of an
/// accepted info: it reports API version 1, its address field parses to the returned address,
/// and it serialises back to an info equal to it.
pub fn info(data: &[u8]) -> bool {
    let transport = Canned(data.to_vec());
    let Ok((address, info)) = now(fetch_info(&transport, "http://relayer.test")) else {
        return false;
    };
    assert_eq!(info.version, API_VERSION, "another API version accepted");
    assert_eq!(info.address.parse::<Address>().ok(), Some(address));
    let text = serde_json::to_vec(&info).expect("an info serialises");
    let again: InfoResponse = serde_json::from_slice(&text).expect("a serialised info parses");
    assert_eq!(again, info, "info JSON round trip changed it");
    true
}

/// One heartbeat entity as `arkiv_query` returns it (an `RpcEntity` JSON object with creator,
/// createdAt, attributes and payload), parsed as discovery does
/// (`privsvc_ohttp::live_heartbeats`): `Heartbeat::from_entity`, then the URL
/// normalised. Invariants of an accepted heartbeat: it names its creator's address (a heartbeat
/// cannot speak for another relayer), its `url` attribute equals the payload's, and the
/// normalised URL is a fixed point of normalisation.
pub fn heartbeat(data: &[u8]) -> bool {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return false;
    };
    let Ok(entity) = entity_from_json(&value) else {
        return false;
    };
    let (Some(creator), Some(_created_at)) = (entity.creator, entity.created_at) else {
        return false;
    };
    let Ok(hb) = Heartbeat::from_entity(&entity) else {
        return false;
    };
    let Ok(url) = normalize_relayer_url(&hb.url) else {
        return false;
    };
    assert_eq!(hb.address, creator, "heartbeat speaks for another address");
    let url_attr = entity
        .attributes
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|a| a.name == "url")
        .map(|a| a.value.clone());
    assert_eq!(
        url_attr,
        Some(privsvc_ledger::ArkivValue::Str(hb.url.clone())),
        "url attribute differs from the payload"
    );
    assert_eq!(
        normalize_relayer_url(&url).ok().as_deref(),
        Some(url.as_str()),
        "normalised URL is not a fixed point"
    );
    true
}
