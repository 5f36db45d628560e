//! The server's config file: what the people who run a server decide, not a spec's author.
//! `stratum-mcp --config FILE` (or `STRATUM_CONFIG`), else `$STRATUM_HOME/config.toml` when it
//! exists; read by the stdio server, by `serve` and by the operator CLI's `gate` commands, so
//! that a gate's rules hold whichever way its decision arrives.
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
//!
//! # Approval rules of one gate function (its name in the spec); every key is optional.
//! [gates.functions.release_review]
//! min_approvals = 2             # distinct identities that must approve (default 1)
//! approvers = ["alice", "bob"]  # who may decide it at all: token names, "os:<user>" (default: anyone)
//! self_approval = false         # may the identity that started the flow approve it (default true)
//! ```
//!
//! A gate whose function has rules takes a decision only from an identity the server can
//! vouch for ([`crate::identity`]): an access token's name over HTTP and in the console,
//! `os:<user>` from the operator CLI and from a form a stdio server's client showed. An
//! agent's own `stratum_gate_resolve` over stdio has none and is refused (`identity_required`).
//! The rules themselves are enforced by the runtime's core, on every path.
//!
//! An unknown table or key is an error (with the closest known name), and so is a rule no
//! decision could ever meet (`min_approvals` above the number of `approvers`), so that a typo
//! never leaves a server running with rules nobody chose.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stratum_compiler::diagnostic::did_you_mean;
use stratum_runtime::{GatePolicy, GateRule};
use toml_edit::{DocumentMut, Item, TableLike};

/// The file's name under `$STRATUM_HOME`.
pub const FILE_NAME: &str = "config.toml";

/// The settings a config file gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub gate_policy: GatePolicy,
    /// Whether the call that brings a flow to a gate asks the person at once.
    pub ask_when_reached: bool,
    /// Approval rules by gate function name.
    pub gate_rules: BTreeMap<String, GateRule>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            gate_policy: GatePolicy::default(),
            ask_when_reached: true,
            gate_rules: BTreeMap::new(),
        }
    }
}

impl Settings {
    /// `config` with these settings.
    pub fn apply(&self, config: stratum_runtime::Config) -> stratum_runtime::Config {
        config
            .with_gate_policy(self.gate_policy)
            .with_ask_when_reached(self.ask_when_reached)
            .with_gate_rules(self.gate_rules.clone())
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
            "gates" => gates(item, &mut settings).map_err(|message| (false, message))?,
            other => return Err((false, unknown("table", other, &["gates"]))),
        }
    }
    Ok(settings)
}

/// `[gates]`: the policy and `[gates.functions.*]`.
fn gates(item: &Item, settings: &mut Settings) -> Result<(), String> {
    let table = table(item, "gates")?;
    for (key, value) in table.iter() {
        match key {
            "policy" => settings.gate_policy = policy(value)?,
            "ask_when_reached" => {
                settings.ask_when_reached = value.as_bool().ok_or_else(|| {
                    format!(
                        "gates.ask_when_reached is {}; it is true or false",
                        value.to_string().trim()
                    )
                })?;
            }
            "functions" => settings.gate_rules = functions(value)?,
            other => {
                return Err(unknown(
                    "key of [gates]",
                    other,
                    &["policy", "ask_when_reached", "functions"],
                ));
            }
        }
    }
    Ok(())
}

fn policy(value: &Item) -> Result<GatePolicy, String> {
    let name = value.as_str().unwrap_or_default();
    GatePolicy::parse(name).ok_or_else(|| {
        format!(
            "gates.policy is {}; it is \"agent-may-resolve\" or \"person-only\"",
            value.to_string().trim()
        )
    })
}

/// `[gates.functions]`: one table of rules per gate function.
fn functions(item: &Item) -> Result<BTreeMap<String, GateRule>, String> {
    let table = table(item, "gates.functions")?;
    let mut rules = BTreeMap::new();
    for (function, value) in table.iter() {
        rules.insert(function.to_owned(), rule(function, value)?);
    }
    Ok(rules)
}

const RULE_KEYS: [&str; 3] = ["min_approvals", "approvers", "self_approval"];

/// `[gates.functions.NAME]`.
fn rule(function: &str, item: &Item) -> Result<GateRule, String> {
    let path = format!("gates.functions.{function}");
    let table = table(item, &path)?;
    let mut rule = GateRule::default();
    for (key, value) in table.iter() {
        match key {
            "min_approvals" => rule.min_approvals = min_approvals(&path, value)?,
            "approvers" => rule.approvers = Some(approvers(&path, value)?),
            "self_approval" => {
                rule.self_approval = value.as_bool().ok_or_else(|| {
                    format!(
                        "{path}.self_approval is {}; it is true or false",
                        value.to_string().trim()
                    )
                })?;
            }
            other => return Err(unknown(&format!("key of [{path}]"), other, &RULE_KEYS)),
        }
    }
    if let Some(approvers) = &rule.approvers
        && approvers.len() < rule.min_approvals as usize
    {
        let listed = match approvers.len() {
            1 => "1 approver is".to_owned(),
            count => format!("{count} approvers are"),
        };
        return Err(format!(
            "{path}.min_approvals is {}, but only {listed} listed, so the gate could never be \
             approved; lower min_approvals or list more approvers",
            rule.min_approvals
        ));
    }
    Ok(rule)
}

fn min_approvals(path: &str, value: &Item) -> Result<u32, String> {
    value
        .as_integer()
        .filter(|count| *count >= 1)
        .and_then(|count| u32::try_from(count).ok())
        .ok_or_else(|| {
            format!(
                "{path}.min_approvals is {}; it is a whole number of identities, at least 1",
                value.to_string().trim()
            )
        })
}

