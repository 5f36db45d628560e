//! Moving the cursor and saying what the agent must do next.
//!
//! [`advance`] walks from the cursor until it reaches something an agent or a person must
//! do: it records skips (`skip_if`), auto-approves gates whose policy is `flag` or `skip`,
//! serves cached results, starts child flows, and returns the dispatch; at the end of the
//! flow it finishes it. The walk is a loop, not recursion, and every backward move counts
//! against the step's re-entry bound, so no chain of skips or policies can run away.

use std::collections::BTreeMap;

use serde_json::Value;
use stratum_compiler::plan::{Action, FunctionMode, Policy, Step, Target};

use super::results::AfterFailure;
use super::{Run, budget, cache, current, fan_out, finish, inputs, validate};
use crate::ids::FlowId;
use crate::response::{
    ErrorResponse, FlowDispatch, GateDispatch, PolicyRecord, Record, Response, SkipRecord,
    StepDispatch,
};
use crate::state::{Cursor, EventBody, FlowHeader, FlowStatus, ParentLink};
use crate::store::StoreError;

use super::work::Work;

/// What a dispatch carries about how it came about.
#[derive(Clone, Debug, Default)]
pub(crate) struct Note {
    /// The step whose failure (or success) routed here.
    pub(crate) routed_from: Option<String>,
    pub(crate) violations: Option<Vec<String>>,
    pub(crate) reverted_to: Option<String>,
    /// The status of a re-dispatch after a failed attempt (`ensure_failed`, …).
    pub(crate) status: Option<&'static str>,
}

/// How a move came about: it decides what a backward move clears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Move {
    /// Success, a skip or a gate approval: steps from the target on run afresh.
    Forward,
    /// `on_fail`: like `Forward`, but the failed step keeps its output for the recovery step.
    Recover { failed: u32 },
}

