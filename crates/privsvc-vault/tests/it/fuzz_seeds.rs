//! Stable replay of the `vault_open_tags` fuzz seeds (fuzz/seeds/vault_open_tags/*) through the
//! entry function the cargo-fuzz target calls: the batched tag opener must agree with
//! `aes-gcm-siv` on sealed, tampered and random tags. `accept-*` files must open at least one
//! tag, `reject-*` none.

use std::path::PathBuf;

use privsvc_vault::fuzz_entry::open_tags_target;

#[test]
fn vault_open_tags_seeds() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/vault_open_tags");
    let (accepted, rejected) =
        privsvc_attributes::fuzz_entry::replay_seed_corpus(&dir, open_tags_target);
    assert!(
        accepted >= 2 && rejected >= 4,
        "{accepted} accepted, {rejected} rejected"
    );
}
