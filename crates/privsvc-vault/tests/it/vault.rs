//! Behaviour of the vaults: tags, encryption, wallet checks, recovery codes, isolation, EIP-712.

use std::sync::Arc;

use alloy_dyn_abi::TypedData;
use alloy_primitives::{keccak256, Address, Signature, B256, U256};
use async_trait::async_trait;
use k256::ecdsa::signature::hazmat::RandomizedPrehashSigner;
use k256::ecdsa::{RecoveryId, SigningKey, VerifyingKey};
use privsvc_vault::{
    derivation_typed_data, proof_signer, proof_signing_hash, proof_typed_data, DeriveOptions,
    IsolatedVault, KeyVault, LocalWallet, OwnershipProofBody, RecordRef, Vault, VaultError, Wallet,
    NETWORK_CHAIN_ID, TAG_BYTES,
};
use proptest::prelude::*;

const APP: &str = "vault-tests";

fn vault_from_seed(seed: u8) -> KeyVault {
    let mut bytes = [0u8; 65];
    bytes[0] = seed;
    bytes[64] = 27;
    KeyVault::from_signature(&Signature::from_raw(&bytes).unwrap(), APP)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn tags_open_with_the_right_key_only(
        refs in proptest::collection::vec(any::<[u8; 16]>(), 1..8),
        nonce in any::<[u8; 12]>(),
        seed in 1u8..=255,
    ) {
        let vault = vault_from_seed(0);
        let other = vault_from_seed(seed);
        let tags: Vec<_> = refs.iter().map(|r| vault.make_tag_with_nonce(&RecordRef(*r), &nonce)).collect();
        prop_assert!(tags.iter().all(|t| t.len() == TAG_BYTES));
        let opened = vault.open_tags(&tags);
        prop_assert_eq!(opened, refs.iter().map(|r| Some(RecordRef(*r))).collect::<Vec<_>>());
        prop_assert!(other.open_tags(&tags).iter().all(Option::is_none));
    }

    #[test]
    fn payloads_round_trip_and_reject_tampering(
        data in proptest::collection::vec(any::<u8>(), 0..300),
        r in any::<[u8; 16]>(),
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let vault = vault_from_seed(1);
        let r = RecordRef(r);
        let stored = vault.encrypt(&r, &data);
        prop_assert_eq!(stored.len(), 12 + data.len() + 16);
        prop_assert_eq!(vault.decrypt(&r, &stored).unwrap(), data.clone());
        let mut tampered = stored.clone();
        let i = flip.index(tampered.len());
        tampered[i] ^= 1 << bit;
        prop_assert!(matches!(vault.decrypt(&r, &tampered), Err(VaultError::DecryptionFailed)));
        // Another record's key and another vault fail too.
        let mut other_ref = r;
        other_ref.0[0] ^= 1;
        prop_assert!(vault.decrypt(&other_ref, &stored).is_err());
        prop_assert!(vault_from_seed(2).decrypt(&r, &stored).is_err());
    }
}

#[test]
fn encryption_uses_fresh_nonces_and_checks_length() {
    let vault = vault_from_seed(3);
    let r = vault.new_record();
    assert_ne!(vault.encrypt(&r, b"same"), vault.encrypt(&r, b"same"));
    assert!(matches!(
        vault.decrypt(&r, &[0u8; 27]),
        Err(VaultError::CiphertextTooShort(27))
    ));
    let t1 = vault.make_tag(&r);
    let t2 = vault.make_tag(&r);
    assert_ne!(t1, t2, "tags of one record must not be linkable");
    assert_eq!(vault.open_tags(&[t1, t2]), vec![Some(r), Some(r)]);
}

