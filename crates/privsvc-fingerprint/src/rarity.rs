//! `check_rarity`: the `rare-combination` warning.

use privsvc_attributes::Attributes;

use crate::{CheckWarning, WarningCode};

/// Compares `attributes` with the app's `existing` records. Warns for every attribute value
/// (besides `project` and `tag`) that fewer than `k` existing records share, and once, without
/// an attribute name, when fewer than `k` share all the values together (`tag` excluded,
/// `project` included). `k = 0` disables the check.
///
/// ```
/// use privsvc_attributes::Attributes;
/// use privsvc_fingerprint::check_rarity;
/// let rec = |colour: &str| {
///     let mut a = Attributes::new();
///     a.insert("colour", colour).unwrap();
///     a
/// };
/// let existing = vec![rec("red"), rec("red"), rec("red"), rec("blue")];
/// assert!(check_rarity(&rec("red"), &existing, 3).is_empty());
/// assert_eq!(check_rarity(&rec("blue"), &existing, 3).len(), 2);
/// ```
pub fn check_rarity(
    attributes: &Attributes,
    existing: &[Attributes],
    k: usize,
) -> Vec<CheckWarning> {
    if k == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (name, value) in attributes {
        if name == "project" || name == "tag" {
            continue;
        }
        let count = existing
            .iter()
            .filter(|e| e.get(name) == Some(value))
            .count();
        if count < k {
            out.push(CheckWarning::new(
                WarningCode::RareCombination,
                Some(name),
                format!("only {count} of {} existing records have {name} = {value}; fewer than {k} makes this record easy to single out", existing.len()),
            ));
        }
    }
    let combined = existing
        .iter()
        .filter(|e| {
            attributes
                .iter()
                .filter(|(name, _)| name.as_str() != "tag")
                .all(|(name, value)| e.get(name) == Some(value))
        })
        .count();
    if combined < k {
        out.push(CheckWarning::new(
            WarningCode::RareCombination,
            None,
            format!("only {combined} of {} existing records share this combination of attribute values; fewer than {k} makes this record easy to single out", existing.len()),
        ));
    }
    out
}
