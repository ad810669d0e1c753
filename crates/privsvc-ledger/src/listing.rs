//! The rows of a tags-only listing: what a client's scan reads of every record of its app
//! (docs/PROTOCOL.md §8.1), in a compact form that needs no allocation per row.

use alloy_primitives::{Address, B256};

use crate::entity::{ArkivValue, Entity, QueryPage};

/// The attribute that carries a record's tag.
pub const TAG_ATTRIBUTE: &str = "tag";

/// Length of a tag's text on the ledger: standard base64, with padding, of 44 bytes.
pub const TAG_TEXT_LEN: usize = 60;

/// One record of a tags-only listing (key, creator, creation and expiry blocks, and the `tag`
/// attribute selected): what [`crate::LedgerReader::query_tags_many`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagRow {
    /// The entity key.
    pub key: B256,
    /// Who created it, when selected.
    pub creator: Option<Address>,
    /// Its creation block, when selected.
    pub created_at: Option<u64>,
    /// The first block at which it is gone, when selected.
    pub expires_at: Option<u64>,
    /// The text of its `tag` attribute when that is a string of [`TAG_TEXT_LEN`] bytes (the
    /// last one, should a row name it twice); `None` for no tag or any other value, which
    /// cannot be a tag.
    pub tag: Option<[u8; TAG_TEXT_LEN]>,
}

impl TagRow {
    /// The tag's text, when the row has one.
    pub fn tag_text(&self) -> Option<&str> {
        self.tag.as_ref().and_then(|t| std::str::from_utf8(t).ok())
    }
}

/// The text of a `tag` attribute's value as [`TagRow::tag`] keeps it.
pub(crate) fn tag_of(value: &[u8]) -> Option<[u8; TAG_TEXT_LEN]> {
    value.try_into().ok()
}

impl From<Entity> for TagRow {
    fn from(e: Entity) -> Self {
        let mut tag = None;
        for a in e.attributes.iter().flatten() {
            if a.name == TAG_ATTRIBUTE {
                tag = match &a.value {
                    ArkivValue::Str(s) => tag_of(s.as_bytes()),
                    _ => None,
                };
            }
        }
        TagRow {
            key: e.key,
            creator: e.creator,
            created_at: e.created_at,
            expires_at: e.expires_at,
            tag,
        }
    }
}

/// One page of a tags-only listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagPage {
    /// The rows on this page.
    pub rows: Vec<TagRow>,
    /// The block the page was evaluated at.
    pub block_number: u64,
    /// Present when more pages follow.
    pub cursor: Option<String>,
}

impl From<QueryPage> for TagPage {
    fn from(p: QueryPage) -> Self {
        TagPage {
            rows: p.entities.into_iter().map(TagRow::from).collect(),
            block_number: p.block_number,
            cursor: p.cursor,
        }
    }
}
