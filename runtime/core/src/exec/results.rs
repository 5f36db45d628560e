//! `stratum_step_done` and `stratum_skip_step`: taking a result (or a skip) for the current
//! step, checking it, and routing on.
//!
//! The order of a result's life: the flow and step are checked (the current step, not a
//! gate, a flow step's child finished), an iteration loop still open on the step is closed
//! and its best result substituted, the attempt is counted, the result is checked
//! ([`validate`]), usage is debited, and then the step succeeds (its `next`), retries (same
//! step, with the violations), recovers (`on_fail`, fresh attempts for the target) or ends
//! the flow (`retries_exhausted`).

use serde_json::Value;
use stratum_compiler::plan::{Action, Step};

use super::dispatch::{self, Move, Note};
use super::{
    Run, budget, cache, gate_needs_resolve, iterations, running_step, validate, wrong_step,
};
use crate::response::{ErrorResponse, Record, Response, StepRecord};
use crate::state::{EventBody, FailedAttempt};
use crate::store::StoreError;

use super::work::Work;

/// The step a report (`step_done`, `StepFailed`) is for: the flow's current step, when it is
/// running, is not a gate, and is the step named; else the answer that refuses the report.
fn reported_step<'r>(
    work: &mut Work<'_>,
    run: &'r Run<'_>,
    step_id: &str,
) -> Result<Result<(crate::state::FlowHeader, u32, &'r Step), Response>, StoreError> {
    let (header, index, step) = match running_step(work, run)? {
        Ok(current) => current,
        Err(finished) => return Ok(Err(finished)),
    };
    if let Action::Gate { .. } = step.action {
        return Ok(Err(gate_needs_resolve(
            run,
            step,
            format!(
                "Step '{}' is a gate step. Use stratum_gate_resolve to resolve it.",
                step.id
            ),
        )));
    }
    if step.id != step_id {
        return Ok(Err(wrong_step(run, &step.id, step_id)));
    }
    // A judge step's result is the server's verdict (`stratum_judge`): a client's `met`
    // would complete it over a verdict that said otherwise (the reference's bug).
    if let Action::Judge { .. } = step.action {
        let mut error = ErrorResponse::new(
            "judge_required",
            format!(
                "Step '{}' is a judge step: its verdict is the server's; call stratum_judge with the artifacts (and the modified files) for the server to decide its predicates",
                step.id
            ),
        )
        .flow(run.id.as_str());
        error.step_id = Some(step.id.clone());
        return Ok(Err(error.into_response()));
    }
    // A fan-out step's output is built by the runtime from its tasks: a result sent whole
    // would complete it with anything (the reference's bug).
    if let Action::Parallel { .. } | Action::Pipeline { .. } = step.action {
        let mut error = ErrorResponse::new(
            "wrong_step_type",
            format!(
                "Step '{}' is a {} step: report its tasks with stratum_parallel_done (or let the server run them with stratum_parallel_start)",
                step.id,
                dispatch::record_identity(step).2
            ),
        )
        .flow(run.id.as_str());
        error.step_id = Some(step.id.clone());
        return Ok(Err(error.into_response()));
    }
    Ok(Ok((header, index, step)))
}

