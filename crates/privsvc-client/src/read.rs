//! Reading an app's records from the ledger: `list_app` (no payloads, one pinned block) and
//! `fetch_batches` (whole batches with payloads).

use std::collections::BTreeSet;
use std::sync::Arc;

use alloy_primitives::Address;
use privsvc_ledger::{
    ArkivValue, AttributeSelect, Entity, LedgerError, LedgerReader, PageQuery, QueryOptions,
    Select, TagRow,
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
    privsvc_ledger::str_literal(value)
}

/// An address literal `addr(0x…)` (checksummed, as the node requires a valid EIP-55 form).
pub fn addr_literal(address: &Address) -> String {
    privsvc_ledger::literal(&ArkivValue::Addr(*address))
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

/// Block ranges of a listing listed at once, at most (a first listing of a large app is
/// thousands of pages of at most 200).
const LISTING_PARTS: usize = 32;
/// Parts a range is split into at most, at once.
const SPLIT_WAYS: u64 = 8;
/// Pages asked for in one request, at most ([`LedgerReader::query_many`]: one JSON-RPC batch).
const PAGES_PER_REQUEST: usize = 8;
/// Requests of a listing in flight at once.
const REQUESTS_IN_FLIGHT: usize = 4;
/// Pages decoded ahead of the merge (bounds the memory a listing holds at once).
const PAGES_AHEAD: usize = PAGES_PER_REQUEST * REQUESTS_IN_FLIGHT;
/// Pages of tag rows decoded ahead of the merge, at most: a page of tag rows is small (200 rows
/// of about 140 bytes), and a listing that waits for the merge while the vault opens a batch
/// of tags has no request in flight.
const TAG_PAGES_AHEAD: usize = 256;

/// A block range `(after, until]` of a listing; `None` bounds are open.
type Range = (Option<u64>, Option<u64>);

/// A range being listed, the cursor of its next page (`None`: its first page), and its share
/// of the listing's [`LISTING_PARTS`] ranges: how many ranges it may become when split.
struct Open {
    range: Range,
    cursor: Option<String>,
    share: usize,
}

/// The project's records created after block `after` (all of them for `None`), read at one
/// pinned block (the head when the listing starts), without payloads: key, creator, creation
/// and expiry blocks, and every attribute (`with_attributes`) or only `tag`. Not the owner:
/// a record is the user's by its tag, and the scan reads the owner of the user's records
/// with their batch. The pages
/// come out of the returned [`PageStream`] as they arrive (in no particular order), each
/// record exactly once. The expressions name the project and blocks, never an owner, key or
/// tag: every client's scan sends the same kind of query.
///
/// Pages are asked for in requests of up to [`PAGES_PER_REQUEST`] pages of different ranges
/// (one JSON-RPC batch each), [`REQUESTS_IN_FLIGHT`] at once; when a request is answered, the
/// next pages of its ranges join the queue of the next request. A range whose first page is
/// full is split into up to [`SPLIT_WAYS`] parts listed afresh (its first page is not passed
/// on: its rows come again in the parts), as far as its share of the [`LISTING_PARTS`] ranges
/// allows: the whole listing starts with all of them, a range split hands its share (with its
/// part of the shares of ranges that ended, shared with the ranges whose first page is still
/// to come) to its parts in equal parts. So equally crowded
/// parts end up as equally many ranges, and the deepest range, which sets the listing's
/// length, is not eight times deeper than the others, as when the first parts answered took
/// all the splits. The splits follow where the records are, whatever order the node returns
/// them in; what the RPC sees depends on the head, `after`, the public listing and the timing
/// of the answers alone.
pub(crate) async fn start_listing(
    reader: &Arc<dyn LedgerReader>,
    project: &str,
    after: Option<u64>,
    with_attributes: bool,
) -> Result<PageStream, LedgerError> {
    let select = Select {
        key: true,
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
    let ahead = if with_attributes {
        PAGES_AHEAD
    } else {
        TAG_PAGES_AHEAD
    };
    let (tx, rx) = tokio::sync::mpsc::channel(ahead);
    let lister = RangeLister {
        reader: reader.clone(),
        project: project.to_owned(),
        select,
        tags_only: !with_attributes,
        block,
        tx,
    };
    // Detached: it reports through the channel, and stops when nobody receives.
    drop(privsvc_rt::spawn(lister.run(after)));
    Ok(PageStream { block, rx })
}

/// A session's first listing started before the session exists: on a device that certainly
/// keeps no scan cache for the session to resume from, the first listing (tags only, from the
/// project's first block) needs no key, so it can run while the wallet derives the vault
/// (docs/PROTOCOL.md §8.1). Give it to [`crate::ClientBuilder::first_listing`]; the session
/// takes it for its first listing when it resumes nothing, and drops it (which stops it)
/// otherwise. Its requests are the ones the session would send, only sooner.
#[derive(Clone)]
pub struct FirstListing {
    project: String,
    stream: Arc<std::sync::Mutex<Option<PageStream>>>,
}

impl FirstListing {
    /// Starts listing `project` from its first block on `reader` (reads the head first: the
    /// block every page is read at). A listing nobody takes stops once it is dropped.
    pub async fn start(
        reader: Arc<dyn LedgerReader>,
        project: &str,
    ) -> Result<Self, crate::PrivsvcError> {
        let stream = start_listing(&reader, project, None, false).await?;
        Ok(Self {
            project: project.to_owned(),
            stream: Arc::new(std::sync::Mutex::new(Some(stream))),
        })
    }

    /// The project it lists.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// The listing, for the session's first listing of `project`; `None` once taken (or for
    /// another project, which drops it).
    pub(crate) fn take(&self, project: &str) -> Option<PageStream> {
        let stream = self.stream.lock().ok()?.take()?;
        (project == self.project).then_some(stream)
    }
}

impl std::fmt::Debug for FirstListing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let waiting = self.stream.lock().map(|s| s.is_some()).unwrap_or(false);
        f.debug_struct("FirstListing")
            .field("project", &self.project)
            .field("waiting", &waiting)
            .finish()
    }
}

