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

/// Replays the seed corpus of one fuzz target (`fuzz/seeds/<target>/*` in the repository)
/// through its entry function, as the stable `fuzz_seeds` tests of every crate do: files named
/// `accept-*` must be accepted, `reject-*` refused, any other file (a minimised crash kept as a
/// regression seed) must only not panic. Returns `(accepted, rejected)`; panics, naming the
/// file, on the first seed that breaks its expectation.
pub fn replay_seed_corpus(dir: &std::path::Path, entry: fn(&[u8]) -> bool) -> (usize, usize) {
    let target = dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("seed directory entry").path())
        .collect();
    entries.sort();
    let (mut accepted, mut rejected) = (0, 0);
    for path in entries {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{target}/{name}: {e}"));
        let ok = std::panic::catch_unwind(|| entry(&data))
            .unwrap_or_else(|_| panic!("{target}/{name}: panicked"));
        if name.starts_with("accept-") {
            assert!(ok, "{target}/{name}: refused, expected accepted");
            accepted += 1;
        } else if name.starts_with("reject-") {
            assert!(!ok, "{target}/{name}: accepted, expected refused");
            rejected += 1;
        }
    }
    (accepted, rejected)
}
