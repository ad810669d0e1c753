//! The durable queue: one SQLite file in WAL mode with `synchronous = FULL`.
//!
//! Every write goes through ONE writer thread that drains whatever commands are waiting and
//! commits them in one transaction (group commit: concurrent submissions share one fsync); each
//! caller gets its answer on a oneshot channel only after the commit. Each command runs in its own
//! savepoint, so one failing command does not undo the others. Token ids have a PRIMARY KEY, so a
//! token is accepted once even under concurrency. Reads use a second connection.
//!
//! Idempotence (docs/PROTOCOL.md §7): every record carries the SHA-256 of its sealed envelope in a
//! UNIQUE column. An insert whose envelope is already stored stores nothing, spends no token and
//! returns [`StoreError::AlreadyStored`] with the existing id; the writer thread checks this before
//! the token, so two identical submissions in one group commit also yield one record.
//!
//! Files: the data directory is created 0700 and the database (which holds spent token ids)
//! 0600 before SQLite opens it (SQLite gives its `-wal` and `-shm` files the database's mode);
//! `secure_delete` is on, so pruned rows are overwritten with zeros.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use alloy_primitives::{Address, B256};
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::oneshot;

/// Storage failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite refused an operation.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The token of a submission was already spent.
    #[error("token already spent")]
    TokenSpent,
    /// The group transaction could not be committed (nothing of it was stored); the source is
    /// the group's failure (SQLite's error, or the first storage failure of a command in it),
    /// shared by every command of the group.
    #[error("commit failed: {0}")]
    Commit(#[source] Arc<StoreError>),
    /// SQLite rolled the group transaction back without another error to name.
    #[error("the transaction was rolled back")]
    RolledBack,
    /// The writer thread has stopped.
    #[error("the store's writer thread has stopped")]
    Closed,
    /// The data directory could not be created.
    #[error("cannot create data directory {0}: {1}")]
    DataDir(PathBuf, std::io::Error),
    /// The same sealed envelope is already stored, as the record with this id.
    #[error("this envelope was already accepted as record {0}")]
    AlreadyStored(String),
    /// SQLite found the database file damaged (at open or by `PRAGMA quick_check`).
    #[error(
        "the queue database {} is damaged ({source}); the relayer does not start on it. Stop \
         it, move {} and its -wal and -shm files aside (keep them for inspection) and start on \
         an empty DATA_DIR: the records still queued in the damaged file are not written (their \
         clients resubmit them after their deadline), and its statuses and spent token ids are \
         forgotten",
        path.display(),
        path.display()
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite reported.
        #[source]
        source: CorruptionError,
    },
    /// A stored field does not parse: the file was damaged in a way SQLite cannot see.
    #[error("stored {item}: {field} does not parse ({detail}); the database may be damaged")]
    Damaged {
        /// The record (`record <id>`, or `record at row <rowid>` when its id is unreadable) or
        /// the batch (`batch <id>`) whose field it is.
        item: String,
        /// The field (column).
        field: &'static str,
        /// Why it does not parse.
        detail: String,
    },
}

impl StoreError {
    /// Whether this is the storage failing (disk full, I/O error, read-only or damaged file),
    /// as opposed to a refusal of one command (a spent token, an envelope stored already).
    pub fn is_storage_failure(&self) -> bool {
        use rusqlite::ErrorCode as C;
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => matches!(
                e.code,
                C::DiskFull
                    | C::SystemIoFailure
                    | C::ReadOnly
                    | C::CannotOpen
                    | C::DatabaseCorrupt
                    | C::NotADatabase
                    | C::PermissionDenied
                    | C::OutOfMemory
            ),
            StoreError::Commit(_)
            | StoreError::RolledBack
            | StoreError::Closed
            | StoreError::DataDir(..) => true,
            StoreError::Corrupt { .. } => true,
            _ => false,
        }
    }
}

/// How SQLite found a queue database damaged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CorruptionError {
    /// SQLite's error while opening, checking or migrating the file (a damaged file, or not a
    /// database).
    #[error("{step}: {source}")]
    Sqlite {
        /// What was being done (`open`, `PRAGMA quick_check`, `schema`, `migration`).
        step: &'static str,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// `PRAGMA quick_check` answered with problems instead of `ok`.
    #[error("PRAGMA quick_check: {}{}", .problems.join("; "), more_text(*.more))]
    QuickCheck {
        /// The first problems, in SQLite's words (at most five).
        problems: Vec<String>,
        /// How many more it reported.
        more: usize,
    },
}

fn more_text(more: usize) -> String {
    if more == 0 {
        String::new()
    } else {
        format!("; and {more} more")
    }
}

/// A token spent by a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpentToken {
    /// tokenId (SHA-256 of the token message).
    pub id: [u8; 32],
    /// The token's epoch (UTC day).
    pub epoch: u64,
}

/// An accepted record, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// Record id (UUID v4 text).
    pub id: String,
    /// Arrival order.
    pub seq: u64,
    /// The app.
    pub app: String,
    /// The record's `project` attribute as its wire JSON (`{"type":..,"value":..}`): the
    /// records that count toward its minAnonymity (see `crate::project::project_key`).
    pub project: String,
    /// SHA-256 of the sealed envelope (UNIQUE in the store).
    pub envelope_digest: [u8; 32],
    /// The one-time owner.
    pub owner: Address,
    /// The sealed envelope text (padded).
    pub envelope: Vec<u8>,
    /// The attributes in wire form (`{name: {type, value}}` JSON text).
    pub attributes: String,
    /// Lifetime in seconds.
    pub exp_seconds: u64,
    /// Smallest batch the record may join.
    pub min_anonymity: u32,
    /// How long the record may be held for `min_anonymity` (ms).
    pub max_hold_ms: u64,
    /// The token it spent, if any.
    pub token: Option<SpentToken>,
    /// Acceptance time on the relayer's timeline (ms: monotonic, continued across restarts;
    /// `clock::Timeline`), which the batch window and the hold count from.
    pub accepted_ms: u64,
}

/// The queued records that load, and the rows (rowid, error) of those whose fields do not.
pub type Queued = (Vec<StoredRecord>, Vec<(i64, StoreError)>);

/// Where a written record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenInfo {
    /// The entity key.
    pub entity_key: B256,
    /// The batch transaction.
    pub tx_hash: B256,
    /// The including block.
    pub block: u64,
    /// Records of the same project in the batch.
    pub batch_size: u64,
}

/// The stored state of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredState {
    /// Waiting for a batch.
    Queued,
    /// Part of a batch transaction that has been stored and may be in flight.
    Sending,
    /// On the ledger.
    Written(WrittenInfo),
    /// Given up, with a reason.
    Failed(String),
}

/// One record of a batch, with its predicted key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchMember {
    /// The record id.
    pub record_id: String,
    /// The salt of its create.
    pub salt: u128,
    /// The key predicted from the entity nonce.
    pub entity_key: B256,
}

/// A batch transaction stored before it is broadcast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBatch {
    /// Row id.
    pub id: i64,
    /// The account nonce of the transaction.
    pub nonce: u64,
    /// The transaction hash.
    pub tx_hash: B256,
    /// The signed transaction.
    pub raw: Vec<u8>,
    /// The records, in create order.
    pub members: Vec<BatchMember>,
}

