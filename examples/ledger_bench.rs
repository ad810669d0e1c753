//! Ledger benchmark against the embedded devnet (real HTTP, real signatures, on-demand blocks).
//!
//! ```text
//! cargo run --release --example ledger_bench [-- --entities 100000]
//! ```
//!
//! Prints:
//! 1. batch write throughput (entities/s) for batches of 1, 10, 100 and 500 creates, each batch
//!    one signed `execute()` transaction sent with `eth_sendRawTransaction` and confirmed by
//!    `eth_getTransactionReceipt`;
//! 2. `arkiv_query` rows/s listing 100 000 entities page by page (limit 200, pinned `atBlock`,
//!    cursors) with `select: {attributes: true}` only; the entities are seeded at genesis;
//! 3. gas per record for one batch of 100 creates against 100 single-create transactions.

use std::time::Instant;

use clap::Parser;
use privsvc_devnet::abi::{self, Operation};
use privsvc_devnet::exec::derive_key;
use privsvc_devnet::{
    BlockTime, Bytes, DevSigner, Devnet, DevnetConfig, EntityData, StoredAttr, U256,
};
use serde_json::{json, Value as Json};

/// Command-line options.
#[derive(Parser, Debug)]
struct Args {
    /// Entities to list in the query benchmark.
    #[arg(long, default_value_t = 100_000)]
    entities: u64,
    /// Entities written per batch size in the write benchmark.
    #[arg(long, default_value_t = 5000)]
    writes: usize,
}

struct Rpc {
    url: String,
    http: reqwest::Client,
}

impl Rpc {
    async fn call(&self, method: &str, params: Json) -> anyhow::Result<Json> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let r: Json = self
            .http
            .post(&self.url)
            .json(&body)
            .send()
            .await?
            .json()
            .await?;
        if let Some(e) = r.get("error") {
            anyhow::bail!("{method}: {e}");
        }
        Ok(r["result"].clone())
    }
}

fn create(salt: u128, i: u64) -> Operation {
    let cells = vec![
        abi::cell(
            "$contentType",
            8,
            Bytes::from_static(b"application/octet-stream"),
        ),
        abi::cell("$payload", 7, Bytes::from(vec![0xab; 256])),
        abi::cell("project", 8, Bytes::from_static(b"bench")),
        abi::cell(
            "seq",
            3,
            Bytes::from(U256::from(i).to_be_bytes::<32>().to_vec()),
        ),
    ];
    abi::create_operation(salt, 0, 100_000, 0, cells)
}

fn qty(v: &Json) -> u64 {
    u64::from_str_radix(v.as_str().unwrap_or("0x0").trim_start_matches("0x"), 16).unwrap_or(0)
}

