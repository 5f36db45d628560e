//! Ending flows and telling what happened: the completion envelope, the final output (and
//! its check against the flow's `output` contract), and `stratum_audit`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::dispatch;
use super::results::{self, AfterFailure};
use super::{Run, validate};
use crate::response::{Audit, Finished, Record, Response, RoundRecords};
use crate::state::{Event, EventBody, FlowStatus};
use crate::store::StoreError;

use super::work::Work;

/// How deep `child_audits` nest: deeper than any plan's flow nesting (flows cannot recurse).
const MAX_AUDIT_DEPTH: usize = 64;

/// The cursor reached the end: the flow completes (or, after a kill routed to cleanup, is
/// killed), once its output passes the flow's `output` contract; when it does not, the step
/// that produced the output answers for it and the walk goes on ([`AfterFailure::Walk`]).
pub(crate) fn complete(work: &mut Work<'_>, run: &Run<'_>) -> Result<AfterFailure, StoreError> {
    let (producer, output) = final_output(work, run)?;
    if let Some(contract) = run
        .flow()
        .and_then(|flow| flow.output)
        .and_then(|index| run.plan.contracts.get(index as usize))
    {
        let problems = validate::schema_violations(&contract.schema, &output);
        if !problems.is_empty() {
            let violations: Vec<String> = problems
                .into_iter()
                .map(|problem| {
                    format!(
                        "flow output contract '{}' violation: {problem}",
                        contract.name
                    )
                })
                .collect();
            let Some(producer) = producer else {
                return dispatch::fail_flow(
                    work,
                    run,
                    "output_contract_failed",
                    format!(
                        "the flow produced no output, but its output contract '{}' requires one: {}",
                        contract.name,
                        violations.join("; ")
                    ),
                    None,
                )
                .map(AfterFailure::Answer);
            };
            // The last step that produced the output answers for it, as if its own check
            // had failed: it retries, recovers or ends the flow.
            let attempts = work.step(&run.id, producer)?.attempts.max(1);
            // A retry is bounded by the step's attempts; a recovery by `on_fail` is a move back
            // like any other, counted against the step's re-entry bound, so that a recovery
            // which reaches the end again with the same output cannot loop for ever.
            let step = run.step(producer)?;
            if attempts >= step.retries
                && step.on_fail.is_some()
                && let Some(stopped) = dispatch::count_reentry(work, run, producer)?
            {
                return Ok(AfterFailure::Answer(stopped));
            }
            work.update_step(&run.id, producer, |state| {
                state.output = None;
                state.attempts = attempts;
            })?;
            work.update(&run.id, |header| {
                header.cursor = crate::state::Cursor::Step(producer)
            })?;
            return results::settle_failure(
                work,
                run,
                producer,
                attempts,
                validate::Failure::Schema,
                violations,
                output,
            );
        }
    }
    work.update(&run.id, |header| {
        header.status = if header.killing {
            FlowStatus::Killed
        } else {
            FlowStatus::Complete
        };
        header.output = Some(output);
        header.finished_ms = Some(run.ctx.now_ms);
        header.dispatched_ms = None;
        header.active_iteration = None;
    })?;
    envelope(work, run, None).map(AfterFailure::Answer)
}

/// The last step, in plan order, with an output that is not null; and that output.
pub(crate) fn final_output(
    work: &mut Work<'_>,
    run: &Run<'_>,
) -> Result<(Option<u32>, Value), StoreError> {
    let mut found = (None, Value::Null);
    for index in work.steps_from(&run.id, 0)? {
        if let Some(output) = work.output(&run.id, index)?
            && !output.is_null()
        {
            found = (Some(index), output);
        }
    }
    Ok(found)
}

/// The envelope of a finished flow: `complete`, `killed`, `failed` or `budget_exhausted`.
pub(crate) fn envelope(
    work: &mut Work<'_>,
    run: &Run<'_>,
    reason: Option<&str>,
) -> Result<Response, StoreError> {
    let header = work.get(&run.id)?;
    if matches!(header.status, FlowStatus::Failed | FlowStatus::Cancelled) {
        return Ok(super::already_finished(&header));
    }
    let events = work.events(&run.id)?;
    let trace = round_records(&events, header.round);
    // A flow killed at a gate with nowhere to go has no output (the reference's shape).
    let output = match (header.status, &header.output) {
        (FlowStatus::Killed, None) => None,
        (_, output) => Some(output.clone().unwrap_or(Value::Null)),
    };
    let parent = header.parent.as_ref();
    Ok(Response::Finished(Box::new(Finished {
        status: header.status.as_str().to_owned(),
        flow_id: run.id.to_string(),
        output,
        trace,
        total_duration_ms: header
            .finished_ms
            .unwrap_or(run.ctx.now_ms)
            .saturating_sub(header.started_ms),
        reason: reason.map(str::to_owned),
        budget_state: match header.status {
            FlowStatus::BudgetExhausted => header.budget.clone(),
            _ => None,
        },
        parent_flow_id: parent.map(|link| link.flow.to_string()),
        parent_step_id: parent.and_then(|link| run.step_id_in_parent(link.step, work)),
        reverted_to: None,
    })))
}

