//! The three `Transport` implementations against the same relayer API.

use std::time::Duration;

use privsvc_ohttp::{
    HttpTransport, InProcessTransport, OhttpError, OhttpGateway, OhttpTransport, RelayConfig,
    RelayerRequest, Transport, TransportError,
};

use crate::common::{addr, get, relayer_api, serve, served_stack, Stack};

fn submit(app: &str) -> RelayerRequest {
    RelayerRequest {
        method: "post".into(), // lower case is accepted
        path: "/v1/records".into(),
        body: Some(format!(r#"{{"app":"{app}"}}"#).into_bytes()),
    }
}

fn json(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body).unwrap()
}

/// The same conversation through any transport.
async fn converse(transport: &dyn Transport, relayer_url: &str) {
    let info = transport.send(relayer_url, get("/v1/info")).await.unwrap();
    assert_eq!(info.status, 200);
    assert_eq!(json(&info.body)["address"], addr(0).to_checksum(None));
    let created = transport.send(relayer_url, submit("t")).await.unwrap();
    assert_eq!(created.status, 202);
    assert_eq!(json(&created.body)["app"], "t");
    let missing = transport
        .send(relayer_url, get("/v1/records/x"))
        .await
        .unwrap();
    assert_eq!(missing.status, 404);
    let bad = transport
        .send(
            relayer_url,
            RelayerRequest {
                method: "POST".into(),
                path: "/v1/records".into(),
                body: Some(b"not json".to_vec()),
            },
        )
        .await
        .unwrap();
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn http_transport() {
    let (url, _t) = serve(relayer_api(addr(0), None)).await;
    let transport = HttpTransport::new().unwrap();
    converse(&transport, &url).await;
    let err = transport
        .send("http://127.0.0.1:9", get("/v1/info"))
        .await
        .unwrap_err();
    assert!(matches!(err, TransportError::Http(_)), "{err:?}");
    assert!(matches!(
        transport.send("not a url", get("/v1/info")).await,
        Err(TransportError::InvalidUrl(_))
    ));
}

#[tokio::test]
async fn in_process_transport() {
    let transport = InProcessTransport::new()
        .with_router("http://relayer.test/", relayer_api(addr(0), None))
        .unwrap();
    converse(&transport, "http://relayer.test").await;
    let err = transport
        .send("HTTP://Other.Test/", get("/v1/info"))
        .await
        .unwrap_err();
    // The in-process transport names the relayer it has no router for, in canonical form.
    match OhttpError::from(err) {
        OhttpError::UnknownRelayer(url) => assert_eq!(url, "http://other.test"),
        other => panic!("expected UnknownRelayer, got {other:?}"),
    }
}

async fn stack() -> Stack {
    served_stack(b"transport test seed, 32 bytes..", {
        let mut c = RelayConfig::default();
        c.allow_http = true;
        c
    })
    .await
}

#[tokio::test]
async fn ohttp_transport_with_key_from_heartbeat() {
    let s = stack().await;
    let transport = OhttpTransport::new(&s.relay_url, s.chain.reader.clone())
        .unwrap()
        .with_heartbeat_interval(Duration::from_secs(600));
    converse(&transport, &s.relayer_url).await;
    assert_eq!(
        transport.gateway_key(&s.relayer_url).await.unwrap(),
        s.gateway.public_key()
    );
}

#[tokio::test]
async fn ohttp_transport_refuses_a_url_named_by_two_accounts_unless_bound() {
    let s = stack().await;
    let attacker_key = OhttpGateway::from_seed(b"attacker's gateway seed 32 bytes")
        .unwrap()
        .public_key();
    // Newer heartbeat naming the same URL, by another account, with a key it controls.
    s.chain
        .heartbeat(1, &s.relayer_url, Some(&attacker_key))
        .await;
    // And one whose payload claims the relayer's address without being created by it (not a
    // heartbeat at all: dropped when read).
    s.chain
        .heartbeat_claiming(2, addr(0), &s.relayer_url, Some(&attacker_key))
        .await;
    // Two accounts name the URL: neither is believed (docs/PROTOCOL.md §8.6).
    let transport = OhttpTransport::new(&s.relay_url, s.chain.reader.clone()).unwrap();
    let err = transport.gateway_key(&s.relayer_url).await.unwrap_err();
    assert!(
        matches!(&err, OhttpError::AmbiguousRelayer { accounts, .. } if accounts.len() == 2),
        "{err:?}"
    );
    // Bound to the relayer's account, only that account's heartbeat gives the key.
    transport
        .bind_relayer(&s.relayer_url, addr(0), None)
        .unwrap();
    assert_eq!(
        transport.gateway_key(&s.relayer_url).await.unwrap(),
        s.gateway.public_key()
    );
    converse(&transport, &s.relayer_url).await;
    // Bound to the other account, its key is refused by the confirmation through the relay.
    let other = OhttpTransport::new(&s.relay_url, s.chain.reader.clone()).unwrap();
    other.bind_relayer(&s.relayer_url, addr(1), None).unwrap();
    assert!(matches!(
        other.gateway_key(&s.relayer_url).await,
        Err(OhttpError::NoGatewayKey(_))
    ));
    // A binding with a key uses that key without reading the ledger.
    let given = OhttpTransport::without_ledger(&s.relay_url).unwrap();
    assert!(given.uses_gateway_keys());
    given
        .bind_relayer(&s.relayer_url, addr(0), Some(&s.gateway.public_key()))
        .unwrap();
    assert_eq!(given.relayer_account(&s.relayer_url), Some(addr(0)));
    converse(&given, &s.relayer_url).await;
}

#[tokio::test]
async fn ohttp_transport_reports_a_key_rotation_and_looks_again_only_when_asked() {
    let s = stack().await;
    let transport = OhttpTransport::new(&s.relay_url, s.chain.reader.clone()).unwrap();
    let pinned = OhttpTransport::without_ledger(&s.relay_url).unwrap();
    pinned
        .set_gateway_key(&s.relayer_url, &s.gateway.public_key())
        .unwrap();
    converse(&transport, &s.relayer_url).await;
    assert_eq!(transport.relayer_account(&s.relayer_url), Some(addr(0)));
    let old_key = s.gateway.public_key();

    // The relayer rotates: key 2 becomes current, key 1 is retired, a new heartbeat follows.
    s.gateway
        .add_key(2, b"rotated gateway seed, 32 bytes..")
        .unwrap();
    assert!(s.gateway.remove_key(1));
    let new_key = s.gateway.public_key();
    s.chain.heartbeat(0, &s.relayer_url, Some(&new_key)).await;

    // The old key no longer opens (400): the transport says so and never looks the key up
    // again by itself (docs/PROTOCOL.md §8.6: keys are never re-discovered silently).
    let err = OhttpError::from(
        transport
            .send(&s.relayer_url, get("/v1/info"))
            .await
            .unwrap_err(),
    );
    assert!(matches!(err, OhttpError::GatewayRefused { .. }), "{err:?}");
    assert_eq!(
        transport.gateway_key(&s.relayer_url).await.unwrap(),
        old_key
    );
    assert!(matches!(
        transport
            .send(&s.relayer_url, get("/v1/info"))
            .await
            .map_err(OhttpError::from),
        Err(OhttpError::GatewayRefused { .. })
    ));
    // Asked to, it looks again, in the heartbeats of the relayer's account only.
    transport.forget_gateway_key(&s.relayer_url);
    converse(&transport, &s.relayer_url).await;
    assert_eq!(
        transport.gateway_key(&s.relayer_url).await.unwrap(),
        new_key
    );

    // A key set by hand is never replaced either: the caller sees the gateway's refusal.
    let err = OhttpError::from(
        pinned
            .send(&s.relayer_url, get("/v1/info"))
            .await
            .unwrap_err(),
    );
    assert!(matches!(err, OhttpError::GatewayRefused { .. }), "{err:?}");
}

#[tokio::test]
async fn ohttp_transport_with_explicit_key_and_without_key() {
    let s = stack().await;
    let transport = OhttpTransport::without_ledger(&s.relay_url).unwrap();
    let err = OhttpError::from(
        transport
            .send(&s.relayer_url, get("/v1/info"))
            .await
            .unwrap_err(),
    );
    assert!(matches!(err, OhttpError::NoGatewayKey(_)), "{err:?}");
    assert!(matches!(
        transport.set_gateway_key(&s.relayer_url, "abcd"),
        Err(OhttpError::InvalidKey(_))
    ));
    transport
        .set_gateway_key(&s.relayer_url, &s.gateway.public_key())
        .unwrap();
    converse(&transport, &s.relayer_url).await;
    transport.forget_gateway_key(&s.relayer_url);
    assert!(transport
        .send(&s.relayer_url, get("/v1/info"))
        .await
        .is_err());
}
