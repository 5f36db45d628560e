//! Gates: `stratum_gate_resolve` (approve, revise, kill), rounds and `max_rounds`, and gate
//! timeouts, measured from the dispatch time kept in the flow's header so that they fire after
//! a restart, on `stratum_check_timeouts` and on any other call that touches the flow.

use serde_json::{Value, json};
use stratum_compiler::plan::{Action, Step, Target};

use super::approvals::{self, Count};
use super::dispatch::{self, Move, Note};
use super::{Run, current, finish, running_step};
use crate::command::Via;
use crate::response::{ErrorResponse, GateRecord, NoTimeout, Record, Response};
use crate::state::{Cursor, EventBody, FlowStatus};
use crate::store::StoreError;

use super::work::Work;

const OUTCOMES: [&str; 3] = ["approve", "kill", "revise"];
const RESOLVERS: [&str; 3] = ["agent", "human", "system"];

/// What a resolution of a gate says, and who sent it.
pub(crate) struct Decision<'a> {
    pub outcome: &'a str,
    pub rationale: &'a str,
    /// The caller's claim: `human`, `agent` or `system`.
    pub resolved_by: &'a str,
    /// The server's knowledge of who decided (a verified identity): the access token's name
    /// over HTTP, `os:<user>` from the CLI or a stdio server's form; none from an agent over
    /// stdio.
    pub actor: Option<&'a str>,
    /// How a person's decision reached the server.
    pub via: Option<&'a Via>,
    /// The round the decision is for, when the caller knows it.
    pub round: Option<u32>,
    /// The value approved with, for a gate whose function declares `output`.
    pub value: Option<&'a Value>,
}

pub(crate) fn resolve(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step_id: &str,
    decision: Decision<'_>,
) -> Result<Response, StoreError> {
    let Decision {
        outcome,
        resolved_by,
        ..
    } = decision;
    let (header, index, step) = match running_step(work, run)? {
        Ok(current) => current,
        Err(finished) => return Ok(finished),
    };
    // A judge step whose verdict was ambiguous waits for a person, as a gate does.
    if matches!(step.action, Action::Judge { .. })
        && step.id == step_id
        && work.step(&run.id, index)?.judge_pending.is_some()
    {
        if let Some(refused) = invalid_decision(run, outcome, resolved_by) {
            return Ok(refused);
        }
        record_gate(
            work,
            run,
            index,
            &decision,
            Vec::new(),
            None,
            run.ctx.now_ms,
        )?;
        return super::judge::decide(work, run, index, &decision);
    }
    let Action::Gate {
        ref function,
        on_approve,
        on_revise,
        on_kill,
        ..
    } = step.action
    else {
        let message = if step.id == step_id {
            format!("Step '{step_id}' is not a gate step; finish it with stratum_step_done")
        } else {
            format!(
                "Step '{}' is not a gate step: the flow is at '{}', not at '{step_id}'; finish it with stratum_step_done",
                step.id, step.id
            )
        };
        let mut error = ErrorResponse::new("not_a_gate_step", message).flow(run.id.as_str());
        error.step_id = Some(step.id.clone());
        return Ok(error.into_response());
    };
    if let Some(refused) = invalid_decision(run, outcome, resolved_by) {
        return Ok(refused);
    }
    if step.id != step_id {
        let mut error = ErrorResponse::new(
            "wrong_step",
            format!("Expected gate step '{}', got '{step_id}'", step.id),
        )
        .flow(run.id.as_str());
        error.step_id = Some(step.id.clone());
        return Ok(error.into_response());
    }
    if let Some(round) = decision.round
        && round != header.round
    {
        let mut error = ErrorResponse::new(
            "stale_round",
            format!(
                "the decision is for round {round} of gate '{step_id}', and the flow is in round \
                 {}: the gate was decided and reached again meanwhile; ask again",
                header.round
            ),
        )
        .flow(run.id.as_str());
        error.step_id = Some(step.id.clone());
        error.round = Some(header.round);
        return Ok(error.into_response());
    }
    let rule = run.ctx.config.gate_rules.get(function.as_str());
    if let Some(rule) = rule
        && let Some(refused) = approvals::refusal(run, &header, step_id, function, rule, &decision)
    {
        return Ok(refused);
    }
    // A revise past `max_rounds` is refused before anything is recorded: no gate record
    // claims a revision that did not happen.
    if outcome == "revise"
        && let Some(refused) = rounds_spent(run, &header)
    {
        return Ok(refused);
    }
    let decided = match typed_value(run, step, step_id, &decision) {
        Ok(decided) => decided,
        Err(refused) => return Ok(refused),
    };
    let approvers = match (rule, decision.actor) {
        (Some(rule), Some(identity)) if outcome == "approve" => {
            match approvals::count(work, run, &header, index, rule, &decision, identity)? {
                Count::Complete(approvers) => approvers,
                Count::Waiting(answer) => return Ok(answer),
            }
        }
        _ => Vec::new(),
    };
    // Whatever the decision, the gate is decided: a later wait at it counts afresh.
    approvals::clear(work, run, index)?;
    let review_id = review_id(run, index, header.round);
    let output = decided.map(|value| {
        json!({
            "value": value,
            "outcome": outcome,
            "reviewer": decision.actor,
            "rationale": decision.rationale,
            "decided_at": crate::utc(run.ctx.now_ms),
            "review_id": review_id,
        })
    });
    let typed = output.as_ref().map(|output| {
        (
            output.get("value").cloned().unwrap_or(Value::Null),
            review_id,
        )
    });
    record_gate(
        work,
        run,
        index,
        &decision,
        approvers,
        typed,
        run.ctx.now_ms,
    )?;
    if let Some(output) = output {
        work.update_step(&run.id, index, |state| state.output = Some(output))?;
    }
    match outcome {
        "approve" => {
            if let Some(stopped) = dispatch::move_to(work, run, index, on_approve, Move::Forward)? {
                return Ok(stopped);
            }
            dispatch::advance(work, run, Note::default())
        }
        "revise" => revise(work, run, on_revise),
        _ => kill(work, run, index, on_kill, None, run.ctx.now_ms),
    }
}

