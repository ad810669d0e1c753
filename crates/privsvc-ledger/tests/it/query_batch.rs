//! `RpcLedger::query_many` against the real embedded node: several pages in one JSON-RPC batch
//! give what the same pages asked one by one give; behind a proxy that refuses batches the
//! reader asks page by page, and stops trying batches.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::Router;
use privsvc_devnet::{Devnet, DevnetConfig, DevnetHandle, DEV_PRIVATE_KEYS};
use privsvc_ledger::{
    ArkivValue, Attribute, Create, CreationFlags, LedgerReader, LedgerWriter, Operation, PageQuery,
    QueryOptions, RpcLedger, RpcWriter,
};
use privsvc_ledger::{AttributeSelect, Select};

/// A one-byte record with `attributes`.
fn create_with(salt: u128, attributes: Vec<Attribute>) -> Operation {
    Operation::Create(Create {
        salt,
        expires_at: 0,
        min_lifetime: 100,
        flags: CreationFlags::default(),
        content_type: "text/plain".into(),
        payload: vec![b'x'],
        attributes,
    })
}

fn create(salt: u128, n: i32) -> Operation {
    create_with(
        salt,
        vec![
            Attribute {
                name: "kind".into(),
                value: ArkivValue::Str("paged".into()),
            },
            Attribute {
                name: "n".into(),
                value: ArkivValue::I32(n),
            },
        ],
    )
}

/// A node with `ops` written by the first dev account, and that account's writer.
async fn node_with(ops: &[Operation]) -> (DevnetHandle, RpcWriter) {
    let node = Devnet::start(DevnetConfig::on_demand()).await.unwrap();
    let secret: [u8; 32] = hex::decode(DEV_PRIVATE_KEYS[0].trim_start_matches("0x"))
        .unwrap()
        .try_into()
        .unwrap();
    let writer = RpcWriter::connect(RpcLedger::new(node.url()).unwrap(), &secret)
        .await
        .unwrap();
    assert!(writer.execute(ops).await.unwrap().success);
    (node, writer)
}

/// A query of one page of at most `limit` rows.
fn page_query(select: &Select, expression: &str, limit: u32) -> PageQuery {
    let mut options = QueryOptions::new(select.clone());
    options.limit = Some(limit);
    PageQuery {
        expression: expression.into(),
        options,
    }
}

/// A node with 7 records of kind "paged" (n = 0..7), and the queries of three pages of them.
async fn node_with_pages() -> (DevnetHandle, Vec<PageQuery>) {
    let ops: Vec<Operation> = (0..7).map(|n| create(100 + n as u128, n)).collect();
    let (node, _writer) = node_with(&ops).await;
    let select = Select {
        key: true,
        created_at: true,
        attributes: AttributeSelect::Named(vec!["n".into()]),
        ..Select::default()
    };
    let query = |expression: &str, limit| page_query(&select, expression, limit);
    let queries = vec![
        query("kind = str('paged') AND n < i32(4)", 3),
        query("kind = str('paged') AND n >= i32(4)", 200),
        query("kind = str('none')", 200),
    ];
    (node, queries)
}

