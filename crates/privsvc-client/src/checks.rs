//! Fingerprinting checks before a write.

use privsvc_attributes::{AttrValue, Attributes};
use privsvc_envelope::{expiry_seconds, Expires};
use privsvc_fingerprint::{check_record, CheckWarning, RecordCheck, WarningCode};

use crate::cache::EntityCache;

/// `check()`: warnings for the attributes (invalid ones are skipped here; the write refuses
/// them), the lifetime and the payload.
pub(crate) fn check_input(
    attributes: &[(String, AttrValue)],
    expires: Expires,
    payload: &[u8],
) -> Vec<CheckWarning> {
    let mut attrs = Attributes::new();
    for (n, v) in attributes {
        let _ = attrs.insert(n.clone(), v.clone());
    }
    check_record(&RecordCheck {
        attributes: Some(&attrs),
        expires: Some(expiry_seconds(expires)),
        payload: Some(payload),
    })
}

/// `check_rarity()` on the client's cached listing of the project (the last scan's): warnings
/// for each attribute value, and for the combination, that fewer than `k` listed records share.
/// `None` when the client has not listed the project yet.
pub(crate) fn rarity(
    cache: &EntityCache,
    attributes: &Attributes,
    k: usize,
) -> Option<Vec<CheckWarning>> {
    if k == 0 {
        return Some(Vec::new());
    }
    let (each, all) = cache.rarity_counts(attributes)?;
    let total = cache.known();
    let mut out = Vec::new();
    let named = attributes
        .iter()
        .filter(|(n, _)| n.as_str() != "project" && n.as_str() != "tag");
    for ((name, value), count) in named.zip(each) {
        if count < k {
            out.push(CheckWarning {
                code: WarningCode::RareCombination,
                attribute: Some(name.clone()),
                message: format!("only {count} of {total} existing records have {name} = {value}; fewer than {k} makes this record easy to single out"),
            });
        }
    }
    if all < k {
        out.push(CheckWarning {
            code: WarningCode::RareCombination,
            attribute: None,
            message: format!("only {all} of {total} existing records share this combination of attribute values; fewer than {k} makes this record easy to single out"),
        });
    }
    Some(out)
}
