//! The tool table: each tool's name, title, description (written for the model that reads
//! it), the four annotation hints, and its input and output schemas, generated from the
//! argument and response types.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Value, json};

use super::args;
use super::background::{Cancelled, FlowPoll, FlowStarted, RunStarted, RunView};
use super::compact;
use super::gate_wait::GatePending;
use super::judge::{Judged, Judging};
use super::outputs::{SpecRejected, ToolError, Validation};
use crate::response::{
    ApprovalRecorded, Audit, Committed, ErrorResponse, FanOutReport, Finished, FlowDispatch,
    GateDispatch, IterationAborted, IterationReport, IterationStarted, NoTimeout, ParallelDispatch,
    StatusOnly, StepDispatch,
};

/// Which tool a call names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolName {
    Validate,
    Plan,
    StepDone,
    Audit,
    GateResolve,
    CheckTimeouts,
    SkipStep,
    Commit,
    Revert,
    IterationStart,
    IterationReport,
    IterationAbort,
    Resume,
    CompileSpeckit,
    ListWorkflows,
    DraftPipeline,
    AgentRun,
    AgentPoll,
    CancelAgentRun,
    FlowRunBg,
    FlowBgPoll,
    FlowCancelBg,
    ParallelDone,
    ParallelStart,
    ParallelPoll,
    ParallelAdvance,
    Judge,
    JudgePoll,
    GateWait,
}

/// One tool as clients see it.
pub struct ToolSpec {
    pub tool: ToolName,
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    input: fn() -> Schema,
    outputs: fn(&mut SchemaGenerator) -> Vec<Schema>,
}

/// The schemas of the types listed, registered in the generator.
macro_rules! any_of {
    ($($t:ty),* $(,)?) => {
        |generator: &mut SchemaGenerator| vec![$(generator.subschema_for::<$t>()),*]
    };
}

/// What a call that moves a flow answers: its next dispatch, its end, or why not.
const MOVES: fn(&mut SchemaGenerator) -> Vec<Schema> = any_of![
    StepDispatch,
    ParallelDispatch,
    GateDispatch,
    FlowDispatch,
    Finished,
    ErrorResponse,
    ToolError
];

/// What a gate decision answers: what [`MOVES`] answers, or an approval counted towards the
/// gate's `min_approvals` while it keeps waiting.
const DECIDES: fn(&mut SchemaGenerator) -> Vec<Schema> = any_of![
    StepDispatch,
    ParallelDispatch,
    GateDispatch,
    FlowDispatch,
    Finished,
    ApprovalRecorded,
    ErrorResponse,
    ToolError
];

fn input<T: JsonSchema>() -> Schema {
    schemars::schema_for!(T)
}

const NEXT_STEP: &str = "\
The answer's `status` says what to do next:
- `execute_step`: do the step yourself: follow `intent` with `inputs`, produce an object with the \
fields of `output_fields` that satisfies every `ensure`, then call stratum_step_done(flow_id, \
step_id, result). `routed_from` means an `on_fail` route moved the flow here; `violations` says why.
- `execute_flow`: a sub-flow started. Work through `child_step` (report to the child's `flow_id`). \
When the child answers `complete`, report that answer to the parent: \
stratum_step_done(parent_flow_id, parent_step_id, result=<the child's completion>).
- `parallel_dispatch`: a fan-out. Run each of `tasks` (its `prompt`; `depends_on` first) and \
report them all with stratum_parallel_done(flow_id, step_id, task_results, merge_status), or let \
the server run them: stratum_parallel_start, then stratum_parallel_poll.
- `await_gate`: a decision is needed, and the person was not asked in your client's form (or \
did not decide there). Hand it to them with stratum_gate_wait(flow_id, step_id), or, when it is \
yours to make, call stratum_gate_resolve(flow_id, step_id, outcome, rationale, resolved_by).
- `complete`: the flow finished; `output` is its result and `trace` its record. `killed` and \
`budget_exhausted` also end the flow.
- `error`: nothing changed; `error_type` and `message` say why.";

