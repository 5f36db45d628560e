//! `.mcp.json`: the project's MCP servers for Claude Code. Takes the file's path; returns the
//! plan that registers `{"stratum": {"command": "stratum-mcp"}}` under `mcpServers` (install)
//! or takes exactly that entry out again (uninstall), every other byte kept.
//!
//! An entry named `stratum` that install did not write (another command, or extra settings)
//! is never changed or removed: the report says it was left.

use std::path::Path;

use jsonc_parser::ast::Value;

use super::json_edit::{self, EMPTY_FILE, Json};
use super::report::Action;
use super::{Change, Plan, SetupError, files};

pub(crate) const FILE: &str = ".mcp.json";
const SERVERS: &str = "mcpServers";
const SERVER: &str = "stratum";
const COMMAND: &str = "stratum-mcp";

/// The registration install writes.
fn entry() -> Json {
    Json::Object(vec![("command", Json::String(COMMAND))])
}

/// A `stratum` entry found in the file.
enum Registration {
    /// Exactly what install writes.
    Ours,
    /// Our command, with settings of the user's (`args`, `env`).
    Customised,
    /// Another command, or not an object.
    Other(String),
}

fn classify(text: &str, value: &Value<'_>) -> Registration {
    if json_edit::same(value, &entry()) {
        return Registration::Ours;
    }
    match value {
        Value::Object(object) => match json_edit::member(object, "command") {
            Some(Value::StringLit(command)) if command.value == COMMAND => Registration::Customised,
            Some(command) => {
                Registration::Other(json_edit::slice(text, json_edit::range(command)).to_owned())
            }
            None => Registration::Other("(none)".to_owned()),
        },
        other => Registration::Other(json_edit::slice(text, json_edit::range(other)).to_owned()),
    }
}

pub(crate) fn install(path: &Path) -> Result<Plan, SetupError> {
    let existing = files::read(path)?;
    // An empty file is as good as none: there is nothing in it to keep.
    let original = existing.as_deref().filter(|text| !text.trim().is_empty());
    let text = original.unwrap_or(EMPTY_FILE);
    let style = json_edit::style(text);
    let root = json_edit::root_object(path, text)?;
    let edited = match json_edit::object_member(path, &root, SERVERS)? {
        None => {
            let servers = Json::Object(vec![(SERVER, entry())]);
            json_edit::insert_member(text, &root, SERVERS, &servers, &style)
        }
        Some(servers) => match json_edit::member(servers, SERVER) {
            None => json_edit::insert_member(text, servers, SERVER, &entry(), &style),
            Some(value) => {
                let (action, detail) = match classify(text, value) {
                    Registration::Ours => (
                        Action::Unchanged,
                        "the `stratum` server is registered".to_owned(),
                    ),
                    Registration::Customised => (
                        Action::Unchanged,
                        "the `stratum` server is registered (with settings of yours)".to_owned(),
                    ),
                    Registration::Other(command) => (
                        Action::Skipped,
                        format!(
                            "a `stratum` server with command {command} is registered already; left as it is (remove it and run install again to register stratum-mcp)"
                        ),
                    ),
                };
                return Ok(Plan {
                    path: path.to_owned(),
                    change: Change::Keep,
                    action,
                    detail,
                });
            }
        },
    };
    Ok(Plan {
        path: path.to_owned(),
        change: Change::Write(json_edit::verified(path, edited)?),
        action: if original.is_some() {
            Action::Updated
        } else {
            Action::Created
        },
        detail: "registered the `stratum` server (command `stratum-mcp`)".to_owned(),
    })
}

pub(crate) fn uninstall(path: &Path) -> Result<Plan, SetupError> {
    let unchanged = |detail: &str| Plan {
        path: path.to_owned(),
        change: Change::Keep,
        action: Action::Unchanged,
        detail: detail.to_owned(),
    };
    let Some(text) = files::read(path)? else {
        return Ok(unchanged("absent"));
    };
    if text.trim().is_empty() {
        return Ok(unchanged("no `stratum` server registered"));
    }
    let style = json_edit::style(&text);
    let root = json_edit::root_object(path, &text)?;
    let Some(servers) = json_edit::object_member(path, &root, SERVERS)? else {
        return Ok(unchanged("no `stratum` server registered"));
    };
    let Some(value) = json_edit::member(servers, SERVER) else {
        return Ok(unchanged("no `stratum` server registered"));
    };
    let left = |detail: String| Plan {
        path: path.to_owned(),
        change: Change::Keep,
        action: Action::Skipped,
        detail,
    };
    match classify(&text, value) {
        Registration::Ours => {}
        Registration::Customised => {
            return Ok(left(
                "left the `stratum` server: it has settings install did not write (remove it by hand if you wish)".to_owned(),
            ));
        }
        Registration::Other(command) => {
            return Ok(left(format!(
                "left the `stratum` server: it runs {command}, which install did not write"
            )));
        }
    }
    let without = json_edit::verified(
        path,
        json_edit::remove_member(&text, servers, SERVER, &style),
    )?;
    // `mcpServers` left as `{}` was install's too (or is worth nothing): it goes as well.
    let root = json_edit::root_object(path, &without)?;
    let without = match json_edit::object_member(path, &root, SERVERS)? {
        Some(servers) if json_edit::slice(&without, servers.range) == "{}" => json_edit::verified(
            path,
            json_edit::remove_member(&without, &root, SERVERS, &style),
        )?,
        _ => without,
    };
    let removed = "removed the `stratum` server".to_owned();
    if without == EMPTY_FILE {
        return Ok(Plan {
            path: path.to_owned(),
            change: Change::Delete(without),
            action: Action::Removed,
            detail: format!("{removed}; nothing else was left in it"),
        });
    }
    Ok(Plan {
        path: path.to_owned(),
        change: Change::Write(without),
        action: Action::Updated,
        detail: removed,
    })
}