/// Walks from the cursor to the next thing to do, and returns it.
pub(crate) fn advance(
    work: &mut Work<'_>,
    run: &Run<'_>,
    mut note: Note,
) -> Result<Response, StoreError> {
    // One command walks at most this far without an agent: the re-entry bound caps each
    // step, but a spec's `max_rounds` may be huge, and a loop of auto-approving gates must
    // not run (and write trace records) for as long as it allows.
    let reentries = run
        .max_reentries()
        .min(crate::command::DEFAULT_MAX_REENTRIES);
    let bound = run
        .steps()
        .len()
        .saturating_mul(reentries as usize + 2)
        .saturating_add(16);
    for _ in 0..bound {
        let header = work.get(&run.id)?;
        if header.status.is_finished() {
            return finish::envelope(work, run, None);
        }
        let Some(index) = current(&header) else {
            // An output that breaks the flow's contract sends the walk back to its producer:
            // a loop, not recursion, so that no chain of recoveries can exhaust the stack.
            match finish::complete(work, run)? {
                AfterFailure::Answer(response) => return Ok(response),
                AfterFailure::Walk(next) => {
                    note = next;
                    continue;
                }
            }
        };
        let step = run.step(index)?;
        let mut skip_if_error = None;
        // `skip_if` is decided when the step becomes current; a step already dispatched (a
        // resume, a restart) is not skipped after the agent may have started on it.
        if let Some(skip) = step
            .skip
            .as_ref()
            .filter(|_| header.dispatched_ms.is_none())
        {
            match evaluate_skip(work, run, &header, step)? {
                Ok(true) => {
                    if let Some(done) = skip_step_now(
                        work,
                        run,
                        index,
                        skip.reason.as_deref(),
                        &skip.condition.program,
                    )? {
                        return Ok(done);
                    }
                    continue;
                }
                Ok(false) => {}
                Err(message) => skip_if_error = Some(message),
            }
        }
        let agent = matches!(
            step.action,
            Action::Function { .. }
                | Action::Inline { .. }
                | Action::Judge { .. }
                | Action::Decompose { .. }
                | Action::Parallel { .. }
                | Action::Pipeline { .. }
        );
        if let Some(exhausted) = budget::exhausted_before_dispatch(work, run, agent)? {
            return Ok(exhausted);
        }
        match &step.action {
            Action::Gate {
                policy: Some(policy @ (Policy::Flag | Policy::Skip)),
                on_approve,
                ..
            } => {
                let name = match policy {
                    Policy::Flag => "flag",
                    _ => "skip",
                };
                record_policy(
                    work,
                    run,
                    index,
                    name,
                    format!("policy: {name} — auto-approved"),
                )?;
                if let Some(stopped) = move_to(work, run, index, *on_approve, Move::Forward)? {
                    return Ok(stopped);
                }
            }
            Action::Gate { .. } => {
                mark_dispatched(work, run, false)?;
                return Ok(gate_dispatch(run, index, step, note));
            }
            Action::Flow { flow } => return dispatch_child(work, run, index, *flow, note),
            // `start` refuses a flow that can reach one of these; a flow stored by a runtime
            // that ran them ends here rather than being dispatched as something else.
            Action::Parallel { .. } | Action::Pipeline { .. } => {
                match fan_out::dispatch(work, run, index, note)? {
                    AfterFailure::Answer(response) => return Ok(response),
                    AfterFailure::Walk(next) => {
                        note = next;
                        continue;
                    }
                }
            }
            Action::Judge { .. } if work.step(&run.id, index)?.judge_pending.is_some() => {
                mark_dispatched(work, run, false)?;
                return Ok(judge_gate_dispatch(run, index, step, note));
            }
            Action::Function { .. }
            | Action::Inline { .. }
            | Action::Judge { .. }
            | Action::Decompose { .. } => {
                if step.cache
                    && let Some(done) = cache::serve_from_cache(work, run, index, step)?
                {
                    if let Some(stopped) = done {
                        return Ok(stopped);
                    }
                    continue;
                }
                mark_dispatched(work, run, true)?;
                let mut dispatch = step_dispatch(work, run, index, note)?;
                dispatch.skip_if_error = skip_if_error;
                return Ok(Response::Step(Box::new(dispatch)));
            }
        }
    }
    fail_flow(
        work,
        run,
        "routing_loop",
        format!(
            "the flow kept moving without reaching a step to dispatch (skips, policies and routing \
             formed a loop past {bound} moves); the flow has ended"
        ),
        None,
    )
}

/// `stratum_resume`: what the flow is waiting for now, without touching its clocks.
pub(crate) fn resume(work: &mut Work<'_>, run: &Run<'_>) -> Result<Response, StoreError> {
    let header = work.get(&run.id)?;
    if header.status.is_finished() {
        return Ok(Response::Status(crate::response::StatusOnly {
            status: header.status.as_str().to_owned(),
            flow_id: run.id.to_string(),
        }));
    }
    advance(work, run, Note::default())
}

/// Records that the current step was dispatched, unless it already was (a resume keeps the
/// first dispatch time, so gate timeouts and durations survive restarts).
pub(crate) fn mark_dispatched(
    work: &mut Work<'_>,
    run: &Run<'_>,
    agent: bool,
) -> Result<(), StoreError> {
    // Only a first dispatch writes: a resume of a dispatched step leaves the flow untouched.
    if work.get(&run.id)?.dispatched_ms.is_some() {
        return Ok(());
    }
    let now = run.ctx.now_ms;
    work.update(&run.id, |header| header.dispatched_ms = Some(now))?;
    if agent {
        budget::count_dispatch(work, run)?;
    }
    Ok(())
}