const RESULT_REFUSED: &str = "\
- `ensure_failed`, `schema_failed`, `guardrail_blocked`: the result was refused. Read \
`violations`, fix the work, and call stratum_step_done again for the same step; \
`retries_remaining` says how many attempts are left.
- `error` with `retries_exhausted`: the step failed for good and the flow with it. \
`wrong_step`: report the step the last dispatch named. `gate_step_requires_gate_resolve`: use \
stratum_gate_resolve.";

/// Every tool, in the order `tools/list` gives them.
pub static TOOLS: &[ToolSpec] = &[
    ToolSpec {
        tool: ToolName::Validate,
        name: "stratum_validate",
        title: "Check a Stratum spec",
        description: "Check a `.stratum.yaml` spec without running it. Send the YAML text, not a \
path. Returns `{valid, errors, warnings}` with every problem at once, each with `line`, `column`, \
`path`, `message`, a `suggestion` and, when the fix is mechanical, `fix.edits` to apply. Fix every \
error in one edit, then validate again or call stratum_plan.",
        read_only: true,
        destructive: false,
        idempotent: true,
        input: input::<args::ValidateArgs>,
        outputs: any_of![Validation, ToolError],
    },
    ToolSpec {
        tool: ToolName::Plan,
        name: "stratum_plan",
        title: "Start a Stratum flow",
        description: "Start running a flow of a `.stratum.yaml` spec: send the spec's YAML text \
(not a path), the flow's name and its inputs. The spec is checked first; if it has errors, the \
answer is `status: error` with `diagnostics` listing every problem (line, column, suggestion, fix): \
fix them all and call stratum_plan again. Otherwise the flow starts and the answer is its first \
dispatch; keep its `flow_id` for every later call.",
        read_only: false,
        destructive: false,
        idempotent: false,
        input: input::<args::PlanArgs>,
        outputs: any_of![
            StepDispatch,
            ParallelDispatch,
            GateDispatch,
            FlowDispatch,
            Finished,
            SpecRejected,
            ErrorResponse,
            ToolError
        ],
    },
    ToolSpec {
        tool: ToolName::StepDone,
        name: "stratum_step_done",
        title: "Report a step's result",
        description: "Report the result of the step the last dispatch named: `flow_id`, \
`step_id` and `result` (an object with the step's `output_fields`). Optional `usage` \
(`{tokens, dollars}` or `{input_tokens, output_tokens, model}`) counts against the flow's budget. \
The result is checked against the step's output schema, contract, guardrails and `ensure` \
expressions.",
        read_only: false,
        destructive: false,
        idempotent: false,
        input: input::<args::StepDoneArgs>,
        outputs: MOVES,
    },
    ToolSpec {
        tool: ToolName::Audit,
        name: "stratum_audit",
        title: "Read a flow's audit trail",
        description: "Read a flow's record, running or finished: `status` (`in_progress`, \
`complete`, `killed`, `failed`, `budget_exhausted`), the trace of the current round, earlier \
rounds, iterations, sub-flow audits, budget spent and durations. Read-only; call it after a flow \
ends to learn from it, or any time to see where a flow stands.",
        read_only: true,
        destructive: false,
        idempotent: true,
        input: input::<args::FlowArgs>,
        outputs: any_of![Audit, ErrorResponse, ToolError],
    },
    ToolSpec {
        tool: ToolName::GateResolve,
        name: "stratum_gate_resolve",
        title: "Resolve a gate",
        description: "Decide the gate the flow waits at (`await_gate`). `outcome`: `approve` \
(go on to the gate's `on_approve` step, or finish), `revise` (start a new round at `on_revise`; \
`error` `max_rounds_exceeded` when the flow's rounds are used up), or `kill` (end the flow, or run \
its `on_kill` cleanup step). `rationale` is recorded; `resolved_by` is `human`, `agent` or \
`system`: say `human` only when a person decided. A gate function with approval rules (the \
server's config file) takes decisions only from an identity the server knows (an HTTP token): \
over stdio this call gets `error` `identity_required` (call stratum_gate_wait instead); \
`not_an_approver` and `self_approval` (the flow's starter may not approve) refuse the decision; \
`approval_recorded` counts an approval while the gate waits for `approvals_needed` more.",
        read_only: false,
        destructive: true,
        idempotent: false,
        input: input::<args::GateResolveArgs>,
        outputs: DECIDES,
    },
    ToolSpec {
        tool: ToolName::GateWait,
        name: "stratum_gate_wait",
        title: "Hand a gate's decision to the person",
        description: "At a gate (`await_gate`), let the person decide, not you: the server asks \
them in your client's own form (MCP elicitation: approve, revise or kill, and why), showing the \
flow, the gate, what each decision leads to and the outputs of the steps before it. Their answer \
is applied as the gate's resolution (`resolved_by: human`, `via: elicitation`) and the answer is \
what the flow does next, as from stratum_gate_resolve. The call waits until they answer, the \
gate's `timeout` (the form is withdrawn and the timeout rule applies) or `wait_seconds`, sending \
progress notifications meanwhile. Answers `gate_pending` (with `how_to_decide`) when they decline \
or close the form, when nobody answers in time, or when the client cannot show a form; \
`approval_recorded` when the gate's rules want more approvers than this one.",
        read_only: false,
        destructive: true,
        idempotent: false,
        input: input::<args::GateWaitArgs>,
        outputs: any_of![
            StepDispatch,
            ParallelDispatch,
            GateDispatch,
            FlowDispatch,
            Finished,
            ApprovalRecorded,
            GatePending,
            ErrorResponse,
            ToolError
        ],
    },
    ToolSpec {
        tool: ToolName::CheckTimeouts,
        name: "stratum_check_timeouts",
        title: "Apply a gate's timeout",
        description: "Check whether the gate the flow waits at is past its `timeout`. If it is, \
the gate is killed as `system` at its deadline and the answer is `killed` (with `reason: timeout`) \
or the dispatch of its `on_kill` step; otherwise `no_timeout` with `remaining_seconds` or a \
`message` saying why nothing applies. Gates also expire on any other call of their flow.",
        read_only: false,
        destructive: true,
        idempotent: true,
        input: input::<args::FlowArgs>,
        outputs: any_of![
            NoTimeout,
            StepDispatch,
            ParallelDispatch,
            GateDispatch,
            FlowDispatch,
            Finished,
            ErrorResponse,
            ToolError
        ],
    },
    ToolSpec {
        tool: ToolName::SkipStep,
        name: "stratum_skip_step",
        title: "Skip the current step",
        description: "Skip the current step (not a gate) with a `reason`, recorded in the trace. \
Its output is null, so later expressions reading it see `None`. Answers with the next dispatch or \
the flow's completion.",
        read_only: false,
        destructive: false,
        idempotent: false,
        input: input::<args::SkipStepArgs>,
        outputs: MOVES,
    },
    ToolSpec {
        tool: ToolName::Commit,
        name: "stratum_commit",
        title: "Save a checkpoint",
        description: "Save the flow's progress under `label` (replacing a checkpoint of that \
name), so that stratum_revert can return to it. Answers `committed` with the labels the flow \
has.",
        read_only: false,
        destructive: false,
        idempotent: true,
        input: input::<args::CheckpointArgs>,
        outputs: any_of![Committed, ErrorResponse, ToolError],
    },
    ToolSpec {
        tool: ToolName::Revert,
        name: "stratum_revert",
        title: "Return to a checkpoint",
        description: "Return the flow to the checkpoint `label`: outputs, attempts, rounds and \
iterations after it are discarded, and the answer is the dispatch of the step it saved (with \
`reverted_to`). An unknown label answers `checkpoint_not_found` with the `available` ones.",
        read_only: false,
        destructive: true,
        idempotent: true,
        input: input::<args::CheckpointArgs>,
        outputs: MOVES,
    },
    ToolSpec {
        tool: ToolName::IterationStart,
        name: "stratum_iteration_start",
        title: "Start an iteration loop",
        description: "Start a loop on the current step, which must declare `max_iterations`. \
Then call stratum_iteration_report once per attempt until it answers `iteration_exit`, and \
report the loop's `final_result` with stratum_step_done.",
        read_only: false,
        destructive: false,
        idempotent: false,
        input: input::<args::IterationStartArgs>,
        outputs: any_of![IterationStarted, ErrorResponse, ToolError],
    },
    ToolSpec {
        tool: ToolName::IterationReport,
        name: "stratum_iteration_report",
        title: "Report one iteration",
        description: "Report one iteration's `result`. Answers `iteration_continue` (do another) \
or `iteration_exit` with `outcome` (`exit_success`: the exit criterion held; \
`exit_stagnation`; `exit_max`) and `final_result`, the result to send to stratum_step_done \
(the best one when the step has a `score_expr`).",
        read_only: false,
        destructive: false,
        idempotent: false,
        input: input::<args::IterationReportArgs>,
        outputs: any_of![IterationReport, ErrorResponse, ToolError],
    },
    ToolSpec {
        tool: ToolName::IterationAbort,
        name: "stratum_iteration_abort",
        title: "Stop an iteration loop",
        description: "Stop the active loop early with a `reason`. Answers `iteration_aborted` \
with the best result so far, if any; then report the step with stratum_step_done.",
        read_only: false,
        destructive: false,
        idempotent: false,
        input: input::<args::IterationAbortArgs>,
        outputs: any_of![IterationAborted, ErrorResponse, ToolError],
    },
    ToolSpec {
        tool: ToolName::Resume,
        name: "stratum_resume",
        title: "Resume a flow",
        description: "Get the current dispatch of a flow again: after a restart, a lost \
answer, or to pick up a flow another session started. Answers like stratum_plan; a finished \
flow answers `{status, flow_id}` with its final status.",
        read_only: false,
        destructive: false,
        idempotent: true,
        input: input::<args::FlowArgs>,
        outputs: any_of![
            StepDispatch,
            ParallelDispatch,
            GateDispatch,
            FlowDispatch,
            Finished,
            StatusOnly,
            ErrorResponse,
            ToolError
        ],
    },
    ToolSpec {
        tool: ToolName::CompileSpeckit,
        name: "stratum_compile_speckit",
        title: "Compile spec-kit tasks into a spec",
        description: "Turn a directory of spec-kit task files (`tasks/*.md`) into a \
`.stratum.yaml` spec: one step per task, in file-name order, `[P]` tasks in parallel, \
acceptance criteria as `ensure` expressions (`file X exists`, `file X contains Y`, `tests pass`, \
`no lint errors`) and the rest in the step's intent. Answers `{status: ok, yaml, flow_name, \
steps}`; run the yaml with stratum_plan(spec=yaml, flow=flow_name, \
inputs={project_context: ...}).",
        read_only: true,
        destructive: false,
        idempotent: true,
        input: input::<args::CompileSpeckitArgs>,
        outputs: any_of![
            crate::speckit::CompiledTasks,
            crate::speckit::SpeckitFailure,
            ToolError
        ],
    },
    ToolSpec {
        tool: ToolName::ListWorkflows,
        name: "stratum_list_workflows",
        title: "List the workflows of a directory",
        description: "List the `*.stratum.yaml` files of a directory that declare a `workflow:` \
block, with each workflow's name, description, inputs and path. Invalid specs and duplicate \
names are listed in `errors` (`file:line:column: message [code]`).",
        read_only: true,
        destructive: false,
        idempotent: true,
        input: input::<args::ListWorkflowsArgs>,
        outputs: any_of![crate::workflows::WorkflowList, ToolError],
    },
    ToolSpec {
        tool: ToolName::DraftPipeline,
        name: "stratum_draft_pipeline",
        title: "Save a pipeline draft",
        description: "Save a pipeline draft (`{name, phases: [...]}`) to \
`<project_dir>/.stratum/pipeline-draft.json` for the pipeline editor, replacing the previous \
draft. The draft's shape is checked first.",
        read_only: false,
        destructive: true,
        idempotent: true,
        input: input::<args::DraftPipelineArgs>,
        outputs: any_of![crate::draft::Saved, crate::draft::DraftFailure, ToolError],
    },
    ToolSpec {
        tool: ToolName::AgentRun,
        name: "stratum_agent_run",
        title: "Run an agent CLI on a task",
        description: "Launch an agent CLI (`claude`, `codex` or `opencode`) on `prompt` with \
optional `context` (JSON) and `schema` (the JSON Schema its answer must be an object of), in \
`cwd` under the server's root, with a deadline (`timeout`, default 1800 s). The agent sees only \
an allow-listed environment. Answers the run: `status` (`answered` with `result`, or `no_json`, \
`agent_error`, `crashed`, `timed_out`, `cancelled` with `reason`), its text tail and usage. With \
`background: true` answers `bg_started` and a `run_id` at once: follow it with \
stratum_agent_poll, end it with stratum_cancel_agent_run.",
        read_only: false,
        destructive: false,
        idempotent: false,
        input: input::<args::AgentRunArgs>,
        outputs: any_of![RunView, RunStarted, ToolError],
    },
    ToolSpec {
        tool: ToolName::AgentPoll,
        name: "stratum_agent_poll",
        title: "Look at an agent run",
        description: "Read an agent run by its `run_id`: `running` (with its last events and \
pid), or how it ended and its `result`. Read-only.",
        read_only: true,
        destructive: false,
        idempotent: true,
        input: input::<args::RunIdArgs>,
        outputs: any_of![RunView, ToolError],
    },
    ToolSpec {
        tool: ToolName::CancelAgentRun,
        name: "stratum_cancel_agent_run",
        title: "Cancel an agent run",
        description: "End a running agent run (`run_id`): its whole process group gets \
SIGTERM, then SIGKILL after a grace period, and the run is recorded `cancelled`. Answers \
`cancelled`, `already_finished`, `not_running` or `run_not_found`.",
        read_only: false,
        destructive: true,
        idempotent: true,
        input: input::<args::RunIdArgs>,
        outputs: any_of![Cancelled, ToolError],
    },
    ToolSpec {
        tool: ToolName::FlowRunBg,
        name: "stratum_flow_run_bg",
        title: "Let the server run a flow",
        description: "Hand a started flow (`flow_id` from stratum_plan) to the server: it runs \
each function and inline step through the agent CLI the step names (else `agent`, default \
`claude`), checks each answer exactly as stratum_step_done does, retries with the violations, \
and waits at gates for a person. While the server drives it, your own stratum_step_done, \
skip_step and revert on the flow are refused (`flow_leased`); gates are still yours to decide. \
Follow it with stratum_flow_bg_poll; take it back with stratum_flow_cancel_bg.",
        read_only: false,
        destructive: false,
        idempotent: true,
        input: input::<args::FlowRunBgArgs>,
        outputs: any_of![FlowStarted, ToolError],
    },
    ToolSpec {
        tool: ToolName::FlowBgPoll,
        name: "stratum_flow_bg_poll",
        title: "Follow a flow the server runs",
        description: "Where a flow the server drives stands: `running` (with the current \
step and its agent run), `paused_gate` (a person must decide), `queued`, `stopped` (handed \
back: `note` says why, e.g. a step kind no agent CLI runs), `cancelled`, or the flow's end \
(`complete`, `failed`, `killed`, `budget_exhausted`) with its `audit`. Read-only.",
        read_only: true,
        destructive: false,
        idempotent: true,
        input: input::<args::FlowArgs>,
        outputs: any_of![FlowPoll, ToolError],
    },
    ToolSpec {
        tool: ToolName::FlowCancelBg,
        name: "stratum_flow_cancel_bg",
        title: "Take a flow back from the server",
        description: "Stop the server driving a flow: its agent run is ended and the flow is \
left where it is, yours to continue with stratum_resume. Answers `cancelled`, `not_running` or \
`not_found`.",
        read_only: false,
        destructive: true,
        idempotent: true,
        input: input::<args::FlowArgs>,
        outputs: any_of![Cancelled, ToolError],
    },
    ToolSpec {
        tool: ToolName::ParallelDone,
        name: "stratum_parallel_done",
        title: "Report a parallel step's tasks",
        description: "After a `parallel_dispatch` answer, when you ran its tasks yourself: \
report each task of the envelope's `tasks` (`{task_id, status, result}`; `result` must satisfy \
the step's task contract when it has one) and how you merged their diffs (`merge_status`). \
`require` (all / any / N) counts the tasks the step expects: a task you leave out counts as \
failed. A retry re-dispatches only the tasks that failed, bounced or were left out, each with its \
violations in its `prompt`; tasks accepted before are listed in `kept` and must not be reported \
again. Answers with the next dispatch, a retry of this step, or the flow's end.",
        read_only: false,
        destructive: false,
        idempotent: false,
        input: input::<args::ParallelDoneArgs>,
        outputs: MOVES,
    },
    ToolSpec {
        tool: ToolName::ParallelStart,
        name: "stratum_parallel_start",
        title: "Let the server run a parallel step's tasks",
        description: "Hand the tasks of the current `parallel_dispatch` step to the server: it \
runs each through the agent CLI the step names, respecting `depends_on` and `max_concurrent`, each \
with its `task_timeout`, in its own git worktree (`isolation: worktree`), runs the \
`pre_merge_verify` commands, captures each diff and, with `merge: sequential_apply`, applies \
them to the project in dependency order (a conflict bounces its task). Then it evaluates the \
step, unless the step sets `defer_advance` (call stratum_parallel_advance). While it runs, your \
own calls that change the flow are refused (`flow_leased`). Follow it with \
stratum_parallel_poll; answers `started` with the tasks, or, with `wait_seconds`, what \
stratum_parallel_poll with that wait answers.",
        read_only: false,
        destructive: false,
        idempotent: true,
        input: input::<args::ParallelStepArgs>,
        // A step whose tasks cannot be built when it starts fails an attempt, which may move the
        // flow on (`on_fail`) or end it.
        outputs: any_of![
            FanOutReport,
            StepDispatch,
            ParallelDispatch,
            GateDispatch,
            FlowDispatch,
            Finished,
            ErrorResponse,
            ToolError
        ],
    },
    ToolSpec {
        tool: ToolName::ParallelPoll,
        name: "stratum_parallel_poll",
        title: "Follow a parallel step's tasks",
        description: "Where the tasks of a parallel_dispatch step stand: each task's state \
(pending, running, complete, failed, cancelled), result, violations, pre-merge bounce, diff and \
merge state, with a summary, `require_satisfied`, `can_advance`, and `running` while the \
server still works on them. Once the server evaluated the step, `outcome` holds what it \
answered (the next dispatch, a retry of this step, or the flow's end). With `wait_seconds` \
the answer waits (up to 600 s) until the tasks settle and the step is evaluated, sending a \
progress notification as each task settles and every 5 s between when the request carries a \
`progressToken`. Read-only.",
        read_only: true,
        destructive: false,
        idempotent: true,
        input: input::<args::ParallelStepArgs>,
        outputs: any_of![FanOutReport, ErrorResponse, ToolError],
    },
    ToolSpec {
        tool: ToolName::ParallelAdvance,
        name: "stratum_parallel_advance",
        title: "Evaluate a parallel step the server ran",
        description: "For a parallel_dispatch step with `defer_advance` whose tasks the server \
ran: once stratum_parallel_poll says `can_advance`, merge the diffs yourself if the step's merge \
is `manual`, then call this with your `merge_status`; the step is evaluated (require, ensures, \
retries, on_fail). Answers with the next dispatch, a retry, or the flow's end.",
        read_only: false,
        destructive: false,
        idempotent: false,
        input: input::<args::ParallelAdvanceArgs>,
        outputs: MOVES,
    },
    ToolSpec {
        tool: ToolName::Judge,
        name: "stratum_judge",
        title: "Let the server judge a judge step",
        description: "At a judge step (`execute_step` with `step_mode: judge`): send the \
`artifacts` its predicates read (`{name: text}`, staged as `artifacts/<name>.txt`) and the \
project files the work changed (`modified_files`, staged as `modified/<path>`). The server \
decides each predicate: deterministic ones by evaluating their statement over the staged files, \
verified and judged ones by asking an agent CLI that must cite `path:line` of a staged file \
(unless the stakes are `cheap`); with `paranoid` stakes a `met` is read again cold by a fresh \
agent run, on another agent CLI when one is installed, read-only, and anything but `met` from it \
makes the predicate ambiguous (`tier_disagreements`). The verdict binds: all met completes the step (through its \
ensures), one not met fails the attempt with the findings as violations (a retry or on_fail \
follows), ambiguous waits for a person (`await_gate`: stratum_gate_resolve on this step). \
stratum_step_done is refused on a judge step. Answers `judged` with the `verdict` and `next`: \
what the flow does now. The agent tiers run on the server while the call waits, with progress \
notifications; with `wait_seconds` (0 to 600) the call answers `judging` once that wait is over, \
and stratum_judge_poll follows the tiers.",
        read_only: false,
        destructive: false,
        idempotent: false,
        input: input::<args::JudgeArgs>,
        outputs: any_of![Judged, Judging, ToolError],
    },
    ToolSpec {
        tool: ToolName::JudgePoll,
        name: "stratum_judge_poll",
        title: "Follow a judge step's tiers",
        description: "Where the stratum_judge call of a judge step stands: `judging` (how many \
predicates are decided, of how many) while its agent tiers run on the server, then what \
stratum_judge answers: `judged` with the `verdict` and `next`. With `wait_seconds` (up to 600) the \
answer waits for the verdict, with progress notifications meanwhile. Read-only.",
        read_only: true,
        destructive: false,
        idempotent: true,
        input: input::<args::JudgePollArgs>,
        outputs: any_of![Judged, Judging, ToolError],
    },
];

