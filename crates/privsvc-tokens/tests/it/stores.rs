//! Token stores and the store-backed token source: exactly-once hand-out, random order,
//! minimum age, epochs, put-back, and a file store that survives a real process restart.

use std::collections::HashSet;
use std::sync::Arc;

use privsvc_tokens::*;

fn token(app: &str, epoch: u32, i: u8, obtained_ms: u64) -> StoredToken {
    StoredToken {
        app: app.into(),
        epoch,
        nonce: hex::encode([i; 32]),
        signature: format!("sig{i}"),
        obtained_ms,
    }
}

fn aged_tokens(app: &str, n: u8) -> Vec<StoredToken> {
    let today = epoch_of(now_ms());
    (0..n)
        .map(|i| token(app, today, i, now_ms() - 120_000))
        .collect()
}

fn exercise(store: Arc<dyn TokenStore>) {
    let t = aged_tokens("a", 3);
    store.add(&t).unwrap();
    store.add(&t[..1]).unwrap(); // duplicate ignored
    store.add(&[token("b", 1, 9, 0)]).unwrap();
    assert_eq!(store.list("a").unwrap().len(), 3);
    assert_eq!(store.list("b").unwrap().len(), 1);
    assert!(store.remove("a", &t[0].nonce).unwrap());
    assert!(!store.remove("a", &t[0].nonce).unwrap());
    assert!(!store.remove("b", &t[1].nonce).unwrap());
    store.prune(2).unwrap();
    assert!(store.list("b").unwrap().is_empty());
    assert_eq!(store.list("a").unwrap().len(), 2);
}

#[test]
fn memory_store_basics() {
    exercise(memory_store());
}

#[test]
fn file_store_basics_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.json");
    {
        let store = Arc::new(FileTokenStore::open(&path).unwrap());
        exercise(store);
    }
    let store = FileTokenStore::open(&path).unwrap();
    let left = store.list("a").unwrap();
    assert_eq!(left.len(), 2);
    // No temporary files left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
}

#[test]
fn file_store_is_exclusive_and_rejects_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let first = FileTokenStore::open(&path).unwrap();
    let err = FileTokenStore::open(&path).unwrap_err();
    assert!(err.to_string().contains("in use"), "{err}");
    drop(first);
    FileTokenStore::open(&path).unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, b"{not json").unwrap();
    assert!(FileTokenStore::open(&bad).is_err());
}

const CHILD_ENV: &str = "PRIVSVC_TOKENS_STORE_CHILD";
/// The child test's name as libtest knows it: its path inside the `it` test binary.
const CHILD_TEST: &str = "stores::child_takes_two_tokens";

/// Runs only inside the child process started by `file_store_survives_a_process_restart`.
#[tokio::test]
async fn child_takes_two_tokens() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store: Arc<dyn TokenStore> = Arc::new(FileTokenStore::open(&path).unwrap());
    let source = StoreTokenSource::new(store, DEFAULT_MIN_AGE_MS);
    for _ in 0..2 {
        let t = source.take("app", now_ms() + 1).await.unwrap().unwrap();
        println!("TAKEN {}", t.nonce);
    }
}

#[tokio::test]
async fn file_store_survives_a_process_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.json");
    {
        let store = FileTokenStore::open(&path).unwrap();
        store.add(&aged_tokens("app", 5)).unwrap();
    }
    let mut taken = HashSet::new();
    for _ in 0..2 {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let got: Vec<_> = stdout
            .lines()
            .filter_map(|l| l.find("TAKEN ").map(|i| l[i + 6..i + 6 + 64].to_string()))
            .collect();
        assert_eq!(got.len(), 2, "{stdout}");
        for n in got {
            assert!(
                taken.insert(n),
                "a token was handed out twice across restarts"
            );
        }
    }
    // Back in this process: exactly the one untaken token is left.
    let store = FileTokenStore::open(&path).unwrap();
    let left = store.list("app").unwrap();
    assert_eq!(left.len(), 1);
    assert!(!taken.contains(&left[0].nonce));
}

#[tokio::test]
async fn source_respects_min_age_and_epochs() {
    let store = memory_store();
    let now = now_ms();
    let today = epoch_of(now);
    store
        .add(&[
            token("app", today, 1, now - 1_000),       // too young
            token("app", today - 2, 2, now - 500_000), // epoch no longer accepted
            token("other", today, 3, now - 500_000),   // other app
        ])
        .unwrap();
    let source = StoreTokenSource::new(store.clone(), DEFAULT_MIN_AGE_MS);
    assert_eq!(source.take("app", now_ms() + 1).await.unwrap(), None);
    // The stale epoch was pruned, the young token kept.
    assert_eq!(store.list("app").unwrap().len(), 1);

    store
        .add(&[token("app", today - 1, 4, now - 61_000)])
        .unwrap();
    let t = source.take("app", now_ms() + 1).await.unwrap().unwrap();
    assert_eq!(t.nonce, hex::encode([4u8; 32]));
    assert_eq!(source.take("app", now_ms() + 1).await.unwrap(), None);

    // Put back: usable again at once.
    source.put_back("app", t.clone()).await.unwrap();
    assert_eq!(source.take("app", now_ms() + 1).await.unwrap(), Some(t));

    // A zero minimum age hands out the young token.
    let eager = StoreTokenSource::new(store, 0);
    assert_eq!(
        eager
            .take("app", now_ms() + 1)
            .await
            .unwrap()
            .unwrap()
            .nonce,
        hex::encode([1u8; 32])
    );
}

