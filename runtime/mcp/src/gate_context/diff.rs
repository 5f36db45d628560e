//! The changes a gate's parallel and pipeline steps merged into the project: each merged
//! task's diff read from its row (within [`MAX_DIFF_READ_BYTES`] a task and
//! [`MAX_DIFF_READ_TOTAL`] a gate; what is not read is named with its size), counted per file,
//! and its text folded at [`MAX_DIFF_CHARS`].

use std::collections::HashMap;

use stratum_compiler::plan::{self, Action};

use super::fold::Fold;
use super::{
    FileChange, MAX_DIFF_CHARS, MAX_DIFF_FILES, MAX_DIFF_READ_BYTES, MAX_DIFF_READ_TOTAL, NotShown,
    StepDiff, count,
};
use crate::ids::FlowId;
use crate::state::{MergeState, StepState, TaskState};
use crate::store::{DiffKey, Snapshot, StoreError};

/// What the fan-out steps before the gate at `index` merged: per step, the diffs of its
/// merged tasks, read from their rows within the read bounds.
pub(super) fn diffs(
    snapshot: &mut dyn Snapshot,
    id: &FlowId,
    flow: &plan::Flow,
    index: u32,
    states: &HashMap<u32, StepState>,
) -> Result<Vec<StepDiff>, StoreError> {
    let mut budget = MAX_DIFF_READ_TOTAL;
    let mut diffs = Vec::new();
    for (step_index, step) in (0..index).zip(&flow.steps) {
        if !matches!(
            step.action,
            Action::Parallel { .. } | Action::Pipeline { .. }
        ) {
            continue;
        }
        let Some(fan) = states
            .get(&step_index)
            .and_then(|state| state.fan_out.as_ref())
        else {
            continue;
        };
        let mut shown = DiffBuilder::default();
        for task in fan
            .tasks
            .iter()
            .filter(|task| task.merge == MergeState::Merged)
        {
            match task_diff(snapshot, id, &step.id, task, &mut budget)? {
                TaskDiff::Empty => {}
                TaskDiff::Text(text) => shown.add(&task.id, &text),
                TaskDiff::NotShown(reason, bytes) => shown.not_shown.push(NotShown {
                    task_id: task.id.clone(),
                    bytes,
                    reason,
                }),
            }
        }
        if let Some(diff) = shown.finish(&step.id, fan.attempt) {
            diffs.push(diff);
        }
    }
    Ok(diffs)
}

/// A merged task's diff as the context gets it.
enum TaskDiff {
    /// It changed nothing.
    Empty,
    Text(String),
    NotShown(&'static str, u64),
}

/// The text of `task`'s diff, read when it fits in `budget` (which it then takes from).
fn task_diff(
    snapshot: &mut dyn Snapshot,
    id: &FlowId,
    step: &str,
    task: &TaskState,
    budget: &mut u64,
) -> Result<TaskDiff, StoreError> {
    // Written inline by an earlier build: already in memory.
    if let Some(text) = &task.diff {
        return Ok(if text.is_empty() {
            TaskDiff::Empty
        } else {
            TaskDiff::Text(readable(text))
        });
    }
    let Some(reference) = &task.diff_ref else {
        return Ok(TaskDiff::Empty);
    };
    if reference.bytes == 0 {
        return Ok(TaskDiff::Empty);
    }
    if reference.bytes > MAX_DIFF_READ_BYTES || reference.bytes > *budget {
        return Ok(TaskDiff::NotShown("too_large", reference.bytes));
    }
    *budget = budget.saturating_sub(reference.bytes);
    let key = DiffKey {
        step: step.to_owned(),
        attempt: task.attempt,
        task: task.id.clone(),
    };
    Ok(match snapshot.task_diff(id, &key)? {
        Some(text) if reference.names(&text) => TaskDiff::Text(readable(&text)),
        _ => TaskDiff::NotShown("gone", reference.bytes),
    })
}

/// A stored diff as text: one that is not UTF-8 is stored base64-encoded (`base64:…`), and is
/// shown decoded, its invalid bytes replaced.
fn readable(text: &str) -> String {
    if text.starts_with("base64:") {
        String::from_utf8_lossy(&stratum_driver::diff_bytes(text)).into_owned()
    } else {
        text.to_owned()
    }
}

/// One step's merged diff being put together, task by task.
#[derive(Default)]
struct DiffBuilder {
    tasks: Vec<String>,
    files: Vec<FileChange>,
    /// Where each path is in `files`.
    by_path: HashMap<String, usize>,
    files_left_out: usize,
    added: u64,
    removed: u64,
    bytes: u64,
    text: Option<Fold>,
    not_shown: Vec<NotShown>,
}

impl DiffBuilder {
    fn add(&mut self, task: &str, diff: &str) {
        self.tasks.push(task.to_owned());
        self.bytes = self
            .bytes
            .saturating_add(u64::try_from(diff.len()).unwrap_or(u64::MAX));
        let text = self.text.get_or_insert_with(|| Fold::new(MAX_DIFF_CHARS));
        text.push(diff.as_bytes());
        if !diff.ends_with('\n') {
            text.push(b"\n");
        }
        for change in file_changes(diff) {
            self.added = self.added.saturating_add(change.added);
            self.removed = self.removed.saturating_add(change.removed);
            match self.by_path.get(&change.path) {
                Some(&at) => {
                    if let Some(known) = self.files.get_mut(at) {
                        known.added = known.added.saturating_add(change.added);
                        known.removed = known.removed.saturating_add(change.removed);
                        known.binary |= change.binary;
                    }
                }
                None if self.files.len() < MAX_DIFF_FILES => {
                    self.by_path.insert(change.path.clone(), self.files.len());
                    self.files.push(change);
                }
                None => {
                    // Counted once per path, as the listed ones are.
                    self.by_path.insert(change.path, usize::MAX);
                    self.files_left_out += 1;
                }
            }
        }
    }

