//! `install`, `uninstall` and the hook command: the binary's side of
//! `stratum_mcp::setup`, which does the work.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use stratum_mcp::setup::{self, InstallArgs, Report, SetupError, UninstallArgs};

use crate::print;

pub fn install(args: &InstallArgs) -> ExitCode {
    let exit = run(args.json, |cwd, home| setup::install(args, cwd, home));
    // On standard error, so that `--json` output stays one document.
    if setup::find_on_path("stratum-mcp", std::env::var_os("PATH").as_deref()).is_none() {
        let this_program = std::env::current_exe().ok();
        eprintln!(
            "{}",
            setup::not_on_path_warning("stratum-mcp", this_program.as_deref())
        );
    }
    exit
}

pub fn uninstall(args: &UninstallArgs) -> ExitCode {
    run(args.json, |cwd, home| setup::uninstall(args, cwd, home))
}

/// Runs install or uninstall in the current directory and prints its report.
fn run(
    json: bool,
    command: impl FnOnce(&std::path::Path, &std::path::Path) -> Result<Report, SetupError>,
) -> ExitCode {
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(error) => {
            eprintln!("stratum-mcp: cannot read the current directory: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Only --codex reads the home directory; without HOME the report says what failed.
    let home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map_or_else(|| cwd.clone(), PathBuf::from);
    match command(&cwd, &home) {
        Ok(report) if json => print::json_with(&report.to_json(), 0),
        Ok(report) => print::text_with(&format!("{report}"), 0),
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `hook post-tool-use`: Claude Code's hook JSON on standard input, diagnostics on standard
/// error, exit 2 when the agent must fix its spec.
pub fn post_tool_use() -> ExitCode {
    let mut input = String::new();
    // Unreadable input is not a hook's: never block the agent on it.
    if std::io::stdin()
        .take(16 * 1024 * 1024)
        .read_to_string(&mut input)
        .is_err()
    {
        return ExitCode::SUCCESS;
    }
    let outcome = setup::post_tool_use_hook(&input);
    if !outcome.stderr.is_empty() {
        eprint!("{}", outcome.stderr);
    }
    ExitCode::from(outcome.exit_code)
}
