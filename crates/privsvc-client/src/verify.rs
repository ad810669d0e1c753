//! `verify_record`: is a ledger entity a well-formed privsvc record of this app, signed by the
//! expected owner, and created within its envelope's hour window?

use std::collections::{BTreeMap, HashMap};

use alloy_primitives::{Address, B256};
use privsvc_attributes::{AttrType, AttrValue, AttributeError, Attributes};
use privsvc_envelope::{
    check_created_in_time, envelope_signer, parse_envelope, republish_deadline, EnvelopeBody,
};
use privsvc_ledger::{ArkivValue, Entity, LedgerError, LedgerReader};

use crate::options::BLOCK_TIME_SECONDS;

/// The content type of every record entity.
pub const RECORD_CONTENT_TYPE: &str = "application/json";

/// What a record must match. Every field is optional. Without `created_timestamp` the
/// creation-window check cannot be made, and the verdict says so
/// ([`VerifiedRecord::unchecked`]).
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions<'a> {
    /// The app the envelope must name.
    pub app: Option<&'a str>,
    /// When set, the entity's creator must be one of these relayers.
    pub relayers: Option<&'a [Address]>,
    /// When set, the entity's owner must be this address (the vault's address for the ref).
    pub owner: Option<Address>,
    /// The timestamp (Unix seconds) of the entity's creation block, its `$createdAt`: read it
    /// with [`creation_timestamp`] (or [`block_timestamps`] for many entities). With it, an
    /// entity created at or after `(hour + 4) x 3600` is a copied envelope republished after
    /// its window and is refused ([`RejectReason::Republished`]); without it that check is
    /// listed in [`VerifiedRecord::unchecked`].
    pub created_timestamp: Option<u64>,
}

/// A record that passed [`verify_record`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedRecord {
    /// Entity key.
    pub key: B256,
    /// Owner (the envelope's signer).
    pub owner: Address,
    /// Creator (the relayer).
    pub creator: Address,
    /// Creation block, when known.
    pub created_at: Option<u64>,
    /// Expiry block, when known.
    pub expires_at: Option<u64>,
    /// The envelope body.
    pub body: EnvelopeBody,
    /// The record's attributes.
    pub attributes: Attributes,
    /// The sealed envelope text, padding trimmed.
    pub envelope: String,
    /// The checks that could not be made with what was given (empty when every check was made,
    /// as [`verify_record_on_ledger`] makes them).
    pub unchecked: Vec<Unchecked>,
}

/// A check [`verify_record`] could not make without a ledger reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unchecked {
    /// The creation window: without the creation block's timestamp, a copied envelope
    /// republished after `(hour + 4) x 3600` is not told apart.
    CreationWindow,
    /// Copies: without reading the owner's other entities, a later entity carrying the same
    /// envelope is not told apart from the record.
    Copy,
}

impl Unchecked {
    /// A short code (`creation-window`, `copy`).
    pub fn code(self) -> &'static str {
        match self {
            Unchecked::CreationWindow => "creation-window",
            Unchecked::Copy => "copy",
        }
    }

    /// What was not checked, in a sentence.
    pub fn describe(self) -> &'static str {
        match self {
            Unchecked::CreationWindow => "the creation window (an envelope republished after (hour + 4) x 3600 s) was not checked: no creation-block timestamp and no reader",
            Unchecked::Copy => "copies (a later entity of the same owner with the same envelope) were not checked: no reader",
        }
    }
}

