//! `stratum-mcp query`: what operators read about flows, in the reference's version-1 JSON
//! contracts (`FlowSummary`, `FlowState`, `PendingGate`), read from any [`Store`] in one read
//! transaction each, so a query never sees half of a command.
//!
//! The contracts' objects are closed: every field below is one the reference's contract
//! lists, but for `FlowState::started_by`, optional, which the reference does not know. Where
//! our runtime knows more (the `failed` and `cancelled` statuses), the values are wider; the
//! published schemas (`runtime/cli/schemas/`) say so.

use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use stratum_compiler::plan::{self, Action, Plan};

use super::{Plans, SchemaVersion};
use crate::command::{Command, Config, Context};
use crate::exec::{self, Work};
use crate::gate_context::{self, GateContext};
use crate::ids::FlowId;
use crate::response::{Audit, Record, Response, RoundRecords};
use crate::state::{Cursor, FlowHeader, FlowStatus};
use crate::store::{Store, StoreError};

/// One line of `query flows`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FlowSummary {
    #[serde(rename = "_schema_version")]
    pub schema_version: SchemaVersion,
    pub flow_id: String,
    pub flow_name: String,
    pub status: SummaryStatus,
    /// The step the flow waits on, `null` once it has finished.
    pub current_step_id: Option<String>,
    pub round: u32,
    pub step_count: u32,
    /// Steps before the cursor (all of them once finished).
    pub completed_steps: u32,
    /// How the flow ended, `null` while it runs.
    pub terminal_status: Option<String>,
    /// Always false: this runtime starts no synthetic flows.
    pub synthetic: bool,
}

/// Where a flow stands, as `query flows` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SummaryStatus {
    Running,
    /// Running, and its current step is a gate waiting for a decision.
    AwaitingGate,
    Complete,
    Killed,
    BudgetExhausted,
    /// A step failed for good (not in the reference, which leaves such flows running).
    Failed,
    /// A sub-flow whose parent moved on without it (not in the reference).
    Cancelled,
}

/// `query flow ID`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FlowState {
    #[serde(rename = "_schema_version")]
    pub schema_version: SchemaVersion,
    pub flow_id: String,
    pub flow_name: String,
    pub status: SummaryStatus,
    pub current_step_id: Option<String>,
    /// The cursor: the index of the current step, or `step_count` once finished.
    pub current_idx: u32,
    pub round: u32,
    /// Rounds before the current one (one per `revise`).
    pub rounds_count: u32,
    pub step_count: u32,
    pub ordered_steps: Vec<OrderedStep>,
    /// The current round's trace.
    pub records: Vec<Record>,
    pub terminal_status: Option<String>,
    /// Each step's accepted result (`null` for a skipped step), by step id.
    pub step_outputs: BTreeMap<String, Value>,
    /// The earlier rounds' traces.
    pub rounds: Vec<RoundRecords>,
    pub synthetic: bool,
    /// The identity that started the flow, when the server knew it: an access token's name,
    /// or `os:<user>` (a stdio server, `stratum-mcp run`). Gates whose function forbids
    /// self-approval refuse its approval. Not in the reference's contract.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_by: Option<String>,
}

/// A step of a flow, in execution order.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct OrderedStep {
    pub id: String,
    /// The function a function or gate step calls; `null` for the other kinds.
    pub function: Option<String>,
    pub mode: StepMode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepMode {
    Step,
    Gate,
}

/// One line of `query gates`: a gate some flow waits at.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PendingGate {
    #[serde(rename = "_schema_version")]
    pub schema_version: SchemaVersion,
    pub flow_id: String,
    pub flow_name: String,
    pub step_id: String,
    pub function: String,
    pub on_approve: Option<String>,
    pub on_revise: Option<String>,
    pub on_kill: Option<String>,
    /// Seconds from the gate's dispatch until it is killed, if it has a timeout.
    pub timeout: Option<u64>,
    /// What the person deciding it is shown: the flow's input, the work before the gate,
    /// earlier decisions with their rationales, merged diffs (beyond the reference's
    /// contract, which has no such field).
    pub context: GateContext,
}

impl From<GateContext> for PendingGate {
    fn from(context: GateContext) -> PendingGate {
        PendingGate {
            schema_version: SchemaVersion,
            flow_id: context.flow_id.clone(),
            flow_name: context.flow_name.clone(),
            step_id: context.step_id.clone(),
            function: context.function.clone(),
            on_approve: context.on_approve.clone(),
            on_revise: context.on_revise.clone(),
            on_kill: context.on_kill.clone(),
            timeout: context.timeout_s,
            context,
        }
    }
}

