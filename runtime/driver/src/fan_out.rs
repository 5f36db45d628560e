//! Server dispatch of a `parallel_dispatch` step: the server runs the attempt's tasks through
//! the connectors and merges what they changed.
//!
//! The order: the base commit is read (`isolation: worktree`), the runtime is told the server
//! takes the tasks (`ParallelStart`, idempotent per attempt, so a driver that took over finds
//! the base and the tasks its predecessor recorded); tasks a dead driver left running are
//! adopted when their run answered, else run again; then tasks run as their dependencies
//! complete, at most `max_concurrent` at once, each in its own worktree under the server's
//! directory (`git::task_dir`: keyed by flow, step, attempt and task, never by text a model
//! wrote), with its `task_timeout`. After an agent answers: the pre-merge commands in its
//! worktree, then its diff. Each event is one command (`TaskUpdate`), so the store always
//! says where every task stands. Once `require` cannot be met any more, the running tasks'
//! process groups are ended and the pending ones cancelled. When every task has settled, the
//! complete ones are merged in dependency order onto the project's working tree (a patch is
//! marked `merging` before it is applied, so a restart checks the tree rather than applying
//! it twice), the worktrees are removed, and the step is evaluated (`ParallelAdvance`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;
use stratum_agents::{Outcome, Prompt, Request};
use stratum_compiler::plan::{Action, FanOut, Isolation, Merge};
use stratum_runtime::ids::FlowId;
use stratum_runtime::response::{FanOutReport, Response, TaskView};
use stratum_runtime::state::DiffRef;
use stratum_runtime::store::drives::mint_run_id;
use stratum_runtime::store::{AgentRun, DiffKey, RunStatus, read_task_diff};
use stratum_runtime::{Command, TaskReport, fresh_seed, now_ms};
use tokio_util::sync::CancellationToken;

use crate::agent_run::{run_recorded, violation};
use crate::git;
use crate::step::agent_named;
use crate::{DriveError, Driver};

/// The largest diff a task may record.
pub const MAX_DIFF_BYTES: usize = 8 * 1024 * 1024;

/// How long the scheduler waits for a task before it looks at its lease again.
const TICK: Duration = Duration::from_millis(200);

/// How a fan-out run ended.
#[derive(Debug)]
pub enum FanOutEnd {
    /// The step was evaluated: the runtime's answer (the next dispatch, a retry, the end).
    Advanced(Response),
    /// The runtime answered something other than the tasks (the attempt failed before any
    /// task ran, the flow moved on): the drive goes on from this answer.
    Answered(Response),
    /// The lease was lost or the driver stopped: running tasks were ended, nothing advanced.
    Cancelled,
    /// The step cannot run here (no git repository for worktrees): why.
    CannotRun(String),
}

/// What a fan-out reports as it goes (MCP progress, `stratum-mcp run`'s display).
pub trait FanOutProgress: Send {
    fn task_settled(&mut self, _report: &FanOutReport, _task: &TaskView) {}
}

impl FanOutProgress for () {}

/// What one task's thread found.
struct TaskOutcome {
    id: String,
    report: Option<TaskReport>,
}

/// The settings of the step being run.
#[derive(Clone)]
struct Settings {
    flow: FlowId,
    step: String,
    attempt: u32,
    worktree: bool,
    base: Option<String>,
    capture: bool,
    merge: bool,
    max_concurrent: usize,
    task_contract: Option<Value>,
    verify: Vec<String>,
    verify_trusted: bool,
    /// The step's `require`, as written (for messages).
    require: String,
}

impl Driver {
    /// Runs the tasks of fan-out step `step_id`, the current step of flow `flow_id`, merges
    /// them and advances the flow; `cancel` ends it (a lost lease, a stop).
    pub fn run_fan_out(
        &self,
        flow_id: &str,
        step_id: &str,
        owner: &str,
        cancel: &CancellationToken,
        progress: &mut dyn FanOutProgress,
    ) -> Result<FanOutEnd, DriveError> {
        self.run_fan_out_with(flow_id, step_id, owner, cancel, progress, false)
    }