/// The tool of that name.
pub fn find(name: &str) -> Option<&'static ToolSpec> {
    TOOLS.iter().find(|spec| spec.name == name)
}

impl ToolSpec {
    /// The tool as `tools/list` shows it.
    pub fn to_tool(&self) -> Tool {
        let annotations = ToolAnnotations::with_title(self.title)
            .read_only(self.read_only)
            .destructive(self.destructive)
            .idempotent(self.idempotent)
            .open_world(false);
        Tool::new(
            self.name,
            self.full_description(),
            Arc::new(self.input_schema()),
        )
        .with_title(self.title)
        .with_raw_output_schema(Arc::new(self.output_schema()))
        .with_annotations(annotations)
    }

    fn full_description(&self) -> String {
        match self.tool {
            ToolName::Plan
            | ToolName::GateResolve
            | ToolName::SkipStep
            | ToolName::Resume
            | ToolName::ParallelDone
            | ToolName::ParallelAdvance => {
                format!("{}\n\n{NEXT_STEP}", self.description)
            }
            ToolName::StepDone => format!("{}\n\n{NEXT_STEP}\n{RESULT_REFUSED}", self.description),
            _ => self.description.to_owned(),
        }
    }

    pub fn input_schema(&self) -> JsonObject {
        match (self.input)().to_value() {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        }
    }

