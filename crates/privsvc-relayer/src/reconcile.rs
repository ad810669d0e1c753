//! Start-up reconciliation of batches stored before a crash (docs/PROTOCOL.md §7): a mined
//! transaction marks its records written; one not mined is rebroadcast unchanged (same nonce, same
//! hash), so at most one of the two can land; a reverted one goes through offender isolation.

use tokio::sync::watch;

use privsvc_ledger::PreparedTx;

use crate::batcher::{fail_record, finish_batch, isolate, Outcome};
use crate::state::RelayerState;
use crate::store::{BatchMember, StoreError, StoredRecord};

/// Reconcile every stored, unfinished batch. Runs before the scheduler takes new batches.
pub async fn reconcile(shared: &RelayerState, stop: &mut watch::Receiver<bool>) {
    let pending = match shared.store.pending_batches() {
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
    let turn = shared.writer.turn().await;
    for b in pending {
        let tx = PreparedTx {
            hash: b.tx_hash,
            nonce: b.nonce,
            raw: b.raw.clone().into(),
        };
        match finish_batch(shared, &turn, b.id, &tx, b.members.len(), false, stop).await {
            Outcome::Reverted(reason) => {
                let records = member_records(shared, &b.members).await;
                isolate(shared, &turn, records, &reason).await;
            }
            Outcome::TooBig | Outcome::Superseded => {
                // Dropped: its records are queued again in the store.
                let records = member_records(shared, &b.members).await;
                shared.requeue(records);
            }
            Outcome::Shutdown => return,
            _ => {}
        }
    }
}

/// The records of a stored batch's members that the store still holds. A member whose stored
/// fields do not parse is failed, never queued again.
async fn member_records(shared: &RelayerState, members: &[BatchMember]) -> Vec<StoredRecord> {
    let mut records = Vec::with_capacity(members.len());
    for m in members {
        match shared.store.record(&m.record_id) {
            Ok(Some(rec)) => records.push(rec),
            Ok(None) => {}
            Err(e @ StoreError::Damaged { .. }) => {
                let error = format!(
                    "the relayer's stored copy of this record is damaged ({e}); it was not written"
                );
                fail_record(shared, &m.record_id, error).await;
            }
            Err(e) => tracing::error!(error = %e, "cannot read a stored batch's record"),
        }
    }
    records
}