    /// [`Driver::run_fan_out`]; `honour_defer`: a step with `defer_advance` stops once its
    /// tasks are settled and merged, for the agent to evaluate it (an unattended drive has
    /// no agent to wait for, and evaluates it itself).
    pub fn run_fan_out_with(
        &self,
        flow_id: &str,
        step_id: &str,
        owner: &str,
        cancel: &CancellationToken,
        progress: &mut dyn FanOutProgress,
        honour_defer: bool,
    ) -> Result<FanOutEnd, DriveError> {
        let (_, plan) = self.flow_and_plan(flow_id)?;
        let flow = FlowId::parse(flow_id)
            .ok_or_else(|| DriveError::Runtime(format!("the runtime named flow {flow_id:?}")))?;
        let step = self
            .plan_step(&plan, flow_id, step_id)?
            .ok_or_else(|| DriveError::Runtime(format!("flow {flow_id} has no step {step_id}")))?;
        let (fan_out, task_contract) = match &step.action {
            Action::Parallel {
                fan_out,
                task_contract,
                ..
            } => (fan_out, *task_contract),
            Action::Pipeline { fan_out, .. } => (fan_out, None),
            _ => {
                return Ok(FanOutEnd::CannotRun(format!(
                    "step `{step_id}` is not a parallel_dispatch or pipeline step"
                )));
            }
        };
        let worktree = fan_out.isolation == Isolation::Worktree;
        let base = if worktree {
            match self.git.head(&self.root) {
                Ok(head) => Some(head),
                Err(error) => {
                    return Ok(FanOutEnd::CannotRun(format!(
                        "step `{step_id}` runs its tasks in git worktrees (isolation: worktree), \
                         but the project root {} has no commit to base them on: {error}",
                        self.root.display()
                    )));
                }
            }
        } else {
            None
        };
        let started = self.call(
            &Command::ParallelStart {
                flow_id: flow_id.to_owned(),
                step_id: step_id.to_owned(),
                base,
            },
            owner,
        )?;
        let Response::FanOut(mut report) = started else {
            return Ok(FanOutEnd::Answered(started));
        };
        let verify = report.pre_merge_verify.clone().unwrap_or_default();
        let settings = Settings {
            flow,
            step: step_id.to_owned(),
            attempt: report.attempt,
            worktree,
            base: report.base.clone(),
            capture: fan_out.capture_diff || (worktree && fan_out.merge == Merge::SequentialApply),
            merge: worktree && fan_out.merge == Merge::SequentialApply,
            max_concurrent: fan_out.max_concurrent.max(1) as usize,
            task_contract: task_contract
                .and_then(|index| plan.contracts.get(index as usize))
                .map(|contract| contract.schema.clone()),
            verify: verify.commands,
            verify_trusted: verify.from_spec,
            require: require_text(fan_out),
        };
        let mut held = BTreeMap::new();
        report = self.adopt_answered(&settings, report, owner, &mut held)?;
        match self.schedule(&settings, report, owner, cancel, progress, &held)? {
            Some(settled) => report = settled,
            None => return Ok(FanOutEnd::Cancelled),
        }
        if settings.merge {
            self.merge(&settings, &report, owner)?;
        }
        if settings.worktree && !self.keep_worktrees {
            self.remove_worktrees(&settings, &report);
        }
        if honour_defer && fan_out.defer_advance {
            let polled = self.call(
                &Command::ParallelPoll {
                    flow_id: flow_id.to_owned(),
                    step_id: step_id.to_owned(),
                },
                owner,
            )?;
            return Ok(FanOutEnd::Answered(polled));
        }
        let advanced = self.call(
            &Command::ParallelAdvance {
                flow_id: flow_id.to_owned(),
                step_id: step_id.to_owned(),
                merge_status: None,
            },
            owner,
        )?;
        Ok(FanOutEnd::Advanced(advanced))
    }