/// One request to the store's writer thread, with the channel its answer goes back on.
enum StoreCommand {
    Insert(
        Box<StoredRecord>,
        oneshot::Sender<Result<Box<StoredRecord>, StoreError>>,
    ),
    SaveBatch {
        nonce: u64,
        tx_hash: B256,
        raw: Vec<u8>,
        members: Vec<BatchMember>,
        now_ms: u64,
        reply: oneshot::Sender<Result<i64, StoreError>>,
    },
    BatchWritten {
        batch_id: i64,
        tx_hash: B256,
        block: u64,
        now_ms: u64,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    BatchDropped {
        batch_id: i64,
        now_ms: u64,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    SetRecord {
        id: String,
        state: StoredState,
        now_ms: u64,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    SetMeta(String, String, oneshot::Sender<Result<(), StoreError>>),
    FailRow {
        rowid: i64,
        error: String,
        now_ms: u64,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    Fault(StoreFault, oneshot::Sender<Result<(), StoreError>>),
    Prune {
        before_ms: u64,
        min_epoch: u64,
        reply: oneshot::Sender<Result<usize, StoreError>>,
    },
}

/// A fault the tests put on the writer's connection (`Relayer::set_store_fault`), with
/// SQLite's own mechanisms, never a fake error.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFault {
    /// No fault: writes as usual.
    None,
    /// The database may not grow past its current size (`PRAGMA max_page_count`): a write that
    /// needs a new page fails with SQLITE_FULL ("database or disk is full"), as on a full disk.
    Full,
    /// Every write fails (`PRAGMA query_only`), as on a file that became read-only.
    ReadOnly,
}

/// Whether the writer thread's last writes worked, for the health record.
#[derive(Debug, Default)]
struct WriteHealth {
    /// The last storage failure, until a later commit that changed something succeeds.
    failure: Mutex<Option<String>>,
}

impl WriteHealth {
    fn failed(&self, why: String) {
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
    }

    fn wrote(&self) {
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Handle to the store (cheap to share behind an `Arc`).
pub struct Store {
    tx: Mutex<mpsc::Sender<StoreCommand>>,
    read: Mutex<Connection>,
    path: PathBuf,
    /// Group commits so far (read by the tests).
    #[cfg_attr(not(test), allow(dead_code))]
    commits: Arc<AtomicU64>,
    writes: Arc<WriteHealth>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS records(
  id TEXT PRIMARY KEY, seq INTEGER NOT NULL, app TEXT NOT NULL, owner TEXT NOT NULL,
  envelope BLOB NOT NULL, attributes TEXT NOT NULL, exp_seconds INTEGER NOT NULL,
  min_anonymity INTEGER NOT NULL, max_hold_ms INTEGER NOT NULL,
  token_id BLOB, token_epoch INTEGER, accepted_ms INTEGER NOT NULL,
  state TEXT NOT NULL, batch_id INTEGER, entity_key TEXT, tx_hash TEXT, block INTEGER,
  batch_size INTEGER, error TEXT, finished_ms INTEGER, project TEXT, envelope_digest BLOB);
CREATE INDEX IF NOT EXISTS records_batch ON records(batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_finished ON records(finished_ms) WHERE finished_ms IS NOT NULL;
CREATE TABLE IF NOT EXISTS spent_tokens(
  token_id BLOB PRIMARY KEY, epoch INTEGER NOT NULL, record_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches(
  id INTEGER PRIMARY KEY AUTOINCREMENT, nonce INTEGER NOT NULL, tx_hash TEXT NOT NULL,
  raw BLOB NOT NULL, state TEXT NOT NULL, created_ms INTEGER NOT NULL, block INTEGER,
  finished_ms INTEGER);
CREATE TABLE IF NOT EXISTS batch_members(
  batch_id INTEGER NOT NULL, idx INTEGER NOT NULL, record_id TEXT NOT NULL,
  salt TEXT NOT NULL, entity_key TEXT NOT NULL, PRIMARY KEY(batch_id, idx));
CREATE INDEX IF NOT EXISTS batch_members_record ON batch_members(batch_id, record_id);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
";

/// Schema version written to `meta` once [`migrate`] has run.
const SCHEMA_VERSION: &str = "2";

fn open(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(|e| damaged_file(path, "open", e))?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(|e| damaged_file(path, "open", e))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "cache_size", -16_000)?;
    conn.pragma_update(None, "secure_delete", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(conn)
}

/// [`StoreError::Corrupt`] naming `path` when SQLite says the file is damaged or not a
/// database during `step`, else the error as it is.
fn damaged_file(path: &Path, step: &'static str, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode as C;
    match e.sqlite_error_code() {
        Some(C::DatabaseCorrupt) | Some(C::NotADatabase) => StoreError::Corrupt {
            path: path.to_path_buf(),
            source: CorruptionError::Sqlite { step, source: e },
        },
        _ => StoreError::Sqlite(e),
    }
}

/// Most lines of `PRAGMA quick_check`'s answer kept in the error.
const QUICK_CHECK_LINES: usize = 5;

/// `PRAGMA quick_check`: every b-tree page and index entry well formed (a full scan, O(size)).
/// A damaged file is [`StoreError::Corrupt`]. It cannot see a changed byte inside a value:
/// the stored fields are checked as they are read, and each envelope against its digest and
/// signature before it is written (`crate::validate::verify_stored`).
fn quick_check(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let lines: Vec<String> = conn
        .prepare("PRAGMA quick_check")
        .and_then(|mut stmt| {
            stmt.query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<_, _>>()
        })
        .map_err(|e| damaged_file(path, "PRAGMA quick_check", e))?;
    if lines.len() == 1 && lines[0] == "ok" {
        return Ok(());
    }
    let more = lines.len().saturating_sub(QUICK_CHECK_LINES);
    let mut problems = lines;
    problems.truncate(QUICK_CHECK_LINES);
    Err(StoreError::Corrupt {
        path: path.to_path_buf(),
        source: CorruptionError::QuickCheck { problems, more },
    })
}

/// SHA-256 of a sealed envelope's bytes: the record's identity for idempotence. Envelopes are
/// canonical and minimally padded, so one signed envelope has exactly one byte string.
pub fn envelope_sha256(envelope: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(envelope).into()
}

/// Create `dir` (and missing parents) with mode 0700, and tighten it to 0700 if it exists.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// Create `path` with mode 0600 if missing, and tighten it (and its SQLite `-wal`/`-shm`
/// companions, when present) to 0600.
fn private_file(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        let mut companions = vec![path.to_path_buf()];
        for suffix in ["-wal", "-shm"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            companions.push(PathBuf::from(name));
        }
        for p in companions {
            match std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// Bring a database of an earlier version to [`SCHEMA_VERSION`]: add the `project` and
/// `envelope_digest` columns, fill them from the stored attributes and envelopes, and create the
/// UNIQUE index. A queued copy of an envelope stored earlier (possible before version 2) is
/// failed with a message naming the record that holds it, so it is never written twice.
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if version.as_deref() == Some(SCHEMA_VERSION) {
        return Ok(());
    }
    let tx = conn.transaction()?;
    let columns: Vec<String> = tx
        .prepare("PRAGMA table_info(records)")?
        .query_map([], |r| r.get::<_, String>(1))?
        .collect::<Result<_, _>>()?;
    for (name, kind) in [("project", "TEXT"), ("envelope_digest", "BLOB")] {
        if !columns.iter().any(|c| c == name) {
            tx.execute_batch(&format!("ALTER TABLE records ADD COLUMN {name} {kind}"))?;
        }
    }
    let rows: Vec<(String, Vec<u8>, String, String)> = tx
        .prepare(
            "SELECT id, envelope, attributes, state FROM records
             WHERE envelope_digest IS NULL ORDER BY seq",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_, _>>()?;
    // The store reads the clock itself: it depends on no other module's state.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    for (id, envelope, attributes, state) in rows {
        let digest = envelope_sha256(&envelope);
        let project = crate::project::project_key_of_wire(&attributes);
        let first: Option<String> = tx
            .query_row(
                "SELECT id FROM records WHERE envelope_digest = ?1",
                [digest.as_slice()],
                |r| r.get(0),
            )
            .optional()?;
        match first {
            None => tx.execute(
                "UPDATE records SET project = ?2, envelope_digest = ?3 WHERE id = ?1",
                params![id, project, digest.as_slice()],
            )?,
            Some(first) if state == "queued" => tx.execute(
                "UPDATE records SET project = ?2, state = 'failed', error = ?3, finished_ms = ?4
                 WHERE id = ?1",
                params![
                    id,
                    project,
                    format!("the same envelope was accepted earlier as record {first}"),
                    now
                ],
            )?,
            Some(_) => tx.execute(
                "UPDATE records SET project = ?2 WHERE id = ?1",
                params![id, project],
            )?,
        };
    }
    tx.execute_batch(
        "CREATE UNIQUE INDEX IF NOT EXISTS records_digest ON records(envelope_digest)",
    )?;
    tx.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?1)",
        [SCHEMA_VERSION],
    )?;
    tx.commit()?;
    Ok(())
}

impl Store {
    /// Open (or create) `relayer.sqlite` in `data_dir` (created 0700; the database 0600) and
    /// start the writer thread. A database of an earlier version is migrated. A file SQLite
    /// finds damaged (at open, or by `PRAGMA quick_check`) is [`StoreError::Corrupt`].
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        private_dir(data_dir).map_err(|e| StoreError::DataDir(data_dir.to_path_buf(), e))?;
        let path = data_dir.join("relayer.sqlite");
        private_file(&path).map_err(|e| StoreError::DataDir(path.clone(), e))?;
        let mut writer = open(&path)?;
        quick_check(&writer, &path)?;
        writer
            .execute_batch(SCHEMA)
            .map_err(|e| damaged_file(&path, "schema", e))?;
        migrate(&mut writer).map_err(|e| match e {
            StoreError::Sqlite(e) => damaged_file(&path, "migration", e),
            other => other,
        })?;
        let read = open(&path)?;
        let (tx, rx) = mpsc::channel();
        let commits = Arc::new(AtomicU64::new(0));
        let counter = commits.clone();
        let writes = Arc::new(WriteHealth::default());
        let health = writes.clone();
        std::thread::Builder::new()
            .name("privsvc-store".into())
            .spawn(move || writer_loop(writer, rx, &counter, &health))
            .map_err(|e| StoreError::DataDir(data_dir.to_path_buf(), e))?;
        Ok(Self {
            tx: Mutex::new(tx),
            read: Mutex::new(read),
            path,
            commits,
            writes,
        })
    }

    #[cfg(test)]
    /// Transactions committed so far (each one fsync; concurrent commands share one).
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn send(&self, cmd: StoreCommand) -> Result<(), StoreError> {
        self.tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(cmd)
            .map_err(|_| StoreError::Closed)
    }

    /// Send the command that `cmd` builds around a reply channel and wait for the writer
    /// thread's answer.
    async fn request<T>(
        &self,
        cmd: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> StoreCommand,
    ) -> Result<T, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(cmd(reply))?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Durably store an accepted record (and its token id), then hand it back. Fails with
    /// [`StoreError::AlreadyStored`] (nothing stored, no token spent) when its envelope is
    /// stored already, and with [`StoreError::TokenSpent`] when the token was spent before.
    pub async fn insert(&self, record: StoredRecord) -> Result<StoredRecord, StoreError> {
        self.request(|reply| StoreCommand::Insert(Box::new(record), reply))
            .await
            .map(|b| *b)
    }

    /// Store a batch transaction (before broadcasting it) and mark its records as sending.
    pub async fn save_batch(
        &self,
        nonce: u64,
        tx_hash: B256,
        raw: Vec<u8>,
        members: Vec<BatchMember>,
        now_ms: u64,
    ) -> Result<i64, StoreError> {
        self.request(|reply| StoreCommand::SaveBatch {
            nonce,
            tx_hash,
            raw,
            members,
            now_ms,
            reply,
        })
        .await
    }

    /// Mark a batch mined: every member record becomes written.
    pub async fn batch_written(
        &self,
        batch_id: i64,
        tx_hash: B256,
        block: u64,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.request(|reply| StoreCommand::BatchWritten {
            batch_id,
            tx_hash,
            block,
            now_ms,
            reply,
        })
        .await
    }

    /// Mark a batch as not landed; its records that are still sending go back to the queue.
    pub async fn batch_dropped(&self, batch_id: i64, now_ms: u64) -> Result<(), StoreError> {
        self.request(|reply| StoreCommand::BatchDropped {
            batch_id,
            now_ms,
            reply,
        })
        .await
    }

    /// Set one record's state (written or failed stamps the finish time).
    pub async fn set_record(
        &self,
        id: &str,
        state: StoredState,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.request(|reply| StoreCommand::SetRecord {
            id: id.to_string(),
            state,
            now_ms,
            reply,
        })
        .await
    }

    /// Set a metadata value.
    pub async fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.request(|reply| StoreCommand::SetMeta(key.into(), value.into(), reply))
            .await
    }

    /// Delete statuses of records finished before `before_ms`, finished batches of that age and
    /// spent tokens of epochs before `min_epoch`. Returns the number of records deleted.
    pub async fn prune(&self, before_ms: u64, min_epoch: u64) -> Result<usize, StoreError> {
        self.request(|reply| StoreCommand::Prune {
            before_ms,
            min_epoch,
            reply,
        })
        .await
    }

    fn reader(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.read.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The queued records (not in a batch), oldest first, and the rows of queued records whose
    /// fields do not parse (rowid and error; see [`Store::fail_row`]).
    pub fn load_queued(&self) -> Result<Queued, StoreError> {
        let conn = self.reader();
        let mut stmt = conn.prepare(&format!(
            "SELECT {RECORD_COLUMNS} FROM records WHERE state = 'queued' ORDER BY seq"
        ))?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, row_to_record(r))))?;
        let mut records = Vec::new();
        let mut damaged = Vec::new();
        for row in rows {
            match row? {
                (_, Ok(rec)) => records.push(rec),
                (rowid, Err(e)) => damaged.push((rowid, e)),
            }
        }
        Ok((records, damaged))
    }

    /// One record by id; [`StoreError::Damaged`] when a field of it does not parse.
    pub fn record(&self, id: &str) -> Result<Option<StoredRecord>, StoreError> {
        let conn = self.reader();
        conn.query_row(
            &format!("SELECT {RECORD_COLUMNS} FROM records WHERE id = ?1"),
            [id],
            |r| Ok(row_to_record(r)),
        )
        .optional()?
        .transpose()
    }

    /// The id of the record whose sealed envelope has this SHA-256, if one is stored.
    pub fn id_of_envelope(&self, digest: &[u8; 32]) -> Result<Option<String>, StoreError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached("SELECT id FROM records WHERE envelope_digest = ?1")?;
        Ok(stmt
            .query_row([digest.as_slice()], |r| r.get(0))
            .optional()?)
    }

    /// The stored state of a record, `None` when unknown (or pruned); [`StoreError::Damaged`]
    /// when a field of it does not parse (never a default value).
    pub fn state(&self, id: &str) -> Result<Option<StoredState>, StoreError> {
        let conn = self.reader();
        conn.query_row(
            "SELECT state, entity_key, tx_hash, block, batch_size, error FROM records
             WHERE id = ?1",
            [id],
            |r| Ok(row_to_state(r, id)),
        )
        .optional()?
        .transpose()
    }

    /// The written state of each record of mined batch `batch_id` that the store still has as
    /// sending, read without writing (for statuses while the store cannot record the batch).
    pub fn mined_members(
        &self,
        batch_id: i64,
        tx_hash: B256,
        block: u64,
    ) -> Result<Vec<(String, WrittenInfo)>, StoreError> {
        let conn = self.reader();
        let mut stmt = conn.prepare(
            "SELECT m.record_id, m.entity_key,
                    (SELECT COUNT(*) FROM records peer
                     WHERE peer.batch_id = ?1 AND peer.project IS r.project)
             FROM batch_members m JOIN records r ON r.id = m.record_id
             WHERE m.batch_id = ?1 AND r.batch_id = ?1 AND r.state = 'sending'",
        )?;
        let rows = stmt.query_map([batch_id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, key, peers) = row?;
            let entity_key = parse_hash(&key).map_err(|detail| StoreError::Damaged {
                item: format!("batch {batch_id}"),
                field: "entity_key",
                detail,
            })?;
            out.push((
                id,
                WrittenInfo {
                    entity_key,
                    tx_hash,
                    block,
                    batch_size: u64::try_from(peers).unwrap_or(0),
                },
            ));
        }
        Ok(out)
    }

    /// The last storage failure of the writer (disk full, I/O error, read-only file), until a
    /// later write succeeds; `None` while writes work.
    pub fn write_failure(&self) -> Option<String> {
        self.writes.failure()
    }

    /// Mark the record at `rowid` failed with `error` (a queued record whose stored fields do
    /// not parse: it may have no readable id).
    pub async fn fail_row(&self, rowid: i64, error: String, now_ms: u64) -> Result<(), StoreError> {
        self.request(|reply| StoreCommand::FailRow {
            rowid,
            error,
            now_ms,
            reply,
        })
        .await
    }

    /// Put `fault` on the writer's connection (tests: `Relayer::set_store_fault`).
    pub async fn set_fault(&self, fault: StoreFault) -> Result<(), StoreError> {
        self.request(|reply| StoreCommand::Fault(fault, reply))
            .await
    }

    #[cfg(test)]
    /// Whether a token id is already spent here.
    pub fn token_spent(&self, token_id: &[u8; 32]) -> Result<bool, StoreError> {
        let conn = self.reader();
        Ok(conn
            .query_row(
                "SELECT 1 FROM spent_tokens WHERE token_id = ?1",
                [token_id.as_slice()],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Token ids spent here for the given epochs.
    pub fn spent_tokens(&self, epochs: &[u64]) -> Result<Vec<[u8; 32]>, StoreError> {
        let conn = self.reader();
        let mut out = Vec::new();
        let mut stmt = conn.prepare("SELECT token_id FROM spent_tokens WHERE epoch = ?1")?;
        for e in epochs {
            let rows = stmt.query_map([*e as i64], |r| r.get::<_, Vec<u8>>(0))?;
            for id in rows {
                let id = id?;
                if let Ok(a) = <[u8; 32]>::try_from(id.as_slice()) {
                    out.push(a);
                }
            }
        }
        Ok(out)
    }

    /// Batches stored but not finished (in doubt after a restart), oldest first.
    pub fn pending_batches(&self) -> Result<Vec<StoredBatch>, StoreError> {
        let conn = self.reader();
        let mut stmt = conn.prepare(
            "SELECT id, nonce, tx_hash, raw FROM batches WHERE state = 'pending' ORDER BY id",
        )?;
        let batches = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Vec<u8>>(3)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = Vec::new();
        let mut mstmt = conn.prepare(
            "SELECT record_id, salt, entity_key FROM batch_members WHERE batch_id = ?1
             ORDER BY idx",
        )?;
        for (id, nonce, tx, raw) in batches {
            let damaged = |field: &'static str, detail: String| StoreError::Damaged {
                item: format!("batch {id}"),
                field,
                detail,
            };
            let rows = mstmt
                .query_map([id], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            let mut members = Vec::with_capacity(rows.len());
            for (record_id, salt, key) in rows {
                members.push(BatchMember {
                    record_id,
                    salt: salt
                        .parse()
                        .map_err(|e| damaged("salt", format!("not a number: {e}")))?,
                    entity_key: parse_hash(&key).map_err(|e| damaged("entity_key", e))?,
                });
            }
            out.push(StoredBatch {
                id,
                nonce: u64::try_from(nonce).map_err(|e| damaged("nonce", e.to_string()))?,
                tx_hash: parse_hash(&tx).map_err(|e| damaged("tx_hash", e))?,
                raw,
                members,
            });
        }
        Ok(out)
    }

    /// A metadata value.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        let conn = self.reader();
        Ok(conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    }

    /// The largest sequence number stored (0 when empty).
    pub fn max_seq(&self) -> Result<u64, StoreError> {
        let conn = self.reader();
        let v: Option<i64> = conn.query_row("SELECT MAX(seq) FROM records", [], |r| r.get(0))?;
        Ok(v.unwrap_or(0) as u64)
    }

    /// How many records are in a stored batch transaction that may be in flight (state
    /// `sending`), as a restart finds them.
    pub fn count_sending(&self) -> Result<u64, StoreError> {
        let conn = self.reader();
        let v: i64 = conn.query_row(
            "SELECT COUNT(*) FROM records WHERE state = 'sending'",
            [],
            |r| r.get(0),
        )?;
        Ok(v as u64)
    }
}

/// The columns [`row_to_record`] reads, rowid first.
const RECORD_COLUMNS: &str = "rowid, id, seq, app, owner, envelope, attributes, exp_seconds,
    min_anonymity, max_hold_ms, token_id, token_epoch, accepted_ms, project, envelope_digest";

/// A 32-byte hash in its stored form (`0x` and 64 hex digits). The error does not echo the
/// value (errors reach logs, and a value can be an owner's).
fn parse_hash(text: &str) -> Result<B256, String> {
    text.parse::<B256>()
        .map_err(|e| format!("not a 32-byte hex hash: {e}"))
}

/// Column `i` of `r` as `T`, or [`StoreError::Damaged`] naming `item` and `field`.
fn column<T: rusqlite::types::FromSql>(
    r: &rusqlite::Row<'_>,
    i: usize,
    item: &str,
    field: &'static str,
) -> Result<T, StoreError> {
    r.get::<_, T>(i).map_err(|e| StoreError::Damaged {
        item: item.to_string(),
        field,
        detail: e.to_string(),
    })
}

/// A stored integer that must be non-negative (and fit `T`).
fn unsigned<T: TryFrom<i64>>(
    r: &rusqlite::Row<'_>,
    i: usize,
    item: &str,
    field: &'static str,
) -> Result<T, StoreError> {
    let v: i64 = column(r, i, item, field)?;
    T::try_from(v).map_err(|_| StoreError::Damaged {
        item: item.to_string(),
        field,
        detail: format!("{v} is out of range"),
    })
}

/// A record from a row of [`RECORD_COLUMNS`]; every field parses or the record is
/// [`StoreError::Damaged`] (never a default value).
fn row_to_record(r: &rusqlite::Row<'_>) -> Result<StoredRecord, StoreError> {
    let rowid: i64 = column(r, 0, "record", "rowid")?;
    let id: String = column(r, 1, &format!("record at row {rowid}"), "id")?;
    let item = format!("record {id}");
    let damaged = |field: &'static str, detail: String| StoreError::Damaged {
        item: item.clone(),
        field,
        detail,
    };
    let owner: String = column(r, 4, &item, "owner")?;
    let owner = owner
        .parse::<Address>()
        .map_err(|e| damaged("owner", format!("not an address: {e}")))?;
    let digest: Option<Vec<u8>> = column(r, 14, &item, "envelope_digest")?;
    let envelope_digest = digest
        .as_deref()
        .map(<[u8; 32]>::try_from)
        .ok_or_else(|| damaged("envelope_digest", "missing".into()))?
        .map_err(|_| damaged("envelope_digest", "not 32 bytes".into()))?;
    let project: Option<String> = column(r, 13, &item, "project")?;
    let token_id: Option<Vec<u8>> = column(r, 10, &item, "token_id")?;
    let token_epoch: Option<i64> = column(r, 11, &item, "token_epoch")?;
    let token = match (token_id, token_epoch) {
        (None, None) => None,
        (Some(id), Some(epoch)) => Some(SpentToken {
            id: <[u8; 32]>::try_from(id.as_slice())
                .map_err(|_| damaged("token_id", format!("{} bytes, not 32", id.len())))?,
            epoch: u64::try_from(epoch)
                .map_err(|_| damaged("token_epoch", format!("{epoch} is out of range")))?,
        }),
        _ => {
            return Err(damaged(
                "token_id",
                "a token id without its epoch, or an epoch without its id".into(),
            ))
        }
    };
    Ok(StoredRecord {
        seq: unsigned(r, 2, &item, "seq")?,
        app: column(r, 3, &item, "app")?,
        project: project.ok_or_else(|| damaged("project", "missing".into()))?,
        envelope_digest,
        owner,
        envelope: column(r, 5, &item, "envelope")?,
        attributes: column(r, 6, &item, "attributes")?,
        exp_seconds: unsigned(r, 7, &item, "exp_seconds")?,
        min_anonymity: unsigned(r, 8, &item, "min_anonymity")?,
        max_hold_ms: unsigned(r, 9, &item, "max_hold_ms")?,
        token,
        accepted_ms: unsigned(r, 12, &item, "accepted_ms")?,
        id,
    })
}

/// A record's state from a row of (state, entity_key, tx_hash, block, batch_size, error);
/// [`StoreError::Damaged`] naming record `id` when a field does not parse.
fn row_to_state(r: &rusqlite::Row<'_>, id: &str) -> Result<StoredState, StoreError> {
    let item = format!("record {id}");
    let state: String = column(r, 0, &item, "state")?;
    let damaged = |field: &'static str, detail: String| StoreError::Damaged {
        item: item.clone(),
        field,
        detail,
    };
    Ok(match state.as_str() {
        "queued" => StoredState::Queued,
        "sending" => StoredState::Sending,
        "written" => {
            let key: Option<String> = column(r, 1, &item, "entity_key")?;
            let tx: Option<String> = column(r, 2, &item, "tx_hash")?;
            let block: Option<i64> = column(r, 3, &item, "block")?;
            let size: Option<i64> = column(r, 4, &item, "batch_size")?;
            let key = key.ok_or_else(|| damaged("entity_key", "missing".into()))?;
            let tx = tx.ok_or_else(|| damaged("tx_hash", "missing".into()))?;
            StoredState::Written(WrittenInfo {
                entity_key: parse_hash(&key).map_err(|e| damaged("entity_key", e))?,
                tx_hash: parse_hash(&tx).map_err(|e| damaged("tx_hash", e))?,
                block: block
                    .and_then(|b| u64::try_from(b).ok())
                    .ok_or_else(|| damaged("block", format!("{block:?} is not a block")))?,
                batch_size: size
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or_else(|| damaged("batch_size", format!("{size:?} is not a size")))?,
            })
        }
        "failed" => {
            let error: Option<String> = column(r, 5, &item, "error")?;
            StoredState::Failed(error.ok_or_else(|| damaged("error", "missing".into()))?)
        }
        other => return Err(damaged("state", format!("unknown state {other:?}"))),
    })
}

/// Most commands folded into one transaction.
const MAX_GROUP: usize = 1024;

fn writer_loop(
    mut conn: Connection,
    rx: mpsc::Receiver<StoreCommand>,
    commits: &AtomicU64,
    health: &WriteHealth,
) {
    while let Ok(first) = rx.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(c) => group.push(c),
                Err(_) => break,
            }
        }
        let mut replies: Vec<CommandReply> = Vec::new();
        let mut failure: Option<GroupError> = None;
        let changes_before = conn.total_changes();
        let result = (|| -> Result<(), GroupError> {
            let mut tx = conn
                .transaction()
                .map_err(|e| Arc::new(StoreError::Sqlite(e)))?;
            let mut rest = group.into_iter();
            for cmd in rest.by_ref() {
                let (reply, storage_failure) = execute_command(&mut tx, cmd);
                if failure.is_none() {
                    failure = storage_failure;
                }
                replies.push(reply);
                if tx.is_autocommit() {
                    // SQLite rolled the whole transaction back (a full disk, an I/O error):
                    // nothing of the group is stored, and the rest must not run outside it.
                    break;
                }
            }
            if tx.is_autocommit() {
                let why = failure
                    .clone()
                    .unwrap_or_else(|| Arc::new(StoreError::RolledBack));
                for cmd in rest {
                    replies.push(refuse(cmd));
                }
                return Err(why);
            }
            tx.commit().map_err(|e| Arc::new(StoreError::Sqlite(e)))
        })();
        commits.fetch_add(1, Ordering::Relaxed);
        // `failure` is dropped here, so that a command whose own failure did not fail the group
        // gets its error back unshared.
        match (&result, failure) {
            // A command's own failure says more than the commit's.
            (Err(_), Some(why)) | (Ok(()), Some(why)) => health.failed(why.to_string()),
            (Err(e), None) => health.failed(e.to_string()),
            (Ok(()), None) if conn.total_changes() != changes_before => health.wrote(),
            (Ok(()), None) => {}
        }
        let err = result.err();
        for reply in replies {
            reply(err.as_ref());
        }
    }
}