#[tokio::test]
async fn source_hands_out_in_random_order() {
    let mut orders = HashSet::new();
    for _ in 0..4 {
        let store = memory_store();
        store.add(&aged_tokens("app", 10)).unwrap();
        let source = StoreTokenSource::new(store, DEFAULT_MIN_AGE_MS);
        let mut order = Vec::new();
        while let Some(t) = source.take("app", now_ms() + 1).await.unwrap() {
            order.push(t.nonce);
        }
        assert_eq!(order.len(), 10);
        orders.insert(order);
    }
    // Four identical orders of 10 tokens happen with probability (1/10!)^3.
    assert!(orders.len() > 1);
}

#[tokio::test]
async fn concurrent_takers_never_share_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn TokenStore> =
        Arc::new(FileTokenStore::open(dir.path().join("s.json")).unwrap());
    store.add(&aged_tokens("app", 30)).unwrap();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let source = StoreTokenSource::new(store.clone(), DEFAULT_MIN_AGE_MS);
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(t) = source.take("app", now_ms() + 1).await.unwrap() {
                got.push(t.nonce);
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(all.len(), 30);
    assert_eq!(unique.len(), 30);
}

#[tokio::test]
async fn source_never_waits_and_ripens_this_sessions_tokens_at_their_own_age() {
    let store = memory_store();
    let source = StoreTokenSource::new(store.clone(), 500).with_max_ripe_ms(1_500);
    // Obtained after the source was made (this session): each ripens at its own age between
    // 0.5 and 1.5 s; never handed out younger, never waited for.
    let now = now_ms();
    let young: Vec<StoredToken> = (10..30u8)
        .map(|n| token("app", epoch_of(now), n, now))
        .collect();
    store.add(&young).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(source.take("app", now_ms() + 1).await.unwrap(), None);
    assert!(started.elapsed() < std::time::Duration::from_millis(100));
    let mut first_at = None;
    let mut taken = 0;
    while taken < young.len() {
        assert!(now_ms() < now + 3_000, "every token ripens by 1.5 s");
        if source.take("app", now_ms() + 1).await.unwrap().is_some() {
            let age = now_ms() - now;
            assert!(
                age >= 500,
                "a token spent at {age} ms, before the minimum age"
            );
            first_at.get_or_insert(age);
            taken += 1;
        } else {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    // Not all at the minimum age: spread over the range.
    let spread = now_ms() - now - first_at.unwrap();
    assert!(
        spread >= 300,
        "every token ripened within {spread} ms of the first"
    );
}

#[test]
fn file_store_pins_survive_a_reopen_and_memory_pins_are_the_stores() {
    use alloy_primitives::Address;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.json");
    let issuer = Address::repeat_byte(7);
    let day = epoch_of(now_ms());
    {
        let store = FileTokenStore::open(&path).unwrap();
        let pins = store.key_pins().unwrap();
        assert_eq!(pins.pin(issuer, "app", day, b"first").unwrap(), b"first");
    }
    assert!(FileTokenStore::pins_path(&path).exists());
    let store = FileTokenStore::open(&path).unwrap();
    let pins = store.key_pins().unwrap();
    // The first key stays pinned after a restart; a second one does not replace it.
    assert_eq!(pins.get(issuer, "app", day).unwrap().unwrap(), b"first");
    assert_eq!(pins.pin(issuer, "app", day, b"second").unwrap(), b"first");

    let memory = MemoryTokenStore::default();
    memory
        .key_pins()
        .unwrap()
        .pin(issuer, "app", day, b"one")
        .unwrap();
    assert_eq!(
        memory
            .key_pins()
            .unwrap()
            .get(issuer, "app", day)
            .unwrap()
            .unwrap(),
        b"one"
    );
}

/// The file store is private: the directory it creates is 0700 and the token file 0600, and a
/// link planted where a predictable temporary file would go is never written through (today's
/// name, `<file>.tmp-<pid>`, was predictable: an attacker sharing the directory could make the
/// store write the tokens into a file of theirs).
#[cfg(unix)]
#[test]
fn file_store_is_private_and_its_temporary_files_unpredictable() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("wallet").join("tokens.json");
    let stolen = dir.path().join("stolen");
    std::fs::write(&stolen, b"").unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::remove_dir(path.parent().unwrap()).unwrap();
    let store = FileTokenStore::open(&path).unwrap();
    let mut planted = path.clone().into_os_string();
    planted.push(format!(".tmp-{}", std::process::id()));
    std::os::unix::fs::symlink(&stolen, &planted).unwrap();
    store.add(&aged_tokens("notes", 3)).unwrap();
    assert_eq!(
        std::fs::read(&stolen).unwrap(),
        b"",
        "the tokens were written through a planted link"
    );
    let file_mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
    assert_eq!(file_mode, 0o600, "token file mode {file_mode:o}");
    let dir_mode = std::fs::metadata(path.parent().unwrap()).unwrap().mode() & 0o777;
    assert_eq!(dir_mode, 0o700, "store directory mode {dir_mode:o}");
    assert_eq!(store.list("notes").unwrap().len(), 3);
}