/// Moves the cursor from step `from` to `target`. A move back (to `from` or earlier) enters
/// the target again: it counts against the bound and clears the steps from it on. Returns
/// the response that ends the flow when the bound is passed or the target is `Kill`.
pub(crate) fn move_to(
    work: &mut Work<'_>,
    run: &Run<'_>,
    from: u32,
    target: Target,
    how: Move,
) -> Result<Option<Response>, StoreError> {
    // After a kill routed to cleanup, falling through to the next step in order would run the
    // rest of the flow the gate refused: the cleanup ends the flow, unless it routes on by an
    // explicit `next` elsewhere.
    let target = match target {
        Target::Step(to)
            if how == Move::Forward && to == from + 1 && work.get(&run.id)?.killing =>
        {
            Target::End
        }
        other => other,
    };
    match target {
        Target::End => {
            work.update(&run.id, |header| {
                header.cursor = Cursor::End;
                header.dispatched_ms = None;
            })?;
        }
        Target::Kill => {
            work.update(&run.id, |header| {
                header.cursor = Cursor::End;
                header.status = FlowStatus::Killed;
                header.finished_ms = Some(run.ctx.now_ms);
                header.dispatched_ms = None;
            })?;
            return finish::envelope(work, run, None).map(Some);
        }
        Target::Step(to) => {
            if to <= from {
                if let Some(stopped) = count_reentry(work, run, to)? {
                    return Ok(Some(stopped));
                }
                let preserve = match how {
                    Move::Recover { failed } => Some(failed),
                    Move::Forward => None,
                };
                clear_from(work, run, to, preserve, false)?;
            } else if to != from + 1 {
                clear_from(work, run, to, None, false)?;
            }
            work.update(&run.id, |header| {
                header.cursor = Cursor::Step(to);
                header.dispatched_ms = None;
            })?;
        }
    }
    Ok(None)
}

/// Counts a move back into step `to` against its re-entry bound; past the bound the flow ends
/// (`routing_loop`) and this is the response.
pub(crate) fn count_reentry(
    work: &mut Work<'_>,
    run: &Run<'_>,
    to: u32,
) -> Result<Option<Response>, StoreError> {
    let entries = work.update_step(&run.id, to, |state| {
        state.entries += 1;
        state.entries
    })?;
    let limit = run.max_reentries();
    if entries <= limit {
        return Ok(None);
    }
    let id = run.step_id(Some(to)).unwrap_or_default();
    let source = if run.flow().and_then(|flow| flow.max_rounds).is_some() {
        "the flow's max_rounds"
    } else {
        "the runtime's default; set max_rounds on the flow to change it"
    };
    fail_flow(
        work,
        run,
        "routing_loop",
        format!(
            "step '{id}' was entered again by routing {entries} times in one round, more than the limit of {limit} ({source}); the flow has ended"
        ),
        Some(id),
    )
    .map(Some)
}

/// Cancels a child flow its parent step no longer waits for, and the children it runs in
/// turn. A finished child is left as it ended.
pub(crate) fn cancel_child(
    work: &mut Work<'_>,
    now_ms: u64,
    child: FlowId,
) -> Result<(), StoreError> {
    let mut pending = vec![child];
    while let Some(id) = pending.pop() {
        let Some(header) = work.header(&id)? else {
            continue;
        };
        if header.status.is_finished() {
            continue;
        }
        if let Some(index) = current(&header)
            && let Some(grandchild) = work.step(&id, index)?.child
        {
            pending.push(grandchild);
        }
        work.update(&id, |header| {
            header.status = FlowStatus::Cancelled;
            header.cursor = Cursor::End;
            header.finished_ms = Some(now_ms);
            header.dispatched_ms = None;
            header.active_iteration = None;
        })?;
    }
    Ok(())
}

