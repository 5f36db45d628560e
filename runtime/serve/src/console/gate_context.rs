//! A gate's context as the console shows it, on the gate's card (`/gates`) and on its flow's
//! page: the flow's input, the work before the gate, earlier decisions with their rationales,
//! and the changes its parallel steps merged. Each value shows a short preview and opens
//! (`<details>`, no script) to the folded whole the context keeps.
//!
//! Contract: `div.gate-context[data-round]` holding `details.gate-input` (its `pre`),
//! `ul.gate-outputs` with an `li[data-step-id]` per output (its `pre`, or `.skipped`) or
//! `p.no-outputs`, `ol.gate-decisions` with an `li[data-step-id][data-round][data-outcome]`
//! per decision (its `q.rationale`), and a `div.gate-diff[data-step-id]` per step that merged
//! changes (`ul.files` with an `li[data-path]` per file, `details > pre.diff`, `p.not-shown`
//! per task whose diff is not shown).
//!
//! Everything from the flow is escaped and made visible ([`escape`]); tabs stay tabs (as
//! `&#9;`), which a diff's indentation needs.

use std::fmt::Write;

use stratum_mcp::gate_context::{Folded, GateContext, StepDiff};

use super::{moment, shown_name, shown_text};
use crate::http::pages::{escape, thousands};

/// Characters of a value's preview in its summary line.
const PREVIEW_CHARS: usize = 120;

/// The context's HTML.
pub fn render(context: &GateContext) -> String {
    let mut html = format!(
        "<div class=\"gate-context\" data-round=\"{}\">",
        context.round
    );
    let _ = write!(
        html,
        "<details class=\"gate-input\"><summary>Input of flow <strong>{}</strong>: \
         <span class=\"preview\">{}</span></summary>{}</details>",
        shown_name(&context.flow_name),
        preview(&context.input),
        block(&context.input, "json"),
    );
    outputs(&mut html, context);
    decisions(&mut html, context);
    for diff in &context.diffs {
        merged(&mut html, diff);
    }
    html.push_str("</div>");
    html
}

fn outputs(html: &mut String, context: &GateContext) {
    if context.outputs.is_empty() {
        html.push_str("<p class=\"no-outputs\">No step before the gate has an output.</p>");
        return;
    }
    html.push_str("<h3>The work before the gate</h3>");
    if context.outputs_left_out > 0 {
        let _ = write!(
            html,
            "<p class=\"more\">{} earlier steps are left out; the flow's page has them.</p>",
            thousands(context.outputs_left_out as usize)
        );
    }
    html.push_str("<ul class=\"gate-outputs\">");
    for output in &context.outputs {
        let step = shown_name(&output.step_id);
        match &output.output {
            Some(value) => {
                let _ = write!(
                    html,
                    "<li data-step-id=\"{step}\"><details><summary><code>{step}</code> \
                     <span class=\"preview\">{}</span></summary>{}</details></li>",
                    preview(value),
                    block(value, "json"),
                );
            }
            None => {
                let _ = write!(
                    html,
                    "<li data-step-id=\"{step}\"><code>{step}</code> <span class=\"skipped\">skipped</span></li>"
                );
            }
        }
    }
    html.push_str("</ul>");
}

fn decisions(html: &mut String, context: &GateContext) {
    if context.decisions.is_empty() {
        return;
    }
    html.push_str("<h3>Earlier decisions</h3>");
    if context.decisions_left_out > 0 {
        let _ = write!(
            html,
            "<p class=\"more\">The oldest {} decisions are left out; the flow's page has them.</p>",
            thousands(context.decisions_left_out as usize)
        );
    }
    html.push_str("<ol class=\"gate-decisions\">");
    for decision in &context.decisions {
        let mut by = escape(&decision.resolved_by);
        if let Some(policy) = &decision.policy {
            let _ = write!(by, " {}", escape(policy));
        }
        if let Some(actor) = &decision.actor {
            let _ = write!(by, " (token {})", shown_name(actor));
        }
        if let Some(via) = &decision.via {
            let _ = write!(by, " via {}", shown_name(via));
        }
        if let Some(client) = &decision.client {
            let _ = write!(by, " in {}", shown_name(client));
        }
        let rationale = if decision.rationale.text.is_empty() {
            "<span class=\"sub\">no rationale</span>".to_owned()
        } else {
            format!(
                "<q class=\"rationale\">{}</q>",
                shown_text(&decision.rationale.shown())
            )
        };
        let _ = write!(
            html,
            "<li data-step-id=\"{step}\" data-round=\"{round}\" data-outcome=\"{outcome}\">\
             Round {round}, <code>{step}</code>: <strong>{outcome}</strong> by {by}, {at}: {rationale}</li>",
            step = shown_name(&decision.step_id),
            round = decision.round,
            outcome = shown_name(&decision.outcome),
            at = moment(decision.at_ms),
        );
    }
    html.push_str("</ol>");
}

