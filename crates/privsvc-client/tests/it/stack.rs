//! The client against the real stack: devnet, two relayers (A runs the issuer), tokens, and an
//! OHTTP relay, all on loopback.

use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy_primitives::B256;
use privsvc_client::{
    heartbeat_relayers, verify_ownership_proof, verify_record, AttrValue, CreateParams,
    CreateResult, EntitiesQuery, Expires, PrivateClient, PrivsvcError, ProofExpectation,
    ProveParams, RejectReason, SessionSchedule, VerifyOptions, WarningCode,
};
use privsvc_ledger::{ArkivValue, Create, CreationFlags, Operation};
use privsvc_relayer::Health;
use privsvc_vault::LocalWallet;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_read_prove_everything_through_ohttp_with_tokens() {
    let stack = Stack::start(StackOptions::default()).await;
    let (_wa, alice) = stack.client().await;
    let (_wb, bob) = stack.client().await;
    assert_eq!(alice.relayers().len(), 2);
    assert!(alice
        .relayers()
        .iter()
        .all(|r| r.info.tokens_required && !r.bad));
    let before = stack.relayed();

    let r1 = alice.create_entity(note("first")).await.expect("write 1");
    let r2 = alice
        .create_entity(note("secret").encrypt(true))
        .await
        .expect("write 2");
    let r3 = bob.create_entity(note("bob's")).await.expect("write 3");
    for r in [&r1, &r2, &r3] {
        assert!(!r.recovered);
        assert!(r.relayer == stack.a_url || r.relayer == stack.b_url);
        assert!(r.batch_size >= 1);
        assert_ne!(r.tx_hash, B256::ZERO);
    }
    // Submissions and polls went through the relay (at least a submit and a poll per write).
    assert!(stack.relayed() >= before + 6);

    // Alice sees her two records, newest first, decrypted; never Bob's.
    stack.settle().await;
    let mine = alice
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    assert_eq!(mine.len(), 2, "{mine:?}");
    assert_eq!(mine[0].entity_key, r2.entity_key);
    assert_eq!(mine[0].to_text(), "secret");
    assert!(mine[0].encrypted);
    assert_eq!(mine[1].entity_key, r1.entity_key);
    assert_eq!(mine[1].to_text(), "first");
    assert_eq!(mine[1].content_type, "text/plain");
    assert_eq!(mine[1].exp_seconds, 3600);
    assert_eq!(mine[1].owner, r1.owner);
    assert_eq!(
        mine[1].attribute("project"),
        Some(&AttrValue::Str(APP.into()))
    );
    assert!(mine[0].created_at > mine[1].created_at);
    assert_eq!(mine[1].expires_at - mine[1].created_at, 1800);
    // The encrypted payload is not readable on the ledger.
    let raw = stack
        .reader
        .entity(r2.entity_key, None)
        .await
        .unwrap()
        .unwrap();
    let sealed = privsvc_envelope::parse_envelope(raw.payload.as_deref().unwrap()).unwrap();
    assert!(sealed.body.enc);
    assert_ne!(sealed.body.data, b"secret");
    // JSON payloads parse.
    let r4 = alice
        .create_entity(CreateParams::new(
            br#"{"a":1}"#.to_vec(),
            "application/json",
            Expires::Hours(1),
        ))
        .await
        .unwrap();
    stack.settle().await;
    let mine = alice
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    assert_eq!(mine.len(), 3);
    assert_eq!(mine[0].entity_key, r4.entity_key);
    assert_eq!(mine[0].to_json().unwrap()["a"], 1);

    let bobs = bob
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    assert_eq!(bobs.len(), 1);
    assert_eq!(bobs[0].entity_key, r3.entity_key);
    assert_eq!(bobs[0].to_text(), "bob's");

    // `where` filters locally.
    let notes = alice
        .my_entities(&EntitiesQuery::new().where_eq("kind", "note"))
        .await
        .unwrap();
    assert_eq!(notes.len(), 2);
    assert!(alice
        .my_entities(&EntitiesQuery::new().where_eq("kind", "other"))
        .await
        .unwrap()
        .is_empty());

    // A client that discovers the relayers from heartbeats, through the relay.
    let carol = PrivateClient::builder(APP)
        .token_min_age_ms(TOKEN_MIN_AGE_MS)
        .token_max_ripe_ms(TOKEN_MAX_RIPE_MS)
        .wallet(Arc::new(LocalWallet::random()))
        .reader(stack.reader.clone())
        .ohttp_relay(stack.relay_url.clone().unwrap())
        .delay_ms(0, 0)
        .poll_interval(Duration::from_millis(100))
        .schedule(fast_schedule())
        .build()
        .await
        .expect("discovery through OHTTP");
    assert_eq!(carol.relayers().len(), 2);
    ready(&carol).await;
    let before = stack.relayed();
    let rc = carol.create_entity(note("carol")).await.unwrap();
    assert!(stack.relayed() >= before + 2);
    stack.settle().await;
    let carols = carol
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    assert_eq!(carols.len(), 1);
    assert_eq!(carols[0].entity_key, rc.entity_key);
    assert!(alice
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap()
        .iter()
        .all(|r| r.entity_key != rc.entity_key));

    // Random-root vault without a wallet: auto mode cannot fetch tokens, the write says why.
    let (vault, _code) = privsvc_vault::KeyVault::random(APP);
    let walletless = PrivateClient::builder(APP)
        .token_min_age_ms(TOKEN_MIN_AGE_MS)
        .token_max_ripe_ms(TOKEN_MAX_RIPE_MS)
        .vault(Arc::new(vault))
        .reader(stack.reader.clone())
        .relayers([stack.a_url.clone(), stack.b_url.clone()])
        .ohttp_relay(stack.relay_url.clone().unwrap())
        .delay_ms(0, 0)
        .build()
        .await
        .unwrap();
    // Nothing in its store and no wallet to fetch with: no token, at once.
    let err = walletless
        .create_entity(note("no token"))
        .await
        .unwrap_err();
    assert!(matches!(err, PrivsvcError::NoRipeToken { .. }), "{err}");
    // The same vault with tokens from a caller-given source (a TokenWallet of another wallet).
    let mut o = privsvc_tokens::TokenWalletOptions::new(
        Arc::new(LocalWallet::random()),
        stack.reader.clone(),
        stack.a().address(),
        stack.a_url.clone(),
    );
    o.allow_on_demand = true;
    o.min_age_ms = TOKEN_MIN_AGE_MS;
    o.max_ripe_ms = TOKEN_MAX_RIPE_MS;
    let token_wallet = privsvc_tokens::TokenWallet::new(o);
    let source = token_wallet.source();
    let (vault, _code) = privsvc_vault::KeyVault::random(APP);
    let sourced = PrivateClient::builder(APP)
        .token_min_age_ms(TOKEN_MIN_AGE_MS)
        .token_max_ripe_ms(TOKEN_MAX_RIPE_MS)
        .vault(Arc::new(vault))
        .reader(stack.reader.clone())
        .relayers([stack.a_url.clone(), stack.b_url.clone()])
        .ohttp_relay(stack.relay_url.clone().unwrap())
        .delay_ms(0, 0)
        .poll_interval(Duration::from_millis(100))
        .tokens(privsvc_client::TokenSupply::Source(source))
        .build()
        .await
        .unwrap();
    // The source finds nothing: it starts one issue request in the background and hands out
    // nothing now (the write that caused the fetch never spends its tokens, and a source never
    // waits).
    let err = sourced.create_entity(note("sourced")).await.unwrap_err();
    assert!(matches!(err, PrivsvcError::NoRipeToken { .. }), "{err}");
    let deadline = Instant::now() + Duration::from_secs(15);
    while token_wallet.available(APP).unwrap() == 0 {
        assert!(Instant::now() < deadline, "the source's background fetch");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Once they are ripe (within TOKEN_MAX_RIPE_MS here), a later write spends one.
    tokio::time::sleep(Duration::from_millis(TOKEN_MAX_RIPE_MS + 200)).await;
    let rs = sourced.create_entity(note("sourced")).await.unwrap();
    stack.settle().await;
    assert_eq!(
        sourced
            .my_entities(&EntitiesQuery::new().refresh())
            .await
            .unwrap()[0]
            .entity_key,
        rs.entity_key
    );

    // Ownership proof, verified against the ledger.
    let proof = alice
        .prove_ownership(
            r1.entity_key,
            &ProveParams {
                challenge: "c-1".into(),
                verifier: "shop.example".into(),
                ttl_seconds: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(proof.owner, r1.owner);
    verify_ownership_proof(
        &proof,
        &ProofExpectation {
            challenge: "c-1",
            verifier: "shop.example",
            reader: stack.reader.as_ref(),
            now: None,
        },
    )
    .await
    .unwrap();
    // Bob cannot prove Alice's record.
    let err = bob
        .prove_ownership(
            r1.entity_key,
            &ProveParams {
                challenge: "c-1".into(),
                verifier: "shop.example".into(),
                ttl_seconds: None,
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, PrivsvcError::UnknownRecord { entity_key } if entity_key == r1.entity_key),
        "{err}"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_discovery_cover_batches_checks_and_tampering() {
    let stack = Stack::start(StackOptions::plain()).await;

    // Discovery from heartbeats finds both relayers.
    assert_eq!(
        heartbeat_relayers(stack.reader.as_ref())
            .await
            .unwrap()
            .len(),
        2
    );
    let wallet = Arc::new(LocalWallet::random());
    let counting = Arc::new(CountingReader::new(stack.reader.clone()));
    let alice = PrivateClient::builder(APP)
        .token_min_age_ms(TOKEN_MIN_AGE_MS)
        .token_max_ripe_ms(TOKEN_MAX_RIPE_MS)
        .wallet(wallet.clone())
        .reader(counting.clone())
        .delay_ms(0, 0)
        .poll_interval(Duration::from_millis(100))
        .cover_batches(2)
        .schedule(fast_schedule())
        .build()
        .await
        .expect("client with discovered relayers");
    let mut urls: Vec<String> = alice.relayers().into_iter().map(|r| r.url).collect();
    urls.sort();
    let mut expected = vec![stack.a_url.clone(), stack.b_url.clone()];
    expected.sort();
    assert_eq!(urls, expected);
    assert_eq!(alice.relayer_addresses().len(), 2);

    // Scopes share an owner.
    let s1 = alice
        .create_entity(note("d1").scope("diary"))
        .await
        .unwrap();
    let s2 = alice
        .create_entity(note("d2").scope("diary"))
        .await
        .unwrap();
    let free = alice.create_entity(note("free")).await.unwrap();
    assert_eq!(s1.owner, s2.owner);
    assert_eq!(s1.owner, alice.scope_address("diary").await.unwrap());
    assert_ne!(free.owner, s1.owner);
    assert_eq!(stack.owned_by(s1.owner).await.len(), 2);

    // Other users write in other batches.
    for i in 0..4 {
        let (_w, other) = stack.client().await;
        other
            .create_entity(note(&format!("other {i}")))
            .await
            .unwrap();
    }

    // The user's writes are there at once, unverified; a scheduled scan fetches each batch of
    // the user's (with its covers) once it is past its fetch age, and verifies them.
    assert_eq!(
        alice
            .my_entities(&EntitiesQuery::new())
            .await
            .unwrap()
            .len(),
        3
    );
    counting.clear();
    stack.settle().await;
    let mine = alice
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    assert_eq!(mine.len(), 3);
    assert!(mine.iter().all(|r| r.verified), "{mine:?}");
    let my_batches: std::collections::BTreeSet<(u64, _)> =
        mine.iter().map(|r| (r.created_at, r.creator)).collect();
    let queries = counting.queries.lock().unwrap().clone();
    for (block, creator) in &my_batches {
        let named = format!("$createdAt = u64({block})");
        let creator = format!("{creator:#x}");
        assert!(
            queries
                .iter()
                .any(|q| q.contains(&named) && q.to_lowercase().contains(&creator)),
            "batch {block} was fetched"
        );
    }
    // With nothing of the user's left to verify, a scan still fetches `cover_batches + 1`
    // batches (of a closed window drawn at random).
    let stats = alice.scan_new().await.unwrap();
    assert_eq!(stats.matched, 0, "nothing new to open");
    assert_eq!(stats.batches_fetched, 3);

    // The same wallet in another session, keys on an isolated thread: the same records.
    let again = stack
        .builder(&wallet)
        .isolate_keys(true)
        .build()
        .await
        .unwrap();
    let mut keys: Vec<B256> = again
        .my_entities(&EntitiesQuery::new())
        .await
        .unwrap()
        .iter()
        .map(|r| r.entity_key)
        .collect();
    let mut expected_keys: Vec<B256> = mine.iter().map(|r| r.entity_key).collect();
    keys.sort();
    expected_keys.sort();
    assert_eq!(keys, expected_keys);
    assert_eq!(again.scope_address("diary").await.unwrap(), s1.owner);

    // Checks: strict mode refuses, invalid names are refused before anything is sent.
    let strict = stack.builder(&wallet).strict(true).build().await.unwrap();
    let err = strict
        .create_entity(note("t").attribute("seen_at", AttrValue::U64(1_716_212_345)))
        .await
        .unwrap_err();
    match err {
        PrivsvcError::StrictRefusal { warnings } => {
            assert!(warnings.iter().any(|w| w.code == WarningCode::Timestamp))
        }
        other => panic!("expected strict refusal, got {other}"),
    }
    for bad in ["Kind", "tag", "project", "privsvc_x", "has space"] {
        let err = alice
            .create_entity(note("x").attribute(bad, "v"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, PrivsvcError::InvalidAttributes { .. }),
            "{bad}: {err}"
        );
    }
    let w = alice.check(
        &[("lat".to_string(), AttrValue::Str("52.520008".into()))],
        Expires::Days(2),
        b"x",
    );
    assert!(w.iter().any(|w| w.code == WarningCode::ExpiryRounded));
    let mut rare = privsvc_attributes::Attributes::new();
    rare.insert("kind", "unheard-of").unwrap();
    let rw = alice.check_rarity(&rare, Some(3)).await.unwrap();
    assert!(rw.iter().any(|w| w.code == WarningCode::RareCombination));
    let mut common = privsvc_attributes::Attributes::new();
    common.insert("kind", "note").unwrap();
    assert!(alice
        .check_rarity(&common, Some(3))
        .await
        .unwrap()
        .is_empty());

    // Tampering with a real record.
    let entity = stack
        .reader
        .entity(free.entity_key, None)
        .await
        .unwrap()
        .unwrap();
    let trusted = alice.relayer_addresses();
    let expect = VerifyOptions {
        app: Some(APP),
        relayers: Some(&trusted),
        owner: Some(free.owner),
        created_timestamp: privsvc_client::creation_timestamp(stack.reader.as_ref(), &entity)
            .await
            .unwrap(),
    };
    verify_record(&entity, &expect).expect("genuine record verifies");
    let mut changed = entity.clone();
    for a in changed.attributes.as_mut().unwrap() {
        if a.name == "kind" {
            a.value = ArkivValue::Str("forged".into());
        }
    }
    assert!(matches!(
        verify_record(&changed, &expect),
        Err(RejectReason::SignatureMismatch { .. })
    ));
    let mut moved = entity.clone();
    moved.owner = Some(s1.owner);
    assert!(matches!(
        verify_record(&moved, &expect),
        Err(RejectReason::WrongOwner { .. })
    ));

    // A foreign account replays Alice's envelope and hands the copy to her owner address.
    let foreign = writer(stack.node(), 3);
    let receipt = foreign
        .execute(&[Operation::Create(Create {
            salt: 7,
            expires_at: 0,
            min_lifetime: 1800,
            flags: CreationFlags::default(),
            content_type: "application/json".into(),
            payload: entity.payload.clone().unwrap(),
            attributes: entity.attributes.clone().unwrap(),
        })])
        .await
        .unwrap();
    assert!(receipt.success);
    let copy_key = receipt.created[0].key;
    let receipt = foreign
        .execute(&[Operation::Transfer {
            key: copy_key,
            new_owner: free.owner,
        }])
        .await
        .unwrap();
    assert!(receipt.success);
    let copy = stack.reader.entity(copy_key, None).await.unwrap().unwrap();
    assert_eq!(
        verify_record(&copy, &expect),
        Err(RejectReason::UntrustedCreator(foreign.address()))
    );
    // A record is (owner, envelope): the copy is later than Alice's record, so it is not hers,
    // trusted-relayers rule or not; a verifier with a reader calls it a copy.
    let loose = alice
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    assert!(!loose.iter().any(|r| r.entity_key == copy_key));
    assert!(loose.iter().any(|r| r.entity_key == free.entity_key));
    let verdict = privsvc_client::verify_record_on_ledger(
        &copy,
        &VerifyOptions {
            app: Some(APP),
            ..VerifyOptions::default()
        },
        stack.reader.as_ref(),
    )
    .await;
    assert!(
        matches!(verdict, Err(RejectReason::Copy { original }) if original == free.entity_key),
        "{verdict:?}"
    );
    let careful = stack
        .builder(&wallet)
        .trusted_relayers_only(true)
        .build()
        .await
        .unwrap();
    let strict_list = careful.my_entities(&EntitiesQuery::new()).await.unwrap();
    assert_eq!(strict_list.len(), 3);
    assert!(strict_list.iter().all(|r| r.entity_key != copy_key));
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_anonymity_three_clients_share_one_batch() {
    let stack = Stack::start(StackOptions::plain()).await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        let w = Arc::new(LocalWallet::random());
        clients.push(
            PrivateClient::builder(APP)
                .token_min_age_ms(TOKEN_MIN_AGE_MS)
                .token_max_ripe_ms(TOKEN_MAX_RIPE_MS)
                .wallet(w)
                .reader(stack.reader.clone())
                .relayers([stack.a_url.clone()])
                .delay_ms(0, 0)
                .poll_interval(Duration::from_millis(100))
                .min_anonymity(3)
                .build()
                .await
                .unwrap(),
        );
    }
    let results = futures_join(&clients).await;
    let tx = results[0].tx_hash;
    for r in &results {
        assert_eq!(r.tx_hash, tx, "all three in one batch");
        assert!(r.batch_size >= 3);
    }

    // Alone, a record with minAnonymity 3 fails once the relayer stops holding it.
    let lone = PrivateClient::builder(APP)
        .token_min_age_ms(TOKEN_MIN_AGE_MS)
        .token_max_ripe_ms(TOKEN_MAX_RIPE_MS)
        .wallet(Arc::new(LocalWallet::random()))
        .reader(stack.reader.clone())
        .relayers([stack.a_url.clone()])
        .delay_ms(0, 0)
        .poll_interval(Duration::from_millis(100))
        .min_anonymity(3)
        .max_hold_ms(1000)
        .build()
        .await
        .unwrap();
    let started = Instant::now();
    let err = lone.create_entity(note("alone")).await.unwrap_err();
    assert!(
        matches!(err, PrivsvcError::AllRelayersFailed { .. }),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));

    // No relayer accepts that much anonymity: refused before anything is sent.
    let greedy = PrivateClient::builder(APP)
        .token_min_age_ms(TOKEN_MIN_AGE_MS)
        .token_max_ripe_ms(TOKEN_MAX_RIPE_MS)
        .wallet(Arc::new(LocalWallet::random()))
        .reader(stack.reader.clone())
        .relayers([stack.a_url.clone(), stack.b_url.clone()])
        .delay_ms(0, 0)
        .min_anonymity(1000)
        .build()
        .await
        .unwrap();
    match greedy.create_entity(note("greedy")).await.unwrap_err() {
        PrivsvcError::AllRelayersFailed { attempts } => {
            assert!(
                attempts.iter().all(|a| a.contains("minAnonymity up to")),
                "{attempts:?}"
            )
        }
        other => panic!("expected AllRelayersFailed, got {other}"),
    }
    stack.shutdown().await;
}

/// With `minAnonymity` > 1 a write the relayer calls written waits for the session's tails to
/// show it, counted in tails that started after the relayer's answer, not in time: when the
/// tail under way at that answer was listing at a head before the batch and outlasts the tails'
/// gaps (a slow node: each listing 3 s, one made stale by a new block 6 s more), the record is
/// still found and reported as written with its batch, not as missing (which marked the
/// relayer bad and sent the write on to another).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_anonymity_write_waits_for_tails_that_outlast_their_gaps() {
    let stack = Stack::start(StackOptions::plain()).await;
    let slow: Arc<dyn privsvc_ledger::LedgerReader> = Arc::new(StaleListingReader {
        inner: stack.reader.clone(),
        delay: Duration::from_secs(3),
        stale_delay: Duration::from_secs(6),
    });
    // No scheduled scan: only the tail lists (a scan's listing would show the record too).
    let schedule = SessionSchedule {
        scan: (Duration::from_secs(3_600), Duration::from_secs(3_600)),
        ..fast_schedule()
    };
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(
            fast_builder(
                Arc::new(LocalWallet::random()),
                slow.clone(),
                [stack.a_url.clone()],
            )
            .schedule(schedule)
            .inclusion_timeout(Duration::from_secs(30))
            .min_anonymity(3)
            .build()
            .await
            .unwrap(),
        );
    }
    for c in &clients {
        ready(c).await;
    }
    let results = futures_join(&clients).await;
    for (r, c) in results.iter().zip(&clients) {
        assert!(
            !r.recovered && r.relayer == stack.a_url && r.tx_hash != B256::ZERO,
            "reported as written by its relayer, not recovered: {r:?}"
        );
        assert_eq!(r.tx_hash, results[0].tx_hash, "all three in one batch");
        assert!(r.batch_size >= 3, "batch of {}", r.batch_size);
        assert!(
            c.relayers().iter().all(|s| !s.bad),
            "a relayer whose record landed is not marked bad"
        );
    }
}

async fn futures_join(clients: &[PrivateClient]) -> Vec<privsvc_client::CreateResult> {
    let (a, b, c) = tokio::join!(
        clients[0].create_entity(note("k1")),
        clients[1].create_entity(note("k2")),
        clients[2].create_entity(note("k3")),
    );
    vec![a.unwrap(), b.unwrap(), c.unwrap()]
}

/// Steers `client`'s write of `text` to relayer A, waits (polling A's health every `every`,
/// failing with `what`) until `reached` holds, then crashes A; returns what the write came to.
async fn crash_a_during_write(
    stack: &mut Stack,
    client: &Arc<PrivateClient>,
    text: &'static str,
    every: Duration,
    what: &str,
    reached: impl Fn(&Health) -> bool,
) -> Result<CreateResult, PrivsvcError> {
    client.set_relayer_bad(&stack.b_url, true);
    let task = {
        let client = client.clone();
        tokio::spawn(async move { client.create_entity(note(text)).await })
    };
    wait_for_health(stack.a(), every, what, reached).await;
    stack.crash_a().await;
    task.await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relayer_killed_while_holding_the_record_fails_over_once() {
    let mut stack = Stack::start(StackOptions {
        a_holds: true,
        ..StackOptions::plain()
    })
    .await;
    let wallet = Arc::new(LocalWallet::random());
    let client = Arc::new(
        stack
            .builder(&wallet)
            .inclusion_timeout(Duration::from_secs(3))
            .build()
            .await
            .unwrap(),
    );
    // The first attempt goes to A, which holds the record in its queue.
    let r = crash_a_during_write(
        &mut stack,
        &client,
        "stranded",
        Duration::from_millis(20),
        "A never queued the record",
        |h| h.queue != 0,
    )
    .await
    .expect("written through B");
    assert_eq!(r.relayer, stack.b_url);
    assert!(!r.recovered);
    stack
        .sole_entity(r.owner, r.entity_key, "exactly one entity")
        .await;
    // A stopped answering: not its own answer, so not marked bad.
    assert!(client
        .relayers()
        .iter()
        .any(|x| x.url == stack.a_url && !x.bad));
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relayer_killed_after_writing_is_recovered_from_the_ledger() {
    let mut stack = Stack::start(StackOptions::plain()).await;
    let wallet = Arc::new(LocalWallet::random());
    let client = Arc::new(
        stack
            .builder(&wallet)
            .poll_interval(Duration::from_millis(1500))
            .build()
            .await
            .unwrap(),
    );
    let r = crash_a_during_write(
        &mut stack,
        &client,
        "landed",
        Duration::from_millis(10),
        "A never wrote the batch",
        |h| h.batches != 0,
    )
    .await
    .expect("recovered");
    assert!(r.recovered);
    assert_eq!(r.relayer, "");
    stack
        .sole_entity(r.owner, r.entity_key, "never written twice")
        .await;
    // The recovered record is the user's and provable.
    stack.settle().await;
    let mine = client
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].to_text(), "landed");
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_progress_fails_over_and_the_held_copy_is_never_written() {
    let mut stack = Stack::start(StackOptions {
        a_holds: true,
        ..StackOptions::plain()
    })
    .await;
    let wallet = Arc::new(LocalWallet::random());
    let client = stack
        .builder(&wallet)
        .inclusion_timeout(Duration::from_millis(800))
        .build()
        .await
        .unwrap();
    client.set_relayer_bad(&stack.b_url, true);
    let started = Instant::now();
    let r = client
        .create_entity(note("slow"))
        .await
        .expect("written through B");
    assert_eq!(r.relayer, stack.b_url, "A held the record without progress");
    assert!(!r.recovered);
    assert!(started.elapsed() >= Duration::from_millis(800));
    assert_eq!(stack.a().health().await.queue, 1, "A still holds it");

    // A comes back flushing its queue: the record it held is already on the ledger.
    stack.restart_a_flushing().await;
    wait_for_health(
        stack.a(),
        Duration::from_millis(50),
        "A never settled its queue",
        |h| h.queue == 0,
    )
    .await;
    stack
        .sole_entity(r.owner, r.entity_key, "never written twice")
        .await;
    stack.shutdown().await;
}