#[test]
fn keys_are_independent_per_app_and_record() {
    let mut raw = [7u8; 65];
    raw[64] = 28;
    let sig = Signature::from_raw(&raw).unwrap();
    let a = KeyVault::from_signature(&sig, "app-a");
    let b = KeyVault::from_signature(&sig, "app-b");
    let r = RecordRef([5; 16]);
    assert_ne!(a.address_of(&r).unwrap(), b.address_of(&r).unwrap());
    assert_ne!(a.scope_record("s"), b.scope_record("s"));
    assert_eq!(a.scope_record("s"), a.scope_record("s"));
    assert_ne!(a.scope_record("s"), a.scope_record("t"));
    assert_ne!(
        a.address_of(&r).unwrap(),
        a.address_of(&RecordRef([6; 16])).unwrap()
    );
    assert!(b.open_tags(&[a.make_tag(&r)])[0].is_none());
    assert!(!format!("{a:?}").contains(&hex::encode([7u8; 8])));
}

// ---- wallets ----

/// A wallet that signs with fresh randomness every time (like some hardware or MPC signers).
struct RandomizingWallet(SigningKey);

#[async_trait]
impl Wallet for RandomizingWallet {
    fn address(&self) -> Address {
        Address::from_private_key(&self.0)
    }
    async fn sign_typed_data(&self, typed_data: &TypedData) -> Result<Signature, VaultError> {
        let hash = typed_data.eip712_signing_hash().unwrap();
        let sig: k256::ecdsa::Signature = self
            .0
            .sign_prehash_with_rng(&mut rand::rngs::OsRng, hash.as_slice())
            .unwrap();
        let recid = RecoveryId::trial_recovery_from_prehash(
            &VerifyingKey::from(&self.0),
            hash.as_slice(),
            &sig,
        )
        .unwrap();
        Ok(Signature::from((sig, recid)))
    }
    async fn personal_sign(&self, _message: &[u8]) -> Result<Signature, VaultError> {
        unimplemented!("not used by the vault")
    }
}

/// A wallet that reports itself as a contract account.
struct ContractWallet(LocalWallet);

#[async_trait]
impl Wallet for ContractWallet {
    fn address(&self) -> Address {
        self.0.address()
    }
    async fn sign_typed_data(&self, typed_data: &TypedData) -> Result<Signature, VaultError> {
        self.0.sign_typed_data(typed_data).await
    }
    async fn personal_sign(&self, message: &[u8]) -> Result<Signature, VaultError> {
        self.0.personal_sign(message).await
    }
    async fn is_contract(&self) -> Result<bool, VaultError> {
        Ok(true)
    }
}

/// An account whose signatures come from another key (an ERC-1271 style contract that does not
/// say it is one): its signatures do not recover to its address.
struct ForeignSignerWallet {
    address: Address,
    signer: LocalWallet,
}

#[async_trait]
impl Wallet for ForeignSignerWallet {
    fn address(&self) -> Address {
        self.address
    }
    async fn sign_typed_data(&self, typed_data: &TypedData) -> Result<Signature, VaultError> {
        self.signer.sign_typed_data(typed_data).await
    }
    async fn personal_sign(&self, message: &[u8]) -> Result<Signature, VaultError> {
        self.signer.personal_sign(message).await
    }
}

#[tokio::test]
async fn from_wallet_matches_from_signature() {
    let wallet = LocalWallet::random();
    let opts = DeriveOptions::default();
    let vault = KeyVault::from_wallet(&wallet, APP, &opts).await.unwrap();
    let sig = KeyVault::sign_derivation(&wallet, APP, &opts)
        .await
        .unwrap();
    let hash = derivation_typed_data(APP, None)
        .eip712_signing_hash()
        .unwrap();
    assert_eq!(
        sig.recover_address_from_prehash(&hash).unwrap(),
        wallet.address()
    );
    let again = KeyVault::from_signature(&sig, APP);
    let r = vault.new_record();
    assert_eq!(vault.address_of(&r).unwrap(), again.address_of(&r).unwrap());
    // Another chain id gives other keys.
    let other = KeyVault::from_wallet(&wallet, APP, &DeriveOptions::for_chain(1))
        .await
        .unwrap();
    assert_ne!(other.address_of(&r).unwrap(), vault.address_of(&r).unwrap());
}

