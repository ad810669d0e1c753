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
    privsvc_attributes::fuzz_entry::replay_seed_corpus(&dir, entry)
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
