//! Iteration loops on a step with `max_iterations`: start, report, abort.
//!
//! A report is scored (`score_expr`), its items accumulated (`accumulate`, deduplicated by
//! `accumulate_key`), and the `exit_criterion` evaluated with `result`, `iteration`,
//! `best_score`, `prior_scores`, `accumulator`, `accumulated_count`, `new_count` and
//! `dry_streak` bound. The outcome is, in this order: `exit_success` (the criterion held),
//! `exit_stagnation` (loops that do not accumulate: the last three results identical, or with
//! a score and no criterion, three reports without a better score), `exit_max`, `continue`.
//! On `step_done` the best result (by score) stands in for the submitted one, and only a step
//! that accumulates gets `accumulated` / `accumulated_count` merged into its output.

use serde_json::{Value, json};
use stratum_compiler::plan::{Action, Iteration};
use stratum_grammar::Bindings;

use super::{Run, already_finished, running_step, validate, wrong_step};
use crate::response::{
    ErrorResponse, IterationAborted, IterationReport, IterationStarted, Response,
};
use crate::state::{Accumulator, Best, EventBody, FINGERPRINTS_KEPT, IterationState};
use crate::store::StoreError;

use super::work::Work;

/// Reports without a better score after which a scored loop with no criterion stagnates.
pub const STAGNATION_WINDOW: u32 = 3;

fn execution_error(run: &Run<'_>, message: String) -> Response {
    ErrorResponse::new("execution_error", message)
        .flow(run.id.as_str())
        .into_response()
}

/// The step an iteration command may act on: current, not a gate, with `max_iterations`.
fn iterated_step<'r>(
    work: &mut Work<'_>,
    run: &'r Run<'_>,
    step_id: &str,
) -> Result<Result<(u32, &'r Iteration, u32), Response>, StoreError> {
    let (_, index, step) = match running_step(work, run)? {
        Ok(current) => current,
        Err(finished) => return Ok(Err(finished)),
    };
    if step.id != step_id {
        return Ok(Err(wrong_step(run, &step.id, step_id)));
    }
    if let Action::Gate { .. } = step.action {
        return Ok(Err(execution_error(
            run,
            format!("Step '{step_id}' is a gate step; gates cannot iterate"),
        )));
    }
    let Some((iteration, max)) = step
        .iteration
        .as_ref()
        .and_then(|iteration| iteration.max_iterations.map(|max| (iteration, max)))
    else {
        return Ok(Err(execution_error(
            run,
            format!("Step '{step_id}' does not have max_iterations defined"),
        )));
    };
    Ok(Ok((index, iteration, max)))
}

pub(crate) fn start(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
) -> Result<Response, StoreError> {
    let (index, iteration, max) = match iterated_step(work, run, step_id)? {
        Ok(found) => found,
        Err(response) => return Ok(response),
    };
    let state = work.step(&run.id, index)?.iteration.unwrap_or_default();
    if state.active {
        return Ok(execution_error(
            run,
            format!("Iteration loop already active on step '{step_id}'"),
        ));
    }
    if let Some(outcome) = &state.outcome {
        return Ok(execution_error(
            run,
            format!(
                "Step '{step_id}' already has a pending iteration outcome ('{outcome}') — call stratum_step_done first"
            ),
        ));
    }
    work.update_step(&run.id, index, |state| {
        state.iteration = Some(IterationState {
            active: true,
            accumulator: iteration
                .accumulate
                .as_ref()
                .map(|_| Accumulator::default()),
            ..IterationState::default()
        });
    })?;
    work.update(&run.id, |header| header.active_iteration = Some(index))?;
    Ok(Response::IterationStarted(IterationStarted {
        status: "iteration_started",
        flow_id: run.id.to_string(),
        step_id: step_id.to_owned(),
        max_iterations: max,
        exit_criterion: iteration
            .exit_criterion
            .as_ref()
            .map(|expression| expression.program.source().to_owned()),
        iteration: 0,
    }))
}

/// The step with the loop in progress, or the error for a report or abort without one.
fn active_loop(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
) -> Result<Result<(), Response>, StoreError> {
    let header = work.get(&run.id)?;
    if header.status.is_finished() {
        return Ok(Err(already_finished(&header)));
    }
    let Some(active) = header.active_iteration else {
        return Ok(Err(execution_error(
            run,
            "No active iteration loop".to_owned(),
        )));
    };
    let active_id = run.step(active)?.id.clone();
    if active_id != step_id {
        return Ok(Err(execution_error(
            run,
            format!("Active iteration is on step '{active_id}', got report for '{step_id}'"),
        )));
    }
    Ok(Ok(()))
}

