//! What a person deciding a gate is shown about it: the flow (its name and input), the gate
//! (its function, round, routes and timeout), the work before it (the outputs of the steps it
//! depends on), the decisions already made at the flow's gates with their rationales, and the
//! changes its parallel steps merged into the project (files, lines added and removed, the
//! diff). One model, [`GateContext`], read from a store snapshot by [`of`] (or [`read`], one
//! read transaction of its own) and shown by every surface: the elicitation form
//! (`gate_wait::message`), `stratum-mcp query gates` and the console's gate cards and flow
//! page.
//!
//! Invariant: a context is bounded whatever the flow holds. Every value is folded
//! ([`Folded`]: its first characters and how many more there were), every list keeps its
//! newest entries and counts the rest, and a merged diff is read only up to
//! [`MAX_DIFF_READ_BYTES`] a task and [`MAX_DIFF_READ_TOTAL`] a gate, so that a 200 MiB diff
//! in the store never becomes 200 MiB of page or of memory kept.
//!
//! In reading order: the model and [`of`] (here), [`fold`] (values cut while they are
//! written), [`diff`] (merged diffs read within bounds, counted per file), [`text`] (the
//! context as plain text, for the form and the terminal).

mod diff;
mod fold;
mod text;

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Serialize;
use stratum_compiler::plan::{self, Action, Plan, Target};

pub use diff::file_changes;
pub use fold::Folded;
pub use text::{TextBounds, to_text};

use crate::ids::FlowId;
use crate::response::Record;
use crate::state::{EventBody, FlowHeader, StepState};
use crate::store::{Snapshot, Store, StoreError};

/// Characters kept of the flow's input and of each output.
pub const MAX_VALUE_CHARS: usize = 4_000;
/// Characters kept of each rationale.
pub const MAX_RATIONALE_CHARS: usize = 2_000;
/// Outputs kept: the ones nearest the gate.
pub const MAX_OUTPUTS: usize = 50;
/// Decisions kept: the newest.
pub const MAX_DECISIONS: usize = 20;
/// Characters kept of a step's merged diff.
pub const MAX_DIFF_CHARS: usize = 20_000;
/// Files listed per step's merged diff.
pub const MAX_DIFF_FILES: usize = 100;
/// The largest task diff read to show it (larger ones are named with their size only).
pub const MAX_DIFF_READ_BYTES: u64 = 8 * 1024 * 1024;
/// The most bytes of diff read for one gate's context, over all its steps and tasks.
pub const MAX_DIFF_READ_TOTAL: u64 = 32 * 1024 * 1024;

/// A gate a flow waits at, with everything a person needs to decide it.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct GateContext {
    pub flow_id: String,
    pub flow_name: String,
    /// The flow's input.
    pub input: Folded,
    /// The gate's step.
    pub step_id: String,
    /// The gate function it calls.
    pub function: String,
    /// The round the gate asks in (one more per revise).
    pub round: u32,
    /// The step an approval leads to; `null`: the flow ends, complete.
    pub on_approve: Option<String>,
    /// The step a revise sends the work back to.
    pub on_revise: Option<String>,
    /// The step a kill leads to (a clean-up); `null`: the flow ends, killed.
    pub on_kill: Option<String>,
    /// When the flow reached the gate (milliseconds since the Unix epoch).
    pub waiting_since_ms: Option<u64>,
    /// Seconds from reaching the gate until its timeout rule applies, if it has one.
    pub timeout_s: Option<u64>,
    /// Seconds left of that when the context was read.
    pub remaining_s: Option<u64>,
    /// The work the gate is about: the outputs of the steps it depends on (when the spec says
    /// which), else of every step before it, in the flow's order.
    pub outputs: Vec<StepOutput>,
    /// Earlier steps left out (the ones farthest from the gate).
    pub outputs_left_out: u32,
    /// The decisions made at the flow's gates, this one's earlier rounds included, oldest
    /// first.
    pub decisions: Vec<Decision>,
    /// Older decisions left out.
    pub decisions_left_out: u32,
    /// What each parallel or pipeline step before the gate merged into the project.
    pub diffs: Vec<StepDiff>,
}

/// One step's output.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct StepOutput {
    pub step_id: String,
    /// The step was skipped: it has no output.
    pub skipped: bool,
    /// Its accepted result; `null` when skipped.
    pub output: Option<Folded>,
}

