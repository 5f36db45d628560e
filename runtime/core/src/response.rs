//! What the runtime answers: typed values that serialize to the reference server's JSON
//! shapes (field names, `status` and `error_type` values), so that the MCP layer only
//! serializes them and existing agent skills keep working.
//!
//! Where we add to a shape (a dispatch's `skip_if_error`, a child's completion naming its
//! parent, the violations of a failed step record), the field is new and optional; no
//! reference field changes meaning.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::state::BudgetLedger;

/// Every answer of [`execute`](crate::execute).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Response {
    Step(Box<StepDispatch>),
    Gate(Box<GateDispatch>),
    Flow(Box<FlowDispatch>),
    Finished(Box<Finished>),
    Error(Box<ErrorResponse>),
    Committed(Committed),
    IterationStarted(IterationStarted),
    IterationReport(Box<IterationReport>),
    IterationAborted(Box<IterationAborted>),
    NoTimeout(NoTimeout),
    /// `stratum_resume` of a flow that has finished.
    Status(StatusOnly),
    Audit(Box<Audit>),
    /// A fan-out step's tasks for the agent to run.
    Parallel(Box<ParallelDispatch>),
    /// Where a fan-out step's tasks stand (start, poll, a task's report).
    FanOut(Box<FanOutReport>),
    /// An approval counted towards a gate's `min_approvals`; the gate still waits.
    ApprovalRecorded(Box<ApprovalRecorded>),
}

impl Response {
    /// The `status` field.
    pub fn status(&self) -> &str {
        match self {
            Response::Step(step) => &step.status,
            Response::Gate(_) => "await_gate",
            Response::Flow(_) => "execute_flow",
            Response::Finished(finished) => &finished.status,
            Response::Error(_) => "error",
            Response::Committed(_) => "committed",
            Response::IterationStarted(_) => "iteration_started",
            Response::IterationReport(report) => &report.status,
            Response::IterationAborted(_) => "iteration_aborted",
            Response::NoTimeout(_) => "no_timeout",
            Response::Status(status) => &status.status,
            Response::Audit(audit) => &audit.status,
            Response::Parallel(dispatch) => &dispatch.status,
            Response::FanOut(report) => &report.status,
            Response::ApprovalRecorded(_) => "approval_recorded",
        }
    }

