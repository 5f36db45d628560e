//! What install or uninstall did: one [`Entry`] per file (and per directory removed), as
//! aligned text for people ([`std::fmt::Display`]) and as JSON for scripts
//! ([`Report::to_json`]).

use std::fmt;
use std::path::Path;

use serde::Serialize;

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Created,
    Updated,
    Unchanged,
    Removed,
    /// Left as it was although the command would have changed it: something there is not
    /// ours (the detail says what and what to do).
    Skipped,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Updated => "updated",
            Action::Unchanged => "unchanged",
            Action::Removed => "removed",
            Action::Skipped => "skipped",
        }
    }
}

/// One file and what was done to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// Relative to the project for project files, `~/…` for the home directory's.
    pub path: String,
    pub action: Action,
    pub detail: String,
}

/// Everything one command did, in the order it did it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// `install` or `uninstall`.
    pub command: &'static str,
    pub entries: Vec<Entry>,
}

impl Report {
    /// Whether any file was written or removed.
    pub fn changed(&self) -> bool {
        self.entries.iter().any(|entry| {
            matches!(
                entry.action,
                Action::Created | Action::Updated | Action::Removed
            )
        })
    }

    /// `{"command": "install", "changed": true, "entries": [{"path", "action", "detail"}, …]}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "command": self.command,
            "changed": self.changed(),
            "entries": self.entries,
        })
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .entries
            .iter()
            .map(|entry| entry.path.chars().count())
            .max()
            .unwrap_or(0);
        for entry in &self.entries {
            writeln!(
                f,
                "{:<9}  {:<width$}  {}",
                entry.action.as_str(),
                entry.path,
                entry.detail
            )?;
        }
        let next = match (self.command, self.changed()) {
            ("install", false) => "nothing to do: everything was already in place",
            (_, false) => "nothing to do: nothing install writes was there",
            ("install", true) => {
                "restart Claude Code (or run /mcp) so that it loads the server, the hook and the skill"
            }
            _ => "restart Claude Code so that it forgets the server, the hook and the skill",
        };
        writeln!(f, "{next}")
    }
}

/// How a path is shown: relative to the project, or to the home directory as `~/…`.
pub(crate) fn shown(path: &Path, cwd: &Path, home: &Path) -> String {
    if let Ok(relative) = path.strip_prefix(cwd) {
        return relative.display().to_string();
    }
    if let Ok(relative) = path.strip_prefix(home) {
        return format!("~/{}", relative.display());
    }
    path.display().to_string()
}
