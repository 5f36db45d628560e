//! `stratum-mcp doctor`: what a person checks first when something does not work, checked at
//! once. The binary's version; `STRATUM_HOME` and its permissions; the store reachable and its
//! schema (read without creating or migrating anything); PostgreSQL's TLS in effect; in the
//! project of the current directory, whether `.mcp.json`, the hook, the skill and the user's
//! Codex config point at a binary that exists; which agent CLIs are installed, and their
//! versions; a `serve` URL reachable, with a token when one is given.
//!
//! Each check is one [`Check`]: ok, a warning, a problem (with the `fix`), or skipped (nothing
//! to check here). The command exits 1 when any check found a problem, 0 otherwise.

use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use stratum_grammar::print::visible;

use super::SchemaVersion;
use crate::location::Location;
use crate::setup::{HOOK_COMMAND, find_on_path};

/// The largest settings file (`.mcp.json`, the Codex config) doctor reads.
const MAX_SETTINGS_BYTES: u64 = 4 << 20;

/// How long the store and a `serve` URL get to answer.
const DEADLINE: Duration = Duration::from_secs(5);

/// What `stratum-mcp doctor` found.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Report {
    #[serde(rename = "_schema_version")]
    pub schema_version: SchemaVersion,
    /// The binary's version.
    pub version: String,
    /// Whether no check found a problem (warnings allowed).
    pub ok: bool,
    pub checks: Vec<Check>,
}

/// One thing checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// What was checked: `version`, `home`, `store`, `store_tls`, `mcp_json`, `hook`, `skill`,
    /// `codex`, `agent:<name>`, `serve`.
    pub name: String,
    pub status: Status,
    /// What was found, on one line.
    pub detail: String,
    /// What to do about a problem or warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Warning,
    Problem,
    /// Nothing to check here (no project set up, no URL given).
    Skipped,
}

impl Check {
    fn new(name: impl Into<String>, status: Status, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            status,
            detail: detail.into(),
            fix: None,
        }
    }

    fn ok(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check::new(name, Status::Ok, detail)
    }

    fn skipped(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check::new(name, Status::Skipped, detail)
    }

    fn problem(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            fix: Some(fix.into()),
            ..Check::new(name, Status::Problem, detail)
        }
    }

    fn warning(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            fix: Some(fix.into()),
            ..Check::new(name, Status::Warning, detail)
        }
    }
}

/// What the checks look at.
pub struct Inputs {
    /// `STRATUM_HOME` (default `~/.stratum`).
    pub home: PathBuf,
    /// Where the store is (the default: `$STRATUM_HOME/stratum.db`).
    pub store: Location,
    /// The project: the current directory.
    pub project: PathBuf,
    /// The user's home directory, for `~/.codex/config.toml`.
    pub user_home: Option<PathBuf>,
    /// `PATH`, as the agent's client would start the binaries with it.
    pub path: Option<std::ffi::OsString>,
    /// A `serve` URL to reach, and the token to reach it with.
    pub serve: Option<(String, Option<String>)>,
    /// The agent CLIs, as `stratum-mcp agents` detects them.
    pub agents: Vec<stratum_agents::Detection>,
}

/// Runs every check.
pub fn diagnose(inputs: &Inputs) -> Report {
    let mut checks = vec![Check::ok(
        "version",
        format!("stratum-mcp {}", env!("CARGO_PKG_VERSION")),
    )];
    checks.push(home(&inputs.home));
    checks.extend(store(&inputs.store));
    checks.extend(project(inputs));
    checks.extend(inputs.agents.iter().map(agent));
    checks.push(match &inputs.serve {
        Some((url, token)) => serve(url, token.as_deref()),
        None => Check::skipped(
            "serve",
            "no URL given (--serve URL, the token in STRATUM_TOKEN)",
        ),
    });
    Report {
        schema_version: SchemaVersion,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ok: checks.iter().all(|check| check.status != Status::Problem),
        checks,
    }
}