    /// The step's diff, or `None` when its tasks merged nothing.
    fn finish(self, step: &str, attempt: u32) -> Option<StepDiff> {
        if self.tasks.is_empty() && self.not_shown.is_empty() {
            return None;
        }
        Some(StepDiff {
            step_id: step.to_owned(),
            attempt,
            tasks: self.tasks,
            files: self.files,
            files_left_out: count(self.files_left_out),
            added: self.added,
            removed: self.removed,
            bytes: self.bytes,
            text: self.text.map(Fold::finish).unwrap_or_default(),
            not_shown: self.not_shown,
        })
    }
}

/// The files a `git diff` touches, with the lines each adds and removes, in its order.
pub fn file_changes(diff: &str) -> Vec<FileChange> {
    let mut files: Vec<FileChange> = Vec::new();
    let mut in_hunk = false;
    for line in diff.lines() {
        if let Some(paths) = line.strip_prefix("diff --git ") {
            files.push(FileChange {
                path: diff_path(paths),
                added: 0,
                removed: 0,
                binary: false,
            });
            in_hunk = false;
            continue;
        }
        let Some(file) = files.last_mut() else {
            continue;
        };
        if line.starts_with("@@") {
            in_hunk = true;
        } else if !in_hunk {
            // The file's header: `---`/`+++` name it, and a binary change says so.
            if line.starts_with("GIT binary patch")
                || (line.starts_with("Binary files ") && line.ends_with(" differ"))
            {
                file.binary = true;
            }
        } else if line.starts_with('+') {
            file.added += 1;
        } else if line.starts_with('-') {
            file.removed += 1;
        }
    }
    files
}

/// The path in a `diff --git a/PATH b/PATH` line: the new one (`b/`). When the two are the
/// same (anything but a rename) the line is split in its middle, so that a path holding ` b/`
/// is read whole.
fn diff_path(paths: &str) -> String {
    let half = paths.len().saturating_sub(1) / 2;
    if let (Some(old), Some(new)) = (paths.get(..half), paths.get(half + 1..))
        && paths.get(half..=half) == Some(" ")
        && old
            .strip_prefix("a/")
            .is_some_and(|old| Some(old) == new.strip_prefix("b/"))
    {
        return new.get(2..).unwrap_or(new).to_owned();
    }
    match paths.rsplit_once(" b/") {
        Some((_, new)) => new.to_owned(),
        None => paths.strip_prefix("a/").unwrap_or(paths).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing, clippy::unwrap_used)]

    use super::*;

    const DIFF: &str = "diff --git a/src/a b/x.rs b/src/a b/x.rs
index 1111111..2222222 100644
--- a/src/a b/x.rs
+++ b/src/a b/x.rs
@@ -1,3 +1,3 @@
 keep
-old line
+new line
+another
diff --git a/img.png b/img.png
new file mode 100644
index 0000000..3333333
GIT binary patch
literal 4
LcmZQzWMT#Y01f~L

diff --git a/old.txt b/new.txt
similarity index 90%
rename from old.txt
rename to new.txt
--- a/old.txt
+++ b/new.txt
@@ -1 +1 @@
--- a header-looking removed line
+++ a header-looking added line
";

    #[test]
    fn a_diff_is_counted_file_by_file() {
        assert_eq!(
            file_changes(DIFF),
            vec![
                FileChange {
                    path: "src/a b/x.rs".to_owned(),
                    added: 2,
                    removed: 1,
                    binary: false
                },
                FileChange {
                    path: "img.png".to_owned(),
                    added: 0,
                    removed: 0,
                    binary: true
                },
                FileChange {
                    path: "new.txt".to_owned(),
                    added: 1,
                    removed: 1,
                    binary: false
                },
            ]
        );
    }

    #[test]
    fn a_steps_diffs_add_up_per_file_and_their_text_is_bounded() {
        let mut builder = DiffBuilder::default();
        builder.add("a", DIFF);
        builder.add(
            "b",
            "diff --git a/new.txt b/new.txt\n@@ -1 +1,2 @@\n+more\n",
        );
        let huge: String = (0..2_000)
            .map(|n| {
                format!(
                    "diff --git a/f{n} b/f{n}\n@@ -0,0 +1 @@\n+{}\n",
                    "x".repeat(40)
                )
            })
            .collect();
        builder.add("c", &huge);
        let diff = builder.finish("work", 2).unwrap();
        assert_eq!(diff.tasks, ["a", "b", "c"]);
        assert_eq!(diff.files.len(), MAX_DIFF_FILES);
        assert_eq!(diff.files_left_out as usize, 3 + 2_000 - MAX_DIFF_FILES);
        let renamed = diff
            .files
            .iter()
            .find(|file| file.path == "new.txt")
            .unwrap();
        assert_eq!((renamed.added, renamed.removed), (2, 1));
        assert_eq!((diff.added, diff.removed), (2 + 1 + 1 + 2_000, 2));
        assert_eq!(diff.text.text.chars().count(), MAX_DIFF_CHARS);
        assert!(diff.text.more_chars > 0);
        assert!(diff.text.text.starts_with("diff --git a/src/a b/x.rs"));
    }

    #[test]
    fn a_diff_stored_as_base64_is_shown_decoded() {
        assert_eq!(readable("base64:aGk="), "hi");
        assert_eq!(readable("plain"), "plain");
    }
}
