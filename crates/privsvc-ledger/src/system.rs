//! privsvc's own entities on the ledger (docs/PROTOCOL.md §4): record entities, and the system
//! entities `heartbeat`, `issuer-key` and `spends`, as typed builders (→ [`Create`]), parsers
//! (← [`Entity`]) and the queries that find them. Relayer, issuer and client share these
//! definitions.
//!
//! Every system entity carries `project = str('privsvc-7f3k')` and
//! `privsvc_kind = str('heartbeat' | 'issuer-key' | 'spends')`.

use alloy_primitives::Address;
use serde_json::{json, Value};

use crate::answer::EntityProblem;
use crate::entity::{ArkivValue, Attribute, CreationFlags, Entity};
use crate::error::LedgerError;
use crate::expiry::BLOCK_TIME_SECONDS;
use crate::ops::Create;
use crate::query::Expr;

/// The project value of every privsvc entity.
pub const PRIVSVC_PROJECT: &str = "privsvc-7f3k";
/// The attribute naming the project.
pub const PROJECT_ATTRIBUTE: &str = "project";
/// The attribute naming the kind of a system entity.
pub const KIND_ATTRIBUTE: &str = "privsvc_kind";
/// Kind of a relayer heartbeat.
pub const KIND_HEARTBEAT: &str = "heartbeat";
/// Kind of an issuer public key.
pub const KIND_ISSUER_KEY: &str = "issuer-key";
/// Kind of a batch's spent-token list.
pub const KIND_SPENDS: &str = "spends";
/// Content type of records and heartbeats.
pub const CONTENT_TYPE_JSON: &str = "application/json";
/// Content type of issuer keys (SPKI DER) and spends (token ids).
pub const CONTENT_TYPE_BINARY: &str = "application/octet-stream";
/// Heartbeat lifetime: 1 hour.
pub const HEARTBEAT_LIFETIME_SECONDS: u64 = 3_600;
/// Default heartbeat interval (HEARTBEAT_MS): 10 minutes.
pub const HEARTBEAT_INTERVAL_MS: u64 = 600_000;
/// Issuer-key lifetime: 7 days.
pub const ISSUER_KEY_LIFETIME_SECONDS: u64 = 7 * 86_400;
/// Spends lifetime: 2 days, covering the two acceptable token epochs (today and yesterday).
pub const SPENDS_LIFETIME_SECONDS: u64 = 2 * 86_400;
/// Size of one token id in a spends payload.
pub const TOKEN_ID_BYTES: usize = 32;

/// A lifetime in seconds as blocks (`ceil(seconds / 2)`, at least 1).
pub fn lifetime_blocks(seconds: u64) -> u64 {
    seconds.div_ceil(BLOCK_TIME_SECONDS).max(1)
}

fn str_attr(name: &str, value: &str) -> Attribute {
    Attribute {
        name: name.into(),
        value: ArkivValue::Str(value.into()),
    }
}

fn system_create(
    kind: &str,
    mut extra: Vec<Attribute>,
    content_type: &str,
    payload: Vec<u8>,
    lifetime_seconds: u64,
    salt: u128,
) -> Create {
    let mut attributes = vec![
        str_attr(PROJECT_ATTRIBUTE, PRIVSVC_PROJECT),
        str_attr(KIND_ATTRIBUTE, kind),
    ];
    attributes.append(&mut extra);
    Create {
        salt,
        expires_at: 0,
        min_lifetime: lifetime_blocks(lifetime_seconds),
        flags: CreationFlags::default(),
        content_type: content_type.into(),
        payload,
        attributes,
    }
}

fn kind_filter(kind: &str) -> Vec<Expr> {
    vec![
        Expr::Cmp {
            attr: PROJECT_ATTRIBUTE.into(),
            op: crate::query::CmpOp::Eq,
            value: ArkivValue::Str(PRIVSVC_PROJECT.into()),
        },
        Expr::Cmp {
            attr: KIND_ATTRIBUTE.into(),
            op: crate::query::CmpOp::Eq,
            value: ArkivValue::Str(kind.into()),
        },
    ]
}

fn render(list: Vec<Expr>) -> String {
    Expr::And(list).to_string()
}

fn bad(e: &Entity, problem: EntityProblem) -> LedgerError {
    LedgerError::entity(e.key, problem)
}

