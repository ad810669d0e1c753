//! Start-up reconciliation of batches stored before a crash (docs/PROTOCOL.md §7): a mined
//! transaction marks its records written; one not mined is rebroadcast unchanged (same nonce, same
//! hash), so at most one of the two can land; a reverted one goes through offender isolation.

use tokio::sync::watch;

use privsvc_ledger::PreparedTx;

use crate::batcher::{Batcher, Outcome};
use crate::store::{BatchMember, StoreError, StoredRecord};

impl Batcher {
    /// Reconcile every stored, unfinished batch. Runs before the scheduler takes new batches.
    pub(crate) async fn reconcile(&mut self, stop: &mut watch::Receiver<bool>) {
        let pending = match self.store.pending_batches() {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "cannot read stored batches");
                return;
            }
        };
        if pending.is_empty() {
            return;
        }
        tracing::info!(batches = pending.len(), "reconciling stored batches");
        // A handle of the writer's own: the turn borrows it, not the batcher.
        let writer = self.writer.clone();
        let turn = writer.turn().await;
        for b in pending {
            let tx = PreparedTx {
                hash: b.tx_hash,
                nonce: b.nonce,
                raw: b.raw.clone().into(),
            };
            match self
                .finish_batch(&turn, b.id, &tx, b.members.len(), false, stop)
                .await
            {
                Outcome::Reverted(reason) => {
                    let records = self.member_records(&b.members).await;
                    self.isolate(&turn, records, &reason).await;
                }
                Outcome::TooBig | Outcome::Superseded => {
                    // Dropped: its records are queued again in the store.
                    let records = self.member_records(&b.members).await;
                    self.requeue(records);
                }
                Outcome::Shutdown => return,
                _ => {}
            }
        }
    }

    /// The records of a stored batch's members that the store still holds. A member whose
    /// stored fields do not parse is failed, never queued again.
    async fn member_records(&self, members: &[BatchMember]) -> Vec<StoredRecord> {
        let mut records = Vec::with_capacity(members.len());
        for m in members {
            match self.store.record(&m.record_id) {
                Ok(Some(rec)) => records.push(rec),
                Ok(None) => {}
                Err(e @ StoreError::Damaged { .. }) => {
                    let error = format!(
                        "the relayer's stored copy of this record is damaged ({e}); it was not written"
                    );
                    self.fail_record(&m.record_id, error).await;
                }
                Err(e) => tracing::error!(error = %e, "cannot read a stored batch's record"),
            }
        }
        records
    }
}
