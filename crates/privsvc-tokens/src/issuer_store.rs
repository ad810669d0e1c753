//! The issuer's durable state in one SQLite file: per-(app, epoch) secret keys and their ledger
//! entity, tokens issued per wallet, attestation codes already used, apps created by issue
//! requests per day (the `ISSUER_MAX_NEW_APPS` count), the day's next-key publication moment,
//! and the answers to signed issue requests within their validity window (so that a replayed
//! request gets the same answer and costs no quota).

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use zeroize::Zeroizing;

/// File name of the issuer database inside its data directory.
pub const ISSUER_DB_FILE: &str = "issuer.sqlite";

/// Errors of the issuer store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite failed.
    #[error("issuer database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The data directory could not be created.
    #[error("cannot create the issuer data directory: {0}")]
    Io(#[from] std::io::Error),
    /// Issuing would exceed the quota (checked again inside the transaction).
    #[error("quota exceeded")]
    QuotaExceeded,
    /// The attestation code was used meanwhile (checked again inside the transaction).
    #[error("attestation code already used")]
    CodeUsed,
}

/// One signed issue request, as replays are recognised: the wallet, its `ts` and the SHA-256
/// of the concatenated decoded blinded values (the values its signature covers, with the app,
/// epoch, issuer and chain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestKey {
    /// The requesting wallet (EIP-55).
    pub wallet: String,
    /// The request's `ts` (epoch ms).
    pub ts: u64,
    /// SHA-256 of the concatenated decoded blinded values.
    pub blinded_digest: [u8; 32],
}

/// The answer given to a signed issue request, kept for its validity window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RememberedAnswer {
    /// HTTP status (200, or 409 when the request created the app's key).
    pub status: u16,
    /// The JSON body, byte for byte.
    pub body: Vec<u8>,
}

/// What [`IssuerStore::commit_issue`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// Counted: the wallet's new issued total; the answer is remembered.
    Issued(u32),
    /// The same request was answered meanwhile: its answer, nothing counted.
    Replay(RememberedAnswer),
}

/// A stored per-(app, epoch) key.
pub struct StoredKey {
    /// PKCS#8 DER of the secret key (wiped on drop).
    pub secret_der: Zeroizing<Vec<u8>>,
    /// The published entity key, `0x`-hex, once published.
    pub entity_key: Option<String>,
}

/// The issuer database.
pub struct IssuerStore {
    conn: Mutex<Connection>,
}

