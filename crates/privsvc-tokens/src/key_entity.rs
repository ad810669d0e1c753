//! The issuer-key system entity (DESIGN 4): attributes `project = "privsvc-7f3k"`,
//! `privsvc_kind = "issuer-key"`, `app` (str), `epoch` (u64); payload = the RSA public key as
//! SPKI DER; lifetime 7 days.
//!
//! Kept here until `privsvc-ledger` offers system-entity builders; the format is the one of
//! DESIGN 4 and docs/PROTOCOL.md section 4.

use alloy_primitives::Address;
use privsvc_ledger::{ArkivValue, Attribute, Create, CreationFlags, Entity, Operation};

/// Value of the `project` attribute of every privsvc system entity.
pub const PRIVSVC_PROJECT: &str = "privsvc-7f3k";
/// Value of `privsvc_kind` for issuer keys.
pub const KIND_ISSUER_KEY: &str = "issuer-key";
/// Lifetime of an issuer-key entity: 7 days of 2-second blocks.
pub const ISSUER_KEY_LIFETIME_BLOCKS: u64 = 7 * 86_400 / 2;
/// Content type of the key entity's payload.
pub const ISSUER_KEY_CONTENT_TYPE: &str = "application/octet-stream";

/// The create operation that publishes `spki` as the key of (`app`, `epoch`).
pub fn issuer_key_create(
    app: &str,
    epoch: u32,
    spki: &[u8],
    salt: u128,
    lifetime_blocks: u64,
) -> Operation {
    Operation::Create(Create {
        salt,
        expires_at: 0,
        min_lifetime: lifetime_blocks,
        flags: CreationFlags::default(),
        content_type: ISSUER_KEY_CONTENT_TYPE.to_string(),
        payload: spki.to_vec(),
        attributes: vec![
            attr("project", ArkivValue::Str(PRIVSVC_PROJECT.into())),
            attr("privsvc_kind", ArkivValue::Str(KIND_ISSUER_KEY.into())),
            attr("app", ArkivValue::Str(app.into())),
            attr("epoch", ArkivValue::U64(u64::from(epoch))),
        ],
    })
}

fn attr(name: &str, value: ArkivValue) -> Attribute {
    Attribute {
        name: name.into(),
        value,
    }
}

/// A typed-query string literal: `str('...')` with `'` doubled.
fn str_literal(s: &str) -> String {
    format!("str('{}')", s.replace('\'', "''"))
}

/// The `arkiv_query` expression selecting the issuer-key entities of (`issuer`, `app`, `epoch`).
pub fn issuer_key_query(issuer: Address, app: &str, epoch: u32) -> String {
    format!(
        "project = {} AND privsvc_kind = {} AND app = {} AND epoch = u64({epoch}) AND $creator = addr({})",
        str_literal(PRIVSVC_PROJECT),
        str_literal(KIND_ISSUER_KEY),
        str_literal(app),
        issuer.to_checksum(None)
    )
}

/// The SPKI payload of `entity` when it is an issuer-key entity of (`issuer`, `app`, `epoch`)
/// (creator and all attributes checked again, whatever the query matched).
pub fn issuer_key_payload<'a>(
    entity: &'a Entity,
    issuer: Address,
    app: &str,
    epoch: u32,
) -> Option<&'a [u8]> {
    if entity.creator? != issuer {
        return None;
    }
    let attrs = entity.attributes.as_ref()?;
    let has =
        |name: &str, want: &ArkivValue| attrs.iter().any(|a| a.name == name && &a.value == want);
    let ok = has("project", &ArkivValue::Str(PRIVSVC_PROJECT.into()))
        && has("privsvc_kind", &ArkivValue::Str(KIND_ISSUER_KEY.into()))
        && has("app", &ArkivValue::Str(app.into()))
        && has("epoch", &ArkivValue::U64(u64::from(epoch)));
    if !ok {
        return None;
    }
    entity.payload.as_deref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_escapes_quotes_and_names_the_creator() {
        let a: Address = "0x00000000000000000000000000000000000000aa"
            .parse()
            .unwrap();
        let q = issuer_key_query(a, "it's", 7);
        assert_eq!(
            q,
            format!(
                "project = str('privsvc-7f3k') AND privsvc_kind = str('issuer-key') AND app = str('it''s') AND epoch = u64(7) AND $creator = addr({})",
                a.to_checksum(None)
            )
        );
    }
}
