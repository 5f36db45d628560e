//! Approval rules of gate functions (`Config::gate_rules`, from the server's config file): who
//! may decide a gate, whether the flow's starter may approve it, and how many distinct
//! identities must approve before it resolves. Every decision goes through `gates::resolve`,
//! so these rules hold whichever way a decision arrives (an MCP tool, a form in the agent's
//! client, the console, the operator CLI).
//!
//! Invariants: a refusal writes nothing, as every other refusal of a decision; an
//! approval before the last one needed is kept on the gate's step row with its round and is
//! counted only in that round, against the rule in force when it is counted.

use super::Run;
use super::work::Work;
use crate::command::GateRule;
use crate::response::{ApprovalRecord, ApprovalRecorded, ErrorResponse, Record, Response};
use crate::state::{Approval, EventBody, FlowHeader};
use crate::store::StoreError;

use super::gates::Decision;

/// What an approval under a rule comes to.
pub(crate) enum Count {
    /// Enough distinct identities approved: the gate resolves, and these are they, in order.
    Complete(Vec<String>),
    /// The gate still waits; this is the answer.
    Waiting(Response),
}

/// The refusal of `decision` at the gate `step_id` (function `function`) under `rule`, if the
/// rule refuses it: no verified identity, an identity the rule does not admit, or the flow's
/// starter approving when self-approval is off.
pub(crate) fn refusal(
    run: &Run<'_>,
    header: &FlowHeader,
    step_id: &str,
    function: &str,
    rule: &GateRule,
    decision: &Decision<'_>,
) -> Option<Response> {
    let flow = run.id.as_str();
    let Some(identity) = decision.actor else {
        let console = match run.ctx.config.console_url.as_deref() {
            Some(base) => format!("the web console, {}/gates", base.trim_end_matches('/')),
            None => "the web console's Gates page".to_owned(),
        };
        return Some(refused(
            run,
            header,
            step_id,
            "identity_required",
            format!(
                "gate '{step_id}' (function '{function}') has approval rules, so its decision \
                 must come from a verified identity, and this call has none (an agent's own \
                 stratum_gate_resolve over stdio); call stratum_gate_wait(flow_id, step_id) to \
                 ask the person in your client, or ask them to decide in {console} or with \
                 `stratum-mcp gate approve {flow} {step_id} --note \"why\"`"
            ),
        ));
    };
    if !rule.admits(identity) {
        let allowed = rule.approvers.as_deref().unwrap_or_default().join(", ");
        return Some(refused(
            run,
            header,
            step_id,
            "not_an_approver",
            format!(
                "`{identity}` may not decide gate '{step_id}': the rules of function \
                 '{function}' admit only {allowed}; ask one of them to decide"
            ),
        ));
    }
    if decision.outcome == "approve" && is_starter(rule, header, identity) {
        return Some(refused(
            run,
            header,
            step_id,
            "self_approval",
            format!(
                "`{identity}` started flow {flow} and may not approve its gate '{step_id}' \
                 (function '{function}' forbids self-approval); another identity approves it, \
                 and you may still revise or kill it"
            ),
        ));
    }
    None
}

/// Counts `identity`'s approval of the gate at step `index` towards `rule.min_approvals`:
/// complete when enough distinct identities approved in this round, else recorded (a step
/// row entry and an `approval` trace record) or, from an identity already counted, nothing.
pub(crate) fn count(
    work: &mut Work<'_>,
    run: &Run<'_>,
    header: &FlowHeader,
    index: u32,
    rule: &GateRule,
    decision: &Decision<'_>,
    identity: &str,
) -> Result<Count, StoreError> {
    // Earlier approvals count against the rule as it stands now: an identity since removed
    // from `approvers` (or the starter, once self-approval is off) no longer counts.
    let mut approvers: Vec<String> = work
        .step(&run.id, index)?
        .approvals
        .into_iter()
        .filter(|approval| approval.round == header.round)
        .map(|approval| approval.identity)
        .filter(|earlier| rule.admits(earlier) && !is_starter(rule, header, earlier))
        .collect();
    let counted = !approvers.iter().any(|earlier| earlier == identity);
    if counted {
        approvers.push(identity.to_owned());
    }
    let tally = Tally {
        identity,
        approvers,
        needed: rule.min_approvals.max(1),
        counted,
    };
    if tally.approvals() >= tally.needed {
        return Ok(Count::Complete(tally.approvers));
    }
    if tally.counted {
        record(work, run, header, index, decision, &tally)?;
    }
    let step_id = run.step(index)?.id.clone();
    Ok(Count::Waiting(recorded(run, header, step_id, tally)))
}