#[tokio::test]
async fn refuses_non_deterministic_wallets() {
    let wallet = RandomizingWallet(SigningKey::random(&mut rand::rngs::OsRng));
    let err = KeyVault::from_wallet(&wallet, APP, &DeriveOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, VaultError::NonDeterministicWallet), "{err}");
    let err = IsolatedVault::from_wallet(&wallet, APP, &DeriveOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, VaultError::NonDeterministicWallet), "{err}");
}

#[tokio::test]
async fn refuses_contract_wallets() {
    let contract = ContractWallet(LocalWallet::random());
    let err = KeyVault::sign_derivation(&contract, APP, &DeriveOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, VaultError::SmartContractWallet), "{err}");

    let foreign = ForeignSignerWallet {
        address: LocalWallet::random().address(),
        signer: LocalWallet::random(),
    };
    let err = KeyVault::from_wallet(&foreign, APP, &DeriveOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, VaultError::SmartContractWallet), "{err}");
}

// ---- recovery codes ----

#[test]
fn recovery_code_restores_the_same_keys() {
    let (vault, code) = KeyVault::random(APP);
    assert_eq!(code.words().count(), 24);
    assert_eq!(format!("{code:?}"), "RecoveryCode(<redacted>)");
    let restored = KeyVault::from_recovery_code(code.as_str(), APP).unwrap();
    let r = vault.new_record();
    assert_eq!(
        vault.address_of(&r).unwrap(),
        restored.address_of(&r).unwrap()
    );
    assert_eq!(restored.open_tags(&[vault.make_tag(&r)]), vec![Some(r)]);
    assert_eq!(
        restored.decrypt(&r, &vault.encrypt(&r, b"x")).unwrap(),
        b"x"
    );
    // The same code under another app is another vault.
    let other_app = KeyVault::from_recovery_code(code.as_str(), "other").unwrap();
    assert_ne!(
        other_app.address_of(&r).unwrap(),
        vault.address_of(&r).unwrap()
    );
    // Two random vaults differ.
    let (second, second_code) = KeyVault::random(APP);
    assert_ne!(second_code.as_str(), code.as_str());
    assert_ne!(
        second.address_of(&r).unwrap(),
        vault.address_of(&r).unwrap()
    );
    assert!(matches!(
        KeyVault::from_recovery_code("abandon abandon", APP),
        Err(VaultError::InvalidRecoveryCode(_))
    ));
}

// ---- isolated vault ----

async fn assert_same_answers(isolated: &dyn Vault, local: &KeyVault) {
    assert_eq!(isolated.app(), local.app());
    let r = isolated.new_record();
    assert_eq!(
        isolated.address_of(&r).await.unwrap(),
        local.address_of(&r).unwrap()
    );
    assert_eq!(
        isolated.scope_record("s").await.unwrap(),
        local.scope_record("s")
    );
    let tag = isolated.make_tag(&r).await.unwrap();
    assert_eq!(local.open_tags(&[tag]), vec![Some(r)]);
    let local_tag = local.make_tag(&r);
    assert_eq!(
        isolated.open_tags(&[local_tag, [0u8; 44]]).await.unwrap(),
        vec![Some(r), None]
    );
    let stored = isolated.encrypt(&r, b"secret data").await.unwrap();
    assert_eq!(local.decrypt(&r, &stored).unwrap(), b"secret data");
    assert_eq!(
        isolated
            .decrypt(&r, &local.encrypt(&r, b"back"))
            .await
            .unwrap(),
        b"back"
    );
    assert!(matches!(
        isolated.decrypt(&r, &[1u8; 40]).await,
        Err(VaultError::DecryptionFailed)
    ));
    let body = OwnershipProofBody {
        entity_key: B256::repeat_byte(9),
        challenge: "ch".into(),
        verifier: "v".into(),
        not_before: 10,
        not_after: 310,
    };
    let sig = isolated.sign_proof(&r, &body).await.unwrap();
    assert_eq!(sig, local.signer(&r).unwrap().sign_proof(&body).unwrap());
    assert_eq!(
        proof_signer(&body, None, &sig).unwrap(),
        local.address_of(&r).unwrap()
    );
}

