//! Fan-out steps (`parallel_dispatch`): one task per element of the step's `source`, run by
//! the agent (consumer dispatch: the envelope, then `stratum_parallel_done`) or by the server
//! (`stratum_parallel_start`, a [`TaskReport`] per task event, `stratum_parallel_advance`),
//! then evaluated as one result.
//!
//! The order of a fan-out's life: when the step becomes current, [`dispatch`] builds the
//! attempt's task set (`tasks`: read from `source`, checked as a graph; `render`: each
//! task's prompt) and answers the envelope. Tasks are reported (all at once by the agent, one
//! event at a time by the server). [`evaluate`] counts `require` over the tasks the step
//! expects, never over what was reported, builds the aggregate (`{tasks, merge_status,
//! completed, failed, outcome}`), runs the step's checks on it, and then the step succeeds,
//! or fails an attempt as any step does (retry, `on_fail`, `retries_exhausted`).
//!
//! A retry re-dispatches only what must run again: the tasks that did not complete or whose
//! changes were refused (a conflict, a failed pre-merge check), or every task not yet merged
//! when the step's own checks refused the aggregate; each with its violations in its prompt.
//! Accepted tasks are kept, and count again.

mod pipeline;
mod render;
mod tasks;

use serde_json::{Map, Value, json};
use stratum_compiler::plan::{
    Action, FanOut, Isolation, Merge, Require, Step, Template, TemplatePart, TemplateRoot, Verify,
};

use super::certificate::Certificate;
use super::dispatch::{self, Note};
use super::results::{self, AfterFailure};
use super::work::Work;
use super::{Run, budget, gate_needs_resolve, inputs, running_step, validate, wrong_step};
use crate::command::TaskReport;
use crate::ids::FlowId;
use crate::response::{ErrorResponse, FanOutReport, ParallelDispatch, Response, TaskView};
use crate::state::{
    DiffRef, FanOutMode, FanOutState, FlowHeader, MergeState, TaskState, TaskStatus, VerifyCommands,
};
use crate::store::{DiffKey, StoreError};

pub(crate) use tasks::task_graph_violations;

/// What a fan-out step runs: one template over a task graph, or stages over items.
#[derive(Clone, Copy)]
enum Shape<'p> {
    Parallel {
        template: &'p stratum_compiler::plan::Template,
        task_contract: Option<u32>,
    },
    Pipeline {
        stages: &'p [stratum_compiler::plan::Stage],
    },
}

/// The settings and shape of a fan-out step.
fn fan_out_of(step: &Step) -> Option<(&FanOut, Shape<'_>)> {
    match &step.action {
        Action::Parallel {
            fan_out,
            template,
            task_contract,
        } => Some((
            fan_out,
            Shape::Parallel {
                template,
                task_contract: *task_contract,
            },
        )),
        Action::Pipeline { fan_out, stages } => Some((fan_out, Shape::Pipeline { stages })),
        _ => None,
    }
}

/// The contract every task result must satisfy (parallel steps only).
fn task_contract_of(step: &Step) -> Option<u32> {
    match fan_out_of(step) {
        Some((_, Shape::Parallel { task_contract, .. })) => task_contract,
        _ => None,
    }
}

/// Creates the pipeline tasks now ready; renders the prompts of a parallel step's tasks
/// whose `{prev}` is now known.
fn expand(run: &Run<'_>, step: &Step, fan: &mut FanOutState, previous: Vec<(String, Vec<String>)>) {
    match fan_out_of(step) {
        Some((fan_out, Shape::Pipeline { stages })) => {
            let maker = pipeline::Maker {
                run,
                fan_out,
                stages,
                attempt: fan.attempt,
                now_ms: run.ctx.now_ms,
                previous,
            };
            maker.expand(fan);
        }
        Some((fan_out, Shape::Parallel { template, .. })) => {
            render_awaiting(run, fan_out, template, fan);
        }
        None => {}
    }
}

/// Whether a template reads the result of the task's dependency.
fn uses_prev(template: &Template) -> bool {
    template.parts.iter().any(|part| {
        matches!(
            part,
            TemplatePart::Value {
                root: TemplateRoot::Prev | TemplateRoot::PrevRaw,
                ..
            }
        )
    })
}

/// The prompts of the attempt's tasks that wait for `{prev}`, rendered once their dependency
/// completed. A task whose dependency ended otherwise (or is not a task of the step) cannot
/// be told what it needs: it is cancelled, with the reason, and runs again on a retry.
fn render_awaiting(run: &Run<'_>, fan_out: &FanOut, template: &Template, fan: &mut FanOutState) {
    // A chain settles in one call: a task cancelled in a pass cancels its dependants in the
    // next. Each pass that goes on settled a task, so there are at most as many as tasks.
    while render_awaiting_once(run, fan_out, template, fan) {}
}

/// One pass of [`render_awaiting`]; whether it settled a task.
fn render_awaiting_once(
    run: &Run<'_>,
    fan_out: &FanOut,
    template: &Template,
    fan: &mut FanOutState,
) -> bool {
    let mut settled = false;
    let waiting: Vec<usize> = fan
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, task)| {
            task.awaiting_prev && task.attempt == fan.attempt && task.status == TaskStatus::Pending
        })
        .map(|(position, _)| position)
        .collect();
    for position in waiting {
        let Some(dependency) = fan
            .tasks
            .get(position)
            .and_then(|task| task.depends_on.first())
            .cloned()
        else {
            continue;
        };
        let found = fan
            .tasks
            .iter()
            .find(|other| other.id == dependency)
            .map(|other| (other.status, other.result.clone()));
        let Some(task) = fan.tasks.get_mut(position) else {
            continue;
        };
        match found {
            Some((TaskStatus::Pending | TaskStatus::Running, _)) => {}
            Some((TaskStatus::Complete, result)) => {
                let result = result.unwrap_or(Value::Null);
                let bound = render::Bound {
                    item: Some(&task.element),
                    task_id: &task.id,
                    prev: Some(&result),
                    ..render::Bound::default()
                };
                match render::render(&run.plan, template, &bound) {
                    Ok(prompt) => {
                        let prompt =
                            with_certificate(prompt, fan_out.task_reasoning_template.as_ref());
                        task.prompt = with_violations(prompt, &task.violations);
                        task.awaiting_prev = false;
                    }
                    Err(problem) => {
                        task.status = TaskStatus::Failed;
                        task.violations = vec![problem];
                        task.finished_ms = Some(run.ctx.now_ms);
                        settled = true;
                    }
                }
            }
            other => {
                let why = match other {
                    None => format!("its dependency '{dependency}' is not a task of the step"),
                    Some((status, _)) => {
                        format!("its dependency '{dependency}' is {}", status.as_str())
                    }
                };
                task.status = TaskStatus::Cancelled;
                task.violations = vec![format!(
                    "task '{}' cancelled: its intent template needs {{prev}}, and {why}",
                    task.id
                )];
                task.finished_ms = Some(run.ctx.now_ms);
                settled = true;
            }
        }
    }
    settled
}

/// What the VM decides once a pipeline task completed (none for a parallel step).
fn after_completion(run: &Run<'_>, step: &Step, task: &mut TaskState) {
    if let Some((_, Shape::Pipeline { stages })) = fan_out_of(step)
        && task.status == TaskStatus::Complete
    {
        pipeline::settled(run, stages, task);
    }
}

