//! The grouping key of a record's `project`: records with equal keys count toward each other's
//! minAnonymity (docs/PROTOCOL.md §7).

use privsvc_attributes::Attributes;
use privsvc_ledger::PROJECT_ATTRIBUTE;

/// The grouping key of a record's `project` attribute: its wire JSON
/// (`{"type":"str","value":"notes"}`), so values of different types never collide. Records
/// with equal keys count toward each other's minAnonymity (docs/PROTOCOL.md §7). Empty when absent
/// (validation refuses such records).
pub fn project_key(attributes: &Attributes) -> String {
    attributes
        .get(PROJECT_ATTRIBUTE)
        .map(|v| v.to_wire().to_string())
        .unwrap_or_default()
}

/// [`project_key`] of attributes in stored wire form (`{name: {type, value}}` JSON text);
/// empty when unreadable.
pub fn project_key_of_wire(attributes: &str) -> String {
    Attributes::from_wire_json(attributes.as_bytes())
        .map(|a| project_key(&a))
        .unwrap_or_default()
}
