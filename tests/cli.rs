//! The command-line client (`examples/client.rs`) as a new user runs it: `write`, then `list`
//! and `prove` each in a new process, against a stack on loopback. The record `write` wrote is
//! in the next process's `list` at once and can be proved there, through the device store the
//! processes share (docs/PROTOCOL.md §8.7): no scan has verified it yet, no batch was fetched
//! for it.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use privsvc_testkit::{LocalStack, RelayerSpec};

/// The `client` example that `cargo test` built beside this test binary.
fn client_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/cli-<hash> -> target/<profile>/examples/client
    let profile = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    profile.join("examples").join("client")
}

/// Runs the client with `args` against `rpc` and `relayer`, the wallet `key` and the data
/// directory `data`; returns its standard output, failing on a non-zero exit.
fn run(rpc: &str, relayer: &str, key: &str, data: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(client_binary())
        .args(["--rpc-url", rpc, "--relayer", relayer, "--app", "cli-notes"])
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env("PRIVSVC_WALLET_KEY", key)
        .env("RUST_LOG", "warn")
        .output()
        .expect("the client example runs (cargo test builds it)");
    assert!(
        out.status.success(),
        "client {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_written_by_one_process_is_listed_and_proved_by_the_next() {
    assert!(
        client_binary().exists(),
        "{} is missing: run `cargo test` (which builds the examples)",
        client_binary().display()
    );
    let stack = LocalStack::builder()
        .relayer(RelayerSpec::new("b").with(|c| {
            c.batching.min_batch = 1;
            c.batching.max_wait = Duration::from_millis(200);
        }))
        .start()
        .await
        .expect("the stack starts");
    let (rpc, relayer) = (stack.rpc_url(), stack.url("b"));
    let data = tempfile::tempdir().unwrap();
    let key = format!("0x{}", "5a".repeat(32));

    let written: serde_json::Value = {
        let (rpc, relayer, key, data) = (
            rpc.clone(),
            relayer.clone(),
            key.clone(),
            data.path().to_path_buf(),
        );
        let out = tokio::task::spawn_blocking(move || {
            run(
                &rpc,
                &relayer,
                &key,
                &data,
                &["write", "--text", "from the command line"],
            )
        })
        .await
        .unwrap();
        serde_json::from_str(out.trim()).expect("write prints its result as JSON")
    };
    let entity_key = written["entityKey"].as_str().unwrap().to_string();

    // A new process: the record is listed at once, unverified (no scan verified it yet).
    let listed = {
        let (rpc, relayer, key, data) = (
            rpc.clone(),
            relayer.clone(),
            key.clone(),
            data.path().to_path_buf(),
        );
        tokio::task::spawn_blocking(move || {
            run(&rpc, &relayer, &key, &data, &["list", "--payloads"])
        })
        .await
        .unwrap()
    };
    let rows: Vec<serde_json::Value> = listed
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(rows.len(), 1, "{listed}");
    assert_eq!(rows[0]["entityKey"], entity_key.as_str());
    assert_eq!(rows[0]["data"], "from the command line");

    // And another: a proof of it.
    let proof = {
        let (rpc, relayer, key, data, k) = (
            rpc.clone(),
            relayer.clone(),
            key.clone(),
            data.path().to_path_buf(),
            entity_key.clone(),
        );
        tokio::task::spawn_blocking(move || {
            run(
                &rpc,
                &relayer,
                &key,
                &data,
                &[
                    "prove",
                    &k,
                    "--challenge",
                    "abc",
                    "--verifier",
                    "shop.example",
                ],
            )
        })
        .await
        .unwrap()
    };
    let proof: serde_json::Value = serde_json::from_str(&proof).expect("a JSON proof");
    assert_eq!(proof["entityKey"], entity_key.as_str(), "{proof}");
    stack.shutdown().await;
}
