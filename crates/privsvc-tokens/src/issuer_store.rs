//! The issuer's durable state in one SQLite file: per-(app, epoch) secret keys and their ledger
//! entity, tokens issued per wallet, attestation codes already used, apps created by issue
//! requests per day (the `ISSUER_MAX_NEW_APPS` count) and the day's next-key publication moment.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use zeroize::Zeroizing;

/// File name of the issuer database inside its data directory.
pub const ISSUER_DB_FILE: &str = "issuer.sqlite";

/// Errors of the issuer store.
#[derive(Debug, thiserror::Error)]
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
                 epoch INTEGER PRIMARY KEY, moment_ms INTEGER NOT NULL);",
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

    /// In one transaction: check quota and code again, mark the code used and add `count` to
    /// the wallet's issued tokens. Returns the new issued total.
    pub fn commit_issue(
        &self,
        app: &str,
        epoch: u32,
        wallet: &str,
        count: u32,
        quota: u32,
        code_hash: Option<&[u8; 32]>,
    ) -> Result<u32, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
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
        tx.commit()?;
        Ok(total)
    }

    /// Forget keys, counters, new-app records and moments of epochs before `min_epoch` (no
    /// longer issuable or redeemable).
    pub fn prune(&self, min_epoch: u32) -> Result<(), StoreError> {
        let conn = self.conn();
        for table in ["issuer_keys", "issued", "new_apps", "publish_moments"] {
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

    /// Apps holding a key for `epoch` to which tokens were issued that day (the apps whose
    /// next-day key the issuer publishes).
    pub fn active_apps(&self, epoch: u32) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT DISTINCT k.app FROM issuer_keys k JOIN issued i
               ON i.app = k.app AND i.epoch = k.epoch
             WHERE k.epoch = ?1 AND i.count > 0 ORDER BY k.app",
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