/// A listing under way ([`start_listing`]): its pinned block and its pages as they arrive.
/// Dropping it stops the listing.
pub(crate) struct PageStream {
    /// The block every page is read at.
    pub(crate) block: u64,
    rx: tokio::sync::mpsc::Receiver<Result<PageRows, LedgerError>>,
}

/// The rows of one listing page: whole entities (a listing with every attribute) or the
/// compact rows of a tags-only listing.
pub(crate) enum PageRows {
    /// Entities with every attribute.
    Entities(Vec<Entity>),
    /// Rows of a tags-only listing.
    Tags(Vec<TagRow>),
}

impl PageRows {
    /// How many rows.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        match self {
            PageRows::Entities(e) => e.len(),
            PageRows::Tags(t) => t.len(),
        }
    }
}

/// The pages `queries` ask for, with their cursors: tag rows when `tags_only`.
async fn pages_of(
    reader: &dyn LedgerReader,
    queries: &[PageQuery],
    tags_only: bool,
) -> Result<Vec<(PageRows, Option<String>)>, LedgerError> {
    Ok(if tags_only {
        reader
            .query_tags_many(queries)
            .await?
            .into_iter()
            .map(|p| (PageRows::Tags(p.rows), p.cursor))
            .collect()
    } else {
        reader
            .query_many(queries)
            .await?
            .into_iter()
            .map(|p| (PageRows::Entities(p.entities), p.cursor))
            .collect()
    })
}

impl PageStream {
    /// The next page; `None` when the listing is complete.
    pub(crate) async fn next(&mut self) -> Option<Result<PageRows, LedgerError>> {
        self.rx.recv().await
    }

    /// A page that has already arrived, without waiting.
    pub(crate) fn ready(&mut self) -> Option<Result<PageRows, LedgerError>> {
        self.rx.try_recv().ok()
    }
}