/// Every flow in the store, newest first.
pub fn flows(store: &dyn Store) -> Result<Vec<FlowSummary>, StoreError> {
    let headers = store.list_flows()?;
    let mut summaries = Vec::with_capacity(headers.len());
    let mut plans = Plans::default();
    for header in &headers {
        // A flow pruned since the list was read takes its plan with it: it is gone.
        let Some(plan) = plans.get(store, &header.plan)? else {
            continue;
        };
        summaries.push(summary(header, &plan)?);
    }
    Ok(summaries)
}

/// Every gate a running flow waits at, newest flow first.
pub fn gates(store: &dyn Store) -> Result<Vec<PendingGate>, StoreError> {
    gates_of(store, &store.list_flows()?)
}

/// The gates the flows of `headers` wait at, in their order, each with its context (read in
/// a transaction of its own; a gate decided since `headers` were read is left out).
pub fn gates_of(store: &dyn Store, headers: &[FlowHeader]) -> Result<Vec<PendingGate>, StoreError> {
    let mut gates = Vec::new();
    let mut plans = Plans::default();
    let now_ms = crate::now_ms();
    for header in headers.iter().filter(|header| !header.status.is_finished()) {
        let Some(plan) = plans.get(store, &header.plan)? else {
            continue;
        };
        // Only the flows the list shows at a gate are read again, whole.
        let at_gate = current_step(header, &plan)?
            .is_some_and(|step| matches!(step.action, Action::Gate { .. }));
        if !at_gate {
            continue;
        }
        if let Some(context) = gate_context::read(store, &header.id, now_ms)? {
            gates.push(PendingGate::from(context));
        }
    }
    Ok(gates)
}

/// Where one flow stands, as `query gates FLOW` asks.
#[derive(Clone, Debug, PartialEq)]
pub enum FlowGate {
    /// The store has no such flow.
    Unknown,
    /// It waits at no gate (it runs another step, or has finished).
    NotAtGate,
    /// The gate it waits at, with its context.
    At(Box<PendingGate>),
}

/// The gate flow `id` waits at, read in one read transaction.
pub fn gate(store: &dyn Store, id: &FlowId) -> Result<FlowGate, StoreError> {
    let now_ms = crate::now_ms();
    let mut found = FlowGate::Unknown;
    store.read(&mut |snapshot| {
        found = FlowGate::Unknown;
        let Some(header) = snapshot.flow(id)? else {
            return Ok(());
        };
        // A flow pruned meanwhile takes its plan with it.
        let Some(plan) = snapshot.plan(&header.plan)? else {
            return Ok(());
        };
        found = match gate_context::of(snapshot, &header, &plan, now_ms)? {
            Some(context) => FlowGate::At(Box::new(PendingGate::from(context))),
            None => FlowGate::NotAtGate,
        };
        Ok(())
    })?;
    Ok(found)
}

/// One flow's whole state, or `None` when the store has no flow of that id.
pub fn flow(store: &dyn Store, id: &str) -> Result<Option<FlowState>, StoreError> {
    let Some(id) = FlowId::parse(id) else {
        return Ok(None);
    };
    let mut state = None;
    store.read(&mut |snapshot| {
        let Some(header) = snapshot.flow(&id)? else {
            return Ok(());
        };
        let plan = snapshot
            .plan(&header.plan)?
            .ok_or_else(|| StoreError::MissingPlan(header.plan.clone()))?;
        let steps = snapshot.steps_from(&id, 0)?;
        let ctx = Context::new(crate::now_ms(), 0, Arc::new(Config::default()));
        let audit = match exec::run(
            &mut Work::new(snapshot),
            &Command::Audit {
                flow_id: id.to_string(),
            },
            &ctx,
        )? {
            Response::Audit(audit) => *audit,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "flow {id}'s audit answered {}",
                    other.to_json()
                )));
            }
        };
        state = Some(flow_state(&header, &plan, &steps, audit)?);
        Ok(())
    })?;
    Ok(state)
}

