//! `stratum-mcp` driven by a second client: the official Python MCP SDK, the one many agent
//! frameworks build on, with its default output validation on (every answer checked against
//! its tool's `outputSchema`). The cases are Python scripts in `tests/python/`, over the
//! helpers of `tests/python/stratum_sdk.py`; `scripts/ensure-python-mcp` installs the pinned
//! SDK from the registry when it is missing (the tests are never skipped).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python interpreter with the SDK, from `scripts/ensure-python-mcp`.
fn python() -> PathBuf {
    let script = repository().join("scripts/ensure-python-mcp");
    let output = Command::new(&script)
        .output()
        .expect("scripts/ensure-python-mcp runs");
    assert!(
        output.status.success(),
        "scripts/ensure-python-mcp could not provide the Python MCP SDK:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let path = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(
        !path.is_empty(),
        "scripts/ensure-python-mcp printed no interpreter"
    );
    PathBuf::from(path)
}

/// Runs `tests/python/SCRIPT ARGS` with the SDK's interpreter; panics with its output unless
/// it exits 0.
fn run_python(script: &str, args: &[&Path]) -> Output {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let output = Command::new(python())
        .arg(&path)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|error| panic!("{script}: {error}"));
    assert!(
        output.status.success(),
        "{script} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn the_python_sdk_drives_flows_over_stdio_with_output_validation_on() {
    let home = tempfile::tempdir().expect("state dir");
    let work = tempfile::tempdir().expect("work dir");
    let output = run_python(
        "flows_over_stdio.py",
        &[
            Path::new(env!("CARGO_BIN_EXE_stratum-mcp")),
            home.path(),
            work.path(),
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "ok sentiment\nok reviewed_work\nok refused_calls\n"
    );
}