    /// The `error_type` of an error.
    pub fn error_type(&self) -> Option<&str> {
        match self {
            Response::Error(error) => Some(&error.error_type),
            _ => None,
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// `execute_step` (and, for a failed attempt, `ensure_failed` / `schema_failed` /
/// `guardrail_blocked`, or `no_result` when an unattended agent gave none): what the agent must
/// do now.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct StepDispatch {
    #[schemars(extend("enum" = ["execute_step", "ensure_failed", "schema_failed", "guardrail_blocked", "no_result"]))]
    pub status: String,
    pub flow_id: String,
    pub step_number: u32,
    pub total_steps: u32,
    pub step_id: String,
    /// `function` or `inline`.
    pub step_mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    pub agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    pub intent: Option<String>,
    pub inputs: BTreeMap<String, Value>,
    pub output_contract: Option<String>,
    pub output_fields: BTreeMap<String, String>,
    pub ensure: Vec<String>,
    pub retries_remaining: u32,
    /// Inline steps only (the reference's shape).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub violations: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routed_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverted_to: Option<String>,
    /// The step's `skip_if` failed to evaluate, so the step runs: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_if_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// A judge step's predicates, stakes and budget, for `stratum_judge`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicates: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stakes: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<Value>,
}

/// `parallel_dispatch` (and, after a failed attempt, `ensure_failed`): a fan-out step's tasks
/// for the agent to run and report with `stratum_parallel_done`. The reference's envelope,
/// with what it leaves to the client done by the server: every task carries its `prompt`,
/// rendered from the compiled template, and only the tasks this attempt runs are listed
/// (`kept` names the ones accepted before).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ParallelDispatch {
    #[schemars(extend("enum" = ["parallel_dispatch", "ensure_failed", "schema_failed", "guardrail_blocked", "no_result"]))]
    pub status: String,
    pub flow_id: String,
    pub step_number: u32,
    pub total_steps: u32,
    pub step_id: String,
    /// `parallel_dispatch`.
    pub step_mode: &'static str,
    /// The source's elements this attempt runs, each with `prompt` (and, on a retry, the
    /// `violations` of its previous attempt) added.
    pub tasks: Vec<Value>,
    pub agent: Option<String>,
    pub max_concurrent: u32,
    pub isolation: &'static str,
    /// `all`, `any` or a number.
    pub require: Value,
    pub merge: &'static str,
    /// The template as written (null for a pipeline: its stages have theirs).
    pub intent_template: Option<String>,
    /// A pipeline: `true`, with its `stages` (templates, `when`, `exit_when`, fan-out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<Value>>,
    pub ensure: Vec<String>,
    pub retries_remaining: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_merge_verify: Option<Vec<String>>,
    /// The step's attempt, from 1: what `stratum_parallel_done` reports on.
    pub attempt: u32,
    /// Tasks accepted in an earlier attempt, which count towards `require` without running.
    // Left out when empty, so `default`: the schema must not list it as required.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<String>,
    /// `server` when the server runs the tasks (`stratum_parallel_poll` follows them).
    pub dispatch: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub violations: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounced_tasks: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routed_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverted_to: Option<String>,
}

/// A fan-out step's tasks as the store holds them: `started` (the server took them),
/// `task_recorded` (one task's report was written) or `parallel_status` (a poll).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct FanOutReport {
    #[schemars(extend("enum" = ["started", "task_recorded", "parallel_status"]))]
    pub status: String,
    pub flow_id: String,
    pub step_id: String,
    pub attempt: u32,
    /// `consumer`, `server`, or null before either took the tasks.
    pub dispatch: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The attempt's pre-merge commands, and whether the spec wrote them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_merge_verify: Option<crate::state::VerifyCommands>,
    pub task_count: usize,
    /// How many tasks are in each state.
    pub summary: BTreeMap<String, usize>,
    pub tasks: Vec<TaskView>,
    /// Whether the tasks settled so far meet `require`.
    pub require_satisfied: bool,
    /// Whether `require` can still be met by the tasks not yet settled.
    pub require_possible: bool,
    /// Whether this is the step's last attempt: when `require` cannot be met in it, running
    /// tasks are of no use and are ended (before that, their results are kept for the retry).
    pub last_attempt: bool,
    /// Every task is settled: the step can be evaluated.
    pub can_advance: bool,
    /// Whether the server is still working on the tasks (`stratum_parallel_poll` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<bool>,
    /// What the runtime answered when the server evaluated the step: the next dispatch, a
    /// retry of this step, or the flow's end (`stratum_parallel_poll` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Value>,
}

/// One task of a fan-out step.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct TaskView {
    pub task_id: String,
    pub state: &'static str,
    /// A pipeline task's item, stage and lane.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane: Option<u32>,
    /// The step attempt that dispatched it.
    pub attempt: u32,
    pub prompt: String,
    pub depends_on: Vec<String>,
    pub agent: Option<String>,
    pub task_timeout: u64,
    pub element: Value,
    pub result: Option<Value>,
    // Left out when empty, so `default`: the schema must not list it as required.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate_bounce: Option<Value>,
    /// Its changes (`git diff --binary` against the base; `base64:` and the bytes when they
    /// are not text): in `stratum_parallel_poll` answers, read from the task's diff row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The size of its changes in bytes, when they were captured (in every answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff_bytes: Option<u64>,
    /// The SHA-256 of its changes' text, lower-case hex.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff_sha256: Option<String>,
    /// `unmerged`, `merging`, `merged` or `conflict`.
    pub merge: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<u64>,
}

/// `await_gate`: a gate waits for `stratum_gate_resolve`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct GateDispatch {
    #[schemars(extend("const" = "await_gate"))]
    pub status: &'static str,
    pub flow_id: String,
    pub step_number: u32,
    pub total_steps: u32,
    pub step_id: String,
    pub step_mode: &'static str,
    pub function: String,
    pub agent: Option<String>,
    pub on_approve: Option<String>,
    pub on_revise: Option<String>,
    pub on_kill: Option<String>,
    pub timeout: Option<u64>,
    /// What to tell a person who is to decide the gate: the operator commands with this
    /// flow's id and this gate's step id, and the web console's address when the server
    /// knows it. Not in the reference's answer (an addition; every other key is its).
    pub how_to_decide: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routed_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverted_to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub violations: Option<Vec<String>>,
}

