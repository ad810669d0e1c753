//! The client against active adversaries (docs/PROTOCOL.md §8), with the real devnet and real
//! relayers over loopback:
//!
//! * a recording JSON-RPC proxy between the client and the devnet never sees the user's owner
//!   address, entity key or tag in a request body: not for a plain write, not for a write through
//!   a relayer that accepts and stalls (the record lands through another relayer and is found in
//!   a listing), not for scans;
//! * a relayer that lies about `batchSize` is not believed: the size reported is the ledger's;
//! * absurd `/v1/info` numbers (u64::MAX) are clamped and no wait overflows or runs forever;
//! * ownership proofs with a 2-hour window, a high-s signature or v outside {27, 28} are refused;
//! * the RPC cannot pick the user's batch among a scan's fetches better than chance, and
//!   intersecting the fetch sets of fresh sessions of one user keeps the covers.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256, U256};
use async_trait::async_trait;
use axum::extract::State;
use privsvc_attributes::{AttrValue, Attributes};
use privsvc_client::{
    default_inclusion_timeout, verify_ownership_proof, EntitiesQuery, PrivateClient, PrivsvcError,
    ProofExpectation, ProofRejection, ProveParams, COVER_WINDOW_BLOCKS,
};
use privsvc_devnet::{Bytes, Devnet, DevnetConfig, EntityData, StoredAttr};
use privsvc_envelope::EnvelopeBody;
use privsvc_ledger::{LedgerReader, RpcLedger};
use privsvc_ohttp::{
    HttpError, HttpTransport, RelayerRequest, RelayerResponse, Transport, TransportError,
};
use privsvc_relayer::{Relayer, RelayerConfig};
use privsvc_vault::{tag_to_text, KeyVault, LocalWallet, Vault};

use crate::common::*;

/// A JSON-RPC proxy on loopback that records every request body it forwards to the devnet.
struct RpcProxy {
    url: String,
    bodies: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct ProxyState {
    upstream: String,
    http: reqwest::Client,
    bodies: Arc<Mutex<Vec<String>>>,
}

async fn forward(State(s): State<ProxyState>, body: bytes::Bytes) -> axum::response::Response {
    s.bodies
        .lock()
        .unwrap()
        .push(String::from_utf8_lossy(&body).into_owned());
    let answer = s
        .http
        .post(&s.upstream)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the devnet answers");
    let status = answer.status().as_u16();
    let bytes = answer.bytes().await.expect("the devnet's body");
    axum::response::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(bytes))
        .unwrap()
}

impl RpcProxy {
    async fn start(upstream: &str) -> RpcProxy {
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let state = ProxyState {
            upstream: upstream.to_string(),
            http: reqwest::Client::new(),
            bodies: bodies.clone(),
        };
        let app = axum::Router::new()
            .fallback(axum::routing::post(forward))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.ok();
        });
        RpcProxy { url, bodies, task }
    }

    fn reader(&self) -> Arc<dyn LedgerReader> {
        Arc::new(RpcLedger::new(&self.url).unwrap())
    }

    fn bodies(&self) -> Vec<String> {
        self.bodies.lock().unwrap().clone()
    }

    fn clear(&self) {
        self.bodies.lock().unwrap().clear();
    }

    /// The batches (block, creator) named by payload fetches, in request order, one list per
    /// request.
    fn fetches(&self) -> Vec<Vec<(u64, Address)>> {
        self.bodies()
            .iter()
            .map(|b| batches_named(b))
            .filter(|v| !v.is_empty())
            .collect()
    }
}

/// Every `($creator = addr(0x…) AND $createdAt = u64(N))` in a request body, in order.
fn batches_named(body: &str) -> Vec<(u64, Address)> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find("$creator = addr(") {
        rest = &rest[i + "$creator = addr(".len()..];
        let creator: Address = rest[..42].parse().unwrap();
        let j = rest.find("$createdAt = u64(").unwrap() + "$createdAt = u64(".len();
        let digits: String = rest[j..].chars().take_while(char::is_ascii_digit).collect();
        out.push((digits.parse().unwrap(), creator));
        rest = &rest[j..];
    }
    out
}