pub(crate) fn step_done(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
    result: &Value,
    usage: Option<&Value>,
) -> Result<Response, StoreError> {
    let (header, index, step) = match reported_step(work, run, step_id)? {
        Ok(current) => current,
        Err(refused) => return Ok(refused),
    };
    let mut result = result.clone();
    let mut child_problem = None;
    if let Action::Flow { .. } = step.action {
        match child_result(work, run, index)? {
            ChildResult::Waiting(response) => return Ok(response),
            ChildResult::Output(output) => result = output,
            ChildResult::Ended(problem) => child_problem = Some(problem),
        }
    }
    if let Some(best) = iterations::close_for_result(work, run, index)? {
        result = best;
    }
    let attempts = work.update_step(&run.id, index, |state| {
        state.attempts += 1;
        state.attempts
    })?;
    let mut verdict = match child_problem {
        Some(problem) => validate::Verdict {
            failure: Some(validate::Failure::Schema),
            violations: vec![problem],
        },
        None => match &step.action {
            // A task graph that is not one (unsafe or repeated ids, unknown or circular
            // dependencies) is refused before the step's own checks read it.
            Action::Decompose { .. } => {
                let structure = super::fan_out::task_graph_violations(&result);
                if structure.is_empty() {
                    validate::check_step_result(work, run, &header, step, &result)?
                } else {
                    validate::Verdict {
                        failure: Some(validate::Failure::Schema),
                        violations: structure,
                    }
                }
            }
            _ => validate::check_step_result(work, run, &header, step, &result)?,
        },
    };
    if let Some(usage) = usage {
        budget::debit(work, run, usage)?;
    }
    if !verdict.passed() {
        let failure = verdict.failure.unwrap_or(validate::Failure::Ensure);
        let violations = std::mem::take(&mut verdict.violations);
        return failed_attempt(work, run, index, attempts, failure, violations, result);
    }
    if let Some(merged) = iterations::merge_accumulated(work, run, index, &result)? {
        result = merged;
    }
    succeed(work, run, index, step, attempts, result)
}

/// A result that passed every check: it becomes the step's output, and the flow moves on by
/// the step's `next`.
pub(crate) fn succeed(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    step: &Step,
    attempts: u32,
    result: Value,
) -> Result<Response, StoreError> {
    accept(work, run, index, step, attempts, result)?;
    if let Some(exhausted) = budget::exhausted_after(work, run)? {
        return Ok(exhausted);
    }
    if let Some(stopped) = dispatch::move_to(work, run, index, step.next, Move::Forward)? {
        return Ok(stopped);
    }
    dispatch::advance(work, run, Note::default())
}

/// An attempt that produced no result (see [`Command::StepFailed`]): counted, its usage
/// debited, and failed with `violations`, exactly as a result that broke its contract.
///
/// [`Command::StepFailed`]: crate::Command::StepFailed
pub(crate) fn step_failed(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
    violations: &[String],
    usage: Option<&Value>,
) -> Result<Response, StoreError> {
    let (_header, index, _step) = match reported_step(work, run, step_id)? {
        Ok(current) => current,
        Err(refused) => return Ok(refused),
    };
    let attempts = work.update_step(&run.id, index, |state| {
        state.attempts += 1;
        state.attempts
    })?;
    if let Some(usage) = usage {
        budget::debit(work, run, usage)?;
    }
    let mut violations = violations.to_vec();
    if violations.is_empty() {
        violations.push("the attempt produced no result".to_owned());
    }
    failed_attempt(
        work,
        run,
        index,
        attempts,
        validate::Failure::NoResult,
        violations,
        Value::Null,
    )
}

/// Stores an accepted result, writes the step record, fills the cache.
fn accept(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    step: &Step,
    attempts: u32,
    result: Value,
) -> Result<(), StoreError> {
    let header = work.get(&run.id)?;
    let child = work.step(&run.id, index)?.child;
    let cache_key = if step.cache {
        let key = cache::cache_key(work, run, &header, index, step)?;
        work.put_cache(key.clone(), result.clone());
        Some(key)
    } else {
        None
    };
    work.update_step(&run.id, index, |state| {
        state.output = Some(result);
        state.skipped = false;
        state.iteration = None;
    })?;
    write_step_record(
        work,
        run,
        index,
        attempts,
        child.map(|id| id.to_string()),
        cache_key,
        Vec::new(),
    )
}

