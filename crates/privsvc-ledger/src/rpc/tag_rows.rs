//! Decoding of tags-only `arkiv_query` answers straight into [`TagRow`]s: one pass over the
//! bytes, nothing allocated per row (a first listing of a large app is a million rows, decoded
//! on a browser page's thread). Only the usual shape is taken: string fields without escapes,
//! `0x` quantities, string attributes. Anything else is `None`, and the general decoder then
//! reads (or reports) the answer.

use alloy_primitives::{Address, B256};

use crate::listing::{tag_of, TagPage, TagRow, TAG_ATTRIBUTE};

/// A position in a JSON text.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn skip_space(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte that is not white space, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.at += 1)
    }

    /// A string without escapes or control characters, as its bytes.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let rest = &self.bytes[self.at..];
        let end = rest
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        if rest[end] != b'"' {
            return None;
        }
        self.at += end + 1;
        Some(&rest[..end])
    }

    /// A non-negative integer number.
    fn integer(&mut self) -> Option<u64> {
        self.skip_space();
        let start = self.at;
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        std::str::from_utf8(&self.bytes[start..self.at])
            .ok()?
            .parse()
            .ok()
    }

    fn null(&mut self) -> Option<()> {
        self.skip_space();
        self.bytes[self.at..]
            .starts_with(b"null")
            .then(|| self.at += 4)
    }

    /// An object, `member` called with each name to read its value.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            let name = self.string()?;
            self.eat(b':')?;
            member(self, name)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An array, `item` called to read each item.
    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.at += 1;
            return Some(());
        }
        loop {
            item(self)?;
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

/// A `0x` quantity of 1 to 16 hex digits.
fn quantity(s: &[u8]) -> Option<u64> {
    let h = s.strip_prefix(b"0x")?;
    if h.is_empty() || h.len() > 16 {
        return None;
    }
    h.iter().try_fold(0u64, |v, &c| {
        Some(v << 4 | u64::from((c as char).to_digit(16)?))
    })
}

/// `0x` hex of exactly `N` bytes.
fn fixed<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    let h = s.strip_prefix(b"0x").or_else(|| s.strip_prefix(b"0X"))?;
    let mut out = [0u8; N];
    alloy_primitives::hex::decode_to_slice(h, &mut out).ok()?;
    Some(out)
}

fn row(c: &mut Cursor<'_>) -> Option<TagRow> {
    let mut key = None;
    let mut row = TagRow {
        key: B256::ZERO,
        creator: None,
        created_at: None,
        expires_at: None,
        tag: None,
    };
    c.object(|c, name| {
        match name {
            b"key" => key = Some(B256::from(fixed::<32>(c.string()?)?)),
            b"creator" => row.creator = Some(Address::from(fixed::<20>(c.string()?)?)),
            b"owner" => {
                fixed::<20>(c.string()?)?;
            }
            b"createdAt" => row.created_at = Some(quantity(c.string()?)?),
            b"updatedAt" => {
                quantity(c.string()?)?;
            }
            b"expiresAt" => row.expires_at = Some(quantity(c.string()?)?),
            b"attributes" => c.array(|c| {
                let (mut name, mut kind, mut value) = (None, None, None);
                c.object(|c, field| {
                    let text = c.string()?;
                    match field {
                        b"name" => name = Some(text),
                        b"type" => kind = Some(text),
                        b"value" => value = Some(text),
                        _ => return None,
                    }
                    Some(())
                })?;
                // A string attribute (the general decoder reads the other types).
                if kind? != b"str" {
                    return None;
                }
                let value = value?;
                if name? == TAG_ATTRIBUTE.as_bytes() {
                    row.tag = tag_of(value);
                }
                Some(())
            })?,
            _ => return None,
        }
        Some(())
    })?;
    row.key = key?;
    Some(row)
}

/// The `result` of an `arkiv_query` answer.
fn page(c: &mut Cursor<'_>) -> Option<TagPage> {
    let mut rows = None;
    let mut block_number = None;
    let mut cursor = None;
    c.object(|c, name| {
        match name {
            b"data" => {
                let mut list = Vec::with_capacity(crate::MAX_PAGE_SIZE as usize);
                c.array(|c| {
                    list.push(row(c)?);
                    Some(())
                })?;
                rows = Some(list);
            }
            b"blockNumber" => block_number = Some(quantity(c.string()?)?),
            b"cursor" => {
                if c.peek()? == b'n' {
                    c.null()?;
                } else {
                    cursor = Some(std::str::from_utf8(c.string()?).ok()?.to_owned());
                }
            }
            _ => return None,
        }
        Some(())
    })?;
    Some(TagPage {
        rows: rows?,
        block_number: block_number?,
        cursor,
    })
}

