//! The spec-kit task compiler: a directory of task files → a v0.1 spec with one flow.
//!
//! Takes the `*.md` files of one directory (not recursive; names starting with `.` and
//! anything that is not a regular file are skipped) in file-name order, and gives the text of a
//! `.stratum.yaml` (version 0.1) plus a summary of each step; `stratum_compile_speckit` and
//! `stratum-mcp compile` answer with them. A task file reads:
//!
//! ```markdown
//! # Task: [P] Implement authentication
//!
//! Add JWT-based authentication to the API.
//!
//! ## Acceptance Criteria
//!
//! - [ ] file src/auth/middleware.ts exists
//! - [ ] file src/auth/middleware.ts contains "verifyToken"
//! - [ ] tests pass
//! - [ ] no lint errors
//! - [ ] Error messages are user-friendly
//! ```
//!
//! - The title is the text after `# Task:`, else the first `#` heading, else the file's stem;
//!   `[P]` in it marks the task parallel (and is removed). The body is what follows the title
//!   line, without the acceptance criteria.
//! - Each list item under an `Acceptance Criteria` heading is a criterion: `file X exists` →
//!   `file_exists("X")`; `file X contains Y` → `file_contains("X", "Y")` (`X` and `Y` may be
//!   quoted with `"`, `'` or backticks; a quoted `X` may hold spaces); the whole phrase `tests
//!   pass` (`all tests pass`, `the test suite passes`, …) → `result.tests_pass == True`; the
//!   whole phrase `no lint errors` (`lint passes`, …) → `result.lint_clean == True`; anything
//!   else is a judgment, which the step's intent asks the agent to verify.
//! - Dependencies: a sequential task depends on the task before it; the tasks of a run of
//!   consecutive parallel tasks all depend on the task before the run (none for a first run),
//!   with no edges between them; the sequential task after a run depends on every task of it.
//! - Step ids: the stem lowercased, each character outside `[a-z0-9]` replaced by `_`, `_`
//!   trimmed, `t` put in front of a leading digit, `task` for nothing. Two files with the same
//!   id are an error naming both.
//!
//! For a caller confined to a root (over HTTP), each task file must resolve under it: a task
//! file that is a symbolic link leading out of the root refuses the whole directory
//! ([`SpeckitError::OutsideRoot`]) rather than reading, or silently dropping, it.
//!
//! Limits, checked before anything is parsed: at most [`MAX_TASK_FILES`] task files and
//! [`MAX_TASK_FILE_BYTES`] bytes per file; the generated spec must also fit the compiler's
//! own limit ([`stratum_compiler::input::MAX_FILE_SIZE`]).
//!
//! Invariant: what is returned checks clean. Every string is written as a double-quoted YAML
//! scalar with escapes, every string literal inside an `ensure` as an escaped literal of the
//! expression language (`__` written as `_\x5f`, which the language forbids in source text),
//! and the generated text goes through [`stratum_compiler::check_bytes`] before it is returned;
//! an error there is a `compile_error`, a bug of this module.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;
use stratum_compiler::source::SourceMap;

use crate::confined::ResolveError;

/// The most task files one directory may hold.
pub const MAX_TASK_FILES: usize = 1000;
/// The largest task file accepted, in bytes (1 MiB).
pub const MAX_TASK_FILE_BYTES: usize = 1024 * 1024;
/// The flow name when none is given.
pub const DEFAULT_FLOW_NAME: &str = "tasks";

/// A compiled task directory: `{"status": "ok", "yaml", "flow_name", "steps"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct CompiledTasks {
    /// Always `ok`.
    #[schemars(extend("const" = "ok"))]
    pub status: &'static str,
    /// The spec (version 0.1), ready for `stratum_plan`.
    pub yaml: String,
    pub flow_name: String,
    /// One per task file, in file-name order (the order of the flow's steps).
    pub steps: Vec<TaskStep>,
}

/// What one task file became.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TaskStep {
    /// The step id, which is also its function's name.
    pub id: String,
    pub title: String,
    /// Marked `[P]`: runs beside the other tasks of its group.
    pub parallel: bool,
    /// The `ensure` expressions of its criteria, as written in the spec (`result.done == True`,
    /// which every step has, is not listed).
    pub ensures: Vec<String>,
    /// The criteria left to the agent's judgment.
    pub judgment: Vec<String>,
}