/// The report for a person: a line a check, and a `fix:` line under each problem and warning.
pub fn human(report: &Report) -> String {
    let mut text = String::new();
    for check in &report.checks {
        let status = match check.status {
            Status::Ok => "ok",
            Status::Warning => "warning",
            Status::Problem => "problem",
            Status::Skipped => "skipped",
        };
        // Paths and messages may hold anything a file name can: shown as escapes, never
        // acting on the terminal.
        text.push_str(&format!(
            "{status:<8} {:<14} {}\n",
            check.name,
            visible(&check.detail)
        ));
        if let Some(fix) = &check.fix {
            text.push_str(&format!("{:<8} {:<14} fix: {}\n", "", "", visible(fix)));
        }
    }
    let problems = report
        .checks
        .iter()
        .filter(|check| check.status == Status::Problem)
        .count();
    text.push_str(&match problems {
        0 => "no problems found\n".to_owned(),
        1 => "1 problem found\n".to_owned(),
        n => format!("{n} problems found\n"),
    });
    text
}

/// `STRATUM_HOME`: absent is fine (made on first use); it must be a directory only its owner
/// reads, as the store in it holds every flow's results and the access tokens' hashes.
fn home(home: &Path) -> Check {
    let shown = home.display();
    let Ok(metadata) = std::fs::metadata(home) else {
        return Check::ok(
            "home",
            format!("{shown} does not exist yet (made on first use)"),
        );
    };
    if !metadata.is_dir() {
        return Check::problem(
            "home",
            format!("{shown} is not a directory"),
            "move it away, or set STRATUM_HOME to a directory of yours",
        );
    }
    match group_or_others_bits(&metadata) {
        Some(0) | None => Check::ok("home", format!("{shown} (only its owner can read it)")),
        Some(mode) => Check::problem(
            "home",
            format!("{shown} is readable by others (mode {:o})", mode & 0o777),
            format!("chmod 700 {shown}"),
        ),
    }
}

/// The permission bits a file gives its group and others (Unix); `None` elsewhere.
fn group_or_others_bits(metadata: &std::fs::Metadata) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        Some(metadata.permissions().mode() & 0o077)
    }
    #[cfg(not(unix))]
    {
        let _ = metadata;
        None
    }
}

/// The store: reachable, at which schema version; for PostgreSQL, the TLS in effect.
fn store(location: &Location) -> Vec<Check> {
    match location {
        Location::Sqlite(path) => vec![sqlite(path)],
        Location::Postgres(url) => postgres(url),
    }
}

fn sqlite(path: &Path) -> Check {
    let shown = path.display();
    match stratum_store_sqlite::SqliteStore::stored_schema_version(path) {
        Ok(None) => Check::ok(
            "store",
            format!("{shown} does not exist yet (made on first use)"),
        ),
        Ok(Some(found)) => {
            let mut check = schema("store", &format!("SQLite {shown}"), found, sqlite_latest());
            if check.status == Status::Ok
                && let Ok(metadata) = std::fs::metadata(path)
                && let Some(mode) = group_or_others_bits(&metadata).filter(|mode| *mode != 0)
            {
                check = Check::problem(
                    "store",
                    format!("{shown} is readable by others (mode {:o})", mode & 0o777),
                    format!("chmod 600 {shown}"),
                );
            }
            check
        }
        Err(error) => Check::problem(
            "store",
            format!("cannot read {shown}: {error}"),
            "check that the file is a stratum-mcp database and that you may read it",
        ),
    }
}

fn sqlite_latest() -> i64 {
    stratum_store_sqlite::SCHEMA_VERSION
}

fn postgres(url: &str) -> Vec<Check> {
    let shown = crate::location::redact(url);
    let inspection = match stratum_store_postgres::PostgresStore::inspect(url, DEADLINE) {
        Ok(inspection) => inspection,
        Err(error) => {
            return vec![Check::problem(
                "store",
                format!("PostgreSQL {shown}: {error}"),
                "check that the server is up, that the URL (--database-url or \
                 STRATUM_DATABASE_URL) names it, and that its user may connect",
            )];
        }
    };
    let place = format!("PostgreSQL {}", inspection.target);
    let schema = match inspection.schema_version {
        None => Check::ok(
            "store",
            format!(
                "{place} reachable; no stratum-mcp has used it yet (its tables are made on first use)"
            ),
        ),
        Some(found) => schema(
            "store",
            &place,
            found,
            stratum_store_postgres::SCHEMA_VERSION,
        ),
    };
    let encrypted = match inspection.encrypted {
        Some(true) => ", this connection encrypted",
        Some(false) => ", this connection NOT encrypted",
        None => "",
    };
    let roots = inspection
        .root_cert
        .as_ref()
        .map_or_else(String::new, |path| {
            format!(", authorities from {}", path.display())
        });
    let detail = format!("sslmode={}{roots}{encrypted}", inspection.sslmode);
    let tls = if inspection.verifies {
        Check::ok("store_tls", detail)
    } else {
        Check::warning(
            "store_tls",
            format!("{detail}: the server's certificate is not checked"),
            "add sslmode=verify-full to the database URL (and sslrootcert=PATH when the \
             server's certificate is not from a public authority)",
        )
    };
    vec![schema, tls]
}