/// Clears the steps at index `from` or later for a fresh run: outputs, attempts, iteration
/// state and child links; `preserve` keeps its output (the failed step an `on_fail` recovery
/// reads). Re-entry counts survive unless `new_round`.
pub(crate) fn clear_from(
    work: &mut Work<'_>,
    run: &Run<'_>,
    from: u32,
    preserve: Option<u32>,
    new_round: bool,
) -> Result<(), StoreError> {
    for index in work.steps_from(&run.id, from)? {
        if let Some(child) = work.step(&run.id, index)?.child {
            cancel_child(work, run.ctx.now_ms, child)?;
        }
        work.update_step(&run.id, index, |state| {
            let output = state.output.take();
            let entries = state.entries;
            *state = Default::default();
            if preserve == Some(index) {
                state.output = output;
            }
            if !new_round {
                state.entries = entries;
            }
        })?;
    }
    work.update(&run.id, |header| {
        if header.active_iteration.is_some_and(|step| step >= from) {
            header.active_iteration = None;
        }
    })?;
    Ok(())
}

/// Ends the flow as failed (`retries_exhausted`, `routing_loop`, …) and says so.
pub(crate) fn fail_flow(
    work: &mut Work<'_>,
    run: &Run<'_>,
    error_type: &str,
    message: String,
    step_id: Option<String>,
) -> Result<Response, StoreError> {
    work.update(&run.id, |header| {
        header.status = FlowStatus::Failed;
        header.error_type = Some(error_type.to_owned());
        header.finished_ms = Some(run.ctx.now_ms);
        header.dispatched_ms = None;
        header.active_iteration = None;
    })?;
    let mut error = ErrorResponse::new(error_type, message).flow(run.id.as_str());
    error.step_id = step_id;
    Ok(error.into_response())
}

/// Evaluates a step's `skip_if`: whether to skip, or why it could not be decided.
fn evaluate_skip(
    work: &mut Work<'_>,
    run: &Run<'_>,
    header: &FlowHeader,
    step: &Step,
) -> Result<Result<bool, String>, StoreError> {
    let Some(skip) = &step.skip else {
        return Ok(Ok(false));
    };
    let outputs = inputs::dependency_outputs(work, run, step)?;
    let scope = validate::Scope {
        input: &header.inputs,
        steps: &outputs,
    };
    let bindings = scope.bindings(&Value::Null);
    Ok(skip
        .condition
        .program
        .evaluate_bool(&bindings, &run.ctx.config.limits)
        .map_err(|error| {
            format!(
                "skip_if '{}' could not be evaluated: {}",
                skip.condition.program.source(),
                error.message
            )
        }))
}

/// Skips the current step because its `skip_if` held (a gate is approved by it instead).
fn skip_step_now(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    reason: Option<&str>,
    condition: &stratum_grammar::Program,
) -> Result<Option<Response>, StoreError> {
    let step = run.step(index)?;
    let because = format!("skip_if: {}", condition.source());
    if let Action::Gate { on_approve, .. } = &step.action {
        record_policy(work, run, index, "skip_if", because)?;
        work.update_step(&run.id, index, |state| {
            state.output = None;
            state.skipped = true;
        })?;
        return move_to(work, run, index, *on_approve, Move::Forward);
    }
    record_skip(
        work,
        run,
        index,
        reason.map(str::to_owned).unwrap_or(because),
    )?;
    move_to(work, run, index, run.after_skip(index), Move::Forward)
}

/// Writes a skip record and marks the step skipped (output null).
pub(crate) fn record_skip(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    reason: String,
) -> Result<(), StoreError> {
    let header = work.get(&run.id)?;
    let step_id = run.step(index)?.id.clone();
    if let Some(child) = work.step(&run.id, index)?.child {
        cancel_child(work, run.ctx.now_ms, child)?;
    }
    work.update_step(&run.id, index, |state| {
        state.output = None;
        state.skipped = true;
        state.child = None;
    })?;
    work.push_event(
        &run.id,
        EventBody::Record(Record::Skip(SkipRecord {
            step_id,
            skip_reason: reason,
            round: header.round,
            round_start_step_id: run.step_id(header.round_start),
            at_ms: run.ctx.now_ms,
        })),
    )
}