#[tokio::test]
async fn isolated_vault_matches_key_vault() {
    let wallet = LocalWallet::random();
    let opts = DeriveOptions::default();
    let local = KeyVault::from_wallet(&wallet, APP, &opts).await.unwrap();
    let isolated = IsolatedVault::from_wallet(&wallet, APP, &opts)
        .await
        .unwrap();
    assert_same_answers(&isolated, &local).await;

    let (random, code) = IsolatedVault::random(APP).unwrap();
    let restored = KeyVault::from_recovery_code(code.as_str(), APP).unwrap();
    assert_same_answers(&random, &restored).await;
    let from_code = IsolatedVault::from_recovery_code(code.as_str(), APP).unwrap();
    assert_same_answers(&from_code, &restored).await;
    assert!(IsolatedVault::from_recovery_code("nope", APP).is_err());

    let spawned =
        IsolatedVault::spawn(KeyVault::from_recovery_code(code.as_str(), APP).unwrap()).unwrap();
    assert_same_answers(&spawned, &restored).await;
}

#[tokio::test]
async fn isolated_vault_fails_cleanly_after_terminate() {
    let (isolated, _code) = IsolatedVault::random(APP).unwrap();
    let shared: Arc<dyn Vault> = Arc::new(isolated);
    let r = shared.new_record();
    shared.address_of(&r).await.unwrap();

    // Concurrent callers all get answers.
    let mut handles = Vec::new();
    for _ in 0..8 {
        let v = Arc::clone(&shared);
        handles.push(tokio::spawn(async move {
            v.encrypt(&r, b"p").await.map(|c| c.len())
        }));
    }
    for h in handles {
        assert_eq!(h.await.unwrap().unwrap(), 12 + 1 + 16);
    }

    let isolated = IsolatedVault::random(APP).unwrap().0;
    isolated.terminate();
    assert!(isolated.is_terminated());
    isolated.terminate(); // idempotent
    assert!(matches!(
        isolated.address_of(&r).await,
        Err(VaultError::Terminated)
    ));
    assert!(matches!(
        isolated.make_tag(&r).await,
        Err(VaultError::Terminated)
    ));
    assert!(matches!(
        isolated.decrypt(&r, &[0u8; 40]).await,
        Err(VaultError::Terminated)
    ));
    let err = isolated.scope_record("x").await.unwrap_err();
    assert!(err.to_string().contains("terminated"), "{err}");
    // The app is still known; new_record needs no key.
    assert_eq!(Vault::app(&isolated), APP);
    let _ = Vault::new_record(&isolated);
}

// ---- EIP-712 ----

fn word(n: u64) -> [u8; 32] {
    U256::from(n).to_be_bytes::<32>()
}

fn hand_domain_separator(chain_id: u64) -> B256 {
    let type_hash = keccak256("EIP712Domain(string name,string version,uint256 chainId)");
    let mut enc = Vec::new();
    enc.extend_from_slice(type_hash.as_slice());
    enc.extend_from_slice(keccak256("privsvc").as_slice());
    enc.extend_from_slice(keccak256("1").as_slice());
    enc.extend_from_slice(&word(chain_id));
    keccak256(enc)
}

fn hand_digest(domain: B256, struct_hash: B256) -> B256 {
    let mut enc = vec![0x19, 0x01];
    enc.extend_from_slice(domain.as_slice());
    enc.extend_from_slice(struct_hash.as_slice());
    keccak256(enc)
}

