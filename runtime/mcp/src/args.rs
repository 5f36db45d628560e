//! Each tool's arguments: one type per tool, whose doc comments become the argument
//! descriptions of its input schema, and one parser that names the argument at fault.

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::limits;

/// Why a call's arguments were refused: which argument, and what to send instead.
#[derive(Clone, Debug, PartialEq)]
pub struct ArgumentError {
    pub argument: Option<String>,
    pub message: String,
}

/// Reads a tool's arguments, refusing oversized or deeply nested values first so that no
/// later stage ever sees them.
pub fn parse<T: DeserializeOwned>(
    tool: &str,
    arguments: Map<String, Value>,
) -> Result<T, ArgumentError> {
    for (name, value) in &arguments {
        limits::check_argument(name, value).map_err(|message| ArgumentError {
            argument: Some(name.clone()),
            message,
        })?;
    }
    serde_path_to_error::deserialize(Value::Object(arguments)).map_err(|error| {
        let argument = error
            .path()
            .iter()
            .next()
            .map(|segment| segment.to_string());
        // serde speaks of Rust's maps and sequences; agents send JSON objects and arrays.
        let inner = error
            .inner()
            .to_string()
            .replace("a map", "an object")
            .replace("a sequence", "an array");
        let message = if let Some(field) = inner.strip_prefix("missing field ") {
            format!("{tool} needs the argument {field}")
        } else if inner.starts_with("unknown field") {
            inner.replacen("unknown field", "unknown argument", 1)
        } else if argument.is_some() {
            format!("argument `{}`: {inner}", error.path())
        } else {
            inner
        };
        ArgumentError { argument, message }
    })
}

/// `stratum_validate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateArgs {
    /// The spec's YAML text (the content of a `.stratum.yaml` file, not its path).
    pub spec: String,
}

/// `stratum_plan`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanArgs {
    /// The spec's YAML text (the content of a `.stratum.yaml` file, not its path).
    pub spec: String,
    /// The flow to run. Omit it to run the spec's `workflow.entry` flow, or its only flow.
    #[serde(default)]
    pub flow: Option<String>,
    /// The flow's inputs, by the names its `input` declares.
    #[serde(default)]
    pub inputs: Option<Map<String, Value>>,
}

/// `stratum_step_done`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepDoneArgs {
    /// The `flow_id` of the dispatch being answered.
    pub flow_id: String,
    /// The `step_id` of the dispatch being answered.
    pub step_id: String,
    /// The step's output: an object with the fields of its `output_fields`. For a flow step,
    /// the child flow's completion (or just its `output`).
    pub result: Map<String, Value>,
    /// What the step cost, for budgets: `{"tokens": n, "dollars": x}` or
    /// `{"input_tokens": n, "output_tokens": m, "model": "claude-sonnet-4"}`.
    #[serde(default)]
    pub usage: Option<Map<String, Value>>,
}

/// Tools that name only a flow: `stratum_audit`, `stratum_check_timeouts`, `stratum_resume`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowArgs {
    /// The flow's id, as `stratum_plan` returned it.
    pub flow_id: String,
}

/// `stratum_judge`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JudgeArgs {
    pub flow_id: String,
    /// The judge step (`step_id` of its `execute_step` dispatch, `step_mode: judge`).
    pub step_id: String,
    /// The artifacts the predicates read, by name: each is staged as
    /// `artifacts/<name>.txt` (names: letters, digits, '_', '.', '-').
    #[serde(default)]
    pub artifacts: Map<String, Value>,
    /// Files of the project the work changed, relative to it: staged as `modified/<path>`.
    #[serde(default)]
    pub modified_files: Option<Vec<String>>,
    /// The dispatch's predicates; leave out, or send them unchanged.
    #[serde(default)]
    pub predicates: Option<Vec<Value>>,
    /// The dispatch's stakes; leave out, or send them unchanged.
    #[serde(default)]
    pub stakes: Option<String>,
    /// The dispatch's budget; leave out, or send it unchanged.
    #[serde(default)]
    pub budget: Option<Value>,
    /// Wait at most this many seconds (up to 600) for the verdict; then the answer is
    /// `judging` and stratum_judge_poll follows the tiers (0: answer at once). Left out: wait
    /// until the verdict, as the reference does, with progress notifications meanwhile.
    #[serde(default)]
    #[schemars(range(max = 600))]
    pub wait_seconds: Option<u64>,
}

/// `stratum_judge_poll`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JudgePollArgs {
    pub flow_id: String,
    /// The judge step.
    pub step_id: String,
    /// Wait up to this many seconds (at most 600) for the verdict, with progress
    /// notifications meanwhile; 0 or left out: answer at once.
    #[serde(default)]
    #[schemars(range(max = 600))]
    pub wait_seconds: u64,
}