fn merged(html: &mut String, diff: &StepDiff) {
    let step = shown_name(&diff.step_id);
    let files = diff
        .files
        .len()
        .saturating_add(diff.files_left_out as usize);
    let _ = write!(
        html,
        "<div class=\"gate-diff\" data-step-id=\"{step}\"><h3>Changes merged by <code>{step}</code></h3>\
         <p>Attempt {attempt}, {tasks}: {files} {noun}, <span class=\"add\">+{added}</span> \
         <span class=\"del\">−{removed}</span>.</p><ul class=\"files\">",
        attempt = diff.attempt,
        tasks = if diff.tasks.is_empty() {
            "no task's diff shown".to_owned()
        } else {
            format!(
                "tasks {}",
                diff.tasks
                    .iter()
                    .map(|task| format!("<code>{}</code>", shown_name(task)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        files = thousands(files),
        noun = if files == 1 { "file" } else { "files" },
        added = thousands(usize::try_from(diff.added).unwrap_or(usize::MAX)),
        removed = thousands(usize::try_from(diff.removed).unwrap_or(usize::MAX)),
    );
    for file in &diff.files {
        let path = shown_name(&file.path);
        let counts = if file.binary {
            "binary".to_owned()
        } else {
            format!(
                "<span class=\"add\">+{}</span> <span class=\"del\">−{}</span>",
                file.added, file.removed
            )
        };
        let _ = write!(
            html,
            "<li data-path=\"{path}\"><code>{path}</code> {counts}</li>"
        );
    }
    html.push_str("</ul>");
    if diff.files_left_out > 0 {
        let _ = write!(
            html,
            "<p class=\"more\">and {} more files</p>",
            thousands(diff.files_left_out as usize)
        );
    }
    for missing in &diff.not_shown {
        let why = match missing.reason {
            "too_large" => "too large to show here",
            _ => "no longer in the store",
        };
        let _ = write!(
            html,
            "<p class=\"not-shown\">Task <code>{}</code>: {} of diff, {why} \
             (<code>stratum_parallel_poll</code> has what is stored).</p>",
            shown_name(&missing.task_id),
            escape(&super::flow::byte_size(missing.bytes)),
        );
    }
    if !diff.text.text.is_empty() {
        let _ = write!(
            html,
            "<details><summary>The diff ({})</summary><pre class=\"diff\">{}{}</pre></details>",
            escape(&super::flow::byte_size(diff.bytes)),
            diff_lines(&diff.text.text),
            more(&diff.text),
        );
    }
    html.push_str("</div>");
}

/// A value on one line (its lines trimmed and joined: indented JSON reads as compact),
/// cut at [`PREVIEW_CHARS`] (`…` when anything is left out).
fn preview(value: &Folded) -> String {
    let mut line = String::new();
    for part in value
        .text
        .lines()
        .map(str::trim)
        .filter(|part| !part.is_empty())
    {
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(part);
        if line.chars().count() > PREVIEW_CHARS {
            break;
        }
    }
    let whole = value.more_chars == 0 && line.chars().count() <= PREVIEW_CHARS;
    let cut: String = line.chars().take(PREVIEW_CHARS).collect();
    format!(
        "{}{}",
        escape_keeping_tabs(&cut),
        if whole { "" } else { "…" }
    )
}

/// A folded value in a `<pre>`, with the note of what was cut.
fn block(value: &Folded, class: &str) -> String {
    format!(
        "<pre class=\"{class}\">{}{}</pre>",
        escape_keeping_tabs(&value.text),
        more(value)
    )
}

/// The note after a cut value.
fn more(value: &Folded) -> String {
    if value.more_chars == 0 {
        String::new()
    } else {
        format!(
            "\n<span class=\"more\">… ({} more characters; the whole is in the audit)</span>",
            thousands(usize::try_from(value.more_chars).unwrap_or(usize::MAX))
        )
    }
}

/// A diff's lines, escaped, each added or removed line marked for its colour.
fn diff_lines(text: &str) -> String {
    text.split('\n')
        .map(|line| {
            let escaped = escape_keeping_tabs(line);
            if line.starts_with('+') && !line.starts_with("+++") {
                format!("<span class=\"add\">{escaped}</span>")
            } else if line.starts_with('-') && !line.starts_with("---") {
                format!("<span class=\"del\">{escaped}</span>")
            } else {
                escaped
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// [`escape`], with tabs kept as tabs (a diff's indentation), written as the character
/// reference `&#9;` so that the page itself holds no control character.
fn escape_keeping_tabs(text: &str) -> String {
    text.split('\t')
        .map(escape)
        .collect::<Vec<_>>()
        .join("&#9;")
}