fn record_policy(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    policy: &str,
    rationale: String,
) -> Result<(), StoreError> {
    let header = work.get(&run.id)?;
    work.push_event(
        &run.id,
        EventBody::Record(Record::Policy(PolicyRecord {
            step_id: run.step(index)?.id.clone(),
            effective_policy: policy.to_owned(),
            resolved_outcome: "approve".to_owned(),
            rationale,
            round: header.round,
            round_start_step_id: run.step_id(header.round_start),
            at_ms: run.ctx.now_ms,
        })),
    )
}

/// The dispatch of an agent step (function, inline or judge).
pub(crate) fn step_dispatch(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    note: Note,
) -> Result<StepDispatch, StoreError> {
    let header = work.get(&run.id)?;
    let step = run.step(index)?;
    let attempts = work.step(&run.id, index)?.attempts;
    let inputs = inputs::resolve_inputs(work, run, &header, step)?;
    let (step_mode, function, mode, intent, agent, model) = match &step.action {
        Action::Function {
            function,
            mode,
            intent,
            agent,
            ..
        } => (
            "function",
            Some(function.clone()),
            Some(
                match mode {
                    FunctionMode::Infer => "infer",
                    FunctionMode::Compute => "compute",
                }
                .to_owned(),
            ),
            intent.clone(),
            agent.clone(),
            None,
        ),
        Action::Decompose {
            intent,
            agent,
            model,
        } => (
            "decompose",
            None,
            None,
            Some(intent.clone()),
            agent.clone(),
            Some(model.clone()),
        ),
        Action::Inline {
            intent,
            agent,
            model,
        } => (
            "inline",
            None,
            None,
            Some(intent.clone()),
            agent.clone(),
            Some(model.clone()),
        ),
        _ => ("judge", None, None, None, None, Some(None)),
    };
    let agent = match agent {
        Some(agent) if agent.starts_with('$') => {
            inputs::resolve_reference(work, run, &header, &agent)?.map(|value| match value {
                Value::String(text) => text,
                other => other.to_string(),
            })
        }
        other => other,
    };
    let (output_contract, output_fields) = output_description(run, step);
    // A reasoning certificate's sections go into the intent, for whichever agent runs it.
    let intent = match super::certificate::Certificate::of(step.reasoning_template.as_ref()) {
        Some(certificate) => Some(format!(
            "{}{}",
            intent.unwrap_or_default(),
            certificate.instructions()
        )),
        None => intent,
    };
    Ok(StepDispatch {
        status: note.status.unwrap_or("execute_step").to_owned(),
        flow_id: run.id.to_string(),
        step_number: index + 1,
        total_steps: run.total_steps(),
        step_id: step.id.clone(),
        step_mode: step_mode.to_owned(),
        function,
        agent,
        mode,
        intent,
        inputs,
        output_contract,
        output_fields,
        ensure: step
            .ensure
            .iter()
            .map(|ensure| ensure.program.source().to_owned())
            .collect(),
        retries_remaining: step.retries.saturating_sub(attempts),
        model,
        violations: note.violations,
        routed_from: note.routed_from,
        reverted_to: note.reverted_to,
        skip_if_error: None,
        max_iterations: step
            .iteration
            .as_ref()
            .and_then(|iteration| iteration.max_iterations),
        predicates: match &step.action {
            Action::Judge { predicates, .. } => Some(
                predicates
                    .iter()
                    .map(|predicate| {
                        serde_json::json!({
                            "id": predicate.id,
                            "type": predicate.kind,
                            "statement": predicate.statement,
                            "applied_gate": predicate.applied_gate,
                        })
                    })
                    .collect(),
            ),
            _ => None,
        },
        stakes: match &step.action {
            Action::Judge { stakes, .. } => serde_json::to_value(stakes).ok(),
            _ => None,
        },
        budget: match &step.action {
            Action::Judge { budget, .. } => serde_json::to_value(budget).ok(),
            _ => None,
        },
    })
}

