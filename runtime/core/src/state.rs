//! The durable state of flow executions, in the pieces a store keeps apart so that a command
//! writes only what it changed.
//!
//! - [`FlowHeader`]: one per execution, small and of fixed size: where the cursor is, the
//!   round, the terminal status, the budget ledger, the active iteration, the version.
//! - [`StepState`]: one per step that has any state (an output, attempts, an iteration), keyed
//!   by the step's index in the plan's flow.
//! - [`Event`]s: the append-only trace (step, gate, skip and policy records, iteration
//!   reports), numbered per flow.
//! - [`Checkpoint`]s: named snapshots, written only by `commit`.
//!
//! Invariant: nothing here is derived from the spec again; a header names its plan by checksum
//! and its flow by index, and the plan is immutable.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::FlowId;
use crate::response::Record;

/// Where a flow's cursor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cursor {
    /// The step at this index of the flow is current.
    Step(u32),
    /// Past the last step: the flow has finished, or finishes on the next look.
    End,
}

/// How an execution stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowStatus {
    Running,
    Complete,
    Killed,
    /// A step exhausted its attempts with no `on_fail`, or routing looped past its bound.
    Failed,
    BudgetExhausted,
    /// A child flow whose parent step moved on without it (skipped, cleared by routing or a
    /// revise, reverted): it will never be reported, so it stops.
    Cancelled,
}

impl FlowStatus {
    pub fn is_finished(self) -> bool {
        self != FlowStatus::Running
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FlowStatus::Running => "running",
            FlowStatus::Complete => "complete",
            FlowStatus::Killed => "killed",
            FlowStatus::Failed => "failed",
            FlowStatus::BudgetExhausted => "budget_exhausted",
            FlowStatus::Cancelled => "cancelled",
        }
    }
}

/// One flow execution, without its steps and trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowHeader {
    pub id: FlowId,
    /// The checksum of the plan it runs on.
    pub plan: String,
    /// The index of its flow in the plan.
    pub flow: u32,
    pub flow_name: String,
    pub inputs: Value,
    pub cursor: Cursor,
    pub status: FlowStatus,
    /// Why a failed flow failed: `retries_exhausted`, `routing_loop`, `output_contract_failed`.
    pub error_type: Option<String>,
    /// A gate was killed and routed to a cleanup step: the flow reports `killed` when the
    /// cleanup is done.
    pub killing: bool,
    pub round: u32,
    /// Where the current round started (the `on_revise` target), by index.
    pub round_start: Option<u32>,
    /// Wall-clock milliseconds.
    pub started_ms: u64,
    pub updated_ms: u64,
    pub finished_ms: Option<u64>,
    /// When the current step was dispatched; kept across restarts so that gate timeouts fire.
    pub dispatched_ms: Option<u64>,
    /// The step the iteration loop in progress belongs to.
    pub active_iteration: Option<u32>,
    pub budget: Option<BudgetLedger>,
    /// The final output, once finished.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "kept_null"
    )]
    pub output: Option<Value>,
    pub parent: Option<ParentLink>,
    /// The identity that started the flow (a child flow: its parent's), when the server
    /// knew it: a token's name or `os:<user>`. A gate whose rule forbids self-approval
    /// refuses this identity's approval. Absent in flows stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_by: Option<String>,
    /// How many events the flow has written: the next event's number.
    pub events: u64,
    /// How many child flows it has started: keeps derived ids unique.
    pub children: u64,
    /// Bumped by every command that changes the flow: a compare-and-set guard for stores.
    pub version: u64,
}

/// A child flow's place in its parent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentLink {
    pub flow: FlowId,
    pub step: u32,
}

/// What one step of one execution has: absent steps have the default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepState {
    /// Attempts at a result since the step was last entered fresh.
    pub attempts: u32,
    /// Its accepted result (for a step that failed and routed by `on_fail`, the failing one).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "kept_null"
    )]
    pub output: Option<Value>,
    pub skipped: bool,
    /// How often routing (`on_fail`, `next`, gate approval) entered it again in this round.
    pub entries: u32,
    /// The child execution a flow step runs.
    pub child: Option<FlowId>,
    pub iteration: Option<IterationState>,
    /// A judge step's verdict that came back `ambiguous`: a person decides it, as at a gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_pending: Option<Value>,
    /// The tasks of a parallel or pipeline step (see [`FanOutState`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fan_out: Option<FanOutState>,
    /// A gate's approvals so far, when its rule asks for more than one identity: cleared when
    /// the gate is decided, and counted only in the round they were given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<Approval>,
}

/// One identity's approval of a gate that needs several (`min_approvals`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub identity: String,
    /// The round it was given in: an approval of an earlier round's work never counts.
    pub round: u32,
    pub at_ms: u64,
}

