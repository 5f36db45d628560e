//! `~/.codex/config.toml`: Codex's MCP servers. Takes the file's path; returns the plan that
//! adds the table `[mcp_servers.stratum]` with `command = "stratum-mcp"` (install) or removes
//! exactly that table (uninstall), through `toml_edit`, which keeps every comment, blank line
//! and layout of the rest of the file.

use std::path::Path;

use toml_edit::{DocumentMut, Item, Table, Value};

use super::report::Action;
use super::{Change, Plan, SetupError, files};

pub(crate) const FILE: &str = ".codex/config.toml";
const SERVERS: &str = "mcp_servers";
const SERVER: &str = "stratum";
const COMMAND: &str = "stratum-mcp";

fn parse(path: &Path, text: &str) -> Result<DocumentMut, SetupError> {
    text.parse::<DocumentMut>()
        .map_err(|error| SetupError::InvalidToml {
            path: path.to_owned(),
            message: error.to_string().trim_end().replace('\n', " "),
        })
}

/// Whether a `stratum` entry is exactly what install writes: one key, `command = "stratum-mcp"`.
fn is_ours(item: &Item) -> bool {
    item.as_table_like().is_some_and(|table| {
        table.len() == 1
            && table
                .get("command")
                .and_then(Item::as_str)
                .is_some_and(|command| command == COMMAND)
    })
}

/// The `command` of an entry, for the report.
fn command_of(item: &Item) -> String {
    item.as_table_like()
        .and_then(|table| table.get("command"))
        .and_then(Item::as_str)
        .map_or_else(|| "(none)".to_owned(), |command| format!("`{command}`"))
}

pub(crate) fn install(path: &Path) -> Result<Plan, SetupError> {
    let existing = files::read(path)?;
    let text = existing.as_deref().unwrap_or("");
    let mut doc = parse(path, text)?;
    let plan = |change, action, detail: String| Plan::new(path, change, action, detail);
    if doc.get(SERVERS).is_none() {
        // Implicit: only `[mcp_servers.stratum]` is written, not an empty `[mcp_servers]`.
        let mut servers = Table::new();
        servers.set_implicit(true);
        doc.insert(SERVERS, Item::Table(servers));
    }
    let Some(servers) = doc.get_mut(SERVERS) else {
        return Err(not_a_table(path));
    };
    if let Some(entry) = servers.get(SERVER) {
        return Ok(if is_ours(entry) {
            plan(
                Change::Keep,
                Action::Unchanged,
                "the `stratum` server is registered".to_owned(),
            )
        } else if command_of(entry) == format!("`{COMMAND}`") {
            plan(
                Change::Keep,
                Action::Unchanged,
                "the `stratum` server is registered (with settings of yours)".to_owned(),
            )
        } else {
            plan(
                Change::Keep,
                Action::Skipped,
                format!(
                    "a `stratum` server with command {} is registered already; left as it is (remove it and run install again to register stratum-mcp)",
                    command_of(entry)
                ),
            )
        });
    }
    if let Some(servers) = servers.as_table_mut() {
        let mut table = Table::new();
        table.insert("command", toml_edit::value(COMMAND));
        servers.insert(SERVER, Item::Table(table));
    } else if let Some(servers) = servers.as_inline_table_mut() {
        // `mcp_servers = { … }` on one line: the entry goes in it, in the same style.
        let mut table = toml_edit::InlineTable::new();
        table.insert("command", Value::from(COMMAND));
        servers.insert(SERVER, Value::InlineTable(table));
    } else {
        return Err(not_a_table(path));
    }
    let edited = doc.to_string();
    parse(path, &edited).map_err(|error| SetupError::EditBroke {
        path: path.to_owned(),
        message: error.to_string(),
    })?;
    Ok(plan(
        Change::Write(edited),
        if existing.is_some() {
            Action::Updated
        } else {
            Action::Created
        },
        "registered the `stratum` server (command `stratum-mcp`)".to_owned(),
    ))
}

pub(crate) fn uninstall(path: &Path) -> Result<Plan, SetupError> {
    let plan = |change, action, detail: &str| Plan::new(path, change, action, detail);
    let Some(text) = files::read(path)? else {
        return Ok(plan(Change::Keep, Action::Unchanged, "absent"));
    };
    let mut doc = parse(path, &text)?;
    let Some(servers) = doc.get_mut(SERVERS) else {
        return Ok(plan(
            Change::Keep,
            Action::Unchanged,
            "no `stratum` server registered",
        ));
    };
    let Some(servers) = servers.as_table_like_mut() else {
        return Err(not_a_table(path));
    };
    match servers.get(SERVER) {
        None => {
            return Ok(plan(
                Change::Keep,
                Action::Unchanged,
                "no `stratum` server registered",
            ));
        }
        Some(entry) if !is_ours(entry) => {
            return Ok(plan(
                Change::Keep,
                Action::Skipped,
                "left the `stratum` server: it is not exactly what install writes (remove it by hand if you wish)",
            ));
        }
        Some(_) => {}
    }
    servers.remove(SERVER);
    // An implicit `mcp_servers` with nothing left was install's: it goes too.
    let emptied = doc
        .get(SERVERS)
        .and_then(Item::as_table)
        .is_some_and(|servers| servers.is_implicit() && servers.is_empty());
    if emptied {
        doc.remove(SERVERS);
    }
    let edited = doc.to_string();
    if edited.trim().is_empty() && text.trim() != edited.trim() {
        return Ok(plan(
            Change::Delete(edited),
            Action::Removed,
            "removed the `stratum` server; nothing else was left in it",
        ));
    }
    Ok(plan(
        Change::Write(edited),
        Action::Updated,
        "removed the `stratum` server",
    ))
}

fn not_a_table(path: &Path) -> SetupError {
    SetupError::NotATable {
        path: path.to_owned(),
    }
}