pub(crate) fn write_step_record(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    attempts: u32,
    child_flow_id: Option<String>,
    cache_key: Option<String>,
    violations: Vec<String>,
) -> Result<(), StoreError> {
    let header = work.get(&run.id)?;
    let step = run.step(index)?;
    let (function_name, agent, step_mode) = dispatch::record_identity(step);
    let duration_ms = header
        .dispatched_ms
        .map_or(0, |at| run.ctx.now_ms.saturating_sub(at));
    work.push_event(
        &run.id,
        EventBody::Record(Record::Step(StepRecord {
            step_id: step.id.clone(),
            function_name,
            attempts,
            duration_ms,
            round: header.round,
            round_start_step_id: run.step_id(header.round_start),
            agent,
            step_mode,
            child_flow_id,
            cache_hit: false,
            cache_key,
            at_ms: run.ctx.now_ms,
            violations,
        })),
    )
}

/// A result that failed its checks: retry the step, recover by `on_fail`, or end the flow.
pub(crate) fn failed_attempt(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    attempts: u32,
    failure: validate::Failure,
    violations: Vec<String>,
    result: Value,
) -> Result<Response, StoreError> {
    match settle_failure(work, run, index, attempts, failure, violations, result)? {
        AfterFailure::Walk(note) => dispatch::advance(work, run, note),
        AfterFailure::Answer(response) => Ok(response),
    }
}

/// What follows a failed attempt once its state is written.
pub(crate) enum AfterFailure {
    /// Walk on from the cursor (the same step again, or the `on_fail` target) with this note.
    Walk(Note),
    /// The flow ended (or its budget did): this is the answer.
    Answer(Response),
}

/// [`failed_attempt`] without the walk that follows it, for a caller already walking (the end
/// of a flow whose output breaks its contract), so that the walk stays a loop.
pub(crate) fn settle_failure(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    attempts: u32,
    failure: validate::Failure,
    violations: Vec<String>,
    result: Value,
) -> Result<AfterFailure, StoreError> {
    let step = run.step(index)?;
    work.push_event(
        &run.id,
        EventBody::Attempt(FailedAttempt {
            step_id: step.id.clone(),
            attempt: attempts,
            status: failure.status().to_owned(),
            violations: violations.clone(),
            retries_remaining: step.retries.saturating_sub(attempts),
            at_ms: run.ctx.now_ms,
        }),
    )?;
    iterations::clear_step(work, run, index)?;
    if attempts < step.retries {
        // A fresh attempt: a new child for a flow step, a new clock for the duration.
        work.update_step(&run.id, index, |state| state.child = None)?;
        work.update(&run.id, |header| header.dispatched_ms = None)?;
        if let Some(exhausted) = budget::exhausted_after(work, run)? {
            return Ok(AfterFailure::Answer(exhausted));
        }
        return Ok(AfterFailure::Walk(Note {
            status: Some(failure.status()),
            violations: Some(violations),
            ..Note::default()
        }));
    }
    let child = work.step(&run.id, index)?.child.map(|id| id.to_string());
    write_step_record(work, run, index, attempts, child, None, violations.clone())?;
    if let Some(target) = step.on_fail {
        // The recovery step reads the failed result as `$.steps.<failed>.output`.
        work.update_step(&run.id, index, |state| {
            state.output = Some(result);
            state.attempts = 0;
        })?;
        if let Some(exhausted) = budget::exhausted_after(work, run)? {
            return Ok(AfterFailure::Answer(exhausted));
        }
        if let Some(stopped) =
            dispatch::move_to(work, run, index, target, Move::Recover { failed: index })?
        {
            // Routing ended the flow (`routing_loop`): say also why the step failed.
            return Ok(AfterFailure::Answer(match stopped {
                Response::Error(mut error) => {
                    error.violations.get_or_insert(violations);
                    Response::Error(error)
                }
                other => other,
            }));
        }
        return Ok(AfterFailure::Walk(Note {
            routed_from: Some(step.id.clone()),
            violations: Some(violations),
            ..Note::default()
        }));
    }
    let agent = dispatch::record_identity(step).1;
    let response = dispatch::fail_flow(
        work,
        run,
        "retries_exhausted",
        format!("Step '{}' exhausted all retries", step.id),
        Some(step.id.clone()),
    )?;
    Ok(AfterFailure::Answer(match response {
        Response::Error(mut error) => {
            error.step_mode = Some(dispatch::record_identity(step).2);
            error.agent = Some(agent);
            error.violations = Some(violations);
            if let Some(parent) = work.get(&run.id)?.parent {
                error.message.push_str(&format!(
                    "; this is a child flow: report it with stratum_step_done on flow '{}' so the parent step retries or recovers",
                    parent.flow
                ));
            }
            Response::Error(error)
        }
        other => other,
    }))
}