impl StepState {
    pub fn is_empty(&self) -> bool {
        *self == StepState::default()
    }
}

/// The tasks of a parallel (or pipeline) step. It lives in the step's own row, so a second
/// fan-out step, or the same step entered again by routing, starts from nothing; within the
/// step every task carries the attempt that dispatched it, so a result for an earlier
/// attempt is told from one for this attempt: task state is keyed by (flow, step, attempt,
/// task).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FanOutState {
    /// The step's attempt the tasks are dispatched for, from 1.
    pub attempt: u32,
    /// Who runs the tasks: `None` until the agent receives the envelope (consumer) or the
    /// server starts them.
    pub mode: Option<FanOutMode>,
    /// The commit every task's worktree starts from (server dispatch with worktrees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// Every task the step expects, in dependency order: the ones accepted in an earlier
    /// attempt and kept, and the ones dispatched in this one.
    pub tasks: Vec<TaskState>,
    /// The consumer's `merge_status` of the last report, or the server's merge outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_status: Option<Value>,
    /// The step's `pre_merge_verify` commands for this attempt, read when it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifyCommands>,
    /// A pipeline's items (its `source`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<Value>,
    /// What the previous attempt bounced (conflicts, failed pre-merge checks), for the
    /// envelope of this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bounced: Vec<Value>,
}

/// Pre-merge commands, and whether the spec wrote them (a `$` reference reads them from the
/// flow's data, which the server runs only within an operator's allow-list).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VerifyCommands {
    pub commands: Vec<String>,
    pub from_spec: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FanOutMode {
    /// The agent runs the tasks and reports them with `stratum_parallel_done`.
    Consumer,
    /// The server runs them through its connectors.
    Server,
}

impl FanOutState {
    pub fn task(&self, id: &str) -> Option<&TaskState> {
        self.tasks.iter().find(|task| task.id == id)
    }

    /// The tasks dispatched in the current attempt.
    pub fn dispatched(&self) -> impl Iterator<Item = &TaskState> {
        self.tasks
            .iter()
            .filter(move |task| task.attempt == self.attempt)
    }
}

/// One task of a fan-out step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskState {
    pub id: String,
    /// The element of `source` it was made from (a pipeline: the item), as it was.
    pub element: Value,
    /// What the agent is told: the step's template rendered for this task, with the
    /// violations of its previous attempt. Empty when it could not be rendered (the task is
    /// then failed with `template_field_missing`).
    pub prompt: String,
    pub depends_on: Vec<String>,
    /// Its prompt waits for the result of its one dependency (`{prev}` in a parallel step's
    /// template): it is rendered once that completes, and the task dispatched after.
    #[serde(default, skip_serializing_if = "is_false")]
    pub awaiting_prev: bool,
    /// The connector that runs it (server dispatch), as the spec names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Seconds it may run (server dispatch).
    pub timeout_s: u64,
    /// The step attempt that dispatched it last.
    pub attempt: u32,
    pub status: TaskStatus,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "kept_null"
    )]
    pub result: Option<Value>,
    /// Why it failed, in this attempt (fed to its next prompt).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
    /// A pre-merge check or merge that refused its changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounce: Option<Value>,
    /// Its changes (`git diff --binary` against the base), when captured: where they are. The
    /// text is in the store's diff rows (see [`crate::store::DiffKey`]), written once, so
    /// that rewriting the step's row on every task event does not rewrite every diff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_ref: Option<DiffRef>,
    /// The text of its changes as rows written before diffs had rows of their own held it;
    /// read (and merged) as it is, never written now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Whether its changes are in the flow's working tree (server `sequential_apply`).
    #[serde(default)]
    pub merge: MergeState,
    /// The agent run carrying it out (server dispatch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Where a pipeline task stands: its item, stage and lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<Slot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<u64>,
}

/// The most bytes of diff a fan-out step's tasks may hold together: a task whose diff would
/// take them past it fails (its retry can split the work) rather than fill the store.
pub const MAX_STEP_DIFF_BYTES: u64 = 256 * 1024 * 1024;

/// A task's diff as its step's row refers to it: the size and SHA-256 of the text in its diff
/// row, so that a row the key no longer holds (overwritten when the step was entered again,
/// before a revert brought this reference back) is told from the diff it names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffRef {
    /// The text's length in bytes.
    pub bytes: u64,
    /// The text's SHA-256, lower-case hex.
    pub sha256: String,
}

impl DiffRef {
    pub fn of(text: &str) -> DiffRef {
        use sha2::{Digest, Sha256};
        DiffRef {
            bytes: u64::try_from(text.len()).unwrap_or(u64::MAX),
            sha256: Sha256::digest(text.as_bytes())
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect(),
        }
    }