/// The current step becomes a fan-out: its attempt's tasks, and the envelope; or, when the
/// task set cannot be built (a source that is not a list of tasks, a template field a task
/// lacks), a failed attempt of the step.
pub(crate) fn dispatch(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    note: Note,
) -> Result<AfterFailure, StoreError> {
    let step = run.step(index)?;
    if let Err(violations) = ensure_attempt(work, run, index)? {
        let attempts = work.update_step(&run.id, index, |state| {
            state.attempts += 1;
            state.fan_out = None;
            state.attempts
        })?;
        return results::settle_failure(
            work,
            run,
            index,
            attempts,
            validate::Failure::Schema,
            violations,
            Value::Null,
        );
    }
    dispatch::mark_dispatched(work, run, true)?;
    let fan = fan_state(work, run, index)?;
    Ok(AfterFailure::Answer(envelope(
        work, run, index, step, &fan, note,
    )?))
}

/// Makes sure the step's row holds the task set of its current attempt, building it when it
/// does not; `Err` with the violations when it cannot be built.
fn ensure_attempt(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
) -> Result<Result<(), Vec<String>>, StoreError> {
    let step = run.step(index)?;
    let Some((fan_out, shape)) = fan_out_of(step) else {
        return Err(StoreError::Corrupt(format!(
            "step {} is not a fan-out step",
            step.id
        )));
    };
    let state = work.step(&run.id, index)?;
    let attempt = state.attempts.saturating_add(1);
    if state
        .fan_out
        .as_ref()
        .is_some_and(|fan| fan.attempt == attempt)
    {
        return Ok(Ok(()));
    }
    let stored_diffs = diff_keys(&step.id, state.fan_out.as_ref());
    // Tasks accepted in the previous attempt of this entry are kept; an older task set
    // (before routing entered the step again) is not.
    let previous = state
        .fan_out
        .filter(|fan| fan.attempt.saturating_add(1) == attempt);
    let header = work.get(&run.id)?;
    let source = inputs::resolve_binding(work, run, &header, &fan_out.source)?;
    let verify = verify_commands(work, run, &header, fan_out)?.map(|commands| VerifyCommands {
        commands,
        from_spec: matches!(fan_out.pre_merge_verify, Some(Verify::Commands(_))),
    });
    let bounced: Vec<Value> = previous
        .iter()
        .flat_map(|fan| &fan.tasks)
        .filter(|task| !is_accepted(task) || task.merge == MergeState::Conflict)
        .filter_map(|task| task.bounce.clone())
        .collect();
    let template = match shape {
        Shape::Parallel { template, .. } => template,
        Shape::Pipeline { .. } => {
            let items = match pipeline::read_items(&source) {
                Ok(items) => items,
                Err(violations) => return Ok(Err(violations)),
            };
            let (kept, again) = kept_pipeline_tasks(previous.as_ref());
            let mut fan = FanOutState {
                attempt,
                mode: None,
                base: None,
                tasks: kept,
                merge_status: None,
                verify,
                items,
                bounced,
            };
            expand(run, step, &mut fan, again);
            forget_diffs(
                work,
                &run.id,
                stored_diffs,
                &diff_keys(&step.id, Some(&fan)),
            )?;
            work.update_step(&run.id, index, |state| state.fan_out = Some(fan))?;
            return Ok(Ok(()));
        }
    };
    let specs = match tasks::read_graph(&source, "the step's source", false) {
        Ok(specs) => specs,
        Err(violations) => return Ok(Err(violations)),
    };
    let mut problems = Vec::new();
    let mut built = Vec::with_capacity(specs.len());
    let needs_prev = uses_prev(template);
    for spec in specs {
        let before = previous.as_ref().and_then(|fan| fan.task(&spec.id));
        if let Some(kept) = before.filter(|task| is_accepted(task)) {
            built.push(kept.clone());
            continue;
        }
        // What refused its last run; a task never handed out (its `{prev}` never came) has
        // nothing to fix.
        let carried = before
            .filter(|task| !task.awaiting_prev)
            .map(|task| task.violations.clone())
            .unwrap_or_default();
        // `{prev}` is the result of the task's one dependency: its prompt waits for it. A
        // task without one (the head of a chain) reads it as empty text; with several, which
        // one it means is unclear, and the source does not fit the template.
        if needs_prev && spec.depends_on.len() > 1 {
            problems.push(format!(
                "template_field_missing: the intent template's {{prev}} is the result of a \
                 task's one dependency, and task '{}' depends on {}",
                spec.id,
                spec.depends_on.len()
            ));
            continue;
        }
        if needs_prev && spec.depends_on.len() == 1 {
            built.push(TaskState {
                id: spec.id,
                element: spec.element,
                depends_on: spec.depends_on,
                awaiting_prev: true,
                agent: fan_out.agent.clone(),
                timeout_s: fan_out.task_timeout,
                attempt,
                violations: carried,
                ..TaskState::default()
            });
            continue;
        }
        let nothing = Value::String(String::new());
        let bound = render::Bound {
            item: Some(&spec.element),
            task_id: &spec.id,
            prev: needs_prev.then_some(&nothing),
            ..render::Bound::default()
        };
        let prompt = match render::render(&run.plan, template, &bound) {
            Ok(prompt) => with_certificate(prompt, fan_out.task_reasoning_template.as_ref()),
            Err(problem) => {
                problems.push(problem);
                continue;
            }
        };
        built.push(TaskState {
            prompt: with_violations(prompt, &carried),
            id: spec.id,
            element: spec.element,
            depends_on: spec.depends_on,
            agent: fan_out.agent.clone(),
            timeout_s: fan_out.task_timeout,
            attempt,
            violations: carried,
            ..TaskState::default()
        });
    }
    if !problems.is_empty() {
        return Ok(Err(problems));
    }
    let mut fan = FanOutState {
        attempt,
        mode: None,
        base: None,
        tasks: built,
        merge_status: None,
        verify,
        items: Vec::new(),
        bounced,
    };
    // A kept dependency's result is known already.
    render_awaiting(run, fan_out, template, &mut fan);
    forget_diffs(
        work,
        &run.id,
        stored_diffs,
        &diff_keys(&step.id, Some(&fan)),
    )?;
    work.update_step(&run.id, index, |state| state.fan_out = Some(fan))?;
    Ok(Ok(()))
}

/// The keys of the diff rows the tasks of `fan` refer to.
fn diff_keys(step: &str, fan: Option<&FanOutState>) -> Vec<DiffKey> {
    fan.iter()
        .flat_map(|fan| &fan.tasks)
        .filter(|task| task.diff_ref.as_ref().is_some_and(|diff| diff.bytes > 0))
        .map(|task| DiffKey {
            step: step.to_owned(),
            attempt: task.attempt,
            task: task.id.clone(),
        })
        .collect()
}

/// Deletes the diff rows of tasks a new attempt's task set no longer holds, so that a step's
/// rows are what its state refers to (what [`crate::state::MAX_STEP_DIFF_BYTES`] bounds).
fn forget_diffs(
    work: &mut Work<'_>,
    flow: &FlowId,
    stored: Vec<DiffKey>,
    kept: &[DiffKey],
) -> Result<(), StoreError> {
    for key in stored {
        if !kept.contains(&key) {
            work.put_task_diff(flow, key, None)?;
        }
    }
    Ok(())
}