/// Lists the ranges of one listing, sending each page (or the error that ends the listing)
/// through `tx`.
struct RangeLister {
    reader: Arc<dyn LedgerReader>,
    project: String,
    select: Select,
    /// Whether the listing selects only the tags (its pages are [`PageRows::Tags`]).
    tags_only: bool,
    block: u64,
    tx: tokio::sync::mpsc::Sender<Result<PageRows, LedgerError>>,
}

impl RangeLister {
    /// Lists everything created after `after`; the channel closes when it is done.
    async fn run(self, after: Option<u64>) {
        use futures::StreamExt;

        let mut queue = std::collections::VecDeque::from([Open {
            range: (after, None),
            cursor: None,
            share: LISTING_PARTS,
        }]);
        // Shares of ranges that ended, for the next splits.
        let mut spare = 0usize;
        // Ranges whose first page has not been answered: each may split, and they share the
        // spare.
        let mut unanswered = 1usize;
        let mut in_flight = futures::stream::FuturesUnordered::new();
        loop {
            while in_flight.len() < REQUESTS_IN_FLIGHT && !queue.is_empty() {
                let take = queue.len().min(PAGES_PER_REQUEST);
                let asked: Vec<Open> = queue.drain(..take).collect();
                let queries: Vec<PageQuery> = asked.iter().map(|o| self.query(o)).collect();
                let reader = self.reader.clone();
                let tags_only = self.tags_only;
                in_flight
                    .push(async move { (asked, pages_of(&*reader, &queries, tags_only).await) });
            }
            let Some((asked, answer)) = in_flight.next().await else {
                return;
            };
            let pages = match answer {
                Ok(pages) if pages.len() == asked.len() => pages,
                Ok(pages) => {
                    let e = LedgerError::Decode(privsvc_ledger::AnswerError::PageCount {
                        pages: pages.len(),
                        queries: asked.len(),
                    });
                    let _ = self.tx.send(Err(e)).await;
                    return;
                }
                Err(e) => {
                    let _ = self.tx.send(Err(e)).await;
                    return;
                }
            };
            // The ranges that ended first: their shares are spare for a split of this answer.
            let (ended, going): (Vec<_>, Vec<_>) = asked
                .into_iter()
                .zip(pages)
                .partition(|(_, (_, next))| next.is_none());
            for (o, (rows, _)) in ended {
                if o.cursor.is_none() {
                    unanswered -= 1;
                }
                spare += o.share;
                if self.tx.send(Ok(rows)).await.is_err() {
                    return;
                }
            }
            let mut split_into = 0;
            for (o, (rows, next)) in going {
                let Some(next) = next else { continue };
                if o.cursor.as_ref() == Some(&next) {
                    let repeated = privsvc_ledger::AnswerError::RepeatedCursor;
                    let _ = self.tx.send(Err(LedgerError::Decode(repeated))).await;
                    return;
                }
                let first = o.cursor.is_none();
                // A full first page takes its part of the spare: the ranges whose first page is
                // still to come may need it as much.
                let take = if first {
                    unanswered -= 1;
                    spare.div_ceil(unanswered + 1)
                } else {
                    0
                };
                spare -= take;
                let available = o.share + take;
                let parts = if first {
                    self.parts(o.range, available)
                } else {
                    vec![o.range]
                };
                if parts.len() > 1 {
                    // A range split into parts is listed afresh: its first page's rows come
                    // again. The parts share what the range had.
                    let ways = parts.len();
                    // Counted once this answer is done: the spare is shared among the ranges
                    // that were waiting for a first page when it came.
                    split_into += ways;
                    queue.extend(parts.into_iter().enumerate().map(|(i, range)| Open {
                        range,
                        cursor: None,
                        share: available / ways + usize::from(i < available % ways),
                    }));
                    continue;
                }
                if self.tx.send(Ok(rows)).await.is_err() {
                    return;
                }
                // A range that follows its cursor is one range to the end: the rest of its share
                // is spare.
                spare += available - 1;
                queue.push_back(Open {
                    range: o.range,
                    cursor: Some(next),
                    share: 1,
                });
            }
            unanswered += split_into;
        }
    }

