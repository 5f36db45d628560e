//! What an agent is told: the step's intent, its resolved inputs, the output contract and, on
//! a retry, the previous attempt's violations.
//!
//! The prompt reaches the agent on stdin, never on a command line or through a shell, so no
//! input can become a flag or a command. A retry carries the violations verbatim (the reference
//! resent the same prompt, so the agent repeated its mistake).

use serde_json::Value;

/// One attempt's prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// The step's intent, as the spec states it.
    pub intent: String,
    /// The step's resolved inputs.
    pub inputs: Value,
    /// The output contract as a JSON Schema; `None` when the step declares none (the answer
    /// must still be one JSON object).
    pub schema: Option<Value>,
    /// The previous attempt's violations, verbatim; empty on a first attempt.
    pub violations: Vec<String>,
}

impl Prompt {
    /// The text given to the agent.
    pub fn render(&self) -> Result<String, serde_json::Error> {
        let mut text = String::new();
        text.push_str(self.intent.trim());
        text.push_str("\n\nInputs (JSON):\n");
        text.push_str(&serde_json::to_string_pretty(&self.inputs)?);
        text.push('\n');
        if !self.violations.is_empty() {
            text.push_str(
                "\nYour previous answer was rejected. Fix every one of these violations:\n",
            );
            for violation in &self.violations {
                text.push_str("- ");
                text.push_str(violation);
                text.push('\n');
            }
        }
        text.push_str(
            "\nWhen you have finished, answer with exactly one JSON object, in a ```json fenced \
             block at the very end of your reply, and nothing after it.",
        );
        if let Some(schema) = &self.schema {
            text.push_str(" The object must match this JSON Schema:\n```json\n");
            text.push_str(&serde_json::to_string_pretty(schema)?);
            text.push_str("\n```");
        }
        text.push('\n');
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_carries_the_violations_verbatim() -> Result<(), serde_json::Error> {
        let prompt = Prompt {
            intent: "Classify the text.".into(),
            inputs: serde_json::json!({"text": "hello"}),
            schema: Some(serde_json::json!({"type": "object", "required": ["label"]})),
            violations: vec!["ensure failed: result.confidence > 0.7".into()],
        };
        let text = prompt.render()?;
        assert!(
            text.starts_with("Classify the text.\n\nInputs (JSON):\n{\n  \"text\": \"hello\"\n}\n")
        );
        assert!(text.contains("- ensure failed: result.confidence > 0.7\n"));
        assert!(text.contains("exactly one JSON object"));
        assert!(text.contains("\"required\": [\n    \"label\"\n  ]"));
        Ok(())
    }
}