    /// Whether `text` is the diff this refers to.
    pub fn names(&self, text: &str) -> bool {
        *self == DiffRef::of(text)
    }
}

/// A pipeline task's place: item `item` (from 0) at stage `stage`, in lane `lane` of the
/// stage's fan-out region. `exited`: its stage's `exit_when` held, so the item's later
/// stages are skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    pub item: u32,
    pub stage: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<u32>,
    #[serde(default)]
    pub exited: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    #[default]
    Pending,
    Running,
    Complete,
    Failed,
    /// Not run, or ended, because the step could no longer use it.
    Cancelled,
    /// A pipeline stage its `when` or an earlier `exit_when` left out.
    Skipped,
}

impl TaskStatus {
    pub fn is_terminal(self) -> bool {
        !matches!(self, TaskStatus::Pending | TaskStatus::Running)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Running => "running",
            TaskStatus::Complete => "complete",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Skipped => "skipped",
        }
    }
}

/// Where a task's changes stand in the server's sequential merge. `Merging` is written before
/// its patch is applied, so a driver that dies in between finds out on restart whether the
/// patch is already in the tree (applied exactly once).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeState {
    #[default]
    Unmerged,
    Merging,
    Merged,
    Conflict,
}

/// An iteration loop's state on one step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IterationState {
    pub active: bool,
    /// Reports received.
    pub count: u32,
    /// How the last loop ended (`exit_success`, …), until the step's result is accepted.
    pub outcome: Option<String>,
    pub best: Option<Best>,
    /// Every score reported, in order.
    pub scores: Vec<f64>,
    /// Iterations since the best score last improved.
    pub since_best: u32,
    /// Fingerprints of the last results, newest last (at most [`FINGERPRINTS_KEPT`]).
    pub fingerprints: Vec<String>,
    pub accumulator: Option<Accumulator>,
}

/// How many result fingerprints stagnation compares.
pub const FINGERPRINTS_KEPT: usize = 3;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Best {
    pub score: f64,
    pub iteration: u32,
    pub result: Value,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Accumulator {
    pub items: Vec<Value>,
    /// The dedup key of every item, in the items' order.
    pub keys: Vec<String>,
    pub dry_streak: u32,
}

/// A flow's budget: its caps and what it has spent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BudgetLedger {
    pub caps: BudgetCaps,
    pub consumed: BudgetConsumed,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BudgetCaps {
    pub ms: Option<u64>,
    pub usd: Option<f64>,
    pub max_agent_dispatches: Option<u64>,
    pub max_tokens: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BudgetConsumed {
    pub wall_s: f64,
    pub dispatches: u64,
    pub tokens: u64,
    pub dollars: f64,
}

/// One entry of a flow's append-only trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Its number in the flow, from 0.
    pub seq: u64,
    pub round: u32,
    /// Undone by a `revert`: kept for the record, left out of traces.
    pub reverted: bool,
    pub body: EventBody,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventBody {
    Record(Record),
    /// One `stratum_iteration_report` (or abort) of a step.
    Iteration {
        step_id: String,
        report: Value,
    },
    /// A result that failed its checks (a retry, the step's `on_fail` or the flow's failure
    /// follows): kept so that people can read every attempt's violations, which the trace's
    /// step record keeps only for the last. Not part of any trace the reference defines.
    Attempt(FailedAttempt),
}

/// One refused result of a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailedAttempt {
    pub step_id: String,
    /// Its number since the step was last entered fresh, from 1.
    pub attempt: u32,
    /// `ensure_failed`, `schema_failed` or `guardrail_blocked`.
    pub status: String,
    pub violations: Vec<String>,
    /// Attempts still allowed after this one (0: the step failed for good).
    pub retries_remaining: u32,
    pub at_ms: u64,
}

/// Reads an `Option<Value>` field that is present as `Some`, even when it is `null`: with
/// `skip_serializing_if = "Option::is_none"` and `default`, `None` is left out and `Some(null)`
/// written as `null`, so that a stored state reads back as it was (plain `Option<Value>` reads
/// `null` as `None`, and a flow that ended with a null output would lose it).
fn is_false(value: &bool) -> bool {
    !*value
}

fn kept_null<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// A named snapshot of everything `revert` restores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub label: String,
    pub cursor: Cursor,
    pub killing: bool,
    pub round: u32,
    pub round_start: Option<u32>,
    pub active_iteration: Option<u32>,
    pub children: u64,
    /// Events numbered from this on are undone by a revert.
    pub events: u64,
    pub steps: Vec<(u32, StepState)>,
}
