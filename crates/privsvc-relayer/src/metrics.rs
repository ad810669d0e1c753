//! Prometheus counters (aggregates only: no ids, owners, addresses or apps in any label).
//!
//! Cover traffic is counted apart from real traffic: decoy records of mined batches
//! (`privsvc_decoys_written_total`, never in `privsvc_records_written_total` or the batch size
//! histogram) and the OHTTP gateway's dummies (`privsvc_ohttp_requests_total{kind="dummy"}`).
//! These counters are served on `METRICS_BIND` only, never in a public answer.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::retry::LedgerHealth;

/// Batch size histogram bucket bounds.
const SIZE_BUCKETS: [u64; 8] = [1, 2, 5, 10, 20, 50, 100, 200];
/// Statuses counted for `POST /v1/records`.
const STATUSES: [u16; 7] = [202, 400, 402, 403, 413, 429, 503];

/// The relayer's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    submissions: [AtomicU64; STATUSES.len()],
    batches: AtomicU64,
    batched_records: AtomicU64,
    size_buckets: [AtomicU64; SIZE_BUCKETS.len()],
    ledger_errors: AtomicU64,
    written: AtomicU64,
    failed: AtomicU64,
    heartbeats: AtomicU64,
    decoys: AtomicU64,
    /// The OHTTP gateway (with `OHTTP=on`), whose real and dummy requests are counted.
    gateway: Option<Arc<privsvc_ohttp::OhttpGateway>>,
    /// The ledger's health as the relayer's calls see it (shared with the retrying wrappers).
    pub ledger: Arc<LedgerHealth>,
}