/// A decision made at a gate (by a person, an agent, a timeout) or by a gate's policy.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Decision {
    /// The gate decided.
    pub step_id: String,
    pub round: u32,
    /// `approve`, `revise` or `kill`.
    pub outcome: String,
    pub rationale: Folded,
    /// `human`, `agent`, `system`, or `policy` for a gate's policy.
    pub resolved_by: String,
    /// The access token that sent it over HTTP.
    pub actor: Option<String>,
    /// How a person's decision reached the server (`elicitation`).
    pub via: Option<String>,
    /// The client that asked the person, as it declared itself.
    pub client: Option<String>,
    /// The policy that decided (`flag`, `skip`, `skip_if`), for `resolved_by: policy`.
    pub policy: Option<String>,
    pub at_ms: u64,
}

/// The changes a parallel or pipeline step merged into the project, its tasks' diffs in
/// merge order.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct StepDiff {
    pub step_id: String,
    /// The step's attempt that ran the tasks.
    pub attempt: u32,
    /// The tasks whose merged diff is shown, in merge order.
    pub tasks: Vec<String>,
    /// The files changed, in the order the diffs name them, each once.
    pub files: Vec<FileChange>,
    /// Files left out of `files`.
    pub files_left_out: u32,
    /// Lines added and removed, over every file.
    pub added: u64,
    pub removed: u64,
    /// The bytes of diff shown.
    pub bytes: u64,
    /// The diffs, one after another.
    pub text: Folded,
    /// Merged tasks whose diff is not shown.
    pub not_shown: Vec<NotShown>,
}

/// One file of a merged diff.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FileChange {
    pub path: String,
    pub added: u64,
    pub removed: u64,
    /// A binary change: no lines to count.
    pub binary: bool,
}

/// A merged task's diff left out of its step's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NotShown {
    pub task_id: String,
    pub bytes: u64,
    /// `too_large` (over what a gate's context reads), or `gone` (its row no longer holds
    /// it: the step was entered again since).
    #[schemars(extend("enum" = ["too_large", "gone"]))]
    pub reason: &'static str,
}

/// The context of the gate flow `id` waits at, read in one read transaction at `now_ms`;
/// `None` when the store has no such flow, or it is not waiting at a gate.
pub fn read(
    store: &dyn Store,
    id: &FlowId,
    now_ms: u64,
) -> Result<Option<GateContext>, StoreError> {
    let mut context = None;
    store.read(&mut |snapshot| {
        context = None;
        let Some(header) = snapshot.flow(id)? else {
            return Ok(());
        };
        // A flow pruned meanwhile takes its plan with it.
        let Some(plan) = snapshot.plan(&header.plan)? else {
            return Ok(());
        };
        context = of(snapshot, &header, &plan, now_ms)?;
        Ok(())
    })?;
    Ok(context)
}

/// The context of the gate the flow of `header` waits at, read from `snapshot` (the caller's
/// transaction); `None` when it is not waiting at a gate.
pub fn of(
    snapshot: &mut dyn Snapshot,
    header: &FlowHeader,
    plan: &Plan,
    now_ms: u64,
) -> Result<Option<GateContext>, StoreError> {
    if header.status.is_finished() {
        return Ok(None);
    }
    let Some(flow) = plan.flows.get(header.flow as usize) else {
        return Ok(None);
    };
    let Some(index) = crate::exec::current(header) else {
        return Ok(None);
    };
    let Some(step) = flow.steps.get(index as usize) else {
        return Ok(None);
    };
    let Action::Gate {
        function,
        on_approve,
        on_revise,
        on_kill,
        timeout,
        ..
    } = &step.action
    else {
        return Ok(None);
    };
    let name = |target: &Target| match target {
        Target::Step(index) => flow.steps.get(*index as usize).map(|step| step.id.clone()),
        Target::End | Target::Kill => None,
    };
    let states: HashMap<u32, StepState> = snapshot.steps_from(&header.id, 0)?.into_iter().collect();
    let (outputs, outputs_left_out) = outputs(flow, step, index, &states);
    let (decisions, decisions_left_out) = decisions(snapshot.events(&header.id)?);
    let diffs = diff::diffs(snapshot, &header.id, flow, index, &states)?;
    let remaining_s = timeout.map(|seconds| {
        let deadline = header
            .dispatched_ms
            .unwrap_or(now_ms)
            .saturating_add(seconds.saturating_mul(1000));
        deadline.saturating_sub(now_ms).div_ceil(1000)
    });
    Ok(Some(GateContext {
        flow_id: header.id.to_string(),
        flow_name: header.flow_name.clone(),
        input: Folded::of_value(&header.inputs, MAX_VALUE_CHARS),
        step_id: step.id.clone(),
        function: function.clone(),
        round: header.round,
        on_approve: name(on_approve),
        on_revise: name(on_revise),
        on_kill: name(on_kill),
        waiting_since_ms: header.dispatched_ms,
        timeout_s: *timeout,
        remaining_s,
        outputs,
        outputs_left_out,
        decisions,
        decisions_left_out,
        diffs,
    }))
}

