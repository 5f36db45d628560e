//! The file system side of setup: reads a file as text (absent is not an error), writes a file
//! atomically (a temporary file in the same directory, then a rename, so that a reader or a
//! crash sees the old bytes or the new, never half), removes files and empty directories.

use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use super::SetupError;

/// The file's text, `None` when it does not exist.
pub(crate) fn read(path: &Path) -> Result<Option<String>, SetupError> {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| SetupError::NotUtf8 {
                path: path.to_owned(),
            }),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SetupError::Io {
            action: "read",
            path: path.to_owned(),
            source,
        }),
    }
}

/// Replaces `path`'s content by `text` atomically, creating missing parent directories. A
/// symbolic link is followed, so that a configuration kept elsewhere (a dotfiles repository)
/// is updated where it lives rather than replaced by a plain file; an existing file keeps its
/// permissions.
pub(crate) fn write_atomic(path: &Path, text: &str) -> Result<(), SetupError> {
    let target = resolve_link(path);
    let io = |action: &'static str, at: &Path| {
        let at = at.to_owned();
        move |source| SetupError::Io {
            action,
            path: at,
            source,
        }
    };
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(io("create the directory", &dir))?;
    let name = target
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.stratum-{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        if let Ok(metadata) = fs::metadata(&target) {
            fs::set_permissions(&temp, metadata.permissions())?;
        }
        fs::rename(&temp, &target)
    })();
    if let Err(source) = written {
        let _ = fs::remove_file(&temp);
        return Err(SetupError::Io {
            action: "write",
            path: target,
            source,
        });
    }
    Ok(())
}

/// Whether `path` is a symbolic link (dangling or not).
pub(crate) fn is_link(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|metadata| metadata.file_type().is_symlink())
}

/// Deletes a file; never called on a symbolic link (see [`super::Change::Delete`]).
pub(crate) fn remove(path: &Path) -> Result<(), SetupError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        Err(source) => Err(SetupError::Io {
            action: "remove",
            path: path.to_owned(),
            source,
        }),
    }
}

/// Removes `path` if it is an empty directory; says whether it did.
pub(crate) fn remove_dir_if_empty(path: &Path) -> Result<bool, SetupError> {
    let mut entries = match fs::read_dir(path) {
        Ok(entries) => entries,
        Err(_) => return Ok(false), // absent or not a directory: nothing of ours to remove
    };
    if entries.next().is_some() {
        return Ok(false);
    }
    match fs::remove_dir(path) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(false),
        Err(source) => Err(SetupError::Io {
            action: "remove the empty directory",
            path: path.to_owned(),
            source,
        }),
    }
}

/// Follows symbolic links (a bounded number of them, so that a loop cannot hang us) to the
/// file they name.
fn resolve_link(path: &Path) -> PathBuf {
    let mut current = path.to_owned();
    for _ in 0..16 {
        match fs::read_link(&current) {
            Ok(target) => {
                current = match current.parent() {
                    Some(parent) if target.is_relative() => parent.join(target),
                    _ => target,
                };
            }
            Err(_) => break,
        }
    }
    current
}
