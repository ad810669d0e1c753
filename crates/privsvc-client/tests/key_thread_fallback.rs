//! `isolate_keys` when the isolated key thread cannot start (docs/API.md §2.2,
//! `isolate_keys`: warn and keep the keys in-process).
//!
//! The failure is real: the test runs this binary again as a child process with
//! `RUST_MIN_STACK` set to 1 PiB, so every thread the standard library spawns without an explicit
//! stack size (the vault's key thread among them) fails to start (EAGAIN: the stack cannot be
//! mapped). The child runs on a single-threaded runtime, builds a client with `isolate_keys`,
//! writes a record through a relayer of the parent's stack (devnet and relayers on loopback) and
//! reads it back. The parent checks the warning (and that no secret was logged), the ledger, and
//! that the same wallet with a working key thread derives the same keys.
//!
//! No libtest harness (`harness = false`): the harness would itself need a thread per test.

mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::B256;
use common::*;
use privsvc_client::{CreateParams, EntitiesQuery, Expires};
use privsvc_ledger::{LedgerReader, RpcLedger};
use privsvc_vault::{DeriveOptions, KeyVault, LocalWallet};

const CHILD: &str = "PRIVSVC_KEY_THREAD_CHILD";
const RPC: &str = "PRIVSVC_KEY_THREAD_RPC";
const RELAYERS: &str = "PRIVSVC_KEY_THREAD_RELAYERS";
const WALLET: &str = "PRIVSVC_KEY_THREAD_WALLET";
/// 1 PiB: more than the address space, so no thread stack of this size can be mapped.
const HUGE_STACK: &str = "1125899906842624";
const WARNING: &str = "the isolated key thread cannot start; keeping the keys in-process";

fn main() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        println!("key_thread_fallback: test");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(parent());
    println!("test key_thread_fallback ... ok");
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set by the parent"))
}

/// In the child no thread can start; everything runs on the main thread.
fn child() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let spawned = std::thread::Builder::new().spawn(|| {});
    assert!(spawned.is_err(), "threads must fail to start in the child");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let reader: Arc<dyn LedgerReader> = Arc::new(RpcLedger::new(env(RPC)).unwrap());
        let wallet = Arc::new(LocalWallet::from_hex(&env(WALLET)).unwrap());
        let relayers: Vec<String> = env(RELAYERS).split(',').map(String::from).collect();
        let client = fast_builder(wallet, reader, relayers)
            .isolate_keys(true)
            .build()
            .await
            .expect("builds with the keys in-process");
        let written = client
            .create_entity(
                CreateParams::new(b"kept in-process".to_vec(), "text/plain", Expires::Hours(1))
                    .encrypt(true),
            )
            .await
            .expect("writes");
        // The parent mines blocks meanwhile: the record is fetched once its covers are final.
        let mut mine = Vec::new();
        for _ in 0..50 {
            mine = client
                .my_entities(&EntitiesQuery::new().refresh())
                .await
                .unwrap();
            if !mine.is_empty() {
                break;
            }
        }
        println!(
            "RESULT {} {} {} {}",
            client.keys_isolated(),
            written.entity_key,
            written.owner,
            mine.len()
        );
    });
}

async fn parent() {
    let stack = Stack::start(StackOptions::plain()).await;
    let key = k256::ecdsa::SigningKey::random(&mut rand::rngs::OsRng);
    let key_hex = hex::encode(key.to_bytes());
    let wallet = Arc::new(LocalWallet::from_hex(&key_hex).unwrap());
    let chain_id = stack.reader.chain_id().await.unwrap();
    let derivation =
        KeyVault::sign_derivation(wallet.as_ref(), APP, &DeriveOptions::for_chain(chain_id))
            .await
            .unwrap();

    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env(CHILD, "1")
        .env("RUST_MIN_STACK", HUGE_STACK)
        .env("RUST_LOG", "info")
        .env(RPC, stack.node().url())
        .env(RELAYERS, format!("{},{}", stack.a_url, stack.b_url))
        .env(WALLET, &key_hex);
    let mut child = tokio::task::spawn_blocking(move || cmd.output());
    // A block every 50 ms while the child runs (this devnet makes blocks only for
    // transactions): the child's record is fetched once its covers are final.
    let out = loop {
        match tokio::time::timeout(Duration::from_millis(50), &mut child).await {
            Ok(done) => break done.unwrap().expect("the child runs"),
            Err(_) => {
                stack.node().mine().unwrap();
            }
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );

    // The warning was logged, without secrets.
    assert!(stderr.contains(WARNING), "no warning in:\n{stderr}");
    assert!(stderr.contains("WARN"), "{stderr}");
    let lower = stderr.to_lowercase();
    assert!(!lower.contains(&key_hex), "the wallet key was logged");
    assert!(
        !lower.contains(&hex::encode(derivation.as_bytes())),
        "the derivation signature was logged"
    );

    let result = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("no result in:\n{stdout}"));
    let fields: Vec<&str> = result.split(' ').collect();
    assert_eq!(fields[0], "false", "keys_isolated() after the fallback");
    let entity_key: B256 = fields[1].parse().unwrap();
    let owner: alloy_primitives::Address = fields[2].parse().unwrap();
    assert_eq!(fields[3], "1", "the child finds its record");

    stack
        .sole_entity(owner, entity_key, "exactly one entity")
        .await;

    // Where threads start, the same wallet gets isolated keys, and they are the same keys: the
    // record the in-process fallback wrote is found and decrypted.
    let isolated = stack
        .builder(&wallet)
        .isolate_keys(true)
        .build()
        .await
        .unwrap();
    assert!(isolated.keys_isolated());
    let mine = isolated.my_entities(&EntitiesQuery::new()).await.unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].entity_key, entity_key);
    assert_eq!(mine[0].to_text(), "kept in-process");

    let in_process = stack.builder(&wallet).build().await.unwrap();
    assert!(
        !in_process.keys_isolated(),
        "isolate_keys is off by default"
    );
    stack.shutdown().await;
}
