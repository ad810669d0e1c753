//! The creates the relayer sends, built with the ledger crate's system-entity definitions
//! (`privsvc_ledger::Heartbeat`, `privsvc_ledger::SpendsEntity`, docs/PROTOCOL.md §4) so every component agrees on their form.

use std::collections::BTreeMap;

use alloy_primitives::Address;
use privsvc_attributes::Attributes;
use privsvc_ledger::Create;
use privsvc_ledger::{Heartbeat, SpendsEntity};
use rand::rngs::OsRng;
use rand::seq::SliceRandom;

use crate::store::StoredRecord;

/// `project` of system entities.
pub const SYSTEM_PROJECT: &str = privsvc_ledger::PRIVSVC_PROJECT;
/// API version string.
pub const API_VERSION: &str = "privsvc-relayer/1";

/// The create of a record entity: payload = sealed envelope, typed attributes, expiry =
/// expSeconds, the given salt.
pub fn record_create(rec: &StoredRecord, salt: u128) -> Result<Create, String> {
    let attrs = Attributes::from_wire_json(rec.attributes.as_bytes())
        .map_err(|e| format!("stored attributes unreadable: {e}"))?;
    privsvc_ledger::record_create(&attrs, &rec.envelope, rec.exp_seconds, salt)
        .map_err(|e| e.to_string())
}

/// The spends entities of a batch: one per epoch, payload = the token ids (32 bytes each) in
/// a uniformly random order (OS RNG), unrelated to the order of the batch's records.
pub fn spends_creates<'a>(
    records: impl IntoIterator<Item = &'a StoredRecord>,
    salt: impl Fn() -> u128,
) -> Result<Vec<Create>, String> {
    let mut by_epoch: BTreeMap<u64, Vec<[u8; 32]>> = BTreeMap::new();
    for r in records {
        if let Some(t) = &r.token {
            by_epoch.entry(t.epoch).or_default().push(t.id);
        }
    }
    by_epoch
        .into_iter()
        .map(|(epoch, mut token_ids)| {
            token_ids.shuffle(&mut OsRng);
            SpendsEntity { epoch, token_ids }
                .to_create(salt())
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// The heartbeat create: attributes `project, privsvc_kind, url`; payload JSON
/// `{url, address, chainId, version, ohttpKey?}`; lifetime one hour.
pub fn heartbeat_create(
    url: &str,
    address: Address,
    chain_id: u64,
    ohttp_key: Option<&str>,
    salt: u128,
) -> Result<Create, String> {
    Heartbeat {
        url: url.into(),
        address,
        chain_id,
        version: API_VERSION.into(),
        ohttp_key: ohttp_key.map(str::to_string),
    }
    .to_create(salt)
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SpentToken;

    fn rec(i: u8) -> StoredRecord {
        StoredRecord {
            id: format!("r{i}"),
            seq: u64::from(i),
            app: "a".into(),
            project: String::new(),
            envelope_digest: [i; 32],
            owner: Address::ZERO,
            envelope: vec![],
            attributes: "{}".into(),
            exp_seconds: 3600,
            min_anonymity: 1,
            max_hold_ms: 0,
            token: Some(SpentToken {
                id: [i; 32],
                epoch: 20_000,
            }),
            accepted_ms: 0,
        }
    }

    #[test]
    fn spends_list_token_ids_in_a_random_order_not_the_records_order() {
        const RUNS: usize = 300;
        let records: Vec<StoredRecord> = (0..8).map(rec).collect();
        let mut same_position = 0;
        for _ in 0..RUNS {
            let creates = spends_creates(&records, || 1).unwrap();
            assert_eq!(creates.len(), 1);
            let ids: Vec<u8> = creates[0].payload.chunks_exact(32).map(|c| c[0]).collect();
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..8).collect::<Vec<u8>>(), "every token id once");
            same_position += ids
                .iter()
                .enumerate()
                .filter(|(i, id)| **id as usize == *i)
                .count();
        }
        // By chance 1 in 8 (300 expected of 2400, standard deviation about 16); the records'
        // order would put all 2400 in place.
        assert!(same_position < 2 * RUNS, "{same_position}");
    }
}