    /// What `tools/list` declares: the full schema folded by [`compact::compact`] into a flat
    /// object schema (the `status` enum and the fields every shape carries, typed), cheap for a
    /// client that checks every answer against it. The full schema is published in
    /// `runtime/cli/schemas/tools/`.
    pub fn output_schema(&self) -> JsonObject {
        let description = format!(
            "the answers of {}, folded; the full schema: runtime/cli/schemas/tools/{}",
            self.name,
            self.schema_file()
        );
        match compact::compact(&Value::Object(self.full_output_schema()), &description) {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        }
    }

    /// The name of the full schema's file in `runtime/cli/schemas/tools/`.
    pub fn schema_file(&self) -> String {
        format!("{}.output.schema.json", self.name)
    }

    /// The documented output schema: an object schema whose `anyOf` lists every shape the tool
    /// answers with, each with its fields' descriptions, in `$defs`. The root is an object, as
    /// clients before the 2026 protocol require to keep structured content.
    pub fn full_output_schema(&self) -> JsonObject {
        let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
        let shapes: Vec<Value> = (self.outputs)(&mut generator)
            .into_iter()
            .map(Schema::to_value)
            .collect();
        let definitions = generator.take_definitions(true);
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": self.name,
            "description": format!("Every answer of the MCP tool {}: {}", self.name, self.title),
            "type": "object",
            "anyOf": shapes,
            "$defs": definitions,
        });
        match schema {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        }
    }
}
