//! Free space of `DATA_DIR`'s filesystem, against the floor `MIN_FREE_BYTES`: below it the
//! relayer refuses new records (503 with `Retry-After`) and its health record is not ok, so
//! that the space left goes to recording the batches of the records it already accepted.

use std::path::Path;

/// Bytes available to the relayer's user on the filesystem of `dir` (`statvfs`'s `f_bavail`
/// blocks of `f_frsize` bytes); `None` when the system cannot tell.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    #[cfg(unix)]
    {
        let st = rustix::fs::statvfs(dir).ok()?;
        Some(st.f_bavail.saturating_mul(st.f_frsize))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// Why `dir` is below the floor of `min_free` bytes, or `None` when it is not (or the floor
/// is 0, or the free space cannot be read).
pub fn below_floor(dir: &Path, min_free: u64) -> Option<String> {
    if min_free == 0 {
        return None;
    }
    let free = free_bytes(dir)?;
    (free < min_free)
        .then(|| format!("DATA_DIR has {free} bytes free, below MIN_FREE_BYTES ({min_free})"))
}

/// `DATA_DIR` and its floor `MIN_FREE_BYTES`, for the parts that check it (the intake, the
/// health record, the anchor task).
#[derive(Debug, Clone)]
pub struct DiskFloor {
    /// `DATA_DIR`.
    pub dir: std::path::PathBuf,
    /// `MIN_FREE_BYTES` (0: no floor).
    pub min_free: u64,
}

impl DiskFloor {
    /// Why `DATA_DIR` is below its floor now, if it is ([`below_floor`]).
    pub fn below(&self) -> Option<String> {
        below_floor(&self.dir, self.min_free)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_floor_compares_the_real_free_space() {
        let dir = tempfile::tempdir().unwrap();
        let free = free_bytes(dir.path()).expect("statvfs answers on unix");
        assert!(free > 0);
        assert_eq!(below_floor(dir.path(), 0), None);
        assert_eq!(below_floor(dir.path(), 1), None);
        let why = below_floor(dir.path(), u64::MAX).unwrap();
        assert!(why.contains("below MIN_FREE_BYTES"), "{why}");
    }
}