fn attr<'a>(e: &'a Entity, name: &str) -> Option<&'a ArkivValue> {
    e.attributes
        .as_ref()?
        .iter()
        .find(|a| a.name == name)
        .map(|a| &a.value)
}

fn attr_str<'a>(e: &'a Entity, name: &'static str) -> Result<&'a str, LedgerError> {
    match attr(e, name) {
        Some(ArkivValue::Str(s)) => Ok(s),
        Some(other) => Err(bad(
            e,
            EntityProblem::AttributeType {
                name,
                expected: "str",
                got: other.type_name(),
            },
        )),
        None => Err(bad(e, EntityProblem::MissingAttribute(name))),
    }
}

fn attr_u64(e: &Entity, name: &'static str) -> Result<u64, LedgerError> {
    match attr(e, name) {
        Some(ArkivValue::U64(v)) => Ok(*v),
        Some(other) => Err(bad(
            e,
            EntityProblem::AttributeType {
                name,
                expected: "u64",
                got: other.type_name(),
            },
        )),
        None => Err(bad(e, EntityProblem::MissingAttribute(name))),
    }
}

fn check_kind(e: &Entity, kind: &'static str) -> Result<(), LedgerError> {
    let project = attr_str(e, PROJECT_ATTRIBUTE)?;
    let k = attr_str(e, KIND_ATTRIBUTE)?;
    if project != PRIVSVC_PROJECT || k != kind {
        return Err(bad(e, EntityProblem::WrongKind { expected: kind }));
    }
    Ok(())
}

fn payload(e: &Entity) -> Result<&[u8], LedgerError> {
    e.payload
        .as_deref()
        .ok_or_else(|| bad(e, EntityProblem::NoPayload))
}

/// A relayer's heartbeat: where it listens and who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    /// The relayer's base URL.
    pub url: String,
    /// The relayer's signing address (also the entity's creator).
    pub address: Address,
    /// The ledger chain id it writes to.
    pub chain_id: u64,
    /// The relayer API version (`privsvc-relayer/1`).
    pub version: String,
    /// Hex of the OHTTP key config, when the relayer serves OHTTP.
    pub ohttp_key: Option<String>,
}

impl Heartbeat {
    /// The payload JSON `{url, address, chainId, version, ohttpKey?}` (address checksummed).
    pub fn payload_json(&self) -> Value {
        let mut v = json!({
            "url": self.url,
            "address": self.address.to_checksum(None),
            "chainId": self.chain_id,
            "version": self.version,
        });
        if let Some(k) = &self.ohttp_key {
            v["ohttpKey"] = Value::String(k.clone());
        }
        v
    }

    /// The create of this heartbeat (attributes `project`, `privsvc_kind`, `url`; lifetime
    /// 1 h). Fails when the URL does not fit a str attribute (128 bytes).
    pub fn to_create(&self, salt: u128) -> Result<Create, LedgerError> {
        ArkivValue::str(self.url.clone())
            .map_err(|e| LedgerError::invalid(format!("heartbeat url: {e}")))?;
        let payload = serde_json::to_vec(&self.payload_json())
            .map_err(|e| LedgerError::Invalid(Box::new(e)))?;
        Ok(system_create(
            KIND_HEARTBEAT,
            vec![str_attr("url", &self.url)],
            CONTENT_TYPE_JSON,
            payload,
            HEARTBEAT_LIFETIME_SECONDS,
            salt,
        ))
    }

    /// Parse a heartbeat entity (read with attributes and payload). The `url` attribute must
    /// equal the payload's, and when the creator was read it must equal `address`.
    pub fn from_entity(e: &Entity) -> Result<Heartbeat, LedgerError> {
        check_kind(e, KIND_HEARTBEAT)?;
        let v: Value = serde_json::from_slice(payload(e)?)
            .map_err(|err| bad(e, EntityProblem::PayloadNotJson(err)))?;
        let field = |k: &'static str| {
            v.get(k)
                .and_then(Value::as_str)
                .ok_or_else(|| bad(e, EntityProblem::PayloadLacks(k)))
        };
        let url = field("url")?.to_owned();
        let address: Address = field("address")?
            .parse()
            .map_err(|err| bad(e, EntityProblem::BadAddress(Box::new(err))))?;
        let chain_id = v
            .get("chainId")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad(e, EntityProblem::PayloadLacks("chainId")))?;
        let version = field("version")?.to_owned();
        let ohttp_key = match v.get("ohttpKey") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(bad(e, EntityProblem::PayloadLacks("ohttpKey"))),
        };
        if attr_str(e, "url")? != url {
            return Err(bad(e, EntityProblem::UrlMismatch));
        }
        if let Some(creator) = e.creator {
            if creator != address {
                return Err(bad(
                    e,
                    EntityProblem::WrongCreator {
                        creator,
                        claimed: address,
                    },
                ));
            }
        }
        Ok(Heartbeat {
            url,
            address,
            chain_id,
            version,
            ohttp_key,
        })
    }
}

