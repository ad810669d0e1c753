//! Seeds the `notes` project of a running devnet with records of other users, so that the
//! browser benchmark measures `myEntities` on a large app (docs/BENCHMARKS.md, wasm section).
//!
//! ```text
//! cargo run --release --example web_seed -- --rpc-url http://127.0.0.1:8545 --records 10000 [--mine]
//! ```
//!
//! The records are written directly by dev accounts 2, 3 and 4 (not through a relayer) in
//! batches the size of a relayer's (100 records, one transaction of each account a block, as
//! three busy relayers would), each with a valid tag of a random vault: the client lists them,
//! opens every tag and finds none of them its own, as for a real app full of other users'
//! records. (Before 2026-11-29 one account wrote 8 transactions of 200 a block: batches of
//! 1,600, which made a scan's cover fetch 16 times a real one.)
//!
//! `--copy 0x<entity key>` instead does what anyone can do to a record (docs/PROTOCOL.md §8.4:
//! "a record is (owner, envelope)"): dev account 3 creates an entity with the record's sealed
//! envelope and attributes and transfers it to the record's owner; prints the copy's key. The JS
//! tests use it to check that `verifyRecord` with a reader reports the copy.

use anyhow::{Context, Result};
use clap::Parser;
use privsvc::devnet::DEV_PRIVATE_KEYS;
use privsvc::ledger::{
    ArkivValue, Attribute, Create, CreationFlags, LedgerReader, LedgerWriter, Operation, RpcLedger,
    RpcWriter,
};
use privsvc::vault::{tag_to_text, KeyVault};

/// Command-line options.
#[derive(Parser, Debug)]
struct Args {
    /// Ledger JSON-RPC URL.
    #[arg(long)]
    rpc_url: String,
    /// Records to write.
    #[arg(long, default_value_t = 10_000)]
    records: usize,
    /// The project (app) to fill.
    #[arg(long, default_value = "notes")]
    project: String,
    /// Creates per transaction (a relayer's default `MAX_BATCH`).
    #[arg(long, default_value_t = 100)]
    per_tx: usize,
    /// Accounts writing side by side (dev accounts 2, 3 and 4 at most): each sends one
    /// transaction a round, so a block holds one batch of each.
    #[arg(long, default_value_t = 3)]
    creators: usize,
    /// After each round of transactions, ask the ledger for a block at once (`evm_mine`, the
    /// devnet's): seeding a million records then takes minutes, not hours of 2 s blocks.
    #[arg(long)]
    mine: bool,
    /// Instead of seeding: copy this record to its owner (prints the copy's key).
    #[arg(long)]
    copy: Option<String>,
}

/// Creates a copy of the record at `key` (same envelope and attributes, same lifetime) from
/// `writer`'s account and transfers it to the record's owner; the copy's key.
async fn copy_record(writer: &RpcWriter, reader: &RpcLedger, key: &str) -> Result<String> {
    let key = key.parse().context("--copy: an entity key (0x + 64 hex)")?;
    let entity = reader
        .entity(key, None)
        .await?
        .context("--copy: no such entity")?;
    let owner = entity.owner.context("the entity has no owner")?;
    let lifetime = match (entity.created_at, entity.expires_at) {
        (Some(c), Some(e)) if e > c => e - c,
        _ => 1_800,
    };
    let receipt = writer
        .execute(&[Operation::Create(Create {
            salt: rand::random(),
            expires_at: 0,
            min_lifetime: lifetime,
            flags: CreationFlags::default(),
            content_type: entity.content_type.clone().unwrap_or_default(),
            payload: entity
                .payload
                .clone()
                .context("the entity has no payload")?,
            attributes: entity.attributes.clone().unwrap_or_default(),
        })])
        .await?;
    anyhow::ensure!(receipt.success, "the copy reverted");
    let copy = receipt.created[0].key;
    let receipt = writer
        .execute(&[Operation::Transfer {
            key: copy,
            new_owner: owner,
        }])
        .await?;
    anyhow::ensure!(receipt.success, "the transfer reverted");
    Ok(copy.to_string())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let writer_of = |account: usize| -> Result<[u8; 32]> {
        let key = hex::decode(DEV_PRIVATE_KEYS[account].trim_start_matches("0x"))?;
        key.try_into()
            .map_err(|_| anyhow::anyhow!("dev key length"))
    };
    if let Some(original) = &args.copy {
        let writer =
            RpcWriter::connect(RpcLedger::new(args.rpc_url.clone())?, &writer_of(3)?).await?;
        let reader = RpcLedger::new(args.rpc_url.clone())?;
        println!("{}", copy_record(&writer, &reader, original).await?);
        return Ok(());
    }
    anyhow::ensure!(
        (1..=3).contains(&args.creators),
        "--creators: 1 to 3 (dev accounts 2, 3 and 4)"
    );
    let mut writers = Vec::new();
    for account in 2..2 + args.creators {
        let writer =
            RpcWriter::connect(RpcLedger::new(args.rpc_url.clone())?, &writer_of(account)?).await?;
        writers.push(writer);
    }
    let (other, _) = KeyVault::random(&args.project);
    let started = std::time::Instant::now();
    let mut written = 0;
    if args.mine {
        // Anything these accounts left pending (an interrupted seeding) is mined first.
        writers[0]
            .ledger()
            .call("evm_mine", serde_json::json!([]))
            .await?;
    }
    let mut nonces = Vec::new();
    for writer in &writers {
        nonces.push(
            writer
                .ledger()
                .transaction_count(writer.address(), true)
                .await?,
        );
    }
    while written < args.records {
        // A round: one transaction of each account, then (with --mine) a block, then receipts.
        let mut round = Vec::new();
        for (writer, nonce) in writers.iter().zip(nonces.iter_mut()) {
            if written >= args.records {
                break;
            }
            let n = args.per_tx.min(args.records - written);
            let ops = creates(&other, &args.project, written, n)?;
            let tx = writer
                .prepare(&ops, Some(*nonce))
                .await
                .context("preparing a batch")?;
            writer.broadcast(&tx).await?;
            round.push((writer, tx.hash));
            *nonce += 1;
            written += n;
        }
        if args.mine {
            writers[0]
                .ledger()
                .call("evm_mine", serde_json::json!([]))
                .await?;
        }
        for (writer, hash) in round {
            loop {
                if let Some(r) = writer.receipt(hash).await? {
                    anyhow::ensure!(r.success, "batch reverted: {:?}", r.revert_reason);
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
    println!(
        "seeded {written} records in project {:?} in {:.1} s",
        args.project,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `n` creates of records of another user (random refs of one vault), the `i`-th with kind
/// a, b or c in turn from `first`.
fn creates(other: &KeyVault, project: &str, first: usize, n: usize) -> Result<Vec<Operation>> {
    (0..n)
        .map(|i| -> Result<Operation> {
            let tag = tag_to_text(&other.make_tag(&other.new_record()));
            Ok(Operation::Create(Create {
                salt: rand::random(),
                expires_at: 0,
                min_lifetime: 7_200, // four hours of 2 s blocks (a bench seeds, then scans for a while)
                flags: CreationFlags::default(),
                content_type: "application/json".into(),
                payload: b"{}".to_vec(),
                attributes: vec![
                    Attribute {
                        name: "kind".into(),
                        value: ArkivValue::str(["a", "b", "c"][(first + i) % 3])?,
                    },
                    Attribute {
                        name: "project".into(),
                        value: ArkivValue::str(project.to_owned())?,
                    },
                    Attribute {
                        name: "tag".into(),
                        value: ArkivValue::str(tag)?,
                    },
                ],
            }))
        })
        .collect()
}