impl Run<'_> {
    /// A parent step's id: the parent runs on the same plan, so it is found there.
    fn step_id_in_parent(&self, step: u32, work: &mut Work<'_>) -> Option<String> {
        let parent = work.get(&self.id).ok()?.parent?;
        let header = work.header(&parent.flow).ok()??;
        self.plan
            .flows
            .get(header.flow as usize)?
            .steps
            .get(step as usize)
            .map(|step| step.id.clone())
    }
}

/// The trace records of one round, reverted ones left out.
fn round_records(events: &[Event], round: u32) -> Vec<Record> {
    events
        .iter()
        .filter(|event| !event.reverted && event.round == round)
        .filter_map(|event| match &event.body {
            EventBody::Record(record) => Some(record.clone()),
            EventBody::Iteration { .. } | EventBody::Attempt(_) => None,
        })
        .collect()
}

/// `stratum_audit`: everything that happened, in every round, with the child flows' audits.
pub(crate) fn audit(work: &mut Work<'_>, run: &Run<'_>) -> Result<Response, StoreError> {
    Ok(Response::Audit(Box::new(audit_of(work, run, 0)?)))
}

fn audit_of(work: &mut Work<'_>, run: &Run<'_>, depth: usize) -> Result<Audit, StoreError> {
    let header = work.get(&run.id)?;
    let events = work.events(&run.id)?;
    let trace = round_records(&events, header.round);
    let rounds = (0..header.round)
        .map(|round| RoundRecords {
            round,
            steps: round_records(&events, round),
        })
        .collect();
    let mut iterations: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut archived: Vec<BTreeMap<String, Vec<Value>>> =
        (0..header.round).map(|_| BTreeMap::new()).collect();
    for event in events.iter().filter(|event| !event.reverted) {
        if let EventBody::Iteration { step_id, report } = &event.body {
            let into = if event.round == header.round {
                Some(&mut iterations)
            } else {
                archived.get_mut(event.round as usize)
            };
            if let Some(into) = into {
                into.entry(step_id.clone())
                    .or_default()
                    .push(report.clone());
            }
        }
    }
    let mut child_audits: BTreeMap<String, Vec<Audit>> = BTreeMap::new();
    if depth < MAX_AUDIT_DEPTH {
        for child in work.children(&run.id)? {
            let Some(child_header) = work.header(&child)? else {
                continue;
            };
            let Some(link) = &child_header.parent else {
                continue;
            };
            let step_id = run.step_id(Some(link.step)).unwrap_or_default();
            let child_run = run.other(child.clone(), child_header.flow, run.ctx);
            let child_audit = audit_of(work, &child_run, depth + 1)?;
            child_audits.entry(step_id).or_default().push(child_audit);
        }
    }
    let steps_completed = trace
        .iter()
        .filter(|record| matches!(record, Record::Step(step) if step.violations.is_empty()))
        .count();
    let cache_hits = events
        .iter()
        .filter(|event| {
            !event.reverted
                && matches!(&event.body, EventBody::Record(Record::Step(step)) if step.cache_hit)
        })
        .count();
    let end = header.finished_ms.unwrap_or(run.ctx.now_ms);
    Ok(Audit {
        flow_id: run.id.to_string(),
        flow_name: header.flow_name.clone(),
        status: match header.status {
            FlowStatus::Running => "in_progress".to_owned(),
            other => other.as_str().to_owned(),
        },
        error_type: header.error_type.clone(),
        budget_state: header.budget.clone(),
        steps_completed: u32::try_from(steps_completed).unwrap_or(u32::MAX),
        total_steps: run.total_steps(),
        trace,
        cache_hits: u32::try_from(cache_hits).unwrap_or(u32::MAX),
        total_duration_ms: end.saturating_sub(header.started_ms),
        round: header.round,
        rounds,
        iterations,
        archived_iterations: archived,
        child_audits,
        output: header.output.clone(),
        parent_flow_id: header.parent.as_ref().map(|link| link.flow.to_string()),
        started_by: header.started_by.clone(),
    })
}
