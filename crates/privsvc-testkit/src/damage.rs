//! What the reliability campaign (`examples/campaign.rs`) does to a relayer's queue database:
//! damage to a stopped relayer's file, as a failing disk or a bad sector would do it (a flipped
//! bit inside a stored value, which SQLite cannot see and the relayer's own checks must; a
//! broken b-tree page, which SQLite's `PRAGMA quick_check` sees), and a write-ahead log emptied
//! under a running relayer, so that its next writes need new space on the disk.

use std::path::Path;

use crate::StackError;

fn sqlite(e: rusqlite::Error) -> StackError {
    StackError::Config(format!("the relayer's database: {e}"))
}

/// Moves every committed page of the stopped relayer's database `db` into the file itself
/// (`PRAGMA wal_checkpoint(TRUNCATE)`), so that a change of the file's bytes reaches them.
pub fn checkpoint(db: &Path) -> Result<(), StackError> {
    let conn = rusqlite::Connection::open(db).map_err(sqlite)?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .map_err(sqlite)
}

/// Flips the lowest bit of the byte at `offset` within each occurrence of `needle` in `db`;
/// returns how many occurrences there were.
pub fn flip_bit(db: &Path, needle: &[u8], offset: usize) -> Result<usize, StackError> {
    if needle.is_empty() || offset >= needle.len() {
        return Err(StackError::Config(
            "flip_bit: offset outside the needle".into(),
        ));
    }
    let mut bytes = std::fs::read(db)?;
    let mut hits = 0;
    let mut from = 0;
    while let Some(i) = bytes[from..]
        .windows(needle.len())
        .position(|w| w == needle)
    {
        bytes[from + i + offset] ^= 0x01;
        hits += 1;
        from += i + needle.len();
    }
    std::fs::write(db, bytes)?;
    Ok(hits)
}

/// Gives the root page of `table` in `db` an invalid page type: the b-tree is broken, which
/// `PRAGMA quick_check` reports.
pub fn break_table_root(db: &Path, table: &str) -> Result<(), StackError> {
    let (root, page_size): (i64, i64) = {
        let conn = rusqlite::Connection::open(db).map_err(sqlite)?;
        let root = conn
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .map_err(sqlite)?;
        let page_size = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .map_err(sqlite)?;
        (root, page_size)
    };
    let at = usize::try_from((root - 1) * page_size)
        .map_err(|_| StackError::Config(format!("table {table} has no root page")))?;
    let mut bytes = std::fs::read(db)?;
    let byte = bytes
        .get_mut(at)
        .ok_or_else(|| StackError::Config(format!("the root page of {table} is past the file")))?;
    *byte = 0x42;
    std::fs::write(db, bytes)?;
    Ok(())
}

/// Empties the write-ahead log of the running relayer's database `db` (`PRAGMA
/// wal_checkpoint(TRUNCATE)`, tried again for up to 10 s while the relayer's readers hold it):
/// its next commits then need new space on the disk, as after any truncating checkpoint. True
/// when the log was emptied.
pub fn truncate_wal(db: &Path) -> Result<bool, StackError> {
    let conn = rusqlite::Connection::open(db).map_err(sqlite)?;
    conn.busy_timeout(std::time::Duration::from_secs(2))
        .map_err(sqlite)?;
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(10) {
        // (busy, frames in the log, frames checkpointed); busy 0: done.
        let busy: i64 = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .map_err(sqlite)?;
        if busy == 0 {
            return Ok(true);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(false)
}
