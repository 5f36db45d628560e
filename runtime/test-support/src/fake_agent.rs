//! Fake agent CLIs for the unattended tests: shell scripts that read their prompt on stdin
//! like the real `claude -p --input-format stream-json` and `codex exec --json -`, and answer
//! in their event formats (reference §4.1, §4.2). Real processes; nothing of ours is mocked.

use std::path::{Path, PathBuf};

use serde_json::json;

/// The fake CLIs' event formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Claude Code's stream-JSON: an `init`, then a `result` event with the final text.
    Claude,
    /// Codex's JSONL: `thread.started`, the answer as an `agent_message` item, then
    /// `turn.completed` with usage.
    Codex,
}

impl Format {
    /// The stdout lines of a run that answers `text`.
    fn lines(self, text: &str) -> Vec<String> {
        let events = match self {
            Format::Claude => vec![
                json!({"type": "system", "subtype": "init", "model": "claude-sonnet-4-6"}),
                json!({"type": "result", "subtype": "success", "is_error": false,
                    "num_turns": 1, "session_id": "s", "result": text,
                    "usage": {"input_tokens": 100, "output_tokens": 20}}),
            ],
            Format::Codex => vec![
                json!({"type": "thread.started", "thread_id": "t1"}),
                json!({"type": "item.completed", "item": {"id": "i1", "type": "agent_message",
                    "text": text}}),
                json!({"type": "turn.completed", "usage": {"input_tokens": 100,
                    "cached_input_tokens": 0, "output_tokens": 20}}),
            ],
        };
        events.iter().map(ToString::to_string).collect()
    }

    fn binary(self) -> &'static str {
        match self {
            Format::Claude => "claude",
            Format::Codex => "codex",
        }
    }
}

/// Writes `dir/claude`: each call appends its stdin and a `----` line to `dir/prompts`, its
/// arguments as one line to `dir/argv`, counts itself in `dir/count`, and answers with the
/// `answers` entry for that call (the last one from then on). An answer `HANG` instead records
/// the script's pid in `dir/hung.pid` and sleeps, once: the next call answers normally. An
/// answer starting `SLOW:` records the pid in `dir/slow.pid`, waits two seconds, then answers
/// with the rest.
pub fn claude(dir: &Path, answers: &[&str]) -> PathBuf {
    fake(dir, Format::Claude, answers)
}

/// [`claude`], as `dir/codex` speaking Codex's events.
pub fn codex(dir: &Path, answers: &[&str]) -> PathBuf {
    fake(dir, Format::Codex, answers)
}