/// One JSON-RPC answer object: its id and its page (`None` for an error answer, or anything
/// but the usual shape).
fn answer(c: &mut Cursor<'_>) -> Option<(u64, TagPage)> {
    let mut id = None;
    let mut result = None;
    c.object(|c, name| {
        match name {
            b"jsonrpc" => {
                c.string()?;
            }
            b"id" => id = Some(c.integer()?),
            b"result" => result = Some(page(c)?),
            _ => return None,
        }
        Some(())
    })?;
    Some((id?, result?))
}

/// The whole of `body` read by `read`, with nothing after it but white space. The text must be
/// UTF-8 (checked once), as the general decoder requires.
fn whole<T>(body: &[u8], read: impl FnOnce(&mut Cursor<'_>) -> Option<T>) -> Option<T> {
    std::str::from_utf8(body).ok()?;
    let mut c = Cursor { bytes: body, at: 0 };
    let value = read(&mut c)?;
    c.skip_space();
    (c.at == body.len()).then_some(value)
}

/// The page of a successful answer to one tags-only query, in the usual shape.
pub(crate) fn tag_page(body: &[u8]) -> Option<TagPage> {
    whole(body, answer).map(|(_, page)| page)
}

/// The pages of a batch answer to `count` tags-only queries with ids `first_id..`, in the
/// order asked, when every answer is a successful page in the usual shape.
pub(crate) fn tag_pages(body: &[u8], first_id: u64, count: usize) -> Option<Vec<TagPage>> {
    let mut pages: Vec<Option<TagPage>> = vec![None; count];
    whole(body, |c| {
        c.array(|c| {
            let (id, page) = answer(c)?;
            let slot = usize::try_from(id.checked_sub(first_id)?).ok()?;
            let free = pages.get_mut(slot)?;
            if free.is_some() {
                return None;
            }
            *free = Some(page);
            Some(())
        })
    })?;
    pages.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::*;
    use crate::listing::TAG_TEXT_LEN;
    use crate::rpc::{decode_query_answer, decode_query_batch_answer};

    /// A row as the node writes it: `tag` and `note` attributes when given.
    fn row_json(key: u8, tag: Option<&str>, note: Option<&str>) -> Value {
        let mut attributes = Vec::new();
        if let Some(n) = note {
            attributes.push(json!({"name": "note", "type": "str", "value": n}));
        }
        if let Some(t) = tag {
            attributes.push(json!({"name": "tag", "type": "str", "value": t}));
        }
        json!({
            "key": format!("0x{}", hex::encode([key; 32])),
            "creator": format!("0x{}", hex::encode([key ^ 0x5a; 20])),
            "createdAt": format!("{:#x}", 70 + u64::from(key)),
            "expiresAt": format!("{:#x}", 7_000 + u64::from(key)),
            "attributes": attributes,
        })
    }

    fn batch(pages: &[(u64, Vec<Value>, Option<&str>)]) -> Value {
        Value::Array(
            pages
                .iter()
                .map(|(id, rows, cursor)| {
                    let mut result = json!({"data": rows, "blockNumber": "0x7d0"});
                    if let Some(c) = cursor {
                        result["cursor"] = json!(c);
                    }
                    json!({"jsonrpc": "2.0", "id": id, "result": result})
                })
                .collect(),
        )
    }

    /// The general decoder's pages of `body`, as tag pages.
    fn general(body: &[u8], first_id: u64, count: usize) -> Vec<TagPage> {
        decode_query_batch_answer(body, first_id, count)
            .unwrap()
            .unwrap()
            .into_iter()
            .map(TagPage::from)
            .collect()
    }

    #[test]
    fn the_usual_shape_decodes_to_the_general_decoders_rows() {
        let tag = "t".repeat(TAG_TEXT_LEN);
        let answer = batch(&[
            (
                8,
                vec![
                    row_json(1, Some(&tag), None),
                    row_json(2, Some(&"s".repeat(59)), Some("n")),
                    row_json(3, None, None),
                ],
                Some("b64:abc"),
            ),
            (7, vec![row_json(4, Some(&tag), Some("x"))], None),
        ]);
        for text in [
            answer.to_string(),
            serde_json::to_string_pretty(&answer).unwrap(),
        ] {
            let fast = tag_pages(text.as_bytes(), 7, 2).expect("the usual shape");
            assert_eq!(fast, general(text.as_bytes(), 7, 2));
            assert_eq!(fast[0].rows.len(), 1, "asked order: id 7 first");
            assert_eq!(fast[1].cursor.as_deref(), Some("b64:abc"));
            assert_eq!(fast[1].rows[0].tag_text(), Some(tag.as_str()));
            assert_eq!(fast[1].rows[1].tag, None, "a 59-character tag is none");
            assert_eq!(fast[1].rows[2].tag, None);
            assert_eq!(fast[1].rows[0].created_at, Some(71));
            assert_eq!(fast[1].rows[0].expires_at, Some(7_001));
        }
        let one = json!({"jsonrpc": "2.0", "id": 3, "result": {"data": [row_json(9, Some(&tag), None)], "blockNumber": "0x1", "cursor": null}}).to_string();
        let page = tag_page(one.as_bytes()).unwrap();
        assert_eq!(page, decode_query_answer(one.as_bytes()).unwrap().into());
        assert_eq!(page.cursor, None);
    }

    #[test]
    fn other_shapes_are_left_to_the_general_decoder() {
        let tag = "t".repeat(TAG_TEXT_LEN);
        let usual = || batch(&[(1, vec![row_json(1, Some(&tag), None)], None)]);
        let mut escaped = usual().to_string();
        escaped = escaped.replacen("\"tag\"", "\"t\\u0061g\"", 1);
        let mut numeric = usual();
        numeric[0]["result"]["data"][0]["attributes"] =
            json!([{"name": "n", "type": "u64", "value": "0x5"}]);
        let mut block_number = usual();
        block_number[0]["result"]["blockNumber"] = json!(2000);
        let mut decimal = usual();
        decimal[0]["result"]["data"][0]["createdAt"] = json!("71");
        let mut unknown = usual();
        unknown[0]["result"]["data"][0]["payload"] = json!("0x00");
        for (what, text) in [
            ("an escape", escaped),
            ("a numeric attribute", numeric.to_string()),
            ("a number block", block_number.to_string()),
            ("a decimal quantity", decimal.to_string()),
            ("a payload", unknown.to_string()),
        ] {
            assert_eq!(tag_pages(text.as_bytes(), 1, 1), None, "{what}");
            // What the general decoder makes of it is what the reader answers.
            assert_eq!(general(text.as_bytes(), 1, 1).len(), 1, "{what}");
        }
        let good = usual().to_string();
        assert_eq!(tag_pages(good.as_bytes(), 2, 1), None, "an id not asked");
        assert_eq!(tag_pages(good.as_bytes(), 1, 2), None, "a page missing");
        let twice = batch(&[(1, vec![], None), (1, vec![], None)]).to_string();
        assert_eq!(tag_pages(twice.as_bytes(), 1, 2), None, "an id twice");
        let error = r#"[{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"x"}}]"#;
        assert_eq!(tag_pages(error.as_bytes(), 1, 1), None, "an error answer");
        assert_eq!(
            tag_pages(format!("{good}x").as_bytes(), 1, 1),
            None,
            "trailing bytes"
        );
        assert_eq!(
            tag_pages(&good.as_bytes()[..good.len() - 3], 1, 1),
            None,
            "cut short"
        );
        let mut latin1 = good.clone().into_bytes();
        let at = latin1.len() - 30;
        latin1[at] = 0xe9;
        assert_eq!(tag_pages(&latin1, 1, 1), None, "not UTF-8");
    }

    proptest! {
        /// Whatever the rows, the fast decoder reads them as the general one does, or not at all.
        #[test]
        fn the_fast_rows_are_the_general_rows(
            rows in proptest::collection::vec(
                (any::<u8>(), proptest::option::of("[A-Za-z0-9+/=\"\\\\é]{58,62}"), proptest::option::of("[a-z\"]{0,8}")),
                0..12,
            ),
            cursor in proptest::option::of("[A-Za-z0-9:_-]{1,20}"),
            pretty in any::<bool>(),
        ) {
            let rows: Vec<Value> = rows
                .iter()
                .map(|(k, t, n)| row_json(*k, t.as_deref(), n.as_deref()))
                .collect();
            let answer = batch(&[(5, rows, cursor.as_deref())]);
            let text = if pretty { serde_json::to_string_pretty(&answer).unwrap() } else { answer.to_string() };
            if let Some(fast) = tag_pages(text.as_bytes(), 5, 1) {
                prop_assert_eq!(fast, general(text.as_bytes(), 5, 1));
            } else {
                prop_assert!(text.contains('\\'), "refused without an escape: {}", text);
            }
        }
    }
}