/// Why [`verify_record`] refused an entity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
// Exhaustive on purpose: the JS package gives each reason its own code (privsvc-wasm).
pub enum RejectReason {
    /// A field needed for verification was not selected or is absent.
    #[error("the entity lacks {0} (query it with that field selected)")]
    MissingField(&'static str),
    /// The content type is not `application/json`.
    #[error("content type {0:?} is not a privsvc envelope")]
    WrongContentType(String),
    /// The payload is not a valid sealed envelope.
    #[error("the payload is not a valid envelope: {0}")]
    BadEnvelope(#[source] privsvc_envelope::EnvelopeError),
    /// The ledger attributes cannot be read as privsvc attributes.
    #[error("the attributes are not valid privsvc attributes: {0}")]
    BadAttributes(#[source] AttributeError),
    /// The envelope names another app.
    #[error("the envelope is for app {found:?}, not {expected:?}")]
    WrongApp {
        /// Expected app.
        expected: String,
        /// The envelope's app.
        found: String,
    },
    /// The attribute names or types differ from the envelope's `types`.
    #[error("the entity's attributes do not match the envelope's types: {0}")]
    AttributesMismatch(String),
    /// The signature does not recover to the entity's owner over these attributes (an attribute
    /// value or the owner was changed, or the envelope was forged).
    #[error("the envelope signature recovers to {signer}, not to the owner {owner}: the record or its attributes were altered")]
    SignatureMismatch {
        /// Recovered signer.
        signer: Address,
        /// The entity's owner.
        owner: Address,
    },
    /// The entity's owner is not the expected one.
    #[error("the entity is owned by {found}, expected {expected}")]
    WrongOwner {
        /// Expected owner.
        expected: Address,
        /// The entity's owner.
        found: Address,
    },
    /// The entity's lifetime does not match the envelope's expiry bucket.
    #[error("the entity lives {blocks} blocks but its envelope says {exp_seconds} s ({expected} blocks)")]
    LifetimeMismatch {
        /// Lifetime on the ledger, blocks.
        blocks: u64,
        /// The envelope's expiry.
        exp_seconds: u64,
        /// The lifetime in blocks the expiry implies.
        expected: u64,
    },
    /// The creator is not one of the trusted relayers.
    #[error("the entity was created by {0}, which is not a known relayer")]
    UntrustedCreator(Address),
    /// The timestamp of the entity's creation block was not given (or the ledger has no such
    /// block), so the republish rule cannot be checked.
    #[error("the timestamp of the entity's creation block is unknown; read it with LedgerReader::block_timestamp($createdAt) and pass it as VerifyOptions::created_timestamp")]
    CreationTimeUnknown,
    /// The entity was created at or after `(hour + 4) x 3600`: someone republished a copy of
    /// the envelope after its window (the owner's record had expired or was never written).
    #[error("the entity was created at {created} (unix seconds), at or after {deadline} = (envelope hour {hour} + 4) x 3600: a copied envelope republished after its window")]
    Republished {
        /// The envelope's hour.
        hour: u64,
        /// Timestamp of the creation block.
        created: u64,
        /// The first refused timestamp.
        deadline: u64,
    },
    /// An earlier entity of the same owner carries the same sealed envelope: this one is a copy
    /// (anyone can create an entity with a copied envelope and transfer it to the owner). A
    /// record is (owner, envelope); the earliest entity is the record.
    #[error(
        "the entity is a copy of {original}, created earlier with the same owner and envelope"
    )]
    Copy {
        /// The record this entity copies.
        original: B256,
    },
    /// The ledger could not be read for the checks that need it.
    #[error("the ledger could not be read: {0}")]
    Ledger(String),
}

/// Converts ledger attributes into privsvc attributes (only str, i32, u64 and u256); an
/// attribute of another type, a repeated name or an invalid name or value is an
/// [`AttributeError::Invalid`] naming it.
pub fn attributes_from_ledger(
    attrs: &[privsvc_ledger::Attribute],
) -> Result<Attributes, AttributeError> {
    let invalid = |name: &str, reason: String| AttributeError::Invalid {
        name: name.to_owned(),
        reason,
    };
    let mut out = Attributes::new();
    for a in attrs {
        let value = match &a.value {
            ArkivValue::Str(s) => AttrValue::Str(s.clone()),
            ArkivValue::I32(v) => AttrValue::I32(*v),
            ArkivValue::U64(v) => AttrValue::U64(*v),
            ArkivValue::U256(v) => AttrValue::U256(*v),
            other => return Err(invalid(&a.name, format!("has type {other:?}"))),
        };
        if out.contains(&a.name) {
            return Err(invalid(&a.name, "appears twice".into()));
        }
        out.insert(a.name.clone(), value)?;
    }
    Ok(out)
}

fn compare_types(declared: &BTreeMap<String, AttrType>, actual: &Attributes) -> Result<(), String> {
    let actual_types = actual.types();
    if &actual_types == declared {
        return Ok(());
    }
    for (name, t) in declared {
        match actual_types.get(name) {
            None => return Err(format!("{name:?} is missing")),
            Some(a) if a != t => return Err(format!("{name:?} is {a}, the envelope says {t}")),
            _ => {}
        }
    }
    for name in actual_types.keys() {
        if !declared.contains_key(name) {
            return Err(format!("{name:?} is not in the envelope"));
        }
    }
    Err("types differ".into())
}

/// The timestamp (Unix seconds) of the block that created `entity` (its `$createdAt`), or
/// `None` when the entity has no `created_at` or the ledger has no such block.
pub async fn creation_timestamp(
    reader: &dyn LedgerReader,
    entity: &Entity,
) -> Result<Option<u64>, LedgerError> {
    match entity.created_at {
        Some(block) => reader.block_timestamp(block).await,
        None => Ok(None),
    }
}

/// The timestamps of `blocks`, each block read once (a scan's records share few blocks).
/// Blocks the ledger does not have are absent from the map.
pub async fn block_timestamps(
    reader: &dyn LedgerReader,
    blocks: impl IntoIterator<Item = u64>,
) -> Result<HashMap<u64, u64>, LedgerError> {
    let mut out = HashMap::new();
    let wanted: std::collections::BTreeSet<u64> = blocks.into_iter().collect();
    for block in wanted {
        if let Some(t) = reader.block_timestamp(block).await? {
            out.insert(block, t);
        }
    }
    Ok(out)
}

/// [`verify_record`] with the checks that need the ledger: reads the creation block's timestamp
/// when `options` has none, and refuses a copy ([`RejectReason::Copy`]): an entity is a copy
/// when an entity of the same owner with the same sealed envelope was created in an earlier
/// block; two of them in one block are both refused (the ledger listing does not order them).
/// It queries the ledger by the entity's owner, which a third-party verifier may do (the user's
/// own client never does).
pub async fn verify_record_on_ledger(
    entity: &Entity,
    options: &VerifyOptions<'_>,
    reader: &dyn LedgerReader,
) -> Result<VerifiedRecord, RejectReason> {
    let ledger = |e: LedgerError| RejectReason::Ledger(e.to_string());
    let created_timestamp = match options.created_timestamp {
        Some(t) => Some(t),
        None => creation_timestamp(reader, entity).await.map_err(ledger)?,
    };
    let created_timestamp = created_timestamp.ok_or(RejectReason::CreationTimeUnknown)?;
    let mut verified = verify_record(
        entity,
        &VerifyOptions {
            created_timestamp: Some(created_timestamp),
            ..options.clone()
        },
    )?;
    if let Some(original) = earlier_copy_of(reader, entity).await.map_err(ledger)? {
        return Err(RejectReason::Copy { original });
    }
    verified.unchecked.clear();
    Ok(verified)
}

/// An entity of `entity`'s owner with the same sealed envelope, created before it or in the
/// same block; `None` when `entity` is the only one.
async fn earlier_copy_of(
    reader: &dyn LedgerReader,
    entity: &Entity,
) -> Result<Option<B256>, LedgerError> {
    let (Some(owner), Some(payload), Some(block)) =
        (entity.owner, entity.payload.as_deref(), entity.created_at)
    else {
        return Ok(None);
    };
    let expression = format!("$owner = {}", crate::read::addr_literal(&owner));
    let select = privsvc_ledger::Select {
        key: true,
        created_at: true,
        payload: true,
        ..privsvc_ledger::Select::default()
    };
    let same = privsvc_ledger::query_all(reader, &expression, &select, None).await?;
    Ok(same
        .into_iter()
        .filter(|e| e.key != entity.key && e.payload.as_deref() == Some(payload))
        .filter(|e| e.created_at.is_some_and(|b| b <= block))
        .map(|e| e.key)
        .next())
}

/// Verifies one entity: envelope well-formed (version 2), app, attribute names/types equal the
/// envelope's `types`, signature recovers to the entity's owner over the entity's attributes,
/// optional expected owner, creation block timestamp before `(hour + 4) x 3600` (when given),
/// lifetime consistent with the expiry bucket (when createdAt and expiresAt are present), and
/// optional trusted creators. Reads nothing: the checks that need the ledger (copies, and the
/// creation window without a timestamp) are listed in [`VerifiedRecord::unchecked`].
pub fn verify_record(
    entity: &Entity,
    options: &VerifyOptions<'_>,
) -> Result<VerifiedRecord, RejectReason> {
    let owner = entity.owner.ok_or(RejectReason::MissingField("owner"))?;
    let creator = entity
        .creator
        .ok_or(RejectReason::MissingField("creator"))?;
    let payload = entity
        .payload
        .as_deref()
        .ok_or(RejectReason::MissingField("payload"))?;
    let ledger_attrs = entity
        .attributes
        .as_deref()
        .ok_or(RejectReason::MissingField("attributes"))?;
    if let Some(ct) = &entity.content_type {
        if ct != RECORD_CONTENT_TYPE {
            return Err(RejectReason::WrongContentType(ct.clone()));
        }
    }
    if let Some(trusted) = options.relayers {
        if !trusted.contains(&creator) {
            return Err(RejectReason::UntrustedCreator(creator));
        }
    }
    if let Some(expected) = options.owner {
        if expected != owner {
            return Err(RejectReason::WrongOwner {
                expected,
                found: owner,
            });
        }
    }
    let sealed = parse_envelope(payload).map_err(RejectReason::BadEnvelope)?;
    let body = sealed.body.clone();
    if let Some(app) = options.app {
        if body.app != app {
            return Err(RejectReason::WrongApp {
                expected: app.to_string(),
                found: body.app.clone(),
            });
        }
    }
    let attributes = attributes_from_ledger(ledger_attrs).map_err(RejectReason::BadAttributes)?;
    compare_types(&body.types, &attributes).map_err(RejectReason::AttributesMismatch)?;
    let signer = envelope_signer(&sealed, &attributes).map_err(RejectReason::BadEnvelope)?;
    if signer != owner {
        return Err(RejectReason::SignatureMismatch { signer, owner });
    }
    let mut unchecked = Vec::new();
    match options.created_timestamp {
        Some(created) => {
            check_created_in_time(body.hour, created).map_err(|_| RejectReason::Republished {
                hour: body.hour,
                created,
                deadline: republish_deadline(body.hour),
            })?
        }
        None => unchecked.push(Unchecked::CreationWindow),
    }
    unchecked.push(Unchecked::Copy);
    if let (Some(created), Some(expires)) = (entity.created_at, entity.expires_at) {
        let blocks = expires.saturating_sub(created);
        let expected = body.exp / BLOCK_TIME_SECONDS;
        if blocks != expected {
            return Err(RejectReason::LifetimeMismatch {
                blocks,
                exp_seconds: body.exp,
                expected,
            });
        }
    }
    Ok(VerifiedRecord {
        key: entity.key,
        owner,
        creator,
        created_at: entity.created_at,
        expires_at: entity.expires_at,
        body,
        attributes,
        envelope: String::from_utf8_lossy(payload)
            .trim_end_matches(' ')
            .to_string(),
        unchecked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use privsvc_ledger::Attribute;

    fn attr(name: &str, value: ArkivValue) -> Attribute {
        Attribute {
            name: name.into(),
            value,
        }
    }

    #[test]
    fn ledger_attributes_that_are_not_privsvc_attributes_are_typed_errors_naming_them() {
        let wrong_type = attributes_from_ledger(&[attr("blob", ArkivValue::Bytes(vec![1]))]);
        assert!(
            matches!(&wrong_type, Err(AttributeError::Invalid { name, .. }) if name == "blob"),
            "{wrong_type:?}"
        );
        let twice = attributes_from_ledger(&[
            attr("level", ArkivValue::U64(1)),
            attr("level", ArkivValue::U64(2)),
        ]);
        assert!(
            matches!(&twice, Err(AttributeError::Invalid { name, reason }) if name == "level" && reason == "appears twice"),
            "{twice:?}"
        );
        // A name the privsvc rules refuse keeps the attribute crate's own error.
        let bad_name = attributes_from_ledger(&[attr("Level", ArkivValue::U64(1))]);
        assert!(
            matches!(&bad_name, Err(AttributeError::Invalid { name, .. }) if name == "Level"),
            "{bad_name:?}"
        );
        let reason = RejectReason::BadAttributes(bad_name.unwrap_err());
        assert!(
            std::error::Error::source(&reason)
                .and_then(|s| s.downcast_ref::<AttributeError>())
                .is_some(),
            "{reason:?}"
        );
    }
}