/// The contract's name and its fields' types (`any` where a field names none).
fn output_description(run: &Run<'_>, step: &Step) -> (Option<String>, BTreeMap<String, String>) {
    let Some(contract) = step
        .output
        .contract
        .and_then(|index| run.plan.contracts.get(index as usize))
    else {
        return (None, BTreeMap::new());
    };
    let fields = contract
        .schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .map(|(name, schema)| (name.clone(), field_type(schema).to_owned()))
                .collect()
        })
        .unwrap_or_default();
    (Some(contract.name.clone()), fields)
}

/// A field's type as the dispatch names it: its schema's `type` (the non-null one of an
/// optional field's pair), the type of an enum's values, else `any`.
fn field_type(schema: &Value) -> &'static str {
    const TYPES: [&str; 7] = [
        "string", "number", "integer", "boolean", "array", "object", "null",
    ];
    let named = |name: &str| TYPES.iter().copied().find(|ty| *ty == name);
    match schema.get("type") {
        Some(Value::String(name)) => return named(name).unwrap_or("any"),
        Some(Value::Array(names)) => {
            let mut real = names
                .iter()
                .filter_map(Value::as_str)
                .filter(|name| *name != "null");
            if let (Some(only), None) = (real.next(), real.next()) {
                return named(only).unwrap_or("any");
            }
            return "any";
        }
        _ => {}
    }
    match schema.get("enum").and_then(Value::as_array) {
        Some(values) if !values.is_empty() && values.iter().all(Value::is_string) => "string",
        Some(values) if !values.is_empty() && values.iter().all(Value::is_number) => "number",
        Some(values) if !values.is_empty() && values.iter().all(Value::is_boolean) => "boolean",
        _ => "any",
    }
}

fn gate_dispatch(run: &Run<'_>, index: u32, step: &Step, note: Note) -> Response {
    let (function, on_approve, on_revise, on_kill, timeout, agent) = match &step.action {
        Action::Gate {
            function,
            on_approve,
            on_revise,
            on_kill,
            timeout,
            ..
        } => (
            function.clone(),
            target_name(run, *on_approve),
            target_name(run, *on_revise),
            target_name(run, *on_kill),
            *timeout,
            None,
        ),
        _ => (String::new(), None, None, None, None, None),
    };
    Response::Gate(Box::new(GateDispatch {
        status: "await_gate",
        flow_id: run.id.to_string(),
        step_number: index + 1,
        total_steps: run.total_steps(),
        step_id: step.id.clone(),
        step_mode: "function",
        function,
        agent,
        on_approve,
        on_revise,
        on_kill,
        timeout,
        how_to_decide: crate::response::how_to_decide(
            run.id.as_str(),
            &step.id,
            run.ctx.config.console_url.as_deref(),
        ),
        routed_from: note.routed_from,
        reverted_to: note.reverted_to,
        violations: note.violations,
    }))
}

/// A judge step whose verdict was ambiguous, waiting for a person: approve completes it,
/// revise retries it, kill ends the flow.
fn judge_gate_dispatch(run: &Run<'_>, index: u32, step: &Step, note: Note) -> Response {
    Response::Gate(Box::new(GateDispatch {
        status: "await_gate",
        flow_id: run.id.to_string(),
        step_number: index + 1,
        total_steps: run.total_steps(),
        step_id: step.id.clone(),
        step_mode: "judge",
        function: "judge".to_owned(),
        agent: None,
        on_approve: target_name(run, step.next),
        on_revise: Some(step.id.clone()),
        on_kill: None,
        timeout: None,
        how_to_decide: format!(
            "the judge's verdict was ambiguous: a person decides whether its predicates are met. {}",
            crate::response::how_to_decide(
                run.id.as_str(),
                &step.id,
                run.ctx.config.console_url.as_deref(),
            )
        ),
        routed_from: note.routed_from,
        reverted_to: note.reverted_to,
        violations: note.violations,
    }))
}