/// Why a task directory gave no spec.
#[derive(Debug, thiserror::Error)]
pub enum SpeckitError {
    #[error("`{}` is not a directory; give the directory that holds the task files", .0.display())]
    DirectoryNotFound(PathBuf),
    #[error("no task files (`*.md`) in {}", match .0 { Some(dir) => format!("`{}`", dir.display()), None => "the input".to_owned() })]
    NoTasks(Option<PathBuf>),
    #[error("task files `{first}` and `{second}` both give the step id `{id}`; rename one of them")]
    StepIdCollision {
        id: String,
        first: String,
        second: String,
    },
    #[error(
        "the flow name `{0}` is not an identifier: start with a letter or `_`, then use ASCII letters, digits and `_`"
    )]
    InvalidFlowName(String),
    #[error("more than {MAX_TASK_FILES} task files; split the tasks into several directories")]
    TooManyTasks,
    #[error("task file `{file}` is larger than {} MiB; shorten it", MAX_TASK_FILE_BYTES / (1024 * 1024))]
    TaskTooLarge { file: String },
    #[error(
        "task file `{file}` is not valid UTF-8 (invalid byte at offset {offset}); save it as UTF-8"
    )]
    InvalidUtf8 { file: String, offset: usize },
    #[error("the file name `{}` is not valid UTF-8; rename it", .0.display())]
    InvalidFileName(PathBuf),
    #[error(
        "task file `{file}` leads outside the server's root (a symbolic link?); over HTTP only \
         files under the directory the server runs in are read: put the task file itself in the \
         task directory"
    )]
    OutsideRoot { file: String },
    #[error("cannot read `{}`: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the generated spec does not check ({0}); this is a bug of the task compiler")]
    Compile(String),
}

/// The answer for a task directory that gave no spec: `{"status": "error", "error_type",
/// "message"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SpeckitFailure {
    /// Always `error`.
    #[schemars(extend("const" = "error"))]
    pub status: &'static str,
    /// `directory_not_found`, `no_tasks`, `step_id_collision` or `compile_error`.
    pub error_type: &'static str,
    pub message: String,
}

impl SpeckitError {
    /// The reference's `error_type`; what it had no name for is a `compile_error`.
    pub fn error_type(&self) -> &'static str {
        match self {
            SpeckitError::DirectoryNotFound(_) => "directory_not_found",
            SpeckitError::NoTasks(_) => "no_tasks",
            SpeckitError::StepIdCollision { .. } => "step_id_collision",
            SpeckitError::InvalidFlowName(_)
            | SpeckitError::TooManyTasks
            | SpeckitError::TaskTooLarge { .. }
            | SpeckitError::InvalidUtf8 { .. }
            | SpeckitError::InvalidFileName(_)
            | SpeckitError::OutsideRoot { .. }
            | SpeckitError::Io { .. }
            | SpeckitError::Compile(_) => "compile_error",
        }
    }

    pub fn failure(&self) -> SpeckitFailure {
        SpeckitFailure {
            status: "error",
            error_type: self.error_type(),
            message: self.to_string(),
        }
    }
}

/// Compiles the task files of `dir` into a flow named `flow_name`.
pub fn compile_tasks_dir(dir: &Path, flow_name: &str) -> Result<CompiledTasks, SpeckitError> {
    compile_tasks_dir_under(dir, flow_name, None)
}

