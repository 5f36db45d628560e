//! The interpreter: `(state, plan, command) -> (changes, response)`, with no IO, no clock and
//! no randomness of its own. State is read through [`Work`] (which the store backs with its
//! transaction) and every write stays in it until the store commits.
//!
//! One module per concern, in the order a flow meets them: `start`, `dispatch` moves the
//! cursor and says what to do next (with `inputs` resolving what a step reads and `cache`
//! serving `cache: true` steps), `results` takes `step_done` and `skip_step` (checked by
//! `validate`), `gates`, `iterations`, `checkpoints`, `budget`, and `finish` ends
//! flows and writes audits.

pub(crate) mod approvals;
pub(crate) mod budget;
pub(crate) mod cache;
pub(crate) mod certificate;
pub(crate) mod checkpoints;
pub(crate) mod dispatch;
pub(crate) mod fan_out;
pub(crate) mod finish;
pub(crate) mod gates;
pub(crate) mod inputs;
pub(crate) mod iterations;
pub(crate) mod judge;
pub(crate) mod results;
pub(crate) mod start;
pub(crate) mod validate;
pub mod work;

use std::sync::Arc;

use stratum_compiler::plan::{self, Plan};

use crate::command::{Command, Context};
use crate::ids::FlowId;
use crate::response::{ErrorResponse, Response};
use crate::state::{Cursor, FlowHeader};
use crate::store::StoreError;
pub use work::Work;

/// Runs one command.
pub fn run(work: &mut Work<'_>, command: &Command, ctx: &Context) -> Result<Response, StoreError> {
    if let Command::Start {
        plan,
        flow,
        inputs,
        started_by,
    } = command
    {
        return start::start(
            work,
            plan.clone(),
            flow.as_deref(),
            inputs,
            started_by.as_deref(),
            ctx,
        );
    }
    if let Some(too_deep) = too_deep(command) {
        return Ok(too_deep);
    }
    let Some(sent) = command.flow_id() else {
        return Ok(
            ErrorResponse::new("execution_error", "the command names no flow").into_response(),
        );
    };
    let Some(id) = FlowId::parse(sent) else {
        return Ok(not_found(sent));
    };
    let Some(header) = work.header(&id)? else {
        return Ok(not_found(sent));
    };
    if command.is_fenced() {
        let root = root_of(work, &header)?;
        work.fence(crate::store::Fence {
            root,
            driver: ctx.driver.clone(),
            now_ms: ctx.now_ms,
        });
    }
    let plan = work.plan(&header.plan)?;
    let run = Run {
        plan,
        flow: header.flow,
        id,
        ctx,
    };
    if run.flow().is_none() {
        return Err(StoreError::Corrupt(format!(
            "flow {} names flow {} of a plan that has {}",
            run.id,
            header.flow,
            run.plan.flows.len()
        )));
    }
    // A gate whose time ran out is killed before anything else looks at the flow, so that a
    // timeout fires on the first call after it, whichever call that is.
    if !command.is_read_only()
        && !matches!(command, Command::CheckTimeouts { .. })
        && let Some(killed) = gates::expire(work, &run)?
    {
        return Ok(killed);
    }
    match command {
        Command::Start { .. } => {
            Ok(ErrorResponse::new("execution_error", "unreachable").into_response())
        }
        Command::StepDone {
            step_id,
            result,
            usage,
            ..
        } => results::step_done(work, &run, step_id, result, usage.as_ref()),
        Command::StepFailed {
            step_id,
            violations,
            usage,
            ..
        } => results::step_failed(work, &run, step_id, violations, usage.as_ref()),
        Command::SkipStep {
            step_id, reason, ..
        } => results::skip_step(work, &run, step_id, reason),
        Command::GateResolve {
            step_id,
            outcome,
            rationale,
            resolved_by,
            actor,
            via,
            round,
            value,
            ..
        } => gates::resolve(
            work,
            &run,
            step_id,
            gates::Decision {
                outcome,
                rationale,
                resolved_by,
                actor: actor.as_deref(),
                via: via.as_ref(),
                round: *round,
                value: value.as_ref(),
            },
        ),
        Command::CheckTimeouts { .. } => gates::check_timeouts(work, &run),
        Command::Commit { label, .. } => checkpoints::commit(work, &run, label),
        Command::Revert { label, .. } => checkpoints::revert(work, &run, label),
        Command::IterationStart { step_id, .. } => iterations::start(work, &run, step_id),
        Command::IterationReport {
            step_id, result, ..
        } => iterations::report(work, &run, step_id, result),
        Command::IterationAbort {
            step_id, reason, ..
        } => iterations::abort(work, &run, step_id, reason),
        Command::Resume { .. } => dispatch::resume(work, &run),
        Command::Audit { .. } => finish::audit(work, &run),
        Command::ParallelDone {
            step_id,
            task_results,
            merge_status,
            ..
        } => fan_out::parallel_done(work, &run, step_id, task_results, merge_status),
        Command::ParallelStart { step_id, base, .. } => {
            fan_out::parallel_start(work, &run, step_id, base.as_deref())
        }
        Command::TaskUpdate {
            step_id,
            attempt,
            task_id,
            report,
            ..
        } => fan_out::task_update(work, &run, step_id, *attempt, task_id, report),
        Command::ParallelAdvance {
            step_id,
            merge_status,
            ..
        } => fan_out::parallel_advance(work, &run, step_id, merge_status.as_ref()),
        Command::ParallelPoll { step_id, .. } => fan_out::poll(work, &run, step_id),
        Command::JudgeVerdict {
            step_id, verdict, ..
        } => judge::verdict(work, &run, step_id, verdict),
    }
}

