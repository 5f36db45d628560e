//! `stratum-mcp gate approve|revise|kill`: an operator resolves the gate a flow waits at,
//! through the same command and store transaction as `stratum_gate_resolve`, so a running
//! server sees the decision on its next call and can never resolve the gate a second time.
//!
//! Answers in the reference's version-1 contract, with its exit statuses: [`GateMutation`]
//! (0), [`NotFound`] (1), [`Conflict`] (2: not the current gate, or the flow has finished).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use stratum_grammar::print::visible;

use super::SchemaVersion;
use crate::Runtime;
use crate::command::Command;
use crate::response::Response;
use crate::store::StoreError;

/// What the operator decided: the words of `stratum_gate_resolve`, the console and the audit.
/// `reject`, the reference CLI's word for `kill`, is still accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Decision {
    Approve,
    Revise,
    #[value(alias = "reject")]
    Kill,
}

impl Decision {
    /// The outcome `stratum_gate_resolve` takes.
    pub fn outcome(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Kill => "kill",
            Decision::Revise => "revise",
        }
    }
}

/// Who decided, as the audit records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ResolvedBy {
    Human,
    Agent,
    System,
}

impl ResolvedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            ResolvedBy::Human => "human",
            ResolvedBy::Agent => "agent",
            ResolvedBy::System => "system",
        }
    }
}

/// A gate resolved.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct GateMutation {
    #[serde(rename = "_schema_version")]
    pub schema_version: SchemaVersion,
    /// Always true.
    pub ok: bool,
    pub flow_id: String,
    pub step_id: String,
    /// `approve`, `kill` or `revise`.
    pub outcome: String,
    /// The status the flow moved to: `execute_step`, `await_gate`, `execute_flow`,
    /// `complete`, `killed`, `budget_exhausted`, …; `approval_recorded` when the gate's rule
    /// asks for more approvals than it has had (the gate still waits).
    pub result: String,
    /// Who decided, as the server knows them: the operating-system user (`os:alice`) from
    /// the terminal, the access token's name from the console.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// With `approval_recorded`: how many distinct identities have approved in this round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals: Option<u32>,
    /// With `approval_recorded`: how many more must approve before the gate resolves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals_needed: Option<u32>,
    /// With `approval_recorded`: false when this identity had already approved in this round
    /// (it counts once; nothing changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counted: Option<bool>,
}

/// No flow of that id: `{"error": {"code": "NOT_FOUND", "message": …}}`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NotFound {
    pub error: ErrorBody,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ErrorBody {
    /// `NOT_FOUND`, or `STORE_UNAVAILABLE` when the state database cannot be used; for
    /// `token create`, `INVALID_NAME` or `ALREADY_EXISTS`.
    pub code: String,
    pub message: String,
}

/// The gate cannot be resolved as asked: the flow is not waiting at that gate (another
/// step is current, or another operator or the agent resolved it first), or it has
/// finished. Nothing changed.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Conflict {
    #[serde(rename = "_schema_version")]
    pub schema_version: SchemaVersion,
    /// Always true.
    pub conflict: bool,
    pub flow_id: String,
    pub step_id: String,
    /// The runtime's reason: `wrong_step`, `not_a_gate_step`, `flow_already_complete`,
    /// `max_rounds_exceeded`; under the gate function's approval rules `not_an_approver` (the
    /// identity may not decide it) or `self_approval` (the flow's starter may not approve it);
    /// ….
    pub error_type: String,
    pub message: String,
}

/// What `gate` answers.
#[derive(Clone, Debug, PartialEq)]
pub enum GateAnswer {
    Done(GateMutation),
    NotFound(NotFound),
    Conflict(Conflict),
}

impl GateAnswer {
    /// 0 done, 1 unknown flow, 2 conflict.
    pub fn exit_code(&self) -> u8 {
        match self {
            GateAnswer::Done(_) => 0,
            GateAnswer::NotFound(_) => 1,
            GateAnswer::Conflict(_) => 2,
        }
    }