/// The `how_to_decide` of the gate `step_id` of flow `flow_id`; `console` is the web
/// console's address (`http://127.0.0.1:7777`), when known.
pub fn how_to_decide(flow_id: &str, step_id: &str, console: Option<&str>) -> String {
    let console = match console {
        Some(base) => format!("the web console, {}/gates", base.trim_end_matches('/')),
        None => "the web console's Gates page, where `stratum-mcp serve` runs".to_owned(),
    };
    format!(
        "When the decision is a person's, tell them how to make it: in a terminal, \
         `stratum-mcp gate approve {flow_id} {step_id} --note \"why\"` (or `gate revise`, \
         `gate kill`, with the reason), or {console}; then call stratum_resume for what comes \
         next. A decision they tell you goes to stratum_gate_resolve with resolved_by \"human\"."
    )
}

/// `approval_recorded`: an approval of a gate whose rule asks for `min_approvals` distinct
/// identities, before the last one needed. The gate still waits, in the same round; a revise
/// or kill by one identity still decides it at once. An identity that already approved in
/// this round is not counted again (`counted: false`, nothing changed).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ApprovalRecorded {
    #[schemars(extend("const" = "approval_recorded"))]
    pub status: &'static str,
    pub flow_id: String,
    pub step_id: String,
    pub round: u32,
    /// Who approved, as the server knows them (a token's name, `os:<user>`).
    pub identity: String,
    /// Whether this call's approval was counted (false: the identity had already approved in
    /// this round).
    pub counted: bool,
    /// How many distinct identities have approved in this round.
    pub approvals: u32,
    /// Who they are, in the order they approved.
    pub approvers: Vec<String>,
    /// How many the gate's rule asks for.
    pub min_approvals: u32,
    /// How many more distinct identities must approve before the gate resolves.
    pub approvals_needed: u32,
    pub message: String,
}

/// `execute_flow`: a flow step started (or resumed) its child; `child_step` is the child's
/// own dispatch. Like the reference, it has no `flow_id`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct FlowDispatch {
    #[schemars(extend("const" = "execute_flow"))]
    pub status: &'static str,
    pub parent_flow_id: String,
    pub parent_step_id: String,
    pub child_flow_id: String,
    pub child_flow_name: String,
    pub child_step: Response,
    pub step_number: u32,
    pub total_steps: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routed_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverted_to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub violations: Option<Vec<String>>,
}

/// A flow that ended: `complete`, `killed` or `budget_exhausted`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Finished {
    #[schemars(extend("enum" = ["complete", "killed", "budget_exhausted"]))]
    pub status: String,
    pub flow_id: String,
    /// Absent for a flow killed at a gate with no cleanup step (the reference's shape).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    pub trace: Vec<Record>,
    pub total_duration_ms: u64,
    /// `timeout`, for a gate killed by its timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_state: Option<BudgetLedger>,
    /// A child flow's completion names the parent step it was run for: report it there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_flow_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_step_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverted_to: Option<String>,
}

/// `{"status": "error", "error_type", "message", ...}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
pub struct ErrorResponse {
    #[schemars(extend("const" = "error"))]
    pub status: &'static str,
    pub error_type: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_mode: Option<String>,
    /// Present (possibly null) on `retries_exhausted`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub violations: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// Checkpoint labels, on `checkpoint_not_found`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<Vec<String>>,
    /// The child execution a flow step waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub child_flow_id: Option<String>,
    /// The flow's status, on errors about a finished flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_status: Option<String>,
}

impl ErrorResponse {
    pub fn new(error_type: &str, message: impl Into<String>) -> ErrorResponse {
        ErrorResponse {
            status: "error",
            error_type: error_type.to_owned(),
            message: message.into(),
            ..ErrorResponse::default()
        }
    }

    pub fn flow(mut self, flow_id: &str) -> ErrorResponse {
        self.flow_id = Some(flow_id.to_owned());
        self
    }

