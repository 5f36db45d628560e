//! A gate's context as plain text, for the elicitation form (a client's dialog) and the
//! terminal (`stratum-mcp query gates`): every name and value made visible, multi-line values
//! keeping their lines and tabs, each part bounded by [`TextBounds`].

use std::fmt::Write as _;

use stratum_grammar::print::visible;

use super::{
    GateContext, MAX_DECISIONS, MAX_DIFF_CHARS, MAX_DIFF_FILES, MAX_RATIONALE_CHARS,
    MAX_VALUE_CHARS, StepDiff,
};

/// How much of a context [`to_text`] shows: the form has less room than a terminal.
#[derive(Clone, Copy, Debug)]
pub struct TextBounds {
    /// Characters of the input and of each output.
    pub value_chars: usize,
    /// Characters of each rationale.
    pub rationale_chars: usize,
    /// Decisions shown, the newest.
    pub decisions: usize,
    /// Files listed per merged diff.
    pub files: usize,
    /// Characters of each merged diff's text (0: its summary only).
    pub diff_chars: usize,
}

impl TextBounds {
    /// The elicitation form's: a client shows its message in a dialog.
    pub const FORM: TextBounds = TextBounds {
        value_chars: 600,
        rationale_chars: 300,
        decisions: 5,
        files: 20,
        diff_chars: 2_000,
    };
    /// A terminal's (`stratum-mcp query gates --context`): what the context keeps.
    pub const TERMINAL: TextBounds = TextBounds {
        value_chars: MAX_VALUE_CHARS,
        rationale_chars: MAX_RATIONALE_CHARS,
        decisions: MAX_DECISIONS,
        files: MAX_DIFF_FILES,
        diff_chars: MAX_DIFF_CHARS,
    };
}

/// The context as plain text for a person, every name and value made visible (a control
/// character or a bidirectional override is written as its escape, so nothing in a flow can
/// drive a terminal or disguise itself), line breaks and tabs kept in multi-line values.
/// Bounded by `bounds` and by the context's own bounds.
pub fn to_text(context: &GateContext, bounds: TextBounds) -> String {
    let mut text = String::new();
    let place = |target: &Option<String>, otherwise: &str| {
        target.as_ref().map_or_else(
            || otherwise.to_owned(),
            |step| format!("step '{}'", visible(step)),
        )
    };
    let _ = writeln!(
        text,
        "Flow '{}' ({}) waits at gate '{}' ({}), round {}.",
        visible(&context.flow_name),
        context.flow_id,
        visible(&context.step_id),
        visible(&context.function),
        context.round
    );
    let _ = writeln!(
        text,
        "approve → {}; revise → {}; kill → {}.",
        place(&context.on_approve, "the flow completes"),
        place(&context.on_revise, "the flow's first step"),
        place(&context.on_kill, "the flow ends, killed"),
    );
    if let Some(remaining) = context.remaining_s {
        let _ = writeln!(
            text,
            "The gate times out in {remaining} s (then its timeout rule applies)."
        );
    }
    let _ = write!(
        text,
        "\nThe flow's input:\n{}\n",
        indented(&context.input.refold(bounds.value_chars).shown())
    );
    if context.outputs.is_empty() {
        text.push_str("\nNo step before the gate has an output.\n");
    } else {
        text.push_str("\nThe work before the gate:\n");
        if context.outputs_left_out > 0 {
            let _ = writeln!(
                text,
                "  ({} earlier steps left out)",
                context.outputs_left_out
            );
        }
        for output in &context.outputs {
            match &output.output {
                Some(value) => {
                    let _ = write!(
                        text,
                        "- {}:\n{}\n",
                        visible(&output.step_id),
                        indented(&value.refold(bounds.value_chars).shown())
                    );
                }
                None => {
                    let _ = writeln!(text, "- {}: skipped", visible(&output.step_id));
                }
            }
        }
    }
    decisions_text(&mut text, context, bounds);
    for diff in &context.diffs {
        diff_text(&mut text, diff, bounds);
    }
    text
}

fn decisions_text(text: &mut String, context: &GateContext, bounds: TextBounds) {
    if context.decisions.is_empty() {
        return;
    }
    text.push_str("\nEarlier decisions:\n");
    let skip = context.decisions.len().saturating_sub(bounds.decisions);
    let left_out = u64::from(context.decisions_left_out)
        .saturating_add(u64::try_from(skip).unwrap_or(u64::MAX));
    if left_out > 0 {
        let _ = writeln!(text, "  ({left_out} older decisions left out)");
    }
    for decision in context.decisions.iter().skip(skip) {
        let mut by = visible(&decision.resolved_by).into_owned();
        if let Some(policy) = &decision.policy {
            let _ = write!(by, " {}", visible(policy));
        }
        if let Some(actor) = &decision.actor {
            // An access token's name, or `os:<user>` (the operator's, a stdio form's).
            let _ = write!(by, " as {}", visible(actor));
        }
        if let Some(via) = &decision.via {
            let _ = write!(by, ", via {}", visible(via));
        }
        if let Some(client) = &decision.client {
            let _ = write!(by, " ({})", visible(client));
        }
        let rationale = decision.rationale.refold(bounds.rationale_chars).shown();
        let _ = writeln!(
            text,
            "- round {}, {}: {} by {} at {}{}",
            decision.round,
            visible(&decision.step_id),
            visible(&decision.outcome),
            by,
            crate::cli::watch::utc(decision.at_ms),
            if rationale.is_empty() {
                " (no rationale)".to_owned()
            } else {
                format!(": \"{}\"", visible(&rationale))
            }
        );
    }
}

