//! Entry point shared by the `attributes_from_wire` fuzz target and its stable seed replay.

use crate::{json, Attributes};

/// Parses `data` as wire attributes and checks the invariants of every accepted input:
/// the wire form and the canonical JSON both parse back to the same attributes. Returns
/// whether the input was accepted. Panics only when an invariant is broken.
pub fn attributes_from_wire(data: &[u8]) -> bool {
    let Ok(attrs) = Attributes::from_wire_json(data) else {
        return false;
    };
    let again = Attributes::from_wire(&attrs.to_wire()).expect("to_wire output must parse");
    assert_eq!(
        again, attrs,
        "to_wire/from_wire round trip changed the attributes"
    );
    let canonical = attrs.canonical_json();
    let reparsed =
        Attributes::from_wire_json(canonical.as_bytes()).expect("canonical JSON must parse");
    assert_eq!(
        reparsed, attrs,
        "canonical JSON parsed to different attributes"
    );
    assert_eq!(
        json::canonical(&reparsed.to_wire()),
        canonical,
        "canonical form is not stable"
    );
    true
}