    pub fn to_json(&self) -> Value {
        let value = match self {
            GateAnswer::Done(done) => serde_json::to_value(done),
            GateAnswer::NotFound(missing) => serde_json::to_value(missing),
            GateAnswer::Conflict(conflict) => serde_json::to_value(conflict),
        };
        value.unwrap_or(Value::Null)
    }

    /// One sentence for a person at a terminal, [`visible`]: the step ids and messages in it
    /// come from a spec.
    pub fn to_text(&self) -> String {
        let text = match self {
            GateAnswer::Done(done) => done.to_text(),
            GateAnswer::NotFound(missing) => format!("error: {}", missing.error.message),
            GateAnswer::Conflict(conflict) => {
                format!(
                    "conflict ({}): {}",
                    conflict.error_type,
                    conflict.for_person()
                )
            }
        };
        visible(&text).into_owned()
    }
}

impl GateMutation {
    fn to_text(&self) -> String {
        let (Some(approvals), Some(needed)) = (self.approvals, self.approvals_needed) else {
            return format!(
                "{} {} of flow {}: the flow is now at `{}`",
                past_tense(&self.outcome),
                self.step_id,
                self.flow_id,
                self.result
            );
        };
        let (who, step, flow) = (
            self.actor.as_deref().unwrap_or("this identity"),
            &self.step_id,
            &self.flow_id,
        );
        let what = if self.counted == Some(false) {
            format!("{who} already approved {step} of flow {flow} and counts once")
        } else {
            format!("recorded the approval of {step} of flow {flow} by {who}")
        };
        format!(
            "{what}: {approvals} of {} approvals; the gate waits for {needed} more from other \
             identities",
            approvals.saturating_add(needed)
        )
    }
}

impl Conflict {
    /// The runtime's message says what an agent should call next; a person at a terminal (or
    /// the console) is told what to run instead. The fact, the message's first clause, is kept.
    pub fn for_person(&self) -> String {
        let fact = self
            .message
            .split(';')
            .next()
            .unwrap_or(&self.message)
            .trim_end_matches('.');
        let (flow, step) = (&self.flow_id, &self.step_id);
        let advice = match self.error_type.as_str() {
            "flow_already_complete" => format!(
                "nothing is left to decide; `stratum-mcp query flow {flow}` shows how it ended"
            ),
            "wrong_step" | "not_a_gate_step" => {
                "`stratum-mcp query gates` lists the gates waiting for a decision".to_owned()
            }
            "max_rounds_exceeded" => format!(
                "decide it with `stratum-mcp gate approve {flow} {step}` or `stratum-mcp gate \
                 kill {flow} {step}`"
            ),
            _ => return self.message.clone(),
        };
        format!("{fact}; {advice}")
    }
}

fn past_tense(outcome: &str) -> &'static str {
    match outcome {
        "approve" => "approved",
        "kill" => "killed",
        _ => "sent back for revision:",
    }
}

/// Resolves the gate `step_id` of flow `flow_id` now, in one store transaction, as the
/// operating-system user running this process (`os:<user>`, see [`crate::identity`]): the
/// identity the gate's approval rules judge and its audit record names.
pub fn resolve(
    runtime: &Runtime,
    flow_id: &str,
    step_id: &str,
    decision: Decision,
    note: &str,
    resolved_by: ResolvedBy,
    value: Option<serde_json::Value>,
) -> Result<GateAnswer, StoreError> {
    let user = crate::identity::os_user();
    resolve_as(
        runtime,
        flow_id,
        step_id,
        decision,
        note,
        resolved_by,
        Some(&user),
        value,
    )
}

