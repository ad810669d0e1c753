//! `arkiv_query`, `arkiv_getEntity`, `arkiv_getEntityCount`, `arkiv_getBlockTiming`.

use std::sync::Arc;

use alloy_primitives::B256;
use serde_json::{json, Value as Json};

use super::{json as shape, parse_u64, Node, RpcError, RpcResult};
use crate::chain::Chain;
use crate::entity::EntityData;
use crate::query::error::{CODE_BLOCK, CODE_CURSOR};
use crate::query::{cursor, parse, QueryError};
use crate::select::Projection;

/// Default page size when `limit` is absent.
pub const DEFAULT_LIMIT: usize = 100;
/// Maximum page size.
pub const MAX_LIMIT: u64 = 200;

pub(super) fn dispatch(chain: &Chain, method: &str, p: &[Json]) -> RpcResult {
    match method {
        "arkiv_query" => query_text(chain, p).and_then(|text| {
            serde_json::from_str(&text).map_err(|e| RpcError::new(-32603, e.to_string()))
        }),
        "arkiv_getEntity" => get_entity(chain, p),
        "arkiv_getEntityCount" => count(chain, p),
        "arkiv_getBlockTiming" => {
            let head = chain.head();
            let parent_time = head
                .number
                .checked_sub(1)
                .and_then(|n| chain.block(n))
                .map_or(head.timestamp, |b| b.timestamp);
            Ok(json!({
                "current_block": head.number,
                "current_block_time": head.timestamp,
                "duration": head.timestamp - parent_time,
            }))
        }
        _ => Err(RpcError::new(
            -32601,
            format!("the method {method} does not exist/is not available"),
        )),
    }
}

fn query_error(e: QueryError) -> RpcError {
    let mut data = json!({"message": e.message});
    if let Some(p) = e.position {
        data["position"] = json!(p);
    }
    RpcError {
        code: e.code(),
        message: e.message.clone(),
        data: Some(data),
    }
}

/// Check that `block` is retained; -32006 otherwise.
fn check_block(chain: &Chain, block: u64) -> Result<(), RpcError> {
    let latest = chain.head().number;
    let reason = if block > latest {
        "ahead of the chain tip"
    } else if block < chain.first_block() {
        "not retained"
    } else {
        return Ok(());
    };
    let message = format!("block {block} is unavailable: {reason}");
    Err(RpcError {
        code: CODE_BLOCK,
        message: message.clone(),
        data: Some(json!({"requested": block, "latest": latest, "message": message})),
    })
}

/// `arkiv_query`: the page is gathered under the chain lock and rendered as JSON text after
/// the lock is released, so that concurrent queries render in parallel.
/// Returns the whole JSON-RPC answer for request `id`.
pub(super) fn query(node: &Node, id: &Json, p: &[Json]) -> Result<String, RpcError> {
    let page = {
        let chain = node.lock();
        query_page(&chain, p)?
    };
    let prefix = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#);
    page.render(&prefix, "}")
}

/// [`query`] on a locked chain.
fn query_text(chain: &Chain, p: &[Json]) -> Result<String, RpcError> {
    query_page(chain, p)?.render("", "")
}

/// One page of an `arkiv_query`, not rendered yet.
struct Page {
    rows: Vec<Arc<EntityData>>,
    projection: Projection,
    block: u64,
    cursor: Option<String>,
}

impl Page {
    /// `{data, blockNumber, cursor?}` as JSON text between `prefix` and `suffix`, written
    /// into one buffer sized for the page.
    fn render(&self, prefix: &str, suffix: &str) -> Result<String, RpcError> {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            data: Vec<shape::EntityRow<'a>>,
            #[serde(rename = "blockNumber")]
            block_number: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            cursor: Option<&'a str>,
        }
        let out = Out {
            data: self
                .rows
                .iter()
                .map(|e| shape::EntityRow {
                    entity: e,
                    projection: &self.projection,
                })
                .collect(),
            block_number: format!("{:#x}", self.block),
            cursor: self.cursor.as_deref(),
        };
        let size: usize = self
            .rows
            .iter()
            .map(|e| {
                384 + 2 * e.payload.len()
                    + e.attrs
                        .iter()
                        .map(|a| 48 + a.name.len() + 2 * a.value.len())
                        .sum::<usize>()
            })
            .sum();
        let mut buf = Vec::with_capacity(prefix.len() + size + 256);
        buf.extend_from_slice(prefix.as_bytes());
        serde_json::to_writer(&mut buf, &out).map_err(|e| RpcError::new(-32603, e.to_string()))?;
        buf.extend_from_slice(suffix.as_bytes());
        String::from_utf8(buf).map_err(|e| RpcError::new(-32603, e.to_string()))
    }
}

