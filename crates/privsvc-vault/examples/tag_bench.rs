//! Tag opens per second natively, the same measurement as `js/bench/tags.mjs` in wasm: one vault
//! opens 10,000 foreign tags (valid tags of another vault, so each fails authentication, as most
//! tags of an app do for one user), best of 3 after a warm-up.
//!
//! `cargo run --release -p privsvc-vault --example tag_bench [count]`
//!
//! It also times the `aes-gcm-siv` crate's own decryption of the same tags, the reference the
//! batched opener is tested against.

use std::time::Instant;

use aes_gcm_siv::aead::{Aead, KeyInit};
use aes_gcm_siv::{Aes256GcmSiv, Nonce};
use privsvc_vault::{KeyVault, TAG_NONCE_BYTES};

fn best_of_3(mut run: impl FnMut() -> usize) -> (f64, usize) {
    let mut best = f64::INFINITY;
    let mut opened = 0;
    for _ in 0..3 {
        let t0 = Instant::now();
        opened = run();
        best = best.min(t0.elapsed().as_secs_f64());
    }
    (best, opened)
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("count: a whole number"))
        .unwrap_or(10_000);
    let (other, _) = KeyVault::random("bench");
    let record = other.new_record();
    let tags: Vec<_> = (0..n).map(|_| other.make_tag(&record)).collect();
    let (vault, _) = KeyVault::random("bench");

    vault.open_tags(&tags[..n.min(500)]);
    let (secs, opened) = best_of_3(|| vault.open_tags(&tags).iter().flatten().count());
    assert_eq!(opened, 0, "foreign tags must not open");
    println!(
        "native: KeyVault::open_tags {:.0} tag opens/s ({n} tags, best of 3)",
        n as f64 / secs
    );

    // The reference: one AES-256-GCM-SIV decryption per tag with the `aes-gcm-siv` crate.
    let cipher = Aes256GcmSiv::new(&[7u8; 32].into());
    let (secs, opened) = best_of_3(|| {
        tags.iter()
            .filter(|tag| {
                let (nonce, sealed) = tag.split_at(TAG_NONCE_BYTES);
                cipher.decrypt(Nonce::from_slice(nonce), sealed).is_ok()
            })
            .count()
    });
    assert_eq!(opened, 0, "foreign tags must not open");
    println!(
        "native: aes-gcm-siv crate, one decrypt per tag {:.0} tag opens/s",
        n as f64 / secs
    );
}
