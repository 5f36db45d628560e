//! `stratum_draft_pipeline`: a pipeline draft, checked, saved for the pipeline editor.
//!
//! Takes a draft (`{name, phases: [...], ...}`) and a project directory; writes the draft to
//! `<project>/.stratum/pipeline-draft.json` (JSON indented by 2, `name` defaulting to
//! [`DEFAULT_NAME`] and `phases` to `[]`, every other key kept as given) and says where.
//!
//! Checked before anything is written: the draft is an object; `name`, if given, is a
//! non-blank string; `phases`, if given, is a list of objects whose `name` and `id`, where
//! given, are strings, with no id twice; the draft nests at most [`MAX_DEPTH`] deep and
//! serializes to at most [`MAX_BYTES`]. A `null` `name` or `phases` counts as not given.
//!
//! Invariant: the file is replaced atomically (a temporary file in the same directory,
//! flushed to disk, then renamed over it), so the editor never reads half a draft.

use std::io::Write;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// The name a draft without one gets.
pub const DEFAULT_NAME: &str = "my-pipeline";
/// The largest draft saved, serialized as it is written (1 MiB).
pub const MAX_BYTES: usize = 1024 * 1024;
/// The deepest nesting of objects and lists in a draft; the draft itself is level 1.
pub const MAX_DEPTH: usize = 64;
/// Where the draft goes, under the project directory.
pub const DRAFT_DIR: &str = ".stratum";
pub const DRAFT_FILE: &str = "pipeline-draft.json";

/// A saved draft: `{"status": "saved", "path": …, "phases": …}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Saved {
    /// Always `saved`.
    #[schemars(extend("const" = "saved"))]
    pub status: &'static str,
    /// The draft file's absolute path.
    pub path: String,
    /// How many phases the draft has.
    pub phases: usize,
}