/// [`compile_tasks_dir`] for a caller confined to `root` (canonical; over HTTP): every task
/// file must resolve under it.
pub fn compile_tasks_dir_under(
    dir: &Path,
    flow_name: &str,
    root: Option<&Path>,
) -> Result<CompiledTasks, SpeckitError> {
    check_flow_name(flow_name)?;
    if !dir.is_dir() {
        return Err(SpeckitError::DirectoryNotFound(dir.to_owned()));
    }
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| SpeckitError::Io { path, source }
    };
    // Each task file's name and the path it resolves to, which is the one read.
    let mut tasks = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            if name.to_string_lossy().ends_with(".md") {
                return Err(SpeckitError::InvalidFileName(path));
            }
            continue;
        };
        if !name.ends_with(".md") || name.starts_with('.') {
            continue;
        }
        // Follows symbolic links, as a glob does; a dangling one is no task.
        let resolved = match crate::confined::resolve_under(&path, root) {
            Ok(resolved) => resolved,
            Err(ResolveError::OutsideRoot) => {
                return Err(SpeckitError::OutsideRoot {
                    file: name.to_owned(),
                });
            }
            Err(ResolveError::Io(error)) if error.kind() == std::io::ErrorKind::NotFound => {
                continue;
            }
            Err(ResolveError::Io(source)) => return Err(SpeckitError::Io { path, source }),
        };
        match std::fs::metadata(&resolved) {
            Ok(metadata) if metadata.is_file() => tasks.push((name.to_owned(), resolved)),
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(SpeckitError::Io { path, source }),
        }
        if tasks.len() > MAX_TASK_FILES {
            return Err(SpeckitError::TooManyTasks);
        }
    }
    if tasks.is_empty() {
        return Err(SpeckitError::NoTasks(Some(dir.to_owned())));
    }
    tasks.sort();
    let mut files = Vec::with_capacity(tasks.len());
    for (name, path) in tasks {
        // One byte past the limit tells a file at the limit from a larger one.
        let bytes = crate::confined::read_regular(&path, MAX_TASK_FILE_BYTES as u64 + 1)
            .map_err(io(&dir.join(&name)))?;
        if bytes.len() > MAX_TASK_FILE_BYTES {
            return Err(SpeckitError::TaskTooLarge { file: name });
        }
        files.push((name, bytes));
    }
    compile_tasks(&files, flow_name)
}

/// Compiles task files given as `(file name, contents)`, in file-name order whatever the order
/// given; a file's stem is its name without a trailing `.md`. Does no IO.
pub fn compile_tasks(
    files: &[(String, Vec<u8>)],
    flow_name: &str,
) -> Result<CompiledTasks, SpeckitError> {
    check_flow_name(flow_name)?;
    if files.len() > MAX_TASK_FILES {
        return Err(SpeckitError::TooManyTasks);
    }
    if files.is_empty() {
        return Err(SpeckitError::NoTasks(None));
    }
    let mut files: Vec<&(String, Vec<u8>)> = files.iter().collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));

    let mut ids = std::collections::HashMap::new();
    for (name, _) in &files {
        let id = step_id(stem(name));
        if let Some(first) = ids.insert(id.clone(), name) {
            return Err(SpeckitError::StepIdCollision {
                id,
                first: (*first).clone(),
                second: name.clone(),
            });
        }
    }

    let mut tasks = Vec::with_capacity(files.len());
    for (name, bytes) in files {
        if bytes.len() > MAX_TASK_FILE_BYTES {
            return Err(SpeckitError::TaskTooLarge { file: name.clone() });
        }
        let text = std::str::from_utf8(bytes).map_err(|error| SpeckitError::InvalidUtf8 {
            file: name.clone(),
            offset: error.valid_up_to(),
        })?;
        tasks.push(parse_task(stem(name), text));
    }
    let depends_on = dependencies(&tasks);
    let yaml = write_spec(&tasks, &depends_on, flow_name);

    let compilation = stratum_compiler::check_bytes(
        &mut SourceMap::new(),
        &format!("{flow_name}.stratum.yaml"),
        yaml.as_bytes(),
    );
    if let Some(error) = compilation.diagnostics.iter().find(|d| d.is_error()) {
        return Err(SpeckitError::Compile(format!(
            "{}: {}",
            error.code, error.message
        )));
    }
    Ok(CompiledTasks {
        status: "ok",
        yaml,
        flow_name: flow_name.to_owned(),
        steps: tasks
            .into_iter()
            .map(|task| TaskStep {
                ensures: task.criteria.iter().filter_map(Criterion::ensure).collect(),
                judgment: task
                    .criteria
                    .into_iter()
                    .filter_map(|criterion| match criterion {
                        Criterion::Judgment(text) => Some(text),
                        _ => None,
                    })
                    .collect(),
                id: task.id,
                title: task.title,
                parallel: task.parallel,
            })
            .collect(),
    })
}

