//! Fingerprinting checks before a write.

use privsvc_attributes::{AttrValue, Attributes};
use privsvc_envelope::{expiry_seconds, Expires};
use privsvc_fingerprint::{check_rarity, check_record, CheckWarning, RecordCheck};
use privsvc_ledger::LedgerReader;

use crate::error::PrivsvcError;
use crate::read::list_app;
use crate::verify::attributes_from_ledger;

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

/// `check_rarity()`: compares `attributes` with the project's existing records on the ledger.
pub(crate) async fn rarity(
    reader: &dyn LedgerReader,
    project: &str,
    attributes: &Attributes,
    k: usize,
) -> Result<Vec<CheckWarning>, PrivsvcError> {
    if k == 0 {
        return Ok(Vec::new());
    }
    let listing = list_app(reader, project, None, None).await?;
    let existing: Vec<Attributes> = listing
        .entities
        .iter()
        .filter_map(|e| attributes_from_ledger(e.attributes.as_deref()?).ok())
        .collect();
    let mut with_project = attributes.clone();
    let _ = with_project.insert("project", project);
    Ok(check_rarity(&with_project, &existing, k))
}