fn flow_state(
    header: &FlowHeader,
    plan: &Plan,
    steps: &[(u32, crate::state::StepState)],
    audit: Audit,
) -> Result<FlowState, StoreError> {
    let summary = summary(header, plan)?;
    let flow_steps = flow_of(plan, header)?.steps.as_slice();
    let ordered_steps = flow_steps
        .iter()
        .map(|step| match &step.action {
            Action::Gate { function, .. } => OrderedStep {
                id: step.id.clone(),
                function: Some(function.clone()),
                mode: StepMode::Gate,
            },
            Action::Function { function, .. } => OrderedStep {
                id: step.id.clone(),
                function: Some(function.clone()),
                mode: StepMode::Step,
            },
            _ => OrderedStep {
                id: step.id.clone(),
                function: None,
                mode: StepMode::Step,
            },
        })
        .collect();
    let step_outputs = steps
        .iter()
        .filter_map(|(index, state)| {
            let step = flow_steps.get(*index as usize)?;
            let output = match (&state.output, state.skipped) {
                (Some(output), _) => output.clone(),
                (None, true) => Value::Null,
                (None, false) => return None,
            };
            Some((step.id.clone(), output))
        })
        .collect();
    Ok(FlowState {
        schema_version: SchemaVersion,
        flow_id: summary.flow_id,
        flow_name: summary.flow_name,
        status: summary.status,
        current_step_id: summary.current_step_id,
        current_idx: summary.completed_steps,
        round: summary.round,
        rounds_count: u32::try_from(audit.rounds.len()).unwrap_or(u32::MAX),
        step_count: summary.step_count,
        ordered_steps,
        records: audit.trace,
        terminal_status: summary.terminal_status,
        step_outputs,
        rounds: audit.rounds,
        synthetic: false,
        started_by: audit.started_by,
    })
}

pub fn summary(header: &FlowHeader, plan: &Plan) -> Result<FlowSummary, StoreError> {
    let step_count = u32::try_from(flow_of(plan, header)?.steps.len()).unwrap_or(u32::MAX);
    let current = current_step(header, plan)?;
    let status = match header.status {
        FlowStatus::Running => match current.map(|step| &step.action) {
            Some(Action::Gate { .. }) => SummaryStatus::AwaitingGate,
            _ => SummaryStatus::Running,
        },
        FlowStatus::Complete => SummaryStatus::Complete,
        FlowStatus::Killed => SummaryStatus::Killed,
        FlowStatus::BudgetExhausted => SummaryStatus::BudgetExhausted,
        FlowStatus::Failed => SummaryStatus::Failed,
        FlowStatus::Cancelled => SummaryStatus::Cancelled,
    };
    let completed_steps = match header.cursor {
        _ if header.status.is_finished() => step_count,
        Cursor::Step(index) => index,
        Cursor::End => step_count,
    };
    Ok(FlowSummary {
        schema_version: SchemaVersion,
        flow_id: header.id.to_string(),
        flow_name: header.flow_name.clone(),
        status,
        current_step_id: current.map(|step| step.id.clone()),
        round: header.round,
        step_count,
        completed_steps,
        terminal_status: header
            .status
            .is_finished()
            .then(|| header.status.as_str().to_owned()),
        synthetic: false,
    })
}

/// The step a running flow's cursor is on.
pub(crate) fn current_step<'p>(
    header: &FlowHeader,
    plan: &'p Plan,
) -> Result<Option<&'p plan::Step>, StoreError> {
    if header.status.is_finished() {
        return Ok(None);
    }
    match exec::current(header) {
        Some(index) => step_of(plan, header, index)
            .map(Some)
            .ok_or_else(|| corrupt_cursor(header, index)),
        None => Ok(None),
    }
}

pub(crate) fn step_of<'p>(
    plan: &'p Plan,
    header: &FlowHeader,
    index: u32,
) -> Option<&'p plan::Step> {
    plan.flows
        .get(header.flow as usize)
        .and_then(|flow| flow.steps.get(index as usize))
}

pub fn flow_of<'p>(plan: &'p Plan, header: &FlowHeader) -> Result<&'p plan::Flow, StoreError> {
    plan.flows.get(header.flow as usize).ok_or_else(|| {
        StoreError::Corrupt(format!(
            "flow {} runs flow {} of its plan, which has {}",
            header.id,
            header.flow,
            plan.flows.len()
        ))
    })
}

fn corrupt_cursor(header: &FlowHeader, index: u32) -> StoreError {
    StoreError::Corrupt(format!(
        "flow {} points at step {index}, which its plan lacks",
        header.id
    ))
}