/// The bytes of diff a task holds (in its own row, or, written by an earlier build, inline).
fn diff_size(task: &TaskState) -> u64 {
    let inline = task
        .diff
        .as_ref()
        .map_or(0, |diff| u64::try_from(diff.len()).unwrap_or(u64::MAX));
    task.diff_ref
        .as_ref()
        .map_or(0, |diff| diff.bytes)
        .saturating_add(inline)
}

/// Stores a settling task's diff in a row of its own; the reference its state keeps, or,
/// when it would take the step's diffs past the configured limit
/// ([`crate::state::MAX_STEP_DIFF_BYTES`] by default; `recorded`: what its other tasks hold), the violation
/// that fails the task instead.
fn keep_diff(
    work: &mut Work<'_>,
    run: &Run<'_>,
    key: DiffKey,
    diff: Option<&String>,
    recorded: u64,
) -> Result<Result<Option<DiffRef>, String>, StoreError> {
    let Some(text) = diff else {
        return Ok(Ok(None));
    };
    let reference = DiffRef::of(text);
    let limit = run.ctx.config.max_step_diff_bytes;
    if recorded.saturating_add(reference.bytes) > limit {
        return Ok(Err(format!(
            "task '{}': its diff ({} bytes) would take the step's diffs past their limit of \
             {limit} bytes (its other tasks hold {recorded}); split the work into smaller tasks",
            key.task.chars().take(64).collect::<String>(),
            reference.bytes,
        )));
    }
    let flow = &run.id;
    // An empty diff needs no row: the reference alone says it is empty.
    if reference.bytes > 0 {
        work.put_task_diff(flow, key, Some(text.clone()))?;
    }
    Ok(Ok(Some(reference)))
}

/// The tasks of a pipeline's previous attempt that stand (complete and not refused, or
/// skipped, and everything they follow standing too), and the violations of the ones that run
/// again, for their prompts.
fn kept_pipeline_tasks(
    previous: Option<&FanOutState>,
) -> (Vec<TaskState>, Vec<(String, Vec<String>)>) {
    let Some(previous) = previous else {
        return (Vec::new(), Vec::new());
    };
    let mut kept: Vec<TaskState> = previous
        .tasks
        .iter()
        .filter(|task| is_accepted(task) || task.status == TaskStatus::Skipped)
        .cloned()
        .collect();
    // A task whose predecessor runs again must run again after it.
    loop {
        let before = kept.len();
        let ids: Vec<String> = kept.iter().map(|task| task.id.clone()).collect();
        kept.retain(|task| task.depends_on.iter().all(|id| ids.contains(id)));
        if kept.len() == before {
            break;
        }
    }
    let again = previous
        .tasks
        .iter()
        .filter(|task| kept.iter().all(|kept| kept.id != task.id))
        .map(|task| (task.id.clone(), task.violations.clone()))
        .collect();
    (kept, again)
}

/// A task's prompt with its certificate's sections, when it has a template.
pub(super) fn with_certificate(prompt: String, template: Option<&Value>) -> String {
    match Certificate::of(template) {
        Some(certificate) => format!("{prompt}{}", certificate.instructions()),
        None => prompt,
    }
}

/// The certificate template of a task: a stage's own, else the step's.
fn task_certificate<'s>(step: &'s Step, task: &TaskState) -> Option<&'s Value> {
    let (fan_out, shape) = fan_out_of(step)?;
    let stage = match (shape, task.slot) {
        (Shape::Pipeline { stages }, Some(slot)) => stages
            .get(slot.stage as usize)
            .and_then(|stage| stage.task_reasoning_template.as_ref()),
        _ => None,
    };
    stage.or(fan_out.task_reasoning_template.as_ref())
}

/// What is wrong with a task's result: its contract, then its certificate.
fn task_violations(run: &Run<'_>, step: &Step, task: &TaskState, result: &Value) -> Vec<String> {
    let mut problems = contract_violations(run, task_contract_of(step), result);
    if let Some(certificate) = Certificate::of(task_certificate(step, task)) {
        problems.extend(
            certificate
                .violations(result)
                .into_iter()
                .map(|problem| format!("task '{}' cert: {problem}", task.id)),
        );
    }
    problems
}

/// A task that counts without running again: complete, and its changes not refused.
fn is_accepted(task: &TaskState) -> bool {
    task.status == TaskStatus::Complete && task.merge != MergeState::Conflict
}

/// The prompt of a task's next attempt: the template's text, then what was wrong last time.
fn with_violations(prompt: String, violations: &[String]) -> String {
    if violations.is_empty() {
        return prompt;
    }
    let mut text = prompt;
    text.push_str("\n\n---\n\nYour previous attempt at this task was refused:\n");
    for violation in violations {
        text.push_str("- ");
        text.push_str(violation);
        text.push('\n');
    }
    text.push_str("Fix these and do the task again.");
    text
}

fn fan_state(work: &mut Work<'_>, run: &Run<'_>, index: u32) -> Result<FanOutState, StoreError> {
    work.step(&run.id, index)?.fan_out.ok_or_else(|| {
        StoreError::Corrupt(format!(
            "flow {} step {index} was dispatched without its tasks",
            run.id
        ))
    })
}

/// The `parallel_dispatch` envelope of the attempt.
fn envelope(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    step: &Step,
    fan: &FanOutState,
    note: Note,
) -> Result<Response, StoreError> {
    let Some((fan_out, shape)) = fan_out_of(step) else {
        return Err(StoreError::Corrupt(format!(
            "step {} is not a fan-out step",
            step.id
        )));
    };
    let attempts = work.step(&run.id, index)?.attempts;
    // The tasks to run now: a parallel step's all at once; a pipeline's as they become ready.
    let tasks = fan
        .dispatched()
        .filter(|task| task.status == TaskStatus::Pending && !task.awaiting_prev)
        .map(|task| {
            let mut object = match (&task.element, task.slot) {
                (_, Some(slot)) => {
                    let mut object = Map::new();
                    object.insert("id".to_owned(), Value::String(task.id.clone()));
                    object.insert("item".to_owned(), task.element.clone());
                    object.insert("stage".to_owned(), json!(slot.stage));
                    if let Some(lane) = slot.lane {
                        object.insert("lane".to_owned(), json!(lane));
                    }
                    object.insert("depends_on".to_owned(), json!(task.depends_on));
                    object
                }
                (Value::Object(map), None) => map.clone(),
                (other, None) => Map::from_iter([("item".to_owned(), other.clone())]),
            };
            object.insert("prompt".to_owned(), Value::String(task.prompt.clone()));
            if !task.violations.is_empty() {
                object.insert("violations".to_owned(), json!(task.violations));
            }
            Value::Object(object)
        })
        .collect();
    let bounced = fan.bounced.clone();
    Ok(Response::Parallel(Box::new(ParallelDispatch {
        status: note.status.unwrap_or("parallel_dispatch").to_owned(),
        flow_id: run.id.to_string(),
        step_number: index + 1,
        total_steps: run.total_steps(),
        step_id: step.id.clone(),
        step_mode: "parallel_dispatch",
        tasks,
        agent: fan_out.agent.clone(),
        max_concurrent: fan_out.max_concurrent,
        isolation: isolation_name(fan_out.isolation),
        require: require_value(fan_out.require),
        merge: match fan_out.merge {
            Merge::SequentialApply => "sequential_apply",
            Merge::Manual => "manual",
        },
        intent_template: match shape {
            Shape::Parallel { template, .. } => Some(render::source_text(&run.plan, template)),
            Shape::Pipeline { .. } => None,
        },
        pipeline: matches!(shape, Shape::Pipeline { .. }).then_some(true),
        stages: match shape {
            Shape::Pipeline { stages } => Some(
                stages
                    .iter()
                    .map(|stage| {
                        json!({
                            "intent_template": render::source_text(&run.plan, &stage.template),
                            "agent": stage.agent,
                            "when": stage.when.as_ref().map(|when| when.program.source()),
                            "exit_when": stage.exit_when.as_ref().map(|exit| exit.program.source()),
                            "fanout": stage.fanout.map(|fanout| json!({"max": fanout.max, "require": require_value(fanout.require)})),
                            "join": stage.join,
                        })
                    })
                    .collect(),
            ),
            Shape::Parallel { .. } => None,
        },
        ensure: step
            .ensure
            .iter()
            .map(|ensure| ensure.program.source().to_owned())
            .collect(),
        retries_remaining: step.retries.saturating_sub(attempts),
        pre_merge_verify: fan
            .verify
            .as_ref()
            .map(|verify| verify.commands.clone())
            .filter(|commands| !commands.is_empty()),
        attempt: fan.attempt,
        kept: fan
            .tasks
            .iter()
            .filter(|task| task.attempt != fan.attempt)
            .map(|task| task.id.clone())
            .collect(),
        dispatch: match fan.mode {
            Some(FanOutMode::Server) => "server",
            _ => "consumer",
        },
        bounced_tasks: (note.status.is_some() && !bounced.is_empty()).then_some(bounced),
        violations: note.violations,
        routed_from: note.routed_from,
        reverted_to: note.reverted_to,
    })))
}