/// A `wait_seconds` within [`limits::MAX_WAIT_SECONDS`].
pub fn check_wait(seconds: u64) -> Result<(), ArgumentError> {
    if seconds > limits::MAX_WAIT_SECONDS {
        return Err(ArgumentError {
            argument: Some("wait_seconds".to_owned()),
            message: format!(
                "wait_seconds is {seconds}, more than the {} a call may wait; wait at most {} \
                 and poll again",
                limits::MAX_WAIT_SECONDS,
                limits::MAX_WAIT_SECONDS
            ),
        });
    }
    Ok(())
}

/// `stratum_parallel_done`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParallelDoneArgs {
    pub flow_id: String,
    /// The parallel_dispatch step (`step_id` of the envelope).
    pub step_id: String,
    /// One entry per task of the envelope's `tasks`: `{task_id, status: "complete" |
    /// "failed", result}`. A task not listed counts as failed; `require` is counted over the
    /// tasks the step expects, never over this list.
    pub task_results: Vec<Value>,
    /// How the task diffs merged: `"clean"`, `"conflict"`, or `{status, bounced_tasks:
    /// [{task_id, reason: "merge_conflict" | "gate_failed", files, command?, exit_code?,
    /// excerpt?}]}`; a bounced task runs again on the retry.
    pub merge_status: Value,
}

/// `stratum_parallel_start` and `stratum_parallel_poll`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParallelStepArgs {
    pub flow_id: String,
    /// The parallel_dispatch step.
    pub step_id: String,
    /// Wait up to this many seconds (at most 600) for the tasks to settle before answering,
    /// with a progress notification (tasks settled of total, the latest one) each time a task
    /// settles and every few seconds between, when the request carries a `progressToken`.
    /// Left out or 0: answer at once.
    #[serde(default)]
    #[schemars(range(max = 600))]
    pub wait_seconds: u64,
}

/// `stratum_parallel_start`'s and `stratum_parallel_poll`'s arguments, `wait_seconds` within
/// its bound.
pub fn parallel_step(
    tool: &str,
    arguments: Map<String, Value>,
) -> Result<ParallelStepArgs, ArgumentError> {
    let args: ParallelStepArgs = parse(tool, arguments)?;
    if args.wait_seconds > limits::MAX_WAIT_SECONDS {
        return Err(ArgumentError {
            argument: Some("wait_seconds".to_owned()),
            message: format!(
                "wait_seconds is {}, more than the {} a call may wait; wait at most {} and call \
                 stratum_parallel_poll again",
                args.wait_seconds,
                limits::MAX_WAIT_SECONDS,
                limits::MAX_WAIT_SECONDS
            ),
        });
    }
    Ok(args)
}

/// `stratum_gate_wait`'s arguments, `wait_seconds` within its bound.
pub fn gate_wait(tool: &str, arguments: Map<String, Value>) -> Result<GateWaitArgs, ArgumentError> {
    let args: GateWaitArgs = parse(tool, arguments)?;
    if let Some(seconds) = args.wait_seconds
        && !(1..=crate::gate_wait::MAX_WAIT_SECONDS).contains(&seconds)
    {
        return Err(ArgumentError {
            argument: Some("wait_seconds".to_owned()),
            message: format!(
                "wait_seconds is {seconds}; wait between 1 and {} seconds, or leave it out to \
                 wait until the gate's timeout",
                crate::gate_wait::MAX_WAIT_SECONDS
            ),
        });
    }
    Ok(args)
}

/// `stratum_parallel_advance`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParallelAdvanceArgs {
    pub flow_id: String,
    /// The parallel_dispatch step, its tasks settled (`can_advance` in the poll).
    pub step_id: String,
    /// How you merged the tasks' diffs (`"clean"`, `"conflict"` or `{status,
    /// bounced_tasks}`); leave it out when the server merged them.
    #[serde(default)]
    pub merge_status: Option<Value>,
}

/// `stratum_gate_resolve`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateResolveArgs {
    pub flow_id: String,
    /// The gate step waiting (`step_id` of the `await_gate` dispatch).
    pub step_id: String,
    /// `approve`, `revise` or `kill`.
    pub outcome: String,
    /// Why: kept in the audit trail.
    pub rationale: String,
    /// Who decided: `human`, `agent` or `system`.
    pub resolved_by: String,
    /// When the gate's function declares `output`: the value approved with, an object of that
    /// contract (checked; it becomes the step's output with who decided, why and when).
    #[serde(default)]
    pub value: Option<serde_json::Value>,
}

/// `stratum_gate_wait`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateWaitArgs {
    pub flow_id: String,
    /// The gate step waiting (`step_id` of the `await_gate` dispatch).
    pub step_id: String,
    /// How long to wait for the person, in seconds (at most 86400): by default until the
    /// gate's `timeout`, or an hour when it has none.
    #[serde(default)]
    #[schemars(range(min = 1, max = 86400))]
    pub wait_seconds: Option<u64>,
}