/// The top-level flow of `header`'s tree: whose drive's lease fences the command.
fn root_of(work: &mut Work<'_>, header: &FlowHeader) -> Result<FlowId, StoreError> {
    let mut at = header.id.clone();
    let mut parent = header.parent.as_ref().map(|link| link.flow.clone());
    // Bounded: sub-flow depth is bounded by the plan, a damaged chain by this count.
    for _ in 0..1_000 {
        let Some(next) = parent else { break };
        let Some(up) = work.header(&next)? else { break };
        parent = up.parent.as_ref().map(|link| link.flow.clone());
        at = next;
    }
    Ok(at)
}

/// How deep a result or inputs may nest: far beyond any real result, and low enough that the
/// stored state around it (a few levels more) stays readable.
pub const MAX_VALUE_DEPTH: usize = 256;

/// Refuses a command whose values nest deeper than [`MAX_VALUE_DEPTH`], before anything
/// reads them.
fn too_deep(command: &Command) -> Option<Response> {
    let (what, value) = match command {
        Command::Start { inputs, .. } => ("inputs nest", inputs),
        Command::StepDone { result, .. } | Command::IterationReport { result, .. } => {
            ("result nests", result)
        }
        Command::ParallelDone { task_results, .. } => ("task results nest", task_results),
        Command::JudgeVerdict { verdict, .. } => ("verdict nests", verdict),
        Command::TaskUpdate {
            report: crate::command::TaskReport::Finished { result, .. },
            ..
        } => ("result nests", result),
        _ => return None,
    };
    let mut pending = vec![(value, 1usize)];
    while let Some((value, depth)) = pending.pop() {
        if depth > MAX_VALUE_DEPTH {
            let mut error = ErrorResponse::new(
                "invalid_result",
                format!("the {what} deeper than {MAX_VALUE_DEPTH} levels; send a flatter value"),
            );
            error.flow_id = command.flow_id().map(str::to_owned);
            return Some(error.into_response());
        }
        match value {
            serde_json::Value::Array(items) => {
                pending.extend(items.iter().map(|item| (item, depth + 1)))
            }
            serde_json::Value::Object(map) => {
                pending.extend(map.values().map(|item| (item, depth + 1)))
            }
            _ => {}
        }
    }
    None
}

/// `flow_not_found`, in the reference's words.
pub(crate) fn not_found(sent: &str) -> Response {
    ErrorResponse::new("flow_not_found", format!("No active flow with id '{sent}'")).into_response()
}

/// One flow execution and the plan it runs on, for the length of a command.
pub(crate) struct Run<'c> {
    pub(crate) plan: Arc<Plan>,
    /// Its flow's index in the plan.
    pub(crate) flow: u32,
    pub(crate) id: FlowId,
    pub(crate) ctx: &'c Context,
}