impl IssuerStore {
    /// Open (or create) the database in `dir`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        create_private_dir(dir)?;
        let path = dir.join(ISSUER_DB_FILE);
        create_private_file(&path)?;
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "secure_delete", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS issuer_keys (
                 app TEXT NOT NULL, epoch INTEGER NOT NULL, secret_der BLOB NOT NULL,
                 entity_key TEXT, PRIMARY KEY (app, epoch));
             CREATE TABLE IF NOT EXISTS issued (
                 app TEXT NOT NULL, epoch INTEGER NOT NULL, wallet TEXT NOT NULL,
                 count INTEGER NOT NULL, PRIMARY KEY (app, epoch, wallet));
             CREATE TABLE IF NOT EXISTS used_codes (
                 code_hash BLOB PRIMARY KEY, epoch INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS new_apps (
                 epoch INTEGER NOT NULL, app TEXT NOT NULL, PRIMARY KEY (epoch, app));
             CREATE TABLE IF NOT EXISTS publish_moments (
                 epoch INTEGER PRIMARY KEY, moment_ms INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS issue_answers (
                 wallet TEXT NOT NULL, ts INTEGER NOT NULL, blinded_digest BLOB NOT NULL,
                 epoch INTEGER NOT NULL, expires_ms INTEGER NOT NULL, status INTEGER NOT NULL,
                 body BLOB NOT NULL, PRIMARY KEY (wallet, ts, blinded_digest));",
        )?;
        Ok(IssuerStore {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The stored key of (`app`, `epoch`), if any.
    pub fn key(&self, app: &str, epoch: u32) -> Result<Option<StoredKey>, StoreError> {
        let conn = self.conn();
        let row = conn
            .query_row(
                "SELECT secret_der, entity_key FROM issuer_keys WHERE app = ?1 AND epoch = ?2",
                params![app, epoch],
                |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Option<String>>(1)?)),
            )
            .optional()?;
        Ok(row.map(|(der, entity_key)| StoredKey {
            secret_der: Zeroizing::new(der),
            entity_key,
        }))
    }

    /// Store a new key unless one exists; returns the key that is stored afterwards (the
    /// existing one wins, so a key is generated once per (app, epoch)).
    pub fn insert_key(
        &self,
        app: &str,
        epoch: u32,
        secret_der: &[u8],
    ) -> Result<StoredKey, StoreError> {
        {
            let conn = self.conn();
            conn.execute(
                "INSERT OR IGNORE INTO issuer_keys (app, epoch, secret_der) VALUES (?1, ?2, ?3)",
                params![app, epoch, secret_der],
            )?;
        }
        self.key(app, epoch)?
            .ok_or(StoreError::Sqlite(rusqlite::Error::QueryReturnedNoRows))
    }

    /// Record the ledger entity holding the key of (`app`, `epoch`).
    pub fn set_entity_key(
        &self,
        app: &str,
        epoch: u32,
        entity_key: &str,
    ) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE issuer_keys SET entity_key = ?3 WHERE app = ?1 AND epoch = ?2",
            params![app, epoch, entity_key],
        )?;
        Ok(())
    }

    /// Tokens issued so far to `wallet` for (`app`, `epoch`).
    pub fn issued(&self, app: &str, epoch: u32, wallet: &str) -> Result<u32, StoreError> {
        let n: Option<u32> = self
            .conn()
            .query_row(
                "SELECT count FROM issued WHERE app = ?1 AND epoch = ?2 AND wallet = ?3",
                params![app, epoch, wallet],
                |r| r.get(0),
            )
            .optional()?;
        Ok(n.unwrap_or(0))
    }

    /// Whether an attestation code (by its hash) was used.
    pub fn code_used(&self, code_hash: &[u8; 32]) -> Result<bool, StoreError> {
        let n: Option<i64> = self
            .conn()
            .query_row(
                "SELECT 1 FROM used_codes WHERE code_hash = ?1",
                params![&code_hash[..]],
                |r| r.get(0),
            )
            .optional()?;
        Ok(n.is_some())
    }

    /// The answer remembered for `request`, unless its validity window ended before `now_ms`.
    pub fn remembered(
        &self,
        request: &RequestKey,
        now_ms: u64,
    ) -> Result<Option<RememberedAnswer>, StoreError> {
        remembered_in(&self.conn(), request, now_ms)
    }

    /// Remember `answer` for `request` until `expires_ms` unless an answer is remembered
    /// already; returns the answer remembered afterwards (the first one wins). Answers whose
    /// window ended before `now_ms` are forgotten first.
    pub fn remember(
        &self,
        request: &RequestKey,
        epoch: u32,
        expires_ms: u64,
        now_ms: u64,
        answer: &RememberedAnswer,
    ) -> Result<RememberedAnswer, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        forget_expired(&tx, now_ms)?;
        if let Some(existing) = remembered_in(&tx, request, now_ms)? {
            return Ok(existing);
        }
        insert_answer(&tx, request, epoch, expires_ms, answer)?;
        tx.commit()?;
        Ok(answer.clone())
    }

    /// Forget the answer remembered for `request` (its effect did not happen after all).
    pub fn forget(&self, request: &RequestKey) -> Result<(), StoreError> {
        self.conn().execute(
            "DELETE FROM issue_answers WHERE wallet = ?1 AND ts = ?2 AND blinded_digest = ?3",
            params![
                request.wallet,
                ts_sql(request.ts),
                &request.blinded_digest[..]
            ],
        )?;
        Ok(())
    }

    /// In one transaction: if `request` has a remembered answer, return it and count nothing
    /// ([`Committed::Replay`]); else check quota and code again, mark the code used, add
    /// `count` to the wallet's issued tokens and remember the answer `body(new total)` as a
    /// 200 until `expires_ms` ([`Committed::Issued`]).
    #[allow(clippy::too_many_arguments)]
    pub fn commit_issue(
        &self,
        app: &str,
        epoch: u32,
        count: u32,
        quota: u32,
        code_hash: Option<&[u8; 32]>,
        request: &RequestKey,
        expires_ms: u64,
        now_ms: u64,
        body: impl FnOnce(u32) -> Vec<u8>,
    ) -> Result<Committed, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        forget_expired(&tx, now_ms)?;
        if let Some(answer) = remembered_in(&tx, request, now_ms)? {
            return Ok(Committed::Replay(answer));
        }
        let wallet = request.wallet.as_str();
        let issued: u32 = tx
            .query_row(
                "SELECT count FROM issued WHERE app = ?1 AND epoch = ?2 AND wallet = ?3",
                params![app, epoch, wallet],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0);
        let total = issued.saturating_add(count);
        if total > quota {
            return Err(StoreError::QuotaExceeded);
        }
        if let Some(h) = code_hash {
            let inserted = tx.execute(
                "INSERT OR IGNORE INTO used_codes (code_hash, epoch) VALUES (?1, ?2)",
                params![&h[..], epoch],
            )?;
            if inserted == 0 {
                return Err(StoreError::CodeUsed);
            }
        }
        tx.execute(
            "INSERT INTO issued (app, epoch, wallet, count) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (app, epoch, wallet) DO UPDATE SET count = ?4",
            params![app, epoch, wallet, total],
        )?;
        let answer = RememberedAnswer {
            status: 200,
            body: body(total),
        };
        insert_answer(&tx, request, epoch, expires_ms, &answer)?;
        tx.commit()?;
        Ok(Committed::Issued(total))
    }

    /// Forget keys, counters, new-app records, moments and remembered answers of epochs
    /// before `min_epoch` (no longer issuable or redeemable).
    pub fn prune(&self, min_epoch: u32) -> Result<(), StoreError> {
        let conn = self.conn();
        for table in [
            "issuer_keys",
            "issued",
            "new_apps",
            "publish_moments",
            "issue_answers",
        ] {
            conn.execute(
                &format!("DELETE FROM {table} WHERE epoch < ?1"),
                params![min_epoch],
            )?;
        }
        Ok(())
    }

    /// Count `app` as a new app of `epoch` unless `max` apps were already created that day.
    /// Returns true when `app` is (now or already) one of the day's new apps, false when the
    /// day's limit is reached. One transaction, so concurrent requests cannot exceed `max`.
    pub fn reserve_new_app(&self, app: &str, epoch: u32, max: u32) -> Result<bool, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let exists: Option<i64> = tx
            .query_row(
                "SELECT 1 FROM new_apps WHERE epoch = ?1 AND app = ?2",
                params![epoch, app],
                |r| r.get(0),
            )
            .optional()?;
        if exists.is_some() {
            return Ok(true);
        }
        let count: u32 = tx.query_row(
            "SELECT COUNT(*) FROM new_apps WHERE epoch = ?1",
            params![epoch],
            |r| r.get(0),
        )?;
        if count >= max {
            return Ok(false);
        }
        tx.execute(
            "INSERT INTO new_apps (epoch, app) VALUES (?1, ?2)",
            params![epoch, app],
        )?;
        tx.commit()?;
        Ok(true)
    }

    /// How many apps were created by issue requests on `epoch`.
    pub fn new_app_count(&self, epoch: u32) -> Result<u32, StoreError> {
        Ok(self.conn().query_row(
            "SELECT COUNT(*) FROM new_apps WHERE epoch = ?1",
            params![epoch],
            |r| r.get(0),
        )?)
    }

    /// [`IssuerStore::active_apps`] of `epoch`, most used first: by the number of wallets
    /// that were issued tokens that day, then by the tokens issued, then by name. The issuer
    /// publishes next-day keys for the first `ISSUER_MAX_ACTIVE_APPS` of them.
    pub fn ranked_active_apps(&self, epoch: u32) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT k.app FROM issuer_keys k JOIN issued i
               ON i.app = k.app AND i.epoch = k.epoch
             WHERE k.epoch = ?1 AND i.count > 0
             GROUP BY k.app
             ORDER BY COUNT(*) DESC, SUM(i.count) DESC, k.app",
        )?;
        let apps = stmt
            .query_map(params![epoch], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(apps)
    }

    /// (app, epoch) of stored keys not yet published, for epochs `min_epoch` and later.
    pub fn unpublished(&self, min_epoch: u32) -> Result<Vec<(String, u32)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT app, epoch FROM issuer_keys WHERE entity_key IS NULL AND epoch >= ?1
             ORDER BY epoch, app",
        )?;
        let rows = stmt
            .query_map(params![min_epoch], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// The stored publication moment of day `epoch`'s next-day keys, storing `proposed` when
    /// there is none (the first choice wins, so a restart does not draw a new moment).
    pub fn publish_moment(&self, epoch: u32, proposed: u64) -> Result<u64, StoreError> {
        let conn = self.conn();
        conn.execute(
            "INSERT OR IGNORE INTO publish_moments (epoch, moment_ms) VALUES (?1, ?2)",
            params![epoch, i64::try_from(proposed).unwrap_or(i64::MAX)],
        )?;
        let ms: i64 = conn.query_row(
            "SELECT moment_ms FROM publish_moments WHERE epoch = ?1",
            params![epoch],
            |r| r.get(0),
        )?;
        Ok(u64::try_from(ms).unwrap_or(0))
    }
}