/// A file's step id: see the module documentation.
pub fn step_id(stem: &str) -> String {
    let replaced: String = stem
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '_'
            }
        })
        .collect();
    let id = replaced.trim_matches('_');
    match id.chars().next() {
        None => "task".to_owned(),
        Some(first) if first.is_ascii_lowercase() => id.to_owned(),
        Some(_) => format!("t{id}"),
    }
}

/// A parsed task file.
#[derive(Debug)]
struct Task {
    id: String,
    title: String,
    body: String,
    parallel: bool,
    criteria: Vec<Criterion>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Criterion {
    FileExists(String),
    FileContains { path: String, needle: String },
    TestsPass,
    LintClean,
    Judgment(String),
}

impl Criterion {
    /// The `ensure` expression, for all but a judgment.
    fn ensure(&self) -> Option<String> {
        match self {
            Criterion::FileExists(path) => Some(format!("file_exists({})", literal(path))),
            Criterion::FileContains { path, needle } => Some(format!(
                "file_contains({}, {})",
                literal(path),
                literal(needle)
            )),
            Criterion::TestsPass => Some("result.tests_pass == True".to_owned()),
            Criterion::LintClean => Some("result.lint_clean == True".to_owned()),
            Criterion::Judgment(_) => None,
        }
    }
}

fn check_flow_name(name: &str) -> Result<(), SpeckitError> {
    // What the language server accepts when it renames a flow.
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(())
    } else {
        Err(SpeckitError::InvalidFlowName(name.to_owned()))
    }
}

fn stem(file_name: &str) -> &str {
    file_name.strip_suffix(".md").unwrap_or(file_name)
}

// ---------------------------------------------------------------------------------------------
// Markdown

/// A line's heading level and text, for an ATX heading (`#` to `######`, at most three spaces
/// of indentation, then a space or the end of the line).
fn heading(line: &str) -> Option<(usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = line.trim_start_matches(' ');
    let level = rest.len() - rest.trim_start_matches('#').len();
    let text = rest.trim_start_matches('#');
    if !(1..=6).contains(&level) || !(text.is_empty() || text.starts_with([' ', '\t'])) {
        return None;
    }
    Some((level, text.trim()))
}

/// Whether `line` opens or closes a fenced code block, and with which character.
fn fence(line: &str) -> Option<char> {
    let trimmed = line.trim_start();
    ["```", "~~~"]
        .into_iter()
        .find(|marker| trimmed.starts_with(marker))
        .and_then(|marker| marker.chars().next())
}

