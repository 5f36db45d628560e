//! Query results as aligned text tables, for a person at a terminal (`--json` or a pipe gets
//! the JSON contracts instead).
//!
//! Every cell, and every name in a line around a table, goes through
//! [`stratum_grammar::print::visible`]: flow names, step ids and function names come from
//! specs an agent may have written, so a control character in one is shown as an escape
//! (`\x1b`) instead of reaching the terminal, where it could retitle the window or overwrite
//! the row of another gate.

use stratum_grammar::print::visible;

use crate::gate_context::{TextBounds, to_text};

use super::query::{FlowState, FlowSummary, PendingGate, StepMode, SummaryStatus};

/// `query flows` as a table, newest first.
pub fn flows(flows: &[FlowSummary]) -> String {
    if flows.is_empty() {
        return "no flows in the store\n".to_owned();
    }
    let rows = flows
        .iter()
        .map(|flow| {
            vec![
                flow.flow_id.clone(),
                flow.flow_name.clone(),
                status(flow.status).to_owned(),
                flow.current_step_id
                    .clone()
                    .unwrap_or_else(|| "-".to_owned()),
                format!("{}/{}", flow.completed_steps, flow.step_count),
                flow.round.to_string(),
            ]
        })
        .collect::<Vec<_>>();
    render(&["FLOW", "NAME", "STATUS", "STEP", "DONE", "ROUND"], &rows)
}

/// `query gates` as a table, with the command that resolves each.
pub fn gates(gates: &[PendingGate]) -> String {
    if gates.is_empty() {
        return "no gate is waiting\n".to_owned();
    }
    let rows = gates
        .iter()
        .map(|gate| {
            vec![
                gate.flow_id.clone(),
                gate.flow_name.clone(),
                gate.step_id.clone(),
                gate.on_approve
                    .clone()
                    .unwrap_or_else(|| "(end)".to_owned()),
                gate.on_revise.clone().unwrap_or_else(|| "-".to_owned()),
                gate.timeout
                    .map_or_else(|| "-".to_owned(), |seconds| format!("{seconds} s")),
            ]
        })
        .collect::<Vec<_>>();
    let mut text = render(
        &["FLOW", "NAME", "GATE", "ON APPROVE", "ON REVISE", "TIMEOUT"],
        &rows,
    );
    text.push_str(
        "\nresolve one with: stratum-mcp gate approve|revise|kill FLOW GATE --note TEXT\n",
    );
    text
}

/// Each gate's context for a person (`query gates --context`, `query gates FLOW`): the flow
/// and its input, the work before the gate, earlier decisions with their rationales, the
/// merged changes, and the command that decides it. Made visible as the tables are.
pub fn gate_contexts(gates: &[PendingGate]) -> String {
    let mut text = String::new();
    for gate in gates {
        let context = &gate.context;
        text.push_str(&format!(
            "── {} {} {}\n",
            visible(&context.flow_id),
            visible(&context.step_id),
            "─".repeat(20)
        ));
        if let Some(since) = context.waiting_since_ms {
            text.push_str(&format!("Waiting since {}.\n", super::watch::utc(since)));
        }
        text.push_str(&to_text(context, TextBounds::TERMINAL));
        text.push_str(&format!(
            "\ndecide with: stratum-mcp gate approve|revise|kill {} {} --note TEXT\n\n",
            visible(&context.flow_id),
            visible(&context.step_id)
        ));
    }
    text
}

/// `query flow ID` for a person: where it stands, its steps, its trace.
pub fn flow(state: &FlowState) -> String {
    let mut text = format!(
        "flow {}  {}\nstatus {}  round {}  step {}/{}{}\n\n",
        visible(&state.flow_id),
        visible(&state.flow_name),
        status(state.status),
        state.round,
        state.current_idx,
        state.step_count,
        state
            .started_by
            .as_deref()
            .map_or_else(String::new, |who| format!("  started by {}", visible(who)))
    );
    let rows = state
        .ordered_steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            let here = state.current_step_id.as_deref() == Some(step.id.as_str());
            vec![
                if here {
                    "→".to_owned()
                } else {
                    String::new()
                },
                (index + 1).to_string(),
                step.id.clone(),
                match step.mode {
                    StepMode::Gate => "gate".to_owned(),
                    StepMode::Step => "step".to_owned(),
                },
                step.function.clone().unwrap_or_else(|| "-".to_owned()),
                state
                    .step_outputs
                    .get(&step.id)
                    .map_or_else(String::new, shown_output),
            ]
        })
        .collect::<Vec<_>>();
    text.push_str(&render(
        &["", "#", "STEP", "KIND", "FUNCTION", "OUTPUT"],
        &rows,
    ));
    text.push_str(&format!(
        "\n{} record(s) in this round, {} earlier round(s); `--json` prints them all\n",
        state.records.len(),
        state.rounds_count
    ));
    text
}

/// Characters of a step's output shown in `query flow`'s table; `--json` has the whole value.
const MAX_OUTPUT_CHARS: usize = 60;

/// A step's output in one cell: its JSON on one line, cut at [`MAX_OUTPUT_CHARS`] (`…`); a
/// skipped step's is `null`.
fn shown_output(output: &serde_json::Value) -> String {
    let text = output.to_string();
    match text.char_indices().nth(MAX_OUTPUT_CHARS) {
        Some((at, _)) => format!("{}…", text.get(..at).unwrap_or_default()),
        None => text,
    }
}

fn status(status: SummaryStatus) -> &'static str {
    match status {
        SummaryStatus::Running => "running",
        SummaryStatus::AwaitingGate => "awaiting gate",
        SummaryStatus::Complete => "complete",
        SummaryStatus::Killed => "killed",
        SummaryStatus::BudgetExhausted => "budget exhausted",
        SummaryStatus::Failed => "failed",
        SummaryStatus::Cancelled => "cancelled",
    }
}

/// Columns padded to their widest cell (counted in characters), two spaces apart; every
/// cell made [`visible`].
pub(crate) fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| visible(cell).into_owned()).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|cell| cell.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (cell, width) in cells.zip(&widths) {
            out.push_str(cell);
            out.push_str(&" ".repeat(width.saturating_sub(cell.chars().count()) + 2));
        }
        text.push_str(out.trim_end());
        text.push('\n');
    };
    line(&mut header.iter().copied());
    for row in &rows {
        line(&mut row.iter().map(String::as_str));
    }
    text
}
