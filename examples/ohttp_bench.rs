//! OHTTP benchmark on loopback:
//!
//! 1. gateway throughput: `OhttpGateway::open` + `ResponseSealer::seal` of a typical
//!    `POST /v1/records` (a 1 KB envelope in a JSON submit body), on one core and on all cores;
//! 2. the latency a relay adds: `GET /v1/info` to a relayer directly versus through the OHTTP
//!    relay and the relayer's gateway (client encapsulation and decapsulation included), with
//!    p50, p99 and mean.
//!
//! ```text
//! cargo run --release --example ohttp_bench
//! BENCH_OPS=50000 BENCH_CALLS=5000 cargo run --release --example ohttp_bench
//! ```
//!
//! The relay verifies its target from a heartbeat written to an embedded devnet (the ledger is
//! not on the measured path: verification happens once, before measuring).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::{get, post};
use axum::{Json, Router};
use privsvc_devnet::{DevSigner, Devnet, DevnetConfig, DEV_PRIVATE_KEYS};
use privsvc_ledger::Heartbeat;
use privsvc_ledger::{LedgerReader, LedgerWriter, Operation, RpcLedger, RpcWriter};
use privsvc_ohttp::{
    encapsulate, gateway_router, ohttp_call, BinaryRequest, HttpTransport, OhttpGateway,
    OhttpRelay, RelayConfig, RelayerRequest, Transport,
};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn submit_body() -> Vec<u8> {
    let envelope = "x".repeat(1024);
    serde_json::to_vec(&serde_json::json!({
        "app": "benchapp",
        "owner": "0x00000000000000000000000000000000000000aa",
        "envelope": envelope,
        "attributes": {"project": {"type": "str", "value": "benchapp"}},
        "expSeconds": 86400,
    }))
    .expect("json")
}

/// Open + seal `messages` on the current thread; returns the elapsed time.
fn open_seal_all(gateway: &OhttpGateway, messages: &[Vec<u8>]) -> Duration {
    let answer = br#"{"id":"0b1e5a4c-8d7e-4c1e-9a57-3f0e7d2a9c11"}"#;
    let headers = vec![("content-type".to_string(), "application/json".to_string())];
    let start = Instant::now();
    for message in messages {
        let (request, sealer) = gateway.open(message).expect("open");
        assert_eq!(request.method, "POST");
        let sealed = sealer.seal(202, &headers, answer).expect("seal");
        std::hint::black_box(sealed);
    }
    start.elapsed()
}

fn gateway_throughput(ops: usize) -> anyhow::Result<()> {
    let gateway = Arc::new(OhttpGateway::from_seed(&[42u8; 32])?);
    let key = gateway.public_key();
    let request = BinaryRequest {
        method: "POST".into(),
        path: "/v1/records".into(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: submit_body(),
    };
    let messages: Vec<Vec<u8>> = (0..ops)
        .map(|_| encapsulate(&key, &request, "https", "relayer.example").map(|(m, _)| m))
        .collect::<Result<_, _>>()?;
    println!(
        "gateway: {} requests of {} bytes encapsulated ({} bytes of body)",
        ops,
        messages[0].len(),
        request.body.len()
    );

    let _ = open_seal_all(&gateway, &messages[..ops.min(500)]); // warm-up
    let one = open_seal_all(&gateway, &messages);
    println!(
        "gateway open+seal, 1 core:  {:>9.0} /s  ({:.1} us each)",
        ops as f64 / one.as_secs_f64(),
        one.as_secs_f64() * 1e6 / ops as f64
    );

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = ops.div_ceil(cores);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for part in messages.chunks(chunk) {
            let gateway = gateway.clone();
            scope.spawn(move || open_seal_all(&gateway, part));
        }
    });
    let all = start.elapsed();
    println!(
        "gateway open+seal, {cores} cores: {:>9.0} /s",
        ops as f64 / all.as_secs_f64()
    );
    Ok(())
}

