//! The crates' `Wallet` and `Vault` traits over JavaScript objects, through a [`Bridge`]: a
//! wallet adapter (`signTypedData(json)`, `personalSign(bytes)`) and a vault adapter (the
//! methods of `KeyVault` / `WorkerVault`, made by `js/index.js`).

use alloy_dyn_abi::TypedData;
use alloy_primitives::{Address, Signature};
use async_trait::async_trait;
use privsvc_attributes::Attributes;
use privsvc_envelope::EnvelopeBody;
use privsvc_vault::{tag_from_text, OwnershipProofBody, RecordRef, Tag, Vault, VaultError, Wallet};
use privsvc_vault::{BatchBytes, Secret32};

use crate::bridge::{Arg, Bridge, Call, Reply, Want};
use crate::convert::{opened_from_packed, to_ref, to_signature};

/// A wallet in JavaScript.
pub struct JsWallet {
    address: Address,
    bridge: Bridge,
}

impl JsWallet {
    /// The wallet of account `address` behind `bridge`.
    pub fn new(address: Address, bridge: Bridge) -> Self {
        JsWallet { address, bridge }
    }
}

fn signature(text: Result<String, String>) -> Result<Signature, VaultError> {
    let text = text.map_err(|e| VaultError::Wallet(e.into()))?;
    to_signature("wallet signature", &text).map_err(|e| VaultError::Wallet(e.into()))
}

#[async_trait(?Send)]
impl Wallet for JsWallet {
    fn address(&self) -> Address {
        self.address
    }

    async fn sign_typed_data(&self, typed_data: &TypedData) -> Result<Signature, VaultError> {
        let json =
            serde_json::to_string(typed_data).map_err(|e| VaultError::TypedData(Box::new(e)))?;
        signature(
            self.bridge
                .string("signTypedData", vec![Arg::Str(json)])
                .await,
        )
    }

    async fn personal_sign(&self, message: &[u8]) -> Result<Signature, VaultError> {
        signature(
            self.bridge
                .string("personalSign", vec![Arg::Bytes(message.to_vec())])
                .await,
        )
    }
}

/// A vault in JavaScript (`KeyVault` or `WorkerVault`).
pub struct JsVault {
    app: String,
    bridge: Bridge,
}

impl JsVault {
    /// The vault for `app` behind `bridge`.
    pub fn new(app: String, bridge: Bridge) -> Self {
        JsVault { app, bridge }
    }
}

fn vault_err(e: String) -> VaultError {
    if e.contains("does not decrypt") {
        VaultError::DecryptionFailed
    } else {
        VaultError::Wallet(format!("vault: {e}").into())
    }
}

fn record(text: Result<String, String>) -> Result<RecordRef, VaultError> {
    let text = text.map_err(vault_err)?;
    to_ref(&text).map_err(|e| VaultError::InvalidRecordRef(e.into()))
}

#[async_trait(?Send)]
impl Vault for JsVault {
    fn app(&self) -> &str {
        &self.app
    }

    async fn scope_record(&self, name: &str) -> Result<RecordRef, VaultError> {
        record(
            self.bridge
                .string("scopeRecord", vec![Arg::Str(name.into())])
                .await,
        )
    }

    async fn make_tag(&self, r: &RecordRef) -> Result<Tag, VaultError> {
        let text = self
            .bridge
            .string("makeTag", vec![Arg::Str(r.to_hex())])
            .await
            .map_err(vault_err)?;
        tag_from_text(&text).ok_or_else(|| vault_err("makeTag answered no tag".into()))
    }

    async fn open_tags(&self, tags: &[Tag]) -> Result<Vec<Option<RecordRef>>, VaultError> {
        // One byte array of raw tags (44 bytes each) each way, no string per tag: the answer is
        // the packed form of the built-in vaults (`openTagBytes`); the JS adapter packs a custom
        // vault's answer the same way.
        let reply = self
            .bridge
            .call(Call {
                method: "openTags",
                args: vec![Arg::Bytes(tags.concat())],
                then: None,
                want: Want::Bytes,
            })
            .await
            .map_err(vault_err)?;
        match reply {
            Reply::Bytes(packed) => opened_from_packed(&packed, tags.len()).map_err(vault_err),
            _ => Err(vault_err("openTags answered no bytes".into())),
        }
    }

