//! What a client remembers between `my_entities` calls.

use std::collections::{HashMap, HashSet};

use alloy_primitives::B256;
use privsvc_vault::RecordRef;

use crate::record::MyRecord;

/// Records seen so far: the user's verified records and the keys known not to be theirs.
#[derive(Debug, Default)]
pub(crate) struct EntityCache {
    /// A full scan has run.
    pub(crate) scanned: bool,
    /// Something was written since the last scan.
    pub(crate) stale: bool,
    /// The user's verified records.
    pub(crate) mine: HashMap<B256, MyRecord>,
    /// Keys whose tag did not open, or that failed verification.
    pub(crate) others: HashSet<B256>,
    /// Records written in this session (entity key to ref), usable before a scan.
    pub(crate) written: HashMap<B256, RecordRef>,
    /// What the latest scan did.
    pub(crate) last_scan: Option<crate::entities::ScanStats>,
}

impl EntityCache {
    /// Forces the next `my_entities` call to scan for new records.
    pub(crate) fn mark_stale(&mut self) {
        self.stale = true;
    }

    /// Forgets everything but the refs of records written in this session.
    pub(crate) fn reset(&mut self) {
        let written = std::mem::take(&mut self.written);
        *self = EntityCache {
            written,
            ..EntityCache::default()
        };
    }

    /// Whether `key` was already classified.
    pub(crate) fn knows(&self, key: &B256) -> bool {
        self.mine.contains_key(key) || self.others.contains(key)
    }
}
