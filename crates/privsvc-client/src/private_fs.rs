//! Private files of a client's stores (native only): directories 0700, files 0600, each write
//! to a temporary file with an unpredictable name (created exclusively) that is synced and
//! renamed into place, then the directory synced: a file always holds its old or its new
//! content, and nobody can prepare (or link) the temporary file in advance.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Creates `dir` (and missing parents) with mode 0700 on Unix.
pub(crate) fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// The directory holding `path` (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Replaces the content of `path` with `bytes`, durably (see the module documentation).
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = parent_dir(path);
    private_dir(&dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let temp = dir.join(format!(".{name}.{:032x}.tmp", rand::random::<u128>()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&temp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    let result = written
        .and_then(|()| std::fs::rename(&temp, path))
        .and_then(|()| File::open(&dir)?.sync_all());
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Holds an exclusive advisory lock on `path` (created 0600) for as long as the returned file
/// lives; fails at once when another process (or another open of it) holds it.
pub(crate) fn lock(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    file.try_lock().map_err(|e| match e {
        std::fs::TryLockError::WouldBlock => {
            std::io::Error::new(std::io::ErrorKind::WouldBlock, "locked")
        }
        std::fs::TryLockError::Error(e) => e,
    })?;
    Ok(file)
}