fn query_page(chain: &Chain, p: &[Json]) -> Result<Page, RpcError> {
    let text = p
        .first()
        .and_then(|v| v.as_str())
        .ok_or_else(|| RpcError::params("arkiv_query expects [expression, options?]"))?;
    let empty = serde_json::Map::new();
    let opts = match p.get(1) {
        None | Some(Json::Null) => &empty,
        Some(Json::Object(o)) => o,
        Some(_) => return Err(RpcError::params("options must be an object")),
    };
    if let Some(k) = opts
        .keys()
        .find(|k| !matches!(k.as_str(), "atBlock" | "select" | "limit" | "cursor"))
    {
        return Err(RpcError::params(format!(
            "unknown option `{k}`; allowed: atBlock, select, limit, cursor"
        )));
    }
    let head = chain.head().number;
    let block = match opts.get("atBlock") {
        None | Some(Json::Null) => head,
        Some(v) => parse_u64(v)
            .ok_or_else(|| RpcError::params("atBlock must be a block number (hex quantity)"))?,
    };
    let limit = match opts.get("limit") {
        None | Some(Json::Null) => DEFAULT_LIMIT,
        Some(v) => {
            let n = parse_u64(v).ok_or_else(|| RpcError::params("limit must be a quantity"))?;
            if !(1..=MAX_LIMIT).contains(&n) {
                return Err(RpcError::params(format!(
                    "limit must be between 1 and {MAX_LIMIT}, got {n}"
                )));
            }
            n as usize
        }
    };
    let projection = Projection::from_json(opts.get("select")).map_err(RpcError::params)?;
    let expr = parse(text).map_err(query_error)?;
    check_block(chain, block)?;
    let fp = projection.fingerprint();
    let after = match opts.get("cursor") {
        None | Some(Json::Null) => None,
        Some(Json::String(c)) => {
            Some(cursor::decode(c, text, block, &fp).map_err(|e| RpcError {
                code: CODE_CURSOR,
                message: e.to_string(),
                data: Some(json!({"message": e.to_string()})),
            })?)
        }
        Some(_) => return Err(RpcError::params("cursor must be a string")),
    };
    let mut rows = Vec::with_capacity(limit);
    let mut last = None;
    let mut more = false;
    chain.entities.scan(&expr, block, after, |eid, e| {
        if rows.len() == limit {
            more = true;
            return false;
        }
        rows.push(e.clone());
        last = Some(eid);
        true
    });
    let cursor = match (more, last) {
        (true, Some(id)) => Some(cursor::encode(text, block, &fp, id)),
        _ => None,
    };
    Ok(Page {
        rows,
        projection,
        block,
        cursor,
    })
}

fn get_entity(chain: &Chain, p: &[Json]) -> RpcResult {
    let key: B256 = p
        .first()
        .and_then(|v| v.as_str())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| RpcError::params("arkiv_getEntity expects [key, block?]"))?;
    let block = match p.get(1) {
        None | Some(Json::Null) => chain.head().number,
        Some(v) => parse_u64(v).ok_or_else(|| RpcError::params("block must be a number"))?,
    };
    check_block(chain, block)?;
    Ok(chain
        .entities
        .get_live(&key, block)
        .map_or(Json::Null, |e| shape::entity(e, &Projection::full_entity())))
}

fn count(chain: &Chain, p: &[Json]) -> RpcResult {
    let head = chain.head().number;
    let (text, block) = match p.first() {
        None | Some(Json::Null) => (None, head),
        Some(Json::Object(o)) => {
            let text = match o.get("query") {
                None | Some(Json::Null) => None,
                Some(Json::String(s)) => Some(s.clone()),
                Some(_) => return Err(RpcError::params("query must be a string")),
            };
            let block = match o.get("block") {
                None | Some(Json::Null) => head,
                Some(v) => {
                    parse_u64(v).ok_or_else(|| RpcError::params("block must be a number"))?
                }
            };
            (text, block)
        }
        Some(_) => {
            return Err(RpcError::params(
                "arkiv_getEntityCount expects [] or [{query?, block?}]",
            ))
        }
    };
    check_block(chain, block)?;
    let n = match text {
        None => chain.entities.count_all(block),
        Some(t) => {
            let expr = parse(&t).map_err(query_error)?;
            let mut n = 0u64;
            chain.entities.scan(&expr, block, None, |_, _| {
                n += 1;
                true
            });
            n
        }
    };
    Ok(json!(n))
}