    pub fn into_response(self) -> Response {
        Response::Error(Box::new(self))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Committed {
    #[schemars(extend("const" = "committed"))]
    pub status: &'static str,
    pub flow_id: String,
    pub label: String,
    pub step_number: Option<u32>,
    pub current_step_id: Option<String>,
    pub checkpoints: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct IterationStarted {
    #[schemars(extend("const" = "iteration_started"))]
    pub status: &'static str,
    pub flow_id: String,
    pub step_id: String,
    pub max_iterations: u32,
    pub exit_criterion: Option<String>,
    pub iteration: u32,
}

/// `iteration_continue` or `iteration_exit`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct IterationReport {
    #[schemars(extend("enum" = ["iteration_continue", "iteration_exit"]))]
    pub status: String,
    pub flow_id: String,
    pub step_id: String,
    pub iteration: u32,
    pub max_iterations: u32,
    pub exit_criterion_met: bool,
    pub outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_criterion_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accumulate_error: Option<String>,
    /// Accumulating loops: items new in this report (null when the extractor failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_count: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_streak: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_score: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_iteration: Option<Option<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accumulated: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accumulated_count: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct IterationAborted {
    #[schemars(extend("const" = "iteration_aborted"))]
    pub status: &'static str,
    pub flow_id: String,
    pub step_id: String,
    pub iteration: u32,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_result: Option<Option<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_score: Option<Option<f64>>,
}

/// `check_timeouts` found nothing to do.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct NoTimeout {
    #[schemars(extend("const" = "no_timeout"))]
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_seconds: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct StatusOnly {
    /// The finished flow's status.
    #[schemars(extend("enum" = ["complete", "killed", "failed", "budget_exhausted", "cancelled"]))]
    pub status: String,
    pub flow_id: String,
}

/// `stratum_audit`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Audit {
    pub flow_id: String,
    pub flow_name: String,
    /// `in_progress`, `complete`, `killed`, `failed` or `budget_exhausted`.
    #[schemars(extend("enum" = ["in_progress", "complete", "killed", "failed", "budget_exhausted", "cancelled"]))]
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    pub budget_state: Option<BudgetLedger>,
    /// Steps with a step record in the current round.
    pub steps_completed: u32,
    pub total_steps: u32,
    pub trace: Vec<Record>,
    pub cache_hits: u32,
    pub total_duration_ms: u64,
    pub round: u32,
    pub rounds: Vec<RoundRecords>,
    pub iterations: BTreeMap<String, Vec<Value>>,
    pub archived_iterations: Vec<BTreeMap<String, Vec<Value>>>,
    pub child_audits: BTreeMap<String, Vec<Audit>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_flow_id: Option<String>,
    /// The identity that started the flow, when the server knew it (a token's name,
    /// `os:<user>`). Not in the reference's audit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_by: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct RoundRecords {
    pub round: u32,
    pub steps: Vec<Record>,
}

/// One trace record, as the reference writes them (`type` tells which).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Step(StepRecord),
    Gate(Box<GateRecord>),
    Skip(SkipRecord),
    Policy(PolicyRecord),
    /// One identity's approval of a gate that needs more than one; not in the reference.
    Approval(ApprovalRecord),
}

impl Record {
    pub fn step_id(&self) -> &str {
        match self {
            Record::Step(record) => &record.step_id,
            Record::Gate(record) => &record.step_id,
            Record::Skip(record) => &record.step_id,
            Record::Policy(record) => &record.step_id,
            Record::Approval(record) => &record.step_id,
        }
    }
}

