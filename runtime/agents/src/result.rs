//! The result of a run: how it ended, the final text, the JSON object in it, usage.
//!
//! A run that produced no JSON object is [`Outcome::NoJson`] with its text, never an empty
//! object (the reference turned a missing result into `{}` and advanced on it). An agent that
//! reports an error, or exits non-zero, fails the run even when it printed text.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::connector::Agent;
use crate::output::{EventLog, Tail};
use crate::process::{Exit, Fate};

/// One finished run.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub agent: Agent,
    pub outcome: Outcome,
    /// The agent's final answer text (the last message); empty when it gave none.
    pub text: String,
    pub usage: Usage,
    /// How the agent's process ended.
    pub exit: Exit,
    /// The last events of stdout and the counters of what was dropped.
    pub log: EventLog,
    /// The last bytes of stderr.
    #[serde(serialize_with = "tail_text")]
    pub stderr: Tail,
    pub elapsed: Duration,
}

/// How a run ended, from its process and its event stream. Only `Answered` carries a result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// The agent finished and its final text holds a JSON object (not yet checked against the
    /// contract: that is the runtime's `step_done`).
    Answered { object: Map<String, Value> },
    /// The agent finished, but its final text holds no JSON object.
    NoJson,
    /// The agent exited 0 but said it failed (Claude's `is_error`, Codex's `error` or
    /// `turn.failed`, OpenCode's `error`), or its stream ended without its final event.
    AgentError { message: String },
    /// The agent exited non-zero or was killed by a signal we did not send.
    Crashed { message: Option<String> },
    /// The deadline passed; the process group was ended.
    TimedOut,
    /// The caller cancelled; the process group was ended.
    Cancelled,
}

/// Tokens and cost as the CLI reports them; fields a CLI does not report stay `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Usage {
    pub model: Option<String>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// Adds one report (a turn, a step) to the totals.
    pub(crate) fn add(&mut self, field: UsageField, n: Option<u64>) {
        if let Some(n) = n {
            let total = match field {
                UsageField::Input => &mut self.input_tokens,
                UsageField::Output => &mut self.output_tokens,
                UsageField::CacheRead => &mut self.cache_read_tokens,
                UsageField::CacheWrite => &mut self.cache_write_tokens,
            };
            *total = Some(total.unwrap_or(0).saturating_add(n));
        }
    }

    pub(crate) fn add_cost(&mut self, cost: Option<f64>) {
        if let Some(cost) = cost {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + cost);
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum UsageField {
    Input,
    Output,
    CacheRead,
    CacheWrite,
}

/// What an event parser read from a whole stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Transcript {
    /// The final answer text.
    pub text: Option<String>,
    /// An error the agent reported.
    pub error: Option<String>,
    /// Whether the stream's final event (Claude's `result`, Codex's `turn.completed`, an
    /// OpenCode `step_finish`) arrived.
    pub complete: bool,
    pub usage: Usage,
}

/// The outcome of a run from how its process ended and what its stream said, in that order:
/// our own ending (deadline, cancel) first, then a crash, then the agent's own error, then the
/// answer.
pub(crate) fn decide(
    fate: Fate,
    exit: &Exit,
    transcript: &Transcript,
    final_event: &str,
) -> Outcome {
    match fate {
        Fate::TimedOut => return Outcome::TimedOut,
        Fate::Cancelled => return Outcome::Cancelled,
        Fate::Exited => {}
    }
    if !exit.success() {
        return Outcome::Crashed {
            message: transcript.error.clone(),
        };
    }
    if let Some(message) = &transcript.error {
        return Outcome::AgentError {
            message: message.clone(),
        };
    }
    if !transcript.complete {
        return Outcome::AgentError {
            message: format!("the event stream ended without its final `{final_event}` event"),
        };
    }
    match transcript.text.as_deref().and_then(extract_object) {
        Some(object) => Outcome::Answered { object },
        None => Outcome::NoJson,
    }
}

/// The JSON object of an answer: the whole text if it is one; else the last ```` ```json ````
/// fenced block holding an object; else the last top-level `{…}` in the text that parses as an
/// object. `None` when there is none: an array or a scalar is not an answer.
pub fn extract_object(text: &str) -> Option<Map<String, Value>> {
    if let Ok(Value::Object(object)) = serde_json::from_str(text.trim()) {
        return Some(object);
    }
    last_fenced(text).or_else(|| last_bare(text))
}

fn last_fenced(text: &str) -> Option<Map<String, Value>> {
    let mut found = None;
    let mut rest = text;
    while let Some(start) = rest.find("```json") {
        let body = rest.get(start + "```json".len()..).unwrap_or_default();
        let Some(end) = body.find("```") else { break };
        if let Ok(Value::Object(object)) = serde_json::from_str(body.get(..end).unwrap_or_default())
        {
            found = Some(object);
        }
        rest = body.get(end + 3..).unwrap_or_default();
    }
    found
}

fn last_bare(text: &str) -> Option<Map<String, Value>> {
    let mut found = None;
    let mut at = 0;
    while let Some(offset) = text.get(at..).and_then(|rest| rest.find('{')) {
        let start = at + offset;
        let rest = text.get(start..).unwrap_or_default();
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        match values.next() {
            Some(Ok(Value::Object(object))) => {
                found = Some(object);
                at = start + values.byte_offset();
            }
            _ => at = start + 1,
        }
    }
    found
}

fn tail_text<S: serde::Serializer>(tail: &Tail, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&tail.text())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(text: &str) -> Option<Value> {
        extract_object(text).map(Value::Object)
    }

    #[test]
    fn the_answer_is_the_whole_text_or_the_last_fenced_or_bare_object() {
        assert_eq!(object(" {\"a\": 1} "), Some(json!({"a": 1})));
        assert_eq!(
            object("first ```json\n{\"a\": 1}\n``` then ```json\n{\"a\": 2}\n``` done"),
            Some(json!({"a": 2}))
        );
        assert_eq!(
            object("I read {\"x\": {\"y\": 1}} and then {not json} and {\"b\": [1]} ok"),
            Some(json!({"b": [1]}))
        );
        assert_eq!(object("a list [1, 2] and {oops"), None);
        assert_eq!(object("```json\n[1]\n```"), None);
        assert_eq!(object(""), None);
    }
}
