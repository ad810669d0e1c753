//! What an app does besides writing and listing, as the population's apps do it today: calls the
//! lab makes on the user's behalf with the client's public functions.

use alloy_primitives::B256;
use privsvc_ledger::LedgerReader;
use privsvc_testkit::LocalStack;

use crate::scenario::APP;

/// The app verifies one of the user's records, as an app shows a record's proof of
/// authenticity: `verify_record` with the row it holds (read here by the lab's own reader, as
/// the app already has it), the form docs/API.md gives for the user's own records. The user's
/// reader `rpc` is not used: revision 4's `verifyRecord` makes only the reads it is given and
/// never queries the owner of the user's record (`verify_record_on_ledger` does, for a third
/// party; `Leaks::owner_query_on_verify` makes that query from the user's address).
pub async fn verify_own_record(stack: &LocalStack, _rpc: &dyn LedgerReader, key: B256) {
    let Ok(Some(entity)) = stack.reader().entity(key, None).await else {
        return;
    };
    let options = privsvc_client::VerifyOptions {
        app: Some(APP),
        ..privsvc_client::VerifyOptions::default()
    };
    let _ = privsvc_client::verify_record(&entity, &options);
}
