//! The agent-run and background-flow tools: `stratum_agent_run` / `agent_poll` /
//! `cancel_agent_run` (one agent process, recorded in the store) and `stratum_flow_run_bg` /
//! `flow_bg_poll` / `flow_cancel_bg` (a flow driven by the server itself, see
//! `stratum_driver`).
//!
//! What the reference got wrong and this does not: run ids are minted by the server and
//! checked before any lookup; every run, Claude's included, has one start / poll / cancel
//! protocol and a deadline; a cancel ends the process group and is recorded as such; a run
//! without a JSON object is `no_json`, never `{}`; a background flow is driven under a lease
//! that fences every other writer, and its poll returns the completion.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use stratum_agents::{Prompt, Request};
use stratum_driver::{Driver, Ended, FanOutEnd, StopSignal, Turn, agent_named, run_recorded};
use stratum_runtime::store::drives::{is_run_id, mint_run_id};
use stratum_runtime::store::{AgentRun, Drive, DriveState, Enrolled, RunStatus};
use tokio_util::sync::CancellationToken;

use crate::args::{AgentRunArgs, FlowArgs, FlowRunBgArgs, ParallelStepArgs, RunIdArgs};
use crate::command::Command;
use crate::ids::FlowId;
use crate::outputs::ToolError;
use crate::progress::{self, Progress};
use crate::response::{FanOutReport, TaskView};
use crate::store::StoreError;
use crate::{Runtime, now_ms};

/// How long a stopping server waits, beyond the agents' grace period, for its background
/// work to record how it ended.
const SETTLE: Duration = Duration::from_secs(5);

/// The longest deadline an agent run may ask for: a day.
const MAX_TIMEOUT_S: u64 = 86_400;
/// How often a call waiting for a fan-out reads the store.
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// One read of a fan-out step: its report, or what the runtime answered instead (a refusal,
/// a step that is not a fan-out).
enum Polled {
    FanOut(Box<FanOutReport>),
    Other(Value),
}

/// A task that will not change any more (its merge aside).
fn is_settled(state: &str) -> bool {
    !matches!(state, "pending" | "running")
}

/// An agent run as the tools show it.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RunView {
    #[schemars(extend("enum" = ["running", "answered", "no_json", "agent_error", "crashed",
        "timed_out", "cancelled", "abandoned", "interrupted"]))]
    pub status: String,
    pub run_id: String,
    pub flow_id: Option<String>,
    pub step_id: Option<String>,
    pub attempt: Option<u32>,
    pub agent: String,
    pub model: Option<String>,
    pub host: String,
    pub pid: Option<u32>,
    pub started_ms: u64,
    pub deadline_ms: u64,
    pub finished_ms: Option<u64>,
    /// Why a run that did not answer ended as it did.
    pub reason: Option<String>,
    pub exit_code: Option<i32>,
    /// The JSON object the agent answered with (not checked against any contract here).
    pub result: Option<Value>,
    /// The end of the agent's final text.
    pub text_tail: String,
    pub stderr_tail: String,
    pub usage: Value,
    /// The last lines of its event stream, and how many it printed in all.
    pub last_events: Vec<String>,
    pub events_seen: u64,
}

impl RunView {
    pub fn of(run: &AgentRun) -> RunView {
        let skip = run.events.len().saturating_sub(10);
        RunView {
            status: run.status.as_str().to_owned(),
            run_id: run.id.clone(),
            flow_id: run.flow.as_ref().map(ToString::to_string),
            step_id: run.step.clone(),
            attempt: run.attempt,
            agent: run.agent.clone(),
            model: run.model.clone(),
            host: run.host.clone(),
            pid: run.pid,
            started_ms: run.started_ms,
            deadline_ms: run.deadline_ms,
            finished_ms: run.finished_ms,
            reason: run.reason.clone(),
            exit_code: run.exit_code,
            result: run.result.clone(),
            text_tail: run.text_tail.clone(),
            stderr_tail: run.stderr_tail.clone(),
            usage: run.usage.clone(),
            last_events: run.events.iter().skip(skip).cloned().collect(),
            events_seen: run.events_seen,
        }
    }
}

/// `stratum_agent_run` with `background: true`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RunStarted {
    #[schemars(extend("const" = "bg_started"))]
    pub status: &'static str,
    pub run_id: String,
    /// The command that shows it from a terminal.
    pub watch_cmd: String,
}

