//! `stratum-mcp agents` with fake agent CLIs on a PATH of our own.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a test may unwrap what it set up; JSON indexes to null

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

fn script(dir: &Path, name: &str, body: &str) -> Result {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

#[test]
fn agents_lists_each_cli_with_its_version() -> Result {
    let bin = tempfile::tempdir()?;
    script(bin.path(), "claude", "echo '2.1.76 (Claude Code)'")?;
    script(
        bin.path(),
        "codex",
        "echo 'error: not logged in' >&2\nexit 1",
    )?;
    // No `opencode` on this PATH.
    let output = Command::new(env!("CARGO_BIN_EXE_stratum-mcp"))
        .arg("agents")
        .env("PATH", bin.path())
        .output()?;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout)?;
    let path = |name: &str| bin.path().join(name).display().to_string();
    assert_eq!(
        report,
        json!([
            {"agent": "claude", "path": path("claude"), "status": "found", "version": "2.1.76 (Claude Code)"},
            {"agent": "codex", "path": path("codex"), "status": "failed",
             "reason": "`--version` failed (exit status 1): error: not logged in"},
            {"agent": "opencode", "path": null, "status": "not_found"},
        ])
    );
    Ok(())
}

#[test]
fn agents_takes_a_binary_from_its_flag() -> Result {
    let bin = tempfile::tempdir()?;
    script(bin.path(), "my-opencode", "echo 0.15.3")?;
    let output = Command::new(env!("CARGO_BIN_EXE_stratum-mcp"))
        .args(["agents", "--json", "--opencode"])
        .arg(bin.path().join("my-opencode"))
        .env("PATH", "/nonexistent")
        .output()?;
    let report: Value = serde_json::from_slice(&output.stdout)?;
    assert_eq!(report[2]["status"], "found");
    assert_eq!(report[2]["version"], "0.15.3");
    Ok(())
}
