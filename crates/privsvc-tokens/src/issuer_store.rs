//! The issuer's durable state in one SQLite file: per-(app, epoch) secret keys and their ledger
//! entity, tokens issued per wallet, and attestation codes already used.

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
        std::fs::create_dir_all(dir)?;
        let conn = Connection::open(dir.join(ISSUER_DB_FILE))?;
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
                 code_hash BLOB PRIMARY KEY, epoch INTEGER NOT NULL);",
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

    /// Forget keys and counters of epochs before `min_epoch` (no longer issuable or redeemable).
    pub fn prune(&self, min_epoch: u32) -> Result<(), StoreError> {
        let conn = self.conn();
        conn.execute(
            "DELETE FROM issuer_keys WHERE epoch < ?1",
            params![min_epoch],
        )?;
        conn.execute("DELETE FROM issued WHERE epoch < ?1", params![min_epoch])?;
        Ok(())
    }
}