/// `ts` as SQLite stores it (an INTEGER is signed).
fn ts_sql(ts: u64) -> i64 {
    i64::try_from(ts).unwrap_or(i64::MAX)
}

fn remembered_in(
    conn: &Connection,
    request: &RequestKey,
    now_ms: u64,
) -> Result<Option<RememberedAnswer>, StoreError> {
    let row = conn
        .query_row(
            "SELECT status, body FROM issue_answers
             WHERE wallet = ?1 AND ts = ?2 AND blinded_digest = ?3 AND expires_ms >= ?4",
            params![
                request.wallet,
                ts_sql(request.ts),
                &request.blinded_digest[..],
                ts_sql(now_ms)
            ],
            |r| Ok((r.get::<_, u16>(0)?, r.get::<_, Vec<u8>>(1)?)),
        )
        .optional()?;
    Ok(row.map(|(status, body)| RememberedAnswer { status, body }))
}

fn insert_answer(
    conn: &Connection,
    request: &RequestKey,
    epoch: u32,
    expires_ms: u64,
    answer: &RememberedAnswer,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT OR REPLACE INTO issue_answers
           (wallet, ts, blinded_digest, epoch, expires_ms, status, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            request.wallet,
            ts_sql(request.ts),
            &request.blinded_digest[..],
            epoch,
            ts_sql(expires_ms),
            answer.status,
            answer.body
        ],
    )?;
    Ok(())
}

/// Forget the answers whose validity window ended before `now_ms` (a replay of their request
/// is refused as stale anyway).
fn forget_expired(conn: &Connection, now_ms: u64) -> Result<(), StoreError> {
    conn.execute(
        "DELETE FROM issue_answers WHERE expires_ms < ?1",
        params![ts_sql(now_ms)],
    )?;
    Ok(())
}

/// Create `dir` (and its parents) if missing; a directory this call creates is 0700 (Unix).
pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Create `path` empty with mode 0600 (Unix) unless it exists, so that SQLite (which gives its
/// journal files the database's mode) never makes a world-readable file of secrets.
pub(crate) fn create_private_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}