async fn one_by_one(reader: &RpcLedger, queries: &[PageQuery]) -> Vec<privsvc_ledger::QueryPage> {
    let mut pages = Vec::new();
    for q in queries {
        pages.push(reader.query(&q.expression, &q.options).await.unwrap());
    }
    pages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_pages_is_the_pages_asked_one_by_one() {
    let (node, queries) = node_with_pages().await;
    let reader = RpcLedger::new(node.url()).unwrap();
    let batched = reader.query_many(&queries).await.unwrap();
    assert_eq!(batched, one_by_one(&reader, &queries).await);
    assert_eq!(batched[0].entities.len(), 3);
    assert!(
        batched[0].cursor.is_some(),
        "the first query has a next page"
    );
    assert_eq!(batched[1].entities.len(), 3);
    assert!(batched[2].entities.is_empty());
    // A page of the batch goes on with its cursor like any page.
    let mut next = queries[0].clone();
    next.options.cursor = batched[0].cursor.clone();
    next.options.at_block = Some(batched[0].block_number);
    let rest = reader
        .query_many(&[next, queries[2].clone()])
        .await
        .unwrap();
    assert_eq!(rest[0].entities.len(), 1);
    assert_eq!(rest[0].cursor, None);
    // A bad query in a batch fails the batch with the node's error.
    let mut bad = queries.clone();
    bad[1].expression = "kind = = str('x')".into();
    match reader.query_many(&bad).await {
        Err(privsvc_ledger::LedgerError::Rpc(node)) => assert_eq!(node.code, -32001),
        other => panic!("expected the node's parse error, got {other:?}"),
    }
    node.shutdown().await;
}

/// Forwards single JSON-RPC calls to the node and answers every batch with one error object
/// (as a node or proxy without batches does); counts what it was sent.
#[derive(Clone)]
struct NoBatches {
    node: String,
    batches: Arc<AtomicUsize>,
    singles: Arc<AtomicUsize>,
}

async fn no_batches(State(p): State<NoBatches>, body: Bytes) -> (axum::http::HeaderMap, String) {
    let mut headers = axum::http::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    if body.first() == Some(&b'[') {
        p.batches.fetch_add(1, Ordering::SeqCst);
        let refusal = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch requests are not supported"}}"#;
        return (headers, refusal.into());
    }
    p.singles.fetch_add(1, Ordering::SeqCst);
    let answer = reqwest::Client::new()
        .post(&p.node)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    (headers, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_proxy_without_batches_the_pages_are_asked_one_by_one() {
    let (node, queries) = node_with_pages().await;
    let proxy = NoBatches {
        node: node.url(),
        batches: Arc::default(),
        singles: Arc::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/", post(no_batches))
        .with_state(proxy.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let reader = RpcLedger::new(url).unwrap();
    let direct = one_by_one(&RpcLedger::new(node.url()).unwrap(), &queries).await;
    assert_eq!(reader.query_many(&queries).await.unwrap(), direct);
    assert_eq!(proxy.batches.load(Ordering::SeqCst), 1);
    assert_eq!(proxy.singles.load(Ordering::SeqCst), 3);
    // The reader remembers: no second batch is tried.
    assert_eq!(reader.query_many(&queries).await.unwrap(), direct);
    assert_eq!(proxy.batches.load(Ordering::SeqCst), 1);
    assert_eq!(proxy.singles.load(Ordering::SeqCst), 6);
    node.shutdown().await;
}

/// Forwards every call to the node, but answers the first batch it is sent with a gateway's
/// error page (HTTP 502, HTML), as a proxy in trouble does; counts what it was sent.
#[derive(Clone)]
struct FlakyGateway {
    node: String,
    batches: Arc<AtomicUsize>,
    singles: Arc<AtomicUsize>,
}

async fn flaky_gateway(
    State(p): State<FlakyGateway>,
    body: Bytes,
) -> (axum::http::StatusCode, axum::http::HeaderMap, String) {
    let mut headers = axum::http::HeaderMap::new();
    if body.first() == Some(&b'[') {
        if p.batches.fetch_add(1, Ordering::SeqCst) == 0 {
            headers.insert("content-type", "text/html".parse().unwrap());
            return (
                axum::http::StatusCode::BAD_GATEWAY,
                headers,
                "<html><body>502 Bad Gateway</body></html>".into(),
            );
        }
    } else {
        p.singles.fetch_add(1, Ordering::SeqCst);
    }
    headers.insert("content-type", "application/json".parse().unwrap());
    let answer = reqwest::Client::new()
        .post(&p.node)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    (axum::http::StatusCode::OK, headers, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_error_page_fails_the_batch_and_does_not_end_batches() {
    let (node, queries) = node_with_pages().await;
    let proxy = FlakyGateway {
        node: node.url(),
        batches: Arc::default(),
        singles: Arc::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/", post(flaky_gateway))
        .with_state(proxy.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let reader = RpcLedger::new(url).unwrap();
    // The error page is a transport failure naming the status (retried like one), not the
    // node's word that it takes no batches.
    match reader.query_many(&queries).await {
        Err(privsvc_ledger::LedgerError::Transport(privsvc_ledger::ChannelError::Status(502))) => {}
        other => panic!("expected a transport error naming HTTP 502, got {other:?}"),
    }
    // What the node's side sees next: a batch again, no page asked alone.
    let direct = one_by_one(&RpcLedger::new(node.url()).unwrap(), &queries).await;
    assert_eq!(reader.query_many(&queries).await.unwrap(), direct);
    assert_eq!(proxy.batches.load(Ordering::SeqCst), 2);
    assert_eq!(proxy.singles.load(Ordering::SeqCst), 0);
    node.shutdown().await;
}

/// A record of kind "tagged" with `tag` (when given) and another string attribute.
fn tagged(salt: u128, tag: Option<&str>) -> Operation {
    let mut attributes = vec![
        Attribute {
            name: "kind".into(),
            value: ArkivValue::Str("tagged".into()),
        },
        Attribute {
            name: "note".into(),
            value: ArkivValue::Str("a \"quoted\" note".into()),
        },
    ];
    if let Some(t) = tag {
        attributes.push(Attribute {
            name: "tag".into(),
            value: ArkivValue::Str(t.into()),
        });
    }
    create_with(salt, attributes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_rows_are_the_pages_of_a_tags_only_listing_in_batches_and_one_by_one() {
    let tag = "A".repeat(56) + "AAA=";
    let short = "B".repeat(59);
    let ops = vec![
        tagged(1, Some(&tag)),
        tagged(2, Some(&short)),
        tagged(3, None),
        tagged(4, Some(&tag)),
        tagged(5, Some(&tag)),
    ];
    let (node, writer) = node_with(&ops).await;
    // What a scan's first listing selects: key, creator, blocks and the tag.
    let select = Select {
        key: true,
        creator: true,
        created_at: true,
        expires_at: true,
        attributes: AttributeSelect::Named(vec!["tag".into()]),
        ..Select::default()
    };
    let query = |expression: &str, limit| page_query(&select, expression, limit);
    let queries = vec![
        query("kind = str('tagged')", 2),
        query("kind = str('tagged')", 200),
        query("kind = str('none')", 200),
    ];
    let reader = RpcLedger::new(node.url()).unwrap();
    let rows = reader.query_tags_many(&queries).await.unwrap();
    let general: Vec<privsvc_ledger::TagPage> = reader
        .query_many(&queries)
        .await
        .unwrap()
        .into_iter()
        .map(Into::into)
        .collect();
    assert_eq!(
        rows, general,
        "the tag rows are the general decoder's pages"
    );
    assert_eq!(rows[0].rows.len(), 2);
    assert!(rows[0].cursor.is_some());
    assert_eq!(rows[1].rows.len(), 5);
    assert!(rows[2].rows.is_empty());
    let texts: Vec<Option<&str>> = rows[1].rows.iter().map(|r| r.tag_text()).collect();
    assert_eq!(
        texts.iter().filter(|t| **t == Some(tag.as_str())).count(),
        3
    );
    assert_eq!(
        texts.iter().filter(|t| t.is_none()).count(),
        2,
        "a 59-character tag and no tag are no tag: {texts:?}"
    );
    let creator = writer.address();
    assert!(rows[1]
        .rows
        .iter()
        .all(|r| r.creator == Some(creator) && r.created_at.is_some() && r.expires_at.is_some()));
    // One page alone, and a page that goes on with its cursor, give the same rows.
    let single = reader.query_tags_many(&queries[1..2]).await.unwrap();
    assert_eq!(single[0], rows[1]);
    let mut next = queries[0].clone();
    next.options.cursor = rows[0].cursor.clone();
    next.options.at_block = Some(rows[0].block_number);
    let rest = reader
        .query_tags_many(&[next, queries[2].clone()])
        .await
        .unwrap();
    assert_eq!(rest[0].rows.len(), 2);
    // A bad query fails the batch with the node's error, as query_many does.
    let mut bad = queries.clone();
    bad[1].expression = "kind = = str('x')".into();
    match reader.query_tags_many(&bad).await {
        Err(privsvc_ledger::LedgerError::Rpc(node)) => assert_eq!(node.code, -32001),
        other => panic!("expected the node's parse error, got {other:?}"),
    }
    node.shutdown().await;
}
