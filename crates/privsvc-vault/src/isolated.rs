//! `IsolatedVault`: the keys live on a dedicated thread that answers requests over a channel
//! (the native counterpart of the JS package's `WorkerVault`, docs/API.md §3.3). No secret ever
//! leaves that thread.

use std::fmt;
use std::sync::{mpsc, Mutex};
use std::thread::JoinHandle;

use alloy_primitives::{Address, Signature};
use async_trait::async_trait;
use privsvc_attributes::Attributes;
use privsvc_envelope::EnvelopeBody;
use tokio::sync::oneshot;

use crate::error::VaultError;
use crate::key_vault::{DeriveOptions, KeyVault};
use crate::record_ref::RecordRef;
use crate::recovery::RecoveryCode;
use crate::tag::Tag;
use crate::typed_data::OwnershipProofBody;
use crate::vault::Vault;
use crate::wallet::Wallet;

/// One request to the key thread: a job run against the vault that lives there. Jobs are built
/// only inside this module and reply with public values (refs, tags, addresses, signatures,
/// ciphertexts, plaintexts the caller asked to decrypt).
type Job = Box<dyn FnOnce(&KeyVault) + Send>;

/// A vault whose keys live on a dedicated thread. [`IsolatedVault::terminate`] stops the thread
/// and wipes the keys; every later call fails with [`VaultError::Terminated`].
pub struct IsolatedVault {
    app: String,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl IsolatedVault {
    /// Asks `wallet` for the derivation signature (same checks as [`KeyVault::from_wallet`]) and
    /// derives the keys on a new key thread.
    pub async fn from_wallet(
        wallet: &dyn Wallet,
        app: &str,
        opts: &DeriveOptions,
    ) -> Result<Self, VaultError> {
        let signature = KeyVault::sign_derivation(wallet, app, opts).await?;
        Self::from_signature(&signature, app)
    }

    /// Derives the keys of a derivation signature on a new key thread.
    pub fn from_signature(signature: &Signature, app: &str) -> Result<Self, VaultError> {
        let (signature, owned_app) = (*signature, app.to_owned());
        Self::start(app, move || {
            Ok((KeyVault::from_signature(&signature, &owned_app), ()))
        })
        .map(|(vault, ())| vault)
    }

    /// A random-root vault on a new key thread, and its recovery code.
    pub fn random(app: &str) -> Result<(Self, RecoveryCode), VaultError> {
        let owned_app = app.to_owned();
        Self::start(app, move || Ok(KeyVault::random(&owned_app)))
    }

    /// Restores a random-root vault from its recovery code on a new key thread.
    pub fn from_recovery_code(code: &str, app: &str) -> Result<Self, VaultError> {
        let code = RecoveryCode::parse(code)?;
        let owned_app = app.to_owned();
        Self::start(app, move || {
            Ok((KeyVault::from_recovery(&code, &owned_app), ()))
        })
        .map(|(vault, ())| vault)
    }

    /// Moves an existing [`KeyVault`] onto a new key thread. Prefer the other constructors, which
    /// derive the keys on the key thread itself.
    pub fn spawn(vault: KeyVault) -> Result<Self, VaultError> {
        let app = vault.app().to_owned();
        Self::start(&app, move || Ok((vault, ()))).map(|(vault, ())| vault)
    }

    /// Stops the key thread (after the request it is answering, if any) and waits until the keys
    /// are wiped. Idempotent.
    pub fn terminate(&self) {
        drop(lock(&self.jobs).take());
        if let Some(handle) = lock(&self.thread).take() {
            // The thread only ends its loop and drops the vault; a panic there changes nothing
            // for the caller, whose later calls fail with `Terminated` anyway.
            let _ = handle.join();
        }
    }

    /// Whether [`IsolatedVault::terminate`] has been called.
    pub fn is_terminated(&self) -> bool {
        lock(&self.jobs).is_none()
    }

    fn start<T: Send + 'static>(
        app: &str,
        build: impl FnOnce() -> Result<(KeyVault, T), VaultError> + Send + 'static,
    ) -> Result<(Self, T), VaultError> {
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<T, VaultError>>();
        let handle = std::thread::Builder::new()
            .name("privsvc-vault".into())
            .spawn(move || {
                let vault = match build() {
                    Ok((vault, extra)) => {
                        let _ = ready_tx.send(Ok(extra));
                        vault
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                while let Ok(job) = job_rx.recv() {
                    job(&vault);
                }
            })
            .map_err(VaultError::KeyThread)?;
        let extra = ready_rx.recv().map_err(|_| VaultError::Terminated)??;
        let vault = Self {
            app: app.to_owned(),
            jobs: Mutex::new(Some(job_tx)),
            thread: Mutex::new(Some(handle)),
        };
        Ok((vault, extra))
    }

    /// Runs `work` on the key thread and awaits its answer.
    async fn call<T: Send + 'static>(
        &self,
        work: impl FnOnce(&KeyVault) -> T + Send + 'static,
    ) -> Result<T, VaultError> {
        let (reply_tx, reply_rx) = oneshot::channel();
        let job: Job = Box::new(move |vault| {
            let _ = reply_tx.send(work(vault));
        });
        {
            let jobs = lock(&self.jobs);
            let sender = jobs.as_ref().ok_or(VaultError::Terminated)?;
            sender.send(job).map_err(|_| VaultError::Terminated)?;
        }
        reply_rx.await.map_err(|_| VaultError::Terminated)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The guarded values (an optional sender or join handle) stay valid even if a holder
    // panicked, so a poisoned lock is safe to use.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Drop for IsolatedVault {
    fn drop(&mut self) {
        // Closing the channel ends the key thread, which drops (and wipes) the keys.
        drop(lock(&self.jobs).take());
    }
}

impl fmt::Debug for IsolatedVault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IsolatedVault")
            .field("app", &self.app)
            .field("terminated", &self.is_terminated())
            .finish()
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl Vault for IsolatedVault {
    fn app(&self) -> &str {
        &self.app
    }

    async fn scope_record(&self, name: &str) -> Result<RecordRef, VaultError> {
        let name = name.to_owned();
        self.call(move |v| v.scope_record(&name)).await
    }

    async fn make_tag(&self, record: &RecordRef) -> Result<Tag, VaultError> {
        let record = *record;
        self.call(move |v| v.make_tag(&record)).await
    }

    async fn open_tags(&self, tags: &[Tag]) -> Result<Vec<Option<RecordRef>>, VaultError> {
        let tags = tags.to_vec();
        self.call(move |v| v.open_tags(&tags)).await
    }

    async fn address_of(&self, record: &RecordRef) -> Result<Address, VaultError> {
        let record = *record;
        self.call(move |v| v.address_of(&record)).await?
    }

    async fn cover_scores(
        &self,
        anchor: &crate::kdf::BatchBytes,
        candidates: &[crate::kdf::BatchBytes],
    ) -> Result<Vec<[u8; 32]>, VaultError> {
        let (anchor, candidates) = (*anchor, candidates.to_vec());
        self.call(move |v| v.cover_scores(&anchor, &candidates))
            .await
    }

    async fn scan_cache_key(&self) -> Result<Option<crate::kdf::Secret32>, VaultError> {
        self.call(|v| Some(v.scan_cache_key())).await
    }

    async fn sign_envelope(
        &self,
        record: &RecordRef,
        body: &EnvelopeBody,
        attributes: &Attributes,
    ) -> Result<String, VaultError> {
        let (record, body, attributes) = (*record, body.clone(), attributes.clone());
        self.call(move |v| v.signer(&record)?.sign_envelope(&body, &attributes))
            .await?
    }

    async fn sign_proof_on_chain(
        &self,
        record: &RecordRef,
        body: &OwnershipProofBody,
        chain_id: Option<u64>,
    ) -> Result<Signature, VaultError> {
        let (record, body) = (*record, body.clone());
        self.call(move |v| v.signer(&record)?.sign_proof_on_chain(&body, chain_id))
            .await?
    }

    async fn encrypt(&self, record: &RecordRef, plaintext: &[u8]) -> Result<Vec<u8>, VaultError> {
        let (record, plaintext) = (*record, plaintext.to_vec());
        self.call(move |v| v.encrypt(&record, &plaintext)).await
    }

    async fn decrypt(&self, record: &RecordRef, data: &[u8]) -> Result<Vec<u8>, VaultError> {
        let (record, data) = (*record, data.to_vec());
        self.call(move |v| v.decrypt(&record, &data)).await?
    }
}
