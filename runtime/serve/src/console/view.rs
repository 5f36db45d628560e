//! One flow as the console shows it: everything its page needs, read in one read transaction
//! of the store (so the page never mixes two states), and how each step stands.
//!
//! The current dispatch is what `stratum_resume` would answer now: the runtime's own command,
//! run on the read snapshot, its changes thrown away. The page therefore shows exactly what
//! an agent picking the flow up would be told, and looking at a flow changes nothing.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;
use stratum_compiler::plan::{self, Action, Plan};

use crate::cli::query::{self, FlowSummary, SummaryStatus};
use crate::command::{Command, Config, Context};
use crate::exec::{self, Work};
use crate::ids::FlowId;
use crate::response::Record;
use crate::state::{Checkpoint, Cursor, Event, EventBody, FlowHeader, FlowStatus, StepState};
use crate::store::{Store, StoreError};

/// How a step stands, as its box in the graph is coloured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepLook {
    Done,
    /// The step the flow waits on (not a gate).
    Current,
    Failed,
    Skipped,
    /// A gate waiting for a decision.
    Gate,
    /// A gate approved in this round (by a person, an agent, a timeout or a policy).
    Approved,
    /// A gate killed in this round: the flow ended there, or went on to its `on_kill` step.
    Killed,
    Pending,
}

impl StepLook {
    pub fn as_str(self) -> &'static str {
        match self {
            StepLook::Done => "done",
            StepLook::Current => "current",
            StepLook::Failed => "failed",
            StepLook::Skipped => "skipped",
            StepLook::Gate => "gate",
            StepLook::Approved => "approved",
            StepLook::Killed => "killed",
            StepLook::Pending => "pending",
        }
    }

    /// Whether the step is behind the flow, as "Steps done" counts it: done, or a gate
    /// approved.
    pub fn is_done(self) -> bool {
        matches!(self, StepLook::Done | StepLook::Approved)
    }
}

/// A flow started by one of this flow's steps.
#[derive(Clone, Debug)]
pub struct Child {
    pub id: FlowId,
    pub name: String,
    pub status: FlowStatus,
    /// The step of this flow that runs it (the current one), if any still does.
    pub step_id: Option<String>,
}

/// Everything one flow's page shows.
pub struct FlowView {
    pub header: FlowHeader,
    pub summary: FlowSummary,
    pub plan: Arc<Plan>,
    /// Every step with state, by index.
    pub steps: BTreeMap<u32, StepState>,
    /// The trace, reverted events left out.
    pub events: Vec<Event>,
    /// What an agent resuming the flow now would be told; `None` once it has finished.
    pub dispatch: Option<Value>,
    pub children: Vec<Child>,
    pub checkpoints: Vec<Checkpoint>,
    /// The agent processes the runtime launched for the flow's steps, newest first.
    pub runs: Vec<crate::store::AgentRun>,
    /// Its unattended drive, when it was ever enrolled.
    pub drive: Option<crate::store::Drive>,
    /// What the person deciding the gate it waits at is shown; `None` unless it waits at one.
    pub gate: Option<stratum_mcp::gate_context::GateContext>,
    /// How each step stands, by index: worked out once, in one pass over the trace.
    looks: Vec<StepLook>,
}

/// The most agent runs a flow page lists.
const MAX_RUNS_SHOWN: usize = 20;

impl FlowView {
    /// The flow of that id (`None`: the store has none), read at `now_ms`.
    pub fn read(
        store: &dyn Store,
        id: &FlowId,
        config: &Arc<Config>,
        now_ms: u64,
    ) -> Result<Option<FlowView>, StoreError> {
        let mut view = None;
        store.read(&mut |snapshot| {
            let Some(header) = snapshot.flow(id)? else {
                return Ok(());
            };
            let plan = snapshot
                .plan(&header.plan)?
                .ok_or_else(|| StoreError::MissingPlan(header.plan.clone()))?;
            let summary = query::summary(&header, &plan)?;
            let flow = query::flow_of(&plan, &header)?;
            let steps: BTreeMap<u32, StepState> = snapshot.steps_from(id, 0)?.into_iter().collect();
            let events: Vec<Event> = snapshot
                .events(id)?
                .into_iter()
                .filter(|event| !event.reverted)
                .collect();
            let mut children = Vec::new();
            for child in snapshot.children(id)? {
                let Some(child_header) = snapshot.flow(&child)? else {
                    continue;
                };
                let step_id = steps
                    .iter()
                    .find(|(_, state)| state.child.as_ref() == Some(&child))
                    .and_then(|(index, _)| flow.steps.get(*index as usize))
                    .map(|step| step.id.clone());
                children.push(Child {
                    id: child,
                    name: child_header.flow_name,
                    status: child_header.status,
                    step_id,
                });
            }
            let mut checkpoints = Vec::new();
            for label in snapshot.checkpoint_labels(id)? {
                if let Some(checkpoint) = snapshot.checkpoint(id, &label)? {
                    checkpoints.push(checkpoint);
                }
            }
            let dispatch = if header.status.is_finished() {
                None
            } else {
                let ctx = Context::new(now_ms, 0, config.clone());
                let command = Command::Resume {
                    flow_id: id.to_string(),
                };
                Some(exec::run(&mut Work::new(snapshot), &command, &ctx)?.to_json())
            };
            let gate = stratum_mcp::gate_context::of(snapshot, &header, &plan, now_ms)?;
            let looks = looks(&header, flow, &steps, &events);
            view = Some(FlowView {
                header,
                summary,
                plan: plan.clone(),
                steps,
                events,
                dispatch,
                children,
                checkpoints,
                runs: Vec::new(),
                drive: None,
                gate,
                looks,
            });
            Ok(())
        })?;
        // Outside the flow's transaction: a run's row changes without its flow (its tail).
        if let Some(view) = &mut view {
            view.runs = store.agent_runs(Some(id), MAX_RUNS_SHOWN)?;
            view.drive = store.drive(id)?;
        }
        Ok(view)
    }

