//! `stratum-mcp doctor`: gathers what the checks look at (the store chosen by the global
//! flags, `STRATUM_HOME`, the current directory, `PATH`, the agent CLIs, a `serve` URL and the
//! token in `STRATUM_TOKEN`) and prints `stratum_mcp::cli::doctor`'s report.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use stratum_mcp::cli::doctor::{self, Inputs};

use crate::agents::{self, Binaries};
use crate::operator::StoreAt;
use crate::print;

/// The environment variable a `serve` token is read from (never an argument: argv is visible
/// to every user of the machine).
const TOKEN_ENV: &str = "STRATUM_TOKEN";

pub fn doctor(store: &StoreAt, serve: Option<String>, json: bool) -> ExitCode {
    let location = match store.location() {
        Ok(location) => location,
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            return ExitCode::FAILURE;
        }
    };
    let home = stratum_store_sqlite::SqliteStore::default_path()
        .ok()
        .and_then(|path| path.parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("~/.stratum"));
    let project = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let no_paths = Binaries {
        claude: None,
        codex: None,
        opencode: None,
    };
    let agents = agents::detect(&no_paths).unwrap_or_default();
    let token = std::env::var(TOKEN_ENV)
        .ok()
        .filter(|token| !token.is_empty());
    let inputs = Inputs {
        home,
        store: location,
        project,
        user_home: std::env::var_os("HOME")
            .filter(|home| !home.is_empty())
            .map(PathBuf::from),
        path: std::env::var_os("PATH"),
        serve: serve.map(|url| (url, token)),
        agents,
    };
    let report = doctor::diagnose(&inputs);
    let status = u8::from(!report.ok);
    if json || !std::io::stdout().is_terminal() {
        print::json_with(&serde_json::to_value(&report).unwrap_or_default(), status)
    } else {
        print::text_with(&doctor::human(&report), status)
    }
}
