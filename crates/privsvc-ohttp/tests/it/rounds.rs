//! The relay's rounds on loopback (`RelayConfig::round`, `ROUND_MS`): requests are held until
//! the end of their round, forwarded together in a random order, and each answer goes back to
//! its sender; over `max_held` held requests, 503 with a JSON error.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::routing::post;
use privsvc_ohttp::{OhttpRelay, RelayConfig};

use crate::common::{addr, relayer_api, serve, serve_recording, Chain};

type Arrivals = Arc<Mutex<Vec<(Instant, Vec<u8>)>>>;

/// A relayer (dev account 0, verified from its heartbeat) whose `POST /v1/ohttp` records when
/// each body arrives and answers it with the body itself; and a relay with `config`, served.
async fn recorded_relay(config: RelayConfig) -> (Chain, OhttpRelay, String, String, Arrivals) {
    let arrivals: Arrivals = Arc::default();
    let seen = arrivals.clone();
    let target = relayer_api(addr(0), None).route(
        "/v1/ohttp",
        post(move |body: Bytes| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push((Instant::now(), body.to_vec()));
                ([("content-type", "message/ohttp-res")], body)
            }
        }),
    );
    let (target_url, _peers, _task) = serve_recording(target, "127.0.0.1").await;
    let chain = Chain::start().await;
    chain.heartbeat(0, &target_url, None).await;
    let relay = OhttpRelay::new(chain.reader.clone(), config).unwrap();
    assert_eq!(relay.refresh().await.unwrap(), 1);
    let (relay_url, _relay_task) = serve(relay.router()).await;
    (chain, relay, relay_url, target_url, arrivals)
}

fn config(round: Duration) -> RelayConfig {
    let mut c = RelayConfig::default();
    c.heartbeat_interval = Duration::from_secs(10);
    c.allow_http = true;
    c.on_demand_refresh_gap = Duration::from_secs(3600);
    c.round = round;
    c
}

/// POST `body` to the relay for `target`: (status, answer body).
async fn send(relay_url: String, target: String, body: Vec<u8>) -> (u16, Vec<u8>) {
    let r = reqwest::Client::new()
        .post(format!("{relay_url}/ohttp"))
        .header("content-type", "message/ohttp-req")
        .header("x-privsvc-target", target)
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

#[tokio::test]
async fn a_round_is_held_then_forwarded_together_in_a_random_order() {
    const ROUND: Duration = Duration::from_millis(500);
    const N: usize = 6;
    const TRIALS: usize = 12;
    let (_chain, relay, relay_url, target, arrivals) = recorded_relay(config(ROUND)).await;
    // The answer of a first request comes just after a round's end: each trial below starts
    // there, and sends its N requests well within one round.
    let (status, _) = send(relay_url.clone(), target.clone(), vec![0xff; 8]).await;
    assert_eq!(status, 200);
    let mut in_arrival_order = 0;
    for trial in 0..TRIALS {
        arrivals.lock().unwrap().clear();
        let mut sent = Vec::new();
        for i in 0..N {
            let body = vec![i as u8; 64];
            sent.push(tokio::spawn(send(relay_url.clone(), target.clone(), body)));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let last_sent = Instant::now();
        for (i, task) in sent.into_iter().enumerate() {
            // Each answer goes back to its own sender.
            assert_eq!(
                task.await.unwrap(),
                (200, vec![i as u8; 64]),
                "trial {trial}"
            );
        }
        let arrived = std::mem::take(&mut *arrivals.lock().unwrap());
        assert_eq!(arrived.len(), N, "trial {trial}");
        // Held: nothing reached the relayer before the last request of the round was sent.
        assert!(
            arrived.iter().all(|(at, _)| *at >= last_sent),
            "trial {trial}: a request was forwarded before its round ended"
        );
        // Together: the round leaves at once, not spread like the arrivals.
        let first = arrived.iter().map(|(at, _)| *at).min().unwrap();
        let last = arrived.iter().map(|(at, _)| *at).max().unwrap();
        assert!(
            last - first < ROUND / 2,
            "trial {trial}: {:?}",
            last - first
        );
        let order: Vec<u8> = arrived.iter().map(|(_, body)| body[0]).collect();
        if order == (0..N as u8).collect::<Vec<_>>() {
            in_arrival_order += 1;
        }
    }
    // Shuffled: a round keeps its arrival order with probability 1/720.
    assert!(
        in_arrival_order <= 2,
        "{in_arrival_order} of {TRIALS} rounds left in arrival order"
    );
    assert!(relay.rounds() > TRIALS as u64);
    assert_eq!(relay.held(), 0);
}

#[tokio::test]
async fn over_max_held_requests_are_refused_with_503_and_the_held_ones_still_go() {
    let mut c = config(Duration::from_millis(1_500));
    c.max_held = 2;
    let (_chain, relay, relay_url, target, arrivals) = recorded_relay(c).await;
    let first = tokio::spawn(send(relay_url.clone(), target.clone(), vec![1; 8]));
    let second = tokio::spawn(send(relay_url.clone(), target.clone(), vec![2; 8]));
    let deadline = Instant::now() + Duration::from_secs(1);
    while relay.held() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(relay.held(), 2);
    let r = reqwest::Client::new()
        .post(format!("{relay_url}/ohttp"))
        .header("content-type", "message/ohttp-req")
        .header("x-privsvc-target", &target)
        .body(vec![3u8; 8])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    let v: serde_json::Value = r.json().await.unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("too many requests"),
        "{v}"
    );
    assert_eq!(first.await.unwrap(), (200, vec![1; 8]));
    assert_eq!(second.await.unwrap(), (200, vec![2; 8]));
    assert_eq!(arrivals.lock().unwrap().len(), 2);

    // The counters, on the relay's separate metrics listener.
    let (metrics_url, _task) = serve(relay.metrics_router()).await;
    let m = reqwest::get(format!("{metrics_url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "privsvc_relay_forwarded_total 2\n",
        "privsvc_relay_rounds_total 1\n",
        "privsvc_relay_held 0\n",
        "privsvc_relay_refused_full_total 1\n",
    ] {
        assert!(m.contains(line), "{line}: {m}");
    }
    // Not on the public router.
    let r = reqwest::get(format!("{relay_url}/metrics")).await.unwrap();
    assert_ne!(r.status().as_u16(), 200);
}

#[tokio::test]
async fn without_rounds_a_request_is_forwarded_at_once() {
    let (_chain, relay, relay_url, target, arrivals) = recorded_relay(config(Duration::ZERO)).await;
    let started = Instant::now();
    assert_eq!(send(relay_url, target, vec![7; 8]).await, (200, vec![7; 8]));
    let arrived = arrivals.lock().unwrap().clone();
    assert_eq!(arrived.len(), 1);
    assert!(arrived[0].0 >= started);
    assert_eq!((relay.rounds(), relay.held()), (0, 0));
}