/// The answer of a command that was not run because its group's transaction was rolled back
/// (the reply then carries the group's error).
fn refuse(cmd: StoreCommand) -> CommandReply {
    fn no<T: Send + 'static>(reply: oneshot::Sender<Result<T, StoreError>>) -> CommandReply {
        Box::new(move |err: Option<&GroupError>| {
            let why = err
                .cloned()
                .unwrap_or_else(|| Arc::new(StoreError::RolledBack));
            let _ = reply.send(Err(StoreError::Commit(why)));
        })
    }
    match cmd {
        StoreCommand::Insert(_, reply) => no(reply),
        StoreCommand::SaveBatch { reply, .. } => no(reply),
        StoreCommand::BatchWritten { reply, .. }
        | StoreCommand::BatchDropped { reply, .. }
        | StoreCommand::SetRecord { reply, .. }
        | StoreCommand::SetMeta(_, _, reply)
        | StoreCommand::FailRow { reply, .. }
        | StoreCommand::Fault(_, reply) => no(reply),
        StoreCommand::Prune { reply, .. } => no(reply),
    }
}

/// Sends a command's answer once its group commit is known (the group's error, if any,
/// replaces the answer: nothing of the group was stored).
type CommandReply = Box<dyn FnOnce(Option<&GroupError>)>;