/// The step's `pre_merge_verify` commands: as written, or read from the flow (a list of
/// strings; anything else gives none).
pub(crate) fn verify_commands(
    work: &mut Work<'_>,
    run: &Run<'_>,
    header: &FlowHeader,
    fan_out: &FanOut,
) -> Result<Option<Vec<String>>, StoreError> {
    Ok(match &fan_out.pre_merge_verify {
        None => None,
        Some(Verify::Commands(commands)) => Some(commands.clone()),
        Some(Verify::Binding(binding)) => {
            match inputs::resolve_binding(work, run, header, binding)? {
                Value::String(command) => Some(vec![command]),
                Value::Array(items) => Some(
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect(),
                ),
                _ => None,
            }
        }
    })
}

fn isolation_name(isolation: Isolation) -> &'static str {
    match isolation {
        Isolation::Worktree => "worktree",
        Isolation::None => "none",
    }
}

fn require_value(require: Require) -> Value {
    match require {
        Require::All => json!("all"),
        Require::Any => json!("any"),
        Require::AtLeast(count) => json!(count),
    }
}

/// The current step, when it is the fan-out step `step_id`; else the answer that refuses the
/// call.
fn fan_out_step<'r>(
    work: &mut Work<'_>,
    run: &'r Run<'_>,
    step_id: &str,
) -> Result<Result<(FlowHeader, u32, &'r Step), Response>, StoreError> {
    let (header, index, step) = match running_step(work, run)? {
        Ok(current) => current,
        Err(finished) => return Ok(Err(finished)),
    };
    if step.id != step_id {
        return Ok(Err(wrong_step(run, &step.id, step_id)));
    }
    match &step.action {
        Action::Parallel { .. } | Action::Pipeline { .. } => Ok(Ok((header, index, step))),
        Action::Gate { .. } => Ok(Err(gate_needs_resolve(
            run,
            step,
            format!(
                "Step '{}' is a gate step. Use stratum_gate_resolve to resolve it.",
                step.id
            ),
        ))),
        _ => Ok(Err(refusal(
            run,
            step,
            "wrong_step_type",
            format!(
                "Step '{}' is a {} step, not a parallel_dispatch step: report it with stratum_step_done",
                step.id,
                dispatch::record_identity(step).2
            ),
        ))),
    }
}

fn refusal(run: &Run<'_>, step: &Step, error_type: &str, message: String) -> Response {
    let mut error = ErrorResponse::new(error_type, message).flow(run.id.as_str());
    error.step_id = Some(step.id.clone());
    error.into_response()
}

/// The consumer's `merge_status`: `"clean"`, `"conflict"` or `{status, bounced_tasks?}`, as
/// (whether it conflicted, the bounces by task, the value to record).
struct MergeStatus {
    conflict: bool,
    bounces: Vec<(String, Value)>,
    value: Value,
}

fn read_merge_status(value: &Value) -> Result<MergeStatus, String> {
    let word = |status: &str| match status {
        "clean" => Ok(false),
        "conflict" => Ok(true),
        other => Err(format!(
            "merge_status '{}' is neither 'clean' nor 'conflict'",
            other.chars().take(40).collect::<String>()
        )),
    };
    match value {
        Value::String(status) => Ok(MergeStatus {
            conflict: word(status)?,
            bounces: Vec::new(),
            value: value.clone(),
        }),
        Value::Object(map) => {
            let status = map
                .get("status")
                .and_then(Value::as_str)
                .ok_or("merge_status must have a `status` of 'clean' or 'conflict'")?;
            let conflict = word(status)?;
            let mut bounces = Vec::new();
            match map.get("bounced_tasks") {
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) => {
                    for item in items {
                        let task = item
                            .get("task_id")
                            .and_then(Value::as_str)
                            .ok_or("every entry of merge_status.bounced_tasks needs a `task_id`")?;
                        let reason = item.get("reason").and_then(Value::as_str);
                        if !matches!(reason, Some("merge_conflict" | "gate_failed")) {
                            return Err(format!(
                                "bounced task '{}' needs a `reason` of 'merge_conflict' or 'gate_failed'",
                                task.chars().take(64).collect::<String>()
                            ));
                        }
                        bounces.push((task.to_owned(), item.clone()));
                    }
                }
                Some(_) => return Err("merge_status.bounced_tasks must be a list".to_owned()),
            }
            Ok(MergeStatus {
                conflict,
                bounces,
                value: value.clone(),
            })
        }
        _ => Err("merge_status must be 'clean', 'conflict' or {status, bounced_tasks}".to_owned()),
    }
}

