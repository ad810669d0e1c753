//! What a network watcher sees of a relayer (docs/PROTOCOL.md §6, §7, §9.4): status answers of
//! one length in every state, dummies answered by the gateway alone, decoy records in batches,
//! and cover traffic counted on `METRICS_BIND` only.

use std::time::Duration;

use privsvc_attributes::{AttrValue, Attributes};
use privsvc_ledger::{ArkivValue, QueryOptions, Select};
use privsvc_relayer::OhttpSeed;
use serde_json::{json, Value};

use crate::common::*;

const T: Duration = Duration::from_secs(30);

/// The raw answer to `GET path`: status and body bytes.
async fn raw_get(url: &str, path: &str) -> (u16, Vec<u8>) {
    let r = http().get(format!("{url}{path}")).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.bytes().await.unwrap().to_vec())
}

/// `request` through the relayer's gateway (no relay): the encapsulated answer's length and
/// the opened answer.
async fn through_gateway(
    url: &str,
    key: &str,
    request: &privsvc_ohttp::BinaryRequest,
    at_least: usize,
) -> (usize, privsvc_ohttp::OhttpResponse) {
    let authority = url.trim_start_matches("http://");
    let (msg, pending) =
        privsvc_ohttp::encapsulate_at_least(key, request, "http", authority, at_least).unwrap();
    let r = post_ohttp(url, msg).await;
    assert_eq!(r.status().as_u16(), 200);
    let sealed = r.bytes().await.unwrap();
    (sealed.len(), pending.open(&sealed).unwrap())
}

fn status_request(id: &str) -> privsvc_ohttp::BinaryRequest {
    privsvc_ohttp::BinaryRequest {
        method: "GET".into(),
        path: format!("/v1/records/{id}"),
        headers: vec![("accept".into(), "application/json".into())],
        body: Vec::new(),
    }
}

async fn metrics_text(relayer: &privsvc_relayer::Relayer) -> String {
    let addr = relayer.metrics_addr().expect("METRICS_BIND on");
    http()
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn status_answers_of_every_state_measure_the_same_and_give_no_queue_figure() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.batching.min_batch = 1;
        c.batching.max_wait = Duration::from_millis(1_000);
        c.ohttp_seed = Some(OhttpSeed::new([9u8; 32]));
    })
    .await;
    let url = relayer.url().to_string();
    let written = submit(&url, &body()).await;
    wait_state(&url, &written, "written", T).await;
    let mut lonely = body();
    lonely["minAnonymity"] = json!(4);
    lonely["maxHoldMs"] = json!(1_500);
    let failed = submit(&url, &lonely).await;
    wait_state(&url, &failed, "failed", T).await;
    let mut held = body();
    held["minAnonymity"] = json!(5);
    held["maxHoldMs"] = json!(600_000);
    let queued = submit(&url, &held).await;
    for _ in 0..3 {
        submit(&url, &held).await;
    }
    let unknown = "00000000-0000-4000-8000-000000000000".to_string();
    let odd = format!("{}%22%5C%01", "y".repeat(300));

    let mut answers = Vec::new();
    for (id, status, state) in [
        (&written, 200, json!("written")),
        (&failed, 200, json!("failed")),
        (&queued, 200, json!("queued")),
        (&unknown, 404, Value::Null),
        (&odd, 404, Value::Null),
    ] {
        let (code, bytes) = raw_get(&url, &format!("/v1/records/{id}")).await;
        assert_eq!(code, status, "{id}");
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["state"], state, "{v}");
        assert!(v.get("position").is_none(), "{v}");
        let keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        answers.push((bytes.len(), keys));
    }
    let (len, keys) = answers[0].clone();
    assert_eq!(len, 512);
    for a in &answers {
        assert_eq!(a, &(len, keys.clone()));
    }

    // Through OHTTP: every answer is in the same class, and so is a dummy's.
    let key = get(&url, "/v1/info").await.1["ohttpKey"]
        .as_str()
        .unwrap()
        .to_string();
    let mut sealed = Vec::new();
    for id in [&written, &failed, &queued, &unknown] {
        sealed.push(through_gateway(&url, &key, &status_request(id), 0).await.0);
    }
    let dummy = privsvc_ohttp::dummy_request(0);
    sealed.push(through_gateway(&url, &key, &dummy, 0).await.0);
    assert_eq!(sealed, vec![1_024 + 32; 5]);
    relayer.shutdown().await;
}

