//! OpenCode (`opencode run --format json`): its command line and its JSON events.
//!
//! `opencode run` appends piped stdin to its message, so the prompt goes on stdin with no
//! positional message. Events, one JSON object a line, each `{type, timestamp, sessionID,
//! part}`: `step_start`, `text{part:{text}}` (a text part once complete), `tool_use`,
//! `step_finish{part:{reason, cost, tokens{input, output, reasoning, cache{read, write}}}}`,
//! and `error{error{name, data{message}}}`. The answer is the last text part; usage is summed
//! over the steps. Its events do not name the model: the configured one is reported.

use std::ffi::OsString;

use serde_json::Value;

use crate::result::{Transcript, UsageField};

/// OpenCode's own variables: where its configuration (providers, keys) lives. OpenCode can
/// talk to any provider, so a provider's key is not on the list: the operator adds the one
/// their configuration uses (e.g. `ANTHROPIC_API_KEY`), or logs in with `opencode auth login`.
pub(crate) const OWN_ENV: &[&str] = &["OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR"];

pub(crate) const FINAL_EVENT: &str = "step_finish";

pub(crate) fn args(model: Option<&str>, extra: &[String]) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["run", "--format", "json"]
        .into_iter()
        .map(OsString::from)
        .collect();
    if let Some(model) = model {
        args.extend([OsString::from("-m"), OsString::from(model)]);
    }
    args.extend(extra.iter().map(OsString::from));
    args
}

/// Reads OpenCode's events into a transcript.
#[derive(Debug, Default)]
pub(crate) struct Events {
    transcript: Transcript,
}

impl Events {
    pub(crate) fn observe(&mut self, event: &Value) {
        let transcript = &mut self.transcript;
        let part = event.get("part");
        match event.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = part.and_then(|p| p.get("text")).and_then(Value::as_str) {
                    transcript.text = Some(text.to_owned());
                }
            }
            Some("step_finish") => {
                transcript.complete = true;
                let tokens = part.and_then(|p| p.get("tokens"));
                let count = |path: &[&str]| {
                    path.iter()
                        .try_fold(tokens?, |value, key| value.get(key))
                        .and_then(Value::as_u64)
                };
                transcript.usage.add(UsageField::Input, count(&["input"]));
                transcript.usage.add(UsageField::Output, count(&["output"]));
                transcript
                    .usage
                    .add(UsageField::CacheRead, count(&["cache", "read"]));
                transcript
                    .usage
                    .add(UsageField::CacheWrite, count(&["cache", "write"]));
                transcript
                    .usage
                    .add_cost(part.and_then(|p| p.get("cost")).and_then(Value::as_f64));
            }
            Some("error") => {
                let error = event.get("error");
                let message = error
                    .and_then(|e| e.get("data"))
                    .and_then(|d| d.get("message"))
                    .or_else(|| error.and_then(|e| e.get("message")))
                    .or_else(|| error.and_then(|e| e.get("name")))
                    .and_then(Value::as_str)
                    .unwrap_or("an error");
                transcript.error = Some(format!("opencode reported: {message}"));
            }
            _ => {}
        }
    }

    pub(crate) fn finish(self) -> Transcript {
        self.transcript
    }
}