/// The refusal of an outcome or resolver that is not one of the three.
fn invalid_decision(run: &Run<'_>, outcome: &str, resolved_by: &str) -> Option<Response> {
    if !OUTCOMES.contains(&outcome) {
        return Some(
            ErrorResponse::new(
                "invalid_outcome",
                format!("outcome must be one of ['approve', 'kill', 'revise'], got '{outcome}'"),
            )
            .flow(run.id.as_str())
            .into_response(),
        );
    }
    if !RESOLVERS.contains(&resolved_by) {
        return Some(
            ErrorResponse::new(
                "invalid_resolved_by",
                format!(
                    "resolved_by must be one of ['agent', 'human', 'system'], got '{resolved_by}'"
                ),
            )
            .flow(run.id.as_str())
            .into_response(),
        );
    }
    None
}

/// Writes the gate record of a resolution at `at_ms` (now, or the deadline of a timeout);
/// `approvers`: the identities whose approvals resolved it under its rule.
fn record_gate(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    decision: &Decision<'_>,
    approvers: Vec<String>,
    typed: Option<(Value, String)>,
    at_ms: u64,
) -> Result<(), StoreError> {
    let (value, review_id) = typed.unzip();
    let header = work.get(&run.id)?;
    work.push_event(
        &run.id,
        EventBody::Record(Record::Gate(Box::new(GateRecord {
            step_id: run.step(index)?.id.clone(),
            outcome: decision.outcome.to_owned(),
            rationale: decision.rationale.to_owned(),
            resolved_by: decision.resolved_by.to_owned(),
            actor: decision.actor.map(str::to_owned),
            via: decision.via.map(|via| via.channel.clone()),
            client: decision.via.and_then(|via| via.client.clone()),
            approvers,
            value,
            review_id,
            duration_ms: header
                .dispatched_ms
                .map_or(0, |at| at_ms.saturating_sub(at)),
            round: header.round,
            round_start_step_id: run.step_id(header.round_start),
            at_ms,
        }))),
    )
}