/// A store at schema version `found`, of which this binary writes `latest`.
fn schema(name: &str, place: &str, found: i64, latest: i64) -> Check {
    if found == latest {
        Check::ok(name, format!("{place}, schema version {found} (current)"))
    } else if found < latest {
        Check::ok(
            name,
            format!(
                "{place}, schema version {found}; this binary migrates it to {latest} on first use"
            ),
        )
    } else {
        Check::problem(
            name,
            format!("{place} has schema version {found}, newer than this binary's {latest}"),
            "upgrade stratum-mcp to the version that wrote it (cargo install --locked --path \
             runtime/cli in a newer checkout)",
        )
    }
}

/// The project of the current directory: what `stratum-mcp install` wrote, and whether each
/// piece runs a binary that exists.
fn project(inputs: &Inputs) -> Vec<Check> {
    let project = &inputs.project;
    let mut checks = Vec::new();
    let mcp_json = project.join(".mcp.json");
    let registered = match read_json(&mcp_json) {
        None => None,
        Some(Err(error)) => {
            checks.push(Check::problem(
                "mcp_json",
                format!("{} cannot be read: {error}", mcp_json.display()),
                "fix the file (it is JSON), then run `stratum-mcp install` again",
            ));
            None
        }
        Some(Ok(value)) => value
            .pointer("/mcpServers/stratum/command")
            .and_then(Value::as_str)
            .map(str::to_owned),
    };
    let set_up = registered.is_some();
    checks.push(match registered {
        Some(command) => runs(
            "mcp_json",
            &format!("{} registers `{command}`", mcp_json.display()),
            &command,
            &inputs.path,
        ),
        None if checks.is_empty() => Check::skipped(
            "mcp_json",
            format!(
                "no `stratum` server in {} (run `stratum-mcp install` to set this project up)",
                mcp_json.display()
            ),
        ),
        None => return checks,
    });
    let settings = project.join(".claude/settings.json");
    let hooked = read_json(&settings)
        .and_then(Result::ok)
        .is_some_and(|value| value.to_string().contains(HOOK_COMMAND));
    checks.push(if hooked {
        runs(
            "hook",
            &format!("{} runs `{HOOK_COMMAND}`", settings.display()),
            HOOK_COMMAND,
            &inputs.path,
        )
    } else if set_up {
        Check::warning(
            "hook",
            format!("no `{HOOK_COMMAND}` hook in {}", settings.display()),
            "run `stratum-mcp install` again to add it (it checks specs as they are written)",
        )
    } else {
        Check::skipped("hook", "this project is not set up")
    });
    let skill = project.join(".claude/skills/stratum/SKILL.md");
    checks.push(if skill.is_file() {
        Check::ok("skill", format!("{}", skill.display()))
    } else if set_up {
        Check::warning(
            "skill",
            format!("{} is missing", skill.display()),
            "run `stratum-mcp install` again to add it",
        )
    } else {
        Check::skipped("skill", "this project is not set up")
    });
    checks.push(codex(inputs));
    checks
}

