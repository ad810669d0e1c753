//! Reading an app's records from the ledger: `list_app` (no payloads, one pinned block) and
//! `fetch_batches` (whole batches with payloads).

use std::collections::BTreeSet;
use std::sync::Arc;

use alloy_primitives::Address;
use privsvc_ledger::{
    ArkivValue, AttributeSelect, Entity, LedgerError, LedgerReader, QueryOptions, Select,
};

/// Batches combined into one query (3 predicates each stay well under the node's 64).
pub(crate) const BATCHES_PER_QUERY: usize = 16;

/// A batch: the entities one creator (a relayer) created in one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BatchId {
    /// The block that included the batch.
    pub block: u64,
    /// The relayer that created it.
    pub creator: Address,
}

/// The app's records at one block, without payloads.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// The pinned block every page was evaluated at.
    pub block: u64,
    /// The records (key, owner, creator, createdAt, expiresAt, content type and attributes).
    pub entities: Vec<Entity>,
}

impl Listing {
    /// The distinct batches of the listed records.
    pub fn batches(&self) -> BTreeSet<BatchId> {
        self.entities.iter().filter_map(batch_of).collect()
    }
}

/// The batch an entity belongs to, when its creator and creation block are known.
pub fn batch_of(entity: &Entity) -> Option<BatchId> {
    Some(BatchId {
        block: entity.created_at?,
        creator: entity.creator?,
    })
}

/// A typed-query string literal: `str('...')` with quotes doubled.
pub fn str_literal(value: &str) -> String {
    privsvc_ledger::query::str_literal(value)
}

/// An address literal `addr(0x…)` (checksummed, as the node requires a valid EIP-55 form).
pub fn addr_literal(address: &Address) -> String {
    privsvc_ledger::query::literal(&ArkivValue::Addr(*address))
}

fn select_without_payload() -> Select {
    Select {
        key: true,
        owner: true,
        creator: true,
        created_at: true,
        updated_at: true,
        expires_at: true,
        creation_flags: false,
        content_type: true,
        payload: false,
        attribute_schema: false,
        attributes: AttributeSelect::All,
    }
}

fn select_all() -> Select {
    Select {
        payload: true,
        ..select_without_payload()
    }
}

/// Every page of `expression` at one block (the head when `at_block` is `None`, then pinned to
/// the first page's block), 200 per page, through [`privsvc_ledger::query_all_pinned`].
/// Returns the block and the entities.
pub async fn query_pinned(
    reader: &dyn LedgerReader,
    expression: &str,
    select: Select,
    at_block: Option<u64>,
) -> Result<(u64, Vec<Entity>), LedgerError> {
    privsvc_ledger::query_all_pinned(reader, expression, &select, at_block).await
}

fn creators_clause(relayers: &[Address]) -> String {
    let parts: Vec<String> = relayers
        .iter()
        .map(|a| format!("$creator = {}", addr_literal(a)))
        .collect();
    format!("({})", parts.join(" OR "))
}

/// The app's records without payloads, all read at one pinned block (`at_block`, or the head at
/// the first page). With `relayers`, only records created by one of them.
pub async fn list_app(
    reader: &dyn LedgerReader,
    project: &str,
    relayers: Option<&[Address]>,
    at_block: Option<u64>,
) -> Result<Listing, LedgerError> {
    list_app_select(
        reader,
        project,
        relayers,
        at_block,
        select_without_payload(),
    )
    .await
}

/// An incremental listing spanning at least this many blocks is split into [`LISTING_PARTS`]
/// block ranges listed concurrently (each range is paged on its own; a first listing of a large
/// app is thousands of pages of at most 200, and is always split). A tail's few blocks are one
/// query.
const MIN_BLOCKS_TO_SPLIT: u64 = 256;
/// Block ranges of a large listing.
const LISTING_PARTS: u64 = 4;
/// Pages decoded ahead of the merge (bounds the memory a listing holds at once).
const PAGES_AHEAD: usize = 8;