/// The query of heartbeats created within the last two intervals before `head_block`
/// (`interval_ms` is HEARTBEAT_MS).
pub fn live_heartbeats_query(head_block: u64, interval_ms: u64) -> String {
    let window = lifetime_blocks((2 * interval_ms).div_ceil(1000));
    let mut list = kind_filter(KIND_HEARTBEAT);
    list.push(Expr::created_at(
        crate::query::CmpOp::Ge,
        head_block.saturating_sub(window),
    ));
    render(list)
}

/// An issuer's RSA public key for one (app, epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerKeyEntity {
    /// The application the tokens are for.
    pub app: String,
    /// The epoch (UTC day number).
    pub epoch: u64,
    /// The RSA public key, SPKI DER.
    pub spki: Vec<u8>,
}

impl IssuerKeyEntity {
    /// The create (attributes `project`, `privsvc_kind`, `app`, `epoch` u64; payload the SPKI
    /// DER; lifetime 7 d).
    pub fn to_create(&self, salt: u128) -> Result<Create, LedgerError> {
        ArkivValue::str(self.app.clone())
            .map_err(|e| LedgerError::invalid(format!("issuer key app: {e}")))?;
        Ok(system_create(
            KIND_ISSUER_KEY,
            vec![
                str_attr("app", &self.app),
                Attribute {
                    name: "epoch".into(),
                    value: ArkivValue::U64(self.epoch),
                },
            ],
            CONTENT_TYPE_BINARY,
            self.spki.clone(),
            ISSUER_KEY_LIFETIME_SECONDS,
            salt,
        ))
    }

    /// Parse an issuer-key entity (read with attributes and payload).
    pub fn from_entity(e: &Entity) -> Result<IssuerKeyEntity, LedgerError> {
        check_kind(e, KIND_ISSUER_KEY)?;
        Ok(IssuerKeyEntity {
            app: attr_str(e, "app")?.to_owned(),
            epoch: attr_u64(e, "epoch")?,
            spki: payload(e)?.to_vec(),
        })
    }
}

/// The query of the issuer keys for (app, epoch), optionally only those created by `issuer`.
pub fn issuer_keys_query(
    app: &str,
    epoch: u64,
    issuer: Option<Address>,
) -> Result<String, LedgerError> {
    let mut list = kind_filter(KIND_ISSUER_KEY);
    list.push(
        Expr::eq("app", ArkivValue::Str(app.into()))
            .map_err(|e| LedgerError::Invalid(Box::new(e)))?,
    );
    list.push(Expr::Cmp {
        attr: "epoch".into(),
        op: crate::query::CmpOp::Eq,
        value: ArkivValue::U64(epoch),
    });
    if let Some(i) = issuer {
        list.push(Expr::creator_is(i));
    }
    Ok(render(list))
}

/// The token ids spent by one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendsEntity {
    /// The epoch of the tokens.
    pub epoch: u64,
    /// The token ids (32 bytes each), in batch order.
    pub token_ids: Vec<[u8; 32]>,
}

