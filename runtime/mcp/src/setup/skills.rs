//! The project skill `.claude/skills/stratum/SKILL.md`: how to drive a flow with the tools and
//! what each status means. Takes the file's path; returns the plan that writes it (install)
//! or removes it (uninstall). A skill that differs from [`SKILL`] was edited by someone and is
//! neither overwritten nor removed.

use std::path::Path;

use super::report::Action;
use super::{Change, Plan, SetupError, files};

pub(crate) const FILE: &str = ".claude/skills/stratum/SKILL.md";
/// The directories install may create for the skill, removed by uninstall when left empty.
pub(crate) const DIR: &str = ".claude/skills/stratum";
pub(crate) const PARENT_DIR: &str = ".claude/skills";

/// The skill's text.
pub const SKILL: &str = r#"---
name: stratum
description: Run a multi-step coding task as a checked Stratum flow with the stratum MCP tools (stratum_validate, stratum_plan, stratum_step_done, stratum_gate_resolve, stratum_resume, stratum_audit). Use it for features, refactors, migrations and reviews with more than a couple of steps, and whenever a .stratum.yaml spec is to be written or run.
---

# Driving a Stratum flow

A flow is a spec (`.stratum.yaml`) the `stratum` MCP server runs one step at a time: you do
each step's work, the server checks the result against the spec and tells you what comes next.

## 1. Write the spec

- One step per unit of work, with an `intent` saying what to do and an `output_contract` naming
  the contract (a record type under `contracts:`) its result must be.
- Put what proves the step done in `ensure` (`result.tests_pass == True`,
  `file_exists("src/api.rs")`), give fallible steps `retries`, and add a gate (a step whose
  function has `mode: gate`) where a person must approve.

A complete spec to start from:

```yaml
version: "0.2"
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
        intent: "Implement the task, then run the tests"
        inputs: {task: "$.input.task"}
        output_contract: Change
        ensure:
          - "result.tests_pass == True"
        retries: 2
      - id: review
        function: approve_change
        on_approve: ~
        on_revise: implement
        on_kill: ~
```

- Call `stratum_validate(spec)` with the YAML text. It lists every error at once with line,
  column, suggestion and, when mechanical, `fix.edits`: fix them all in one edit.

## 2. Run it

Call `stratum_plan(spec, flow, inputs)`; keep the `flow_id`. Then loop on the answer's `status`:

| status | what to do |
|---|---|
| `execute_step` | Follow `intent` with `inputs`; produce an object with the `output_fields` that satisfies every `ensure`; call `stratum_step_done(flow_id, step_id, result)`. |
| `ensure_failed`, `schema_failed`, `guardrail_blocked` | The result was refused. Read `violations`, fix the work (not the check), report the same step again. `retries_remaining` counts the tries left. |
| `execute_flow` | A sub-flow started: work through `child_step` on the child's `flow_id`; when the child answers `complete`, report that answer to the parent step. |
| `await_gate` | A decision is needed. When it is the person's, tell them how to decide, as `how_to_decide` says with this flow's id and gate: `stratum-mcp gate approve <flow_id> <step_id> --note "why"` (or `revise`, `kill`) in a terminal, or the gate's page in the web console when the server runs as `stratum-mcp serve`; then `stratum_resume(flow_id)` for what comes next. When they tell you their decision instead, record it with `stratum_gate_resolve(flow_id, step_id, outcome, rationale, resolved_by: "human")`; `resolved_by: human` only when a person decided. |
| `complete` | Done: `output` is the flow's result, `trace` its record. |
| `killed`, `budget_exhausted`, `failed` | The flow ended without completing; say why. |
| `error` | Nothing changed. `error_type` and `message` say why: `wrong_step` (report the step the last dispatch named), `retries_exhausted` (the step failed for good), `flow_not_found`, a spec error with `diagnostics` to fix. |

If an answer is lost or the session restarted, `stratum_resume(flow_id)` returns the current
dispatch again.

## 3. Finish

Call `stratum_audit(flow_id)` and sum up the trace (steps, retries, gate decisions, budget)
in your final message and the commit. Narrate progress in plain words as you go; the spec and
the tool calls are working material, not output.
"#;

pub(crate) fn install(path: &Path) -> Result<Plan, SetupError> {
    let (change, action, detail) = match files::read(path)? {
        None => (
            Change::Write(SKILL.to_owned()),
            Action::Created,
            "added the `stratum` skill",
        ),
        Some(text) if text == SKILL => (Change::Keep, Action::Unchanged, "the skill is there"),
        Some(_) => (
            Change::Keep,
            Action::Skipped,
            "left the skill: it differs from this version's (edited?); delete it and run install again to replace it",
        ),
    };
    Ok(Plan {
        path: path.to_owned(),
        change,
        action,
        detail: detail.to_owned(),
    })
}

pub(crate) fn uninstall(path: &Path) -> Result<Plan, SetupError> {
    let (change, action, detail) = match files::read(path)? {
        None => (Change::Keep, Action::Unchanged, "absent"),
        Some(text) if text == SKILL => (
            Change::Delete(String::new()),
            Action::Removed,
            "removed the skill",
        ),
        Some(_) => (
            Change::Keep,
            Action::Skipped,
            "left the skill: it differs from the one install writes (edited?); delete it by hand if you wish",
        ),
    };
    Ok(Plan {
        path: path.to_owned(),
        change,
        action,
        detail: detail.to_owned(),
    })
}
