//! The working directory of a run: explicit, canonicalised, and under a root we own.
//!
//! The reference server ran agents in its own working directory when none was given, and took
//! paths as they came; `..` or a symlink could put an agent anywhere. Both paths are resolved
//! here (symlinks included) before the check, so what is checked is what the child gets.

use std::path::{Path, PathBuf};

use crate::Error;

/// `cwd` canonicalised, if it is a directory at or under `root` (also canonicalised).
pub fn confine(cwd: &Path, root: &Path) -> Result<PathBuf, Error> {
    let root = root.canonicalize().map_err(|source| Error::Root {
        path: root.to_owned(),
        source,
    })?;
    let dir = cwd
        .canonicalize()
        .map_err(|source| Error::WorkingDirectory {
            path: cwd.to_owned(),
            source,
        })?;
    if !dir.is_dir() {
        return Err(Error::WorkingDirectory {
            path: cwd.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
        });
    }
    if !dir.starts_with(&root) {
        return Err(Error::OutsideRoot { cwd: dir, root });
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_outside_the_root_is_refused() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("inner"))?;
        std::fs::create_dir_all(tmp.path().join("outside"))?;
        assert_eq!(
            confine(&root.join("inner"), &root)?,
            root.join("inner").canonicalize()?
        );
        let escape = root.join("inner/../../outside");
        assert!(matches!(
            confine(&escape, &root),
            Err(Error::OutsideRoot { .. })
        ));
        std::os::unix::fs::symlink(tmp.path().join("outside"), root.join("link"))?;
        assert!(matches!(
            confine(&root.join("link"), &root),
            Err(Error::OutsideRoot { .. })
        ));
        assert!(matches!(
            confine(&root.join("missing"), &root),
            Err(Error::WorkingDirectory { .. })
        ));
        Ok(())
    }
}