/// `stratum_cancel_agent_run`, `stratum_flow_cancel_bg`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Cancelled {
    #[schemars(extend("enum" = ["cancelled", "already_finished", "not_running", "not_found"]))]
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<String>,
    pub message: String,
}

/// `stratum_flow_run_bg`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct FlowStarted {
    /// `bg_already_running` when a driver already has it; `finished` when the flow ended.
    #[schemars(extend("enum" = ["bg_started", "bg_already_running", "finished"]))]
    pub status: &'static str,
    pub flow_id: String,
    pub total_steps: u32,
    pub message: String,
}

/// `stratum_flow_bg_poll`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct FlowPoll {
    /// `paused_gate`: waiting for a person; `queued`: waiting for a driver; `stopped`:
    /// handed back (see `note`); or the flow's end.
    #[schemars(extend("enum" = ["running", "paused_gate", "queued", "stopped", "cancelled",
        "not_enrolled", "done", "complete", "failed", "killed", "budget_exhausted"]))]
    pub status: String,
    pub flow_id: String,
    pub flow_status: String,
    pub current_step: Option<String>,
    pub steps_completed: u32,
    pub total_steps: u32,
    /// The driver holding the flow, and until when.
    pub owner: Option<String>,
    pub lease_expires_ms: Option<u64>,
    /// Why the drive stopped, when it did.
    pub note: Option<String>,
    /// The agent run of the current step, while one runs.
    pub run: Option<RunView>,
    /// The flow's output once it completed.
    pub output: Option<Value>,
    /// The flow's audit once it finished: its trace and budget.
    pub audit: Option<Value>,
}

/// What the server runs in the background: agent runs and flows, each cancellable.
#[derive(Default)]
pub struct Background {
    runs: Mutex<HashMap<String, CancellationToken>>,
    flows: Mutex<HashMap<FlowId, StopSignal>>,
    /// Fan-outs (`stratum_parallel_start`), by flow and step: running, or their outcome.
    fan_outs: Mutex<HashMap<(FlowId, String), FanOutJob>>,
    /// Judgments (`stratum_judge`), by flow and step: running, or their answer.
    judges: Mutex<HashMap<(FlowId, String), JudgeJob>>,
    stopping: AtomicBool,
}

/// One `stratum_judge`'s tiers.
struct JudgeJob {
    decided: usize,
    total: usize,
    /// The predicate decided last.
    latest: String,
    /// The call's answer, once the tiers ran.
    answer: Option<Value>,
}

/// One `stratum_parallel_start`'s work.
struct FanOutJob {
    stop: StopSignal,
    running: bool,
    /// What the runtime answered when the step was evaluated.
    outcome: Option<Value>,
}