    fn plan_step<'p>(
        &self,
        plan: &'p stratum_compiler::plan::Plan,
        flow_id: &str,
        step_id: &str,
    ) -> Result<Option<&'p stratum_compiler::plan::Step>, DriveError> {
        let (header, _) = self.flow_and_plan(flow_id)?;
        Ok(plan
            .flows
            .get(header.flow as usize)
            .and_then(|flow| flow.steps.iter().find(|step| step.id == step_id)))
    }

    /// Tasks a driver that died left `running`: when their agent run answered, the answer is
    /// taken (checked, diffed, reported) rather than run again; the others run again (the
    /// takeover already ended their process groups on this machine).
    fn adopt_answered(
        &self,
        settings: &Settings,
        mut report: Box<FanOutReport>,
        owner: &str,
        held: &mut BTreeMap<String, u64>,
    ) -> Result<Box<FanOutReport>, DriveError> {
        let left: Vec<TaskView> = report
            .tasks
            .iter()
            .filter(|task| task.state == "running" && task.attempt == settings.attempt)
            .cloned()
            .collect();
        for task in left {
            let Some(run_id) = &task.run_id else { continue };
            let Some(run) = self.runtime.store().agent_run(run_id)? else {
                continue;
            };
            if run.status == RunStatus::Running && run.owner != owner {
                // Left by a driver that died: ended here, or, on another machine, waited out
                // to its deadline before the task runs again (never twice at once).
                if let Some(until) = self.abandon(run, owner)? {
                    held.insert(task.task_id.clone(), until);
                }
                continue;
            }
            if run.status != RunStatus::Answered {
                continue;
            }
            let Some(result) = run.result.clone() else {
                continue;
            };
            let cwd = self.task_cwd(settings, &task.task_id)?;
            let end = self.after_answer(settings, &task.task_id, &cwd, result, &run);
            if let Some(updated) = self.record(settings, &task.task_id, end, owner)? {
                report = updated;
            }
        }
        Ok(report)
    }

    /// Runs the tasks until every one has settled; `None` when cancelled.
    fn schedule(
        &self,
        settings: &Settings,
        mut report: Box<FanOutReport>,
        owner: &str,
        cancel: &CancellationToken,
        progress: &mut dyn FanOutProgress,
        held: &BTreeMap<String, u64>,
    ) -> Result<Option<Box<FanOutReport>>, DriveError> {
        let (sender, results) = mpsc::channel::<TaskOutcome>();
        let mut running: BTreeMap<String, CancellationToken> = BTreeMap::new();
        let mut threads = Vec::new();
        let stop_all = |running: &BTreeMap<String, CancellationToken>| {
            for token in running.values() {
                token.cancel();
            }
        };
        let outcome = loop {
            if cancel.is_cancelled() {
                stop_all(&running);
                break None;
            }
            // Once `require` cannot be met in the last attempt, nothing more is worth running.
            // Before that, tasks that complete are kept for the retry, so they run on.
            let hopeless = !report.require_possible && report.last_attempt;
            if hopeless {
                stop_all(&running);
                for task in report.tasks.clone() {
                    if task.state == "pending" {
                        let cancelled = TaskReport::Cancelled {
                            reason: format!(
                                "the step's require ({}) can no longer be met",
                                settings.require
                            ),
                        };
                        if let Some(updated) =
                            self.record(settings, &task.task_id, Some(cancelled), owner)?
                        {
                            report = updated;
                        }
                    }
                }
            }
            let unsettled = report
                .tasks
                .iter()
                .filter(|task| matches!(task.state, "pending" | "running"))
                .count();
            if unsettled == 0 && running.is_empty() {
                break Some(report);
            }
            for task in report.tasks.clone() {
                if running.len() >= settings.max_concurrent {
                    break;
                }
                let startable = task.attempt == settings.attempt
                    && (task.state == "pending" || task.state == "running")
                    && !running.contains_key(&task.task_id);
                let waited_out = held
                    .get(&task.task_id)
                    .is_none_or(|until| now_ms() >= *until);
                if !startable || hopeless || !waited_out {
                    continue;
                }
                match dependencies(&report, &task) {
                    Dependencies::Waiting => continue,
                    Dependencies::Failed(reason) => {
                        if let Some(updated) = self.record(
                            settings,
                            &task.task_id,
                            Some(TaskReport::Cancelled { reason }),
                            owner,
                        )? {
                            report = updated;
                        }
                        continue;
                    }
                    Dependencies::Ready => {}
                }
                let run_id = mint_run_id(fresh_seed());
                let running_report = TaskReport::Running {
                    run_id: Some(run_id.clone()),
                };
                match self.record(settings, &task.task_id, Some(running_report), owner)? {
                    Some(updated) => report = updated,
                    None => continue,
                }
                // The task as recorded now: a `{prev}` prompt is rendered when its dependency
                // completes, after the list this loop walks was taken.
                let task = report
                    .tasks
                    .iter()
                    .find(|fresh| fresh.task_id == task.task_id)
                    .cloned()
                    .unwrap_or(task);
                let token = cancel.child_token();
                running.insert(task.task_id.clone(), token.clone());
                let job = TaskJob {
                    driver: self.clone(),
                    settings: settings.clone(),
                    task: task.clone(),
                    agent: task
                        .agent
                        .clone()
                        .unwrap_or_else(|| self.default_agent.name().to_owned()),
                    owner: owner.to_owned(),
                    driver_cancel: cancel.clone(),
                    run_id,
                    timeout: Duration::from_secs(task.task_timeout.max(1)),
                };
                let sender = sender.clone();
                threads.push(std::thread::spawn(move || {
                    let id = job.task.task_id.clone();
                    let report = job.run(&token);
                    let _ = sender.send(TaskOutcome { id, report });
                }));
            }
            match results.recv_timeout(TICK) {
                // Ended by the drive's own cancel: nothing is recorded, the next driver runs it.
                Ok(_) if cancel.is_cancelled() => {}
                Ok(done) => {
                    running.remove(&done.id);
                    if let Some(updated) = self.record(settings, &done.id, done.report, owner)? {
                        report = updated;
                        if let Some(task) = report.tasks.iter().find(|task| task.task_id == done.id)
                        {
                            progress.task_settled(&report, task);
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {}
            }
        };
        drop(sender);
        for thread in threads {
            let _ = thread.join();
        }
        Ok(outcome)
    }

    /// Reports a task event; the fan-out as the store now holds it, or `None` when the
    /// runtime refused the event (the attempt is over, the task settled already) or there
    /// was none.
    fn record(
        &self,
        settings: &Settings,
        task: &str,
        event: Option<TaskReport>,
        owner: &str,
    ) -> Result<Option<Box<FanOutReport>>, DriveError> {
        let Some(event) = event else {
            return Ok(None);
        };
        let answer = self.call(
            &Command::TaskUpdate {
                flow_id: settings.flow.to_string(),
                step_id: settings.step.clone(),
                attempt: settings.attempt,
                task_id: task.to_owned(),
                report: event,
            },
            owner,
        )?;
        match answer {
            Response::FanOut(report) => Ok(Some(report)),
            Response::Error(error) if error.error_type == "flow_leased" => Err(
                DriveError::Runtime(format!("the flow's lease was lost: {}", error.message)),
            ),
            _ => Ok(None),
        }
    }

    /// Where task `task` works: its worktree (created from the base when missing), or the
    /// project root.
    fn task_cwd(&self, settings: &Settings, task: &str) -> Result<PathBuf, DriveError> {
        if !settings.worktree {
            return Ok(self.root.clone());
        }
        let dir = git::task_dir(
            &self.worktrees,
            settings.flow.as_str(),
            &settings.step,
            settings.attempt,
            task,
        )
        .map_err(|error| DriveError::Runtime(error.to_string()))?;
        Ok(dir)
    }

    /// After an agent answered: the pre-merge commands in its worktree, then its diff; the
    /// event to record.
    fn after_answer(
        &self,
        settings: &Settings,
        task: &str,
        cwd: &Path,
        result: Value,
        run: &AgentRun,
    ) -> Option<TaskReport> {
        let usage = Some(run.usage.clone());
        let diff = if settings.capture && settings.worktree {
            match self.capture(settings, cwd) {
                Ok(diff) => Some(diff),
                Err(problem) => {
                    return Some(TaskReport::Failed {
                        violations: vec![format!("task '{task}': {problem}")],
                        bounce: None,
                        diff: None,
                        usage,
                    });
                }
            }
        } else {
            None
        };
        if settings.worktree
            && !settings.verify.is_empty()
            && let Some(bounce) = self.verify(settings, task, cwd, diff.as_deref())
        {
            return Some(TaskReport::Failed {
                violations: Vec::new(),
                bounce: Some(bounce),
                diff,
                usage,
            });
        }
        Some(TaskReport::Finished {
            result,
            diff,
            usage,
        })
    }

    fn capture(&self, settings: &Settings, cwd: &Path) -> Result<String, String> {
        let base = settings
            .base
            .as_deref()
            .ok_or("no base commit was recorded for the step")?;
        let bytes = self
            .git
            .capture_diff(cwd, base, MAX_DIFF_BYTES)
            .map_err(|error| error.to_string())?;
        Ok(diff_text(bytes))
    }

    /// Runs the pre-merge commands; the bounce of the first that fails.
    fn verify(
        &self,
        settings: &Settings,
        task: &str,
        cwd: &Path,
        diff: Option<&str>,
    ) -> Option<Value> {
        let files = diff.map(changed_files).unwrap_or_default();
        if !settings.verify_trusted {
            let refused: Vec<&String> = settings
                .verify
                .iter()
                .filter(|command| !self.verify_allowed(command))
                .collect();
            if let Some(command) = refused.first() {
                return Some(serde_json::json!({
                    "task_id": task,
                    "reason": "gate_failed",
                    "command": command,
                    "exit_code": null,
                    "files": files,
                    "excerpt": "this command comes from the flow's data, not the spec, and its program is not in the server's --verify-allow list; it was not run",
                }));
            }
        }
        // The commands run under the agents' allow-list, never the server's environment.
        let env = stratum_agents::allowed_environment(std::env::vars_os(), &[], &self.verify_env);
        match git::verify(cwd, &settings.verify, env, self.verify_deadline) {
            Ok(()) => None,
            Err(failure) => Some(serde_json::json!({
                "task_id": task,
                "reason": "gate_failed",
                "command": failure.command,
                "exit_code": failure.exit_code,
                "files": files,
                "excerpt": failure.excerpt,
            })),
        }
    }

    /// Whether an operator allowed the program `command` starts with.
    fn verify_allowed(&self, command: &str) -> bool {
        let program = command.split_whitespace().next().unwrap_or_default();
        self.verify_allow.iter().any(|allowed| allowed == program)
    }

    /// Applies the complete tasks' patches in dependency order, each once.
    fn merge(
        &self,
        settings: &Settings,
        report: &FanOutReport,
        owner: &str,
    ) -> Result<(), DriveError> {
        for task in &report.tasks {
            if task.state != "complete" || !matches!(task.merge, "unmerged" | "merging") {
                continue;
            }
            let patch = match self.task_patch(settings, task)? {
                Ok(patch) => patch,
                Err(message) => {
                    let lost = TaskReport::Conflict {
                        files: Vec::new(),
                        message,
                    };
                    self.record(settings, &task.task_id, Some(lost), owner)?;
                    continue;
                }
            };
            if task.merge == "merging"
                && !patch.is_empty()
                && self.git.is_applied(&self.root, &patch)
            {
                self.record(settings, &task.task_id, Some(TaskReport::Merged), owner)?;
                continue;
            }
            self.record(settings, &task.task_id, Some(TaskReport::Merging), owner)?;
            let event = if patch.is_empty() {
                TaskReport::Merged
            } else {
                match self
                    .git
                    .apply_all(&self.root, &[(task.task_id.clone(), patch)])
                {
                    Ok(merged) => match merged.conflicts.into_iter().next() {
                        None => TaskReport::Merged,
                        Some(conflict) => TaskReport::Conflict {
                            files: conflict.files,
                            message: conflict.message,
                        },
                    },
                    Err(error) => TaskReport::Conflict {
                        files: Vec::new(),
                        message: error.to_string(),
                    },
                }
            };
            self.record(settings, &task.task_id, Some(event), owner)?;
        }
        Ok(())
    }

    /// The bytes of a complete task's patch, read from its diff row (the reports of task
    /// events carry only its size and hash); `Err` with why when the row no longer holds it.
    fn task_patch(
        &self,
        settings: &Settings,
        task: &TaskView,
    ) -> Result<Result<Vec<u8>, String>, DriveError> {
        // Written inline by an earlier build, and reported as it is.
        if let Some(text) = &task.diff {
            return Ok(Ok(diff_bytes(text)));
        }
        let (Some(bytes), Some(sha256)) = (task.diff_bytes, &task.diff_sha256) else {
            return Ok(Ok(Vec::new()));
        };
        let key = DiffKey {
            step: settings.step.clone(),
            attempt: task.attempt,
            task: task.task_id.clone(),
        };
        let reference = DiffRef {
            bytes,
            sha256: sha256.clone(),
        };
        match read_task_diff(
            self.runtime.store().as_ref(),
            &settings.flow,
            &key,
            &reference,
        )? {
            Some(text) => Ok(Ok(diff_bytes(&text))),
            None => Ok(Err(format!(
                "task '{}': its recorded diff is no longer in the store (the step was entered \
                 again since), so it was not merged",
                task.task_id
            ))),
        }
    }

    fn remove_worktrees(&self, settings: &Settings, report: &FanOutReport) {
        let dirs: Vec<PathBuf> = report
            .tasks
            .iter()
            .filter(|task| task.attempt == settings.attempt)
            .filter_map(|task| self.task_cwd(settings, &task.task_id).ok())
            .collect();
        let _ = self.git.remove_worktrees(&self.root, &dirs);
    }
}

/// One task, run on its own thread.
struct TaskJob {
    driver: Driver,
    settings: Settings,
    task: TaskView,
    agent: String,
    owner: String,
    /// The drive's own token (a lost lease, a stop), as told from the scheduler's cancel of
    /// this task alone.
    driver_cancel: CancellationToken,
    run_id: String,
    timeout: Duration,
}

impl TaskJob {
    /// Runs the task's agent in its worktree; the event to record (`None` when it was
    /// cancelled: the scheduler records nothing for it, the next attempt or driver will).
    fn run(&self, cancel: &CancellationToken) -> Option<TaskReport> {
        let failed = |violation: String| {
            Some(TaskReport::Failed {
                violations: vec![violation],
                bounce: None,
                diff: None,
                usage: None,
            })
        };
        let driver = &self.driver;
        let id = &self.task.task_id;
        let Some(connector) =
            agent_named(&self.agent).and_then(|agent| driver.connectors.get(&agent))
        else {
            return failed(format!(
                "task '{id}' names the agent `{}`, which this runtime cannot launch (claude, codex or opencode)",
                self.agent
            ));
        };
        let cwd = match driver.task_cwd(&self.settings, id) {
            Ok(cwd) => cwd,
            Err(error) => return failed(format!("task '{id}': {error}")),
        };
        let confine = if self.settings.worktree {
            if let Err(error) = std::fs::create_dir_all(&driver.worktrees) {
                return failed(format!(
                    "cannot create {}: {error}",
                    driver.worktrees.display()
                ));
            }
            let Some(base) = self.settings.base.as_deref() else {
                return failed(format!("task '{id}': no base commit was recorded"));
            };
            if let Err(error) = driver.git.add_worktree(&driver.root, &cwd, base) {
                return failed(format!("task '{id}': cannot create its worktree: {error}"));
            }
            driver
                .worktrees
                .canonicalize()
                .unwrap_or(driver.worktrees.clone())
        } else {
            driver.root.clone()
        };
        let cwd = cwd.canonicalize().unwrap_or(cwd);
        let prompt = Prompt {
            intent: self.task.prompt.clone(),
            inputs: Value::Null,
            schema: self.settings.task_contract.clone(),
            violations: Vec::new(),
        };
        let mut request = Request::new(prompt, &cwd, &confine);
        request.deadline = self.timeout;
        let mut row = AgentRun::starting(
            self.run_id.clone(),
            connector.agent.name(),
            &self.owner,
            &driver.host,
            now_ms(),
        );
        row.flow = Some(self.settings.flow.clone());
        row.step = Some(format!("{}/{id}", self.settings.step));
        row.attempt = Some(self.settings.attempt);
        row.model = connector.model.clone();
        let (mut row, run) =
            match run_recorded(driver.runtime.store(), connector, &request, row, cancel) {
                Ok(ended) => ended,
                Err(error) => return failed(format!("task '{id}': {error}")),
            };
        if row.status == RunStatus::Cancelled {
            if self.driver_cancel.is_cancelled() {
                row.status = RunStatus::Interrupted;
                row.reason = Some(
                    "the driver stopped or lost the flow's lease; the process group was ended \
                     and the task runs again under the next driver"
                        .to_owned(),
                );
            } else {
                row.reason = Some(
                    "its step's require could no longer be met; the process group was ended"
                        .to_owned(),
                );
            }
            let _ = driver.runtime.store().put_run(&row);
            return Some(TaskReport::Cancelled {
                reason: "its step's require could no longer be met".to_owned(),
            });
        }
        let result = match (&row.status, run.as_ref().map(|run| &run.outcome)) {
            (RunStatus::Answered, Some(Outcome::Answered { object })) => {
                Value::Object(object.clone())
            }
            (_, Some(Outcome::NoJson)) if self.settings.task_contract.is_none() => {
                let text = run.as_ref().map(|run| run.text.clone()).unwrap_or_default();
                // Without a contract the text is the result, but an empty one is no answer: it
                // fails the task like any other missing result, so the retry runs it again
                // instead of accepting (and merging) nothing.
                if text.trim().is_empty() {
                    return Some(TaskReport::Failed {
                        violations: vec![format!("task '{id}': the agent answered nothing")],
                        bounce: None,
                        diff: None,
                        usage: Some(row.usage.clone()),
                    });
                }
                Value::String(text)
            }
            _ => {
                return Some(TaskReport::Failed {
                    violations: vec![format!("task '{id}': {}", violation(&row))],
                    bounce: None,
                    diff: None,
                    usage: Some(row.usage.clone()),
                });
            }
        };
        driver.after_answer(&self.settings, id, &cwd, result, &row)
    }
}

enum Dependencies {
    Ready,
    Waiting,
    Failed(String),
}

fn dependencies(report: &FanOutReport, task: &TaskView) -> Dependencies {
    for dependency in &task.depends_on {
        let Some(found) = report
            .tasks
            .iter()
            .find(|other| &other.task_id == dependency)
        else {
            return Dependencies::Failed(format!("upstream task '{dependency}' does not exist"));
        };
        match found.state {
            // A pipeline stage its `when` skipped passes on what it was given.
            "complete" | "skipped" => {}
            "pending" | "running" => return Dependencies::Waiting,
            other => {
                return Dependencies::Failed(format!(
                    "upstream task '{dependency}' did not complete (state='{other}')"
                ));
            }
        }
    }
    Dependencies::Ready
}

fn require_text(fan_out: &FanOut) -> String {
    match fan_out.require {
        stratum_compiler::plan::Require::All => "all".to_owned(),
        stratum_compiler::plan::Require::Any => "any".to_owned(),
        stratum_compiler::plan::Require::AtLeast(count) => count.to_string(),
    }
}

/// A diff as the store keeps it: the text when it is UTF-8 (git's binary patches are ASCII),
/// else `base64:` and the bytes encoded, so that no byte is lost. A NUL byte is encoded too:
/// PostgreSQL's text columns cannot hold one.
pub fn diff_text(bytes: Vec<u8>) -> String {
    let encoded = |bytes: &[u8]| {
        format!(
            "base64:{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        )
    };
    match String::from_utf8(bytes) {
        Ok(text) if text.contains('\0') => encoded(text.as_bytes()),
        Ok(text) => text,
        Err(error) => encoded(error.as_bytes()),
    }
}

/// The bytes of a stored diff.
pub fn diff_bytes(text: &str) -> Vec<u8> {
    match text.strip_prefix("base64:") {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap_or_default(),
        None => text.as_bytes().to_vec(),
    }
}

/// The files a diff touches (`diff --git a/x b/x` lines).
fn changed_files(diff: &str) -> Vec<String> {
    diff.lines()
        .filter_map(|line| line.strip_prefix("diff --git a/"))
        .filter_map(|rest| rest.split(" b/").next())
        .map(str::to_owned)
        .collect()
}
