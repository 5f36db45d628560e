//! The spec-checking hook: its registration in `.claude/settings.json` (a `PostToolUse` hook
//! on `Write|Edit|MultiEdit` running [`HOOK_COMMAND`]), and the command itself,
//! [`post_tool_use_hook`], which takes the hook's JSON input and returns an exit status and
//! standard error text for Claude Code.
//!
//! Claude Code feeds a PostToolUse hook's standard error to the model only when it exits
//! with 2; with 0 the text is shown in the transcript (verbose mode) and the model goes on.
//! So: a spec with errors exits 2 with its diagnostics (the agent fixes them at once, before
//! `stratum_plan` would refuse the spec); warnings alone exit 0 with the warnings on standard
//! error (for the person; `stratum_validate` gives them to the agent when it asks); anything
//! the hook cannot use (not a spec, unreadable input or file) exits 0 silently, so that a
//! hook problem never gets in the agent's way.

use std::path::{Path, PathBuf};

use stratum_compiler::render;
use stratum_compiler::source::SourceMap;

use super::json_edit::{self, EMPTY_FILE, Json};
use super::report::Action;
use super::{Change, Plan, SetupError, files};

pub(crate) const SETTINGS_FILE: &str = ".claude/settings.json";
/// The directory of the settings file, removed by uninstall when it is left empty.
pub(crate) const DIR: &str = ".claude";
/// The command the hook runs.
pub const HOOK_COMMAND: &str = "stratum-mcp hook post-tool-use";
const MATCHER: &str = "Write|Edit|MultiEdit";
const HOOKS: &str = "hooks";
const EVENT: &str = "PostToolUse";

/// The matcher group install appends to `hooks.PostToolUse`.
fn group() -> Json {
    Json::Object(vec![
        ("matcher", Json::String(MATCHER)),
        (
            "hooks",
            Json::Array(vec![Json::Object(vec![
                ("type", Json::String("command")),
                ("command", Json::String(HOOK_COMMAND)),
            ])]),
        ),
    ])
}

/// What the hook command answers Claude Code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookOutcome {
    /// 0: go on; 2: show `stderr` to the model.
    pub exit_code: u8,
    pub stderr: String,
}

impl HookOutcome {
    fn quiet() -> HookOutcome {
        HookOutcome {
            exit_code: 0,
            stderr: String::new(),
        }
    }
}

/// `stratum-mcp hook post-tool-use`: checks the `.stratum.yaml` / `.stratum.yml` file a
/// `Write`, `Edit` or `MultiEdit` just wrote (`tool_input.file_path` of `stdin`; a relative
/// path is taken from the input's `cwd`).
pub fn post_tool_use_hook(stdin: &str) -> HookOutcome {
    let Ok(input) = serde_json::from_str::<serde_json::Value>(stdin) else {
        return HookOutcome::quiet();
    };
    let Some(file) = input
        .pointer("/tool_input/file_path")
        .and_then(serde_json::Value::as_str)
    else {
        return HookOutcome::quiet();
    };
    if !(file.ends_with(".stratum.yaml") || file.ends_with(".stratum.yml")) {
        return HookOutcome::quiet();
    }
    let mut path = PathBuf::from(file);
    if path.is_relative()
        && let Some(cwd) = input.get("cwd").and_then(serde_json::Value::as_str)
    {
        path = Path::new(cwd).join(path);
    }
    // Only a regular file: a FIFO named like a spec would block the open, and the agent with
    // it. One byte past the compiler's limit, so that a larger file is refused unread.
    let limit = stratum_compiler::input::MAX_FILE_SIZE as u64 + 1;
    let Ok(bytes) = crate::confined::read_regular(&path, limit) else {
        return HookOutcome::quiet();
    };
    let mut sources = SourceMap::new();
    let compilation = stratum_compiler::check_bytes(&mut sources, file, &bytes);
    let errors = compilation
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.is_error())
        .count();
    let warnings = compilation.diagnostics.len() - errors;
    let compilations = [compilation];
    let mut text = render::short::render(&sources, &render::reports(&sources, &compilations));
    if errors > 0 {
        let warnings = match warnings {
            0 => String::new(),
            n => format!(" and {n} {}", plural(n, "warning", "warnings")),
        };
        text.push_str(&format!(
            "stratum: {file} has {errors} {}{warnings}: fix the errors in one edit before running it (`stratum-mcp explain <code>` explains a code)\n",
            plural(errors, "error", "errors"),
        ));
        return HookOutcome {
            exit_code: 2,
            stderr: text,
        };
    }
    HookOutcome {
        exit_code: 0,
        stderr: text,
    }
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

