//! `stratum-mcp install` / `uninstall`: sets a project up for Claude Code (and, with `--codex`,
//! the user's Codex) and takes it down again.
//!
//! Takes the parsed [`InstallArgs`] / [`UninstallArgs`], the project directory and the home
//! directory; returns a [`Report`] of every file and what was done to it, or a [`SetupError`]
//! that names the file and what to do.
//!
//! The invariant every piece keeps: a user's bytes outside what install adds are never changed.
//! Each file is planned first (read, parsed, edited in memory, the result parsed again) and only
//! when every plan succeeded is anything written, atomically; so an error leaves the project as
//! it was. Uninstall needs no record of install: each addition has one recognisable shape and
//! one place, and its removal is the exact inverse of its insertion, so install then uninstall
//! gives back the same bytes.
//!
//! The pieces: [`mcp_json`] (`.mcp.json`), [`claude_md`] (`CLAUDE.md`), [`hook`] (the
//! PostToolUse hook in `.claude/settings.json`, and the hook command itself), [`skills`]
//! (`.claude/skills/stratum/SKILL.md`), [`codex`] (`~/.codex/config.toml`), over [`json_edit`]
//! (span-guided edits of JSON with comments) and [`files`] (reading, atomic writing).

mod claude_md;
mod codex;
mod files;
mod hook;
mod json_edit;
mod mcp_json;
mod on_path;
mod report;
mod skills;

use std::path::{Path, PathBuf};

pub use claude_md::{BEGIN_MARKER, END_MARKER, block as claude_md_block};
pub use hook::{HOOK_COMMAND, HookOutcome, post_tool_use_hook};
pub use on_path::{find_on_path, not_on_path_warning};
pub use report::{Action, Entry, Report};
pub use skills::SKILL;

/// `stratum-mcp install`: registers the server, the execution model, the spec-checking hook
/// and the skill in the project of the current directory.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct InstallArgs {
    /// Also register the server with Codex, in ~/.codex/config.toml.
    #[arg(long)]
    pub codex: bool,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `stratum-mcp uninstall`: removes what install added, and nothing else.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct UninstallArgs {
    /// Leave the skill (.claude/skills/stratum/SKILL.md) in place.
    #[arg(long)]
    pub keep_skills: bool,
    /// Also remove the server from ~/.codex/config.toml.
    #[arg(long)]
    pub codex: bool,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Why install or uninstall did nothing. Every message names the file and what to do; when
/// one is returned, no file has been written.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} is not valid JSON: {message} at line {line}, column {column}; it was left untouched: fix it (or move it away) and run the command again",
        path.display()
    )]
    InvalidJson {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "{}: {what} is not a JSON object; it was left untouched: make it an object (or move the file away) and run the command again",
        path.display()
    )]
    NotAnObject { path: PathBuf, what: String },
    #[error(
        "{}: {what} is not a JSON array; it was left untouched: make it an array (or move the file away) and run the command again",
        path.display()
    )]
    NotAnArray { path: PathBuf, what: String },
    #[error(
        "{} is not valid TOML: {message}; it was left untouched: fix it and run the command again",
        path.display()
    )]
    InvalidToml { path: PathBuf, message: String },
    #[error(
        "{}: `mcp_servers` is not a table; it was left untouched: make it a table and run the command again",
        path.display()
    )]
    NotATable { path: PathBuf },
    #[error(
        "{} is not UTF-8 text; it was left untouched: convert it to UTF-8 and run the command again",
        path.display()
    )]
    NotUtf8 { path: PathBuf },
    #[error(
        "{} has `{BEGIN_MARKER}` on line {line} but no `{END_MARKER}` after it; it was left untouched: add the end marker after the block (or delete the partial block) and run the command again",
        path.display()
    )]
    UnterminatedBlock { path: PathBuf, line: usize },
    /// A bug of ours: the edit would have produced a file that does not parse.
    #[error(
        "internal error: the edited {} would not parse ({message}); nothing was written; please report this with the file",
        path.display()
    )]
    EditBroke { path: PathBuf, message: String },
}