/// The value of an approval of a gate whose function declares `output: T`, checked against
/// `T`; `None` for a gate without one, and for revise and kill. `Err`: the refusal (nothing is
/// recorded).
fn typed_value(
    run: &Run<'_>,
    step: &Step,
    step_id: &str,
    decision: &Decision<'_>,
) -> Result<Option<Value>, Response> {
    let contract = step
        .output
        .contract
        .and_then(|index| run.plan.contracts.get(index as usize));
    let refusal = |error_type: &str, message: String, violations: Option<Vec<String>>| {
        let mut error = ErrorResponse::new(error_type, message).flow(run.id.as_str());
        error.step_id = Some(step_id.to_owned());
        error.violations = violations;
        error.into_response()
    };
    let Some(contract) = contract else {
        return match decision.value {
            Some(_) if decision.outcome == "approve" => Err(refusal(
                "decision_value_unexpected",
                format!(
                    "gate '{step_id}' decides no value (its function declares no `output`): \
                     approve it without `value`"
                ),
                None,
            )),
            _ => Ok(None),
        };
    };
    if decision.outcome != "approve" {
        return Ok(None);
    }
    let fields = contract
        .schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| properties.keys().cloned().collect::<Vec<_>>().join(", "))
        .unwrap_or_default();
    let Some(value) = decision.value else {
        return Err(refusal(
            "decision_value_required",
            format!(
                "approving gate '{step_id}' decides a value of contract '{}' ({fields}): approve \
                 with `value`, an object of those fields",
                contract.name
            ),
            None,
        ));
    };
    let violations = super::validate::schema_violations(&contract.schema, value);
    if !violations.is_empty() {
        return Err(refusal(
            "decision_value_invalid",
            format!(
                "the value does not fit contract '{}' of gate '{step_id}'; nothing was \
                 recorded: fix it and approve again",
                contract.name
            ),
            Some(violations),
        ));
    }
    Ok(Some(value.clone()))
}

/// A stable id of one decision of the gate at plan index `index` in `round` of the run's flow
/// (the seed's `review_id`): the same command run again gives the same id.
fn review_id(run: &Run<'_>, index: u32, round: u32) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(run.id.as_str().as_bytes());
    hasher.update(index.to_le_bytes());
    hasher.update(round.to_le_bytes());
    let digest = hasher.finalize();
    let mut seed = [0_u8; 16];
    for (to, from) in seed.iter_mut().zip(digest.iter()) {
        *to = *from;
    }
    crate::FlowId::derive(u128::from_le_bytes(seed), run.ctx.now_ms).to_string()
}

/// The refusal of a revise when the flow has had its `max_rounds`: the gate still waits.
fn rounds_spent(run: &Run<'_>, header: &crate::state::FlowHeader) -> Option<Response> {
    let max_rounds = run.flow().and_then(|flow| flow.max_rounds)?;
    if header.round < max_rounds {
        return None;
    }
    let gate = run.step_id(current(header)).unwrap_or_default();
    let mut error = ErrorResponse::new(
        "max_rounds_exceeded",
        format!(
            "Maximum rounds ({max_rounds}) exceeded; gate '{gate}' still waits: approve or kill it"
        ),
    )
    .flow(run.id.as_str());
    error.step_id = Some(gate);
    error.round = Some(header.round);
    Some(error.into_response())
}

/// A new round from the `on_revise` target: the steps from it on are cleared, the trace of
/// the round ends (kept in `rounds`), its iterations are archived.
fn revise(work: &mut Work<'_>, run: &Run<'_>, on_revise: Target) -> Result<Response, StoreError> {
    let header = work.get(&run.id)?;
    if let Some(refused) = rounds_spent(run, &header) {
        return Ok(refused);
    }
    let target = match on_revise {
        Target::Step(target) => target,
        Target::End | Target::Kill => 0,
    };
    dispatch::clear_from(work, run, target, None, true)?;
    work.update(&run.id, |header| {
        header.round += 1;
        header.round_start = Some(target);
        header.cursor = Cursor::Step(target);
        header.dispatched_ms = None;
        header.active_iteration = None;
    })?;
    dispatch::advance(work, run, Note::default())
}