/// What a fake relayer in front of a real one does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mischief {
    /// Accepts (the real relayer holds the record) and forwards the same submission to a second
    /// real relayer, which writes it; status polls keep saying "queued".
    StallAndFork,
    /// Rewrites `batchSize` in every status answer to 37.
    LieBatchSize,
    /// Announces u64::MAX for every number in `/v1/info` and never answers a submission.
    AbsurdInfo,
}

/// Real HTTP to real relayers, with one relayer's answers rewritten: a relayer turned adversary.
struct FakeRelayer {
    inner: HttpTransport,
    target: String,
    fork_to: Option<String>,
    mischief: Mischief,
}

#[async_trait]
impl Transport for FakeRelayer {
    async fn send(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, TransportError> {
        if relayer_url != self.target {
            return self.inner.send(relayer_url, request).await;
        }
        let submit = request.method == "POST" && request.path == "/v1/records";
        match self.mischief {
            Mischief::StallAndFork if submit => {
                let other = self.fork_to.clone().unwrap();
                let forked = self.inner.send(&other, request.clone()).await?;
                assert_eq!(forked.status, 202, "the second relayer takes the envelope");
                self.inner.send(relayer_url, request).await
            }
            Mischief::AbsurdInfo if submit => Err(TransportError::Http(HttpError::Request(
                "connection reset (test)".into(),
            ))),
            Mischief::AbsurdInfo if request.path == "/v1/info" => {
                let mut answer = self.inner.send(relayer_url, request).await?;
                let mut info: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
                for k in [
                    "minBatch",
                    "maxWaitMs",
                    "minIntervalBlocks",
                    "maxMinAnonymity",
                    "maxHoldMs",
                ] {
                    info[k] = serde_json::json!(u64::MAX);
                }
                answer.body = serde_json::to_vec(&info).unwrap();
                Ok(answer)
            }
            Mischief::LieBatchSize if request.path.starts_with("/v1/records/") => {
                let mut answer = self.inner.send(relayer_url, request).await?;
                if answer.status == 200 {
                    let mut st: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
                    if st["state"] == "written" {
                        st["batchSize"] = serde_json::json!(37);
                    }
                    answer.body = serde_json::to_vec(&st).unwrap();
                }
                Ok(answer)
            }
            _ => self.inner.send(relayer_url, request).await,
        }
    }
}

fn fake(stack_target: &str, fork_to: Option<&str>, mischief: Mischief) -> Arc<FakeRelayer> {
    Arc::new(FakeRelayer {
        inner: HttpTransport::new().unwrap(),
        target: privsvc_ohttp::normalize_relayer_url(stack_target).unwrap(),
        fork_to: fork_to.map(|u| privsvc_ohttp::normalize_relayer_url(u).unwrap()),
        mischief,
    })
}

/// The strings that would name a record of the user: its owner address, its entity key and its
/// tag (base64 as on the ledger, and hex).
fn identifying(owner: Address, key: B256, tag_text: &str) -> Vec<String> {
    let tag_bytes = privsvc_vault::tag_from_text(tag_text).expect("a valid tag");
    vec![
        hex::encode(owner.as_slice()),
        hex::encode(key.as_slice()),
        tag_text.to_string(),
        hex::encode(tag_bytes),
    ]
}

fn assert_never_named(bodies: &[String], secrets: &[String], when: &str) {
    assert!(
        !bodies.is_empty(),
        "{when}: the proxy saw the client's requests"
    );
    for body in bodies {
        let lower = body.to_lowercase();
        for s in secrets {
            assert!(
                !body.contains(s.as_str()) && !lower.contains(&s.to_lowercase()),
                "{when}: the RPC saw {s} in {body}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rpc_never_sees_owner_key_or_tag_and_relayers_are_not_believed() {
    // A accepts and holds (minBatch 100, maxWaitMs 10 min); B writes at once.
    let stack = Stack::start(StackOptions {
        a_holds: true,
        ..StackOptions::plain()
    })
    .await;
    let proxy = RpcProxy::start(&stack.node().url()).await;
    let wallet = Arc::new(LocalWallet::random());

    // 1. A stalling relayer: A took the record and says "queued" forever; the same envelope
    //    reached B, which wrote it. The client must find it in a listing, not ask for its owner.
    let stall = fake(&stack.a_url, Some(&stack.b_url), Mischief::StallAndFork);
    let client = fast_builder(wallet.clone(), proxy.reader(), [stack.a_url.clone()])
        .inclusion_timeout(Duration::from_secs(2))
        .transport(stall)
        .build()
        .await
        .unwrap();
    // A scan first (the session's first listing is made at build, its attribute listing at
    // its first tail).
    client.my_entities(&EntitiesQuery::new()).await.unwrap();
    let started = Instant::now();
    let stalled = client
        .create_entity(note("through a stalling relayer"))
        .await
        .expect("found in the listing");
    assert!(stalled.recovered, "the stalling relayer did not write it");
    assert!(started.elapsed() < Duration::from_secs(30));
    let b_address = stack.b().address();
    let e = stack
        .sole_entity(stalled.owner, stalled.entity_key, "written once, by B")
        .await;
    assert_eq!(e.creator, Some(b_address));
    assert_eq!(stalled.batch_size, 1, "counted on the ledger");

    // 2. A relayer that lies about the batch size of records that asked for k-anonymity: the
    //    client reports the count its tail reads on the ledger. (With minAnonymity 1 a write
    //    resolves on the relayer's word: nothing was asked of the batch.)
    let liar = fake(&stack.b_url, None, Mischief::LieBatchSize);
    let client2 = fast_builder(wallet.clone(), proxy.reader(), [stack.b_url.clone()])
        .transport(liar)
        .min_anonymity(2)
        .build()
        .await
        .unwrap();
    let (lied, peer) = tokio::join!(
        client2.create_entity(note("through a lying relayer")),
        client2.create_entity(note("its peer"))
    );
    let (lied, _peer) = (lied.unwrap(), peer.unwrap());
    assert!(!lied.recovered);
    let listed = privsvc_client::list_app(stack.reader.as_ref(), APP, None, None)
        .await
        .unwrap();
    let on_ledger = listed
        .entities
        .iter()
        .filter(|x| x.creator == Some(b_address))
        .filter(|x| {
            x.created_at
                == listed
                    .entities
                    .iter()
                    .find(|y| y.key == lied.entity_key)
                    .unwrap()
                    .created_at
        })
        .count() as u64;
    assert_eq!(lied.batch_size, on_ledger, "not the relayer's 37");
    assert_ne!(lied.batch_size, 37);

    // 3. Scans in fresh sessions.
    let fresh = fast_builder(wallet.clone(), proxy.reader(), [stack.b_url.clone()])
        .build()
        .await
        .unwrap();
    stack.settle().await;
    let mine = fresh
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    assert_eq!(mine.len(), 3);
    fresh
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();

    let mut secrets = Vec::new();
    for r in &mine {
        let AttrValue::Str(tag) = r.attributes.get("tag").unwrap() else {
            panic!("tag is a string")
        };
        secrets.extend(identifying(r.owner, r.entity_key, tag));
    }
    assert_never_named(&proxy.bodies(), &secrets, "writes and scans");

    // 4. Proofs: a 2-hour window is refused when signing and when verifying; so are high-s
    //    signatures and v outside {27, 28}.
    let long = ProveParams {
        challenge: "c".into(),
        verifier: "v".into(),
        ttl_seconds: Some(7_200),
    };
    assert!(matches!(
        fresh.prove_ownership(mine[0].entity_key, &long).await,
        Err(PrivsvcError::Config(_))
    ));
    let ok = fresh
        .prove_ownership(
            mine[0].entity_key,
            &ProveParams {
                ttl_seconds: Some(3_600),
                ..long.clone()
            },
        )
        .await
        .unwrap();
    let expect = ProofExpectation {
        challenge: "c",
        verifier: "v",
        reader: stack.reader.as_ref(),
        now: None,
    };
    verify_ownership_proof(&ok, &expect).await.unwrap();
    // The owner key signs a 2-hour window itself: the verifier still refuses it.
    let mut body = ok.body.clone();
    body.not_after = body.not_before + 7_200;
    let sig = fresh
        .vault()
        .sign_proof_on_chain(&mine[0].record_ref, &body, Some(ok.chain_id))
        .await
        .unwrap();
    let mut two_hours = ok.clone();
    two_hours.body = body;
    two_hours.signature = privsvc_client::signature_hex(&sig);
    assert_eq!(
        verify_ownership_proof(&two_hours, &expect).await,
        Err(ProofRejection::WindowTooLong { seconds: 7_200 })
    );
    // The same signature with s replaced by n - s (and v flipped) recovers the same signer.
    let raw = hex::decode(&ok.signature[2..]).unwrap();
    let n = U256::from_str_radix(
        "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141",
        16,
    )
    .unwrap();
    let s = U256::from_be_slice(&raw[32..64]);
    let mut high = raw.clone();
    high[32..64].copy_from_slice(&(n - s).to_be_bytes::<32>());
    high[64] = if raw[64] == 27 { 28 } else { 27 };
    let mut high_s = ok.clone();
    high_s.signature = format!("0x{}", hex::encode(&high));
    assert_eq!(
        verify_ownership_proof(&high_s, &expect).await,
        Err(ProofRejection::BadSignature)
    );
    let mut v01 = raw.clone();
    v01[64] -= 27;
    let mut v_raw = ok.clone();
    v_raw.signature = format!("0x{}", hex::encode(&v01));
    assert_eq!(
        verify_ownership_proof(&v_raw, &expect).await,
        Err(ProofRejection::BadSignature)
    );

    proxy.task.abort();
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_info_numbers_are_clamped_and_no_wait_runs_forever() {
    let stack = Stack::start(StackOptions::plain()).await;
    let wallet = Arc::new(LocalWallet::random());
    let absurd = fake(&stack.a_url, None, Mischief::AbsurdInfo);
    let client = fast_builder(wallet, stack.reader.clone(), [stack.a_url.clone()])
        .inclusion_timeout(Duration::from_secs(2))
        .transport(absurd)
        .build()
        .await
        .unwrap();
    let info = client.relayers()[0].info.clone();
    assert_eq!(info.max_wait_ms, 600_000);
    assert_eq!(info.min_interval_blocks, 1_000);
    assert_eq!(info.min_batch, 1_000_000);
    assert_eq!(info.max_min_anonymity, 1_000_000);
    assert!(default_inclusion_timeout(&info) <= Duration::from_secs(3 * 3_600));

    // The submission gets no answer: the client watches the listing for at most the inclusion
    // timeout (not u64::MAX ms times 2000), then gives up; nothing was written.
    let started = Instant::now();
    let err = client
        .create_entity(note("never answered"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, PrivsvcError::AllRelayersFailed { .. }),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(20), "bounded wait");

    // Without an explicit inclusion timeout the bound comes from the clamped numbers:
    // 3 x (10 min + 2 s x 1000) + 30 s, not an overflow.
    assert_eq!(
        default_inclusion_timeout(&info),
        Duration::from_millis(3 * (600_000 + 2_000 * 1_000) + 30_000)
    );
    stack.shutdown().await;
}

// ---- Fetch patterns on a seeded devnet ------------------------------------------------------

const SEED_APP: &str = APP;
/// Blocks of seeded history, one batch per block.
const BLOCKS: u64 = 600;
/// Records per seeded batch.
const PER_BATCH: u64 = 3;

fn stored(attrs: &Attributes) -> Vec<StoredAttr> {
    attrs
        .arkiv_attributes()
        .into_iter()
        .map(|a| StoredAttr {
            name: a.name,
            type_id: a.type_id,
            value: Bytes::from(a.value),
        })
        .collect()
}

fn creator_of(block: u64) -> Address {
    Address::repeat_byte(0x10 + (block % 4) as u8)
}

/// A record of `vault` (a real sealed envelope under its one-time key) at `block`.
async fn record_of(vault: &KeyVault, block: u64, i: u64) -> EntityData {
    let r = vault.new_record();
    let mut attrs = Attributes::new();
    attrs.insert("project", SEED_APP).unwrap();
    attrs
        .insert("tag", AttrValue::Str(tag_to_text(&vault.make_tag(&r))))
        .unwrap();
    attrs.insert("kind", "note").unwrap();
    let body = EnvelopeBody {
        app: SEED_APP.into(),
        exp: 86_400,
        hour: privsvc_envelope::hour_of(privsvc_client::unix_now()),
        ct: "text/plain".into(),
        enc: false,
        types: attrs.types(),
        data: format!("record {block}/{i}").into_bytes(),
    };
    let text = Vault::sign_envelope(vault, &r, &body, &attrs)
        .await
        .unwrap();
    EntityData {
        key: B256::random(),
        owner: vault.address_of(&r).unwrap(),
        creator: creator_of(block),
        created_at: block,
        updated_at: block,
        expires_at: block + 43_200,
        flags: 0,
        content_type: "application/json".into(),
        payload: Bytes::from(text.into_bytes()),
        attrs: stored(&attrs),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_do_not_single_out_the_users_batch() {
    // 600 blocks of history, one batch of 3 per block. Users 0..60 each own one record in a
    // recent batch (blocks 540..590, with newer batches after them, as when a user scans a
    // while after writing); user "many" owns three records far apart.
    let others = KeyVault::random(SEED_APP).0;
    let users: Vec<KeyVault> = (0..60).map(|_| KeyVault::random(SEED_APP).0).collect();
    let many = KeyVault::random(SEED_APP).0;
    let user_block = |i: usize| 540 + (i as u64 * 7919) % 50;
    let many_blocks = [100u64, 300, 500];
    // Every batch holds 3 records, the users' included (at most 2 users share a block), so
    // batch sizes do not point at the users' batches either.
    let mut genesis = Vec::new();
    for block in 1..=BLOCKS {
        let here: Vec<usize> = (0..users.len())
            .filter(|u| user_block(*u) == block)
            .collect();
        for i in 0..PER_BATCH {
            let owner = match here.get(i as usize) {
                Some(u) => &users[*u],
                None if i == 0 && many_blocks.contains(&block) => &many,
                None => &others,
            };
            genesis.push(record_of(owner, block, i).await);
        }
    }
    let mut config = DevnetConfig::on_demand();
    config.start_block = BLOCKS + 1;
    config.genesis_entities = genesis;
    let node = Devnet::start(config).await.unwrap();
    let direct = reader(&node);
    let dir = tempfile::tempdir().unwrap();
    let relayer = Relayer::start(
        RelayerConfig::for_tests(dir.path()),
        direct,
        writer(&node, 0),
    )
    .await
    .unwrap();
    let proxy = RpcProxy::start(&node.url()).await;
    // Blocks after the seeded history: every batch's covers are final.
    settle(&node);
    // One scan per session: the one at its start (every batch of the users is past its fetch
    // age of 16 blocks).
    let one_scan = privsvc_client::SessionSchedule {
        scan: (Duration::from_secs(600), Duration::from_secs(600)),
        fetch_age_blocks: (16, 16),
        ..fast_schedule()
    };
    let session = |vault: Arc<dyn Vault>| {
        PrivateClient::builder(SEED_APP)
            .vault(vault)
            .reader(proxy.reader())
            .relayers([relayer.url().to_string()])
            .rarity_k(0)
            .schedule(one_scan)
            // Fresh devices: no scan cache (a device with one never fetches a verified batch
            // again).
            .memory_stores(true)
            .build()
    };
    let head = node.block_number();

    // Each user's fresh session scans once when it starts; the RPC sees the fetched batches.
    let mut wins = [0usize; 5];
    let users: Vec<Arc<dyn Vault>> = users
        .into_iter()
        .map(|v| Arc::new(v) as Arc<dyn Vault>)
        .collect();
    for (u, vault) in users.iter().enumerate() {
        proxy.clear();
        let client = session(vault.clone()).await.unwrap();
        let found = client.my_entities(&EntitiesQuery::new()).await.unwrap();
        assert_eq!(found.len(), 1, "user {u} finds its record");
        let mine = (found[0].created_at, found[0].creator);
        // One query per batch, all sent at once in one shuffled order: the order the RPC
        // received them in is what it can guess from.
        let fetches = proxy.fetches();
        assert!(
            fetches.iter().all(|f| f.len() == 1),
            "one query per batch: {fetches:?}"
        );
        let order = &fetches.concat();
        assert_eq!(order.len(), 3, "the user's batch and two covers");
        assert!(order.contains(&mine));
        let window = |b: u64| b / COVER_WINDOW_BLOCKS;
        assert!(
            order.iter().all(|b| window(b.0) == window(mine.0)),
            "covers from the same creation window"
        );
        // The RPC's guesses: newest, oldest, middle, first and last in request order.
        let mut by_block = order.clone();
        by_block.sort();
        let guesses = [by_block[2], by_block[0], by_block[1], order[0], order[2]];
        for (g, guess) in guesses.iter().enumerate() {
            if *guess == mine {
                wins[g] += 1;
            }
        }
    }
    // Chance is 1/3 (20 of 60); the old client's covers (random over all 600 blocks) put the
    // user's recent batch newest about 90 % of the time. 36 of 60 is 4.4 standard deviations
    // above chance.
    eprintln!("guesses right (newest, oldest, middle, first, last) of 60: {wins:?}");
    for (g, w) in wins.iter().enumerate() {
        assert!(
            *w <= 36,
            "guess {g} picked the user's batch {w} times of 60"
        );
    }

    // Fresh sessions of one user fetch the same covers: the intersection keeps them.
    let many: Arc<dyn Vault> = Arc::new(many);
    let mut sets: Vec<BTreeSet<(u64, Address)>> = Vec::new();
    for _ in 0..5 {
        proxy.clear();
        let client = session(many.clone()).await.unwrap();
        assert_eq!(
            client
                .my_entities(&EntitiesQuery::new())
                .await
                .unwrap()
                .len(),
            3
        );
        sets.push(proxy.fetches().concat().into_iter().collect());
    }
    let common: BTreeSet<(u64, Address)> = sets.iter().skip(1).fold(sets[0].clone(), |acc, s| {
        acc.intersection(s).copied().collect()
    });
    let own: HashSet<(u64, Address)> = many_blocks.iter().map(|b| (*b, creator_of(*b))).collect();
    assert_eq!(
        common.len(),
        9,
        "3 own batches and their 6 covers: {common:?}"
    );
    assert!(own.iter().all(|b| common.contains(b)));

    // A user with no records fetches as many batches (covers + 1), of the closed window at the
    // fetch age: the window of the newest batch at or before `head - 16`.
    let nobody: Arc<dyn Vault> = Arc::new(KeyVault::random(SEED_APP).0);
    proxy.clear();
    let client = session(nobody).await.unwrap();
    assert!(client
        .my_entities(&EntitiesQuery::new())
        .await
        .unwrap()
        .is_empty());
    let fetched = proxy.fetches().concat();
    assert_eq!(fetched.len(), 3);
    let newest_closed = BLOCKS.min(head - COVER_WINDOW_BLOCKS);
    assert!(fetched
        .iter()
        .all(|b| b.0 / COVER_WINDOW_BLOCKS == newest_closed / COVER_WINDOW_BLOCKS));

    proxy.task.abort();
    relayer.shutdown().await;
    node.shutdown().await;
}
