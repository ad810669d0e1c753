//! The `ohttp` crate logs HPKE and key-schedule material at TRACE through the `log` crate.
//! privsvc-ohttp compiles every `log` record above DEBUG out of the build (the `log` features
//! `max_level_debug` and `release_max_level_debug`), so no binary that links it can log them,
//! whatever its filter: this test captures everything at TRACE, with the `log` bridge and
//! without `SILENCE_OHTTP_LOGS`, around a full request and response.
//!
//! One test per process: it installs the global subscriber.

use std::io::Write;
use std::sync::{Arc, Mutex};

use privsvc_ohttp::{OhttpGateway, RelayerRequest};

/// Everything the subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn no_ohttp_trace_reaches_a_trace_subscriber() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("trace"))
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .try_init()
        .expect("global subscriber");
    assert!(
        log::log_enabled!(target: "privsvc_probe", log::Level::Debug),
        "the log bridge is installed and passes DEBUG"
    );
    log::debug!(target: "privsvc_probe", "probe");

    let gateway = OhttpGateway::from_seed(b"trace capture seed, 32 bytes ok.").unwrap();
    let request = RelayerRequest {
        method: "POST".into(),
        path: "/v1/records".into(),
        body: Some(b"{}".to_vec()),
    };
    let (message, pending) = privsvc_ohttp::encapsulate(
        &gateway.public_key(),
        &privsvc_ohttp::to_binary_request(&request),
        "http",
        "relayer.test",
    )
    .unwrap();
    let (inner, sealer) = gateway.open(&message).unwrap();
    assert_eq!(inner.path, "/v1/records");
    let response = sealer.seal(200, &[], b"answer").unwrap();
    assert_eq!(pending.open(&response).unwrap().status, 200);

    let text = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    assert!(text.contains("probe"), "the capture works: {text}");
    assert!(
        !text.contains("ohttp::") && !text.contains("HPKE") && !text.contains("key pair"),
        "the ohttp crate's TRACE records reached the subscriber:\n{text}"
    );
}