fn target_name(run: &Run<'_>, target: Target) -> Option<String> {
    match target {
        Target::Step(index) => run.step_id(Some(index)),
        Target::End | Target::Kill => None,
    }
}

/// A flow step: its child execution's current dispatch, starting the child if it has none.
fn dispatch_child(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    called: u32,
    note: Note,
) -> Result<Response, StoreError> {
    let step = run.step(index)?;
    let existing = work.step(&run.id, index)?.child;
    let child_id = match existing {
        Some(child) if work.header(&child)?.is_some() => child,
        _ => {
            let header = work.get(&run.id)?;
            let inputs: serde_json::Map<String, Value> =
                inputs::resolve_inputs(work, run, &header, step)?
                    .into_iter()
                    .collect();
            let child = work.mint(run.ctx.seed);
            let Some(flow) = run.plan.flows.get(called as usize) else {
                return Err(StoreError::Corrupt(format!(
                    "step {} calls a flow its plan lacks",
                    step.id
                )));
            };
            let start = match flow.start {
                Target::Step(at) => Cursor::Step(at),
                Target::End | Target::Kill => Cursor::End,
            };
            work.create_flow(FlowHeader {
                id: child.clone(),
                plan: header.plan.clone(),
                flow: called,
                flow_name: flow.name.clone(),
                inputs: Value::Object(inputs),
                cursor: start,
                status: FlowStatus::Running,
                error_type: None,
                killing: false,
                round: 0,
                round_start: None,
                started_ms: run.ctx.now_ms,
                updated_ms: run.ctx.now_ms,
                finished_ms: None,
                dispatched_ms: None,
                active_iteration: None,
                budget: budget::ledger(flow.budget.as_ref()),
                output: None,
                parent: Some(ParentLink {
                    flow: run.id.clone(),
                    step: index,
                }),
                // Whoever started the parent started the work its gates judge.
                started_by: header.started_by.clone(),
                events: 0,
                children: 0,
                version: 0,
            });
            work.update(&run.id, |header| header.children += 1)?;
            work.update_step(&run.id, index, |state| state.child = Some(child.clone()))?;
            mark_dispatched(work, run, false)?;
            child
        }
    };
    let child_header = work.get(&child_id)?;
    let child_run = run.other(child_id.clone(), child_header.flow, run.ctx);
    let child_step = if child_header.status.is_finished() {
        finish::envelope(work, &child_run, None)?
    } else {
        advance(work, &child_run, Note::default())?
    };
    Ok(Response::Flow(Box::new(FlowDispatch {
        status: "execute_flow",
        parent_flow_id: run.id.to_string(),
        parent_step_id: step.id.clone(),
        child_flow_id: child_id.to_string(),
        child_flow_name: child_header.flow_name,
        child_step,
        step_number: index + 1,
        total_steps: run.total_steps(),
        routed_from: note.routed_from,
        reverted_to: note.reverted_to,
        violations: note.violations,
    })))
}

/// What a step record says of the step: its function, agent and mode.
pub(crate) fn record_identity(step: &Step) -> (String, Option<String>, String) {
    match &step.action {
        Action::Function {
            function, agent, ..
        } => (function.clone(), agent.clone(), "function".to_owned()),
        Action::Inline { agent, .. } => (String::new(), agent.clone(), "inline".to_owned()),
        Action::Flow { .. } => (String::new(), None, "flow".to_owned()),
        Action::Gate { function, .. } => (function.clone(), None, "gate".to_owned()),
        Action::Judge { .. } => (String::new(), None, "judge".to_owned()),
        Action::Decompose { agent, .. } => (String::new(), agent.clone(), "decompose".to_owned()),
        Action::Parallel { fan_out, .. } => (
            String::new(),
            fan_out.agent.clone(),
            "parallel_dispatch".to_owned(),
        ),
        Action::Pipeline { fan_out, .. } => {
            (String::new(), fan_out.agent.clone(), "pipeline".to_owned())
        }
    }
}