    /// The flow of the plan this execution runs.
    pub fn flow(&self) -> Result<&plan::Flow, StoreError> {
        query::flow_of(&self.plan, &self.header)
    }

    /// How step `index` stands in the current round.
    pub fn look(&self, index: u32) -> StepLook {
        self.looks
            .get(index as usize)
            .copied()
            .unwrap_or(StepLook::Pending)
    }

    /// Attempts still allowed at step `index` (its retries less the attempts made).
    pub fn retries_left(&self, index: u32) -> Option<u32> {
        let step = self.flow().ok()?.steps.get(index as usize)?;
        let attempts = self.steps.get(&index).map_or(0, |state| state.attempts);
        Some(step.retries.saturating_sub(attempts))
    }

    /// The flow's status as the console's filters and badges name it.
    pub fn status(&self) -> SummaryStatus {
        self.summary.status
    }
}

/// A step's last record in the current round, as far as its look goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    Accepted,
    Failed,
    Approved,
    Killed,
    /// Anything else: a skip (the step's state says so), or a revise (which ends its round,
    /// so the current round never has one last).
    Other,
}

/// How every step of `flow` stands in the current round: the cursor's step is current (a
/// gate: waiting); a step whose last record of the round is a failure, or where a failed flow
/// stopped, failed; then skipped, done (it has a result), a gate approved or killed in this
/// round (a gate has no result: its record says what was decided), or not yet. A gate revised
/// is not yet: the revise began a new round, in which the gate is asked again.
fn looks(
    header: &FlowHeader,
    flow: &plan::Flow,
    steps: &BTreeMap<u32, StepState>,
    events: &[Event],
) -> Vec<StepLook> {
    // Each step's last record of the current round, in one pass.
    let mut last: HashMap<&str, Last> = HashMap::new();
    for event in events.iter().filter(|event| event.round == header.round) {
        if let EventBody::Record(record) = &event.body {
            let kind = match record {
                Record::Step(done) if done.violations.is_empty() => Last::Accepted,
                Record::Step(_) => Last::Failed,
                Record::Gate(gate) => match gate.outcome.as_str() {
                    "approve" => Last::Approved,
                    "kill" => Last::Killed,
                    _ => Last::Other,
                },
                Record::Policy(policy) if policy.resolved_outcome == "approve" => Last::Approved,
                Record::Skip(_) | Record::Policy(_) | Record::Approval(_) => Last::Other,
            };
            last.insert(record.step_id(), kind);
        }
    }
    let running = header.status == FlowStatus::Running;
    (0u32..)
        .zip(&flow.steps)
        .map(|(index, step)| {
            let at_cursor = header.cursor == Cursor::Step(index);
            let state = steps.get(&index);
            let last = last.get(step.id.as_str()).copied();
            if running && at_cursor {
                match step.action {
                    Action::Gate { .. } => StepLook::Gate,
                    _ => StepLook::Current,
                }
            } else if (header.status == FlowStatus::Failed && at_cursor)
                || last == Some(Last::Failed)
            {
                StepLook::Failed
            } else if state.is_some_and(|state| state.skipped) {
                StepLook::Skipped
            } else if state.is_some_and(|state| state.output.is_some()) {
                StepLook::Done
            } else if matches!(step.action, Action::Gate { .. }) && last == Some(Last::Approved) {
                StepLook::Approved
            } else if matches!(step.action, Action::Gate { .. }) && last == Some(Last::Killed) {
                StepLook::Killed
            } else {
                StepLook::Pending
            }
        })
        .collect()
}