impl Background {
    /// `stratum_agent_run`.
    pub fn agent_run(
        self: &Arc<Self>,
        driver: &Driver,
        args: AgentRunArgs,
    ) -> Result<Value, ToolError> {
        if args.prompt.trim().is_empty() {
            return Err(argument(
                "prompt",
                "the prompt is empty; say what the agent should do",
            ));
        }
        let named = args.agent.as_deref().unwrap_or("claude");
        let Some(agent) = agent_named(named) else {
            return Err(argument(
                "agent",
                &format!("no agent `{named}`; use claude, codex or opencode"),
            ));
        };
        let timeout = args.timeout.unwrap_or(1_800);
        if timeout == 0 || timeout > MAX_TIMEOUT_S {
            return Err(argument(
                "timeout",
                &format!("give a timeout from 1 to {MAX_TIMEOUT_S} seconds"),
            ));
        }
        let cwd = match &args.cwd {
            Some(cwd) => resolve(&driver.root, cwd),
            None => driver.root.clone(),
        };
        let mut connector = driver
            .connectors
            .get(&agent)
            .cloned()
            .unwrap_or_else(|| stratum_agents::Connector::new(agent));
        if args.model.is_some() {
            connector.model = args.model.clone();
        }
        let prompt = Prompt {
            intent: args.prompt,
            inputs: args.context.unwrap_or_else(|| json!({})),
            schema: args.schema.map(Value::Object),
            violations: Vec::new(),
        };
        let mut request = Request::new(prompt, cwd, &driver.root);
        request.deadline = Duration::from_secs(timeout);
        let mut row = AgentRun::starting(
            mint_run_id(stratum_runtime::fresh_seed()),
            agent.name(),
            &driver.new_owner(),
            &driver.host,
            now_ms(),
        );
        row.model = connector.model.clone();
        let run_id = row.id.clone();
        let cancel = CancellationToken::new();
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(run_id.clone(), cancel.clone());
        let store = driver.runtime.store().clone();
        let this = self.clone();
        let key = run_id.clone();
        let work = move || {
            let outcome = run_recorded(&store, &connector, &request, row, &cancel);
            if let Ok((run, _)) = &outcome
                && run.status == RunStatus::Cancelled
                && this.stopping.load(Ordering::SeqCst)
            {
                let mut run = run.clone();
                run.status = RunStatus::Interrupted;
                run.reason = Some("the server stopped; the process group was ended".to_owned());
                let _ = store.put_run(&run);
            }
            // Last: `stop_all` waits for the registry to empty.
            this.runs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
            outcome
        };
        if args.background {
            std::thread::spawn(work);
            return Ok(to_value(&RunStarted {
                status: "bg_started",
                watch_cmd: format!("stratum-mcp query run {run_id}"),
                run_id,
            }));
        }
        match work() {
            Ok((run, _)) => Ok(to_value(&RunView::of(&run))),
            Err(error) => Err(ToolError::new("agent_unavailable", error.to_string())),
        }
    }

    /// `stratum_agent_poll`.
    pub fn agent_poll(&self, runtime: &Runtime, args: RunIdArgs) -> Result<Value, ToolError> {
        let run = find_run(runtime, &args.run_id)?;
        Ok(to_value(&RunView::of(&run)))
    }