/// Whether a matcher group runs our command.
fn runs_hook(value: &jsonc_parser::ast::Value<'_>) -> bool {
    let jsonc_parser::ast::Value::Object(group) = value else {
        return false;
    };
    let Some(jsonc_parser::ast::Value::Array(hooks)) = json_edit::member(group, HOOKS) else {
        return false;
    };
    hooks.elements.iter().any(|hook| match hook {
        jsonc_parser::ast::Value::Object(hook) => matches!(
            json_edit::member(hook, "command"),
            Some(jsonc_parser::ast::Value::StringLit(command)) if command.value == HOOK_COMMAND
        ),
        _ => false,
    })
}

pub(crate) fn install(path: &Path) -> Result<Plan, SetupError> {
    let existing = files::read(path)?;
    let original = existing.as_deref().filter(|text| !text.trim().is_empty());
    let text = original.unwrap_or(EMPTY_FILE);
    let style = json_edit::style(text);
    let root = json_edit::root_object(path, text)?;
    let edited = match json_edit::object_member(path, &root, HOOKS)? {
        None => {
            let hooks = Json::Object(vec![(EVENT, Json::Array(vec![group()]))]);
            json_edit::insert_member(text, &root, HOOKS, &hooks, &style)
        }
        Some(hooks) => match json_edit::array_member(path, hooks, EVENT)? {
            None => {
                let groups = Json::Array(vec![group()]);
                json_edit::insert_member(text, hooks, EVENT, &groups, &style)
            }
            Some(groups) if groups.elements.iter().any(runs_hook) => {
                return Ok(Plan {
                    path: path.to_owned(),
                    change: Change::Keep,
                    action: Action::Unchanged,
                    detail: "the spec-checking hook is registered".to_owned(),
                });
            }
            Some(groups) => json_edit::append_element(text, groups, &group(), &style),
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
        detail: format!("added the PostToolUse hook `{HOOK_COMMAND}` on {MATCHER}"),
    })
}

pub(crate) fn uninstall(path: &Path) -> Result<Plan, SetupError> {
    let plan = |change, action, detail: &str| Plan::new(path, change, action, detail);
    let Some(text) = files::read(path)? else {
        return Ok(plan(Change::Keep, Action::Unchanged, "absent"));
    };
    if text.trim().is_empty() {
        return Ok(plan(Change::Keep, Action::Unchanged, "no stratum hook"));
    }
    let style = json_edit::style(&text);
    let root = json_edit::root_object(path, &text)?;
    let groups = match json_edit::object_member(path, &root, HOOKS)? {
        Some(hooks) => json_edit::array_member(path, hooks, EVENT)?,
        None => None,
    };
    let Some(groups) = groups else {
        return Ok(plan(Change::Keep, Action::Unchanged, "no stratum hook"));
    };
    let Some(index) = groups
        .elements
        .iter()
        .position(|value| json_edit::same(value, &group()))
    else {
        if groups.elements.iter().any(runs_hook) {
            return Ok(plan(
                Change::Keep,
                Action::Skipped,
                "left the stratum hook: it sits in a matcher group install did not write (remove it by hand if you wish)",
            ));
        }
        return Ok(plan(Change::Keep, Action::Unchanged, "no stratum hook"));
    };
    let mut edited = json_edit::verified(
        path,
        json_edit::remove_element(&text, groups, index, &style),
    )?;
    // Containers left empty (`[]`, `{}`) were install's (or hold nothing): they go too.
    let root = json_edit::root_object(path, &edited)?;
    if let Some(hooks) = json_edit::object_member(path, &root, HOOKS)? {
        let groups = json_edit::array_member(path, hooks, EVENT)?;
        if groups.is_some_and(|groups| json_edit::slice(&edited, groups.range) == "[]") {
            let next = json_edit::remove_member(&edited, hooks, EVENT, &style);
            edited = json_edit::verified(path, next)?;
        }
    }
    let root = json_edit::root_object(path, &edited)?;
    if let Some(hooks) = json_edit::object_member(path, &root, HOOKS)?
        && json_edit::slice(&edited, hooks.range) == "{}"
    {
        let next = json_edit::remove_member(&edited, &root, HOOKS, &style);
        edited = json_edit::verified(path, next)?;
    }
    let detail = "removed the stratum PostToolUse hook";
    if edited == EMPTY_FILE {
        return Ok(plan(
            Change::Delete(edited),
            Action::Removed,
            &format!("{detail}; nothing else was left in it"),
        ));
    }
    Ok(plan(Change::Write(edited), Action::Updated, detail))
}