/// The block ranges `(after, until]` of a listing of the records created after `after` (all for
/// `None`) up to `block`: `None` bounds are open.
fn listing_parts(after: Option<u64>, block: u64) -> Vec<(Option<u64>, Option<u64>)> {
    let from = after.unwrap_or(0);
    let span = block.saturating_sub(from);
    let least = if after.is_none() {
        LISTING_PARTS
    } else {
        MIN_BLOCKS_TO_SPLIT
    };
    if span < least {
        return vec![(after, None)];
    }
    (0..LISTING_PARTS)
        .map(|i| {
            let lo = (i > 0).then(|| from + span * i / LISTING_PARTS).or(after);
            let hi = (i + 1 < LISTING_PARTS).then(|| from + span * (i + 1) / LISTING_PARTS);
            (lo, hi)
        })
        .collect()
}

/// The project's records created after block `after` (all of them for `None`), read at one
/// pinned block (the head when the listing starts), without payloads: key, owner, creator,
/// creation and expiry blocks, and every attribute (`with_attributes`) or only `tag`. Each page
/// goes to `sink` as it arrives (in no particular order); returns the block. A long block range
/// is listed as a few concurrent `$createdAt` ranges. The expressions name the project and
/// blocks, never an owner, key or tag: every client's scan sends the same kind of query.
pub(crate) async fn list_since(
    reader: &Arc<dyn LedgerReader>,
    project: &str,
    after: Option<u64>,
    with_attributes: bool,
    mut sink: impl FnMut(Vec<Entity>),
) -> Result<u64, LedgerError> {
    let select = Select {
        key: true,
        owner: true,
        creator: true,
        created_at: true,
        expires_at: true,
        attributes: if with_attributes {
            AttributeSelect::All
        } else {
            AttributeSelect::Named(vec!["tag".into()])
        },
        ..Select::default()
    };
    // Even with no new block the listing is sent: every scan looks the same to the RPC.
    let block = reader.block_number().await?;
    let (tx, mut rx) = tokio::sync::mpsc::channel(PAGES_AHEAD);
    let mut parts = Vec::new();
    for (lo, hi) in listing_parts(after, block) {
        let mut expression = format!("project = {}", str_literal(project));
        if let Some(b) = lo {
            expression.push_str(&format!(" AND $createdAt > u64({b})"));
        }
        if let Some(b) = hi {
            expression.push_str(&format!(" AND $createdAt <= u64({b})"));
        }
        let (reader, select, tx) = (reader.clone(), select.clone(), tx.clone());
        parts.push(privsvc_rt::spawn(async move {
            if let Err(e) = list_part(reader.as_ref(), &expression, select, block, &tx).await {
                // The receiver stops at the first error; nothing else to tell.
                let _ = tx.send(Err(e)).await;
            }
        }));
    }
    drop(tx);
    while let Some(page) = rx.recv().await {
        // An error returns early; the other ranges stop at their next page (nobody receives).
        sink(page?);
    }
    for done in parts {
        done.await
            .map_err(|e| LedgerError::Transport(format!("a listing task failed: {e}")))?;
    }
    Ok(block)
}

/// Every page of `expression` at `block`, each sent to `tx` as it is decoded.
async fn list_part(
    reader: &dyn LedgerReader,
    expression: &str,
    select: Select,
    block: u64,
    tx: &tokio::sync::mpsc::Sender<Result<Vec<Entity>, LedgerError>>,
) -> Result<(), LedgerError> {
    let mut options = QueryOptions {
        at_block: Some(block),
        select,
        limit: Some(privsvc_ledger::rpc::MAX_PAGE_SIZE),
        cursor: None,
    };
    loop {
        let page = reader.query(expression, &options).await?;
        let next = match page.cursor {
            Some(c) if options.cursor.as_deref() == Some(c.as_str()) => {
                return Err(LedgerError::Decode(
                    "arkiv_query returned the same cursor twice".into(),
                ));
            }
            next => next,
        };
        if tx.send(Ok(page.entities)).await.is_err() {
            return Ok(());
        }
        match next {
            Some(c) => options.cursor = Some(c),
            None => return Ok(()),
        }
    }
}

