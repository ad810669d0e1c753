//! Stable replay of the fuzz seed corpus (fuzz/seeds/<target>/*) through the same entry
//! functions the cargo-fuzz targets call, so CI exercises them without nightly.
//!
//! Files named `accept-*` must be accepted, `reject-*` refused; any other file (for instance a
//! minimised crash added after a fuzzing run) must only not panic.

use std::path::PathBuf;

use privsvc_attributes::fuzz_entry::attributes_from_wire;
use privsvc_envelope::fuzz_entry::parse_envelope_target;

fn replay(target: &str, entry: fn(&[u8]) -> bool) -> (usize, usize) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    let (mut accepted, mut rejected) = (0, 0);
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let data = std::fs::read(&path).unwrap();
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

#[test]
fn parse_envelope_seeds() {
    let (accepted, rejected) = replay("parse_envelope", parse_envelope_target);
    assert!(
        accepted >= 3 && rejected >= 15,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn attributes_from_wire_seeds() {
    let (accepted, rejected) = replay("attributes_from_wire", attributes_from_wire);
    assert!(
        accepted >= 6 && rejected >= 20,
        "{accepted} accepted, {rejected} rejected"
    );
}
