//! Judge steps: the verdict binds. A judge step completes only from the verdict the server
//! recorded (`stratum_judge` staged the artifacts, ran the deterministic predicates in the VM
//! and the agent tier, and sends it here); `stratum_step_done` on it is refused, so a client
//! cannot report `met` over a verdict that said otherwise (the reference's bug).
//!
//! `met`: the verdict is the step's result and goes through the step's checks (`ensure:
//! ["result.met == True"]`, certificates); `not_met`: a failed attempt whose violations are the
//! findings (retries, `on_fail`); `ambiguous`: the step waits for a person, who decides with
//! `stratum_gate_resolve` as at a gate (approve: met; revise: a failed attempt with their
//! rationale; kill: the flow is killed).

use serde_json::{Value, json};
use stratum_compiler::plan::{Action, Target};

use super::dispatch::{self, Move};
use super::gates::Decision;
use super::results;
use super::{Run, running_step, validate, wrong_step};
use crate::response::{ErrorResponse, Response};
use crate::store::StoreError;

use super::work::Work;

/// How a verdict came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Met,
    NotMet,
    Ambiguous,
}

/// A verdict's outcome: met only when every predicate is; not met when one is not; else
/// ambiguous.
fn outcome_of(verdict: &Value) -> Option<Outcome> {
    let predicates = verdict.get("predicates")?.as_array()?;
    let verdicts: Vec<&str> = predicates
        .iter()
        .map(|predicate| {
            predicate
                .get("verdict")
                .and_then(Value::as_str)
                .unwrap_or("")
        })
        .collect();
    if verdicts.contains(&"not_met") {
        Some(Outcome::NotMet)
    } else if !verdicts.is_empty() && verdicts.iter().all(|verdict| *verdict == "met") {
        Some(Outcome::Met)
    } else {
        Some(Outcome::Ambiguous)
    }
}

/// The findings of a verdict that is not met, as violations.
fn findings(verdict: &Value) -> Vec<String> {
    let mut violations: Vec<String> = verdict
        .get("predicates")
        .and_then(Value::as_array)
        .map(|predicates| {
            predicates
                .iter()
                .filter(|predicate| predicate.get("verdict").and_then(Value::as_str) != Some("met"))
                .map(|predicate| {
                    let text = |key: &str| {
                        predicate
                            .get(key)
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned()
                    };
                    format!(
                        "judge: predicate '{}' {} ({}): {}",
                        text("id"),
                        text("verdict").replace('_', " "),
                        text("statement"),
                        text("reason")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if violations.is_empty() {
        violations.push("judge: the verdict is not met".to_owned());
    }
    violations
}

/// [`Command::JudgeVerdict`](crate::Command::JudgeVerdict).
pub(crate) fn verdict(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
    verdict: &Value,
) -> Result<Response, StoreError> {
    let (header, index, step) = match running_step(work, run)? {
        Ok(current) => current,
        Err(finished) => return Ok(finished),
    };
    if step.id != step_id {
        return Ok(wrong_step(run, &step.id, step_id));
    }
    if !matches!(step.action, Action::Judge { .. }) {
        let mut error = ErrorResponse::new(
            "not_a_judge_step",
            format!("Step '{}' is not a judge step", step.id),
        )
        .flow(run.id.as_str());
        error.step_id = Some(step.id.clone());
        return Ok(error.into_response());
    }
    let Some(outcome) = outcome_of(verdict) else {
        let mut error = ErrorResponse::new(
            "invalid_verdict",
            "a verdict needs `predicates`, each with a `verdict` of met, not_met or ambiguous",
        )
        .flow(run.id.as_str());
        error.step_id = Some(step.id.clone());
        return Ok(error.into_response());
    };
    match outcome {
        Outcome::Ambiguous => {
            work.update_step(&run.id, index, |state| {
                state.judge_pending = Some(verdict.clone());
            })?;
            dispatch::advance(work, run, dispatch::Note::default())
        }
        Outcome::NotMet => {
            let attempts = count_attempt(work, run, index)?;
            results::failed_attempt(
                work,
                run,
                index,
                attempts,
                validate::Failure::Ensure,
                findings(verdict),
                verdict.clone(),
            )
        }
        Outcome::Met => complete(work, run, &header, index, step, verdict.clone()),
    }
}

/// A met verdict (the server's, or a person's) through the step's own checks: the step
/// succeeds with it as its result, or the attempt fails with what the checks found.
fn complete(
    work: &mut Work<'_>,
    run: &Run<'_>,
    header: &crate::state::FlowHeader,
    index: u32,
    step: &stratum_compiler::plan::Step,
    verdict: Value,
) -> Result<Response, StoreError> {
    let attempts = count_attempt(work, run, index)?;
    let checked = validate::check_step_result(work, run, header, step, &verdict)?;
    if !checked.passed() {
        return results::failed_attempt(
            work,
            run,
            index,
            attempts,
            checked.failure.unwrap_or(validate::Failure::Ensure),
            checked.violations,
            verdict,
        );
    }
    results::succeed(work, run, index, step, attempts, verdict)
}

fn count_attempt(work: &mut Work<'_>, run: &Run<'_>, index: u32) -> Result<u32, StoreError> {
    work.update_step(&run.id, index, |state| {
        state.judge_pending = None;
        state.attempts += 1;
        state.attempts
    })
}

/// A person's decision on an ambiguous verdict (`stratum_gate_resolve` on the judge step).
/// The gate record is written by the caller.
pub(crate) fn decide(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    decision: &Decision<'_>,
) -> Result<Response, StoreError> {
    let step = run.step(index)?;
    let pending = work
        .step(&run.id, index)?
        .judge_pending
        .unwrap_or(Value::Null);
    let header = work.get(&run.id)?;
    match decision.outcome {
        "approve" => {
            let mut verdict = pending;
            if let Value::Object(map) = &mut verdict {
                map.insert("met".to_owned(), json!(true));
                map.insert("clean".to_owned(), json!(true));
                map.insert(
                    "decided_by".to_owned(),
                    json!({"resolved_by": decision.resolved_by, "actor": decision.actor, "rationale": decision.rationale}),
                );
            }
            complete(work, run, &header, index, step, verdict)
        }
        "revise" => {
            let attempts = count_attempt(work, run, index)?;
            let mut violations = findings(&pending);
            violations.push(format!(
                "judge: a person judged the ambiguous verdict not met: {}",
                decision.rationale
            ));
            results::failed_attempt(
                work,
                run,
                index,
                attempts,
                validate::Failure::Ensure,
                violations,
                pending,
            )
        }
        _ => {
            work.update_step(&run.id, index, |state| state.judge_pending = None)?;
            match dispatch::move_to(work, run, index, Target::Kill, Move::Forward)? {
                Some(stopped) => Ok(stopped),
                None => dispatch::advance(work, run, dispatch::Note::default()),
            }
        }
    }
}