impl SpendsEntity {
    /// The create (attributes `project`, `privsvc_kind`, `epoch` u64; payload the concatenated
    /// token ids; lifetime 2 d). Fails when the payload exceeds 131072 bytes (4096 ids).
    pub fn to_create(&self, salt: u128) -> Result<Create, LedgerError> {
        let payload: Vec<u8> = self.token_ids.iter().flatten().copied().collect();
        if payload.len() > crate::codec::MAX_PAYLOAD_BYTES {
            return Err(LedgerError::invalid(format!(
                "{} token ids do not fit one spends entity (at most {})",
                self.token_ids.len(),
                crate::codec::MAX_PAYLOAD_BYTES / TOKEN_ID_BYTES
            )));
        }
        Ok(system_create(
            KIND_SPENDS,
            vec![Attribute {
                name: "epoch".into(),
                value: ArkivValue::U64(self.epoch),
            }],
            CONTENT_TYPE_BINARY,
            payload,
            SPENDS_LIFETIME_SECONDS,
            salt,
        ))
    }

    /// Parse a spends entity (read with attributes and payload).
    pub fn from_entity(e: &Entity) -> Result<SpendsEntity, LedgerError> {
        check_kind(e, KIND_SPENDS)?;
        let p = payload(e)?;
        if p.len() % TOKEN_ID_BYTES != 0 {
            return Err(bad(e, EntityProblem::NotIdList(p.len())));
        }
        Ok(SpendsEntity {
            epoch: attr_u64(e, "epoch")?,
            token_ids: p
                .chunks_exact(TOKEN_ID_BYTES)
                .map(|c| {
                    let mut id = [0u8; 32];
                    id.copy_from_slice(c);
                    id
                })
                .collect(),
        })
    }
}

/// The query of all spends entities of `epoch`.
pub fn spends_query(epoch: u64) -> String {
    let mut list = kind_filter(KIND_SPENDS);
    list.push(Expr::Cmp {
        attr: "epoch".into(),
        op: crate::query::CmpOp::Eq,
        value: ArkivValue::U64(epoch),
    });
    render(list)
}