/// Why a draft was not saved.
#[derive(Debug, thiserror::Error)]
pub enum DraftError {
    #[error("{0}")]
    InvalidDraft(String),
    #[error("the project path `{}` is not a directory; give the project's directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("cannot open the project directory `{}`: {source}", .path.display())]
    DirectoryUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "`{}` leads outside the server's root (a symbolic link?); over HTTP a draft is written \
         only under the directory the server runs in",
        .0.display()
    )]
    OutsideRoot(PathBuf),
    #[error("cannot write `{}`: {source}", .path.display())]
    WriteFailed {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The answer for a draft that was not saved: `{"status": "error", "error_type", "message"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct DraftFailure {
    /// Always `error`.
    #[schemars(extend("const" = "error"))]
    pub status: &'static str,
    /// `invalid_draft`, `directory_not_found` or `write_failed`.
    pub error_type: &'static str,
    pub message: String,
}

impl DraftError {
    /// The reference's `error_type`.
    pub fn error_type(&self) -> &'static str {
        match self {
            DraftError::InvalidDraft(_) => "invalid_draft",
            DraftError::NotADirectory(_) | DraftError::DirectoryUnreadable { .. } => {
                "directory_not_found"
            }
            DraftError::WriteFailed { .. } | DraftError::OutsideRoot(_) => "write_failed",
        }
    }

    pub fn failure(&self) -> DraftFailure {
        DraftFailure {
            status: "error",
            error_type: self.error_type(),
            message: self.to_string(),
        }
    }
}

/// Checks a draft and saves it under `project_dir`, replacing an earlier one. The project
/// directory and its `.stratum` are created when missing, as the reference does.
pub fn save_draft(draft: &Value, project_dir: &Path) -> Result<Saved, DraftError> {
    save_draft_under(draft, project_dir, None)
}

/// [`save_draft`] for a caller confined to `root` (over HTTP): the draft directory, once
/// created, must resolve under `root`, so a `.stratum` that is a symbolic link out of it is
/// refused before anything is written there. `root` is canonical.
pub fn save_draft_under(
    draft: &Value,
    project_dir: &Path,
    root: Option<&Path>,
) -> Result<Saved, DraftError> {
    let (bytes, phases) = checked(draft)?;
    if project_dir.exists() && !project_dir.is_dir() {
        return Err(DraftError::NotADirectory(project_dir.to_owned()));
    }
    let dir = project_dir.join(DRAFT_DIR);
    std::fs::create_dir_all(&dir).map_err(|source| DraftError::WriteFailed {
        path: dir.clone(),
        source,
    })?;
    let dir = std::fs::canonicalize(&dir).map_err(|source| DraftError::DirectoryUnreadable {
        path: dir.clone(),
        source,
    })?;
    if let Some(root) = root
        && !dir.starts_with(root)
    {
        return Err(DraftError::OutsideRoot(project_dir.join(DRAFT_DIR)));
    }
    let path = dir.join(DRAFT_FILE);
    write_atomically(&dir, &path, &bytes).map_err(|source| DraftError::WriteFailed {
        path: path.clone(),
        source,
    })?;
    Ok(Saved {
        status: "saved",
        path: path.display().to_string(),
        phases,
    })
}

/// The draft file's bytes, defaults filled in, and the draft's number of phases.
fn checked(draft: &Value) -> Result<(Vec<u8>, usize), DraftError> {
    let Value::Object(fields) = draft else {
        return Err(invalid(format!(
            "the draft must be a JSON object like {{\"name\": …, \"phases\": […]}}, not {}",
            kind(draft)
        )));
    };
    if depth(draft) > MAX_DEPTH {
        return Err(invalid(format!(
            "the draft nests objects and lists more than {MAX_DEPTH} levels deep; flatten it"
        )));
    }
    let mut fields = fields.clone();
    match fields.get("name") {
        None | Some(Value::Null) => {
            fields.insert("name".to_owned(), Value::from(DEFAULT_NAME));
        }
        Some(Value::String(name)) if name.trim().is_empty() => {
            return Err(invalid(format!(
                "`name` must not be blank; name the pipeline, or leave `name` out to use `{DEFAULT_NAME}`"
            )));
        }
        Some(Value::String(_)) => {}
        Some(other) => {
            return Err(invalid(format!(
                "`name` must be a string, not {}",
                kind(other)
            )));
        }
    }
    let phases = match fields.get("phases") {
        None | Some(Value::Null) => {
            fields.insert("phases".to_owned(), Value::Array(Vec::new()));
            0
        }
        Some(Value::Array(phases)) => check_phases(phases)?,
        Some(other) => {
            return Err(invalid(format!(
                "`phases` must be a list of phase objects, not {}",
                kind(other)
            )));
        }
    };
    let mut out = Bounded::default();
    let written = serde_json::to_writer_pretty(&mut out, &Value::Object(fields))
        .and_then(|()| out.write_all(b"\n").map_err(serde_json::Error::io));
    if out.over || written.is_err() {
        return Err(invalid(format!(
            "the draft is larger than {} MiB as JSON; keep large content in files and refer to them",
            MAX_BYTES / (1024 * 1024)
        )));
    }
    Ok((out.bytes, phases))
}

/// Checks each phase; gives their number.
fn check_phases(phases: &[Value]) -> Result<usize, DraftError> {
    let mut ids: std::collections::HashMap<&str, usize> = Default::default();
    for (index, phase) in phases.iter().enumerate() {
        let Value::Object(phase) = phase else {
            return Err(invalid(format!(
                "`phases[{index}]` must be an object, not {}",
                kind(phase)
            )));
        };
        for key in ["name", "id"] {
            if let Some(value) = phase.get(key).filter(|value| !value.is_string()) {
                return Err(invalid(format!(
                    "`phases[{index}].{key}` must be a string, not {}",
                    kind(value)
                )));
            }
        }
        if let Some(id) = phase.get("id").and_then(Value::as_str)
            && let Some(first) = ids.insert(id, index)
        {
            return Err(invalid(format!(
                "`phases[{index}].id` repeats the id `{id}` of `phases[{first}]`; give each phase its own id"
            )));
        }
    }
    Ok(phases.len())
}

fn invalid(message: String) -> DraftError {
    DraftError::InvalidDraft(message)
}

/// What a JSON value is, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The deepest nesting of objects and lists (a scalar is 0), without recursion, so that a
/// deep draft is measured before anything recursive (serialization) touches it. Stops
/// counting once past [`MAX_DEPTH`].
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 1)];
    while let Some((value, level)) = pending.pop() {
        if !(value.is_array() || value.is_object()) {
            continue;
        }
        deepest = deepest.max(level);
        if level > MAX_DEPTH {
            break;
        }
        match value {
            Value::Array(items) => pending.extend(items.iter().map(|item| (item, level + 1))),
            Value::Object(fields) => {
                pending.extend(fields.values().map(|field| (field, level + 1)))
            }
            _ => {}
        }
    }
    deepest
}

/// A writer that keeps at most [`MAX_BYTES`] and fails past them, so that an oversized draft
/// is never serialized whole.
#[derive(Default)]
struct Bounded {
    bytes: Vec<u8>,
    over: bool,
}

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len().saturating_add(buf.len()) > MAX_BYTES {
            self.over = true;
            return Err(std::io::Error::other("the draft is too large"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes `bytes` to a new file in `dir`, flushes it to disk and renames it to `path`, so
/// that `path` holds either the old content or all of the new. The temporary file is removed
/// if any step fails.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = dir.join(format!(
        ".{DRAFT_FILE}.{:032x}.tmp",
        stratum_runtime::fresh_seed()
    ));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)?;
    let synced = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    let written = synced.and_then(|()| std::fs::rename(&temp, path));
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(error);
    }
    // Makes the rename itself durable. Best effort: the draft is in place either way, and
    // not every platform can open a directory.
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}
