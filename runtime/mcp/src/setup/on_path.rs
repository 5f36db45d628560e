//! Whether the command install registers (`stratum-mcp`) can be started by name: Claude Code and
//! Codex start it through `PATH`, so an install run as `./target/release/stratum-mcp install`
//! registers a server they cannot start. Takes the command and the `PATH` value; gives where
//! the command is found, and the warning to print when it is not.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The first executable file named `command` in the directories of `path_var`.
pub fn find_on_path(command: &str, path_var: Option<&OsStr>) -> Option<PathBuf> {
    let path_var = path_var?;
    std::env::split_paths(path_var)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate))
}

/// The warning for a `command` not on `PATH`, naming this program's own absolute path.
pub fn not_on_path_warning(command: &str, this_program: Option<&Path>) -> String {
    let fix = match this_program {
        Some(program) => format!(
            "put its directory on PATH (`export PATH=\"{}:$PATH\"`), or install it with \
             `cargo install --locked --path runtime --bin {command}`",
            program.parent().map_or_else(
                || program.display().to_string(),
                |dir| dir.display().to_string()
            )
        ),
        None => format!("install it with `cargo install --locked --path runtime --bin {command}`"),
    };
    format!(
        "warning: `{command}` is not on PATH, so Claude Code and Codex cannot start the server \
         install registered (they start `{command}` by name): {fix}"
    )
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn only_an_executable_file_on_path_counts() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let path_var = std::env::join_paths([dir.path(), &bin]).unwrap();
        assert_eq!(find_on_path("stratum-mcp", Some(&path_var)), None);
        std::fs::write(dir.path().join("stratum-mcp"), "not executable").unwrap();
        assert_eq!(find_on_path("stratum-mcp", Some(&path_var)), None);
        let program = bin.join("stratum-mcp");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        assert_eq!(find_on_path("stratum-mcp", Some(&path_var)), Some(program));
        assert_eq!(find_on_path("stratum-mcp", None), None);
    }

    #[test]
    fn the_warning_offers_this_programs_directory() {
        let warning = not_on_path_warning(
            "stratum-mcp",
            Some(Path::new("/src/stratumc/target/release/stratum-mcp")),
        );
        assert!(
            warning.contains("`stratum-mcp` is not on PATH"),
            "{warning}"
        );
        assert!(
            warning.contains("export PATH=\"/src/stratumc/target/release:$PATH\""),
            "{warning}"
        );
    }
}