/// The user's Codex config: a `[mcp_servers.stratum]` whose command exists.
fn codex(inputs: &Inputs) -> Check {
    let Some(config) = inputs
        .user_home
        .as_ref()
        .map(|home| home.join(".codex/config.toml"))
    else {
        return Check::skipped("codex", "HOME is not set");
    };
    let text = match read_small(&config) {
        None => return Check::skipped("codex", format!("no {}", config.display())),
        Some(Err(error)) => {
            return Check::problem(
                "codex",
                format!("{} cannot be read: {error}", config.display()),
                "fix the file; Codex cannot read it either",
            );
        }
        Some(Ok(text)) => text,
    };
    let document: toml_edit::DocumentMut = match text.parse() {
        Ok(document) => document,
        Err(error) => {
            return Check::problem(
                "codex",
                format!(
                    "{} is not valid TOML: {}",
                    config.display(),
                    error.message()
                ),
                "fix the file; Codex cannot read it either",
            );
        }
    };
    let command = document
        .get("mcp_servers")
        .and_then(|servers| servers.get("stratum"))
        .and_then(|stratum| stratum.get("command"))
        .and_then(|command| command.as_str())
        .map(str::to_owned);
    match command {
        Some(command) => runs(
            "codex",
            &format!("{} registers `{command}`", config.display()),
            &command,
            &inputs.path,
        ),
        None => Check::skipped(
            "codex",
            format!(
                "no `stratum` server in {} (`stratum-mcp install --codex` adds one)",
                config.display()
            ),
        ),
    }
}

/// Whether the program `command` starts with (a path, or a name on `path`) exists.
fn runs(name: &str, what: &str, command: &str, path: &Option<std::ffi::OsString>) -> Check {
    let program = command.split_whitespace().next().unwrap_or_default();
    let found = if program.contains(std::path::MAIN_SEPARATOR) {
        let candidate = PathBuf::from(program);
        candidate.is_file().then_some(candidate)
    } else {
        find_on_path(program, path.as_deref())
    };
    match found {
        Some(binary) => Check::ok(name, format!("{what}: {}", binary.display())),
        None => Check::problem(
            name,
            format!("{what}, which is not on PATH"),
            format!(
                "install it (cargo install --locked --path runtime/cli) or put the directory of \
                 `{program}` on the PATH the agent starts with"
            ),
        ),
    }
}

/// `Some(parsed)` when the file exists.
fn read_json(path: &Path) -> Option<Result<Value, String>> {
    let text = match read_small(path)? {
        Ok(text) => text,
        Err(error) => return Some(Err(error)),
    };
    Some(
        jsonc_parser::parse_to_serde_value::<Value>(&text, &jsonc_parser::ParseOptions::default())
            .map_err(|error| error.to_string()),
    )
}

/// The text of a settings file, when it exists; one larger than [`MAX_SETTINGS_BYTES`] (a
/// project can hold anything) is not read.
fn read_small(path: &Path) -> Option<Result<String, String>> {
    let size = std::fs::metadata(path).ok()?.len();
    if size > MAX_SETTINGS_BYTES {
        return Some(Err(format!(
            "it is {size} bytes, more than a settings file holds ({MAX_SETTINGS_BYTES})"
        )));
    }
    Some(std::fs::read_to_string(path).map_err(|error| error.to_string()))
}

/// One agent CLI: installed and its version, or not installed (nothing wrong with that).
fn agent(detection: &stratum_agents::Detection) -> Check {
    let name = format!("agent:{}", detection.agent.name());
    let at = detection
        .path
        .as_ref()
        .map_or_else(String::new, |path| format!(" ({})", path.display()));
    match &detection.status {
        stratum_agents::DetectionStatus::Found { version } => {
            Check::ok(name, format!("{version}{at}"))
        }
        stratum_agents::DetectionStatus::NotFound => Check::skipped(name, "not installed"),
        stratum_agents::DetectionStatus::Failed { reason } => Check::warning(
            name,
            format!("found{at}, but `--version` failed: {reason}"),
            "run it by hand to see why; flows that run this agent will fail the same way",
        ),
    }
}

