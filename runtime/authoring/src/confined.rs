//! Reading the files a tool names on a caller's behalf, so that no file read can reach past
//! where the caller may read, or hang the server.
//!
//! Two guards, one per way a file can hurt:
//! - [`resolve_under`] resolves a file (symbolic links followed, `..` applied) and, for a
//!   caller confined to a root (over HTTP), refuses it unless it resolves under that root: a
//!   directory argument checked against the root is not enough, since a link inside it
//!   (`tasks/passwd.md -> /etc/passwd`) leads anywhere.
//! - [`read_regular`] reads a file only when it is a regular file, checked before it is opened
//!   (opening a FIFO for reading waits for a writer, for ever) and again on the opened file,
//!   and never more than a bound.
//!
//! Invariant: the path read is the resolved one, whose last component is not a link, so the
//! file checked is the file opened unless a directory on the way is swapped meanwhile, which
//! needs write access to the directories under the root.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Why a file was not resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// It resolves outside the root (through a symbolic link, since the directory holding it
    /// was checked).
    #[error("it leads outside the server's root")]
    OutsideRoot,
    /// It cannot be resolved: a dangling link, a loop, a directory that cannot be read.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// The canonical path of `path`, refused when `root` (canonical) is given and the path does
/// not resolve under it.
pub fn resolve_under(path: &Path, root: Option<&Path>) -> Result<PathBuf, ResolveError> {
    let resolved = path.canonicalize()?;
    match root {
        Some(root) if !resolved.starts_with(root) => Err(ResolveError::OutsideRoot),
        _ => Ok(resolved),
    }
}

/// The first `limit` bytes of `path`, which must be a regular file (a FIFO, a socket, a
/// device or a directory answers [`io::ErrorKind::InvalidInput`], without being opened).
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let not_regular = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file, so not read",
        )
    };
    if !std::fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::File::open(path)?;
    // Again on what was opened: the path may name another file by now.
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_link_out_of_the_root_is_refused_and_one_inside_is_followed() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let canonical = root.path().canonicalize().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::fs::write(root.path().join("inside"), "i").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.path().join("out")).unwrap();
        std::os::unix::fs::symlink(root.path().join("inside"), root.path().join("in")).unwrap();
        assert!(matches!(
            resolve_under(&root.path().join("out"), Some(&canonical)),
            Err(ResolveError::OutsideRoot)
        ));
        assert_eq!(
            resolve_under(&root.path().join("in"), Some(&canonical)).unwrap(),
            canonical.join("inside")
        );
        // Without a root (stdio), a link means what it says.
        assert!(resolve_under(&root.path().join("out"), None).is_ok());
    }

    #[test]
    fn only_regular_files_are_read_and_never_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "0123456789").unwrap();
        assert_eq!(read_regular(&dir.path().join("file"), 4).unwrap(), b"0123");
        let error = read_regular(dir.path(), 4).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }
}
