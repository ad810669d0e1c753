//! SQLite persistence: every mined block is written in one SQLite transaction.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;

use alloy_primitives::{Address, B256};
use rusqlite::{params, Connection};

use crate::entity::EntityData;
use crate::error::DevnetError;
use crate::store::{Version, VersionRow};
use crate::types::{Account, Block, TxRecord};

/// A SQLite database file holding the chain.
pub struct Db {
    conn: Mutex<Connection>,
}

/// Everything loaded at startup.
pub struct Loaded {
    /// Chain id stored in the file.
    pub chain_id: u64,
    /// Accounts.
    pub accounts: HashMap<Address, Account>,
    /// Blocks in order.
    pub blocks: Vec<Block>,
    /// Mined transactions.
    pub txs: HashMap<B256, TxRecord>,
    /// Entity versions.
    pub versions: Vec<VersionRow>,
}

fn sql(e: rusqlite::Error) -> DevnetError {
    DevnetError::Storage(e)
}

fn js(e: serde_json::Error) -> DevnetError {
    DevnetError::Corrupt(Box::new(e))
}

impl Db {
    /// Open or create the database at `path`.
    pub fn open(path: &Path) -> Result<Self, DevnetError> {
        let conn = Connection::open(path).map_err(sql)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS accounts (address BLOB PRIMARY KEY, json TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS blocks (number INTEGER PRIMARY KEY, json TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS txs (hash BLOB PRIMARY KEY, json TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS versions (vid INTEGER PRIMARY KEY, eid INTEGER NOT NULL,
                 from_block INTEGER NOT NULL, to_block INTEGER NOT NULL, json TEXT NOT NULL);",
        )
        .map_err(sql)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Load the stored chain, or `None` for an empty file.
    pub fn load(&self) -> Result<Option<Loaded>, DevnetError> {
        let c = self.conn();
        let chain_id: Option<String> = c
            .query_row("SELECT value FROM meta WHERE key = 'chain_id'", [], |r| {
                r.get(0)
            })
            .ok();
        let Some(chain_id) = chain_id else {
            return Ok(None);
        };
        let chain_id: u64 = chain_id
            .parse()
            .map_err(|e| DevnetError::Corrupt(Box::new(e)))?;
        let mut accounts = HashMap::new();
        let mut st = c
            .prepare("SELECT address, json FROM accounts")
            .map_err(sql)?;
        let rows = st
            .query_map([], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(sql)?;
        for row in rows {
            let (a, j) = row.map_err(sql)?;
            accounts.insert(
                Address::from_slice(&a),
                serde_json::from_str(&j).map_err(js)?,
            );
        }
        let mut blocks = Vec::new();
        let mut st = c
            .prepare("SELECT json FROM blocks ORDER BY number")
            .map_err(sql)?;
        for row in st.query_map([], |r| r.get::<_, String>(0)).map_err(sql)? {
            blocks.push(serde_json::from_str::<Block>(&row.map_err(sql)?).map_err(js)?);
        }
        let mut txs = HashMap::new();
        let mut st = c.prepare("SELECT json FROM txs").map_err(sql)?;
        for row in st.query_map([], |r| r.get::<_, String>(0)).map_err(sql)? {
            let t: TxRecord = serde_json::from_str(&row.map_err(sql)?).map_err(js)?;
            txs.insert(t.hash, t);
        }
        let mut versions = Vec::new();
        let mut st = c
            .prepare("SELECT vid, eid, from_block, to_block, json FROM versions ORDER BY vid")
            .map_err(sql)?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })
            .map_err(sql)?;
        for row in rows {
            let (vid, eid, from, to, j) = row.map_err(sql)?;
            let data: EntityData = serde_json::from_str(&j).map_err(js)?;
            versions.push(VersionRow {
                eid: eid as u64,
                version: Version {
                    vid: vid as u64,
                    from: from as u64,
                    to: to as u64,
                    data: Arc::new(data),
                },
            });
        }
        Ok(Some(Loaded {
            chain_id,
            accounts,
            blocks,
            txs,
            versions,
        }))
    }

    /// Overwrite accounts.
    pub fn save_accounts(&self, accounts: &[(Address, Account)]) -> Result<(), DevnetError> {
        let mut c = self.conn();
        let t = c.transaction().map_err(sql)?;
        for (a, s) in accounts {
            t.execute(
                "INSERT OR REPLACE INTO accounts (address, json) VALUES (?1, ?2)",
                params![a.as_slice(), serde_json::to_string(s).map_err(js)?],
            )
            .map_err(sql)?;
        }
        t.commit().map_err(sql)
    }

    /// Persist one block with its transactions, changed accounts and entity versions.
    pub fn commit_block(
        &self,
        chain_id: u64,
        block: &Block,
        txs: &[TxRecord],
        accounts: &[(Address, Account)],
        versions: &[VersionRow],
    ) -> Result<(), DevnetError> {
        let mut c = self.conn();
        let t = c.transaction().map_err(sql)?;
        t.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('chain_id', ?1)",
            params![chain_id.to_string()],
        )
        .map_err(sql)?;
        t.execute(
            "INSERT OR REPLACE INTO blocks (number, json) VALUES (?1, ?2)",
            params![
                block.number as i64,
                serde_json::to_string(block).map_err(js)?
            ],
        )
        .map_err(sql)?;
        for tx in txs {
            t.execute(
                "INSERT OR REPLACE INTO txs (hash, json) VALUES (?1, ?2)",
                params![tx.hash.as_slice(), serde_json::to_string(tx).map_err(js)?],
            )
            .map_err(sql)?;
        }
        for (a, s) in accounts {
            t.execute(
                "INSERT OR REPLACE INTO accounts (address, json) VALUES (?1, ?2)",
                params![a.as_slice(), serde_json::to_string(s).map_err(js)?],
            )
            .map_err(sql)?;
        }
        for r in versions {
            t.execute(
                "INSERT OR REPLACE INTO versions (vid, eid, from_block, to_block, json) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    r.version.vid as i64,
                    r.eid as i64,
                    r.version.from as i64,
                    r.version.to as i64,
                    serde_json::to_string(&*r.version.data).map_err(js)?
                ],
            )
            .map_err(sql)?;
        }
        t.commit().map_err(sql)
    }
}
