//! The vault in wasm32, run in Node.js by `scripts/wasm-check.sh`: a wallet that is not `Send`
//! (as a JavaScript-backed one is) derives the keys, the derivation is deterministic, tags open
//! and payloads decrypt with the host's random generator. Natively this file is empty.
#![cfg(target_arch = "wasm32")]

use std::cell::Cell;
use std::rc::Rc;

use alloy_dyn_abi::TypedData;
use alloy_primitives::{Address, Signature};
use privsvc_vault::{DeriveOptions, KeyVault, LocalWallet, VaultError, Wallet};
use wasm_bindgen_test::wasm_bindgen_test;

/// A wallet holding an `Rc` (not `Send`), counting its signatures.
struct CountingWallet {
    inner: LocalWallet,
    signatures: Rc<Cell<u32>>,
}

#[async_trait::async_trait(?Send)]
impl Wallet for CountingWallet {
    fn address(&self) -> Address {
        self.inner.address()
    }
    async fn sign_typed_data(&self, typed_data: &TypedData) -> Result<Signature, VaultError> {
        self.signatures.set(self.signatures.get() + 1);
        self.inner.sign_typed_data(typed_data).await
    }
    async fn personal_sign(&self, message: &[u8]) -> Result<Signature, VaultError> {
        self.signatures.set(self.signatures.get() + 1);
        self.inner.personal_sign(message).await
    }
}

fn wallet(key: u8) -> (CountingWallet, Rc<Cell<u32>>) {
    let signatures = Rc::new(Cell::new(0));
    let wallet = CountingWallet {
        inner: LocalWallet::from_bytes(&[key; 32]).unwrap(),
        signatures: signatures.clone(),
    };
    (wallet, signatures)
}

#[wasm_bindgen_test]
async fn a_non_send_wallet_derives_the_same_keys_twice() {
    let opts = DeriveOptions::default();
    let (w, signatures) = wallet(7);
    let first = KeyVault::from_wallet(&w, "wasm-app", &opts).await.unwrap();
    assert_eq!(
        signatures.get(),
        2,
        "the derivation is asked twice and compared"
    );
    let again = KeyVault::from_wallet(&w, "wasm-app", &opts).await.unwrap();

    // Random record references and tag nonces come from the host's generator.
    let record = first.new_record();
    let tag = first.make_tag(&record);
    assert!(again.open_tags(&[tag])[0].is_some());
    let sealed = first.encrypt(&record, b"hello from wasm");
    assert_eq!(again.decrypt(&record, &sealed).unwrap(), b"hello from wasm");

    // Another wallet has other keys.
    let (other, _) = wallet(8);
    let other = KeyVault::from_wallet(&other, "wasm-app", &opts)
        .await
        .unwrap();
    assert!(other.open_tags(&[tag])[0].is_none());
    assert!(other.decrypt(&record, &sealed).is_err());
}

/// The batched tag opener (4-lane bitsliced AES in wasm32, AES-NI natively) opens exactly the
/// vault's own untampered tags, in a batch that crosses its chunk size.
#[wasm_bindgen_test]
fn tag_batches_open_only_own_untampered_tags() {
    let (mine, _) = KeyVault::random("wasm-app");
    let (other, _) = KeyVault::random("wasm-app");
    let mut tags = Vec::new();
    let mut want = Vec::new();
    for i in 0..150 {
        let record = mine.new_record();
        match i % 3 {
            0 => {
                tags.push(mine.make_tag(&record));
                want.push(Some(record));
            }
            1 => {
                tags.push(other.make_tag(&record));
                want.push(None);
            }
            _ => {
                let mut tag = mine.make_tag(&record);
                tag[i % 44] ^= 0x40;
                tags.push(tag);
                want.push(None);
            }
        }
    }
    assert_eq!(mine.open_tags(&tags), want);
}
