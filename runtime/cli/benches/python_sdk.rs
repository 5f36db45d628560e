//! Issue 25's measure: the official Python MCP SDK (default output validation on) driving
//! `stratum-mcp` over stdio and over HTTP (`serve`), 1 and 20 clients, each its own process.
//! Prints per transport and client count the throughput in steps/s, the client's time per call
//! (p50, p99) and the CPU time of the SDK's `jsonschema.validate` per call of `stratum_plan`,
//! `stratum_step_done` and `stratum_commit`. The driver is `tests/python/bench_sdk.py`;
//! `scripts/ensure-python-mcp` installs the SDK when missing.
//!
//! `cargo bench -p stratum-mcp-cli --bench python_sdk [-- OPTIONS]`, the options those of
//! `bench_sdk.py` (`--clients 1,20`, `--transports stdio,http`, `--validate-against full` for
//! the schemas served before issue 25).

use std::path::Path;
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let runtime = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ensure = runtime.join("../../scripts/ensure-python-mcp");
    let python = match Command::new(&ensure).output() {
        Ok(output) if output.status.success() => {
            String::from_utf8_lossy(&output.stdout).trim().to_owned()
        }
        Ok(output) => {
            eprintln!("{}", String::from_utf8_lossy(&output.stderr));
            return ExitCode::FAILURE;
        }
        Err(error) => {
            eprintln!("{}: {error}", ensure.display());
            return ExitCode::FAILURE;
        }
    };
    // `cargo bench` passes `--bench` to every benchmark; the rest are the driver's options.
    let options = std::env::args().skip(1).filter(|arg| arg != "--bench");
    let status = Command::new(python)
        .arg(runtime.join("tests/python/bench_sdk.py"))
        .arg(env!("CARGO_BIN_EXE_stratum-mcp"))
        .args(options)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .status();
    match status {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => {
            eprintln!("bench_sdk.py: {status}");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("bench_sdk.py: {error}");
            ExitCode::FAILURE
        }
    }
}