    /// The query of the next page of `o`, at the pinned block.
    fn query(&self, o: &Open) -> PageQuery {
        let (lo, hi) = o.range;
        let mut expression = format!("project = {}", str_literal(&self.project));
        if let Some(b) = lo {
            expression.push_str(&format!(" AND $createdAt > u64({b})"));
        }
        if let Some(b) = hi {
            expression.push_str(&format!(" AND $createdAt <= u64({b})"));
        }
        let mut options = QueryOptions::new(self.select.clone());
        options.at_block = Some(self.block);
        options.limit = Some(privsvc_ledger::MAX_PAGE_SIZE);
        options.cursor = o.cursor.clone();
        PageQuery {
            expression,
            options,
        }
    }

    /// `range` cut into at most `most` (and [`SPLIT_WAYS`]) parts of whole blocks; one part
    /// when it cannot be cut.
    fn parts(&self, range: Range, most: usize) -> Vec<Range> {
        let (lo, hi) = range;
        let (from, until) = (lo.unwrap_or(0), hi.unwrap_or(self.block));
        let width = until.saturating_sub(from);
        let ways = SPLIT_WAYS.min(width).min(most as u64);
        if ways < 2 {
            return vec![range];
        }
        let cut = |i: u64| from + width * i / ways;
        (0..ways)
            .map(|i| {
                let lower = if i == 0 { lo } else { Some(cut(i)) };
                let upper = if i + 1 == ways { hi } else { Some(cut(i + 1)) };
                (lower, upper)
            })
            .collect()
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

    /// A node of `rows` records at blocks `1..=20` of a 4,000-block chain, serving pages of
    /// 200 in key order (not block order), recording every range it was asked for.
    struct CrowdedNode {
        rows: Vec<Entity>,
        asked: std::sync::Mutex<Vec<(u64, u64)>>,
        /// Pages answered, first pages or not.
        answered: std::sync::atomic::AtomicUsize,
        /// Pages answered per range, first pages included.
        depth: std::sync::Mutex<std::collections::HashMap<(u64, u64), usize>>,
    }

    /// `n` records with distinct keys, record `i` created at block `created_at(i)`.
    fn records(n: u32, created_at: impl Fn(u32) -> u64) -> Vec<Entity> {
        (0..n)
            .map(|i| {
                let mut key = [0u8; 32];
                key[..4].copy_from_slice(&i.to_le_bytes());
                Entity {
                    key: alloy_primitives::B256::from(key),
                    created_at: Some(created_at(i)),
                    ..Default::default()
                }
            })
            .collect()
    }

    /// Lists everything `node` holds (tags only, from the start): how many rows came.
    async fn rows_listed(node: &Arc<CrowdedNode>) -> usize {
        let reader: Arc<dyn LedgerReader> = node.clone();
        let mut pages = start_listing(&reader, "p", None, false).await.unwrap();
        let mut rows = 0;
        while let Some(page) = pages.next().await {
            rows += page.unwrap().len();
        }
        rows
    }

    impl CrowdedNode {
        fn new(rows: Vec<Entity>) -> Self {
            Self {
                rows,
                asked: Default::default(),
                answered: Default::default(),
                depth: Default::default(),
            }
        }

        /// The most pages any one range took.
        fn deepest(&self) -> usize {
            self.depth
                .lock()
                .unwrap()
                .values()
                .copied()
                .max()
                .unwrap_or(0)
        }
    }

    fn bound(expression: &str, op: &str) -> Option<u64> {
        let rest = expression.split(&format!("$createdAt {op} u64(")).nth(1)?;
        rest.split(')').next()?.parse().ok()
    }

    #[async_trait::async_trait]
    impl LedgerReader for CrowdedNode {
        async fn chain_id(&self) -> Result<u64, LedgerError> {
            Ok(1)
        }
        async fn block_number(&self) -> Result<u64, LedgerError> {
            Ok(4_000)
        }
        async fn query(
            &self,
            expression: &str,
            options: &QueryOptions,
        ) -> Result<privsvc_ledger::QueryPage, LedgerError> {
            let (lo, hi) = (
                bound(expression, ">").unwrap_or(0),
                bound(expression, "<=").unwrap_or(4_000),
            );
            if options.cursor.is_none() {
                self.asked.lock().unwrap().push((lo, hi));
            }
            *self.depth.lock().unwrap().entry((lo, hi)).or_default() += 1;
            self.answered
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let matching: Vec<&Entity> = self
                .rows
                .iter()
                .filter(|e| e.created_at.is_some_and(|b| (b > lo || lo == 0) && b <= hi))
                .collect();
            let from: usize = options.cursor.as_deref().map_or(0, |c| c.parse().unwrap());
            let to = (from + 200).min(matching.len());
            Ok(privsvc_ledger::QueryPage {
                entities: matching[from..to].iter().map(|e| (*e).clone()).collect(),
                block_number: 4_000,
                cursor: (to < matching.len()).then(|| to.to_string()),
            })
        }
        async fn entity(
            &self,
            _: alloy_primitives::B256,
            _: Option<u64>,
        ) -> Result<Option<Entity>, LedgerError> {
            Ok(None)
        }
        async fn code_at(&self, _: Address) -> Result<Vec<u8>, LedgerError> {
            Ok(Vec::new())
        }
        async fn entity_nonce(&self, _: Address) -> Result<u64, LedgerError> {
            Ok(0)
        }
        async fn balance(&self, _: Address) -> Result<alloy_primitives::U256, LedgerError> {
            Ok(alloy_primitives::U256::ZERO)
        }
        async fn block_timestamp(&self, _: u64) -> Result<Option<u64>, LedgerError> {
            Ok(None)
        }
    }

    /// A [`CrowdedNode`] whose `query_many` drops the last page of every request.
    struct DroppingNode(CrowdedNode);

    #[async_trait::async_trait]
    impl LedgerReader for DroppingNode {
        async fn chain_id(&self) -> Result<u64, LedgerError> {
            self.0.chain_id().await
        }
        async fn block_number(&self) -> Result<u64, LedgerError> {
            self.0.block_number().await
        }
        async fn query(
            &self,
            expression: &str,
            options: &QueryOptions,
        ) -> Result<privsvc_ledger::QueryPage, LedgerError> {
            self.0.query(expression, options).await
        }
        async fn query_many(
            &self,
            queries: &[PageQuery],
        ) -> Result<Vec<privsvc_ledger::QueryPage>, LedgerError> {
            let mut pages = Vec::new();
            for q in &queries[..queries.len() - 1] {
                pages.push(self.0.query(&q.expression, &q.options).await?);
            }
            Ok(pages)
        }
        async fn entity(
            &self,
            key: alloy_primitives::B256,
            at: Option<u64>,
        ) -> Result<Option<Entity>, LedgerError> {
            self.0.entity(key, at).await
        }
        async fn code_at(&self, a: Address) -> Result<Vec<u8>, LedgerError> {
            self.0.code_at(a).await
        }
        async fn entity_nonce(&self, a: Address) -> Result<u64, LedgerError> {
            self.0.entity_nonce(a).await
        }
        async fn balance(&self, a: Address) -> Result<alloy_primitives::U256, LedgerError> {
            self.0.balance(a).await
        }
        async fn block_timestamp(&self, n: u64) -> Result<Option<u64>, LedgerError> {
            self.0.block_timestamp(n).await
        }
    }

    #[tokio::test]
    async fn a_reader_that_answers_fewer_pages_than_asked_fails_the_listing() {
        let node = DroppingNode(CrowdedNode::new(Vec::new()));
        let reader: Arc<dyn LedgerReader> = Arc::new(node);
        let mut pages = start_listing(&reader, "p", None, false).await.unwrap();
        let Some(Err(err)) = pages.next().await else {
            panic!("the listing did not fail");
        };
        assert!(err.to_string().contains("0 pages to 1 queries"), "{err}");
    }

    #[tokio::test]
    async fn a_listing_splits_where_the_records_are_and_lists_each_once() {
        let rows = records(3_000, |i| u64::from(i % 20) + 1);
        let node = Arc::new(CrowdedNode::new(rows));
        let reader: Arc<dyn LedgerReader> = node.clone();
        let mut seen = std::collections::HashSet::new();
        let mut rows = 0;
        let mut pages = start_listing(&reader, "p", None, false).await.unwrap();
        while let Some(page) = pages.next().await {
            let page = page.unwrap();
            rows += page.len();
            match page {
                PageRows::Tags(rows) => seen.extend(rows.into_iter().map(|r| r.key)),
                PageRows::Entities(_) => panic!("a tags-only listing answers tag rows"),
            }
        }
        assert_eq!(pages.block, 4_000);
        assert_eq!(seen.len(), 3_000, "every record listed");
        assert_eq!(rows, 3_000, "a record listed twice");
        let asked = node.asked.lock().unwrap().clone();
        // The records are in the first 20 of 4,000 blocks: the splits follow them down to
        // ranges of a few blocks.
        assert!(
            asked
                .iter()
                .filter(|(lo, hi)| *hi <= 20 && hi - lo <= 10)
                .count()
                >= 2,
            "no narrow range was listed: {asked:?}"
        );
    }

    /// Records spread evenly over the blocks: the splits make ranges of about equal depth. When
    /// the first parts answered took all the splits (eight ways each while fewer than 32 ranges
    /// were open), the last parts were never split and took about eight times as many pages
    /// in a row as the others.
    #[tokio::test]
    async fn evenly_spread_records_are_listed_in_ranges_of_equal_depth() {
        let rows = records(64_000, |i| u64::from(i % 3_999) + 1);
        let node = Arc::new(CrowdedNode::new(rows));
        assert_eq!(rows_listed(&node).await, 64_000);
        // 32 ranges of 2,000 records are 10 pages each; one of 8,000 would be 40.
        let deepest = node.deepest();
        assert!(
            deepest <= 12,
            "a range took {deepest} pages: the splits are uneven"
        );
        let ranges = node.asked.lock().unwrap().len();
        assert!(ranges <= 1 + 8 + 32, "{ranges} ranges were listed");
    }

    /// Records in two of the first eight parts only (blocks 1,501 to 2,500 of 4,000), as in an
    /// app whose records are recent: the two crowded parts share what the six empty ones gave
    /// back. When the first to split took it all, the other was split four ways only and its
    /// ranges were four times as deep.
    #[tokio::test]
    async fn crowded_parts_share_what_empty_parts_give_back() {
        let rows = records(64_000, |i| 1_501 + u64::from(i % 1_000));
        let node = Arc::new(CrowdedNode::new(rows));
        assert_eq!(rows_listed(&node).await, 64_000);
        let deepest = node.deepest();
        assert!(
            deepest <= 12,
            "a range took {deepest} pages: the crowded parts were split unevenly"
        );
    }

    #[tokio::test]
    async fn a_tags_only_listing_keeps_asking_while_its_pages_wait_to_be_merged() {
        // 120 pages of records across the blocks; nobody takes a page from the stream (as when
        // the session's vault is opening a batch of tags).
        let rows = records(24_000, |i| u64::from(i % 3_900) + 1);
        let node = Arc::new(CrowdedNode::new(rows));
        let reader: Arc<dyn LedgerReader> = node.clone();
        let mut pages = start_listing(&reader, "p", None, false).await.unwrap();
        let answered = || node.answered.load(std::sync::atomic::Ordering::Relaxed);
        let mut last = usize::MAX;
        while answered() != last {
            last = answered();
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // Every page was asked for, split parts' first pages included: the listing did not
        // stop at the 32 pages a listing with every attribute holds ahead.
        assert!(
            answered() >= 24_000 / 200,
            "the listing stopped asking after {} pages while its pages waited",
            answered()
        );
        let mut rows = 0;
        while let Some(page) = pages.next().await {
            rows += page.unwrap().len();
        }
        assert_eq!(rows, 24_000);
    }

    /// A vault that takes 30 ms to open each batch of tags and notes how many batches it was
    /// opening at once, at most.
    struct SlowVault {
        inner: privsvc_vault::KeyVault,
        opening: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
        batches: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl privsvc_vault::Vault for SlowVault {
        fn app(&self) -> &str {
            self.inner.app()
        }
        async fn scope_record(
            &self,
            name: &str,
        ) -> Result<privsvc_vault::RecordRef, privsvc_vault::VaultError> {
            privsvc_vault::Vault::scope_record(&self.inner, name).await
        }
        async fn make_tag(
            &self,
            record: &privsvc_vault::RecordRef,
        ) -> Result<privsvc_vault::Tag, privsvc_vault::VaultError> {
            privsvc_vault::Vault::make_tag(&self.inner, record).await
        }
        async fn open_tags(
            &self,
            tags: &[privsvc_vault::Tag],
        ) -> Result<Vec<Option<privsvc_vault::RecordRef>>, privsvc_vault::VaultError> {
            use std::sync::atomic::Ordering::SeqCst;
            let now = self.opening.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(now, SeqCst);
            self.batches.fetch_add(1, SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            self.opening.fetch_sub(1, SeqCst);
            privsvc_vault::Vault::open_tags(&self.inner, tags).await
        }
        async fn address_of(
            &self,
            record: &privsvc_vault::RecordRef,
        ) -> Result<Address, privsvc_vault::VaultError> {
            privsvc_vault::Vault::address_of(&self.inner, record).await
        }
        async fn cover_scores(
            &self,
            anchor: &privsvc_vault::BatchBytes,
            candidates: &[privsvc_vault::BatchBytes],
        ) -> Result<Vec<[u8; 32]>, privsvc_vault::VaultError> {
            privsvc_vault::Vault::cover_scores(&self.inner, anchor, candidates).await
        }
        async fn sign_envelope(
            &self,
            record: &privsvc_vault::RecordRef,
            body: &privsvc_envelope::EnvelopeBody,
            attributes: &privsvc_attributes::Attributes,
        ) -> Result<String, privsvc_vault::VaultError> {
            privsvc_vault::Vault::sign_envelope(&self.inner, record, body, attributes).await
        }
        async fn sign_proof_on_chain(
            &self,
            record: &privsvc_vault::RecordRef,
            body: &privsvc_vault::OwnershipProofBody,
            chain_id: Option<u64>,
        ) -> Result<alloy_primitives::Signature, privsvc_vault::VaultError> {
            privsvc_vault::Vault::sign_proof_on_chain(&self.inner, record, body, chain_id).await
        }
        async fn encrypt(
            &self,
            record: &privsvc_vault::RecordRef,
            plaintext: &[u8],
        ) -> Result<Vec<u8>, privsvc_vault::VaultError> {
            privsvc_vault::Vault::encrypt(&self.inner, record, plaintext).await
        }
        async fn decrypt(
            &self,
            record: &privsvc_vault::RecordRef,
            data: &[u8],
        ) -> Result<Vec<u8>, privsvc_vault::VaultError> {
            privsvc_vault::Vault::decrypt(&self.inner, record, data).await
        }
    }

    /// `n` listed records spread over the first `blocks` blocks, each with a tag: row `own_at`
    /// tagged by `vault` for `own`, every other by `stranger` for a record of its own.
    fn tagged_rows(
        n: u32,
        blocks: u32,
        own_at: u32,
        vault: &privsvc_vault::KeyVault,
        own: &privsvc_vault::RecordRef,
        stranger: &privsvc_vault::KeyVault,
    ) -> Vec<Entity> {
        use privsvc_ledger::{ArkivValue, Attribute};
        (0..n)
            .map(|i| {
                let tag = if i == own_at {
                    vault.make_tag(own)
                } else {
                    stranger.make_tag(&stranger.new_record())
                };
                let mut key = [0u8; 32];
                key[..4].copy_from_slice(&i.to_le_bytes());
                Entity {
                    key: alloy_primitives::B256::from(key),
                    creator: Some(Address::repeat_byte(9)),
                    created_at: Some(u64::from(i % blocks) + 1),
                    expires_at: Some(9_000),
                    attributes: Some(vec![Attribute {
                        name: "tag".into(),
                        value: ArkivValue::Str(privsvc_vault::tag_to_text(&tag)),
                    }]),
                    ..Default::default()
                }
            })
            .collect()
    }

    #[tokio::test]
    async fn a_listing_stages_the_next_batch_of_tags_while_the_vault_opens_one() {
        use privsvc_vault::KeyVault;

        let (vault, _) = KeyVault::random("app");
        let (stranger, _) = KeyVault::random("app");
        let own = vault.new_record();
        let rows = tagged_rows(20_000, 3_900, 17_777, &vault, &own, &stranger);
        let node: Arc<dyn LedgerReader> = Arc::new(CrowdedNode::new(rows));
        let slow = Arc::new(SlowVault {
            inner: vault,
            opening: Default::default(),
            most: Default::default(),
            batches: Default::default(),
        });
        let lister = crate::session::Lister {
            reader: node,
            vault: slow.clone(),
            project: "p".into(),
            with_attributes: false,
            first: None,
        };
        let mut cache = crate::cache::EntityCache::default();
        assert_eq!(lister.update(&mut cache).await.unwrap(), 20_000);
        assert_eq!(cache.known(), 20_000, "every record counted");
        let opened = cache.take_opened();
        assert_eq!(opened.len(), 1, "the user's record was not found");
        assert_eq!(opened[0].1, own);
        let most = slow.most.load(std::sync::atomic::Ordering::SeqCst);
        let batches = slow.batches.load(std::sync::atomic::Ordering::SeqCst);
        assert!(batches >= 3, "{batches} batches");
        assert_eq!(
            most, 2,
            "batches of tags at the vault at once, at most (of {batches} batches)"
        );
    }

    #[tokio::test]
    async fn a_listing_keeps_rows_only_for_the_users_tags_and_counts_the_others_as_they_arrive() {
        use privsvc_vault::KeyVault;

        let (vault, _) = KeyVault::random("app");
        let (stranger, _) = KeyVault::random("app");
        let own = vault.new_record();
        let rows = tagged_rows(3_000, 20, 1_234, &vault, &own, &stranger);
        let node: Arc<dyn LedgerReader> = Arc::new(CrowdedNode::new(rows));
        let lister = crate::session::Lister {
            reader: node,
            vault: Arc::new(vault),
            project: "p".into(),
            with_attributes: false,
            first: None,
        };
        let mut cache = crate::cache::EntityCache::default();
        let listed = lister.update(&mut cache).await.unwrap();
        assert_eq!(listed, 3_000, "every record listed once");
        assert_eq!(cache.known(), 3_000, "every record counted");
        assert_eq!(
            cache.entries.len(),
            1,
            "the listing kept a row for a record that is not the user's"
        );
        let opened = cache.take_opened();
        assert_eq!(opened.len(), 1);
        assert_eq!(opened[0].1, own);
        assert_eq!(cache.batches.values().sum::<u32>(), 3_000);
        assert_eq!(
            cache.take_since_scan(),
            (3_000, 3_000),
            "listed, tags opened"
        );

        // The attribute listing lists every record again, with every attribute, and does not
        // open again the tags it classified: a vault that opens none of them (not the user's)
        // leaves the user's record the user's.
        let (another, _) = KeyVault::random("app");
        let lister = crate::session::Lister {
            vault: Arc::new(another),
            with_attributes: true,
            ..lister
        };
        // As the scan classifies it.
        let (key, r) = opened[0];
        cache.entries.get_mut(&key).unwrap().class = crate::cache::TagClass::Mine(r);
        let shared = tokio::sync::Mutex::new(cache);
        assert!(lister.list_attributes(&shared).await.unwrap());
        let mut cache = shared.into_inner();
        assert!(cache.with_attributes);
        assert_eq!(cache.known(), 3_000);
        assert_eq!(cache.entries.len(), 1, "the user's record was opened again");
        assert_eq!(cache.take_opened(), opened);
        assert_eq!(
            cache.take_since_scan(),
            (3_000, 0),
            "the attribute listing opened no tag again"
        );
    }
}
