//! [`SqliteKeyPins`]: issuer key pins in an SQLite file (feature `sqlite`, native only).

use std::path::Path;
use std::sync::Mutex;

use alloy_primitives::Address;
use rusqlite::{params, Connection, OptionalExtension};

use crate::acceptance::{KeyPins, PIN_RETENTION_DAYS};
use crate::error::TokenError;
use crate::issuer_store::{create_private_dir, create_private_file};

/// Pins in an SQLite file (created 0600), so a restart does not forget them.
pub struct SqliteKeyPins {
    conn: Mutex<Connection>,
}

fn store_error(e: rusqlite::Error) -> TokenError {
    TokenError::store("issuer key pins", None, e)
}

impl SqliteKeyPins {
    /// Open (or create) the pin file at `path`, dropping pins older than
    /// [`PIN_RETENTION_DAYS`] before `today`.
    pub fn open(path: &Path, today: u32) -> Result<Self, TokenError> {
        let io = |e: std::io::Error| TokenError::store("issuer key pins", Some(path), e);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            create_private_dir(dir).map_err(io)?;
        }
        create_private_file(path).map_err(io)?;
        let conn = Connection::open(path).map_err(store_error)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(store_error)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(store_error)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS issuer_key_pins (
                 issuer TEXT NOT NULL, app TEXT NOT NULL, epoch INTEGER NOT NULL,
                 spki BLOB NOT NULL, PRIMARY KEY (issuer, app, epoch));",
        )
        .map_err(store_error)?;
        conn.execute(
            "DELETE FROM issuer_key_pins WHERE epoch < ?1",
            params![today.saturating_sub(PIN_RETENTION_DAYS)],
        )
        .map_err(store_error)?;
        Ok(SqliteKeyPins {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl KeyPins for SqliteKeyPins {
    fn get(&self, issuer: Address, app: &str, epoch: u32) -> Result<Option<Vec<u8>>, TokenError> {
        self.conn()
            .query_row(
                "SELECT spki FROM issuer_key_pins WHERE issuer = ?1 AND app = ?2 AND epoch = ?3",
                params![issuer.to_string(), app, epoch],
                |r| r.get(0),
            )
            .optional()
            .map_err(store_error)
    }

    fn pin(
        &self,
        issuer: Address,
        app: &str,
        epoch: u32,
        spki: &[u8],
    ) -> Result<Vec<u8>, TokenError> {
        {
            let conn = self.conn();
            conn.execute(
                "INSERT OR IGNORE INTO issuer_key_pins (issuer, app, epoch, spki)
                 VALUES (?1, ?2, ?3, ?4)",
                params![issuer.to_string(), app, epoch, spki],
            )
            .map_err(store_error)?;
        }
        self.get(issuer, app, epoch)?.ok_or_else(|| {
            TokenError::store(
                "issuer key pins",
                None,
                "a pin vanished after it was stored",
            )
        })
    }
}