    /// The built-in vaults' key (`scanCacheKey`); `None` for an app's own vault, whose adapter
    /// answers no bytes.
    async fn scan_cache_key(&self) -> Result<Option<Secret32>, VaultError> {
        let Ok(mut bytes) = self.bridge.bytes("scanCacheKey", Vec::new()).await else {
            return Ok(None);
        };
        let key = <[u8; 32]>::try_from(bytes.as_slice())
            .ok()
            .map(Secret32::new);
        bytes.fill(0);
        Ok(key)
    }

    async fn address_of(&self, r: &RecordRef) -> Result<Address, VaultError> {
        let text = self
            .bridge
            .string("addressOf", vec![Arg::Str(r.to_hex())])
            .await
            .map_err(vault_err)?;
        text.parse()
            .map_err(|_| vault_err(format!("addressOf answered {text:?}")))
    }

    async fn cover_scores(
        &self,
        anchor: &BatchBytes,
        candidates: &[BatchBytes],
    ) -> Result<Vec<[u8; 32]>, VaultError> {
        let bytes = self
            .bridge
            .bytes(
                "coverScores",
                vec![Arg::Bytes(anchor.to_vec()), Arg::Bytes(candidates.concat())],
            )
            .await
            .map_err(vault_err)?;
        if bytes.len() != candidates.len() * 32 {
            return Err(vault_err("coverScores answered the wrong length".into()));
        }
        Ok(bytes
            .chunks_exact(32)
            .map(|c| {
                let mut s = [0u8; 32];
                s.copy_from_slice(c);
                s
            })
            .collect())
    }

    async fn sign_envelope(
        &self,
        r: &RecordRef,
        body: &EnvelopeBody,
        attributes: &Attributes,
    ) -> Result<String, VaultError> {
        let head = serde_json::json!({
            "app": body.app, "exp": body.exp, "hour": body.hour, "ct": body.ct, "enc": body.enc,
        });
        self.bridge
            .string(
                "signEnvelope",
                vec![
                    Arg::Str(r.to_hex()),
                    Arg::Json(head.to_string()),
                    Arg::Bytes(body.data.clone()),
                    Arg::Json(attributes.to_wire().to_string()),
                ],
            )
            .await
            .map_err(vault_err)
    }

    async fn sign_proof_on_chain(
        &self,
        r: &RecordRef,
        body: &OwnershipProofBody,
        chain_id: Option<u64>,
    ) -> Result<Signature, VaultError> {
        let json = serde_json::to_string(body).map_err(|e| VaultError::TypedData(Box::new(e)))?;
        let chain = chain_id.unwrap_or(privsvc_vault::NETWORK_CHAIN_ID) as f64;
        let text = self
            .bridge
            .string(
                "signProof",
                vec![Arg::Str(r.to_hex()), Arg::Json(json), Arg::Num(chain)],
            )
            .await
            .map_err(vault_err)?;
        to_signature("proof signature", &text).map_err(|e| vault_err(e.to_string()))
    }

    async fn encrypt(&self, r: &RecordRef, plaintext: &[u8]) -> Result<Vec<u8>, VaultError> {
        self.bridge
            .bytes(
                "encrypt",
                vec![Arg::Str(r.to_hex()), Arg::Bytes(plaintext.to_vec())],
            )
            .await
            .map_err(vault_err)
    }

    async fn decrypt(&self, r: &RecordRef, data: &[u8]) -> Result<Vec<u8>, VaultError> {
        self.bridge
            .bytes(
                "decrypt",
                vec![Arg::Str(r.to_hex()), Arg::Bytes(data.to_vec())],
            )
            .await
            .map_err(vault_err)
    }
}
