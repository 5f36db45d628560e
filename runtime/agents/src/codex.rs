//! Codex (`codex exec --json … -`): its command line and its JSONL events.
//!
//! The prompt goes on stdin (the `-` argument), which is then closed (reference §4.2). Events:
//! `thread.started`, `turn.started`, `item.completed{item:{type, …}}` (an `agent_message` has
//! `text`), `turn.completed{usage{input_tokens, cached_input_tokens, output_tokens}}`,
//! `turn.failed{error{message}}` and `error{message}`. The answer is the last `agent_message`
//! (the reference glued all of them together with no separator), and an `error` fails the run
//! even when text came before it. Codex's events do not name the model: the configured one is
//! reported.

use std::ffi::OsString;
use std::path::Path;

use serde_json::Value;

use crate::result::{Transcript, UsageField};

/// Codex's own variables: its API key and where its login and configuration live.
pub(crate) const OWN_ENV: &[&str] = &["OPENAI_API_KEY", "CODEX_HOME"];

pub(crate) const FINAL_EVENT: &str = "turn.completed";

pub(crate) fn args(model: Option<&str>, cwd: &Path, extra: &[String]) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["exec", "--json", "--skip-git-repo-check", "-C"]
        .into_iter()
        .map(OsString::from)
        .collect();
    args.push(cwd.as_os_str().to_owned());
    if let Some(model) = model {
        args.extend([OsString::from("-m"), OsString::from(model)]);
    }
    args.extend(extra.iter().map(OsString::from));
    args.push(OsString::from("-"));
    args
}

/// Reads Codex's events into a transcript.
#[derive(Debug, Default)]
pub(crate) struct Events {
    transcript: Transcript,
}

impl Events {
    pub(crate) fn observe(&mut self, event: &Value) {
        let transcript = &mut self.transcript;
        match event.get("type").and_then(Value::as_str) {
            Some("item.completed") => {
                let item = event.get("item");
                let kind = item
                    .and_then(|i| i.get("type").or_else(|| i.get("item_type")))
                    .and_then(Value::as_str);
                if matches!(kind, Some("agent_message" | "assistant_message"))
                    && let Some(text) = item.and_then(|i| i.get("text")).and_then(Value::as_str)
                {
                    transcript.text = Some(text.to_owned());
                }
            }
            Some("turn.completed") => {
                transcript.complete = true;
                let usage = event.get("usage");
                let count = |name: &str| usage.and_then(|u| u.get(name)).and_then(Value::as_u64);
                transcript
                    .usage
                    .add(UsageField::Input, count("input_tokens"));
                transcript
                    .usage
                    .add(UsageField::Output, count("output_tokens"));
                transcript
                    .usage
                    .add(UsageField::CacheRead, count("cached_input_tokens"));
            }
            Some("turn.failed") => {
                let message = event
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the turn failed");
                transcript.error = Some(format!("codex reported: {message}"));
            }
            Some("error") => {
                let message = event
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("an error");
                transcript.error = Some(format!("codex reported: {message}"));
            }
            _ => {}
        }
    }

    pub(crate) fn finish(self) -> Transcript {
        self.transcript
    }
}
