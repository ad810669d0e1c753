//! Decoding of the common `arkiv_query` answer straight into entities, without a `Value` tree
//! (a first listing of a large app decodes thousands of pages of 200 rows).

use std::borrow::Cow;

use alloy_primitives::{Address, B256};
use serde::Deserialize;
use serde_json::Value;

use crate::codec::{parse_hex, parse_uint};
use crate::entity::{ArkivValue, Attribute, Entity, QueryPage};
use crate::wire::{flags_from_json, parse_quantity};

#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
    #[serde(borrow)]
    result: Page<'a>,
}

#[derive(Deserialize)]
struct Page<'a> {
    #[serde(borrow)]
    data: Vec<Row<'a>>,
    #[serde(rename = "blockNumber")]
    block_number: Value,
    #[serde(default)]
    cursor: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Row<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow, default)]
    owner: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    creator: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    created_at: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    updated_at: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    expires_at: Option<Cow<'a, str>>,
    #[serde(default)]
    creation_flags: Option<Value>,
    #[serde(borrow, default)]
    content_type: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    payload: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    attributes: Option<Vec<Attr<'a>>>,
}

#[derive(Deserialize)]
struct Attr<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, rename = "type")]
    type_name: Cow<'a, str>,
    value: Value,
}

/// `0x` hex of exactly `N` bytes, decoded without an intermediate vector (three per row).
fn fixed<const N: usize>(s: &str) -> Option<[u8; N]> {
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    let mut out = [0u8; N];
    // const-hex (alloy's) decodes by table: the `hex` crate's decoder took about 5 % of a first
    // session's main thread in Chromium (docs/BENCHMARKS.md).
    alloy_primitives::hex::decode_to_slice(h, &mut out).ok()?;
    Some(out)
}

fn quantity(s: &Option<Cow<'_, str>>) -> Option<Option<u64>> {
    match s {
        None => Some(None),
        Some(s) => parse_uint(s).and_then(|u| u64::try_from(u).ok()).map(Some),
    }
}

fn entity(r: Row<'_>) -> Option<Entity> {
    let address = |s: &Option<Cow<'_, str>>| match s {
        None => Some(None),
        Some(s) => fixed::<20>(s).map(|b| Some(Address::from(b))),
    };
    let attributes = match r.attributes {
        None => None,
        Some(list) => Some(
            list.into_iter()
                .map(|a| {
                    let value = match (a.type_name.as_ref(), a.value) {
                        // What `from_json` makes of a str, without copying it.
                        ("str", Value::String(s)) => ArkivValue::Str(s),
                        (type_name, value) => ArkivValue::from_json(type_name, &value).ok()?,
                    };
                    Some(Attribute {
                        value,
                        name: a.name.into_owned(),
                    })
                })
                .collect::<Option<Vec<_>>>()?,
        ),
    };
    Some(Entity {
        key: B256::from(fixed::<32>(&r.key)?),
        owner: address(&r.owner)?,
        creator: address(&r.creator)?,
        created_at: quantity(&r.created_at)?,
        updated_at: quantity(&r.updated_at)?,
        expires_at: quantity(&r.expires_at)?,
        creation_flags: match r.creation_flags.filter(|v| !v.is_null()) {
            None => None,
            Some(v) => Some(flags_from_json(&v).ok()?),
        },
        content_type: r.content_type.map(Cow::into_owned),
        payload: match &r.payload {
            None => None,
            Some(p) => Some(parse_hex(p)?),
        },
        attributes,
    })
}

/// `body` as text, checked once: parsed from a `&str`, serde_json does not check each string
/// it borrows again (that check took about a tenth of a listing's decoding in wasm).
fn utf8(body: &[u8]) -> Option<&str> {
    std::str::from_utf8(body).ok()
}

/// The page of a successful answer in the usual shape (string quantities, well-formed
/// rows); `None` for anything else, which the general decoder then handles (and reports).
pub(super) fn query_page(body: &[u8]) -> Option<QueryPage> {
    let answer: Answer<'_> = serde_json::from_str(utf8(body)?).ok()?;
    if answer.error.is_some() {
        return None;
    }
    page(answer.result)
}

/// One answer of a batch: its id, and its result when it has one.
#[derive(Deserialize)]
struct BatchItem<'a> {
    id: Value,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
    #[serde(borrow, default)]
    result: Option<Page<'a>>,
}

/// The pages of a batch answer to `count` queries with ids `first_id..`, in the order asked,
/// when every answer is a successful page in the usual shape; `None` for anything else.
pub(super) fn query_pages(body: &[u8], first_id: u64, count: usize) -> Option<Vec<QueryPage>> {
    let items: Vec<BatchItem<'_>> = serde_json::from_str(utf8(body)?).ok()?;
    if items.len() != count {
        return None;
    }
    let mut pages: Vec<Option<QueryPage>> = vec![None; count];
    for item in items {
        if item.error.is_some() {
            return None;
        }
        let slot = usize::try_from(item.id.as_u64()?.checked_sub(first_id)?).ok()?;
        let free = pages.get_mut(slot)?;
        if free.is_some() {
            return None;
        }
        *free = Some(page(item.result?)?);
    }
    pages.into_iter().collect()
}

fn page(page: Page<'_>) -> Option<QueryPage> {
    let entities = page
        .data
        .into_iter()
        .map(entity)
        .collect::<Option<Vec<_>>>()?;
    Some(QueryPage {
        entities,
        block_number: parse_quantity(&page.block_number).ok()?,
        cursor: page
            .cursor
            .as_ref()
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}