/// The create of one record: the sealed envelope as payload (`application/json`), the record's
/// attributes (`project` and `tag` included) with their Arkiv types, a lifetime of
/// `exp_seconds` (`minLifetime = ceil(exp / 2)` blocks), and the relayer-chosen `salt`.
pub fn record_create(
    attributes: &privsvc_attributes::Attributes,
    envelope: &[u8],
    exp_seconds: u64,
    salt: u128,
) -> Result<Create, LedgerError> {
    let attributes = attributes
        .arkiv_attributes()
        .into_iter()
        .map(|cell| {
            let value = ArkivValue::from_abi(cell.type_id, &cell.value)
                .map_err(|e| LedgerError::invalid(format!("attribute {:?}: {e}", cell.name)))?;
            Ok(Attribute {
                name: cell.name,
                value,
            })
        })
        .collect::<Result<Vec<_>, LedgerError>>()?;
    if exp_seconds == 0 {
        return Err(LedgerError::invalid("a record needs a positive lifetime"));
    }
    Ok(Create {
        salt,
        expires_at: 0,
        min_lifetime: lifetime_blocks(exp_seconds),
        flags: CreationFlags::default(),
        content_type: CONTENT_TYPE_JSON.into(),
        payload: envelope.to_vec(),
        attributes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{decode_operations, encode_operations};
    use crate::answer::AnswerError;
    use crate::ops::Operation;
    use alloy_primitives::B256;

    /// What a node would return for a create by `creator`, read with everything selected.
    fn as_entity(c: &Create, creator: Address) -> Entity {
        let ops = decode_operations(&encode_operations(&[Operation::Create(c.clone())])).unwrap();
        let Operation::Create(c) = &ops[0] else {
            panic!("not a create")
        };
        Entity {
            key: B256::repeat_byte(1),
            owner: Some(creator),
            creator: Some(creator),
            created_at: Some(1),
            updated_at: Some(1),
            expires_at: Some(1 + c.min_lifetime),
            creation_flags: Some(c.flags),
            content_type: Some(c.content_type.clone()),
            payload: Some(c.payload.clone()),
            attributes: Some(c.attributes.clone()),
        }
    }

    #[test]
    fn heartbeat_round_trip() {
        let relayer = Address::repeat_byte(0x42);
        let hb = Heartbeat {
            url: "https://relay.example/".into(),
            address: relayer,
            chain_id: 7738577,
            version: "privsvc-relayer/1".into(),
            ohttp_key: Some("01002000".into()),
        };
        let c = hb.to_create(9).unwrap();
        assert_eq!(c.min_lifetime, 1800);
        assert_eq!(c.content_type, CONTENT_TYPE_JSON);
        let e = as_entity(&c, relayer);
        assert_eq!(Heartbeat::from_entity(&e).unwrap(), hb);
        // A heartbeat claiming another relayer's address is refused.
        let forged = as_entity(&c, Address::repeat_byte(0x43));
        match Heartbeat::from_entity(&forged) {
            Err(LedgerError::Decode(AnswerError::Entity {
                key,
                problem: EntityProblem::WrongCreator { creator, claimed },
            })) => {
                assert_eq!(key, forged.key);
                assert_eq!((creator, claimed), (Address::repeat_byte(0x43), relayer));
            }
            other => panic!("a forged heartbeat: {other:?}"),
        }
        // A payload that is not JSON keeps serde_json's error as the source.
        let mut garbled = as_entity(&c, relayer);
        garbled.payload = Some(b"{not json".to_vec());
        let err = Heartbeat::from_entity(&garbled).unwrap_err();
        let chain: Vec<&dyn std::error::Error> =
            std::iter::successors(Some(&err as &dyn std::error::Error), |e| e.source()).collect();
        assert!(chain.iter().any(|e| e.is::<serde_json::Error>()), "{err:?}");
        // An issuer key is not a heartbeat.
        let ik = IssuerKeyEntity {
            app: "notes".into(),
            epoch: 20_000,
            spki: vec![0x30, 0x82],
        };
        let ike = as_entity(&ik.to_create(1).unwrap(), relayer);
        assert!(
            matches!(
                Heartbeat::from_entity(&ike),
                Err(LedgerError::Decode(AnswerError::Entity {
                    problem: EntityProblem::WrongKind {
                        expected: KIND_HEARTBEAT
                    },
                    ..
                }))
            ),
            "an issuer key read as a heartbeat"
        );
        assert_eq!(IssuerKeyEntity::from_entity(&ike).unwrap(), ik);
    }

    #[test]
    fn spends_round_trip_and_limits() {
        let s = SpendsEntity {
            epoch: 20_000,
            token_ids: vec![[1u8; 32], [2u8; 32]],
        };
        let c = s.to_create(3).unwrap();
        assert_eq!(c.payload.len(), 64);
        assert_eq!(c.min_lifetime, 86_400);
        let e = as_entity(&c, Address::repeat_byte(1));
        assert_eq!(SpendsEntity::from_entity(&e).unwrap(), s);
        let big = SpendsEntity {
            epoch: 1,
            token_ids: vec![[0u8; 32]; 4097],
        };
        assert!(big.to_create(0).is_err());
    }

    #[test]
    fn queries() {
        assert_eq!(
            spends_query(20_000),
            "project = str('privsvc-7f3k') AND privsvc_kind = str('spends') AND epoch = u64(20000)"
        );
        assert_eq!(
            issuer_keys_query("notes", 5, Some(Address::repeat_byte(0xab))).unwrap(),
            "project = str('privsvc-7f3k') AND privsvc_kind = str('issuer-key') AND app = \
             str('notes') AND epoch = u64(5) AND $creator = \
             addr(0xABaBaBaBABabABabAbAbABAbABabababaBaBABaB)"
        );
        assert_eq!(
            live_heartbeats_query(10_000, HEARTBEAT_INTERVAL_MS),
            "project = str('privsvc-7f3k') AND privsvc_kind = str('heartbeat') AND $createdAt >= \
             u64(9400)"
        );
    }

    #[test]
    fn record_create_maps_types() {
        let mut a = privsvc_attributes::Attributes::new();
        a.insert("project", "notes").unwrap();
        a.insert("level", 3i32).unwrap();
        a.insert("size", 7u64).unwrap();
        let c = record_create(&a, b"{\"v\":1}", 3_600, 11).unwrap();
        assert_eq!(c.min_lifetime, 1_800);
        assert_eq!(c.content_type, CONTENT_TYPE_JSON);
        let types: Vec<(&str, u8)> = c
            .attributes
            .iter()
            .map(|x| (x.name.as_str(), x.value.type_id()))
            .collect();
        assert_eq!(types, vec![("level", 2), ("project", 8), ("size", 3)]);
        crate::abi::check_operations(&[Operation::Create(c)]).unwrap();
        assert!(record_create(&a, b"{}", 0, 1).is_err());
    }
}