/// `stratum_skip_step`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkipStepArgs {
    pub flow_id: String,
    /// The current step (not a gate).
    pub step_id: String,
    /// Why it is skipped: kept in the audit trail.
    pub reason: String,
}

/// `stratum_commit` and `stratum_revert`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointArgs {
    pub flow_id: String,
    /// The checkpoint's name.
    pub label: String,
}

/// `stratum_iteration_start`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IterationStartArgs {
    pub flow_id: String,
    /// The current step; it must declare `max_iterations`.
    pub step_id: String,
}

/// `stratum_iteration_report`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IterationReportArgs {
    pub flow_id: String,
    pub step_id: String,
    /// This iteration's result: an object of the step's output fields.
    pub result: Map<String, Value>,
}

/// `stratum_iteration_abort`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IterationAbortArgs {
    pub flow_id: String,
    pub step_id: String,
    /// Why the loop stops early.
    pub reason: String,
}

/// `stratum_compile_speckit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompileSpeckitArgs {
    /// The directory of spec-kit task files (`tasks/*.md`), relative to the server's working
    /// directory or absolute.
    pub tasks_dir: String,
    /// The name of the generated flow.
    #[serde(default = "default_flow_name")]
    pub flow_name: String,
}

fn default_flow_name() -> String {
    "tasks".to_owned()
}

/// `stratum_list_workflows`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListWorkflowsArgs {
    /// The directory to scan (not recursively) for `*.stratum.yaml` files.
    #[serde(default = "current_dir")]
    pub workflows_dir: String,
}

/// `stratum_draft_pipeline`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DraftPipelineArgs {
    /// The pipeline draft: `{"name": ..., "phases": [...]}`.
    pub draft: Map<String, Value>,
    /// The project whose `.stratum/pipeline-draft.json` receives it.
    #[serde(default = "current_dir")]
    pub project_dir: String,
}

fn current_dir() -> String {
    ".".to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse_step_done(value: Value) -> Result<StepDoneArgs, ArgumentError> {
        let Value::Object(map) = value else {
            return Err(ArgumentError {
                argument: None,
                message: "not an object".to_owned(),
            });
        };
        parse("stratum_step_done", map)
    }

    #[test]
    fn errors_name_the_argument() {
        let wrong_type = parse_step_done(json!({"flow_id": "f", "step_id": "s", "result": "ok"}));
        let error = wrong_type.err();
        assert_eq!(
            error.as_ref().and_then(|e| e.argument.as_deref()),
            Some("result")
        );
        assert_eq!(
            error.map(|e| e.message),
            Some("argument `result`: invalid type: string \"ok\", expected an object".to_owned())
        );
        let missing = parse_step_done(json!({"flow_id": "f", "step_id": "s"})).err();
        assert_eq!(
            missing.map(|e| e.message),
            Some("stratum_step_done needs the argument `result`".to_owned())
        );
        let unknown = parse_step_done(json!({"flowid": "f", "step_id": "s", "result": {}})).err();
        assert!(
            unknown
                .map(|e| e.message)
                .is_some_and(|m| m.starts_with("unknown argument `flowid`, expected one of"))
        );
    }
}

/// `stratum_agent_run`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRunArgs {
    /// What the agent is asked to do.
    pub prompt: String,
    /// The agent CLI: `claude` (default), `codex` or `opencode`.
    #[serde(default)]
    pub agent: Option<String>,
    /// Data for the task, given to the agent as JSON beside the prompt.
    #[serde(default)]
    pub context: Option<Value>,
    /// A JSON Schema the answer must be an object of; the agent is told to end with one JSON
    /// object matching it.
    #[serde(default)]
    pub schema: Option<Map<String, Value>>,
    /// The model, passed to the agent's CLI.
    #[serde(default)]
    pub model: Option<String>,
    /// Where the agent works: a directory under the server's root (default: the root).
    #[serde(default)]
    pub cwd: Option<String>,
    /// The run's deadline in seconds (default 1800, at most 86400); past it the agent's
    /// whole process group is ended.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Answer at once with the `run_id` and let the run go on; follow it with
    /// stratum_agent_poll.
    #[serde(default)]
    pub background: bool,
}

/// `stratum_agent_poll`, `stratum_cancel_agent_run`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunIdArgs {
    /// The `run_id` stratum_agent_run returned (16 hex digits).
    pub run_id: String,
}

/// `stratum_flow_run_bg`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowRunBgArgs {
    /// The flow's id, as `stratum_plan` returned it.
    pub flow_id: String,
    /// The agent of steps that name none: `claude` (default), `codex` or `opencode`.
    #[serde(default)]
    pub agent: Option<String>,
    /// The model of steps that name none.
    #[serde(default)]
    pub model: Option<String>,
}