pub(crate) fn report(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
    result: &Value,
) -> Result<Response, StoreError> {
    if let Err(response) = active_loop(work, run, step_id)? {
        return Ok(response);
    }
    let (index, iteration, max) = match iterated_step(work, run, step_id)? {
        Ok(found) => found,
        Err(response) => return Ok(response),
    };
    let limits = &run.ctx.config.limits;
    let mut state = work.step(&run.id, index)?.iteration.unwrap_or_default();
    state.count += 1;
    let count = state.count;

    // Score.
    let mut score_error = None;
    let mut score = None;
    let prior_scores: Vec<f64> = state.scores.clone();
    if let Some(expression) = &iteration.score {
        let bindings = Bindings::new().name("result", result);
        match expression.program.evaluate(&bindings, limits) {
            Ok(value) => match value.as_f64() {
                Some(number) if !value.is_boolean() => score = Some(number),
                _ => {
                    score_error = Some(format!(
                        "score_expr '{}' gave {value}, not a number",
                        expression.program.source()
                    ))
                }
            },
            Err(error) => {
                score_error = Some(format!(
                    "score_expr '{}' failed: {}",
                    expression.program.source(),
                    error.message
                ))
            }
        }
        if let Some(score) = score {
            state.scores.push(score);
            let improved = state.best.as_ref().is_none_or(|best| score > best.score);
            if improved {
                state.best = Some(Best {
                    score,
                    iteration: count,
                    result: result.clone(),
                });
                state.since_best = 0;
            } else {
                state.since_best += 1;
            }
        } else {
            state.since_best += 1;
        }
    }

    // Accumulate.
    let mut accumulate_error = None;
    let mut new_count = None;
    if let (Some(expression), Some(accumulator)) =
        (&iteration.accumulate, state.accumulator.as_mut())
    {
        match accumulate(
            expression,
            iteration.accumulate_key.as_ref(),
            result,
            accumulator,
            limits,
        ) {
            Ok(added) => {
                accumulator.dry_streak = if added == 0 {
                    accumulator.dry_streak + 1
                } else {
                    0
                };
                new_count = Some(added);
            }
            // A broken extractor freezes the dry streak: it cannot fake dryness.
            Err(message) => accumulate_error = Some(message),
        }
    }

    // Stagnation input.
    let fingerprint = stratum_compiler::plan::sha256(validate::canonical_json(result).as_bytes());
    state.fingerprints.push(fingerprint.clone());
    if state.fingerprints.len() > FINGERPRINTS_KEPT {
        state.fingerprints.remove(0);
    }

    // Exit criterion.
    let mut exit_error = None;
    let mut met = false;
    if let Some(expression) = &iteration.exit_criterion {
        let iteration_value = json!(count);
        let best_score = json!(state.best.as_ref().map(|best| best.score));
        let prior = json!(prior_scores);
        let (items, accumulated_count, new_value, dry) = match &state.accumulator {
            Some(accumulator) => (
                Value::Array(accumulator.items.clone()),
                json!(accumulator.items.len()),
                json!(new_count),
                json!(accumulator.dry_streak),
            ),
            None => (Value::Array(Vec::new()), json!(0), Value::Null, json!(0)),
        };
        let bindings = Bindings::new()
            .name("result", result)
            .name("iteration", &iteration_value)
            .name("best_score", &best_score)
            .name("prior_scores", &prior)
            .name("accumulator", &items)
            .name("accumulated_count", &accumulated_count)
            .name("new_count", &new_value)
            .name("dry_streak", &dry);
        match expression.program.evaluate_bool(&bindings, limits) {
            Ok(held) => met = held,
            Err(error) => {
                exit_error = Some(format!(
                    "exit_criterion '{}' failed: {}",
                    expression.program.source(),
                    error.message
                ));
            }
        }
    }

    let stagnated = iteration.accumulate.is_none()
        && if iteration.score.is_some() {
            iteration.exit_criterion.is_none() && state.since_best >= STAGNATION_WINDOW
        } else {
            state.fingerprints.len() >= FINGERPRINTS_KEPT
                && state.fingerprints.iter().all(|seen| *seen == fingerprint)
        };
    let outcome = if met {
        "exit_success"
    } else if stagnated {
        "exit_stagnation"
    } else if count >= max {
        "exit_max"
    } else {
        "continue"
    };
    let exits = outcome != "continue";
    if exits {
        state.active = false;
        state.outcome = Some(outcome.to_owned());
    }
    let header = work.get(&run.id)?;
    let accumulated_count = state.accumulator.as_ref().map(|a| a.items.len() as u64);
    let dry_streak = state.accumulator.as_ref().map(|a| a.dry_streak);
    let mut log = json!({
        "iteration": count,
        "round": header.round,
        "result_fingerprint": fingerprint,
        "exit_criterion_met": met,
        "outcome": outcome,
        "timestamp_ms": run.ctx.now_ms,
    });
    if let Some(object) = log.as_object_mut() {
        if iteration.score.is_some() {
            object.insert("score".to_owned(), json!(score));
        }
        if state.accumulator.is_some() {
            object.insert("new_count".to_owned(), json!(new_count));
            object.insert("dry_streak".to_owned(), json!(dry_streak));
            object.insert("accumulated_count".to_owned(), json!(accumulated_count));
        }
    }
    work.push_event(
        &run.id,
        EventBody::Iteration {
            step_id: step_id.to_owned(),
            report: log,
        },
    )?;
    let scored = iteration.score.is_some();
    let response = IterationReport {
        status: if exits {
            "iteration_exit"
        } else {
            "iteration_continue"
        }
        .to_owned(),
        flow_id: run.id.to_string(),
        step_id: step_id.to_owned(),
        iteration: count,
        max_iterations: max,
        exit_criterion_met: met,
        outcome: outcome.to_owned(),
        exit_criterion_error: exit_error,
        score_error,
        accumulate_error,
        new_count: state
            .accumulator
            .as_ref()
            .map(|_| new_count.map(|n| n as u64)),
        dry_streak,
        score: scored.then_some(score),
        final_result: exits.then(|| match (&state.best, scored) {
            (Some(best), true) => best.result.clone(),
            _ => result.clone(),
        }),
        best_score: (exits && scored).then(|| state.best.as_ref().map(|best| best.score)),
        best_iteration: (exits && scored).then(|| state.best.as_ref().map(|best| best.iteration)),
        accumulated: exits
            .then(|| state.accumulator.as_ref().map(|a| a.items.clone()))
            .flatten(),
        accumulated_count: exits.then_some(accumulated_count).flatten(),
    };
    work.update_step(&run.id, index, |step| step.iteration = Some(state))?;
    if exits {
        work.update(&run.id, |header| header.active_iteration = None)?;
    }
    Ok(Response::IterationReport(Box::new(response)))
}