/// Kills the flow at its gate (at `at_ms`), or routes to the `on_kill` cleanup step: the flow
/// then reports `killed` once the cleanup is done.
fn kill(
    work: &mut Work<'_>,
    run: &Run<'_>,
    index: u32,
    on_kill: Target,
    reason: Option<&str>,
    at_ms: u64,
) -> Result<Response, StoreError> {
    match on_kill {
        Target::Step(_) => {
            if let Some(stopped) = dispatch::move_to(work, run, index, on_kill, Move::Forward)? {
                return Ok(stopped);
            }
            // Marked after the move, so that a cleanup step right after the gate is reached.
            work.update(&run.id, |header| header.killing = true)?;
            dispatch::advance(work, run, Note::default())
        }
        Target::End | Target::Kill => {
            work.update(&run.id, |header| {
                header.status = FlowStatus::Killed;
                header.cursor = Cursor::End;
                header.finished_ms = Some(at_ms);
                header.dispatched_ms = None;
            })?;
            finish::envelope(work, run, reason)
        }
    }
}

/// The current gate's timeout and when it was dispatched, if it has both.
fn gate_clock(
    work: &mut Work<'_>,
    run: &Run<'_>,
) -> Result<Result<(u32, u64, u64), &'static str>, StoreError> {
    let header = work.get(&run.id)?;
    if header.status.is_finished() {
        return Ok(Err("Flow is already complete"));
    }
    let Some(index) = current(&header) else {
        return Ok(Err("Flow is already complete"));
    };
    let Action::Gate { timeout, .. } = run.step(index)?.action else {
        return Ok(Err("Current step is not a gate step"));
    };
    let Some(timeout) = timeout else {
        return Ok(Err("Gate has no timeout configured"));
    };
    let Some(dispatched) = header.dispatched_ms else {
        return Ok(Err("Gate not yet dispatched"));
    };
    Ok(Ok((index, timeout, dispatched)))
}

/// Kills the current gate if its timeout has passed; the envelope (or cleanup dispatch). The
/// kill is recorded at the deadline, whichever later call found it: the trace does not depend
/// on when someone looked.
pub(crate) fn expire(work: &mut Work<'_>, run: &Run<'_>) -> Result<Option<Response>, StoreError> {
    let Ok((index, timeout, dispatched)) = gate_clock(work, run)? else {
        return Ok(None);
    };
    let deadline = dispatched.saturating_add(timeout.saturating_mul(1000));
    if run.ctx.now_ms < deadline {
        return Ok(None);
    }
    let Action::Gate { on_kill, .. } = run.step(index)?.action else {
        return Ok(None);
    };
    let timeout = Decision {
        outcome: "kill",
        rationale: "timeout",
        resolved_by: "system",
        actor: None,
        via: None,
        round: None,
        value: None,
    };
    approvals::clear(work, run, index)?;
    record_gate(work, run, index, &timeout, Vec::new(), None, deadline)?;
    kill(work, run, index, on_kill, Some("timeout"), deadline).map(Some)
}

/// `stratum_check_timeouts`.
pub(crate) fn check_timeouts(work: &mut Work<'_>, run: &Run<'_>) -> Result<Response, StoreError> {
    if let Some(killed) = expire(work, run)? {
        return Ok(killed);
    }
    Ok(Response::NoTimeout(match gate_clock(work, run)? {
        Err(message) => NoTimeout {
            status: "no_timeout",
            message: Some(message.to_owned()),
            remaining_seconds: None,
        },
        Ok((_, timeout, dispatched)) => {
            let elapsed = run.ctx.now_ms.saturating_sub(dispatched);
            let remaining = timeout.saturating_mul(1000).saturating_sub(elapsed);
            NoTimeout {
                status: "no_timeout",
                message: None,
                remaining_seconds: Some(remaining as f64 / 1000.0),
            }
        }
    }))
}
