//! `CLAUDE.md`: the execution-model block that tells the agent to run non-trivial work as a
//! Stratum flow. Takes the file's path; returns the plan that appends the block between
//! [`BEGIN_MARKER`] and [`END_MARKER`] (install, replacing an older block in place) or takes
//! it out (uninstall).
//!
//! The block is separated from the text before it by one blank line, and the file keeps its
//! ending: it ends with a blank line, one newline or none after the block as it did before.
//! That ending is what tells uninstall how many newlines install added before the block, so
//! that removal gives back the original bytes without any record of install.

use std::path::Path;

use super::report::Action;
use super::{Change, Plan, SetupError, files};

pub(crate) const FILE: &str = "CLAUDE.md";
pub const BEGIN_MARKER: &str = "<!-- stratum:begin -->";
pub const END_MARKER: &str = "<!-- stratum:end -->";

/// The lines between the markers.
const BODY: &str = "\
## Stratum execution model

For any task of more than a couple of steps (a feature, a refactor, a migration, a review),
run it as a Stratum flow through the `stratum` MCP server instead of improvising:

1. Write the plan as a `.stratum.yaml` spec: steps with an `intent`, an `output_contract`,
   `ensure` postconditions that prove each step done, `retries`, and a gate where a person must
   decide. Check it with `stratum_validate` and fix every error it lists in one edit. A
   minimal one:

   ```yaml
   version: \"0.2\"
   contracts:
     Change:
       summary: {type: string}
       tests_pass: {type: boolean}
   functions:
     approve_change:
       mode: gate
   flows:
     ship:
       input:
         task: {type: string}
       steps:
         - id: implement
           intent: \"Implement the task, then run the tests\"
           inputs: {task: \"$.input.task\"}
           output_contract: Change
           ensure:
             - \"result.tests_pass == True\"
           retries: 2
         - id: review
           function: approve_change
           on_approve: ~
           on_revise: implement
           on_kill: ~
   ```