/// A step's final success or final failure (not one per failed attempt).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepRecord {
    pub step_id: String,
    /// Empty for steps that are not function steps.
    pub function_name: String,
    pub attempts: u32,
    /// From the last dispatch of the step to its result.
    pub duration_ms: u64,
    pub round: u32,
    pub round_start_step_id: Option<String>,
    pub agent: Option<String>,
    pub step_mode: String,
    pub child_flow_id: Option<String>,
    pub cache_hit: bool,
    pub cache_key: Option<String>,
    /// Wall-clock milliseconds when the result was accepted (or finally refused).
    pub at_ms: u64,
    /// The last attempt's violations, when the step finally failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GateRecord {
    pub step_id: String,
    pub outcome: String,
    pub rationale: String,
    pub resolved_by: String,
    /// Who the server knows resolved the gate, which `resolved_by` (the caller's own claim)
    /// cannot fake: the access token's name over HTTP (`stratum-mcp serve`, its console), the
    /// operating-system user (`os:<user>`) of the operator CLI or of a form answered in a
    /// stdio server's client. Absent for an agent's own call over stdio, a policy or a
    /// timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// How the person's decision reached the server, when it knows: `elicitation` (the
    /// agent's client asked the person in its own UI). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The client that asked the person, as it declared itself (name and version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// Every identity whose approval counted, in order, when the gate's rule decided who may
    /// approve (the last one is `actor`). Absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// The value approved with, when the gate's function declares `output` (it is also in
    /// the step's output, the person's typed decision). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The decision's id, with `value` (the seed's `review_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_id: Option<String>,
    pub duration_ms: u64,
    pub round: u32,
    pub round_start_step_id: Option<String>,
    pub at_ms: u64,
}

/// An approval of a gate that needs `min_approvals` distinct identities, before the last one:
/// the gate kept waiting. The gate record of the approval that completes the count lists
/// every approver.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalRecord {
    pub step_id: String,
    /// Who approved, as the server knows them (a token's name, `os:<user>`).
    pub identity: String,
    pub rationale: String,
    pub resolved_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// Distinct identities that have approved in this round, this one included.
    pub approvals: u32,
    pub min_approvals: u32,
    pub round: u32,
    pub round_start_step_id: Option<String>,
    pub at_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SkipRecord {
    pub step_id: String,
    pub skip_reason: String,
    pub round: u32,
    pub round_start_step_id: Option<String>,
    pub at_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyRecord {
    pub step_id: String,
    /// `flag`, `skip` or `skip_if`.
    pub effective_policy: String,
    pub resolved_outcome: String,
    pub rationale: String,
    pub round: u32,
    pub round_start_step_id: Option<String>,
    pub at_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::validate::Failure;
    use crate::state::FlowStatus;

    /// The `status` values a type's schema lists.
    fn listed<T: JsonSchema>() -> Vec<String> {
        let schema = schemars::schema_for!(T).to_value();
        schema
            .pointer("/properties/status/enum")
            .and_then(Value::as_array)
            .map(|values| {
                values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every flow status; the match makes a new variant a compile error here, so that the
    /// schemas' lists are revisited with it (clients reject a status a schema does not list).
    fn every_flow_status() -> Vec<FlowStatus> {
        let all = [
            FlowStatus::Running,
            FlowStatus::Complete,
            FlowStatus::Killed,
            FlowStatus::Failed,
            FlowStatus::BudgetExhausted,
            FlowStatus::Cancelled,
        ];
        for status in all {
            match status {
                FlowStatus::Running
                | FlowStatus::Complete
                | FlowStatus::Killed
                | FlowStatus::Failed
                | FlowStatus::BudgetExhausted
                | FlowStatus::Cancelled => {}
            }
        }
        all.to_vec()
    }

    #[test]
    fn the_schemas_list_every_status_the_runtime_answers_with() {
        let finished: Vec<&str> = every_flow_status()
            .into_iter()
            .filter(|status| status.is_finished())
            .map(FlowStatus::as_str)
            .collect();
        let resumed = listed::<StatusOnly>();
        let audited = listed::<Audit>();
        for status in &finished {
            assert!(
                resumed.iter().any(|s| s == status),
                "StatusOnly lacks {status}"
            );
            assert!(audited.iter().any(|s| s == status), "Audit lacks {status}");
        }
        assert!(audited.iter().any(|s| s == "in_progress"));
        let mut dispatched = vec!["execute_step"];
        for failure in [
            Failure::Schema,
            Failure::Guardrail,
            Failure::Ensure,
            Failure::NoResult,
        ] {
            match failure {
                Failure::Schema | Failure::Guardrail | Failure::Ensure | Failure::NoResult => {}
            }
            dispatched.push(failure.status());
        }
        let mut listed_dispatch = listed::<StepDispatch>();
        listed_dispatch.sort();
        dispatched.sort_unstable();
        assert_eq!(listed_dispatch, dispatched);
    }
}