/// The outputs the gate at `index` is about: of the steps it depends on when the plan names
/// any (a `depends_on`, or a `$` reference in its `skip_if`), else of every step before it;
/// the [`MAX_OUTPUTS`] nearest the gate, and how many were left out.
fn outputs(
    flow: &plan::Flow,
    gate: &plan::Step,
    index: u32,
    states: &HashMap<u32, StepState>,
) -> (Vec<StepOutput>, u32) {
    let before: Vec<u32> = if gate.depends_on.is_empty() {
        (0..index).collect()
    } else {
        gate.depends_on.clone()
    };
    let shown: Vec<(u32, &StepState)> = before
        .into_iter()
        .filter_map(|index| Some((index, states.get(&index)?)))
        .filter(|(_, state)| state.output.is_some() || state.skipped)
        .collect();
    let left_out = shown.len().saturating_sub(MAX_OUTPUTS);
    let outputs = shown
        .into_iter()
        .skip(left_out)
        .filter_map(|(index, state)| {
            let step = flow.steps.get(index as usize)?;
            Some(StepOutput {
                step_id: step.id.clone(),
                skipped: state.output.is_none(),
                output: state
                    .output
                    .as_ref()
                    .map(|output| Folded::of_value(output, MAX_VALUE_CHARS)),
            })
        })
        .collect();
    (outputs, count(left_out))
}

/// Every gate decision and gate policy in the flow's trace (reverted ones left out), the
/// newest [`MAX_DECISIONS`], and how many older ones were left out.
fn decisions(events: Vec<crate::state::Event>) -> (Vec<Decision>, u32) {
    let all: Vec<Decision> = events
        .into_iter()
        .filter(|event| !event.reverted)
        .filter_map(|event| match event.body {
            EventBody::Record(Record::Gate(gate)) => Some(Decision {
                step_id: gate.step_id,
                round: gate.round,
                outcome: gate.outcome,
                rationale: Folded::of_text(&gate.rationale, MAX_RATIONALE_CHARS),
                resolved_by: gate.resolved_by,
                actor: gate.actor,
                via: gate.via,
                client: gate.client,
                policy: None,
                at_ms: gate.at_ms,
            }),
            EventBody::Record(Record::Policy(policy)) => Some(Decision {
                step_id: policy.step_id,
                round: policy.round,
                outcome: policy.resolved_outcome,
                rationale: Folded::of_text(&policy.rationale, MAX_RATIONALE_CHARS),
                resolved_by: "policy".to_owned(),
                actor: None,
                via: None,
                client: None,
                policy: Some(policy.effective_policy),
                at_ms: policy.at_ms,
            }),
            _ => None,
        })
        .collect();
    let left_out = all.len().saturating_sub(MAX_DECISIONS);
    (all.into_iter().skip(left_out).collect(), count(left_out))
}

pub(super) fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing, clippy::unwrap_used)]

    use serde_json::json;
    use stratum_runtime::response::{GateRecord, PolicyRecord};

    use super::*;
    use crate::state::Event;

    const SPEC: &str = r#"version: "0.2"
functions:
  check: {mode: gate}
flows:
  before:
    input: {}
    steps:
      - {id: a, intent: "A"}
      - {id: b, intent: "B"}
      - {id: c, intent: "C"}
      - {id: review, function: check, on_approve: ~, on_revise: a, on_kill: ~}
  named:
    input: {}
    steps:
      - {id: a, intent: "A"}
      - {id: b, intent: "B"}
      - {id: review, function: check, on_approve: ~, on_revise: a, on_kill: ~, depends_on: [a]}