fn parse_task(stem: &str, text: &str) -> Task {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text.lines().collect();

    // Headings outside fenced code, with their line numbers.
    let mut headings = Vec::new();
    let mut open_fence: Option<char> = None;
    for (at, line) in lines.iter().enumerate() {
        if let Some(marker) = fence(line) {
            open_fence = match open_fence {
                None => Some(marker),
                Some(open) if open == marker => None,
                Some(open) => Some(open),
            };
            continue;
        }
        if open_fence.is_none()
            && let Some((level, heading_text)) = heading(line)
        {
            headings.push((at, level, heading_text));
        }
    }

    let task_heading = headings.iter().find_map(|&(at, level, heading_text)| {
        let rest = heading_text
            .get(..5)
            .filter(|prefix| level == 1 && prefix.eq_ignore_ascii_case("task:"))?;
        Some((at, heading_text.get(rest.len()..).unwrap_or_default()))
    });
    let title_heading = task_heading.or_else(|| {
        headings
            .iter()
            .find(|&&(_, level, _)| level == 1)
            .map(|&(at, _, heading_text)| (at, heading_text))
    });
    let title_line = title_heading.map(|(at, _)| at);
    let raw_title = title_heading.map_or("", |(_, text)| text);
    let parallel = raw_title.contains("[P]");
    let title = raw_title
        .replace("[P]", " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let id = step_id(stem);
    let title = if !title.is_empty() {
        title
    } else if !stem.trim().is_empty() {
        stem.trim().to_owned()
    } else {
        id.clone()
    };

    // Criteria sections: from an `Acceptance Criteria` heading to the next heading of the same
    // level or above.
    let mut in_criteria = vec![false; lines.len()];
    for (index, &(at, level, heading_text)) in headings.iter().enumerate() {
        let name = heading_text.trim_end_matches(':').trim();
        if !name.eq_ignore_ascii_case("acceptance criteria") {
            continue;
        }
        let end = headings
            .iter()
            .skip(index + 1)
            .find(|&&(_, other, _)| other <= level)
            .map_or(lines.len(), |&(end, _, _)| end);
        for flag in in_criteria.iter_mut().take(end).skip(at) {
            *flag = true;
        }
    }

    let mut criteria = Vec::new();
    let mut body = Vec::new();
    let mut open_fence: Option<char> = None;
    let start = title_line.map_or(0, |at| at + 1);
    for (at, line) in lines.iter().enumerate().skip(start) {
        let was_in_fence = open_fence.is_some();
        if let Some(marker) = fence(line) {
            open_fence = match open_fence {
                None => Some(marker),
                Some(open) if open == marker => None,
                Some(open) => Some(open),
            };
        }
        if !in_criteria.get(at).copied().unwrap_or(false) {
            body.push(*line);
        } else if !was_in_fence && open_fence.is_none() {
            criteria.extend(list_item(line).map(classify));
        }
    }
    let body = body.join("\n").trim().to_owned();
    Task {
        id,
        title,
        body,
        parallel,
        criteria,
    }
}

/// The text of a list item (`-`, `*` or `+`, then an optional `[ ]` or `[x]`), if not empty.
fn list_item(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    let rest = rest
        .strip_prefix(['-', '*', '+'])
        .filter(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))?
        .trim_start();
    let rest = ["[ ]", "[x]", "[X]"]
        .into_iter()
        .find_map(|checkbox| {
            rest.strip_prefix(checkbox)
                .filter(|after| after.is_empty() || after.starts_with([' ', '\t']))
        })
        .unwrap_or(rest)
        .trim();
    (!rest.is_empty()).then_some(rest)
}

// ---------------------------------------------------------------------------------------------
// Criteria

fn classify(text: &str) -> Criterion {
    let lowered = text.to_lowercase();
    let words: Vec<&str> = lowered
        .trim_end_matches(['.', '!'])
        .split_whitespace()
        .collect();
    if is_tests_pass(&words) {
        return Criterion::TestsPass;
    }
    if is_lint_clean(&words) {
        return Criterion::LintClean;
    }
    file_criterion(text).unwrap_or_else(|| Criterion::Judgment(text.to_owned()))
}

/// `[all] [the] [unit|integration|existing] (tests|test|test suite) (pass|passes|passing|are
/// passing|is passing)`: the whole criterion, word by word, so that "test passwords are
/// hashed" stays a judgment.
fn is_tests_pass(words: &[&str]) -> bool {
    let mut rest = words;
    for optional in [&["all"][..], &["the"], &["unit", "integration", "existing"]] {
        if let Some((first, after)) = rest.split_first()
            && optional.contains(first)
        {
            rest = after;
        }
    }
    let rest = match rest {
        ["test", "suite", after @ ..] | ["tests" | "test", after @ ..] => after,
        _ => return false,
    };
    matches!(
        rest,
        ["pass" | "passes" | "passing"] | ["are" | "is" | "all", "passing" | "pass"]
    )
}

/// `no (lint|linting|linter) (errors|error|issues|warnings)` or `(lint|linting|linter)
/// (passes|pass|clean|is clean)`, as the whole criterion.
fn is_lint_clean(words: &[&str]) -> bool {
    const LINT: [&str; 3] = ["lint", "linting", "linter"];
    match words {
        ["no", lint, problems] => {
            LINT.contains(lint) && ["errors", "error", "issues", "warnings"].contains(problems)
        }
        [lint, "passes" | "pass" | "clean"] | [lint, "is", "clean"] => LINT.contains(lint),
        _ => false,
    }
}