#[test]
fn proof_hash_equals_hand_built_eip712() {
    for (body, chain) in [
        (
            OwnershipProofBody {
                entity_key: B256::repeat_byte(0xab),
                challenge: "nonce-1".into(),
                verifier: "shop.example".into(),
                not_before: 1_750_000_000,
                not_after: 1_750_000_300,
            },
            None,
        ),
        (
            OwnershipProofBody {
                entity_key: B256::ZERO,
                challenge: String::new(),
                verifier: "ü".into(),
                not_before: 0,
                not_after: u64::MAX,
            },
            Some(5),
        ),
    ] {
        let type_hash = keccak256(
            "OwnershipProof(bytes32 entityKey,string challenge,string verifier,uint64 notBefore,uint64 notAfter)",
        );
        let mut enc = Vec::new();
        enc.extend_from_slice(type_hash.as_slice());
        enc.extend_from_slice(body.entity_key.as_slice());
        enc.extend_from_slice(keccak256(&body.challenge).as_slice());
        enc.extend_from_slice(keccak256(&body.verifier).as_slice());
        enc.extend_from_slice(&word(body.not_before));
        enc.extend_from_slice(&word(body.not_after));
        let expected = hand_digest(
            hand_domain_separator(chain.unwrap_or(NETWORK_CHAIN_ID)),
            keccak256(enc),
        );
        assert_eq!(proof_signing_hash(&body, chain).unwrap(), expected);
        let td = proof_typed_data(&body, chain);
        assert_eq!(td.eip712_signing_hash().unwrap(), expected);
        assert_eq!(
            td.domain.separator(),
            hand_domain_separator(chain.unwrap_or(NETWORK_CHAIN_ID))
        );
    }
}

#[test]
fn derivation_hash_equals_hand_built_eip712() {
    let type_hash = keccak256("KeyDerivation(string purpose,string app)");
    let mut enc = Vec::new();
    enc.extend_from_slice(type_hash.as_slice());
    enc.extend_from_slice(keccak256("privsvc key v1").as_slice());
    enc.extend_from_slice(keccak256("my app").as_slice());
    let expected = hand_digest(hand_domain_separator(NETWORK_CHAIN_ID), keccak256(enc));
    assert_eq!(
        derivation_typed_data("my app", None)
            .eip712_signing_hash()
            .unwrap(),
        expected
    );
    // The JSON a browser wallet receives carries the same structure.
    let json = serde_json::to_value(derivation_typed_data("my app", None)).unwrap();
    assert_eq!(json["primaryType"], "KeyDerivation");
    assert_eq!(json["message"]["purpose"], "privsvc key v1");
    assert_eq!(json["domain"]["name"], "privsvc");
    let back: TypedData = serde_json::from_value(json).unwrap();
    assert_eq!(back.eip712_signing_hash().unwrap(), expected);
}

#[test]
fn owner_signatures_are_low_s_and_recoverable() {
    let vault = vault_from_seed(4);
    let half_n = U256::from_be_slice(
        &hex::decode("7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0").unwrap(),
    );
    for i in 0..16u8 {
        let r = RecordRef([i; 16]);
        let body = OwnershipProofBody {
            entity_key: B256::repeat_byte(i),
            challenge: format!("c{i}"),
            verifier: "v".into(),
            not_before: 1,
            not_after: 2,
        };
        let sig = vault.signer(&r).unwrap().sign_proof(&body).unwrap();
        assert!(sig.s() <= half_n);
        assert!(matches!(sig.as_bytes()[64], 27 | 28));
        assert_eq!(
            proof_signer(&body, None, &sig).unwrap(),
            vault.address_of(&r).unwrap()
        );
        // A proof for another chain id does not verify as this one.
        assert_ne!(
            proof_signer(&body, Some(1), &sig).ok(),
            Some(vault.address_of(&r).unwrap())
        );
    }
}

#[test]
fn recovery_byte_form_does_not_change_the_root() {
    let mut electrum = [3u8; 65];
    electrum[64] = 28;
    let mut parity = electrum;
    parity[64] = 1;
    let a = KeyVault::from_signature(&Signature::from_raw(&electrum).unwrap(), APP);
    let b = KeyVault::from_signature(&Signature::from_raw(&parity).unwrap(), APP);
    let r = RecordRef([8; 16]);
    assert_eq!(a.address_of(&r).unwrap(), b.address_of(&r).unwrap());
    let mut other = electrum;
    other[64] = 27;
    let c = KeyVault::from_signature(&Signature::from_raw(&other).unwrap(), APP);
    assert_ne!(a.address_of(&r).unwrap(), c.address_of(&r).unwrap());
}