2. Start it with `stratum_plan(spec, flow, inputs)`; keep the `flow_id` it returns.
3. Do what each dispatch asks (`execute_step`: follow `intent` with `inputs`, produce an object
   with the dispatch's `output_fields`), then report with
   `stratum_step_done(flow_id, step_id, result)`. The server checks the result and answers with
   the next step.
4. If it answers `ensure_failed`, `schema_failed` or `guardrail_blocked`, read `violations`,
   fix the work and report the same step again (`retries_remaining` says how many tries are left).
5. At `await_gate`, when the decision is the person's, tell them how to make it, as the
   dispatch's `how_to_decide` says with this flow's id and gate:
   `stratum-mcp gate approve <flow_id> <step_id> --note \"why\"` (or `revise`, `kill`), or the
   web console when the server runs as `stratum-mcp serve`; then `stratum_resume(flow_id)`. If
   they tell you their decision, record it with `stratum_gate_resolve(flow_id, step_id, outcome,
   rationale, resolved_by)`; never approve on their behalf (`resolved_by: human` only when a
   person decided).
6. After a restart or a lost answer, `stratum_resume(flow_id)` gives the current step again.
7. When the flow is `complete`, call `stratum_audit(flow_id)` and sum up the trace (steps,
   retries, gate decisions) in the final message and the commit.

Narrate progress in plain words; the spec and the tool calls are working material, not output.
Specs you write are checked when you save them: fix the diagnostics a save reports.";

/// The whole block, markers included, with `newline` between lines and none at the end.
pub fn block(newline: &str) -> String {
    let mut lines = vec![BEGIN_MARKER];
    lines.extend(BODY.lines());
    lines.push(END_MARKER);
    lines.join(newline)
}

pub(crate) fn install(path: &Path) -> Result<Plan, SetupError> {
    let existing = files::read(path)?;
    let text = existing.as_deref().unwrap_or("");
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let block = block(newline);
    let plan = |change, action, detail: &str| Plan::new(path, change, action, detail);
    if let Some(found) = find(path, text)? {
        if text.get(found.start..found.end) == Some(block.as_str()) {
            return Ok(plan(
                Change::Keep,
                Action::Unchanged,
                "the stratum block is there",
            ));
        }
        // An older version of the block: replaced where it stands.
        let edited = format!(
            "{}{block}{}",
            text.get(..found.start).unwrap_or(""),
            text.get(found.end..).unwrap_or("")
        );
        return Ok(plan(
            Change::Write(edited),
            Action::Updated,
            "replaced the stratum block with this version's",
        ));
    }
    let edited = if text.is_empty() {
        format!("{block}{newline}")
    } else if text.ends_with(&format!("{newline}{newline}")) {
        // Ends with a blank line already: it separates; the file keeps ending with one.
        format!("{text}{block}{newline}{newline}")
    } else if text.ends_with(newline) {
        format!("{text}{newline}{block}{newline}")
    } else {
        // No newline at the end: none after the block either.
        format!("{text}{newline}{newline}{block}")
    };
    Ok(plan(
        Change::Write(edited),
        if existing.is_some() {
            Action::Updated
        } else {
            Action::Created
        },
        "added the stratum execution-model block",
    ))
}

pub(crate) fn uninstall(path: &Path) -> Result<Plan, SetupError> {
    let plan = |change, action, detail: &str| Plan::new(path, change, action, detail);
    let Some(text) = files::read(path)? else {
        return Ok(plan(Change::Keep, Action::Unchanged, "absent"));
    };
    let Some(found) = find(path, &text)? else {
        return Ok(plan(Change::Keep, Action::Unchanged, "no stratum block"));
    };
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let before = text.get(..found.start).unwrap_or("");
    let after = text.get(found.end..).unwrap_or("");
    let double = format!("{newline}{newline}");
    let edited = if after.is_empty() {
        // Install found no newline at the end and added two before the block.
        before.strip_suffix(&double).unwrap_or(before).to_owned()
    } else if after == newline {
        if before.is_empty() {
            String::new()
        } else {
            before.strip_suffix(newline).unwrap_or(before).to_owned()
        }
    } else if after == double {
        before.to_owned()
    } else {
        // Text after the block (written since): take the block's lines and one blank line.
        let after = after.strip_prefix(newline).unwrap_or(after);
        let before = before.strip_suffix(newline).unwrap_or(before);
        format!("{before}{after}")
    };
    if edited.is_empty() {
        return Ok(plan(
            Change::Delete(edited),
            Action::Removed,
            "removed the stratum block; nothing else was left in it",
        ));
    }
    Ok(plan(
        Change::Write(edited),
        Action::Updated,
        "removed the stratum block",
    ))
}

/// The byte range of the block, from the begin marker to the end of the end marker.
struct Found {
    start: usize,
    end: usize,
}

/// Finds the block: a begin marker at the start of a line, and the first end marker after it.
fn find(path: &Path, text: &str) -> Result<Option<Found>, SetupError> {
    let Some(start) = line_start_of(text, BEGIN_MARKER) else {
        return Ok(None);
    };
    let rest = text.get(start..).unwrap_or("");
    match rest.find(END_MARKER) {
        Some(offset) => Ok(Some(Found {
            start,
            end: start + offset + END_MARKER.len(),
        })),
        None => Err(SetupError::UnterminatedBlock {
            path: path.to_owned(),
            line: text.get(..start).unwrap_or("").matches('\n').count() + 1,
        }),
    }
}

/// The offset of the first occurrence of `needle` that starts a line (a marker quoted in the
/// middle of a sentence is not one).
fn line_start_of(text: &str, needle: &str) -> Option<usize> {
    text.match_indices(needle)
        .map(|(at, _)| at)
        .find(|&at| at == 0 || text.get(..at).is_some_and(|head| head.ends_with('\n')))
}
