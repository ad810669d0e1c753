//! The issuer-key system entity (docs/PROTOCOL.md §4) through `privsvc_ledger::IssuerKeyEntity`: the create
//! that publishes a key, the query that finds an issuer's keys, and a strict parser.

use alloy_primitives::Address;
use privsvc_ledger::{issuer_keys_query, IssuerKeyEntity};
use privsvc_ledger::{AttributeSelect, Entity, LedgerError, Operation, QueryOptions, Select};

/// The create operation that publishes `spki` as the key of (`app`, `epoch`) (7-day lifetime).
pub fn issuer_key_create(
    app: &str,
    epoch: u32,
    spki: &[u8],
    salt: u128,
) -> Result<Operation, LedgerError> {
    let entity = IssuerKeyEntity {
        app: app.to_string(),
        epoch: u64::from(epoch),
        spki: spki.to_vec(),
    };
    Ok(Operation::Create(entity.to_create(salt)?))
}

/// The `arkiv_query` expression selecting the issuer-key entities of (`issuer`, `app`, `epoch`).
pub fn issuer_key_query(issuer: Address, app: &str, epoch: u32) -> Result<String, LedgerError> {
    issuer_keys_query(app, u64::from(epoch), Some(issuer))
}

/// Options for reading issuer-key entities at the head: key, creator, payload and every
/// attribute (all that [`issuer_key_payload`] checks), 200 a page.
pub(crate) fn issuer_key_options() -> QueryOptions {
    let mut options = QueryOptions::new(Select {
        key: true,
        creator: true,
        created_at: true,
        payload: true,
        attributes: AttributeSelect::All,
        ..Select::default()
    });
    options.limit = Some(200);
    options
}

/// The SPKI payload of `entity` when it is an issuer-key entity of (`issuer`, `app`, `epoch`)
/// (creator, project, kind, app and epoch checked again, whatever the query matched).
pub fn issuer_key_payload(
    entity: &Entity,
    issuer: Address,
    app: &str,
    epoch: u32,
) -> Option<Vec<u8>> {
    if entity.creator? != issuer {
        return None;
    }
    let parsed = IssuerKeyEntity::from_entity(entity).ok()?;
    (parsed.app == app && parsed.epoch == u64::from(epoch)).then_some(parsed.spki)
}
