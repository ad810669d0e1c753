//! How [`RpcLedger`](super::RpcLedger) reaches its node: an [`RpcChannel`] carries one JSON-RPC
//! call or a batch and brings back the answer's bytes. [`HttpChannel`] posts them over HTTP;
//! the wasm client's channel hands them to the page's JavaScript ledger reader. Every read is
//! written once, in `RpcLedger`, over whichever channel it has.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::error::{ChannelError, LedgerError};

/// Carries JSON-RPC calls to a node and brings back the answers as bytes, undecoded (the
/// reader decodes them, a listing page straight from the bytes).
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait RpcChannel: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// One call of `method` with `params` (`id` is the request id to use, for a channel that
    /// writes the request itself): the bytes of the JSON-RPC answer (`{ result }` or
    /// `{ error }`). `Err` when the node cannot be reached.
    async fn call(
        &self,
        id: u64,
        method: &'static str,
        params: &Value,
    ) -> Result<Vec<u8>, LedgerError>;

    /// The JSON-RPC batch `body` (calls of `method`): the bytes of the answer, or `None` when
    /// this channel sends no batches (the reader then asks page by page).
    async fn batch(
        &self,
        method: &'static str,
        body: String,
    ) -> Result<Option<Vec<u8>>, LedgerError>;
}

/// JSON-RPC over HTTP: each call or batch is one `POST` to the node's URL, which gives up
/// after the timeout.
#[derive(Debug)]
pub(crate) struct HttpChannel {
    pub(crate) client: reqwest::Client,
    pub(crate) url: String,
    /// Time limit of one call (put on each request in wasm32, where the client itself has none).
    pub(crate) timeout: Duration,
}

impl HttpChannel {
    /// POSTs `body` and returns the answer's bytes. An answer with an error status that is not
    /// JSON is a [`LedgerError::Transport`] naming the status (a JSON-RPC error with an error
    /// status is the caller's to decode).
    async fn post(&self, method: &'static str, body: String) -> Result<Vec<u8>, LedgerError> {
        tracing::debug!(method, "arkiv rpc");
        let request = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        let http = |source| LedgerError::Http { method, source };
        let response = privsvc_rt::send(request, self.timeout)
            .await
            .map_err(http)?;
        let status = response.status();
        // Into a Vec without a copy when the body's buffer is its own (a listing page is large).
        let answer: Vec<u8> = response.bytes().await.map_err(|e| http(e.into()))?.into();
        if !status.is_success() && serde_json::from_slice::<serde::de::IgnoredAny>(&answer).is_err()
        {
            return Err(LedgerError::Transport(ChannelError::Status(
                status.as_u16(),
            )));
        }
        Ok(answer)
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
impl RpcChannel for HttpChannel {
    async fn call(
        &self,
        id: u64,
        method: &'static str,
        params: &Value,
    ) -> Result<Vec<u8>, LedgerError> {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.post(method, body.to_string()).await
    }

    async fn batch(
        &self,
        method: &'static str,
        body: String,
    ) -> Result<Option<Vec<u8>>, LedgerError> {
        self.post(method, body).await.map(Some)
    }
}