/// Send one batch; returns the receipt's gasUsed.
async fn send(
    rpc: &Rpc,
    signer: &DevSigner,
    chain_id: u64,
    nonce: u64,
    ops: Vec<Operation>,
) -> anyhow::Result<u64> {
    let data = abi::encode_execute(ops);
    let gas = qty(&rpc
        .call(
            "eth_estimateGas",
            json!([{"from": signer.address(), "to": privsvc_devnet::ARKIV_ADDRESS, "data": data}]),
        )
        .await?);
    let raw = signer.sign_arkiv_call(chain_id, nonce, data, gas, 2_000_000_000)?;
    let hash = rpc.call("eth_sendRawTransaction", json!([raw])).await?;
    let r = rpc.call("eth_getTransactionReceipt", json!([hash])).await?;
    anyhow::ensure!(r["status"] == "0x1", "batch reverted");
    Ok(qty(&r["gasUsed"]))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let signer = DevSigner::dev(0);

    // 1. Write throughput.
    println!("== batch write throughput (signed execute() over HTTP, one block per tx) ==");
    for size in [1usize, 10, 100, 500] {
        let node = Devnet::start(DevnetConfig {
            block_time: BlockTime::OnDemand,
            ..Default::default()
        })
        .await?;
        let rpc = Rpc {
            url: node.url(),
            http: reqwest::Client::new(),
        };
        let batches = (args.writes / size).max(1);
        let t = Instant::now();
        let mut i = 0u64;
        for n in 0..batches {
            let ops = (0..size)
                .map(|_| {
                    i += 1;
                    create(i as u128, i)
                })
                .collect();
            send(&rpc, &signer, node.chain_id(), n as u64, ops).await?;
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "batch {size:>3}: {:>6} entities in {batches:>4} txs, {secs:>7.2} s, {:>9.0} entities/s",
            batches * size,
            (batches * size) as f64 / secs
        );
        node.shutdown().await;
    }

    // 2. Query listing.
    println!("== arkiv_query listing (select attributes only, limit 200, cursors) ==");
    let owner = signer.address();
    let t = Instant::now();
    let ents: Vec<EntityData> = (0..args.entities)
        .map(|i| EntityData {
            key: derive_key(privsvc_devnet::TIRAMISU_CHAIN_ID, owner, i, 0),
            owner,
            creator: owner,
            created_at: 0,
            updated_at: 0,
            expires_at: 10_000_000,
            flags: 0,
            content_type: "application/octet-stream".into(),
            payload: Bytes::from(vec![0xab; 64]),
            attrs: vec![
                StoredAttr {
                    name: "project".into(),
                    type_id: 8,
                    value: Bytes::from_static(b"bench"),
                },
                StoredAttr {
                    name: "seq".into(),
                    type_id: 3,
                    value: Bytes::from(U256::from(i).to_be_bytes::<32>().to_vec()),
                },
                StoredAttr {
                    name: "tag".into(),
                    type_id: 8,
                    value: Bytes::from(format!("t{}", i % 16).into_bytes()),
                },
            ],
        })
        .collect();
    let node = Devnet::start(DevnetConfig {
        block_time: BlockTime::OnDemand,
        genesis_entities: ents,
        ..Default::default()
    })
    .await?;
    println!(
        "seeded {} entities at genesis in {:.2} s",
        args.entities,
        t.elapsed().as_secs_f64()
    );
    let rpc = Rpc {
        url: node.url(),
        http: reqwest::Client::new(),
    };
    let head = rpc.call("eth_blockNumber", json!([])).await?;
    let t = Instant::now();
    let (mut rows, mut pages, mut cursor) = (0u64, 0u64, None::<String>);
    loop {
        let mut opts = json!({"select": {"attributes": true}, "limit": "0xc8", "atBlock": head});
        if let Some(c) = &cursor {
            opts["cursor"] = json!(c);
        }
        let r = rpc
            .call("arkiv_query", json!(["project = str('bench')", opts]))
            .await?;
        rows += r["data"].as_array().map_or(0, |a| a.len() as u64);
        pages += 1;
        match r.get("cursor").and_then(|c| c.as_str()) {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let secs = t.elapsed().as_secs_f64();
    anyhow::ensure!(rows == args.entities, "listed {rows} of {}", args.entities);
    println!(
        "listed {rows} rows in {pages} pages, {secs:.2} s, {:.0} rows/s",
        rows as f64 / secs
    );
    node.shutdown().await;

    // 3. Gas per record.
    println!("== gas per record (native schedule: create 80 000 + 16/byte + 5 000/attribute) ==");
    let node = Devnet::start(DevnetConfig {
        block_time: BlockTime::OnDemand,
        ..Default::default()
    })
    .await?;
    let rpc = Rpc {
        url: node.url(),
        http: reqwest::Client::new(),
    };
    let batch_gas = send(
        &rpc,
        &signer,
        node.chain_id(),
        0,
        (0..100).map(|i| create(i, i as u64)).collect(),
    )
    .await?;
    let mut single_gas = 0;
    for i in 0..100u64 {
        single_gas += send(
            &rpc,
            &signer,
            node.chain_id(),
            1 + i,
            vec![create(1000 + i as u128, i)],
        )
        .await?;
    }
    println!(
        "batch of 100: {batch_gas} gas, {} gas/record",
        batch_gas / 100
    );
    println!(
        "100 singles : {single_gas} gas, {} gas/record",
        single_gas / 100
    );
    println!(
        "saving per record in a batch: {} gas ({:.1} %)",
        (single_gas - batch_gas) / 100,
        100.0 * (single_gas - batch_gas) as f64 / single_gas as f64
    );
    node.shutdown().await;
    Ok(())
}