/// A list of identities, each once: an approver listed twice would count twice towards what
/// `min_approvals` can reach.
fn approvers(path: &str, value: &Item) -> Result<Vec<String>, String> {
    let Some(array) = value.as_array() else {
        return Err(format!(
            "{path}.approvers is {}; it is a list of identities, such as [\"alice\", \
             \"os:bob\"]",
            value.to_string().trim()
        ));
    };
    let mut names: Vec<String> = Vec::new();
    for entry in array.iter() {
        let Some(name) = entry.as_str() else {
            return Err(format!(
                "{path}.approvers holds {}; each approver is a string",
                entry.to_string().trim()
            ));
        };
        crate::identity::check(name).map_err(|why| format!("{path}.approvers: {why}"))?;
        if names.iter().any(|known| known == name) {
            return Err(format!(
                "{path}.approvers lists `{name}` twice; list it once"
            ));
        }
        names.push(name.to_owned());
    }
    if names.is_empty() {
        return Err(format!(
            "{path}.approvers is empty, so nobody could decide the gate; list who may, or \
             leave approvers out to let anyone"
        ));
    }
    Ok(names)
}

/// `item` as a table, or why it must be one.
fn table<'i>(item: &'i Item, path: &str) -> Result<&'i dyn TableLike, String> {
    item.as_table_like()
        .ok_or_else(|| format!("`{path}` must be a table ([{path}])"))
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

    fn invalid(text: &str) -> String {
        match parse(text) {
            Err((false, message)) => message,
            other => panic!("{text} gave {other:?}"),
        }
    }

    #[test]
    fn approval_rules_are_read_per_gate_function_with_defaults_for_what_is_left_out() {
        let text = r#"
[gates]
policy = "person-only"

[gates.functions.release_review]
min_approvals = 2
approvers = ["alice", "bob", "os:carol"]
self_approval = false

[gates.functions.quick_look]
"#;
        let settings = parse(text).expect("the file is valid");
        assert_eq!(settings.gate_policy, GatePolicy::PersonOnly);
        assert_eq!(
            settings.gate_rules.get("release_review"),
            Some(&GateRule {
                min_approvals: 2,
                approvers: Some(vec!["alice".into(), "bob".into(), "os:carol".into()]),
                self_approval: false,
            })
        );
        assert_eq!(
            settings.gate_rules.get("quick_look"),
            Some(&GateRule::default())
        );
        // Inline tables are the same tables.
        let inline = parse("[gates]\nfunctions = { review = { min_approvals = 3 } }\n")
            .expect("inline tables are tables");
        assert_eq!(
            inline
                .gate_rules
                .get("review")
                .map(|rule| rule.min_approvals),
            Some(3)
        );
        // The core gets them.
        let config = settings.apply(stratum_runtime::Config::default());
        assert_eq!(config.gate_rules, settings.gate_rules);
        assert_eq!(config.gate_policy, GatePolicy::PersonOnly);
    }

    #[test]
    fn a_misspelt_key_of_a_rule_is_refused_with_the_closest_name() {
        assert_eq!(
            invalid("[gates.functions.review]\nmin_aprovals = 2\n"),
            "unknown key of [gates.functions.review] `min_aprovals`; did you mean \
             `min_approvals`?"
        );
        assert_eq!(
            invalid("[gates.function.review]\nmin_approvals = 2\n"),
            "unknown key of [gates] `function`; did you mean `functions`?"
        );
        assert_eq!(
            invalid("[gates.functions.review]\nselfapproval = false\n"),
            "unknown key of [gates.functions.review] `selfapproval`; did you mean \
             `self_approval`?"
        );
    }

    #[test]
    fn a_rule_no_decision_could_meet_is_refused_at_load() {
        assert_eq!(
            invalid(
                "[gates.functions.review]\nmin_approvals = 3\napprovers = [\"alice\", \"bob\"]\n"
            ),
            "gates.functions.review.min_approvals is 3, but only 2 approvers are listed, so the \
             gate could never be approved; lower min_approvals or list more approvers"
        );
        assert_eq!(
            invalid("[gates.functions.review]\napprovers = []\n"),
            "gates.functions.review.approvers is empty, so nobody could decide the gate; list \
             who may, or leave approvers out to let anyone"
        );
        for (value, why) in [
            ("0", "at least 1"),
            ("-1", "at least 1"),
            ("1.5", "at least 1"),
            ("\"2\"", "at least 1"),
        ] {
            let message = invalid(&format!(
                "[gates.functions.review]\nmin_approvals = {value}\n"
            ));
            assert!(message.contains(why), "{value}: {message}");
        }
        let twice = invalid("[gates.functions.review]\napprovers = [\"alice\", \"alice\"]\n");
        assert_eq!(
            twice,
            "gates.functions.review.approvers lists `alice` twice; list it once"
        );
        let bad_name = invalid("[gates.functions.review]\napprovers = [\"al ice\"]\n");
        assert!(
            bad_name.starts_with("gates.functions.review.approvers: `al ice`"),
            "{bad_name}"
        );
        let not_a_list = invalid("[gates.functions.review]\napprovers = \"alice\"\n");
        assert!(not_a_list.contains("a list of identities"), "{not_a_list}");
        let not_bool = invalid("[gates.functions.review]\nself_approval = \"no\"\n");
        assert!(not_bool.contains("true or false"), "{not_bool}");
        let not_table = invalid("[gates.functions]\nreview = 2\n");
        assert_eq!(
            not_table,
            "`gates.functions.review` must be a table ([gates.functions.review])"
        );
    }
}