/// Why a group transaction failed, shared by the replies of all its commands.
type GroupError = Arc<StoreError>;

/// The answer to a command once its group commit is known, and the command's own storage
/// failure (disk full, I/O error), if it had one.
type Answered = (CommandReply, Option<GroupError>);

fn reply_with<T: Send + 'static>(
    reply: oneshot::Sender<Result<T, StoreError>>,
    result: Result<T, StoreError>,
) -> Answered {
    let (result, failure) = match result {
        Err(e) if e.is_storage_failure() => {
            let shared = Arc::new(e);
            (Err(Arc::clone(&shared)), Some(shared))
        }
        Ok(v) => (Ok(v), None),
        Err(e) => (Err(Arc::new(e)), None),
    };
    let answer: CommandReply = Box::new(move |group_err: Option<&GroupError>| {
        let _ = match group_err {
            Some(e) => reply.send(Err(StoreError::Commit(Arc::clone(e)))),
            // The command's own error, unshared once the writer has let go of its copy.
            None => reply
                .send(result.map_err(|e| Arc::try_unwrap(e).unwrap_or_else(StoreError::Commit))),
        };
    });
    (answer, failure)
}

fn in_savepoint<T>(
    tx: &mut rusqlite::Transaction<'_>,
    f: impl FnOnce(&rusqlite::Savepoint<'_>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let sp = tx.savepoint()?;
    match f(&sp) {
        Ok(v) => {
            sp.commit()?;
            Ok(v)
        }
        Err(e) => Err(e), // dropping the savepoint rolls it back
    }
}

/// Runs `cmd` inside the group commit's transaction (in a savepoint of its own).
fn execute_command(tx: &mut rusqlite::Transaction<'_>, cmd: StoreCommand) -> Answered {
    match cmd {
        StoreCommand::Insert(rec, reply) => {
            // No savepoint (this is the hot path): insert_record leaves nothing behind when it
            // fails.
            let r = insert_record(tx, &rec).map(|()| rec);
            reply_with(reply, r)
        }
        StoreCommand::SaveBatch {
            nonce,
            tx_hash,
            raw,
            members,
            now_ms,
            reply,
        } => {
            let r = in_savepoint(tx, |sp| {
                sp.execute(
                    "INSERT INTO batches(nonce, tx_hash, raw, state, created_ms)
                     VALUES (?1, ?2, ?3, 'pending', ?4)",
                    params![nonce as i64, tx_hash.to_string(), raw, now_ms as i64],
                )?;
                let id = sp.last_insert_rowid();
                for (i, m) in members.iter().enumerate() {
                    sp.execute(
                        "INSERT INTO batch_members(batch_id, idx, record_id, salt, entity_key)
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                        params![
                            id,
                            i as i64,
                            m.record_id,
                            m.salt.to_string(),
                            m.entity_key.to_string()
                        ],
                    )?;
                    sp.execute(
                        "UPDATE records SET state = 'sending', batch_id = ?1 WHERE id = ?2",
                        params![id, m.record_id],
                    )?;
                }
                Ok(id)
            });
            reply_with(reply, r)
        }
        StoreCommand::BatchWritten {
            batch_id,
            tx_hash,
            block,
            now_ms,
            reply,
        } => {
            let r = in_savepoint(tx, |sp| {
                // batchSize counts the records of the record's own project (docs/PROTOCOL.md §7).
                sp.execute(
                    "UPDATE records SET state = 'written', tx_hash = ?2, block = ?3,
                       finished_ms = ?4,
                       batch_size = (SELECT COUNT(*) FROM records peer
                                     WHERE peer.batch_id = ?1
                                       AND peer.project IS records.project),
                       entity_key = (SELECT entity_key FROM batch_members m
                                     WHERE m.batch_id = ?1 AND m.record_id = records.id)
                     WHERE batch_id = ?1 AND state = 'sending'",
                    params![batch_id, tx_hash.to_string(), block as i64, now_ms as i64],
                )?;
                sp.execute(
                    "UPDATE batches SET state = 'mined', block = ?2, finished_ms = ?3
                     WHERE id = ?1",
                    params![batch_id, block as i64, now_ms as i64],
                )?;
                let batches: i64 = sp
                    .query_row("SELECT value FROM meta WHERE key = 'batches'", [], |r| {
                        r.get::<_, String>(0)
                    })
                    .optional()?
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                sp.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('batches', ?1),
                       ('last_flush_block', ?2)",
                    params![(batches + 1).to_string(), block.to_string()],
                )?;
                Ok(())
            });
            reply_with(reply, r)
        }
        StoreCommand::BatchDropped {
            batch_id,
            now_ms,
            reply,
        } => {
            let r = in_savepoint(tx, |sp| {
                sp.execute(
                    "UPDATE records SET state = 'queued', batch_id = NULL
                     WHERE batch_id = ?1 AND state = 'sending'",
                    [batch_id],
                )?;
                sp.execute(
                    "UPDATE batches SET state = 'dropped', finished_ms = ?2 WHERE id = ?1",
                    params![batch_id, now_ms as i64],
                )?;
                Ok(())
            });
            reply_with(reply, r)
        }
        StoreCommand::SetRecord {
            id,
            state,
            now_ms,
            reply,
        } => {
            let r = in_savepoint(tx, |sp| {
                match &state {
                    StoredState::Queued => sp.execute(
                        "UPDATE records SET state = 'queued', batch_id = NULL WHERE id = ?1",
                        [&id],
                    )?,
                    StoredState::Sending => {
                        sp.execute("UPDATE records SET state = 'sending' WHERE id = ?1", [&id])?
                    }
                    StoredState::Written(w) => sp.execute(
                        "UPDATE records SET state = 'written', entity_key = ?2, tx_hash = ?3,
                           block = ?4, batch_size = ?5, finished_ms = ?6 WHERE id = ?1",
                        params![
                            id,
                            w.entity_key.to_string(),
                            w.tx_hash.to_string(),
                            w.block as i64,
                            w.batch_size as i64,
                            now_ms as i64
                        ],
                    )?,
                    StoredState::Failed(e) => sp.execute(
                        "UPDATE records SET state = 'failed', error = ?2, finished_ms = ?3
                         WHERE id = ?1",
                        params![id, e, now_ms as i64],
                    )?,
                };
                Ok(())
            });
            reply_with(reply, r)
        }
        StoreCommand::SetMeta(k, v, reply) => {
            let r = in_savepoint(tx, |sp| {
                sp.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)",
                    params![k, v],
                )?;
                Ok(())
            });
            reply_with(reply, r)
        }
        StoreCommand::FailRow {
            rowid,
            error,
            now_ms,
            reply,
        } => {
            let r = in_savepoint(tx, |sp| {
                sp.execute(
                    "UPDATE records SET state = 'failed', error = ?2, finished_ms = ?3
                     WHERE rowid = ?1",
                    params![rowid, error, now_ms as i64],
                )?;
                Ok(())
            });
            reply_with(reply, r)
        }
        StoreCommand::Fault(fault, reply) => {
            // Pragmas of the connection, outside the transaction's data.
            let r = (|| -> Result<(), StoreError> {
                let pages: i64 = tx.query_row("PRAGMA page_count", [], |r| r.get(0))?;
                let limit = if fault == StoreFault::Full {
                    pages
                } else {
                    i64::from(u32::MAX - 1)
                };
                tx.query_row(&format!("PRAGMA max_page_count = {limit}"), [], |_| Ok(()))?;
                let query_only = if fault == StoreFault::ReadOnly {
                    "ON"
                } else {
                    "OFF"
                };
                tx.execute_batch(&format!("PRAGMA query_only = {query_only}"))?;
                Ok(())
            })();
            reply_with(reply, r)
        }
        StoreCommand::Prune {
            before_ms,
            min_epoch,
            reply,
        } => {
            let r = in_savepoint(tx, |sp| {
                let n = sp.execute(
                    "DELETE FROM records WHERE state IN ('written', 'failed')
                     AND finished_ms < ?1",
                    [before_ms as i64],
                )?;
                sp.execute(
                    "DELETE FROM batch_members WHERE batch_id IN
                       (SELECT id FROM batches WHERE state != 'pending' AND finished_ms < ?1)",
                    [before_ms as i64],
                )?;
                sp.execute(
                    "DELETE FROM batches WHERE state != 'pending' AND finished_ms < ?1",
                    [before_ms as i64],
                )?;
                sp.execute(
                    "DELETE FROM spent_tokens WHERE epoch < ?1",
                    [min_epoch as i64],
                )?;
                Ok(n)
            });
            reply_with(reply, r)
        }
    }
}