/// A `serve` URL: reachable (its sign-in page), and with `token`, the token accepted.
fn serve(url: &str, token: Option<&str>) -> Check {
    let base = url.trim_end_matches('/').to_owned();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(DEADLINE))
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let status = match agent.get(format!("{base}/signin")).call() {
        Ok(answer) => answer.status(),
        Err(error) => {
            return Check::problem(
                "serve",
                format!("{base} cannot be reached: {error}"),
                "check that `stratum-mcp serve` runs there and that the URL (scheme, host, \
                 port) is the one it prints at start",
            );
        }
    };
    if !status.is_success() {
        return Check::problem(
            "serve",
            format!("{base}/signin answered {status}: this is not a stratum-mcp serve"),
            "check the URL",
        );
    }
    let Some(token) = token else {
        return Check::ok(
            "serve",
            format!("{base} reachable (no token given: set STRATUM_TOKEN to check one)"),
        );
    };
    let answer = agent
        .get(format!("{base}/gates"))
        .header("Authorization", format!("Bearer {token}"))
        .call();
    match answer.map(|answer| answer.status()) {
        Ok(status) if status.is_success() => {
            Check::ok("serve", format!("{base} reachable, the token accepted"))
        }
        Ok(status) if status.as_u16() == 401 => Check::problem(
            "serve",
            format!("{base} refused the token (401)"),
            "make a token on the server's store with `stratum-mcp token create --name NAME` \
             and set STRATUM_TOKEN to the secret it prints once",
        ),
        Ok(status) => Check::problem(
            "serve",
            format!("{base}/gates answered {status} with the token"),
            "read serve's log for why",
        ),
        Err(error) => Check::problem(
            "serve",
            format!("{base} stopped answering: {error}"),
            "retry; read serve's log",
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    fn inputs(home: &Path, project: &Path) -> Inputs {
        Inputs {
            home: home.to_owned(),
            store: Location::Sqlite(home.join("stratum.db")),
            project: project.to_owned(),
            user_home: Some(project.join("user")),
            path: None,
            serve: None,
            agents: Vec::new(),
        }
    }

    fn by_name<'r>(report: &'r Report, name: &str) -> &'r Check {
        report
            .checks
            .iter()
            .find(|check| check.name == name)
            .unwrap()
    }

    #[test]
    fn a_fresh_machine_has_no_problem() {
        let dir = tempfile::tempdir().unwrap();
        let report = diagnose(&inputs(&dir.path().join("state"), dir.path()));
        assert!(report.ok, "{report:#?}");
        assert_eq!(by_name(&report, "store").status, Status::Ok);
        assert_eq!(by_name(&report, "mcp_json").status, Status::Skipped);
        assert_eq!(by_name(&report, "serve").status, Status::Skipped);
    }

    #[cfg(unix)]
    #[test]
    fn a_home_others_can_read_is_a_problem_with_its_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("state");
        std::fs::create_dir(&home).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
        let report = diagnose(&inputs(&home, dir.path()));
        assert!(!report.ok);
        let check = by_name(&report, "home");
        assert_eq!(check.status, Status::Problem);
        assert_eq!(
            check.fix.as_deref(),
            Some(format!("chmod 700 {}", home.display()).as_str())
        );
        let text = human(&report);
        assert!(text.contains("fix: chmod 700"), "{text}");
        assert!(text.ends_with("1 problem found\n"), "{text}");
    }

    #[test]
    fn a_registered_binary_that_is_not_on_path_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".mcp.json"),
            r#"{"mcpServers": {"stratum": {"command": "stratum-mcp"}}}"#,
        )
        .unwrap();
        let mut given = inputs(&dir.path().join("state"), dir.path());
        let report = diagnose(&given);
        assert_eq!(by_name(&report, "mcp_json").status, Status::Problem);
        assert_eq!(by_name(&report, "hook").status, Status::Warning);
        assert_eq!(by_name(&report, "skill").status, Status::Warning);

        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("stratum-mcp"), "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(
                bin.join("stratum-mcp"),
                std::fs::Permissions::from_mode(0o755),
            )
            .unwrap();
        }
        given.path = Some(bin.into_os_string());
        let report = diagnose(&given);
        assert_eq!(
            by_name(&report, "mcp_json").status,
            Status::Ok,
            "{report:#?}"
        );
    }

    #[test]
    fn a_store_newer_than_the_binary_is_a_problem() {
        assert_eq!(schema("store", "x", 3, 3).status, Status::Ok);
        assert_eq!(schema("store", "x", 2, 3).status, Status::Ok);
        let newer = schema("store", "x", 4, 3);
        assert_eq!(newer.status, Status::Problem);
        assert!(newer.fix.unwrap().contains("upgrade"));
    }
}