/// Forgets a gate's partial approvals: it was decided (approved, revised, killed or timed
/// out), so the next time it waits it starts from none. Writes only when there were some.
pub(crate) fn clear(work: &mut Work<'_>, run: &Run<'_>, index: u32) -> Result<(), StoreError> {
    if work.step(&run.id, index)?.approvals.is_empty() {
        return Ok(());
    }
    work.update_step(&run.id, index, |state| state.approvals.clear())
}

/// Whether `identity` started the flow and the rule forbids it to approve. A flow whose
/// starter is unknown (started before starters were kept, or by an embedding that names
/// none) has no starter to refuse.
fn is_starter(rule: &GateRule, header: &FlowHeader, identity: &str) -> bool {
    !rule.self_approval && header.started_by.as_deref() == Some(identity)
}

/// One approval as counted: who, who approved so far in this round (this one included when
/// counted), and how many the rule needs.
struct Tally<'a> {
    identity: &'a str,
    approvers: Vec<String>,
    needed: u32,
    counted: bool,
}

impl Tally<'_> {
    fn approvals(&self) -> u32 {
        u32::try_from(self.approvers.len()).unwrap_or(u32::MAX)
    }
}

/// Keeps one approval on the gate's step row and in the trace.
fn record(
    work: &mut Work<'_>,
    run: &Run<'_>,
    header: &FlowHeader,
    index: u32,
    decision: &Decision<'_>,
    tally: &Tally<'_>,
) -> Result<(), StoreError> {
    let (round, at_ms) = (header.round, run.ctx.now_ms);
    work.update_step(&run.id, index, |state| {
        // Approvals of earlier rounds are of no more use.
        state.approvals.retain(|approval| approval.round == round);
        state.approvals.push(Approval {
            identity: tally.identity.to_owned(),
            round,
            at_ms,
        });
    })?;
    work.push_event(
        &run.id,
        EventBody::Record(Record::Approval(ApprovalRecord {
            step_id: run.step(index)?.id.clone(),
            identity: tally.identity.to_owned(),
            rationale: decision.rationale.to_owned(),
            resolved_by: decision.resolved_by.to_owned(),
            via: decision.via.map(|via| via.channel.clone()),
            client: decision.via.and_then(|via| via.client.clone()),
            approvals: tally.approvals(),
            min_approvals: tally.needed,
            round,
            round_start_step_id: run.step_id(header.round_start),
            at_ms,
        })),
    )
}

/// The `approval_recorded` answer.
fn recorded(run: &Run<'_>, header: &FlowHeader, step_id: String, tally: Tally<'_>) -> Response {
    let (approvals, needed, identity) = (tally.approvals(), tally.needed, tally.identity);
    let more = needed.saturating_sub(approvals);
    let round = header.round;
    let what = if tally.counted {
        format!("`{identity}`'s approval of gate '{step_id}' is recorded")
    } else {
        format!("`{identity}` already approved gate '{step_id}' and counts once (nothing changed)")
    };
    let message = format!(
        "{what}: {approvals} of {needed} distinct approvals in round {round}; the gate waits \
         for {more} more from other identities (in the web console, with `stratum-mcp gate \
         approve {} {step_id}`, or through stratum_gate_wait in their own client)",
        run.id.as_str(),
    );
    Response::ApprovalRecorded(Box::new(ApprovalRecorded {
        status: "approval_recorded",
        flow_id: run.id.to_string(),
        step_id,
        round,
        identity: identity.to_owned(),
        counted: tally.counted,
        approvals,
        approvers: tally.approvers,
        min_approvals: needed,
        approvals_needed: more,
        message,
    }))
}

/// A refusal at the gate: the flow, the gate and its round, and why.
fn refused(
    run: &Run<'_>,
    header: &FlowHeader,
    step_id: &str,
    error_type: &str,
    message: String,
) -> Response {
    let mut error = ErrorResponse::new(error_type, message).flow(run.id.as_str());
    error.step_id = Some(step_id.to_owned());
    error.round = Some(header.round);
    error.into_response()
}