fn diff_text(text: &mut String, diff: &StepDiff, bounds: TextBounds) {
    let _ = writeln!(
        text,
        "\nChanges merged by step '{}' (attempt {}; tasks {}): {}, +{} −{}",
        visible(&diff.step_id),
        diff.attempt,
        if diff.tasks.is_empty() {
            "none shown".to_owned()
        } else {
            diff.tasks
                .iter()
                .map(|task| visible(task).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        },
        plural(
            diff.files
                .len()
                .saturating_add(diff.files_left_out as usize),
            "file"
        ),
        diff.added,
        diff.removed,
    );
    for file in diff.files.iter().take(bounds.files) {
        if file.binary {
            let _ = writeln!(text, "  {} (binary)", visible(&file.path));
        } else {
            let _ = writeln!(
                text,
                "  {} +{} −{}",
                visible(&file.path),
                file.added,
                file.removed
            );
        }
    }
    let unlisted = diff
        .files
        .len()
        .saturating_sub(bounds.files)
        .saturating_add(diff.files_left_out as usize);
    if unlisted > 0 {
        let _ = writeln!(text, "  and {} more", plural(unlisted, "file"));
    }
    for missing in &diff.not_shown {
        let why = match missing.reason {
            "too_large" => "too large to show here",
            _ => "no longer in the store",
        };
        let _ = writeln!(
            text,
            "  task '{}': {} bytes of diff, {why} (stratum_parallel_poll has what is stored)",
            visible(&missing.task_id),
            missing.bytes
        );
    }
    if bounds.diff_chars > 0 && !diff.text.text.is_empty() {
        let shown = diff.text.refold(bounds.diff_chars).shown();
        let _ = writeln!(text, "{}", block(shown.trim_end_matches('\n')));
    }
}

/// `n` and its noun, plural unless one.
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A multi-line value, each line made visible and indented by two spaces.
fn indented(value: &str) -> String {
    block(value)
        .lines()
        .map(|line| format!("  {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A multi-line text made visible line by line, its line breaks and tabs kept.
fn block(value: &str) -> String {
    value
        .split('\n')
        .map(|line| {
            line.split('\t')
                .map(|part| visible(part).into_owned())
                .collect::<Vec<_>>()
                .join("\t")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing, clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::gate_context::{Decision, Folded, StepOutput};

    fn context() -> GateContext {
        GateContext {
            flow_id: "2d806c3c-0714-4b3d-b2fd-9285c44618c2".to_owned(),
            flow_name: "reviewed_work".to_owned(),
            input: Folded::of_value(&json!({"text": "t"}), MAX_VALUE_CHARS),
            step_id: "review".to_owned(),
            function: "review_gate".to_owned(),
            round: 1,
            on_approve: None,
            on_revise: Some("work".to_owned()),
            on_kill: None,
            waiting_since_ms: Some(0),
            timeout_s: Some(3600),
            remaining_s: Some(3599),
            outputs: vec![StepOutput {
                step_id: "work".to_owned(),
                skipped: false,
                output: Some(Folded::of_value(
                    &json!({"result": "x".repeat(700)}),
                    MAX_VALUE_CHARS,
                )),
            }],
            outputs_left_out: 0,
            decisions: vec![Decision {
                step_id: "review".to_owned(),
                round: 0,
                outcome: "revise".to_owned(),
                rationale: Folded::of_text("needs \u{1b}[2Ja test", MAX_RATIONALE_CHARS),
                resolved_by: "human".to_owned(),
                actor: Some("alice".to_owned()),
                via: None,
                client: None,
                policy: None,
                at_ms: 0,
            }],
            decisions_left_out: 0,
            diffs: Vec::new(),
        }
    }

    #[test]
    fn the_text_shows_the_flow_the_work_and_earlier_decisions_visibly() {
        let text = to_text(&context(), TextBounds::FORM);
        assert!(
            text.starts_with(
                "Flow 'reviewed_work' (2d806c3c-0714-4b3d-b2fd-9285c44618c2) waits at gate \
                 'review' (review_gate), round 1.\napprove → the flow completes; revise → \
                 step 'work'; kill → the flow ends, killed.\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("The flow's input:\n  {\n    \"text\": \"t\"\n  }\n"),
            "{text}"
        );
        assert!(
            text.contains("- work:\n  {\n    \"result\": \"xxx"),
            "{text}"
        );
        assert!(text.contains("… (118 more characters)"), "{text}");
        assert!(
            text.contains(
                "- round 0, review: revise by human as alice at 1970-01-01T00:00:00Z: \
                 \"needs \\x1b[2Ja test\""
            ),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "{text}");
    }
}
