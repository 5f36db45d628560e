//! Reasoning certificates (`reasoning_template`, `task_reasoning_template`): the sections an
//! agent's answer must be structured in, written into its prompt, then checked on its result.
//!
//! One rule wherever a template applies (the reference injects for some agents and kinds and
//! checks for others): the instructions go into every prompt of a step or task that has a
//! template, whichever agent runs it, and every result is checked. The check reads the
//! result's `artifact`, else its `reasoning` (text), as the reference does; it matches each
//! `## {label}` heading as a whole line (the reference takes any substring, so `## Trace` in a
//! sentence passed), and with `require_citations` it looks for a `[P<n>]` citation in the
//! last section only. A result that is not an object, or has neither text, is a violation,
//! never a crash.

use serde_json::Value;

/// A template as the spec wrote it, read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Certificate {
    /// `(label, description)` of each section, in order.
    sections: Vec<(String, String)>,
    citations: bool,
}

/// The reference's sections when a template names none.
const DEFAULT_SECTIONS: [(&str, &str); 3] = [
    (
        "Premises",
        "The facts you rely on, each checked against the code or the inputs.",
    ),
    (
        "Trace",
        "How the premises lead, step by step, to the conclusion.",
    ),
    (
        "Conclusion",
        "What follows, and nothing the trace does not support.",
    ),
];

impl Certificate {
    /// The template `value` (`{sections?, require_citations?}`); `None` when it is absent.
    /// The compiler checked its shape; what it cannot read falls back to the defaults.
    pub(crate) fn of(value: Option<&Value>) -> Option<Certificate> {
        let value = value?;
        let sections: Vec<(String, String)> = value
            .get("sections")
            .and_then(Value::as_array)
            .map(|sections| {
                sections
                    .iter()
                    .filter_map(|section| {
                        let label = section.get("label")?.as_str()?.to_owned();
                        let description = section
                            .get("description")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        Some((label, description))
                    })
                    .collect()
            })
            .filter(|sections: &Vec<(String, String)>| !sections.is_empty())
            .unwrap_or_else(|| {
                DEFAULT_SECTIONS
                    .iter()
                    .map(|(label, description)| ((*label).to_owned(), (*description).to_owned()))
                    .collect()
            });
        Some(Certificate {
            sections,
            citations: value
                .get("require_citations")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// What the prompt says, after the intent: the reference's words.
    pub(crate) fn instructions(&self) -> String {
        let mut blocks = Vec::with_capacity(self.sections.len());
        for (at, (label, description)) in self.sections.iter().enumerate() {
            let mut block = format!("## {label}\n{description}\n");
            if self.citations {
                block.push_str(if at == 0 {
                    "Format each fact as: [P1] <fact, citing file:line>, [P2] ..., etc.\n"
                } else {
                    "Reference premises by their [P<n>] ID.\n"
                });
            }
            blocks.push(block);
        }
        format!(
            "\n\n---\n\nYou MUST structure your response with these sections:\n\n{}\nPut the sectioned text in the `artifact` field of your answer.",
            blocks.join("\n")
        )
    }

    /// Why `result` does not follow the template (empty: it does).
    pub(crate) fn violations(&self, result: &Value) -> Vec<String> {
        let text = match result {
            Value::Object(map) => map
                .get("artifact")
                .or_else(|| map.get("reasoning"))
                .and_then(Value::as_str),
            _ => {
                return vec![
                    "certificate violation: the result is not an object with an `artifact` (the sectioned text)"
                        .to_owned(),
                ];
            }
        };
        let Some(text) = text else {
            return vec![
                "certificate violation: the result has no `artifact` or `reasoning` text holding the sections"
                    .to_owned(),
            ];
        };
        let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
        let heading = |label: &str| {
            let wanted = format!("## {label}");
            lines.iter().position(|line| line.trim_start() == wanted)
        };
        let mut problems = Vec::new();
        for (label, _) in &self.sections {
            if heading(label).is_none() {
                problems.push(format!(
                    "certificate missing section: {label} (a line `## {label}`)"
                ));
            }
        }
        if self.citations
            && problems.is_empty()
            && let Some((last, _)) = self.sections.last()
            && let Some(at) = heading(last)
        {
            let conclusion = lines.get(at + 1..).unwrap_or_default().join("\n");
            if !has_citation(&conclusion) {
                problems.push(
                    "certificate violation: conclusion contains no premise citations [P<n>]"
                        .to_owned(),
                );
            }
        }
        problems
    }
}

/// Whether `text` holds `[P<digits>]`.
fn has_citation(text: &str) -> bool {
    text.match_indices("[P").any(|(at, _)| {
        let rest = text.get(at + 2..).unwrap_or_default();
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        digits > 0
            && rest
                .get(digits..)
                .is_some_and(|after| after.starts_with(']'))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn headings_are_whole_lines_and_citations_are_looked_for_in_the_last_section() {
        let cert = Certificate::of(Some(&json!({
            "require_citations": true,
            "sections": [{"id": "p", "label": "Premises", "description": "facts"},
                         {"id": "v", "label": "Verdict", "description": "cite"}]
        })))
        .unwrap();
        let good =
            json!({"artifact": "## Premises\n[P1] a.rs:3 holds\n## Verdict\napprove, by [P1]"});
        assert!(cert.violations(&good).is_empty());
        let inline = json!({"artifact": "see ## Premises and ## Verdict [P1]"});
        assert_eq!(cert.violations(&inline).len(), 2);
        let uncited = json!({"artifact": "## Premises\n[P1] x\n## Verdict\napprove"});
        assert_eq!(
            cert.violations(&uncited),
            ["certificate violation: conclusion contains no premise citations [P<n>]"]
        );
        assert_eq!(cert.violations(&json!("text")).len(), 1);
        assert!(
            cert.instructions()
                .contains("## Premises\nfacts\nFormat each fact as")
        );
        let defaults = Certificate::of(Some(&json!({}))).unwrap();
        assert!(defaults.instructions().contains("## Conclusion"));
    }
}