impl Metrics {
    /// Counters at zero, reporting `ledger` as the ledger's health.
    pub fn with_ledger(ledger: Arc<LedgerHealth>) -> Self {
        Self {
            ledger,
            ..Self::default()
        }
    }
    /// The same counters, also reporting `gateway`'s real and dummy requests.
    pub fn with_gateway(mut self, gateway: Option<Arc<privsvc_ohttp::OhttpGateway>>) -> Self {
        self.gateway = gateway;
        self
    }
    /// Count the decoys of a mined batch.
    pub fn decoys_written(&self, n: usize) {
        self.decoys.fetch_add(n as u64, Ordering::Relaxed);
    }
    /// Count one answer to `POST /v1/records`.
    pub fn submission(&self, status: u16) {
        if let Some(i) = STATUSES.iter().position(|s| *s == status) {
            self.submissions[i].fetch_add(1, Ordering::Relaxed);
        }
    }
    /// Count one mined batch of `size` records.
    pub fn batch(&self, size: usize) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.batched_records
            .fetch_add(size as u64, Ordering::Relaxed);
        for (i, b) in SIZE_BUCKETS.iter().enumerate() {
            if size as u64 <= *b {
                self.size_buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    /// Count a ledger error.
    pub fn ledger_error(&self) {
        self.ledger_errors.fetch_add(1, Ordering::Relaxed);
    }
    /// Count records written.
    pub fn written(&self, n: usize) {
        self.written.fetch_add(n as u64, Ordering::Relaxed);
    }
    /// Count records failed.
    pub fn failed(&self, n: usize) {
        self.failed.fetch_add(n as u64, Ordering::Relaxed);
    }
    /// Count a published heartbeat.
    pub fn heartbeat(&self) {
        self.heartbeats.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition, with the current queue length.
    pub fn render(&self, queue_len: usize) -> String {
        let mut out = String::new();
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "# HELP privsvc_queue_length Records waiting for a batch."
        );
        let _ = writeln!(out, "# TYPE privsvc_queue_length gauge");
        let _ = writeln!(out, "privsvc_queue_length {queue_len}");
        let _ = writeln!(
            out,
            "# HELP privsvc_submissions_total Answers to POST /v1/records by status."
        );
        let _ = writeln!(out, "# TYPE privsvc_submissions_total counter");
        for (i, s) in STATUSES.iter().enumerate() {
            let _ = writeln!(
                out,
                "privsvc_submissions_total{{status=\"{s}\"}} {}",
                l(&self.submissions[i])
            );
        }
        let _ = writeln!(
            out,
            "# HELP privsvc_batches_total Batch transactions mined."
        );
        let _ = writeln!(out, "# TYPE privsvc_batches_total counter");
        let _ = writeln!(out, "privsvc_batches_total {}", l(&self.batches));
        let _ = writeln!(out, "# HELP privsvc_batch_size Records per mined batch.");
        let _ = writeln!(out, "# TYPE privsvc_batch_size histogram");
        for (i, b) in SIZE_BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "privsvc_batch_size_bucket{{le=\"{b}\"}} {}",
                l(&self.size_buckets[i])
            );
        }
        let _ = writeln!(
            out,
            "privsvc_batch_size_bucket{{le=\"+Inf\"}} {}",
            l(&self.batches)
        );
        let _ = writeln!(out, "privsvc_batch_size_sum {}", l(&self.batched_records));
        let _ = writeln!(out, "privsvc_batch_size_count {}", l(&self.batches));
        let _ = writeln!(
            out,
            "# HELP privsvc_records_written_total Records written to the ledger."
        );
        let _ = writeln!(out, "# TYPE privsvc_records_written_total counter");
        let _ = writeln!(out, "privsvc_records_written_total {}", l(&self.written));
        let _ = writeln!(out, "# HELP privsvc_records_failed_total Records failed.");
        let _ = writeln!(out, "# TYPE privsvc_records_failed_total counter");
        let _ = writeln!(out, "privsvc_records_failed_total {}", l(&self.failed));
        let _ = writeln!(
            out,
            "# HELP privsvc_ledger_errors_total Failed ledger calls."
        );
        let _ = writeln!(out, "# TYPE privsvc_ledger_errors_total counter");
        let _ = writeln!(
            out,
            "privsvc_ledger_errors_total {}",
            l(&self.ledger_errors)
        );
        let _ = writeln!(
            out,
            "# HELP privsvc_ledger_consecutive_failures Failed ledger calls in a row (0 after any success)."
        );
        let _ = writeln!(out, "# TYPE privsvc_ledger_consecutive_failures gauge");
        let _ = writeln!(
            out,
            "privsvc_ledger_consecutive_failures {}",
            self.ledger.consecutive_failures()
        );
        let _ = writeln!(
            out,
            "# HELP privsvc_ledger_failing 1 while the last calls to the ledger all failed."
        );
        let _ = writeln!(out, "# TYPE privsvc_ledger_failing gauge");
        let _ = writeln!(
            out,
            "privsvc_ledger_failing {}",
            u8::from(self.ledger.failing())
        );
        let _ = writeln!(
            out,
            "# HELP privsvc_ledger_call_failures_total Ledger calls that failed (each try)."
        );
        let _ = writeln!(out, "# TYPE privsvc_ledger_call_failures_total counter");
        let _ = writeln!(
            out,
            "privsvc_ledger_call_failures_total {}",
            self.ledger.failed_calls()
        );
        let _ = writeln!(
            out,
            "# HELP privsvc_ledger_retries_total Ledger calls retried after a transient failure."
        );
        let _ = writeln!(out, "# TYPE privsvc_ledger_retries_total counter");
        let _ = writeln!(
            out,
            "privsvc_ledger_retries_total {}",
            self.ledger.retries()
        );
        let _ = writeln!(
            out,
            "# HELP privsvc_decoys_written_total Decoy records of mined batches (not in records written or batch sizes)."
        );
        let _ = writeln!(out, "# TYPE privsvc_decoys_written_total counter");
        let _ = writeln!(out, "privsvc_decoys_written_total {}", l(&self.decoys));
        if let Some(gateway) = &self.gateway {
            let _ = writeln!(
                out,
                "# HELP privsvc_ohttp_requests_total Requests opened by the OHTTP gateway: dispatched (real) or answered as dummies."
            );
            let _ = writeln!(out, "# TYPE privsvc_ohttp_requests_total counter");
            let _ = writeln!(
                out,
                "privsvc_ohttp_requests_total{{kind=\"real\"}} {}",
                gateway.real_requests()
            );
            let _ = writeln!(
                out,
                "privsvc_ohttp_requests_total{{kind=\"dummy\"}} {}",
                gateway.dummies_answered()
            );
        }
        let _ = writeln!(out, "# HELP privsvc_heartbeats_total Heartbeats published.");
        let _ = writeln!(out, "# TYPE privsvc_heartbeats_total counter");
        let _ = writeln!(out, "privsvc_heartbeats_total {}", l(&self.heartbeats));
        out
    }
}
