//! Key derivation errors surface as `PrivsvcError` variants a developer can act on.

use std::sync::Arc;

use alloy_dyn_abi::TypedData;
use alloy_primitives::{Address, Signature};
use async_trait::async_trait;
use k256::ecdsa::signature::hazmat::RandomizedPrehashSigner;
use k256::ecdsa::{RecoveryId, SigningKey, VerifyingKey};
use privsvc_client::{PrivateClient, PrivsvcError};
use privsvc_devnet::{Devnet, DevnetConfig};
use privsvc_ledger::LedgerReader;
use privsvc_vault::{VaultError, Wallet};

/// A wallet that signs with a random nonce (valid signatures, different every time), or claims
/// to be a contract.
struct OddWallet {
    key: SigningKey,
    contract: bool,
}

#[async_trait]
impl Wallet for OddWallet {
    fn address(&self) -> Address {
        Address::from_private_key(&self.key)
    }
    async fn sign_typed_data(&self, td: &TypedData) -> Result<Signature, VaultError> {
        let hash = td.eip712_signing_hash().unwrap();
        let sig: k256::ecdsa::Signature = self
            .key
            .sign_prehash_with_rng(&mut rand::rngs::OsRng, hash.as_slice())
            .unwrap();
        let sig = sig.normalize_s().unwrap_or(sig);
        let vk = VerifyingKey::from(&self.key);
        let recid = RecoveryId::trial_recovery_from_prehash(&vk, hash.as_slice(), &sig).unwrap();
        Ok(Signature::from((sig, recid)))
    }
    async fn personal_sign(&self, _: &[u8]) -> Result<Signature, VaultError> {
        Err(VaultError::Wallet("not used".into()))
    }
    async fn is_contract(&self) -> Result<bool, VaultError> {
        Ok(self.contract)
    }
}

#[tokio::test]
async fn wallet_problems_are_reported_clearly() {
    let node = Devnet::start(DevnetConfig::on_demand()).await.unwrap();
    let reader: Arc<dyn LedgerReader> =
        Arc::new(privsvc_ledger::RpcLedger::new(node.url()).unwrap());
    let build = |contract: bool| {
        PrivateClient::builder("notes")
            .wallet(Arc::new(OddWallet {
                key: SigningKey::random(&mut rand::rngs::OsRng),
                contract,
            }))
            .reader(reader.clone())
            .relayers(["http://127.0.0.1:9"])
            .build()
    };
    let err = build(false).await.unwrap_err();
    assert!(matches!(err, PrivsvcError::NonDeterministicWallet), "{err}");
    assert!(err.to_string().contains("deterministic"));
    let err = build(true).await.unwrap_err();
    assert!(matches!(err, PrivsvcError::SmartContractWallet), "{err}");

    // Neither wallet nor vault: refused before any ledger or relayer call.
    let err = PrivateClient::builder("notes").build().await.unwrap_err();
    assert!(
        matches!(err, PrivsvcError::Config(ref m) if m.contains("wallet")),
        "{err}"
    );
    // A vault for another app.
    let (other, _) = privsvc_vault::KeyVault::random("other");
    let err = PrivateClient::builder("notes")
        .vault(Arc::new(other))
        .reader(reader.clone())
        .relayers(["http://127.0.0.1:9"])
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(err, PrivsvcError::Config(ref m) if m.contains("other")),
        "{err}"
    );

    // A good wallet but no reachable relayer.
    let err = PrivateClient::builder("notes")
        .wallet(Arc::new(privsvc_vault::LocalWallet::random()))
        .reader(reader.clone())
        .relayers(["http://127.0.0.1:9"])
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(err, PrivsvcError::NoRelayerAvailable { .. }),
        "{err}"
    );
    node.shutdown().await;
}