/// [`resolve`] as `actor` (the access token's name, for a gate resolved from the `serve`
/// console), which the gate's approval rules judge and its audit record names, with the
/// `value` approved with for a gate whose function declares `output`: the same transaction
/// and conflict answers as the terminal's. Blocking: call it from a blocking thread.
#[allow(clippy::too_many_arguments)]
pub fn resolve_as(
    runtime: &Runtime,
    flow_id: &str,
    step_id: &str,
    decision: Decision,
    note: &str,
    resolved_by: ResolvedBy,
    actor: Option<&str>,
    value: Option<serde_json::Value>,
) -> Result<GateAnswer, StoreError> {
    let response = runtime.call(&Command::GateResolve {
        flow_id: flow_id.to_owned(),
        step_id: step_id.to_owned(),
        outcome: decision.outcome().to_owned(),
        rationale: note.to_owned(),
        resolved_by: resolved_by.as_str().to_owned(),
        actor: actor.map(str::to_owned),
        via: None,
        round: None,
        value,
    })?;
    let recorded = match &response {
        Response::ApprovalRecorded(recorded) => Some(recorded.as_ref()),
        _ => None,
    };
    Ok(match &response {
        Response::Error(error) if error.error_type == "flow_not_found" => {
            GateAnswer::NotFound(not_found(flow_id))
        }
        Response::Error(error) => GateAnswer::Conflict(Conflict {
            schema_version: SchemaVersion,
            conflict: true,
            flow_id: flow_id.to_owned(),
            step_id: step_id.to_owned(),
            error_type: error.error_type.clone(),
            message: error.message.clone(),
        }),
        answer => GateAnswer::Done(GateMutation {
            schema_version: SchemaVersion,
            ok: true,
            flow_id: flow_id.to_owned(),
            step_id: step_id.to_owned(),
            outcome: decision.outcome().to_owned(),
            result: answer.status().to_owned(),
            actor: actor.map(str::to_owned),
            approvals: recorded.map(|recorded| recorded.approvals),
            approvals_needed: recorded.map(|recorded| recorded.approvals_needed),
            counted: recorded.map(|recorded| recorded.counted),
        }),
    })
}

/// The reference's answer for an unknown flow.
pub fn not_found(flow_id: &str) -> NotFound {
    NotFound {
        error: ErrorBody {
            code: "NOT_FOUND".to_owned(),
            message: format!("Flow '{flow_id}' not found"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflict(error_type: &str, message: &str) -> Conflict {
        Conflict {
            schema_version: SchemaVersion,
            conflict: true,
            flow_id: "6e85abb0-0000-4000-8000-000000000001".to_owned(),
            step_id: "review".to_owned(),
            error_type: error_type.to_owned(),
            message: message.to_owned(),
        }
    }

    #[test]
    fn an_approval_the_gate_counts_says_how_many_more_it_waits_for() {
        let mutation = |counted: bool| GateMutation {
            schema_version: SchemaVersion,
            ok: true,
            flow_id: "6e85abb0".to_owned(),
            step_id: "review".to_owned(),
            outcome: "approve".to_owned(),
            result: "approval_recorded".to_owned(),
            actor: Some("os:alice".to_owned()),
            approvals: Some(1),
            approvals_needed: Some(2),
            counted: Some(counted),
        };
        assert_eq!(
            GateAnswer::Done(mutation(true)).to_text(),
            "recorded the approval of review of flow 6e85abb0 by os:alice: 1 of 3 approvals; \
             the gate waits for 2 more from other identities"
        );
        assert_eq!(
            GateAnswer::Done(mutation(false)).to_text(),
            "os:alice already approved review of flow 6e85abb0 and counts once: 1 of 3 \
             approvals; the gate waits for 2 more from other identities"
        );
    }

    #[test]
    fn a_person_is_told_what_to_run_not_what_an_agent_calls() {
        let finished = conflict(
            "flow_already_complete",
            "Flow '6e85abb0-0000-4000-8000-000000000001' has already finished (complete); start \
             a new flow with stratum_plan, or read what happened with stratum_audit",
        );
        let text = finished.for_person();
        assert_eq!(
            text,
            "Flow '6e85abb0-0000-4000-8000-000000000001' has already finished (complete); nothing \
             is left to decide; `stratum-mcp query flow 6e85abb0-0000-4000-8000-000000000001` \
             shows how it ended"
        );
        let elsewhere = conflict(
            "not_a_gate_step",
            "Step 'work' is not a gate step: the flow is at 'work', not at 'review'; finish it \
             with stratum_step_done",
        );
        assert!(!elsewhere.for_person().contains("stratum_step_done"));
        assert!(elsewhere.for_person().contains("stratum-mcp query gates"));
        let other = conflict("invalid_outcome", "outcome must be one of …");
        assert_eq!(other.for_person(), "outcome must be one of …");
    }
}
