//! The persisted scan cache (docs/PROTOCOL.md §8.7) on the devnet: a returning session lists
//! only from its coarse resume block and still has the user's records, verified on this device
//! before and never fetched again; a cache written under another root, or by another format
//! version, is discarded and the session lists from the start.

use std::sync::Arc;
use std::time::{Duration, Instant};

use privsvc_client::SCAN_CACHE_VERSION;
use privsvc_client::{EntitiesQuery, LocalWallet, PrivateClient, PrivsvcError, SessionSchedule};
use privsvc_ledger::{AttributeSelect, LedgerReader};

use crate::common::{fast_schedule, note, CountingReader, Stack, StackOptions, OVERLOADED};

/// The resume granularity of the test (blocks): small, so that a session's records fall before
/// its resume block on a young devnet.
const RESUME_BLOCKS: u64 = 8;

/// A session of `wallet` keeping its listing in `file`, recording its queries in `counting`.
async fn session(
    stack: &Stack,
    wallet: &Arc<LocalWallet>,
    file: &std::path::Path,
    counting: &Arc<CountingReader>,
) -> PrivateClient {
    stack
        .builder(wallet)
        .reader(counting.clone() as Arc<dyn LedgerReader>)
        .scan_cache_file(file)
        .scan_cache_resume_blocks(RESUME_BLOCKS)
        .build()
        .await
        .expect("client builds")
}