    /// `stratum_cancel_agent_run`: a run of this server is cancelled through its token (its
    /// process group ended, then recorded `cancelled` by the thread running it); a run of
    /// another process on this machine has its process group ended here.
    pub fn cancel_agent_run(&self, driver: &Driver, args: RunIdArgs) -> Result<Value, ToolError> {
        let mut run = find_run(&driver.runtime, &args.run_id)?;
        let answer = |status, message: String| {
            Ok(to_value(&Cancelled {
                status,
                run_id: Some(args.run_id.clone()),
                flow_id: None,
                message,
            }))
        };
        if run.status.is_finished() {
            return answer(
                "already_finished",
                format!("the run already ended: {}", run.status.as_str()),
            );
        }
        let token = self
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&run.id)
            .cloned();
        if let Some(token) = token {
            token.cancel();
            return answer(
                "cancelled",
                "its process group is being ended; stratum_agent_poll shows it `cancelled`"
                    .to_owned(),
            );
        }
        if run.flow.is_some() {
            return answer(
                "not_running",
                "the run belongs to an unattended flow: cancel the flow's drive with \
                 stratum_flow_cancel_bg"
                    .to_owned(),
            );
        }
        match (run.host == driver.host, run.pid, run.process_start) {
            (true, Some(pid), Some(start)) => {
                stratum_agents::end_group(pid, start, stratum_agents::DEFAULT_GRACE);
                run.status = RunStatus::Cancelled;
                run.reason = Some("cancelled; the process group was ended".to_owned());
                run.finished_ms = Some(now_ms());
                run.updated_ms = now_ms();
                driver.runtime.store().put_run(&run).map_err(store_error)?;
                answer("cancelled", "its process group was ended".to_owned())
            }
            _ => answer(
                "not_running",
                format!(
                    "the run is on {} and not this server's; it ends at its deadline",
                    run.host
                ),
            ),
        }
    }

    /// `stratum_flow_run_bg`: enrolls the flow and drives it on a thread of this server,
    /// waiting at gates for a person, until it finishes, hands off or is cancelled. Should
    /// the server stop, the drive stays enrolled and a worker (or another call) takes it over
    /// once its lease expires.
    pub fn flow_run_bg(
        self: &Arc<Self>,
        driver: &Driver,
        args: FlowRunBgArgs,
    ) -> Result<Value, ToolError> {
        let Some(id) = FlowId::parse(&args.flow_id) else {
            return Err(ToolError::new(
                "flow_not_found",
                format!("no flow `{}`", args.flow_id),
            ));
        };
        let audit = audit(&driver.runtime, &id)?;
        if field(&audit, "status") == "error" {
            return Err(ToolError::new(
                "flow_not_found",
                format!("no flow `{}`", args.flow_id),
            ));
        }
        let total_steps =
            u32::try_from(field(&audit, "total_steps").as_u64().unwrap_or(0)).unwrap_or(0);
        if field(&audit, "status") != "in_progress" {
            return Ok(to_value(&FlowStarted {
                status: "finished",
                flow_id: id.to_string(),
                total_steps,
                message: format!("the flow already ended: {}", field(&audit, "status")),
            }));
        }
        if let Some(agent) = &args.agent
            && agent_named(agent).is_none()
        {
            return Err(argument(
                "agent",
                &format!("no agent `{agent}`; use claude, codex or opencode"),
            ));
        }
        let mut drive = Drive::new(id.clone(), now_ms());
        drive.agent = args.agent;
        drive.model = args.model;
        let store = driver.runtime.store();
        if let Enrolled::AlreadyActive(_) = store.enroll(&drive).map_err(store_error)? {
            return Ok(to_value(&FlowStarted {
                status: "bg_already_running",
                flow_id: id.to_string(),
                total_steps,
                message: "the flow is already driven; follow it with stratum_flow_bg_poll"
                    .to_owned(),
            }));
        }
        let stop = StopSignal::new();
        self.flows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), stop.clone());
        let (this, driver, flow) = (self.clone(), driver.clone(), id.clone());
        std::thread::spawn(move || {
            drive_in_background(&driver, &flow, &stop);
            this.flows
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&flow);
        });
        Ok(to_value(&FlowStarted {
            status: "bg_started",
            flow_id: id.to_string(),
            total_steps,
            message: "the server drives the flow; follow it with stratum_flow_bg_poll, decide \
                      its gates as usual; while it is driven your stratum_step_done on it is \
                      refused (flow_leased)"
                .to_owned(),
        }))
    }

    /// `stratum_flow_bg_poll`.
    pub fn flow_bg_poll(&self, runtime: &Runtime, args: FlowArgs) -> Result<Value, ToolError> {
        let Some(id) = FlowId::parse(&args.flow_id) else {
            return Err(ToolError::new(
                "flow_not_found",
                format!("no flow `{}`", args.flow_id),
            ));
        };
        let audit = audit(runtime, &id)?;
        if field(&audit, "status") == "error" {
            return Err(ToolError::new(
                "flow_not_found",
                format!("no flow `{}`", args.flow_id),
            ));
        }
        let store = runtime.store();
        let drive = store.drive(&id).map_err(store_error)?;
        let header = current_step(runtime, &id)?;
        // The tree's newest runs, a few per flow: a running one is among them.
        let mut running = None;
        for flow in header.1.iter().filter_map(|flow| FlowId::parse(flow)) {
            let runs = store.agent_runs(Some(&flow), 3).map_err(store_error)?;
            if let Some(run) = runs.iter().find(|run| run.status == RunStatus::Running) {
                running = Some(RunView::of(run));
                break;
            }
        }
        let flow_status = field(&audit, "status")
            .as_str()
            .unwrap_or("unknown")
            .to_owned();
        let finished = flow_status != "in_progress";
        let status = match &drive {
            _ if finished => flow_status.clone(),
            None => "not_enrolled".to_owned(),
            Some(drive) => match drive.state {
                DriveState::Active if drive.parked.is_some() => "paused_gate".to_owned(),
                DriveState::Active if drive.owner.is_some() && drive.expires_ms > now_ms() => {
                    "running".to_owned()
                }
                DriveState::Active => "queued".to_owned(),
                other => other.as_str().to_owned(),
            },
        };
        let number =
            |key: &str| u32::try_from(field(&audit, key).as_u64().unwrap_or(0)).unwrap_or(0);
        Ok(to_value(&FlowPoll {
            status,
            flow_id: id.to_string(),
            flow_status,
            current_step: header.0,
            steps_completed: number("steps_completed"),
            total_steps: number("total_steps"),
            owner: drive.as_ref().and_then(|drive| drive.owner.clone()),
            lease_expires_ms: drive
                .as_ref()
                .filter(|drive| drive.owner.is_some())
                .map(|drive| drive.expires_ms),
            note: drive.as_ref().and_then(|drive| drive.note.clone()),
            run: running,
            output: header.2,
            audit: finished.then_some(audit),
        }))
    }

    /// `stratum_parallel_start`: the server takes the tasks of the flow's current parallel
    /// step and runs them on a thread, under the flow's lease; the answer lists them.
    pub fn parallel_start(
        self: &Arc<Self>,
        driver: &Driver,
        args: ParallelStepArgs,
        progress: &Progress,
    ) -> Result<Value, ToolError> {
        let Some(id) = FlowId::parse(&args.flow_id) else {
            return Err(ToolError::new(
                "flow_not_found",
                format!("no flow `{}`", args.flow_id),
            ));
        };
        let key = (id.clone(), args.step_id.clone());
        let running = self
            .fan_outs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .is_some_and(|job| job.running);
        if running {
            return self.parallel_poll(&driver.runtime, args, progress);
        }
        if self.stopping.load(Ordering::SeqCst) {
            return Err(ToolError::new(
                "server_stopping",
                "the server is stopping; start the tasks again on the next one".to_owned(),
            ));
        }
        let store = driver.runtime.store();
        if let Enrolled::AlreadyActive(_) = store
            .enroll(&Drive::new(id.clone(), now_ms()))
            .map_err(store_error)?
        {
            return Err(ToolError::new(
                "flow_driven",
                "the server already drives this flow (stratum_flow_run_bg): it runs the step's \
                 tasks itself; follow it with stratum_parallel_poll"
                    .to_owned(),
            ));
        }
        // Taken for the server now (the enrolled drive has no owner yet, so no fence stops
        // this), so that the answer lists the tasks; the thread's start is the same attempt's.
        let started = driver
            .runtime
            .call(&Command::ParallelStart {
                flow_id: id.to_string(),
                step_id: args.step_id.clone(),
                base: driver.git.head(&driver.root).ok(),
            })
            .map_err(store_error)?;
        if !matches!(started, crate::response::Response::FanOut(_)) {
            let _ = store.cancel_drive(&id, "stratum_parallel_start was refused");
            return Ok(started.to_json());
        }
        let stop = StopSignal::new();
        self.fan_outs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                key.clone(),
                FanOutJob {
                    stop: stop.clone(),
                    running: true,
                    outcome: None,
                },
            );
        let (this, job_driver) = (self.clone(), driver.clone());
        std::thread::spawn(move || {
            // A panic still ends the job (it would stay `running` for ever otherwise).
            let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                job_driver.drive_fan_out(&key.0, &key.1, &stop, &mut ())
            }));
            let outcome = match ended {
                Err(_) => Some(json!({
                    "status": "error",
                    "error_type": "fan_out_failed",
                    "message": "the server failed while running the tasks; call \
                                stratum_parallel_start again to go on",
                })),
                Ok(ended) => match ended {
                    Ok(Some(FanOutEnd::Advanced(answer) | FanOutEnd::Answered(answer))) => {
                        Some(answer.to_json())
                    }
                    Ok(Some(FanOutEnd::CannotRun(note))) => Some(
                        json!({"status": "error", "error_type": "cannot_run", "message": note}),
                    ),
                    Ok(Some(FanOutEnd::Cancelled)) => Some(json!({
                        "status": "error",
                        "error_type": "fan_out_stopped",
                        "message": "the server stopped running the tasks (it is stopping, or lost the \
                                    flow's lease); call stratum_parallel_start again to go on",
                    })),
                    Ok(None) => Some(json!({
                        "status": "error",
                        "error_type": "flow_leased",
                        "message": "another driver holds the flow",
                    })),
                    Err(error) => Some(json!({
                        "status": "error",
                        "error_type": "fan_out_failed",
                        "message": error.to_string(),
                    })),
                },
            };
            if let Some(job) = this
                .fan_outs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_mut(&key)
            {
                job.running = false;
                job.outcome = outcome;
            }
        });
        if args.wait_seconds > 0 {
            return self.parallel_poll(&driver.runtime, args, progress);
        }
        Ok(started.to_json())
    }

    /// `stratum_parallel_poll`: the tasks as stored, whether this server still runs them,
    /// and what the step's evaluation answered. With `wait_seconds`, the answer waits until
    /// the tasks settle (and this server, when it runs them, has evaluated the step), the
    /// wait is over or the client cancels; meanwhile each settled task and a heartbeat go to
    /// `progress`. The store is read, not this server's memory, so the tasks may as well run
    /// on a worker elsewhere.
    pub fn parallel_poll(
        &self,
        runtime: &Runtime,
        args: ParallelStepArgs,
        progress: &Progress,
    ) -> Result<Value, ToolError> {
        let until = Instant::now() + Duration::from_secs(args.wait_seconds);
        let mut settled: BTreeSet<String> = BTreeSet::new();
        let mut heartbeat = Instant::now();
        loop {
            let report = match self.poll_once(runtime, &args)? {
                Polled::FanOut(report) => report,
                Polled::Other(answer) => return Ok(answer),
            };
            let over = report.can_advance && report.running != Some(true)
                || Instant::now() >= until
                || progress.cancelled();
            if progress.wanted() {
                let newly: Vec<&TaskView> = report
                    .tasks
                    .iter()
                    .filter(|task| is_settled(task.state) && !settled.contains(&task.task_id))
                    .collect();
                for task in &newly {
                    settled.insert(task.task_id.clone());
                }
                let total = report.task_count as u64;
                if !newly.is_empty() {
                    let latest: Vec<String> = newly
                        .iter()
                        .map(|task| format!("'{}' {}", task.task_id, task.state))
                        .collect();
                    let message = format!(
                        "{} of {total} tasks settled; latest: {}",
                        settled.len(),
                        latest.join(", ")
                    );
                    progress.report(settled.len() as u64, Some(total), &message);
                    heartbeat = Instant::now();
                } else if heartbeat.elapsed() >= progress::HEARTBEAT {
                    let running = report.summary.get("running").copied().unwrap_or_default();
                    let message = format!(
                        "{} of {total} tasks settled; {running} running",
                        settled.len()
                    );
                    progress.report(settled.len() as u64, Some(total), &message);
                    heartbeat = Instant::now();
                }
            }
            if over {
                return Ok(to_value(&report));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// One read of the step's tasks, with this server's knowledge of its job.
    fn poll_once(&self, runtime: &Runtime, args: &ParallelStepArgs) -> Result<Polled, ToolError> {
        let polled = runtime
            .call(&Command::ParallelPoll {
                flow_id: args.flow_id.clone(),
                step_id: args.step_id.clone(),
            })
            .map_err(store_error)?;
        let crate::response::Response::FanOut(mut report) = polled else {
            return Ok(Polled::Other(polled.to_json()));
        };
        if let Some(id) = FlowId::parse(&args.flow_id)
            && let Some(job) = self
                .fan_outs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&(id, args.step_id.clone()))
        {
            report.running = Some(job.running);
            report.outcome = job.outcome.clone();
        }
        Ok(Polled::FanOut(report))
    }

    /// `stratum_judge`: the call is checked and staged at once (a refusal is the answer); its
    /// tiers run on a thread, and the answer waits for them (`wait_seconds`, else until the
    /// verdict), reporting each decided predicate and a heartbeat to `progress`. A call for a
    /// step whose tiers still run follows them instead of starting again.
    pub fn judge(
        self: &Arc<Self>,
        driver: &Driver,
        args: crate::args::JudgeArgs,
        progress: &Progress,
    ) -> Value {
        let wait = args.wait_seconds;
        let key = FlowId::parse(&args.flow_id).map(|id| (id, args.step_id.clone()));
        let running = key.as_ref().is_some_and(|key| {
            self.judges
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(key)
                .is_some_and(|job| job.answer.is_none())
        });
        if !running {
            let staged = match crate::judge::stage_call(driver, &args) {
                Ok(staged) => staged,
                Err(error) => return to_value(&error),
            };
            let Some(key) = key.clone() else {
                return to_value(&ToolError::new(
                    "flow_not_found",
                    format!("No active flow with id '{}'", args.flow_id),
                ));
            };
            self.judges
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(
                    key.clone(),
                    JudgeJob {
                        decided: 0,
                        total: staged.predicates(),
                        latest: String::new(),
                        answer: None,
                    },
                );
            let (this, driver) = (self.clone(), driver.clone());
            std::thread::spawn(move || {
                let record = |update: &mut dyn FnMut(&mut JudgeJob)| {
                    if let Some(job) = this
                        .judges
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get_mut(&key)
                    {
                        update(job);
                    }
                };
                // A tier that panics still ends the job: a call waiting for the verdict
                // without a deadline would otherwise wait for ever.
                let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    crate::judge::run_tiers(&driver, &staged, &mut |decided, id| {
                        record(&mut |job| {
                            job.decided = decided;
                            job.latest = id.to_owned();
                        });
                    })
                }))
                .unwrap_or_else(|_| {
                    Err(ToolError::new(
                        "internal_error",
                        "the server failed while judging; call stratum_judge again",
                    ))
                });
                let answer = answer.unwrap_or_else(|error| to_value(&error));
                record(&mut |job| job.answer = Some(answer.clone()));
            });
        }
        self.judge_wait(
            &args.flow_id,
            &args.step_id,
            wait.map(Duration::from_secs),
            progress,
        )
    }

    /// `stratum_judge_poll`: the verdict once the tiers ran, else `judging`, after waiting up
    /// to `wait` (none: until the verdict).
    pub fn judge_wait(
        &self,
        flow_id: &str,
        step_id: &str,
        wait: Option<Duration>,
        progress: &Progress,
    ) -> Value {
        let Some(key) = FlowId::parse(flow_id).map(|id| (id, step_id.to_owned())) else {
            return to_value(&ToolError::new(
                "flow_not_found",
                format!("No active flow with id '{flow_id}'"),
            ));
        };
        let until = wait.map(|wait| Instant::now() + wait);
        let mut heartbeat = Instant::now();
        let mut reported = 0;
        loop {
            let (decided, total, latest, answer) = {
                let jobs = self.judges.lock().unwrap_or_else(PoisonError::into_inner);
                let Some(job) = jobs.get(&key) else {
                    return to_value(&ToolError::new(
                        "not_judging",
                        format!(
                            "this server is not judging step '{step_id}' of flow '{flow_id}'; \
                             call stratum_judge"
                        ),
                    ));
                };
                (
                    job.decided,
                    job.total,
                    job.latest.clone(),
                    job.answer.clone(),
                )
            };
            if decided > reported || heartbeat.elapsed() >= progress::HEARTBEAT {
                let message = if decided > reported {
                    format!("{decided} of {total} predicates decided; latest: '{latest}'")
                } else {
                    format!("{decided} of {total} predicates decided; an agent is reading")
                };
                progress.report(decided as u64, Some(total as u64), &message);
                reported = decided;
                heartbeat = Instant::now();
            }
            if let Some(answer) = answer {
                return answer;
            }
            if until.is_some_and(|until| Instant::now() >= until) || progress.cancelled() {
                return to_value(&crate::judge::Judging {
                    status: "judging",
                    flow_id: flow_id.to_owned(),
                    step_id: step_id.to_owned(),
                    decided,
                    total,
                    message: "the agent tiers still run; follow them with stratum_judge_poll"
                        .to_owned(),
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// `stratum_flow_cancel_bg`: ends the drive (its driver stops at its next renewal and
    /// ends its agent run); the flow stays where it is, the agent's to continue.
    pub fn flow_cancel_bg(&self, runtime: &Runtime, args: FlowArgs) -> Result<Value, ToolError> {
        let Some(id) = FlowId::parse(&args.flow_id) else {
            return Err(ToolError::new(
                "flow_not_found",
                format!("no flow `{}`", args.flow_id),
            ));
        };
        let before = runtime
            .store()
            .cancel_drive(&id, "cancelled by stratum_flow_cancel_bg")
            .map_err(store_error)?;
        // A driver of this server stops at once; another process's at its next renewal.
        if let Some(stop) = self
            .flows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
        {
            stop.stop_now();
        }
        let (status, message) = match before {
            None => (
                "not_found",
                "the flow was never driven in the background".to_owned(),
            ),
            Some(drive) if drive.state == DriveState::Active => (
                "cancelled",
                "the drive is cancelled: its agent run is ended within a third of the lease; \
                 the flow is yours to continue (stratum_resume)"
                    .to_owned(),
            ),
            Some(drive) => (
                "not_running",
                format!("the drive already ended: {}", drive.state.as_str()),
            ),
        };
        Ok(to_value(&Cancelled {
            status,
            run_id: None,
            flow_id: Some(id.to_string()),
            message,
        }))
    }

    /// Ends every background agent run and flow driver of this server now (the server is
    /// stopping), and waits (up to the agents' grace period and a little more) until each has
    /// recorded its run `interrupted` and handed its flow back.
    pub fn stop_all(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        for token in self
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            token.cancel();
        }
        for stop in self
            .flows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            stop.stop_now();
        }
        for job in self
            .fan_outs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            job.stop.stop_now();
        }
        let until = std::time::Instant::now() + stratum_agents::DEFAULT_GRACE + SETTLE;
        while std::time::Instant::now() < until {
            let runs = self
                .runs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len();
            let flows = self
                .flows
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len();
            let fan_outs = self
                .fan_outs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .values()
                .filter(|job| job.running)
                .count();
            if runs == 0 && flows == 0 && fan_outs == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Drives `flow` until it finishes, hands off, or its drive is cancelled; parked at a gate,
/// looks again whenever the store may have changed.
fn drive_in_background(driver: &Driver, flow: &FlowId, stop: &StopSignal) {
    let store = driver.runtime.store().clone();
    while !stop.requested() {
        match driver.drive(flow, Turn::Whole, stop, &mut ()) {
            Ok(Ended::Parked { .. } | Ended::NotClaimable | Ended::Yielded) => {}
            Ok(_) | Err(_) => return,
        }
        match store.drive(flow) {
            Ok(Some(drive)) if drive.state == DriveState::Active => {}
            _ => return,
        }
        let _ = store.wait_for_change(Duration::from_millis(500));
        stop.sleep(Duration::from_millis(100));
    }
}

fn find_run(runtime: &Runtime, id: &str) -> Result<AgentRun, ToolError> {
    if !is_run_id(id) {
        return Err(ToolError::new(
            "run_not_found",
            format!("`{id}` is not a run id (16 hex digits, as stratum_agent_run returned)"),
        ));
    }
    runtime
        .store()
        .agent_run(id)
        .map_err(store_error)?
        .ok_or_else(|| ToolError::new("run_not_found", format!("no agent run `{id}`")))
}

fn audit(runtime: &Runtime, id: &FlowId) -> Result<Value, ToolError> {
    Ok(runtime
        .call(&Command::Audit {
            flow_id: id.to_string(),
        })
        .map_err(store_error)?
        .to_json())
}

/// The current step's id, the flows of the tree (the root and its sub-flows), and the flow's
/// output once it has one.
type Position = (Option<String>, Vec<String>, Option<Value>);

fn current_step(runtime: &Runtime, root: &FlowId) -> Result<Position, ToolError> {
    let mut step = None;
    let mut output = None;
    let mut flows = vec![root.to_string()];
    runtime
        .store()
        .read(&mut |snapshot| {
            let header = snapshot.flow(root)?;
            output = header.as_ref().and_then(|header| header.output.clone());
            if let Some(header) = header
                && let Some(index) = crate::exec::current(&header)
                && let Some(plan) = snapshot.plan(&header.plan)?
            {
                step = plan
                    .flows
                    .get(header.flow as usize)
                    .and_then(|flow| flow.steps.get(index as usize))
                    .map(|found| found.id.clone());
            }
            flows.extend(snapshot.children(root)?.iter().map(ToString::to_string));
            Ok(())
        })
        .map_err(store_error)?;
    Ok((step, flows, output))
}

/// `cwd` under `root`: relative paths are joined to it (the connector refuses one outside).
fn resolve(root: &Path, cwd: &str) -> PathBuf {
    let path = Path::new(cwd);
    if path.is_absolute() {
        path.to_owned()
    } else {
        root.join(path)
    }
}

fn argument(name: &str, message: &str) -> ToolError {
    ToolError {
        argument: Some(name.to_owned()),
        ..ToolError::new("invalid_argument", message)
    }
}

fn store_error(error: StoreError) -> ToolError {
    ToolError::new("store_unavailable", error.to_string())
}

fn to_value(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// `value.key`, or null: answers are read without indexing that could panic.
fn field<'v>(value: &'v Value, key: &str) -> &'v Value {
    value.get(key).unwrap_or(&Value::Null)
}