/// Adds the items of one report; how many were new.
fn accumulate(
    extract: &stratum_compiler::plan::Expression,
    key: Option<&stratum_compiler::plan::Expression>,
    result: &Value,
    accumulator: &mut Accumulator,
    limits: &stratum_grammar::Limits,
) -> Result<usize, String> {
    let items = extract
        .program
        .evaluate(&Bindings::new().name("result", result), limits)
        .map_err(|error| {
            format!(
                "Expression '{}' raised: {}",
                extract.program.source(),
                error.message
            )
        })?;
    let Value::Array(items) = items else {
        return Err(format!(
            "Expression '{}' gave {}, not a list",
            extract.program.source(),
            items
        ));
    };
    let mut keyed = Vec::with_capacity(items.len());
    for item in items {
        let item_key = match key {
            Some(key) => {
                let value = key
                    .program
                    .evaluate(&Bindings::new().name("item", &item), limits)
                    .map_err(|error| {
                        format!(
                            "Expression '{}' raised: {}",
                            key.program.source(),
                            error.message
                        )
                    })?;
                validate::canonical_json(&value)
            }
            None => validate::canonical_json(&item),
        };
        keyed.push((item_key, item));
    }
    // A set of the keys seen, so that a report costs what it and the accumulator hold, not
    // their product.
    let mut seen: std::collections::HashSet<String> = accumulator.keys.iter().cloned().collect();
    let mut added = 0;
    for (item_key, item) in keyed {
        if seen.insert(item_key.clone()) {
            accumulator.keys.push(item_key);
            accumulator.items.push(item);
            added += 1;
        }
    }
    Ok(added)
}

