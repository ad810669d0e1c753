//! Privacy: a full submission flow logged at trace level never shows the client's address, the
//! body, the envelope, the owner or the token.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn trace_logs_of_a_full_flow_hold_no_address_and_no_body() {
    let capture = Capture::default();
    let sink = capture.clone();
    // Everything at trace. `ohttp=off` is the directive every binary must carry
    // (privsvc_ohttp::SILENCE_OHTTP_LOGS).
    let filter =
        tracing_subscriber::EnvFilter::new(format!("trace,{}", privsvc_ohttp::SILENCE_OHTTP_LOGS));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .init();

    let node = devnet().await;
    let issuer = TestIssuer::publish(&node, 1, APP, &[today()]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.public_url = Some("http://relayer.test".into());
    c.tokens = privsvc_relayer::TokenMode::Required;
    c.issuer.address = Some(issuer.address);
    c.issuer.url = Some("http://issuer.test".into());
    let relayer = start(&node, 0, c).await;
    let base = format!("http://{}", relayer.local_addr());
    let (mut b, owner) = record_body(APP, 3600, b"secret-payload-marker");
    let token = issuer.token(APP, today());
    b["token"] = serde_json::to_value(&token).unwrap();
    let id = submit(&base, &b).await;
    wait_state(&base, &id, "written", Duration::from_secs(30)).await;
    // A refused one too (spent token), and a malformed one.
    let (mut b2, _) = record_body(APP, 3600, b"x");
    b2["token"] = serde_json::to_value(&token).unwrap();
    assert_eq!(post(&base, "/v1/records", &b2).await.0, 403);
    assert_eq!(
        post(&base, "/v1/records", &serde_json::json!({"owner": "0xzz"}))
            .await
            .0,
        400
    );
    relayer.shutdown().await;

    let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("batch written"), "the capture works: {text}");
    let envelope = b["envelope"].as_str().unwrap().trim_end();
    let sig = &envelope[envelope.find("0x").unwrap()..][..40];
    // axum logs each accepted connection at trace; the relayer's listener prints no address.
    assert!(
        text.contains("connection <peer> accepted"),
        "server-side trace logs are captured"
    );
    for needle in [
        "127.0.0.2".to_string(),
        owner.to_string(),
        owner.to_string().to_lowercase(),
        token.nonce.clone(),
        token.signature[..32].to_string(),
        sig.to_string(),
        "secret-payload-marker".to_string(),
        "c2VjcmV0".to_string(),
        "0xzz".to_string(),
    ] {
        assert!(!text.contains(&needle), "log holds {needle:?}:\n{text}");
    }
}