impl Run<'_> {
    pub(crate) fn flow(&self) -> Option<&plan::Flow> {
        self.plan.flows.get(self.flow as usize)
    }

    pub(crate) fn steps(&self) -> &[plan::Step] {
        self.flow()
            .map(|flow| flow.steps.as_slice())
            .unwrap_or_default()
    }

    pub(crate) fn step(&self, index: u32) -> Result<&plan::Step, StoreError> {
        self.steps().get(index as usize).ok_or_else(|| {
            StoreError::Corrupt(format!(
                "flow {} points at step {index}, which its plan lacks",
                self.id
            ))
        })
    }

    pub(crate) fn step_id(&self, index: Option<u32>) -> Option<String> {
        index.and_then(|index| self.steps().get(index as usize).map(|step| step.id.clone()))
    }

    /// Where a step goes when it is skipped: the next step in order, or the end. A skip is not
    /// success, so a step's `next` (its success route) does not apply, as in the reference.
    pub(crate) fn after_skip(&self, index: u32) -> plan::Target {
        match index.checked_add(1) {
            Some(following) if following < self.total_steps() => plan::Target::Step(following),
            _ => plan::Target::End,
        }
    }

    pub(crate) fn total_steps(&self) -> u32 {
        u32::try_from(self.steps().len()).unwrap_or(u32::MAX)
    }

    /// The same plan, another execution (a child or parent flow).
    pub(crate) fn other<'c>(&self, id: FlowId, flow: u32, ctx: &'c Context) -> Run<'c> {
        Run {
            plan: self.plan.clone(),
            flow,
            id,
            ctx,
        }
    }

    /// How often routing may enter one step again in a round.
    pub(crate) fn max_reentries(&self) -> u32 {
        self.flow()
            .and_then(|flow| flow.max_rounds)
            .unwrap_or(self.ctx.config.max_reentries)
    }
}

/// The current step's index, when the cursor is on one.
pub fn current(header: &FlowHeader) -> Option<u32> {
    match header.cursor {
        Cursor::Step(index) => Some(index),
        Cursor::End => None,
    }
}

/// The error for a command on a flow that has ended.
pub(crate) fn already_finished(header: &FlowHeader) -> Response {
    let status = header.status.as_str();
    // A sub-flow's end is reported to its parent step, not followed by a new flow.
    let next = match &header.parent {
        Some(parent) if header.status == crate::state::FlowStatus::Cancelled => format!(
            "it was cancelled when its parent flow '{}' moved on without it, so nothing more is \
             expected of it; stratum_audit tells what happened",
            parent.flow
        ),
        Some(parent) => format!(
            "it is a sub-flow of flow '{}': report its end with stratum_step_done on '{}', or \
             read what happened with stratum_audit",
            parent.flow, parent.flow
        ),
        None => "start a new flow with stratum_plan, or read what happened with stratum_audit"
            .to_owned(),
    };
    let mut error = ErrorResponse::new(
        "flow_already_complete",
        format!(
            "Flow '{}' has already finished ({status}); {next}",
            header.id
        ),
    )
    .flow(header.id.as_str());
    error.flow_status = Some(status.to_owned());
    error.into_response()
}

/// The header and current step of a running flow, or the answer for a finished one.
pub(crate) fn running_step<'r>(
    work: &mut Work<'_>,
    run: &'r Run<'_>,
) -> Result<Result<(FlowHeader, u32, &'r plan::Step), Response>, StoreError> {
    let header = work.get(&run.id)?;
    let index = match (header.status.is_finished(), current(&header)) {
        (false, Some(index)) => index,
        _ => return Ok(Err(already_finished(&header))),
    };
    let step = run.step(index)?;
    Ok(Ok((header, index, step)))
}

/// `gate_step_requires_gate_resolve`, with the reference's message for the tool refused.
pub(crate) fn gate_needs_resolve(run: &Run<'_>, step: &plan::Step, message: String) -> Response {
    let mut error =
        ErrorResponse::new("gate_step_requires_gate_resolve", message).flow(run.id.as_str());
    error.step_id = Some(step.id.clone());
    error.into_response()
}

/// The error for a command naming a step other than the current one.
pub(crate) fn wrong_step(run: &Run<'_>, expected: &str, got: &str) -> Response {
    let mut error = ErrorResponse::new(
        "wrong_step",
        format!("Expected step '{expected}', got '{got}'"),
    )
    .flow(run.id.as_str());
    error.step_id = Some(expected.to_owned());
    error.into_response()
}
