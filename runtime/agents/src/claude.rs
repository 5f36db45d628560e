//! Claude Code (`claude`): its command line, its stdin and its stream-JSON events.
//!
//! The reference (§4.1) launched the CLI through the Python SDK, whose stdin protocol opens
//! with a `control_request` `initialize` handshake that the CLI answers with a
//! `control_response`: that handshake exists for the SDK's hooks and permission callbacks, and
//! we use neither. We follow the CLI's own print mode instead: `-p` with `--input-format
//! stream-json` reads `user` messages from stdin until it closes, so we write the one `user`
//! message, in the shape the SDK sends, and close stdin; no reply has to be awaited.
//!
//! Events (one JSON object a line): `system` (init), `assistant{message:{model, content:[text|
//! tool_use|thinking]}}`, `user{message:{content:[tool_result]}}`, and at the end
//! `result{subtype, is_error, result, usage{input_tokens, output_tokens, cache_*},
//! total_cost_usd}`. The final text is `result.result`; `is_error` fails the run (the reference
//! ignored it).

use std::ffi::OsString;

use serde_json::{Value, json};

use crate::result::{Transcript, UsageField};

/// Claude's own variables: its API key, a long-lived login token (`claude setup-token`) and
/// where its login and settings live. Never another agent's key.
pub(crate) const OWN_ENV: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CONFIG_DIR",
];

pub(crate) const FINAL_EVENT: &str = "result";

pub(crate) fn args(model: Option<&str>, extra: &[String]) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--input-format",
        "stream-json",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    if let Some(model) = model {
        args.extend([OsString::from("--model"), OsString::from(model)]);
    }
    args.extend(extra.iter().map(OsString::from));
    args
}

/// The one `user` message, as a JSON line.
pub(crate) fn stdin(prompt: &str) -> Vec<u8> {
    let message = json!({
        "type": "user",
        "session_id": "",
        "message": {"role": "user", "content": prompt},
        "parent_tool_use_id": null,
    });
    let mut line = message.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// Reads Claude's events into a transcript.
#[derive(Debug, Default)]
pub(crate) struct Events {
    transcript: Transcript,
    /// The last assistant text, kept in case the stream ends without `result`.
    last_text: Option<String>,
}

impl Events {
    pub(crate) fn observe(&mut self, event: &Value) {
        match event.get("type").and_then(Value::as_str) {
            Some("assistant") => {
                let message = event.get("message");
                if let Some(model) = message.and_then(|m| m.get("model")).and_then(Value::as_str) {
                    self.transcript.usage.model = Some(model.to_owned());
                }
                let texts: Vec<&str> = message
                    .and_then(|m| m.get("content"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|block| block.get("text").and_then(Value::as_str))
                    .collect();
                if !texts.is_empty() {
                    self.last_text = Some(texts.join("\n\n"));
                }
            }
            Some("result") => {
                let transcript = &mut self.transcript;
                transcript.complete = true;
                let text = event
                    .get("result")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if event.get("is_error").and_then(Value::as_bool) == Some(true) {
                    let subtype = event
                        .get("subtype")
                        .and_then(Value::as_str)
                        .unwrap_or("error");
                    transcript.error = Some(match &text {
                        Some(text) if !text.is_empty() => {
                            format!("claude reported `{subtype}`: {text}")
                        }
                        _ => format!("claude reported `{subtype}`"),
                    });
                }
                transcript.text = text;
                let usage = event.get("usage");
                let count = |name: &str| usage.and_then(|u| u.get(name)).and_then(Value::as_u64);
                let totals = &mut transcript.usage;
                totals.add(UsageField::Input, count("input_tokens"));
                totals.add(UsageField::Output, count("output_tokens"));
                totals.add(UsageField::CacheRead, count("cache_read_input_tokens"));
                totals.add(UsageField::CacheWrite, count("cache_creation_input_tokens"));
                totals.add_cost(event.get("total_cost_usd").and_then(Value::as_f64));
            }
            _ => {}
        }
    }

    pub(crate) fn finish(mut self) -> Transcript {
        if self.transcript.text.is_none() {
            self.transcript.text = self.last_text;
        }
        self.transcript
    }
}