/// What one file will become: planned in memory, written only once every file is planned.
#[derive(Debug)]
pub(crate) struct Plan {
    pub path: PathBuf,
    pub change: Change,
    pub action: Action,
    pub detail: String,
}

impl Plan {
    pub(crate) fn new(
        path: &Path,
        change: Change,
        action: Action,
        detail: impl Into<String>,
    ) -> Plan {
        Plan {
            path: path.to_owned(),
            change,
            action,
            detail: detail.into(),
        }
    }
}

#[derive(Debug)]
pub(crate) enum Change {
    Keep,
    Write(String),
    /// Nothing of the user's is left, only this text (`{}`, or nothing): the file goes. A
    /// symbolic link is the user's, though (install never makes one, it writes through it), so
    /// there the text is written through the link instead, as install wrote: the file kept
    /// elsewhere loses exactly what install added, and the link stays.
    Delete(String),
}

/// Sets up the project in `cwd` (and, with `--codex`, `home`'s Codex): see [`InstallArgs`].
pub fn install(args: &InstallArgs, cwd: &Path, home: &Path) -> Result<Report, SetupError> {
    let mut plans = vec![
        mcp_json::install(&cwd.join(mcp_json::FILE))?,
        claude_md::install(&cwd.join(claude_md::FILE))?,
        hook::install(&cwd.join(hook::SETTINGS_FILE))?,
        skills::install(&cwd.join(skills::FILE))?,
    ];
    if args.codex {
        plans.push(codex::install(&home.join(codex::FILE))?);
    }
    apply(plans, cwd, home, &[], "install")
}

/// Takes down what [`install`] set up: see [`UninstallArgs`].
pub fn uninstall(args: &UninstallArgs, cwd: &Path, home: &Path) -> Result<Report, SetupError> {
    let mut plans = vec![
        mcp_json::uninstall(&cwd.join(mcp_json::FILE))?,
        claude_md::uninstall(&cwd.join(claude_md::FILE))?,
        hook::uninstall(&cwd.join(hook::SETTINGS_FILE))?,
    ];
    if args.keep_skills {
        plans.push(Plan {
            path: cwd.join(skills::FILE),
            change: Change::Keep,
            action: Action::Unchanged,
            detail: "kept (--keep-skills)".to_owned(),
        });
    } else {
        plans.push(skills::uninstall(&cwd.join(skills::FILE))?);
    }
    if args.codex {
        plans.push(codex::uninstall(&home.join(codex::FILE))?);
    }
    // Directories install may have created, deepest first; each goes only if left empty.
    let dirs = [skills::DIR, skills::PARENT_DIR, hook::DIR];
    apply(plans, cwd, home, &dirs, "uninstall")
}

/// Writes the plans, then removes the directories of `dirs` (relative to `cwd`) that are empty.
fn apply(
    plans: Vec<Plan>,
    cwd: &Path,
    home: &Path,
    dirs: &[&str],
    command: &'static str,
) -> Result<Report, SetupError> {
    let mut entries = Vec::with_capacity(plans.len());
    for plan in plans {
        let mut action = plan.action;
        let mut detail = plan.detail;
        match &plan.change {
            Change::Keep => {}
            Change::Write(text) => files::write_atomic(&plan.path, text)?,
            Change::Delete(left) if files::is_link(&plan.path) => {
                files::write_atomic(&plan.path, left)?;
                action = Action::Updated;
                detail.push_str(
                    "; it is a symbolic link, so the file it points to was edited and the link kept",
                );
            }
            Change::Delete(_) => files::remove(&plan.path)?,
        }
        entries.push(Entry {
            path: report::shown(&plan.path, cwd, home),
            action,
            detail,
        });
    }
    for dir in dirs {
        let path = cwd.join(dir);
        if files::remove_dir_if_empty(&path)? {
            entries.push(Entry {
                path: format!("{dir}/"),
                action: Action::Removed,
                detail: "empty directory".to_owned(),
            });
        }
    }
    Ok(Report { command, entries })
}