/// `file X contains Y` or `file X exists`.
fn file_criterion(text: &str) -> Option<Criterion> {
    let keyword = text.get(..4)?;
    let rest = text.get(4..)?;
    if !keyword.eq_ignore_ascii_case("file") || !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim();
    file_contains(rest).or_else(|| file_exists(rest))
}

/// `X contains Y`: X is quoted or one word, Y the rest, quotes (and a period after them)
/// removed.
fn file_contains(rest: &str) -> Option<Criterion> {
    let (path, after) = operand(rest)?;
    let after = after.trim_start();
    let needle = after
        .get(..8)
        .filter(|word| word.eq_ignore_ascii_case("contains"))
        .and_then(|_| after.get(8..))
        .filter(|needle| needle.starts_with([' ', '\t']))?
        .trim();
    let needle = if is_quoted(needle) {
        unquote(needle)
    } else {
        match needle.strip_suffix('.') {
            Some(before) if is_quoted(before) => unquote(before),
            _ => needle,
        }
    };
    (!path.is_empty() && !needle.is_empty()).then(|| Criterion::FileContains {
        path: path.to_owned(),
        needle: needle.to_owned(),
    })
}

/// `X exists`: X is all that comes before, quoted or not.
fn file_exists(rest: &str) -> Option<Criterion> {
    let rest = rest.strip_suffix('.').unwrap_or(rest);
    let split = rest.len().checked_sub(" exists".len())?;
    let path = rest.get(..split)?;
    let tail = rest.get(split..)?;
    if !tail.starts_with([' ', '\t']) || !tail.get(1..)?.eq_ignore_ascii_case("exists") {
        return None;
    }
    let path = unquote(path.trim());
    (!path.is_empty()).then(|| Criterion::FileExists(path.to_owned()))
}

const QUOTES: [char; 3] = ['"', '\'', '`'];

/// The leading operand of `text` (a quoted string, quotes removed, or a word) and the rest,
/// which starts with whitespace.
fn operand(text: &str) -> Option<(&str, &str)> {
    if let Some(quote) = text.chars().next().filter(|c| QUOTES.contains(c)) {
        let inner = text.get(1..)?;
        let close = inner.find(quote)?;
        let rest = inner.get(close + 1..)?;
        return rest
            .starts_with([' ', '\t'])
            .then(|| (inner.get(..close).unwrap_or_default(), rest));
    }
    let end = text.find([' ', '\t'])?;
    Some((text.get(..end)?, text.get(end..)?))
}

fn is_quoted(text: &str) -> bool {
    text.len() >= 2
        && QUOTES
            .iter()
            .any(|&quote| text.starts_with(quote) && text.ends_with(quote))
}

fn unquote(text: &str) -> &str {
    if is_quoted(text) {
        text.get(1..text.len() - 1).unwrap_or(text)
    } else {
        text
    }
}

// ---------------------------------------------------------------------------------------------
// Dependencies and the spec

/// Each task's dependencies, by index: see the module documentation.
fn dependencies(tasks: &[Task]) -> Vec<Vec<usize>> {
    let mut depends_on = Vec::with_capacity(tasks.len());
    // What the next sequential task depends on, and what the current parallel run's tasks do.
    let mut frontier: Vec<usize> = Vec::new();
    let mut run_base: Option<Vec<usize>> = None;
    for (index, task) in tasks.iter().enumerate() {
        if task.parallel {
            let base = run_base.get_or_insert_with(|| std::mem::take(&mut frontier));
            depends_on.push(base.clone());
            frontier.push(index);
        } else {
            depends_on.push(std::mem::replace(&mut frontier, vec![index]));
            run_base = None;
        }
    }
    depends_on
}