/// Insert a record and its token id with cached statements. On failure nothing of it stays:
/// an envelope stored before inserts nothing (checked first, so its token is not spent), a
/// spent token inserts nothing, and a failed record insert removes the token row it added.
fn insert_record(tx: &rusqlite::Transaction<'_>, rec: &StoredRecord) -> Result<(), StoreError> {
    let existing: Option<String> = tx
        .prepare_cached("SELECT id FROM records WHERE envelope_digest = ?1")?
        .query_row([rec.envelope_digest.as_slice()], |r| r.get(0))
        .optional()?;
    if let Some(id) = existing {
        return Err(StoreError::AlreadyStored(id));
    }
    if let Some(t) = &rec.token {
        let n = tx
            .prepare_cached(
                "INSERT OR IGNORE INTO spent_tokens(token_id, epoch, record_id) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![t.id.as_slice(), t.epoch as i64, rec.id])?;
        if n == 0 {
            return Err(StoreError::TokenSpent);
        }
    }
    let inserted = tx
        .prepare_cached(
            "INSERT INTO records(id, seq, app, owner, envelope, attributes, exp_seconds,
               min_anonymity, max_hold_ms, token_id, token_epoch, accepted_ms, state, project,
               envelope_digest)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 'queued', ?13, ?14)",
        )?
        .execute(params![
            rec.id,
            rec.seq as i64,
            rec.app,
            // Lowercase hex: no checksum hashing on the hot path; parsed back the same.
            format!("{:#x}", rec.owner),
            rec.envelope,
            rec.attributes,
            rec.exp_seconds as i64,
            rec.min_anonymity as i64,
            rec.max_hold_ms as i64,
            rec.token.as_ref().map(|t| t.id.to_vec()),
            rec.token.as_ref().map(|t| t.epoch as i64),
            rec.accepted_ms as i64,
            rec.project,
            rec.envelope_digest.as_slice(),
        ]);
    if let Err(e) = inserted {
        if let Some(t) = &rec.token {
            tx.prepare_cached("DELETE FROM spent_tokens WHERE token_id = ?1")?
                .execute([t.id.as_slice()])?;
        }
        return Err(e.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, seq: u64, token: Option<[u8; 32]>) -> StoredRecord {
        StoredRecord {
            id: id.into(),
            seq,
            app: "app".into(),
            project: "{\"type\":\"str\",\"value\":\"app\"}".into(),
            envelope_digest: envelope_sha256(format!("{id}/{seq}").as_bytes()),
            owner: Address::repeat_byte(7),
            envelope: vec![b' '; 512],
            attributes: "{}".into(),
            exp_seconds: 3600,
            min_anonymity: 1,
            max_hold_ms: 0,
            token: token.map(|id| SpentToken { id, epoch: 20000 }),
            accepted_ms: 1000 + seq,
        }
    }

    #[tokio::test]
    async fn concurrent_inserts_spend_a_token_once_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(Store::open(dir.path()).unwrap());
        let mut tasks = Vec::new();
        for i in 0..50u64 {
            let s = store.clone();
            tasks.push(tokio::spawn(async move {
                s.insert(rec(&format!("r{i}"), i, Some([1u8; 32]))).await
            }));
        }
        let mut ok = 0;
        let mut spent = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(_) => ok += 1,
                Err(StoreError::TokenSpent) => spent += 1,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!((ok, spent), (1, 49));
        // Group commit: the 50 concurrent inserts did not take 50 transactions.
        assert!(store.commits() < 50, "{} commits", store.commits());
        store.insert(rec("free", 100, None)).await.unwrap();
        // A record that cannot be inserted (duplicate id) leaves its token unspent.
        assert!(store
            .insert(rec("free", 101, Some([3u8; 32])))
            .await
            .is_err());
        assert!(!store.token_spent(&[3u8; 32]).unwrap());
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.load_queued().unwrap().0.len(), 2);
        assert!(store.token_spent(&[1u8; 32]).unwrap());
        assert!(!store.token_spent(&[2u8; 32]).unwrap());
    }

    #[tokio::test]
    async fn a_full_store_answers_with_sqlites_error_as_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.set_fault(StoreFault::Full).await.unwrap();
        let mut refused = None;
        for i in 0..2_000u64 {
            if let Err(e) = store.insert(rec(&format!("r{i}"), i, None)).await {
                refused = Some(e);
                break;
            }
        }
        let e = refused.expect("the full store took 2000 records");
        assert!(e.is_storage_failure(), "{e:?}");
        // Through a failed group commit or not, SQLite's own error is in the chain.
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        let mut sqlite = None;
        while let Some(c) = cause {
            if let Some(r) = c.downcast_ref::<rusqlite::Error>() {
                sqlite = Some(r);
            }
            cause = c.source();
        }
        assert_eq!(
            sqlite.and_then(rusqlite::Error::sqlite_error_code),
            Some(rusqlite::ErrorCode::DiskFull),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn batch_lifecycle_and_pruning() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.insert(rec("a", 1, None)).await.unwrap();
        store.insert(rec("b", 2, None)).await.unwrap();
        let back = store.record("a").unwrap().unwrap();
        assert_eq!(back, rec("a", 1, None));
        let members = vec![
            BatchMember {
                record_id: "a".into(),
                salt: 5,
                entity_key: B256::repeat_byte(1),
            },
            BatchMember {
                record_id: "b".into(),
                salt: 6,
                entity_key: B256::repeat_byte(2),
            },
        ];
        let id = store
            .save_batch(3, B256::repeat_byte(9), vec![1, 2, 3], members.clone(), 10)
            .await
            .unwrap();
        assert_eq!(store.state("a").unwrap(), Some(StoredState::Sending));
        let pending = store.pending_batches().unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].members, members);
        assert_eq!(pending[0].raw, vec![1, 2, 3]);
        store
            .batch_written(id, B256::repeat_byte(9), 42, 20)
            .await
            .unwrap();
        match store.state("b").unwrap() {
            Some(StoredState::Written(w)) => {
                assert_eq!(w.entity_key, B256::repeat_byte(2));
                assert_eq!(w.block, 42);
                assert_eq!(w.batch_size, 2);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(store.meta("batches").unwrap().as_deref(), Some("1"));
        assert!(store.pending_batches().unwrap().is_empty());
        assert_eq!(store.prune(15, 0).await.unwrap(), 0);
        assert_eq!(store.prune(21, 0).await.unwrap(), 2);
        assert_eq!(store.state("a").unwrap(), None);
    }

    #[tokio::test]
    async fn one_envelope_is_stored_once_and_spends_one_token_even_in_one_group_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(Store::open(dir.path()).unwrap());
        let same = envelope_sha256(b"the same sealed envelope");
        let mut tasks = Vec::new();
        for i in 0..40u64 {
            let s = store.clone();
            let mut r = rec(&format!("copy{i}"), i, Some([i as u8; 32]));
            r.envelope_digest = same;
            tasks.push(tokio::spawn(async move { s.insert(r).await }));
        }
        let mut stored = Vec::new();
        let mut existing = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                Ok(r) => stored.push(r.id),
                Err(StoreError::AlreadyStored(id)) => existing.push(id),
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(stored.len(), 1, "{stored:?}");
        assert_eq!(existing.len(), 39);
        assert!(existing.iter().all(|id| *id == stored[0]), "{existing:?}");
        assert_eq!(
            store.id_of_envelope(&same).unwrap(),
            Some(stored[0].clone())
        );
        assert_eq!(store.load_queued().unwrap().0.len(), 1);
        // Only the stored copy's token is spent.
        let spent = (0..40u8)
            .filter(|i| store.token_spent(&[*i; 32]).unwrap())
            .count();
        assert_eq!(spent, 1);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn data_dir_is_0700_database_0600_and_secure_delete_is_on() {
        use std::os::unix::fs::PermissionsExt;
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("data");
        let store = Store::open(&dir).unwrap();
        store.insert(rec("a", 1, Some([9u8; 32]))).await.unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        for f in ["relayer.sqlite", "relayer.sqlite-wal", "relayer.sqlite-shm"] {
            assert_eq!(mode(&dir.join(f)), 0o600, "{f}");
        }
        let on: i64 = store
            .reader()
            .query_row("PRAGMA secure_delete", [], |r| r.get(0))
            .unwrap();
        assert_eq!(on, 1);
        drop(store);
        // An existing, too open directory and database are tightened.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(
            dir.join("relayer.sqlite"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let _store = Store::open(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("relayer.sqlite")), 0o600);
    }

    #[tokio::test]
    async fn a_version_1_database_is_migrated_and_its_queued_duplicate_failed() {
        let dir = tempfile::tempdir().unwrap();
        {
            let conn = Connection::open(dir.path().join("relayer.sqlite")).unwrap();
            conn.execute_batch(
                "CREATE TABLE records(
                  id TEXT PRIMARY KEY, seq INTEGER NOT NULL, app TEXT NOT NULL,
                  owner TEXT NOT NULL, envelope BLOB NOT NULL, attributes TEXT NOT NULL,
                  exp_seconds INTEGER NOT NULL, min_anonymity INTEGER NOT NULL,
                  max_hold_ms INTEGER NOT NULL, token_id BLOB, token_epoch INTEGER,
                  accepted_ms INTEGER NOT NULL, state TEXT NOT NULL, batch_id INTEGER,
                  entity_key TEXT, tx_hash TEXT, block INTEGER, batch_size INTEGER,
                  error TEXT, finished_ms INTEGER);
                 CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);",
            )
            .unwrap();
            let attrs = r#"{"project":{"type":"str","value":"notes"}}"#;
            for (id, seq, env) in [("first", 1, "E1"), ("copy", 2, "E1"), ("other", 3, "E2")] {
                conn.execute(
                    "INSERT INTO records(id, seq, app, owner, envelope, attributes, exp_seconds,
                       min_anonymity, max_hold_ms, accepted_ms, state)
                     VALUES (?1, ?2, 'app', ?3, ?4, ?5, 3600, 1, 0, 1, 'queued')",
                    params![
                        id,
                        seq,
                        format!("{:#x}", Address::repeat_byte(7)),
                        env.as_bytes(),
                        attrs
                    ],
                )
                .unwrap();
            }
        }
        let store = Store::open(dir.path()).unwrap();
        let queued: Vec<String> = store
            .load_queued()
            .unwrap()
            .0
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(queued, vec!["first", "other"]);
        match store.state("copy").unwrap() {
            Some(StoredState::Failed(e)) => assert!(e.contains("record first"), "{e}"),
            other => panic!("{other:?}"),
        }
        let first = store.record("first").unwrap().unwrap();
        assert_eq!(first.project, r#"{"type":"str","value":"notes"}"#);
        assert_eq!(first.envelope_digest, envelope_sha256(b"E1"));
        assert_eq!(
            store.id_of_envelope(&envelope_sha256(b"E2")).unwrap(),
            Some("other".to_string())
        );
        // The UNIQUE index holds from now on.
        let mut again = rec("again", 9, None);
        again.envelope_digest = envelope_sha256(b"E2");
        assert!(matches!(
            store.insert(again).await,
            Err(StoreError::AlreadyStored(id)) if id == "other"
        ));
        drop(store);
        // Opening again is a no-op.
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.load_queued().unwrap().0.len(), 2);
    }
}
