//! Ledger benchmark against the embedded devnet (real HTTP, real signatures, on-demand blocks).
//!
//! ```text
//! cargo run --release --example ledger_bench [-- --entities 100000 --writes 5000]
//! ```
//!
//! Prints:
//! 1. batch write throughput (entities/s) for batches of 1, 10, 100 and 500 creates, each batch
//!    one `execute()` transaction written through privsvc-ledger's `RpcWriter` (gas estimate,
//!    fees, EIP-1559 signing, `eth_sendRawTransaction`, receipt decoding);
//! 2. `arkiv_query` rows/s listing 100 000 entities page by page (limit 200, pinned `atBlock`,
//!    cursors) with `select: {attributes: true}` only; the entities are seeded at genesis;
//! 3. gas per record for one batch of 100 creates against 100 single-create transactions.

use std::time::Instant;

use clap::Parser;
use privsvc_devnet::testing::exec::derive_key;
use privsvc_devnet::{
    Bytes, Devnet, DevnetConfig, DevnetHandle, EntityData, StoredAttr, DEV_PRIVATE_KEYS, U256,
};
use privsvc_ledger::{
    ArkivValue, Attribute, Create, CreationFlags, LedgerWriter, Operation, RpcLedger, RpcWriter,
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

fn create(salt: u128, i: u64) -> Operation {
    Operation::Create(Create {
        salt,
        expires_at: 0,
        min_lifetime: 100_000,
        flags: CreationFlags::default(),
        content_type: "application/octet-stream".into(),
        payload: vec![0xab; 256],
        attributes: vec![
            Attribute {
                name: "project".into(),
                value: ArkivValue::Str("bench".into()),
            },
            Attribute {
                name: "seq".into(),
                value: ArkivValue::U64(i),
            },
        ],
    })
}

async fn writer(node: &DevnetHandle) -> anyhow::Result<RpcWriter> {
    let raw: [u8; 32] = hex::decode(DEV_PRIVATE_KEYS[0].trim_start_matches("0x"))?
        .try_into()
        .map_err(|_| anyhow::anyhow!("dev key is not 32 bytes"))?;
    Ok(RpcWriter::connect(RpcLedger::new(node.url())?, &raw).await?)
}

/// Write one batch; returns its gas.
async fn send(w: &RpcWriter, ops: &[Operation]) -> anyhow::Result<u64> {
    let r = w.execute(ops).await?;
    anyhow::ensure!(r.success, "batch reverted: {:?}", r.revert_reason);
    anyhow::ensure!(r.created.len() == ops.len(), "missing EntityCreated logs");
    Ok(r.gas_used)
}

async fn on_demand() -> anyhow::Result<DevnetHandle> {
    Ok(Devnet::start(DevnetConfig::on_demand()).await?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();

    // 1. Write throughput.
    println!("== batch write throughput (RpcWriter -> devnet over HTTP, one block per tx) ==");
    for size in [1usize, 10, 100, 500] {
        let node = on_demand().await?;
        let w = writer(&node).await?;
        let batches = (args.writes / size).max(1);
        let t = Instant::now();
        let mut i = 0u64;
        for _ in 0..batches {
            let ops: Vec<Operation> = (0..size)
                .map(|_| {
                    i += 1;
                    create(i as u128, i)
                })
                .collect();
            send(&w, &ops).await?;
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
    let owner = privsvc_devnet::DevSigner::dev(0).address();
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
    let mut devnet_config = DevnetConfig::on_demand();
    devnet_config.genesis_entities = ents;
    let node = Devnet::start(devnet_config).await?;
    println!(
        "seeded {} entities at genesis in {:.2} s",
        args.entities,
        t.elapsed().as_secs_f64()
    );
    let ledger = RpcLedger::new(node.url())?;
    let head = ledger.call("eth_blockNumber", json!([])).await?;
    let t = Instant::now();
    let (mut rows, mut pages, mut cursor) = (0u64, 0u64, None::<String>);
    loop {
        let mut opts = json!({"select": {"attributes": true}, "limit": "0xc8", "atBlock": head});
        if let Some(c) = &cursor {
            opts["cursor"] = json!(c);
        }
        let r: Json = ledger
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
    let node = on_demand().await?;
    let w = writer(&node).await?;
    let batch: Vec<Operation> = (0..100).map(|i| create(i, i as u64)).collect();
    let batch_gas = send(&w, &batch).await?;
    let mut single_gas = 0;
    for i in 0..100u64 {
        single_gas += send(&w, &[create(1000 + i as u128, i)]).await?;
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