#[tokio::test]
async fn a_dummy_is_answered_by_the_gateway_alone_and_counted_apart() {
    let (_node, _dir, relayer) = devnet_and_relayer(|c| {
        c.ohttp_seed = Some(OhttpSeed::new([5u8; 32]));
        c.metrics_bind = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let url = relayer.url().to_string();
    let key = get(&url, "/v1/info").await.1["ohttpKey"]
        .as_str()
        .unwrap()
        .to_string();
    // Padded like a submission, answered in the class of a status answer.
    let dummy = privsvc_ohttp::dummy_request(0);
    let (len, answer) = through_gateway(&url, &key, &dummy, 32_768).await;
    assert_eq!((len, answer.status), (1_024 + 32, 200));
    assert_eq!(answer.body, privsvc_ohttp::DUMMY_ANSWER);
    let (len, answer) = through_gateway(&url, &key, &status_request("x"), 0).await;
    assert_eq!((len, answer.status), (1_024 + 32, 404));
    // The route does not exist outside OHTTP.
    let (status, _) = post(&url, "/v1/dummy", &json!({})).await;
    assert_eq!(status, 404);

    let m = metrics_text(&relayer).await;
    assert!(
        m.contains("privsvc_ohttp_requests_total{kind=\"dummy\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("privsvc_ohttp_requests_total{kind=\"real\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("privsvc_submissions_total{status=\"202\"} 0"),
        "{m}"
    );
    assert!(m.contains("privsvc_queue_length 0"), "{m}");
    for path in ["/healthz", "/v1/info"] {
        let (_, bytes) = raw_get(&url, path).await;
        let text = String::from_utf8(bytes).unwrap();
        assert!(!text.contains("dummy") && !text.contains("decoy"), "{text}");
    }
    relayer.shutdown().await;
}

/// The ledger's attributes of a record as privsvc attributes (str and i32 are all the test
/// records use).
fn attributes_of(entity: &privsvc_ledger::Entity) -> Attributes {
    let mut out = Attributes::new();
    for a in entity.attributes.as_deref().unwrap_or_default() {
        let value = match &a.value {
            ArkivValue::Str(s) => AttrValue::Str(s.clone()),
            ArkivValue::I32(v) => AttrValue::I32(*v),
            other => panic!("unexpected attribute {other:?}"),
        };
        out.insert(a.name.clone(), value).unwrap();
    }
    out
}

#[tokio::test]
async fn decoys_land_as_records_that_verify_and_are_counted_only_in_metrics() {
    const RECORDS: usize = 3;
    let (node, _dir, relayer) = devnet_and_relayer(|c| {
        c.batching.min_batch = RECORDS;
        c.batching.max_wait = Duration::from_secs(600);
        c.batching.decoys_max = 6;
        c.metrics_bind = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let url = relayer.url().to_string();
    let ledger = reader(&node);
    let (mut decoys, mut batches) = (0usize, 0usize);
    // 0 to 6 decoys per batch: five batches without any happen with probability (1/7)^5.
    while batches < 5 && (decoys == 0 || batches < 2) {
        let mut ids = Vec::new();
        let mut owners = Vec::new();
        for i in 0..RECORDS {
            let (b, owner) = record_body(APP, 3_600, format!("record {i}").as_bytes());
            ids.push(submit(&url, &b).await);
            owners.push(owner);
        }
        let mut block = None;
        for id in &ids {
            let st = wait_state(&url, id, "written", T).await;
            // batchSize counts the records of the batch, never its decoys.
            assert_eq!(st["batchSize"], RECORDS as u64, "{st}");
            block = Some(st["block"].as_str().unwrap().to_string());
        }
        batches += 1;
        let mut options = QueryOptions::new(Select {
            key: true,
            owner: true,
            attributes: privsvc_ledger::AttributeSelect::All,
            payload: true,
            ..Select::default()
        });
        options.limit = Some(200);
        let expr = format!(
            "$creator = addr({}) AND $createdAt = u64({}) AND NOT project = str('{}')",
            relayer.address(),
            block.unwrap(),
            privsvc_ledger::PRIVSVC_PROJECT
        );
        let page = ledger.query(&expr, &options).await.unwrap();
        assert!(page.entities.len() >= RECORDS);
        for e in &page.entities {
            // Every entity of the batch, decoy or not, is a record that verifies: a sealed
            // envelope signed by the entity's owner over its attributes, of the batch's app.
            let sealed = privsvc_envelope::parse_envelope(e.payload.as_deref().unwrap()).unwrap();
            let signer = privsvc_envelope::envelope_signer(&sealed, &attributes_of(e)).unwrap();
            assert_eq!(Some(signer), e.owner);
            assert_eq!(sealed.body.app, APP);
            assert_eq!(sealed.body.exp, 3_600);
        }
        let real = page
            .entities
            .iter()
            .filter(|e| e.owner.is_some_and(|o| owners.contains(&o)))
            .count();
        assert_eq!(real, RECORDS);
        decoys += page.entities.len() - RECORDS;
    }
    assert!(decoys > 0, "no decoy in {batches} batches");
    let m = metrics_text(&relayer).await;
    assert!(
        m.contains(&format!("privsvc_decoys_written_total {decoys}\n")),
        "{decoys}: {m}"
    );
    assert!(
        m.contains(&format!(
            "privsvc_records_written_total {}\n",
            RECORDS * batches
        )),
        "{m}"
    );
    assert!(
        m.contains(&format!("privsvc_batch_size_sum {}\n", RECORDS * batches)),
        "{m}"
    );
    let health = get(&url, "/healthz").await.1.to_string();
    assert!(!health.contains("decoy"), "{health}");
    relayer.shutdown().await;
}