pub(crate) fn abort(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
    reason: &str,
) -> Result<Response, StoreError> {
    if let Err(response) = active_loop(work, run, step_id)? {
        return Ok(response);
    }
    let (index, iteration, _) = match iterated_step(work, run, step_id)? {
        Ok(found) => found,
        Err(response) => return Ok(response),
    };
    let mut state = work.step(&run.id, index)?.iteration.unwrap_or_default();
    state.active = false;
    state.outcome = Some("exit_abort".to_owned());
    let header = work.get(&run.id)?;
    work.push_event(
        &run.id,
        EventBody::Iteration {
            step_id: step_id.to_owned(),
            report: json!({
                "iteration": state.count,
                "round": header.round,
                // Aborting is not meeting the criterion: `false`, as the reference records it.
                "exit_criterion_met": false,
                "outcome": "exit_abort",
                "reason": reason,
                "timestamp_ms": run.ctx.now_ms,
            }),
        },
    )?;
    let scored = iteration.score.is_some();
    let response = IterationAborted {
        status: "iteration_aborted",
        flow_id: run.id.to_string(),
        step_id: step_id.to_owned(),
        iteration: state.count,
        reason: reason.to_owned(),
        best_result: scored.then(|| state.best.as_ref().map(|best| best.result.clone())),
        best_score: scored.then(|| state.best.as_ref().map(|best| best.score)),
    };
    work.update_step(&run.id, index, |step| step.iteration = Some(state))?;
    work.update(&run.id, |header| header.active_iteration = None)?;
    Ok(Response::IterationAborted(Box::new(response)))
}

/// Before a `step_done` result is checked: closes a loop still open on the step (its log
/// records `exit_step_done`) and returns the best result (by score) to check instead of the
/// submitted one.
pub(crate) fn close_for_result(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
) -> Result<Option<Value>, StoreError> {
    let header = work.get(&run.id)?;
    if header.active_iteration == Some(index) {
        work.update(&run.id, |header| header.active_iteration = None)?;
    }
    let state = work.step(&run.id, index)?.iteration;
    let Some(mut state) = state else {
        return Ok(None);
    };
    if state.active {
        state.active = false;
        state
            .outcome
            .get_or_insert_with(|| "exit_step_done".to_owned());
        let best = state.best.as_ref().map(|best| best.result.clone());
        // The audit tells how every loop ended, this one included.
        let step_id = run.step(index)?.id.clone();
        work.push_event(
            &run.id,
            EventBody::Iteration {
                step_id,
                report: json!({
                    "iteration": state.count,
                    "round": header.round,
                    "outcome": "exit_step_done",
                    "timestamp_ms": run.ctx.now_ms,
                }),
            },
        )?;
        work.update_step(&run.id, index, |step| step.iteration = Some(state))?;
        return Ok(best);
    }
    Ok(state.best.map(|best| best.result))
}

/// After a result passed: a step that accumulates gets the deduplicated items merged in.
pub(crate) fn merge_accumulated(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    result: &Value,
) -> Result<Option<Value>, StoreError> {
    let step = run.step(index)?;
    if step
        .iteration
        .as_ref()
        .and_then(|i| i.accumulate.as_ref())
        .is_none()
    {
        return Ok(None);
    }
    let Some(accumulator) = work
        .step(&run.id, index)?
        .iteration
        .and_then(|state| state.accumulator)
    else {
        return Ok(None);
    };
    let Value::Object(mut object) = result.clone() else {
        return Ok(None);
    };
    object.insert(
        "accumulated_count".to_owned(),
        json!(accumulator.items.len()),
    );
    object.insert("accumulated".to_owned(), Value::Array(accumulator.items));
    Ok(Some(Value::Object(object)))
}

/// A failed or skipped step forgets its loop, so that a new one can start.
pub(crate) fn clear_step(work: &mut Work<'_>, run: &Run<'_>, index: u32) -> Result<(), StoreError> {
    if work.step(&run.id, index)?.iteration.is_some() {
        work.update_step(&run.id, index, |state| state.iteration = None)?;
    }
    let header = work.get(&run.id)?;
    if header.active_iteration == Some(index) {
        work.update(&run.id, |header| header.active_iteration = None)?;
    }
    Ok(())
}
