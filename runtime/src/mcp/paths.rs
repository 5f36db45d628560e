//! Where the authoring tools (`stratum_compile_speckit`, `stratum_list_workflows`,
//! `stratum_draft_pipeline`) may read and write, for a caller on another machine.
//!
//! On stdio the caller is whoever started the server, on their own machine: a path means what
//! it says. Over HTTP the caller holds only a token, and a path argument must not become a way
//! to read or write the server's files elsewhere: it is taken relative to the server's root
//! (`--root`, the directory `serve` started in), resolved (`..` and symbolic links followed)
//! and refused unless what it names is still under the root.

use std::path::{Path, PathBuf};

use super::args::ArgumentError;

/// Where a caller's path arguments may point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PathScope {
    /// Anywhere (stdio: the caller started the server).
    #[default]
    Anywhere,
    /// Only under the server's root (HTTP).
    UnderRoot,
}

/// The directory `given` (the argument `argument`) names, for a caller of `scope` on a server
/// whose root is `root`.
pub fn directory(
    scope: &PathScope,
    root: Option<&Path>,
    argument: &str,
    given: &str,
) -> Result<PathBuf, ArgumentError> {
    match scope {
        PathScope::Anywhere => Ok(PathBuf::from(given)),
        PathScope::UnderRoot => under_root(root, argument, given),
    }
}

fn under_root(root: Option<&Path>, argument: &str, given: &str) -> Result<PathBuf, ArgumentError> {
    let refuse = |message: String| ArgumentError {
        argument: Some(argument.to_owned()),
        message,
    };
    let root = root.ok_or_else(|| {
        refuse(format!(
            "`{argument}` cannot be used over HTTP on this server: it has no root directory \
             (start it with --root DIR)"
        ))
    })?;
    let root = root.canonicalize().map_err(|error| {
        refuse(format!(
            "the server's root directory cannot be read ({error}); ask its operator to check \
             --root"
        ))
    })?;
    let joined = root.join(given);
    let resolved = joined.canonicalize().map_err(|_| {
        refuse(format!(
            "`{given}` is not a directory under the server's root; over HTTP, `{argument}` is a \
             path relative to the directory the server runs in (--root)"
        ))
    })?;
    if !resolved.starts_with(&root) {
        return Err(refuse(format!(
            "`{given}` is outside the server's root; over HTTP, `{argument}` must name a \
             directory under the directory the server runs in (--root), such as `.` or \
             `workflows`"
        )));
    }
    if !resolved.is_dir() {
        return Err(refuse(format!(
            "`{given}` is not a directory under the server's root; `{argument}` names a \
             directory"
        )));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("workflows/nested")).unwrap();
        root
    }

    #[test]
    fn anywhere_takes_the_path_as_given() {
        assert_eq!(
            directory(&PathScope::Anywhere, None, "dir", "/etc").unwrap(),
            PathBuf::from("/etc")
        );
    }

    #[test]
    fn relative_paths_under_the_root_are_resolved_from_it() {
        let root = root();
        let scope = PathScope::UnderRoot;
        let canonical = root.path().canonicalize().unwrap();
        assert_eq!(
            directory(&scope, Some(root.path()), "dir", "workflows/nested/..").unwrap(),
            canonical.join("workflows")
        );
        assert_eq!(
            directory(&scope, Some(root.path()), "dir", ".").unwrap(),
            canonical
        );
        let inside = canonical.join("workflows").display().to_string();
        assert!(directory(&scope, Some(root.path()), "dir", &inside).is_ok());
    }

    #[test]
    fn paths_leaving_the_root_are_refused() {
        let root = root();
        let scope = PathScope::UnderRoot;
        for given in ["..", "/etc", "workflows/../../", "/"] {
            let error = directory(&scope, Some(root.path()), "workflows_dir", given).unwrap_err();
            assert_eq!(error.argument.as_deref(), Some("workflows_dir"));
            assert!(
                error.message.contains("outside the server's root"),
                "{given}: {error:?}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_out_of_the_root_is_refused() {
        let root = root();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("escape")).unwrap();
        let error =
            directory(&PathScope::UnderRoot, Some(root.path()), "dir", "escape").unwrap_err();
        assert!(error.message.contains("outside the server's root"));
    }

    #[test]
    fn missing_directories_and_files_are_refused() {
        let root = root();
        std::fs::write(root.path().join("file"), "x").unwrap();
        for given in ["absent", "file"] {
            let error =
                directory(&PathScope::UnderRoot, Some(root.path()), "dir", given).unwrap_err();
            assert!(
                error.message.contains("not a directory"),
                "{given}: {error:?}"
            );
        }
        let error = directory(&PathScope::UnderRoot, None, "dir", ".").unwrap_err();
        assert!(error.message.contains("no root directory"));
    }
}
