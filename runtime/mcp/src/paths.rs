//! Where the authoring tools (`stratum_compile_speckit`, `stratum_list_workflows`,
//! `stratum_draft_pipeline`) may read and write, for a caller on another machine.
//!
//! On stdio the caller is whoever started the server, on their own machine: a path means what
//! it says. Over HTTP the caller holds only a token, and a path argument must not become a way
//! to read or write the server's files elsewhere: it is taken relative to the server's root
//! (`--root`, the directory `serve` started in), resolved (`..` and symbolic links followed)
//! and refused unless what it names is still under the root. The canonical root comes back
//! with the directory ([`Confined`]), since every file the tool then opens inside the
//! directory must also resolve under it (a link inside an allowed directory leads anywhere).

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

/// A directory a tool reads or writes in, and the canonical root every file it opens there
/// must resolve under (over HTTP; `None` on stdio).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confined {
    pub path: PathBuf,
    pub root: Option<PathBuf>,
}

/// The directory `given` (the argument `argument`) names, for a caller of `scope` on a server
/// whose root is `root`.
pub fn directory(
    scope: &PathScope,
    root: Option<&Path>,
    argument: &str,
    given: &str,
) -> Result<Confined, ArgumentError> {
    confine(scope, root, argument, given, under_root)
}

/// The directory `given` names, which need not exist yet: over HTTP its deepest existing
/// ancestor must resolve under the root and the rest must be plain names (no `..`), so that
/// creating it makes directories under the root only.
pub fn writable_directory(
    scope: &PathScope,
    root: Option<&Path>,
    argument: &str,
    given: &str,
) -> Result<Confined, ArgumentError> {
    confine(scope, root, argument, given, creatable_under)
}

/// `given` as it is for a caller of [`PathScope::Anywhere`]; else resolved under the canonical
/// root by `resolve`, which refuses what leaves it.
fn confine(
    scope: &PathScope,
    root: Option<&Path>,
    argument: &str,
    given: &str,
    resolve: fn(&Path, &str, &str) -> Result<PathBuf, ArgumentError>,
) -> Result<Confined, ArgumentError> {
    match scope {
        PathScope::Anywhere => Ok(Confined {
            path: PathBuf::from(given),
            root: None,
        }),
        PathScope::UnderRoot => {
            let root = canonical_root(root, argument)?;
            let path = resolve(&root, argument, given)?;
            Ok(Confined {
                path,
                root: Some(root),
            })
        }
    }
}

/// The refusal of the argument `argument`, saying `message`.
fn refused(argument: &str, message: String) -> ArgumentError {
    ArgumentError {
        argument: Some(argument.to_owned()),
        message,
    }
}

/// `root/given` with its existing part resolved, refused when that part leaves the root or
/// the missing part climbs.
fn creatable_under(root: &Path, argument: &str, given: &str) -> Result<PathBuf, ArgumentError> {
    let refuse = |message: String| refused(argument, message);
    let outside = || {
        refuse(format!(
            "`{given}` is outside the server's root; over HTTP, `{argument}` must name a \
             directory under the directory the server runs in (--root), such as `.` or \
             `project`"
        ))
    };
    let joined = root.join(given);
    let mut existing = joined.as_path();
    let mut missing = Vec::new();
    // `symlink_metadata`: a dangling link exists, and resolving it below refuses it, rather
    // than creating its target wherever it points.
    while existing.symlink_metadata().is_err() {
        let (Some(name), Some(parent)) = (existing.file_name(), existing.parent()) else {
            return Err(outside());
        };
        missing.push(name);
        existing = parent;
    }
    let resolved = existing.canonicalize().map_err(|_| outside())?;
    if !resolved.starts_with(root) {
        return Err(outside());
    }
    // The missing part is plain names: the walk up stopped with a refusal at any `..` in it
    // (`file_name` is `None` there), so creating it cannot climb out of `resolved`.
    let mut path = resolved;
    path.extend(missing.iter().rev());
    Ok(path)
}

fn canonical_root(root: Option<&Path>, argument: &str) -> Result<PathBuf, ArgumentError> {
    let refuse = |message: String| refused(argument, message);
    let root = root.ok_or_else(|| {
        refuse(format!(
            "`{argument}` cannot be used over HTTP on this server: it has no root directory \
             (start it with --root DIR)"
        ))
    })?;
    root.canonicalize().map_err(|error| {
        refuse(format!(
            "the server's root directory cannot be read ({error}); ask its operator to check \
             --root"
        ))
    })
}

/// `root/given` resolved, refused unless it is a directory under `root` (canonical).
fn under_root(root: &Path, argument: &str, given: &str) -> Result<PathBuf, ArgumentError> {
    let refuse = |message: String| refused(argument, message);
    let joined = root.join(given);
    let resolved = joined.canonicalize().map_err(|_| {
        refuse(format!(
            "`{given}` is not a directory under the server's root; over HTTP, `{argument}` is a \
             path relative to the directory the server runs in (--root)"
        ))
    })?;
    if !resolved.starts_with(root) {
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
            Confined {
                path: PathBuf::from("/etc"),
                root: None
            }
        );
    }

    #[test]
    fn relative_paths_under_the_root_are_resolved_from_it() {
        let root = root();
        let scope = PathScope::UnderRoot;
        let canonical = root.path().canonicalize().unwrap();
        assert_eq!(
            directory(&scope, Some(root.path()), "dir", "workflows/nested/..").unwrap(),
            Confined {
                path: canonical.join("workflows"),
                root: Some(canonical.clone())
            }
        );
        assert_eq!(
            directory(&scope, Some(root.path()), "dir", ".")
                .unwrap()
                .path,
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
    fn a_writable_directory_may_not_exist_yet_but_stays_under_the_root() {
        let root = root();
        let scope = PathScope::UnderRoot;
        let canonical = root.path().canonicalize().unwrap();
        let writable =
            writable_directory(&scope, Some(root.path()), "project_dir", "new/project").unwrap();
        assert_eq!(writable.path, canonical.join("new/project"));
        assert_eq!(writable.root.as_deref(), Some(canonical.as_path()));
        assert_eq!(
            writable_directory(&scope, Some(root.path()), "project_dir", "workflows/../x")
                .unwrap()
                .path,
            canonical.join("x")
        );
        for given in [
            "..",
            "../sibling",
            "/elsewhere/new",
            "absent/../../x",
            "a/b/..",
        ] {
            let error =
                writable_directory(&scope, Some(root.path()), "project_dir", given).unwrap_err();
            assert!(
                error.message.contains("outside the server's root"),
                "{given}: {error:?}"
            );
        }
        assert_eq!(
            writable_directory(&PathScope::Anywhere, None, "project_dir", "/any/where").unwrap(),
            Confined {
                path: PathBuf::from("/any/where"),
                root: None
            }
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_writable_directory_through_a_link_out_of_the_root_is_refused() {
        let root = root();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("escape")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("absent"), root.path().join("dangling"))
            .unwrap();
        for given in ["escape", "escape/new", "dangling", "dangling/new"] {
            let error = writable_directory(&PathScope::UnderRoot, Some(root.path()), "dir", given)
                .unwrap_err();
            assert!(
                error.message.contains("outside the server's root"),
                "{given}: {error:?}"
            );
        }
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