enum ChildResult {
    /// The child has not finished: the answer tells the agent to finish it first.
    Waiting(Response),
    /// The child completed: the result to check, the child's own output.
    Output(Value),
    /// The child ended without completing: a violation of the parent step.
    Ended(String),
}

/// A flow step accepts a result only once its child execution completed, and the result is
/// the child's output as the runtime recorded it: what the agent sends (the child's
/// completion envelope, or its output) only acknowledges it, so no relay can alter it.
fn child_result(work: &mut Work<'_>, run: &Run<'_>, index: u32) -> Result<ChildResult, StoreError> {
    let step_id = run.step(index)?.id.clone();
    let child = work.step(&run.id, index)?.child;
    let Some(child) = child else {
        let mut error = ErrorResponse::new(
            "child_flow_not_started",
            format!(
                "Step '{step_id}' runs a sub-flow that has not been started; call stratum_resume on flow '{}' to start it",
                run.id
            ),
        )
        .flow(run.id.as_str());
        error.step_id = Some(step_id);
        return Ok(ChildResult::Waiting(error.into_response()));
    };
    let Some(header) = work.header(&child)? else {
        return Err(StoreError::Corrupt(format!(
            "child flow {child} of {} is missing",
            run.id
        )));
    };
    if !header.status.is_finished() {
        let mut error = ErrorResponse::new(
            "child_flow_not_complete",
            format!(
                "Step '{step_id}' runs sub-flow '{}' (flow id '{child}'), which has not finished; drive it to completion with stratum_step_done on '{child}', then report its result here",
                header.flow_name
            ),
        )
        .flow(run.id.as_str());
        error.step_id = Some(step_id);
        error.child_flow_id = Some(child.to_string());
        return Ok(ChildResult::Waiting(error.into_response()));
    }
    if header.status != crate::state::FlowStatus::Complete {
        return Ok(ChildResult::Ended(format!(
            "sub-flow '{}' (flow id '{child}') ended {}{}",
            header.flow_name,
            header.status.as_str(),
            header
                .error_type
                .map(|kind| format!(" ({kind})"))
                .unwrap_or_default()
        )));
    }
    Ok(ChildResult::Output(header.output.unwrap_or(Value::Null)))
}

pub(crate) fn skip_step(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
    reason: &str,
) -> Result<Response, StoreError> {
    let (_, index, step) = match running_step(work, run)? {
        Ok(current) => current,
        Err(finished) => return Ok(finished),
    };
    if step.id != step_id {
        return Ok(wrong_step(run, &step.id, step_id));
    }
    if let Action::Gate { .. } = step.action {
        return Ok(gate_needs_resolve(
            run,
            step,
            format!(
                "Step '{}' is a gate step — use stratum_gate_resolve to resolve it",
                step.id
            ),
        ));
    }
    // Only a skip that is taken spends: a refused one leaves the flow (and its ledger) as it was.
    if let Some(exhausted) = budget::exhausted_after(work, run)? {
        return Ok(exhausted);
    }
    iterations::clear_step(work, run, index)?;
    dispatch::record_skip(work, run, index, reason.to_owned())?;
    let target = run.after_skip(index);
    if let Some(stopped) = dispatch::move_to(work, run, index, target, Move::Forward)? {
        return Ok(stopped);
    }
    dispatch::advance(work, run, Note::default())
}