fn app_expression(project: &str, relayers: Option<&[Address]>) -> String {
    let mut expression = format!("project = {}", str_literal(project));
    if let Some(rs) = relayers {
        if !rs.is_empty() {
            expression.push_str(" AND ");
            expression.push_str(&creators_clause(rs));
        }
    }
    expression
}

async fn list_app_select(
    reader: &dyn LedgerReader,
    project: &str,
    relayers: Option<&[Address]>,
    at_block: Option<u64>,
    select: Select,
) -> Result<Listing, LedgerError> {
    if relayers.is_some_and(|rs| rs.is_empty()) {
        let block = match at_block {
            Some(b) => b,
            None => reader.block_number().await?,
        };
        return Ok(Listing {
            block,
            entities: Vec::new(),
        });
    }
    let expression = app_expression(project, relayers);
    let (block, entities) = query_pinned(reader, &expression, select, at_block).await?;
    Ok(Listing { block, entities })
}

/// Full records (payloads included) of whole batches of the project, read at `at_block`.
///
/// Batches are combined into few queries, so a reader sees a set of batches, not which one
/// mattered.
pub async fn fetch_batches(
    reader: &dyn LedgerReader,
    project: &str,
    batches: &[BatchId],
    at_block: Option<u64>,
) -> Result<Vec<Entity>, LedgerError> {
    let mut out = Vec::new();
    for chunk in batches.chunks(BATCHES_PER_QUERY) {
        let alternatives: Vec<String> = chunk
            .iter()
            .map(|b| {
                format!(
                    "($creator = {} AND $createdAt = u64({}))",
                    addr_literal(&b.creator),
                    b.block
                )
            })
            .collect();
        let expression = format!(
            "project = {} AND ({})",
            str_literal(project),
            alternatives.join(" OR ")
        );
        let (_, entities) = query_pinned(reader, &expression, select_all(), at_block).await?;
        out.extend(entities);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_escape() {
        assert_eq!(str_literal("it's"), "str('it''s')");
        let a: Address = "0x52908400098527886e0f7030069857d2e4169ee7"
            .parse()
            .unwrap();
        assert_eq!(
            addr_literal(&a),
            "addr(0x52908400098527886E0F7030069857D2E4169EE7)"
        );
    }

    #[test]
    fn listing_parts_cover_the_range_once() {
        assert_eq!(listing_parts(None, 3), vec![(None, None)]);
        assert_eq!(
            listing_parts(None, 100),
            vec![
                (None, Some(25)),
                (Some(25), Some(50)),
                (Some(50), Some(75)),
                (Some(75), None)
            ]
        );
        assert_eq!(listing_parts(Some(90), 100), vec![(Some(90), None)]);
        assert_eq!(
            listing_parts(None, 1000),
            vec![
                (None, Some(250)),
                (Some(250), Some(500)),
                (Some(500), Some(750)),
                (Some(750), None)
            ]
        );
        assert_eq!(
            listing_parts(Some(100), 1100),
            vec![
                (Some(100), Some(350)),
                (Some(350), Some(600)),
                (Some(600), Some(850)),
                (Some(850), None)
            ]
        );
    }

    #[test]
    fn batches_are_distinct() {
        let c = Address::repeat_byte(1);
        let e = |k: u8, b: u64| Entity {
            key: alloy_primitives::B256::repeat_byte(k),
            creator: Some(c),
            created_at: Some(b),
            ..Default::default()
        };
        let l = Listing {
            block: 9,
            entities: vec![e(1, 5), e(2, 5), e(3, 7)],
        };
        assert_eq!(l.batches().len(), 2);
    }
}
