//! The server's config file: what the people who run a server decide, not a spec's author.
//! `stratum-mcp --config FILE` (or `STRATUM_CONFIG`), else `$STRATUM_HOME/config.toml` when it
//! exists; read by the stdio server and by `serve`.
//!
//! ```toml
//! [gates]
//! # Who may decide a gate through the MCP tools: "agent-may-resolve" (the default, the
//! # reference's behaviour) or "person-only" (an agent's stratum_gate_resolve is refused; it
//! # calls stratum_gate_wait to ask the person in its client, or the person uses the console
//! # or the CLI).
//! policy = "person-only"
//! # Whether the tool call that brings a flow to a gate (stratum_step_done, stratum_resume, ...)
//! # asks the person in the client's form at once, when the client shows forms (default true);
//! # false: only stratum_gate_wait asks.
//! ask_when_reached = true
//! ```
//!
//! An unknown table or key is an error (with the closest known name), so that a typo never
//! leaves a server running with a policy nobody chose.

use std::path::{Path, PathBuf};

use stratum_compiler::diagnostic::did_you_mean;
use stratum_runtime::GatePolicy;
use toml_edit::{DocumentMut, Item};

/// The file's name under `$STRATUM_HOME`.
pub const FILE_NAME: &str = "config.toml";

/// The settings a config file gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub gate_policy: GatePolicy,
    /// Whether the call that brings a flow to a gate asks the person at once.
    pub ask_when_reached: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            gate_policy: GatePolicy::default(),
            ask_when_reached: true,
        }
    }
}

/// Why a config file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot read the config file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the config file {} is not valid TOML: {message}", path.display())]
    Syntax { path: PathBuf, message: String },
    #[error("the config file {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// The settings of `path`.
pub fn load(path: &Path) -> Result<Settings, SettingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&text).map_err(|(syntax, message)| {
        if syntax {
            SettingsError::Syntax {
                path: path.to_owned(),
                message,
            }
        } else {
            SettingsError::Invalid {
                path: path.to_owned(),
                message,
            }
        }
    })
}

/// The settings the server runs with: those of `explicit` (`--config`), else of
/// `$STRATUM_HOME/config.toml` when `home` has one, else the defaults.
pub fn resolve(explicit: Option<&Path>, home: Option<&Path>) -> Result<Settings, SettingsError> {
    if let Some(path) = explicit {
        return load(path);
    }
    match home.map(|home| home.join(FILE_NAME)) {
        Some(path) if path.is_file() => load(&path),
        _ => Ok(Settings::default()),
    }
}

/// The settings in `text`; `Err((is_syntax, message))`.
fn parse(text: &str) -> Result<Settings, (bool, String)> {
    let document: DocumentMut = text
        .parse()
        .map_err(|error: toml_edit::TomlError| (true, error.message().to_owned()))?;
    let mut settings = Settings::default();
    for (key, item) in document.iter() {
        match key {
            "gates" => gates(item, &mut settings)?,
            other => return Err((false, unknown("table", other, &["gates"]))),
        }
    }
    Ok(settings)
}

fn gates(item: &Item, settings: &mut Settings) -> Result<(), (bool, String)> {
    let Some(table) = item.as_table_like() else {
        return Err((false, "`gates` must be a table ([gates])".to_owned()));
    };
    for (key, value) in table.iter() {
        match key {
            "ask_when_reached" => {
                settings.ask_when_reached = value.as_bool().ok_or_else(|| {
                    (
                        false,
                        format!(
                            "gates.ask_when_reached is {}; it is true or false",
                            value.to_string().trim()
                        ),
                    )
                })?;
            }
            "policy" => {
                let name = value.as_str().unwrap_or_default();
                settings.gate_policy = GatePolicy::parse(name).ok_or_else(|| {
                    (
                        false,
                        format!(
                            "gates.policy is {}; it is \"agent-may-resolve\" or \"person-only\"",
                            value.to_string().trim()
                        ),
                    )
                })?;
            }
            other => {
                return Err((
                    false,
                    unknown("key of [gates]", other, &["policy", "ask_when_reached"]),
                ));
            }
        }
    }
    Ok(())
}

fn unknown(what: &str, name: &str, known: &[&str]) -> String {
    match did_you_mean(name, known.iter().copied()) {
        Some(close) => format!("unknown {what} `{name}`; did you mean `{close}`?"),
        None => format!("unknown {what} `{name}`; known: {}", known.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_policy_is_read_and_anything_else_is_refused_with_the_closest_name() {
        assert_eq!(parse(""), Ok(Settings::default()));
        assert_eq!(
            parse("[gates]\npolicy = \"person-only\"\n").map(|settings| settings.gate_policy),
            Ok(GatePolicy::PersonOnly)
        );
        assert_eq!(
            parse("[gates]\npolicy = \"agent-may-resolve\"\n").map(|s| s.gate_policy),
            Ok(GatePolicy::AgentMayResolve)
        );
        assert_eq!(
            parse("[gates]\npolicy = \"nobody\"\n"),
            Err((
                false,
                "gates.policy is \"nobody\"; it is \"agent-may-resolve\" or \"person-only\""
                    .to_owned()
            ))
        );
        assert_eq!(
            parse("[gates]\npolicyy = \"person-only\"\n"),
            Err((
                false,
                "unknown key of [gates] `policyy`; did you mean `policy`?".to_owned()
            ))
        );
        assert_eq!(
            parse("[gate]\n"),
            Err((
                false,
                "unknown table `gate`; did you mean `gates`?".to_owned()
            ))
        );
        assert!(matches!(parse("[gates"), Err((true, _))));
        assert_eq!(
            parse("[gates]\nask_when_reached = false\n").map(|s| s.ask_when_reached),
            Ok(false)
        );
        assert!(Settings::default().ask_when_reached);
        assert_eq!(
            parse("[gates]\nask_when_reached = \"no\"\n"),
            Err((
                false,
                "gates.ask_when_reached is \"no\"; it is true or false".to_owned()
            ))
        );
    }
}