async fn serve(router: Router) -> anyhow::Result<String> {
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", tcp.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(privsvc_ohttp::PrivateListener::anonymous(tcp), router).await;
    });
    Ok(url)
}

fn summary(name: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let pick = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name:<22} p50 {:>8.1} us   p99 {:>8.1} us   mean {:>8.1} us",
        pick(0.5).as_secs_f64() * 1e6,
        pick(0.99).as_secs_f64() * 1e6,
        mean.as_secs_f64() * 1e6
    );
    pick(0.5)
}

async fn relay_latency(calls: usize) -> anyhow::Result<()> {
    let node = Devnet::start(DevnetConfig::on_demand()).await?;
    let address = DevSigner::dev(0).address();
    let gateway = Arc::new(OhttpGateway::from_seed(&[7u8; 32])?);
    let key = gateway.public_key();
    let info = serde_json::json!({
        "address": address.to_checksum(None),
        "version": "privsvc-relayer/1",
        "chainId": node.chain_id(),
        "ohttpKey": key,
    });
    let api = Router::new()
        .route("/v1/info", get(move || async move { Json(info.clone()) }))
        .route(
            "/v1/records",
            post(|| async { Json(serde_json::json!({"id": "x"})) }),
        );
    let relayer_url = serve(api.clone().merge(gateway_router(Some(gateway), api))).await?;

    // The relayer's heartbeat, written by its account.
    let secret: [u8; 32] = hex::decode(DEV_PRIVATE_KEYS[0].trim_start_matches("0x"))?
        .try_into()
        .map_err(|_| anyhow::anyhow!("dev key length"))?;
    let writer = RpcWriter::connect(RpcLedger::new(node.url())?, &secret).await?;
    let heartbeat = Heartbeat {
        url: relayer_url.clone(),
        address,
        chain_id: node.chain_id(),
        version: "privsvc-relayer/1".into(),
        ohttp_key: Some(key.clone()),
    };
    let receipt = writer
        .execute(&[Operation::Create(heartbeat.to_create(1)?)])
        .await?;
    anyhow::ensure!(receipt.success, "heartbeat reverted");

    let reader: Arc<dyn LedgerReader> = Arc::new(RpcLedger::new(node.url())?);
    let relay = OhttpRelay::new(reader, {
        let mut c = RelayConfig::default();
        c.allow_http = true;
        c
    })?;
    anyhow::ensure!(
        relay.refresh().await? == 1,
        "relay did not verify its target"
    );
    let relay_url = serve(relay.router()).await?;

    let direct = HttpTransport::new()?;
    let http = privsvc_ohttp::ReqwestFetch::with_client(reqwest::Client::new());
    let info = || RelayerRequest {
        method: "GET".into(),
        path: "/v1/info".into(),
        body: None,
    };
    for _ in 0..200 {
        direct.send(&relayer_url, info()).await?;
        ohttp_call(&relay_url, &relayer_url, &key, info(), &http).await?;
    }
    let mut direct_samples = Vec::with_capacity(calls);
    let mut relayed_samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        let answer = direct.send(&relayer_url, info()).await?;
        direct_samples.push(start.elapsed());
        anyhow::ensure!(answer.status == 200);
        let start = Instant::now();
        let answer = ohttp_call(&relay_url, &relayer_url, &key, info(), &http).await?;
        relayed_samples.push(start.elapsed());
        anyhow::ensure!(answer.status == 200);
    }
    println!("GET /v1/info on loopback, {calls} sequential calls each:");
    let d = summary("direct", direct_samples);
    let r = summary("via relay + gateway", relayed_samples);
    println!(
        "added latency (p50):   {:.1} us",
        (r.as_secs_f64() - d.as_secs_f64()) * 1e6
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let ops = env_usize("BENCH_OPS", 20_000).max(1);
    let calls = env_usize("BENCH_CALLS", 2_000).max(1);
    gateway_throughput(ops)?;
    relay_latency(calls).await
}