fn fake(dir: &Path, format: Format, answers: &[&str]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let d = dir.display();
    let mut cases = String::new();
    for (at, answer) in answers.iter().enumerate() {
        let pattern = if at + 1 == answers.len() {
            "*".to_owned()
        } else {
            (at + 1).to_string()
        };
        let result = |text: &str| {
            let lines = format.lines(text);
            assert!(
                lines.iter().all(|line| !line.contains('\'')),
                "answers are single-quoted in the script"
            );
            lines
                .iter()
                .map(|line| format!("printf '%s\\n' '{line}'"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let action = if *answer == "HANG" {
            format!("echo $$ > {d}/hung.pid.tmp; mv {d}/hung.pid.tmp {d}/hung.pid; sleep 600")
        } else if let Some(rest) = answer.strip_prefix("SLOW:") {
            format!(
                "echo $$ > {d}/slow.pid.tmp; mv {d}/slow.pid.tmp {d}/slow.pid; sleep 2; {}",
                result(rest)
            )
        } else {
            result(answer)
        };
        cases.push_str(&format!("  {pattern}) {action} ;;\n"));
    }
    // The count is taken under a lock: workers run several copies at once.
    let body = format!(
        "#!/bin/sh\nprompt=$(cat)\n\
         n=$(flock {d}/count.lock sh -c 'n=$(cat {d}/count 2>/dev/null || echo 0); \
         n=$((n + 1)); echo $n > {d}/count; echo $n')\n\
         printf '%s\\n----\\n' \"$prompt\" >> {d}/prompts\n\
         printf '%s\\n' \"$*\" >> {d}/argv\n\
         case $n in\n{cases}esac\n"
    );
    let path = dir.join(format.binary());
    std::fs::write(&path, body).expect("the fake agent is written");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .expect("the fake agent is executable");
    path
}

/// What a fan-out task's fake agent does on one call: run `shell` in its working directory
/// (edit files, leave a child behind, …), then answer `text` (none: it answers nothing); or
/// hang (`Hang`), recording its pid in `dir/hung.<task>` and a child's in `dir/child.<task>`.
#[derive(Clone, Debug)]
pub enum TaskAction {
    Answer { shell: String, text: String },
    Hang,
}

impl TaskAction {
    /// Writes `content` to `file` in its working directory, then answers `text`.
    pub fn edit(file: &str, content: &str, text: &str) -> TaskAction {
        assert!(
            !file.contains('\'') && !content.contains('\''),
            "quoted in the script"
        );
        TaskAction::Answer {
            shell: format!("printf '%s\\n' '{content}' > '{file}'"),
            text: text.to_owned(),
        }
    }

    /// Changes nothing, answers `text`.
    pub fn answer(text: &str) -> TaskAction {
        TaskAction::Answer {
            shell: String::new(),
            text: text.to_owned(),
        }
    }
}

/// Writes `dir/claude` (or `dir/codex`) for fan-out tasks, which run at once in any order: the
/// agent finds its task in the prompt as `TASK[<id>]` (put it in the intent template), counts
/// its calls per task in `dir/count.<id>`, appends `<id> <call> <cwd>` to `dir/calls`, and does
/// `script[<id>][call - 1]` (the last entry from then on). A task the script does not list
/// answers nothing.
pub fn task_agent(dir: &Path, format: Format, script: &[(&str, Vec<TaskAction>)]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let d = dir.display();
    let tasks = dir.join("tasks");
    std::fs::create_dir_all(&tasks).expect("the task scripts' directory is made");
    for (task, actions) in script {
        for (at, action) in actions.iter().enumerate() {
            let body = match action {
                TaskAction::Hang => format!(
                    "sleep 600 & echo $! > {d}/child.{task}\necho $$ > {d}/hung.{task}\nwait\n"
                ),
                TaskAction::Answer { shell, text } => {
                    let lines = format.lines(text);
                    assert!(
                        lines.iter().all(|line| !line.contains('\'')),
                        "answers are single-quoted in the script"
                    );
                    let answer: Vec<String> = lines
                        .iter()
                        .map(|line| format!("printf '%s\\n' '{line}'"))
                        .collect();
                    format!("{shell}\n{}\n", answer.join("\n"))
                }
            };
            let name = if at + 1 == actions.len() {
                format!("{task}.last")
            } else {
                format!("{task}.{}", at + 1)
            };
            std::fs::write(tasks.join(name), body).expect("a task script is written");
        }
    }
    let body = format!(
        "#!/bin/sh\nprompt=$(cat)\n\
         id=$(printf '%s' \"$prompt\" | grep -o 'TASK\\[[A-Za-z0-9_.-]*\\]' | head -n 1 | sed 's/^TASK\\[//; s/\\]$//')\n\
         [ -n \"$id\" ] || exit 3\n\
         n=$(ID=\"$id\" flock {d}/count.lock sh -c 'n=$(cat {d}/count.$ID 2>/dev/null || echo 0); \
         n=$((n + 1)); echo $n > {d}/count.$ID; echo $n')\n\
         printf '%s %s %s\\n' \"$id\" \"$n\" \"$(pwd)\" >> {d}/calls\n\
         printf '%s\\n----\\n' \"$prompt\" >> {d}/prompts.$id\n\
         f={d}/tasks/$id.$n\n[ -f \"$f\" ] || f={d}/tasks/$id.last\n\
         [ -f \"$f\" ] || exit 0\n. \"$f\"\n"
    );
    let path = dir.join(format.binary());
    std::fs::write(&path, body).expect("the fake agent is written");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .expect("the fake agent is executable");
    path
}

/// How many times the fake agent of `dir` ran task `id`.
pub fn task_calls(dir: &Path, id: &str) -> usize {
    std::fs::read_to_string(dir.join(format!("count.{id}")))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}