fn write_spec(tasks: &[Task], depends_on: &[Vec<usize>], flow_name: &str) -> String {
    let uses = |wanted: &Criterion| {
        tasks
            .iter()
            .any(|task| task.criteria.iter().any(|criterion| criterion == wanted))
    };
    let mut out = String::new();
    out.push_str(
        "# Generated by the spec-kit task compiler: edit the task files and compile again.\n",
    );
    out.push_str("version: '0.1'\n\ncontracts:\n  TaskResult:\n    done: {type: boolean}\n");
    // Optional in the shared contract; each step's output_schema requires what it checks.
    if uses(&Criterion::TestsPass) {
        out.push_str("    tests_pass: {type: boolean, optional: true}\n");
    }
    if uses(&Criterion::LintClean) {
        out.push_str("    lint_clean: {type: boolean, optional: true}\n");
    }

    out.push_str("\nfunctions:\n");
    for task in tasks {
        let _ = writeln!(out, "  {}:", yaml_string(&task.id));
        out.push_str("    mode: compute\n");
        let _ = writeln!(out, "    intent: {}", yaml_string(&intent(task)));
        out.push_str("    input:\n      task_context: {type: string}\n");
        out.push_str("    output: TaskResult\n    ensure:\n");
        for ensure in task.criteria.iter().filter_map(Criterion::ensure) {
            let _ = writeln!(out, "      - {}", yaml_string(&ensure));
        }
        out.push_str("      - \"result.done == True\"\n    retries: 2\n");
    }

    let _ = write!(
        out,
        "\nflows:\n  {}:\n    input:\n      project_context: {{type: string}}\n    \
         output: TaskResult\n    steps:\n",
        yaml_string(flow_name)
    );
    for (task, depends_on) in tasks.iter().zip(depends_on) {
        let id = yaml_string(&task.id);
        let _ = writeln!(out, "      - id: {id}\n        function: {id}");
        out.push_str("        inputs:\n          task_context: \"$.input.project_context\"\n");
        let mut required = vec!["done"];
        if task.criteria.contains(&Criterion::TestsPass) {
            required.push("tests_pass");
        }
        if task.criteria.contains(&Criterion::LintClean) {
            required.push("lint_clean");
        }
        let _ = writeln!(
            out,
            "        output_schema:\n          type: object\n          required: [{}]",
            required.join(", ")
        );
        if !depends_on.is_empty() {
            let ids: Vec<String> = depends_on
                .iter()
                .filter_map(|&index| tasks.get(index))
                .map(|dependency| yaml_string(&dependency.id))
                .collect();
            let _ = writeln!(out, "        depends_on: [{}]", ids.join(", "));
        }
    }
    out
}

/// The title, the body, and the judgment criteria to verify.
fn intent(task: &Task) -> String {
    let mut intent = task.title.clone();
    if !task.body.is_empty() {
        intent.push('\n');
        intent.push_str(&task.body);
    }
    let judgment: Vec<&str> = task
        .criteria
        .iter()
        .filter_map(|criterion| match criterion {
            Criterion::Judgment(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if !judgment.is_empty() {
        intent.push_str("\nAlso verify: ");
        intent.push_str(&judgment.join("; "));
    }
    intent
}

/// `value` as a double-quoted YAML scalar: `\` and `"` escaped, and every character YAML does
/// not print (controls, line breaks, the BOM, U+FFFE, U+FFFF) as an escape.
fn yaml_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{85}' => out.push_str("\\N"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if c.is_control() || matches!(c, '\u{feff}' | '\u{fffe}' | '\u{ffff}') => {
                push_escape(&mut out, c);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `value` as a double-quoted string literal of the expression language: `\`, `"` and
/// controls escaped, line breaks and the BOM as escapes too, and the second `_` of each `__`
/// as `\x5f`, since `__` may not appear anywhere in an expression's text.
fn literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    let mut after_underscore = false;
    for c in value.chars() {
        match c {
            '_' if after_underscore => {
                out.push_str("\\x5f");
                after_underscore = false;
                continue;
            }
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control()
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                push_escape(&mut out, c);
            }
            c => out.push(c),
        }
        after_underscore = c == '_';
    }
    out.push('"');
    out
}

/// `\xNN`, `\uNNNN` or `\UNNNNNNNN`, which YAML and the expression language read alike.
fn push_escape(out: &mut String, c: char) {
    let code = u32::from(c);
    let _ = match code {
        0..=0xff => write!(out, "\\x{code:02x}"),
        0x100..=0xffff => write!(out, "\\u{code:04x}"),
        _ => write!(out, "\\U{code:08x}"),
    };
}