/// `stratum_parallel_done`: the agent's report of the attempt's tasks.
pub(crate) fn parallel_done(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
    task_results: &Value,
    merge_status: &Value,
) -> Result<Response, StoreError> {
    let (header, index, step, mut fan) = match dispatched_step(work, run, step_id)? {
        Ok(found) => found,
        Err(refused) => return Ok(refused),
    };
    if fan.mode == Some(FanOutMode::Server) {
        return Ok(refusal(
            run,
            step,
            "server_dispatched",
            format!(
                "the server runs the tasks of step '{}'; follow them with stratum_parallel_poll",
                step.id
            ),
        ));
    }
    let merge = match read_merge_status(merge_status) {
        Ok(merge) => merge,
        Err(message) => return Ok(refusal(run, step, "invalid_merge_status", message)),
    };
    let reports = match read_reports(task_results, &fan) {
        Ok(reports) => reports,
        Err((error_type, message)) => return Ok(refusal(run, step, error_type, message)),
    };
    for (task_id, _) in &merge.bounces {
        if fan.dispatched().all(|task| &task.id != task_id) {
            return Ok(refusal(
                run,
                step,
                "unknown_task",
                format!(
                    "merge_status bounces task '{}', which attempt {} did not dispatch",
                    task_id.chars().take(64).collect::<String>(),
                    fan.attempt
                ),
            ));
        }
    }
    let now = run.ctx.now_ms;
    let attempt = fan.attempt;
    // A task whose prompt waits for `{prev}` was not dispatched in this round.
    for task in fan.tasks.iter_mut().filter(|task| {
        task.attempt == attempt && task.status == TaskStatus::Pending && !task.awaiting_prev
    }) {
        task.finished_ms = Some(now);
        task.violations.clear();
        task.bounce = None;
        match reports.iter().find(|report| report.task_id == task.id) {
            None => {
                task.status = TaskStatus::Failed;
                task.violations
                    .push(format!("task '{}' was not reported", task.id));
            }
            Some(report) => {
                task.result = report.result.clone();
                match report.status.as_str() {
                    "complete" => {
                        let result = report.result.clone().unwrap_or(Value::Null);
                        let problems = task_violations(run, step, task, &result);
                        if problems.is_empty() {
                            task.status = TaskStatus::Complete;
                        } else {
                            task.status = TaskStatus::Failed;
                            task.violations.extend(problems);
                        }
                    }
                    "failed" => {
                        task.status = TaskStatus::Failed;
                        task.violations
                            .push(format!("the agent reported task '{}' failed", task.id));
                    }
                    other => {
                        task.status = TaskStatus::Failed;
                        task.violations.push(format!(
                            "task '{}' was reported '{}'; a task is 'complete' or 'failed' (a pipeline skips stages by its own `when` and `exit_when`)",
                            task.id,
                            other.chars().take(40).collect::<String>()
                        ));
                    }
                }
                after_completion(run, step, task);
            }
        }
        if let Some((_, bounce)) = merge.bounces.iter().find(|(id, _)| id == &task.id) {
            task.bounce = Some(bounce.clone());
            if bounce.get("reason").and_then(Value::as_str) == Some("merge_conflict") {
                task.merge = MergeState::Conflict;
                task.violations.push(conflict_violation(&task.id, bounce));
            } else {
                task.status = TaskStatus::Failed;
                task.violations.push(gate_violation(&task.id, bounce));
            }
        }
    }
    fan.mode = Some(FanOutMode::Consumer);
    fan.merge_status = Some(merge.value.clone());
    let conflict = merge.conflict;
    // A pipeline goes on in rounds: the stages its reports made ready are the next envelope;
    // so does a parallel step whose `{prev}` tasks could now be rendered.
    expand(run, step, &mut fan, Vec::new());
    let more = fan
        .dispatched()
        .any(|task| task.status == TaskStatus::Pending && !task.awaiting_prev);
    work.update_step(&run.id, index, |state| state.fan_out = Some(fan.clone()))?;
    if more {
        return envelope(work, run, index, step, &fan, Note::default());
    }
    evaluate(work, run, &header, index, step, conflict)
}

/// The current step when it is the fan-out step `step_id`, with its attempt's tasks; else the
/// answer that refuses the call (another step, a step not dispatched yet).
#[allow(clippy::type_complexity)]
fn dispatched_step<'r>(
    work: &mut Work<'_>,
    run: &'r Run<'_>,
    step_id: &str,
) -> Result<Result<(FlowHeader, u32, &'r Step, FanOutState), Response>, StoreError> {
    let (header, index, step) = match fan_out_step(work, run, step_id)? {
        Ok(current) => current,
        Err(refused) => return Ok(Err(refused)),
    };
    match current_fan(work, run, index)? {
        Some(fan) => Ok(Ok((header, index, step, fan))),
        None => Ok(Err(not_dispatched(run, step))),
    }
}

/// One entry of `task_results`.
struct Reported {
    task_id: String,
    status: String,
    result: Option<Value>,
}

/// Reads `task_results` against the attempt: every entry names a task this attempt
/// dispatched, once.
fn read_reports(
    task_results: &Value,
    fan: &FanOutState,
) -> Result<Vec<Reported>, (&'static str, String)> {
    let Some(items) = task_results.as_array() else {
        return Err((
            "invalid_task_results",
            "task_results must be a list of {task_id, status, result}".to_owned(),
        ));
    };
    let mut reports: Vec<Reported> = Vec::with_capacity(items.len());
    for (at, item) in items.iter().enumerate() {
        let Some(task_id) = item.get("task_id").and_then(Value::as_str) else {
            return Err((
                "invalid_task_results",
                format!("task_results[{at}] has no string `task_id`"),
            ));
        };
        let shown: String = task_id.chars().take(64).collect();
        let Some(status) = item.get("status").and_then(Value::as_str) else {
            return Err((
                "invalid_task_results",
                format!("task_results[{at}] ('{shown}') has no string `status`"),
            ));
        };
        match fan.task(task_id) {
            None => {
                return Err((
                    "unknown_task",
                    format!(
                        "task_results[{at}] names task '{shown}', which this step does not have; report the tasks of the envelope"
                    ),
                ));
            }
            Some(task) if task.attempt != fan.attempt => {
                return Err((
                    "unknown_task",
                    format!(
                        "task '{shown}' was accepted in attempt {} and is not run again; report only the tasks of attempt {}",
                        task.attempt, fan.attempt
                    ),
                ));
            }
            Some(task) if task.status != TaskStatus::Pending => {
                return Err((
                    "unknown_task",
                    format!(
                        "task '{shown}' is already {}; report only the tasks of the last envelope",
                        task.status.as_str()
                    ),
                ));
            }
            Some(_) => {}
        }
        if reports.iter().any(|report| report.task_id == task_id) {
            return Err((
                "duplicate_task",
                format!("task_results reports task '{shown}' twice"),
            ));
        }
        reports.push(Reported {
            task_id: task_id.to_owned(),
            status: status.to_owned(),
            result: item.get("result").cloned(),
        });
    }
    Ok(reports)
}

fn contract_violations(run: &Run<'_>, contract: Option<u32>, result: &Value) -> Vec<String> {
    let Some(contract) = contract.and_then(|index| run.plan.contracts.get(index as usize)) else {
        return Vec::new();
    };
    validate::schema_violations(&contract.schema, result)
        .into_iter()
        .map(|violation| format!("contract '{}' violation: {violation}", contract.name))
        .collect()
}