"#;

    fn done(output: serde_json::Value) -> StepState {
        StepState {
            output: Some(output),
            ..StepState::default()
        }
    }

    fn ids(outputs: &[StepOutput]) -> Vec<&str> {
        outputs
            .iter()
            .map(|output| output.step_id.as_str())
            .collect()
    }

    #[test]
    fn the_work_is_every_step_before_the_gate_or_the_ones_it_names() {
        let plan = stratum_test_support::plan(SPEC);
        let before = plan
            .flows
            .iter()
            .find(|flow| flow.name == "before")
            .unwrap();
        let states: HashMap<u32, StepState> = [
            (0, done(json!({"n": 1}))),
            (
                1,
                StepState {
                    skipped: true,
                    ..StepState::default()
                },
            ),
            (2, done(json!("c's text"))),
        ]
        .into_iter()
        .collect();
        let (outputs, left_out) = outputs(before, &before.steps[3], 3, &states);
        assert_eq!(ids(&outputs), ["a", "b", "c"]);
        assert_eq!(left_out, 0);
        assert!(outputs[1].skipped && outputs[1].output.is_none());
        assert_eq!(outputs[2].output.as_ref().unwrap().text, "c's text");

        // A gate that names what it depends on is shown that alone.
        let named = plan.flows.iter().find(|flow| flow.name == "named").unwrap();
        let (shown, _) = super::outputs(named, &named.steps[2], 2, &states);
        assert_eq!(ids(&shown), ["a"]);
    }

    #[test]
    fn the_outputs_nearest_the_gate_are_kept() {
        let spec = format!(
            "version: \"0.2\"\nfunctions:\n  check: {{mode: gate}}\nflows:\n  long:\n    input: {{}}\n    steps:\n{}      - {{id: review, function: check, on_approve: ~, on_revise: s0, on_kill: ~}}\n",
            (0..60)
                .map(|n| format!("      - {{id: s{n}, intent: \"S\"}}\n"))
                .collect::<String>()
        );
        let plan = stratum_test_support::plan(&spec);
        let flow = &plan.flows[0];
        let states: HashMap<u32, StepState> = (0..60).map(|n| (n, done(json!(n)))).collect();
        let (outputs, left_out) = outputs(flow, &flow.steps[60], 60, &states);
        assert_eq!(outputs.len(), MAX_OUTPUTS);
        assert_eq!(left_out, 10);
        assert_eq!(outputs[0].step_id, "s10");
        assert_eq!(outputs[MAX_OUTPUTS - 1].step_id, "s59");
    }

    fn gate_event(seq: u64, round: u32, reverted: bool) -> Event {
        Event {
            seq,
            round,
            reverted,
            body: EventBody::Record(Record::Gate(Box::new(GateRecord {
                step_id: "review".to_owned(),
                outcome: "revise".to_owned(),
                rationale: format!("reason {seq}"),
                resolved_by: "human".to_owned(),
                actor: Some("alice".to_owned()),
                via: None,
                client: None,
                approvers: Vec::new(),
                value: None,
                review_id: None,
                duration_ms: 0,
                round,
                round_start_step_id: None,
                at_ms: seq,
            }))),
        }
    }

    #[test]
    fn the_newest_decisions_are_kept_and_reverted_ones_left_out() {
        let mut events: Vec<Event> = (0..25).map(|n| gate_event(n, 0, false)).collect();
        events.push(gate_event(25, 1, true));
        events.push(Event {
            seq: 26,
            round: 1,
            reverted: false,
            body: EventBody::Record(Record::Policy(PolicyRecord {
                step_id: "auto".to_owned(),
                effective_policy: "skip".to_owned(),
                resolved_outcome: "approve".to_owned(),
                rationale: "policy: skip".to_owned(),
                round: 1,
                round_start_step_id: None,
                at_ms: 26,
            })),
        });
        let (decisions, left_out) = decisions(events);
        assert_eq!(decisions.len(), MAX_DECISIONS);
        assert_eq!(left_out, 6);
        assert_eq!(decisions[0].rationale.text, "reason 6");
        let policy = decisions.last().unwrap();
        assert_eq!(
            (
                policy.resolved_by.as_str(),
                policy.policy.as_deref(),
                policy.outcome.as_str()
            ),
            ("policy", Some("skip"), "approve")
        );
        assert!(
            decisions
                .iter()
                .all(|decision| decision.rationale.text != "reason 25"),
            "reverted"
        );
    }
}