/// The lower `$createdAt` bounds of the listing queries recorded so far (`None`: a listing from
/// the start).
fn listing_starts(counting: &CountingReader) -> Vec<Option<u64>> {
    counting
        .queries
        .lock()
        .unwrap()
        .iter()
        .filter(|q| !q.contains("$createdAt = "))
        .filter(|q| q.contains("project = "))
        .map(|q| {
            q.split("$createdAt > u64(")
                .nth(1)
                .and_then(|rest| rest.split(')').next())
                .map(|b| b.parse().expect("a block number"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returning_session_resumes_from_a_coarse_block_and_a_foreign_or_old_cache_is_discarded() {
    let stack = Stack::start(StackOptions::plain()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cache").join("notes.scan");
    let alice = Arc::new(LocalWallet::random());

    // Session 1: a write, shown at once (unverified), then verified by a scheduled scan, which
    // saves the cache.
    let counting = Arc::new(CountingReader::new(stack.reader.clone()));
    let first = session(&stack, &alice, &file, &counting).await;
    assert_eq!(listing_starts(&counting)[0], None, "no cache yet");
    let written = first.create_entity(note("kept")).await.expect("write");
    let shown = first.my_entities(&EntitiesQuery::new()).await.unwrap();
    assert_eq!(shown.len(), 1, "the session's own write, at once");
    assert_eq!(shown[0].entity_key, written.entity_key);
    assert!(!shown[0].verified);
    stack.settle().await;
    let mine = first
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    assert_eq!(mine.len(), 1);
    assert!(mine[0].verified, "a scheduled scan verified it");
    let mine_created = mine[0].created_at;
    drop(first);
    let meta = std::fs::metadata(&file).expect("the scan saved the cache");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let parent = std::fs::metadata(file.parent().unwrap()).unwrap();
        assert_eq!(parent.permissions().mode() & 0o777, 0o700);
    }
    let _ = meta;
    let sealed = std::fs::read(&file).unwrap();
    assert!(
        !sealed
            .windows(4)
            .any(|w| w == b"note" || w == b"kept" || w == b"kind"),
        "the cache is sealed"
    );

    // Session 2 (same wallet): the first listing starts at a multiple of the granularity, after
    // the record, and the record is there, verified on this device before: its batch is never
    // fetched again (the session's scans fetch only their idle windows).
    let counting = Arc::new(CountingReader::new(stack.reader.clone()));
    let second = session(&stack, &alice, &file, &counting).await;
    let starts = listing_starts(&counting);
    let resume = starts[0].expect("a returning session resumes");
    assert_eq!(resume % RESUME_BLOCKS, 0, "a coarse resume block: {resume}");
    assert!(resume >= mine_created, "{resume} < {mine_created}");
    assert!(starts.iter().all(|s| *s >= Some(resume)), "{starts:?}");
    let mine = second
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    assert_eq!(mine.len(), 1, "the cached record");
    assert_eq!(mine[0].entity_key, written.entity_key);
    assert_eq!(mine[0].to_text(), "kept");
    assert!(mine[0].verified, "verified on this device before");
    let scan = second.last_scan().await.expect("the session scanned");
    assert_eq!(scan.matched, 0, "nothing of the user's was fetched again");
    drop(second);

    // Another root (another wallet) on the same file: the cache does not open; it is discarded
    // and the session lists from the start.
    let bob = Arc::new(LocalWallet::random());
    let counting = Arc::new(CountingReader::new(stack.reader.clone()));
    let foreign = session(&stack, &bob, &file, &counting).await;
    assert_eq!(
        listing_starts(&counting)[0],
        None,
        "another root's cache is discarded"
    );
    assert!(
        matches!(
            foreign.scan_cache_state(),
            privsvc_client::ScanCacheState::Discarded { .. }
        ),
        "{:?}",
        foreign.scan_cache_state()
    );
    assert_ne!(
        std::fs::read(&file).ok(),
        Some(sealed.clone()),
        "a cache that does not open is replaced"
    );
    assert!(foreign
        .my_entities(&EntitiesQuery::new())
        .await
        .unwrap()
        .is_empty());
    drop(foreign);

    // An older format version: discarded as well.
    let mut older = sealed.clone();
    older[8] = SCAN_CACHE_VERSION - 1;
    std::fs::write(&file, &older).unwrap();
    let counting = Arc::new(CountingReader::new(stack.reader.clone()));
    let again = session(&stack, &alice, &file, &counting).await;
    assert_eq!(
        listing_starts(&counting)[0],
        None,
        "an older version is discarded"
    );
    let mine = again.my_entities(&EntitiesQuery::new()).await.unwrap();
    assert_eq!(mine.len(), 1, "found by a full listing");
    drop(again);
    stack.shutdown().await;
}

/// The project's listing pages recorded so far (first pages only): expression and the
/// attributes selected. No listing selects the owner (docs/PROTOCOL.md §8.1).
fn listing_selects(counting: &CountingReader) -> Vec<(String, AttributeSelect)> {
    let selects = counting.selects.lock().unwrap().clone();
    let listings: Vec<_> = selects
        .into_iter()
        .filter(|(q, _)| q.starts_with("project = ") && !q.contains("$createdAt = "))
        .collect();
    assert!(
        listings.iter().all(|(_, s)| !s.owner && s.key && s.creator),
        "a listing selected the owner, or not the key and creator: {listings:?}"
    );
    listings
        .into_iter()
        .map(|(q, s)| (q, s.attributes))
        .collect()
}

/// A plain stack (no tokens, no OHTTP relay) with one record of another user on the ledger.
async fn stack_with_a_record() -> Stack {
    let stack = Stack::start(StackOptions::plain()).await;
    let (_, writer) = stack.client().await;
    writer.create_entity(note("listed")).await.expect("write");
    stack.settle().await;
    stack
}

/// The fast schedule with the first tail 2 to 3 s after the build: time to look at what the
/// build listed, and at what a session does before its attribute listing.
fn late_first_tail() -> SessionSchedule {
    SessionSchedule {
        tail: (Duration::from_secs(2), Duration::from_secs(3)),
        ..fast_schedule()
    }
}

/// A session's first listing selects only the tags (docs/PROTOCOL.md §8.1): the rarity check
/// has nothing to count until the session's first tail, after the first scan, lists the
/// project again from the start with every attribute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_listing_selects_only_tags_and_the_first_tail_lists_every_attribute() {
    let stack = stack_with_a_record().await;

    let counting = Arc::new(CountingReader::new(stack.reader.clone()));
    let wallet = Arc::new(LocalWallet::random());
    let client = stack
        .builder(&wallet)
        .reader(counting.clone() as Arc<dyn LedgerReader>)
        .schedule(late_first_tail())
        .build()
        .await
        .expect("client builds");
    let tags_only = AttributeSelect::Named(vec!["tag".into()]);
    let at_build = listing_selects(&counting);
    assert!(!at_build.is_empty(), "the build lists the project");
    assert!(
        at_build.iter().all(|(_, s)| *s == tags_only),
        "the first listing selects only tags: {at_build:?}"
    );
    let mut common = privsvc_attributes::Attributes::new();
    common.insert("kind", "note").unwrap();
    assert!(matches!(
        client.check_rarity(&common, Some(1)).await,
        Err(PrivsvcError::RarityUnavailable)
    ));

    // The first tail lists every attribute; then the rarity check counts the listed record.
    let deadline = Instant::now() + Duration::from_secs(15);
    let warnings = loop {
        match client.check_rarity(&common, Some(1)).await {
            Ok(w) => break w,
            Err(PrivsvcError::RarityUnavailable) => {
                assert!(Instant::now() < deadline, "no attribute listing after 15 s");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert!(
        warnings.is_empty(),
        "the record of kind note is counted: {warnings:?}"
    );
    let all = listing_selects(&counting);
    let attribute_listing: Vec<_> = all[at_build.len()..]
        .iter()
        .filter(|(_, s)| *s == AttributeSelect::All)
        .collect();
    assert!(
        attribute_listing
            .iter()
            .any(|(q, _)| !q.contains("$createdAt > ")),
        "the attribute listing starts from the beginning: {all:?}"
    );
}

/// A strict write made before the session's attribute listing waits for it: it is never sent
/// without its rarity check (docs/PROTOCOL.md §8.1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_write_before_the_attribute_listing_waits_for_its_rarity_check() {
    let stack = Stack::start(StackOptions::plain()).await;
    let wallet = Arc::new(LocalWallet::random());
    let client = stack
        .builder(&wallet)
        .schedule(late_first_tail())
        .strict(true)
        .rarity_k(5)
        .build()
        .await
        .expect("client builds");
    let started = Instant::now();
    let err = client
        .create_entity(note("rare").attribute("place", "only-here"))
        .await
        .expect_err("a rare combination under strict mode");
    match err {
        PrivsvcError::StrictRefusal { warnings } => assert!(
            warnings
                .iter()
                .any(|w| w.code == privsvc_client::WarningCode::RareCombination),
            "{warnings:?}"
        ),
        other => panic!("expected a strict refusal for rarity, got {other}"),
    }
    assert!(
        started.elapsed() >= Duration::from_millis(1_500),
        "the write did not wait for the attribute listing"
    );
}

/// A first listing of `project` started before any session, on a counting reader of its own.
async fn early_listing(
    stack: &Stack,
    project: &str,
) -> (Arc<CountingReader>, privsvc_client::FirstListing) {
    let reader = Arc::new(CountingReader::new(stack.reader.clone()));
    let listing =
        privsvc_client::FirstListing::start(reader.clone() as Arc<dyn LedgerReader>, project)
            .await
            .expect("the early listing starts");
    (reader, listing)
}

/// A first listing started before the session (`FirstListing`, docs/PROTOCOL.md §8.1) is the
/// session's first listing when it has no cache to resume: the session sends no listing of its
/// own from the start, and finds the user's record in the pages listed early. A session that
/// resumes its cache drops it and lists from its resume block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_listing_started_before_the_session_is_used_unless_the_session_resumes() {
    let stack = Stack::start(StackOptions::plain()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.scan");
    let alice = Arc::new(LocalWallet::random());
    let project = stack.builder(&alice).options().project().to_string();

    // Alice's first session on a device with no cache: listed early, on a reader of its own.
    let (early_reader, early) = early_listing(&stack, &project).await;
    assert_eq!(early.project(), project);
    let counting = Arc::new(CountingReader::new(stack.reader.clone()));
    let first = stack
        .builder(&alice)
        .reader(counting.clone() as Arc<dyn LedgerReader>)
        .scan_cache_file(&file)
        .scan_cache_resume_blocks(RESUME_BLOCKS)
        .schedule(late_first_tail())
        .first_listing(early.clone())
        .build()
        .await
        .expect("client builds");
    assert!(
        format!("{early:?}").contains("waiting: false"),
        "the session took the early listing: {early:?}"
    );
    assert_eq!(
        listing_starts(&early_reader).first(),
        Some(&None),
        "the early listing lists from the start"
    );
    assert!(
        listing_starts(&counting).is_empty(),
        "the session listed again: {:?}",
        listing_starts(&counting)
    );
    let written = first.create_entity(note("early")).await.expect("write");
    stack.settle().await;
    let mine = first
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    assert_eq!(mine.len(), 1);
    assert!(mine[0].verified, "a scheduled scan verified it");
    drop(first);
    assert!(std::fs::metadata(&file).is_ok(), "the scan saved the cache");

    // A second session of Alice's on a device with the record in no cache: the early listing
    // holds its record (listed from the start), as a session's own listing would.
    let (_, early) = early_listing(&stack, &project).await;
    let counting = Arc::new(CountingReader::new(stack.reader.clone()));
    let fresh = stack
        .builder(&alice)
        .reader(counting.clone() as Arc<dyn LedgerReader>)
        .schedule(late_first_tail())
        .first_listing(early)
        .build()
        .await
        .unwrap();
    assert!(listing_starts(&counting).is_empty());
    let mine = fresh.my_entities(&EntitiesQuery::new()).await.unwrap();
    assert_eq!(mine.len(), 1, "the record, from the early listing's pages");
    assert_eq!(mine[0].entity_key, written.entity_key);
    drop(fresh);

    // A returning session with the cache: it resumes, and drops the early listing.
    let (_, early) = early_listing(&stack, &project).await;
    let counting = Arc::new(CountingReader::new(stack.reader.clone()));
    let returning = stack
        .builder(&alice)
        .reader(counting.clone() as Arc<dyn LedgerReader>)
        .scan_cache_file(&file)
        .scan_cache_resume_blocks(RESUME_BLOCKS)
        .schedule(late_first_tail())
        .first_listing(early.clone())
        .build()
        .await
        .unwrap();
    assert!(format!("{early:?}").contains("waiting: false"), "{early:?}");
    let starts = listing_starts(&counting);
    assert!(
        starts.first().is_some_and(|s| s.is_some()),
        "the returning session resumes with its own listing: {starts:?}"
    );
    let mine = returning.my_entities(&EntitiesQuery::new()).await.unwrap();
    assert_eq!(mine.len(), 1);
    drop(returning);
    stack.shutdown().await;
}

/// A first listing started before the session whose pages the RPC fails fails the session's
/// start with the RPC's error, as a failure of the session's own first listing does: it never
/// stands for a project without records (the user would see none of theirs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_listing_the_rpc_fails_fails_the_session_start_as_its_own_would() {
    let stack = stack_with_a_record().await;
    let alice = Arc::new(LocalWallet::random());
    let project = stack.builder(&alice).options().project().to_string();
    let failing = Arc::new(CountingReader::failing_queries(stack.reader.clone()));

    let early =
        privsvc_client::FirstListing::start(failing.clone() as Arc<dyn LedgerReader>, &project)
            .await
            .expect("the early listing starts (the head is read)");
    let with_early = stack
        .builder(&alice)
        .schedule(late_first_tail())
        .first_listing(early.clone())
        .build()
        .await
        .map(drop)
        .expect_err("a session whose early listing failed must not start");
    assert!(
        format!("{early:?}").contains("waiting: false"),
        "the session took the early listing: {early:?}"
    );
    assert!(
        !listing_starts(&failing).is_empty(),
        "the early listing asked the failing reader"
    );

    let own = stack
        .builder(&alice)
        .reader(failing.clone() as Arc<dyn LedgerReader>)
        .schedule(late_first_tail())
        .build()
        .await
        .map(drop)
        .expect_err("a session whose own first listing failed must not start");
    for err in [&with_early, &own] {
        assert!(err.to_string().contains(OVERLOADED), "{err}");
    }
    assert_eq!(with_early.to_string(), own.to_string());
    stack.shutdown().await;
}

/// The attribute listing is made beside the session's listing (docs/PROTOCOL.md §8.1): while it
/// runs, however long it takes, the app's `my_entities` answers at once, and the listing then
/// takes the place of the session's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn my_entities_does_not_wait_for_the_attribute_listing() {
    let stack = stack_with_a_record().await;

    // Every page takes 1.5 s; no scheduled scan in the test's time, a tail every 0.1 to 0.3 s.
    let slow = Arc::new(CountingReader::with_delay(
        stack.reader.clone(),
        Duration::from_millis(1_500),
    ));
    let wallet = Arc::new(LocalWallet::random());
    let client = stack
        .builder(&wallet)
        .reader(slow.clone() as Arc<dyn LedgerReader>)
        .schedule(SessionSchedule {
            scan: (Duration::from_secs(60), Duration::from_secs(60)),
            ..fast_schedule()
        })
        .build()
        .await
        .expect("client builds");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !listing_selects(&slow)
        .iter()
        .any(|(_, s)| *s == AttributeSelect::All)
    {
        assert!(Instant::now() < deadline, "no attribute listing after 20 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let t = Instant::now();
    client.my_entities(&EntitiesQuery::new()).await.unwrap();
    let waited = t.elapsed();
    assert!(
        waited < Duration::from_millis(700),
        "my_entities waited {waited:?} for the attribute listing"
    );
    // Once it is in place, the rarity check counts the listed record.
    let mut common = privsvc_attributes::Attributes::new();
    common.insert("kind", "note").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.check_rarity(&common, Some(1)).await {
            Ok(w) => {
                assert!(w.is_empty(), "the record of kind note is counted: {w:?}");
                break;
            }
            Err(PrivsvcError::RarityUnavailable) => {
                assert!(
                    Instant::now() < deadline,
                    "the attribute listing never took its place"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    drop(client);
    stack.shutdown().await;
}