fn conflict_violation(task_id: &str, bounce: &Value) -> String {
    let files = bounce
        .get("files")
        .and_then(Value::as_array)
        .map(|files| {
            files
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .filter(|files| !files.is_empty())
        .unwrap_or_else(|| "its files".to_owned());
    format!("task '{task_id}' merge conflict on {files}")
}

fn gate_violation(task_id: &str, bounce: &Value) -> String {
    let command = bounce
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or("the pre-merge check");
    let exit = match bounce.get("exit_code") {
        Some(Value::Number(code)) => format!("exit {code}"),
        _ => "timed out".to_owned(),
    };
    let mut text =
        format!("task '{task_id}' failed pre-merge gate `{command}` ({exit}) — diff NOT merged");
    if let Some(excerpt) = bounce.get("excerpt").and_then(Value::as_str)
        && !excerpt.trim().is_empty()
    {
        text.push_str(": ");
        text.push_str(excerpt.trim());
    }
    text
}

/// The attempt's tasks, when the step's row holds the current attempt's.
fn current_fan(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
) -> Result<Option<FanOutState>, StoreError> {
    let state = work.step(&run.id, index)?;
    let attempt = state.attempts.saturating_add(1);
    Ok(state.fan_out.filter(|fan| fan.attempt == attempt))
}

fn not_dispatched(run: &Run<'_>, step: &Step) -> Response {
    refusal(
        run,
        step,
        "step_not_dispatched",
        format!(
            "step '{}' has no tasks dispatched yet; call stratum_resume on flow '{}' for its envelope",
            step.id, run.id
        ),
    )
}

/// Counts `require` over the tasks the step expects and builds the aggregate.
struct Tally {
    complete: usize,
    expected: usize,
    unsettled: usize,
    needed: usize,
    conflict: bool,
}

impl Tally {
    /// A parallel step counts its tasks; a pipeline its items.
    fn of(fan: &FanOutState, shape: Shape<'_>, require: Require, conflict: bool) -> Tally {
        let (expected, complete, unsettled) = match shape {
            Shape::Parallel { .. } => (
                fan.tasks.len(),
                fan.tasks.iter().filter(|task| is_accepted(task)).count(),
                fan.tasks
                    .iter()
                    .filter(|task| !task.status.is_terminal())
                    .count(),
            ),
            Shape::Pipeline { stages } => {
                let items = pipeline::items(fan, stages);
                let complete = items.iter().filter(|item| item.complete).count();
                let open = items.iter().filter(|item| item.open).count();
                (items.len(), complete, open)
            }
        };
        Tally {
            complete,
            expected,
            unsettled,
            needed: match require {
                Require::All => expected,
                Require::Any => 1,
                Require::AtLeast(count) => count as usize,
            },
            conflict: conflict
                || fan
                    .tasks
                    .iter()
                    .any(|task| task.merge == MergeState::Conflict),
        }
    }

    fn satisfied(&self) -> bool {
        self.expected > 0 && self.complete >= self.needed
    }

    fn possible(&self) -> bool {
        self.complete + self.unsettled >= self.needed
    }
}

/// Every task settled: the aggregate through the step's checks, then success, or a failed
/// attempt whose retry runs what must run again.
fn evaluate(
    work: &mut Work<'_>,
    run: &Run<'_>,
    header: &FlowHeader,
    index: u32,
    step: &Step,
    consumer_conflict: bool,
) -> Result<Response, StoreError> {
    let Some((fan_out, shape)) = fan_out_of(step) else {
        return Err(StoreError::Corrupt(format!(
            "step {} is not a fan-out step",
            step.id
        )));
    };
    let mut fan = fan_state(work, run, index)?;
    let attempts = work.update_step(&run.id, index, |state| {
        state.attempts += 1;
        state.attempts
    })?;
    let tally = Tally::of(&fan, shape, fan_out.require, consumer_conflict);
    let outcome_ok = tally.satisfied() && !tally.conflict;
    let aggregate = aggregate(&fan, shape, tally.satisfied(), outcome_ok);
    let outputs = inputs::dependency_outputs(work, run, step)?;
    let scope = validate::Scope {
        input: &header.inputs,
        steps: &outputs,
    };
    let verdict = validate::check_result(
        &run.plan,
        step,
        &aggregate,
        &scope,
        &run.ctx.config.limits,
        run.ctx.config.guardrail_backtrack_limit,
    );
    if verdict.passed() && outcome_ok {
        return results::succeed(work, run, index, step, attempts, aggregate);
    }
    let mut violations = Vec::new();
    let failure;
    if verdict.passed() {
        failure = validate::Failure::Ensure;
        if !tally.satisfied() {
            let counted = match shape {
                Shape::Parallel { .. } => "tasks",
                Shape::Pipeline { .. } => "items",
            };
            violations.push(format!(
                "require={} not satisfied: {} of {} {counted} completed, {} needed",
                require_text(fan_out.require),
                tally.complete,
                tally.expected,
                tally.needed
            ));
        }
        if tally.conflict {
            violations.push("merge conflict: merge_status='conflict'".to_owned());
        }
        for task in fan
            .tasks
            .iter()
            .filter(|task| !is_accepted(task) && task.status != TaskStatus::Skipped)
        {
            if task.violations.is_empty() {
                violations.push(format!("task '{}' {}", task.id, task.status.as_str()));
            }
            violations.extend(task.violations.iter().cloned());
        }
        // A conflict the agent reported without naming the tasks it bounced: nothing tells
        // which to run again, so every task not merged does.
        if fan
            .tasks
            .iter()
            .all(|task| is_accepted(task) || task.status == TaskStatus::Skipped)
        {
            rerun_unmerged(&mut fan, &violations);
            work.update_step(&run.id, index, |state| state.fan_out = Some(fan.clone()))?;
        }
    } else {
        failure = verdict.failure.unwrap_or(validate::Failure::Ensure);
        violations = verdict.violations;
        // The aggregate was refused as a whole: every task runs again, except the ones whose
        // changes are already in the flow's working tree.
        rerun_unmerged(&mut fan, &violations);
        work.update_step(&run.id, index, |state| state.fan_out = Some(fan.clone()))?;
    }
    results::failed_attempt(work, run, index, attempts, failure, violations, aggregate)
}

/// Marks every task whose changes are not in the flow's working tree to run again, with
/// `violations` for its prompt.
fn rerun_unmerged(fan: &mut FanOutState, violations: &[String]) {
    for task in fan
        .tasks
        .iter_mut()
        .filter(|task| task.merge != MergeState::Merged)
    {
        task.status = TaskStatus::Failed;
        task.violations = violations.to_vec();
    }
}

pub(super) fn require_text(require: Require) -> String {
    match require {
        Require::All => "'all'".to_owned(),
        Require::Any => "'any'".to_owned(),
        Require::AtLeast(count) => count.to_string(),
    }
}

/// The step's output: `{tasks, merge_status, completed, failed, outcome}`, each task as
/// `{task_id, status, result}`; a pipeline's `{items, require_satisfied, merge_status, tasks,
/// outcome}`, each item as `{item, status, result, stages}`.
fn aggregate(
    fan: &FanOutState,
    shape: Shape<'_>,
    require_satisfied: bool,
    outcome_ok: bool,
) -> Value {
    let entry = |task: &TaskState| {
        let status = if task.merge == MergeState::Conflict {
            "conflict"
        } else {
            task.status.as_str()
        };
        json!({
            "task_id": task.id,
            "status": status,
            "result": task.result.clone().unwrap_or(Value::Null),
        })
    };
    let merge_status = fan.merge_status.clone().unwrap_or_else(|| {
        if fan
            .tasks
            .iter()
            .any(|task| task.merge == MergeState::Conflict)
        {
            json!("conflict")
        } else {
            json!("clean")
        }
    });
    if let Shape::Pipeline { stages } = shape {
        let items = pipeline::items(fan, stages);
        return json!({
            "items": items.into_iter().map(|item| item.value).collect::<Vec<_>>(),
            "require_satisfied": require_satisfied,
            "merge_status": merge_status,
            "tasks": fan.tasks.iter().map(entry).collect::<Vec<_>>(),
            "outcome": if outcome_ok { "complete" } else { "failed" },
        });
    }
    json!({
        "tasks": fan.tasks.iter().map(entry).collect::<Vec<_>>(),
        "merge_status": merge_status,
        "completed": fan.tasks.iter().filter(|task| is_accepted(task)).map(entry).collect::<Vec<_>>(),
        "failed": fan.tasks.iter().filter(|task| !is_accepted(task)).map(entry).collect::<Vec<_>>(),
        "outcome": if outcome_ok { "complete" } else { "failed" },
    })
}

/// `stratum_parallel_start`: the server takes the attempt's tasks.
pub(crate) fn parallel_start(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
    base: Option<&str>,
) -> Result<Response, StoreError> {
    let (_, index, step) = match fan_out_step(work, run, step_id)? {
        Ok(current) => current,
        Err(refused) => return Ok(refused),
    };
    if current_fan(work, run, index)?.is_none() {
        // Dispatched by a runtime that had not built the tasks, or never walked to: build now.
        match dispatch(work, run, index, Note::default())? {
            AfterFailure::Answer(Response::Parallel(_)) => {}
            AfterFailure::Answer(other) => return Ok(other),
            AfterFailure::Walk(note) => return dispatch::advance(work, run, note),
        }
    }
    let mut fan = fan_state(work, run, index)?;
    match fan.mode {
        Some(FanOutMode::Consumer) => {
            return Ok(refusal(
                run,
                step,
                "consumer_dispatched",
                format!(
                    "the agent reported the tasks of step '{}' attempt {}; it cannot be started on the server",
                    step.id, fan.attempt
                ),
            ));
        }
        Some(FanOutMode::Server) => {}
        None => {
            fan.mode = Some(FanOutMode::Server);
            fan.base = base.map(str::to_owned);
            work.update_step(&run.id, index, |state| state.fan_out = Some(fan.clone()))?;
        }
    }
    Ok(report(run, step, &fan, "started"))
}

/// One event of one task the server runs.
pub(crate) fn task_update(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
    attempt: u32,
    task_id: &str,
    event: &TaskReport,
) -> Result<Response, StoreError> {
    let (_, index, step, mut fan) = match dispatched_step(work, run, step_id)? {
        Ok(found) => found,
        Err(refused) => return Ok(refused),
    };
    if fan.mode != Some(FanOutMode::Server) {
        return Ok(refusal(
            run,
            step,
            "not_server_dispatched",
            format!(
                "the tasks of step '{}' are not run by the server; start them with stratum_parallel_start",
                step.id
            ),
        ));
    }
    if attempt != fan.attempt {
        return Ok(refusal(
            run,
            step,
            "stale_attempt",
            format!(
                "attempt {attempt} of step '{}' is over (the step is at attempt {}); its task reports are not recorded",
                step.id, fan.attempt
            ),
        ));
    }
    let now = run.ctx.now_ms;
    // What the step's other tasks hold in diffs, against which a new one is capped.
    let recorded: u64 = fan
        .tasks
        .iter()
        .filter(|task| !(task.id == task_id && task.attempt == attempt))
        .map(diff_size)
        .fold(0, u64::saturating_add);
    let diff_key = DiffKey {
        step: step.id.clone(),
        attempt,
        task: task_id.to_owned(),
    };
    let Some(task) = fan
        .tasks
        .iter_mut()
        .find(|task| task.id == task_id && task.attempt == attempt)
    else {
        return Ok(refusal(
            run,
            step,
            "unknown_task",
            format!(
                "attempt {attempt} of step '{}' did not dispatch task '{}'",
                step.id,
                task_id.chars().take(64).collect::<String>()
            ),
        ));
    };
    let settled = task.status.is_terminal();
    let refused = |what: &str| {
        refusal(
            run,
            step,
            "task_already_settled",
            format!(
                "task '{}' is already {}; {what}",
                task_id.chars().take(64).collect::<String>(),
                task_state_name(task.status, task.merge)
            ),
        )
    };
    let mut usage = None;
    match event {
        TaskReport::Running { run_id } => {
            if settled {
                return Ok(refused("it cannot run again in this attempt"));
            }
            task.status = TaskStatus::Running;
            task.started_ms.get_or_insert(now);
            if run_id.is_some() {
                task.run_id = run_id.clone();
            }
        }
        TaskReport::Finished {
            result,
            diff,
            usage: used,
        } => {
            if settled {
                return Ok(refused("its result was recorded before"));
            }
            let mut problems = task_violations(run, step, task, result);
            match keep_diff(work, run, diff_key, diff.as_ref(), recorded)? {
                Ok(reference) => task.diff_ref = reference,
                Err(violation) => problems.push(violation),
            }
            task.result = Some(result.clone());
            task.diff = None;
            task.finished_ms = Some(now);
            task.violations = problems;
            task.status = if task.violations.is_empty() {
                TaskStatus::Complete
            } else {
                TaskStatus::Failed
            };
            after_completion(run, step, task);
            usage = used.clone();
        }
        TaskReport::Failed {
            violations,
            bounce,
            diff,
            usage: used,
        } => {
            if settled {
                return Ok(refused("its end was recorded before"));
            }
            task.status = TaskStatus::Failed;
            task.violations = violations.clone();
            if let Some(bounce) = bounce {
                task.violations.push(gate_violation(task_id, bounce));
            }
            task.bounce = bounce.clone();
            match keep_diff(work, run, diff_key, diff.as_ref(), recorded)? {
                Ok(reference) => task.diff_ref = reference,
                Err(violation) => task.violations.push(violation),
            }
            task.diff = None;
            task.finished_ms = Some(now);
            usage = used.clone();
        }
        TaskReport::Cancelled { reason } => {
            if settled {
                return Ok(refused("it cannot be cancelled"));
            }
            task.status = TaskStatus::Cancelled;
            task.violations = vec![format!("task '{task_id}' cancelled: {reason}")];
            task.finished_ms = Some(now);
        }
        TaskReport::Merging | TaskReport::Merged | TaskReport::Conflict { .. } => {
            if task.status != TaskStatus::Complete || task.merge == MergeState::Merged {
                return Ok(refused(
                    "only a complete, unmerged task's changes are merged",
                ));
            }
            match event {
                TaskReport::Merging => task.merge = MergeState::Merging,
                TaskReport::Merged => task.merge = MergeState::Merged,
                TaskReport::Conflict { files, message } => {
                    let bounce = json!({
                        "task_id": task_id,
                        "reason": "merge_conflict",
                        "files": files,
                        "message": message,
                    });
                    task.merge = MergeState::Conflict;
                    task.violations = vec![conflict_violation(task_id, &bounce)];
                    task.bounce = Some(bounce);
                }
                _ => {}
            }
        }
    }
    // A pipeline's next stages become ready as tasks settle.
    expand(run, step, &mut fan, Vec::new());
    work.update_step(&run.id, index, |state| state.fan_out = Some(fan.clone()))?;
    if let Some(usage) = usage {
        budget::debit(work, run, &usage)?;
    }
    Ok(report(run, step, &fan, "task_recorded"))
}

/// `stratum_parallel_advance`: every task the server ran is settled (and merged): evaluate.
pub(crate) fn parallel_advance(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
    merge_status: Option<&Value>,
) -> Result<Response, StoreError> {
    let (header, index, step, mut fan) = match dispatched_step(work, run, step_id)? {
        Ok(found) => found,
        Err(refused) => return Ok(refused),
    };
    if fan.mode != Some(FanOutMode::Server) {
        return Ok(refusal(
            run,
            step,
            "not_server_dispatched",
            format!(
                "the tasks of step '{}' are reported with stratum_parallel_done, not advanced",
                step.id
            ),
        ));
    }
    let waiting: Vec<&str> = fan
        .tasks
        .iter()
        .filter(|task| !task.status.is_terminal() || task.merge == MergeState::Merging)
        .map(|task| task.id.as_str())
        .collect();
    if !waiting.is_empty() {
        return Ok(refusal(
            run,
            step,
            "tasks_not_terminal",
            format!(
                "tasks of step '{}' are still running or merging: {}; poll with stratum_parallel_poll until can_advance",
                step.id,
                waiting.join(", ")
            ),
        ));
    }
    let mut conflict = false;
    if let Some(value) = merge_status {
        let merge = match read_merge_status(value) {
            Ok(merge) => merge,
            Err(message) => return Ok(refusal(run, step, "invalid_merge_status", message)),
        };
        for (task_id, bounce) in &merge.bounces {
            let Some(task) = fan
                .tasks
                .iter_mut()
                .find(|task| &task.id == task_id && task.attempt == fan.attempt)
            else {
                return Ok(refusal(
                    run,
                    step,
                    "unknown_task",
                    format!(
                        "merge_status bounces task '{}', which this attempt did not run",
                        task_id.chars().take(64).collect::<String>()
                    ),
                ));
            };
            task.bounce = Some(bounce.clone());
            if bounce.get("reason").and_then(Value::as_str) == Some("merge_conflict") {
                task.merge = MergeState::Conflict;
                task.violations = vec![conflict_violation(task_id, bounce)];
            } else {
                task.status = TaskStatus::Failed;
                task.violations = vec![gate_violation(task_id, bounce)];
            }
        }
        conflict = merge.conflict;
        fan.merge_status = Some(merge.value);
        work.update_step(&run.id, index, |state| state.fan_out = Some(fan))?;
    }
    evaluate(work, run, &header, index, step, conflict)
}

/// `stratum_parallel_poll`: the tasks of fan-out step `step_id` as stored.
pub(crate) fn poll(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
) -> Result<Response, StoreError> {
    let Some(position) = run.steps().iter().position(|step| step.id == step_id) else {
        let mut error = ErrorResponse::new(
            "unknown_step",
            format!(
                "flow '{}' has no step '{}'",
                run.id,
                step_id.chars().take(64).collect::<String>()
            ),
        )
        .flow(run.id.as_str());
        error.step_id = Some(step_id.to_owned());
        return Ok(error.into_response());
    };
    let index = u32::try_from(position).unwrap_or(u32::MAX);
    let step = run.step(index)?;
    if fan_out_of(step).is_none() {
        return Ok(fan_out_step_only(run, step));
    }
    match work.step(&run.id, index)?.fan_out {
        Some(fan) => {
            let mut answer = report(run, step, &fan, "parallel_status");
            if let Response::FanOut(view) = &mut answer {
                with_diffs(work, run, step, &fan, view)?;
            }
            Ok(answer)
        }
        None => Ok(not_dispatched(run, step)),
    }
}

/// Fills in each task's diff from its row: only a poll carries the texts (the answers to the
/// server's task events do not, or each event would read every diff).
fn with_diffs(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step: &Step,
    fan: &FanOutState,
    view: &mut FanOutReport,
) -> Result<(), StoreError> {
    for (task, shown) in fan.tasks.iter().zip(view.tasks.iter_mut()) {
        let Some(reference) = &task.diff_ref else {
            continue;
        };
        if reference.bytes == 0 {
            shown.diff = Some(String::new());
            continue;
        }
        let key = DiffKey {
            step: step.id.clone(),
            attempt: task.attempt,
            task: task.id.clone(),
        };
        // A row that no longer holds this diff (the step was entered again since) shows none;
        // its length is checked, not its hash: a poll may come often, and shows, not merges.
        shown.diff = work
            .task_diff(&run.id, &key)?
            .filter(|text| u64::try_from(text.len()).is_ok_and(|length| length == reference.bytes));
    }
    Ok(())
}

fn fan_out_step_only(run: &Run<'_>, step: &Step) -> Response {
    refusal(
        run,
        step,
        "wrong_step_type",
        format!(
            "step '{}' is a {} step, not a parallel_dispatch step",
            step.id,
            dispatch::record_identity(step).2
        ),
    )
}

fn task_state_name(status: TaskStatus, merge: MergeState) -> &'static str {
    match merge {
        MergeState::Merged => "merged",
        MergeState::Conflict => "in conflict",
        _ => status.as_str(),
    }
}

fn report(run: &Run<'_>, step: &Step, fan: &FanOutState, status: &str) -> Response {
    let Some((fan_out, shape)) = fan_out_of(step) else {
        return fan_out_step_only(run, step);
    };
    let tally = Tally::of(fan, shape, fan_out.require, false);
    let mut summary = std::collections::BTreeMap::new();
    for name in [
        "pending",
        "running",
        "complete",
        "failed",
        "cancelled",
        "skipped",
    ] {
        summary.insert(name.to_owned(), 0);
    }
    for task in &fan.tasks {
        *summary.entry(task.status.as_str().to_owned()).or_insert(0) += 1;
    }
    let tasks = fan
        .tasks
        .iter()
        .map(|task| TaskView {
            task_id: task.id.clone(),
            state: task.status.as_str(),
            item: task.slot.map(|slot| slot.item),
            stage: task.slot.map(|slot| slot.stage),
            lane: task.slot.and_then(|slot| slot.lane),
            attempt: task.attempt,
            prompt: task.prompt.clone(),
            depends_on: task.depends_on.clone(),
            agent: task.agent.clone(),
            task_timeout: task.timeout_s,
            element: task.element.clone(),
            result: task.result.clone(),
            violations: task.violations.clone(),
            gate_bounce: task.bounce.clone(),
            diff: task.diff.clone(),
            diff_bytes: (task.diff_ref.is_some() || task.diff.is_some()).then(|| diff_size(task)),
            diff_sha256: task.diff_ref.as_ref().map(|diff| diff.sha256.clone()),
            merge: match task.merge {
                MergeState::Unmerged => "unmerged",
                MergeState::Merging => "merging",
                MergeState::Merged => "merged",
                MergeState::Conflict => "conflict",
            },
            run_id: task.run_id.clone(),
            started_ms: task.started_ms,
            finished_ms: task.finished_ms,
        })
        .collect();
    Response::FanOut(Box::new(FanOutReport {
        status: status.to_owned(),
        flow_id: run.id.to_string(),
        step_id: step.id.clone(),
        attempt: fan.attempt,
        dispatch: fan.mode.map(|mode| match mode {
            FanOutMode::Consumer => "consumer",
            FanOutMode::Server => "server",
        }),
        base: fan.base.clone(),
        pre_merge_verify: fan.verify.clone(),
        task_count: fan.tasks.len(),
        summary,
        tasks,
        require_satisfied: tally.satisfied(),
        require_possible: tally.possible(),
        last_attempt: fan.attempt >= step.retries,
        can_advance: tally.unsettled == 0
            && fan
                .tasks
                .iter()
                .all(|task| task.merge != MergeState::Merging),
        running: None,
        outcome: None,
    }))
}
