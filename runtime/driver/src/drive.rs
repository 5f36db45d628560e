//! Driving one flow: from a claim to the point where it parks at a gate, yields its turn,
//! finishes, or hands off to a person or agent (a step kind no connector runs).

use std::sync::Arc;

use serde_json::{Value, json};
use stratum_agents::Request;
use stratum_compiler::plan::Plan;
use stratum_runtime::ids::FlowId;
use stratum_runtime::response::{Response, StepDispatch};
use stratum_runtime::state::FlowHeader;
use stratum_runtime::store::drives::mint_run_id;
use stratum_runtime::store::{AgentRun, Drive, DriveState, Parked, Release, RunStatus};
use stratum_runtime::{Command, fresh_seed, now_ms};

use crate::agent_run::{run_recorded, violation};
use crate::fan_out::{FanOutEnd, FanOutProgress};
use crate::identity::host_of;
use crate::lease::LeaseKeeper;
use crate::step::{agent_named, prompt};
use crate::worker::StopSignal;
use crate::{DriveError, Driver};

/// How many of each flow's newest runs a claim looks at for one a dead driver left running.
const RECONCILE_RUNS: usize = 3;

/// How long a driver holds a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// Until it parks, finishes or hands off (`stratum-mcp run`, a background flow).
    Whole,
    /// One step, then back in the queue behind every flow that waited longer (workers).
    OneStep,
}

/// How a drive ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Ended {
    /// The flow is not claimable now (another driver holds it, it waits at a gate, or its
    /// drive ended).
    NotClaimable,
    /// Waiting for a person at this gate (flow, step).
    Parked { flow: String, step: String },
    /// Back in the queue (a worker's turn ended, or the driver was asked to stop).
    Yielded,
    /// The flow finished with this status.
    Finished { status: String },
    /// The driver stopped at something it does not drive; the drive ended `stopped`.
    HandedOff { note: String },
    /// The lease was lost (taken over, or the drive cancelled): nothing more was written.
    LostLease,
}

/// What a driver reports as it goes (`stratum-mcp run`'s progress display).
pub trait Progress {
    fn step_started(&mut self, _step: &StepDispatch, _attempt: u32, _agent: &str) {}
    fn step_ended(&mut self, _step: &StepDispatch, _run: &AgentRun) {}
}

/// Reports nothing.
impl Progress for () {}

/// How running one step's agent ended, for the drive.
enum StepEnd {
    /// Report this to the flow (a result, or a failed attempt).
    Report(Box<Command>),
    /// The run was cancelled: nothing is reported.
    Cancelled,
    /// No connector can run the step: the flow goes back to an agent.
    HandOff(String),
}

/// What the driver does next, read from the runtime's last answer.
enum Next {
    Run(Box<StepDispatch>),
    /// A parallel_dispatch step: the server runs its tasks.
    FanOut {
        flow: String,
        step: String,
    },
    /// A sub-flow finished: its parent's flow step takes its output.
    ChildDone {
        parent: String,
        step: String,
    },
    Park {
        flow: String,
        step: String,
        timeout_s: Option<u64>,
    },
    Finished(String),
    HandOff(String),
}

fn next_of(response: &Response) -> Next {
    match response {
        Response::Parallel(parallel) => Next::FanOut {
            flow: parallel.flow_id.clone(),
            step: parallel.step_id.clone(),
        },
        Response::Step(step) => {
            if !matches!(step.step_mode.as_str(), "function" | "inline" | "decompose") {
                return Next::HandOff(format!("handoff:{}", step.step_mode));
            }
            if step.max_iterations.is_some() {
                return Next::HandOff("handoff:iteration".to_owned());
            }
            Next::Run(step.clone())
        }
        // A sub-flow already finished (a driver stopped before reporting it): report it.
        Response::Flow(flow) => match next_of(&flow.child_step) {
            Next::Finished(_) => Next::ChildDone {
                parent: flow.parent_flow_id.clone(),
                step: flow.parent_step_id.clone(),
            },
            other => other,
        },
        Response::Gate(gate) => Next::Park {
            flow: gate.flow_id.clone(),
            step: gate.step_id.clone(),
            timeout_s: gate.timeout,
        },
        // A sub-flow's end, however it ended, is its parent step's to judge.
        Response::Finished(finished) => {
            match (&finished.parent_flow_id, &finished.parent_step_id) {
                (Some(parent), Some(step)) => Next::ChildDone {
                    parent: parent.clone(),
                    step: step.clone(),
                },
                _ => Next::Finished(finished.status.clone()),
            }
        }
        Response::Status(status) => Next::Finished(status.status.clone()),
        Response::Error(error) => Next::HandOff(format!("{}: {}", error.error_type, error.message)),
        other => Next::HandOff(format!("unexpected answer `{}`", other.status())),
    }
}

impl Driver {
    /// Claims `flow` and drives it for one turn (see [`Turn`]).
    pub fn drive(
        &self,
        flow: &FlowId,
        turn: Turn,
        stop: &StopSignal,
        progress: &mut dyn Progress,
    ) -> Result<Ended, DriveError> {
        let owner = self.new_owner();
        let store = self.runtime.store();
        match store.claim(&owner, now_ms(), self.lease_ms(), Some(flow))? {
            Some(drive) => self.drive_claimed(&drive, &owner, turn, stop, progress),
            None => Ok(Ended::NotClaimable),
        }
    }

    /// Drives a flow `owner` has just claimed. A drive that cannot go on (the store
    /// unreachable, an agent that cannot start) hands the flow back at once if it can, rather
    /// than leave it to its lease.
    pub fn drive_claimed(
        &self,
        drive: &Drive,
        owner: &str,
        turn: Turn,
        stop: &StopSignal,
        progress: &mut dyn Progress,
    ) -> Result<Ended, DriveError> {
        let driven = self.drive_held(drive, owner, turn, stop, progress);
        if driven.is_err() {
            let _ = self
                .runtime
                .store()
                .release(&drive.flow, owner, &Release::Requeue, now_ms());
        }
        driven
    }

    fn drive_held(
        &self,
        drive: &Drive,
        owner: &str,
        turn: Turn,
        stop: &StopSignal,
        progress: &mut dyn Progress,
    ) -> Result<Ended, DriveError> {
        let store = self.runtime.store().clone();
        let lease = LeaseKeeper::start(
            store.clone(),
            drive.flow.clone(),
            owner.to_owned(),
            self.lease,
            drive.expires_ms,
            stop.urgent(),
        );
        self.reconcile(&drive.flow, owner)?;
        let root = drive.flow.to_string();
        let mut response = self.call(
            &Command::Resume {
                flow_id: root.clone(),
            },
            owner,
        )?;
        let end = |release: Release| -> Result<(), DriveError> {
            store.release(&drive.flow, owner, &release, now_ms())?;
            Ok(())
        };
        let finish = |status: String| -> Result<Ended, DriveError> {
            end(Release::End {
                state: DriveState::Done,
                note: status.clone(),
            })?;
            Ok(Ended::Finished { status })
        };
        let hand_off = |note: String| -> Result<Ended, DriveError> {
            end(Release::End {
                state: DriveState::Stopped,
                note: note.clone(),
            })?;
            Ok(Ended::HandedOff { note })
        };
        loop {
            if lease.lost() {
                return Ok(Ended::LostLease);
            }
            if let Response::Error(error) = &response
                && error.error_type == "flow_leased"
            {
                return Ok(Ended::LostLease);
            }
            if stop.requested() {
                end(Release::Requeue)?;
                return Ok(Ended::Yielded);
            }
            match next_of(&response) {
                Next::Run(step) => {
                    let command = match self.run_step(drive, &step, owner, &lease, progress)? {
                        StepEnd::Report(command) => *command,
                        // The lease was lost, or the driver was asked to stop.
                        StepEnd::Cancelled if lease.lost() => return Ok(Ended::LostLease),
                        StepEnd::Cancelled => {
                            end(Release::Requeue)?;
                            return Ok(Ended::Yielded);
                        }
                        StepEnd::HandOff(note) => return hand_off(note),
                    };
                    response = self.call(&command, owner)?;
                    // A worker's turn is one agent run: what follows without one (a gate to
                    // park at, a sub-flow to report, the end) is settled in this turn.
                    if turn == Turn::OneStep && matches!(next_of(&response), Next::Run(_)) {
                        end(Release::Requeue)?;
                        return Ok(Ended::Yielded);
                    }
                }
                Next::FanOut { flow, step } => {
                    let cancel = lease.cancel_token();
                    response = match self.run_fan_out(&flow, &step, owner, cancel, &mut ())? {
                        FanOutEnd::Advanced(answer) | FanOutEnd::Answered(answer) => answer,
                        FanOutEnd::Cancelled if lease.lost() => return Ok(Ended::LostLease),
                        FanOutEnd::Cancelled => {
                            end(Release::Requeue)?;
                            return Ok(Ended::Yielded);
                        }
                        FanOutEnd::CannotRun(note) => return hand_off(note),
                    };
                    if turn == Turn::OneStep && matches!(next_of(&response), Next::Run(_)) {
                        end(Release::Requeue)?;
                        return Ok(Ended::Yielded);
                    }
                }
                Next::ChildDone { parent, step } => {
                    response = self.report_child(parent, step, owner)?;
                }
                Next::Park {
                    flow,
                    step,
                    timeout_s,
                } => {
                    let parked = self.parking(&flow, timeout_s)?;
                    end(Release::Park(parked))?;
                    return Ok(Ended::Parked { flow, step });
                }
                Next::Finished(status) if self.flow_and_plan(&root)?.0.status.is_finished() => {
                    return finish(status);
                }
                Next::Finished(status) => {
                    return hand_off(format!(
                        "a flow of the tree ended `{status}` but not the flow"
                    ));
                }
                Next::HandOff(note) => {
                    // A sub-flow that ended badly (`retries_exhausted`) is its parent step's to
                    // judge, as a finished one is.
                    if let Some((parent, step)) = self.ended_child(&response)? {
                        response = self.report_child(parent, step, owner)?;
                        continue;
                    }
                    // An error that ended the flow (`retries_exhausted`) finishes the drive.
                    let (header, _) = self.flow_and_plan(&root)?;
                    if header.status.is_finished() {
                        return finish(header.status.as_str().to_owned());
                    }
                    return hand_off(note);
                }
            }
        }
    }

    /// Runs the fan-out of step `step`, the current step of `flow` (enrolled by the caller),
    /// under the flow's lease, then hands the flow back: the drive ends `stopped`, and the
    /// agent goes on with the flow (a step with `defer_advance` is left for the agent to
    /// evaluate). `stratum_parallel_start` runs this on a thread.
    pub fn drive_fan_out(
        &self,
        flow: &FlowId,
        step: &str,
        stop: &StopSignal,
        progress: &mut dyn FanOutProgress,
    ) -> Result<Option<FanOutEnd>, DriveError> {
        let owner = self.new_owner();
        let store = self.runtime.store().clone();
        let Some(drive) = store.claim(&owner, now_ms(), self.lease_ms(), Some(flow))? else {
            return Ok(None);
        };
        let lease = LeaseKeeper::start(
            store.clone(),
            drive.flow.clone(),
            owner.clone(),
            self.lease,
            drive.expires_ms,
            stop.urgent(),
        );
        let ran = self.reconcile(&drive.flow, &owner).and_then(|()| {
            self.run_fan_out_with(
                flow.as_str(),
                step,
                &owner,
                lease.cancel_token(),
                progress,
                true,
            )
        });
        if lease.lost() {
            return Ok(Some(FanOutEnd::Cancelled));
        }
        let note = match &ran {
            Ok(FanOutEnd::Advanced(_) | FanOutEnd::Answered(_)) => {
                format!("the tasks of step `{step}` settled; the flow is the agent's again")
            }
            Ok(FanOutEnd::Cancelled) => format!("the fan-out of step `{step}` was stopped"),
            Ok(FanOutEnd::CannotRun(note)) => note.clone(),
            Err(error) => format!("the fan-out of step `{step}` could not go on: {error}"),
        };
        store.release(
            &drive.flow,
            &owner,
            &Release::End {
                state: DriveState::Stopped,
                note,
            },
            now_ms(),
        )?;
        ran.map(Some)
    }

    /// The parent flow and step of the sub-flow an error answer names, when that sub-flow
    /// has ended.
    fn ended_child(&self, response: &Response) -> Result<Option<(String, String)>, DriveError> {
        let Response::Error(error) = response else {
            return Ok(None);
        };
        let Some(flow) = &error.flow_id else {
            return Ok(None);
        };
        let (header, _) = self.flow_and_plan(flow)?;
        let Some(link) = header.parent.filter(|_| header.status.is_finished()) else {
            return Ok(None);
        };
        let (parent, plan) = self.flow_and_plan(link.flow.as_str())?;
        let step = plan
            .flows
            .get(parent.flow as usize)
            .and_then(|flow| flow.steps.get(link.step as usize))
            .map(|step| step.id.clone());
        Ok(step.map(|step| (link.flow.to_string(), step)))
    }

    /// Reports a sub-flow's end to its parent's flow step, which takes the child's output (or
    /// its failure) as the step's result.
    fn report_child(
        &self,
        parent: String,
        step: String,
        owner: &str,
    ) -> Result<Response, DriveError> {
        self.call(
            &Command::StepDone {
                flow_id: parent,
                step_id: step,
                result: json!({}),
                usage: None,
            },
            owner,
        )
    }

    pub(crate) fn call(&self, command: &Command, owner: &str) -> Result<Response, DriveError> {
        Ok(self.runtime.call_as_driver(command, owner)?)
    }

    /// Runs one step's agent: the command that reports it, or why there is none.
    fn run_step(
        &self,
        drive: &Drive,
        step: &StepDispatch,
        owner: &str,
        lease: &LeaseKeeper,
        progress: &mut dyn Progress,
    ) -> Result<StepEnd, DriveError> {
        let (header, plan) = self.flow_and_plan(&step.flow_id)?;
        let named = step
            .agent
            .clone()
            .or_else(|| drive.agent.clone())
            .unwrap_or_else(|| self.default_agent.name().to_owned());
        let attempt = self.attempt_of(&header)?;
        let Some(connector) = agent_named(&named).and_then(|agent| self.connectors.get(&agent))
        else {
            return Ok(StepEnd::HandOff(format!(
                "handoff:agent: step `{}` names the agent `{named}`, which this runtime cannot \
                 launch (claude, codex or opencode); an agent must carry it out",
                step.step_id
            )));
        };
        let mut connector = connector.clone();
        if let Some(model) = step.model.clone().flatten().or_else(|| drive.model.clone()) {
            connector.model = Some(model);
        }
        let flow = plan
            .flows
            .get(header.flow as usize)
            .ok_or_else(|| DriveError::Runtime(format!("flow {} has no plan", header.id)))?;
        let mut request = Request::new(prompt(step, &plan, flow), &self.root, &self.root);
        request.deadline = self.step_deadline;
        let mut row = AgentRun::starting(
            mint_run_id(fresh_seed()),
            connector.agent.name(),
            owner,
            &self.host,
            now_ms(),
        );
        row.flow = FlowId::parse(&step.flow_id);
        row.step = Some(step.step_id.clone());
        row.attempt = Some(attempt);
        row.model = connector.model.clone();
        progress.step_started(step, attempt, connector.agent.name());
        let (mut row, _) = run_recorded(
            self.runtime.store(),
            &connector,
            &request,
            row,
            lease.cancel_token(),
        )?;
        if row.status == RunStatus::Cancelled {
            let cancelled = self
                .runtime
                .store()
                .drive(&drive.flow)?
                .is_some_and(|now| now.state == DriveState::Cancelled);
            row.reason = Some(if cancelled {
                "the flow's drive was cancelled; the process group was ended".to_owned()
            } else if lease.lost() {
                "the driver lost the flow's lease to another driver; the process group was \
                 ended"
                    .to_owned()
            } else {
                row.status = RunStatus::Interrupted;
                "the driver was stopped; the process group was ended and the flow handed back: \
                 the step runs again"
                    .to_owned()
            });
            self.runtime.store().put_run(&row)?;
        }
        progress.step_ended(step, &row);
        let usage = Some(row.usage.clone());
        Ok(match (&row.status, &row.result) {
            (RunStatus::Cancelled | RunStatus::Interrupted, _) => StepEnd::Cancelled,
            (RunStatus::Answered, Some(result)) => StepEnd::Report(Box::new(Command::StepDone {
                flow_id: step.flow_id.clone(),
                step_id: step.step_id.clone(),
                result: result.clone(),
                usage,
            })),
            _ => StepEnd::Report(Box::new(Command::StepFailed {
                flow_id: step.flow_id.clone(),
                step_id: step.step_id.clone(),
                violations: vec![violation(&row)],
                usage,
            })),
        })
    }

    pub(crate) fn flow_and_plan(
        &self,
        flow_id: &str,
    ) -> Result<(FlowHeader, Arc<Plan>), DriveError> {
        let id = FlowId::parse(flow_id)
            .ok_or_else(|| DriveError::Runtime(format!("the runtime named flow {flow_id:?}")))?;
        let mut found = None;
        self.runtime.store().read(&mut |snapshot| {
            if let Some(header) = snapshot.flow(&id)? {
                let plan = snapshot.plan(&header.plan)?;
                found = plan.map(|plan| (header, plan));
            }
            Ok(())
        })?;
        found.ok_or_else(|| DriveError::Runtime(format!("flow {flow_id} is not in the store")))
    }

    /// The attempt a run of the flow's current step makes: one more than its attempts so far.
    fn attempt_of(&self, header: &FlowHeader) -> Result<u32, DriveError> {
        let Some(index) = stratum_runtime::exec::current(header) else {
            return Ok(1);
        };
        let mut attempts = 0;
        self.runtime.store().read(&mut |snapshot| {
            attempts = snapshot
                .step(&header.id, index)?
                .map_or(0, |state| state.attempts);
            Ok(())
        })?;
        Ok(attempts + 1)
    }

    /// Where a drive parked at a gate of `flow` waits: that flow's version now, and the
    /// gate's timeout as its wake time.
    fn parking(&self, flow: &str, timeout_s: Option<u64>) -> Result<Parked, DriveError> {
        let (header, _) = self.flow_and_plan(flow)?;
        let wake_ms = timeout_s.map(|seconds| {
            header
                .dispatched_ms
                .unwrap_or_else(now_ms)
                .saturating_add(seconds.saturating_mul(1000))
        });
        Ok(Parked {
            flow: header.id,
            version: header.version,
            wake_ms,
        })
    }

    /// Runs of this flow tree a driver that lost its lease left running: ended (their process
    /// groups, when they run on this machine and are still the processes recorded) and
    /// recorded as abandoned. On another machine they are left to their deadline; their
    /// results can never be reported (the fence).
    fn reconcile(&self, root: &FlowId, owner: &str) -> Result<(), DriveError> {
        let store = self.runtime.store();
        let mut flows = vec![root.clone()];
        store.read(&mut |snapshot| {
            let mut at = 0;
            while let Some(flow) = flows.get(at).cloned() {
                flows.extend(snapshot.children(&flow)?);
                at += 1;
                if at > 10_000 {
                    break;
                }
            }
            Ok(())
        })?;
        for flow in &flows {
            // A flow runs one step's agent at a time, each run newer than the last: one left
            // running is among its newest. Reading a few keeps a claim's cost flat in the
            // flow's runs. (A fan-out's task runs are reconciled by the fan-out, from the run
            // ids its tasks record.)
            for run in store.agent_runs(Some(flow), RECONCILE_RUNS)? {
                if run.status != RunStatus::Running || run.owner == owner {
                    continue;
                }
                self.abandon(run, owner)?;
            }
        }
        Ok(())
    }

    /// Records a run a driver that lost its lease left running as abandoned, after ending
    /// its process group when it runs on this machine and still is the process recorded.
    /// On another machine it is left to its deadline, which this returns.
    pub(crate) fn abandon(
        &self,
        mut run: AgentRun,
        owner: &str,
    ) -> Result<Option<u64>, DriveError> {
        let here = host_of(&run.owner) == self.host && run.host == self.host;
        let remote_until = (!here).then_some(run.deadline_ms);
        run.reason = Some(match (here, run.pid, run.process_start) {
            (true, Some(pid), Some(start)) => {
                stratum_agents::end_group(pid, start, stratum_agents::DEFAULT_GRACE);
                format!(
                    "its driver `{}` stopped renewing its lease; `{owner}` took the flow over \
                     and ended the process group",
                    run.owner
                )
            }
            (true, _, _) => format!(
                "its driver `{}` stopped renewing its lease before the agent started",
                run.owner
            ),
            (false, _, _) => format!(
                "its driver `{}` on {} stopped renewing its lease; the process is left to its \
                 deadline there",
                run.owner, run.host
            ),
        });
        run.status = RunStatus::Abandoned;
        run.finished_ms = Some(now_ms());
        run.updated_ms = now_ms();
        self.runtime.store().put_run(&run)?;
        Ok(remote_until)
    }
}

/// The JSON a progress display or tool shows of a drive's end.
pub fn ended_json(ended: &Ended) -> Value {
    match ended {
        Ended::NotClaimable => json!({"status": "not_claimable"}),
        Ended::Parked { flow, step } => {
            json!({"status": "paused_gate", "flow_id": flow, "step_id": step})
        }
        Ended::Yielded => json!({"status": "yielded"}),
        Ended::Finished { status } => json!({"status": status}),
        Ended::HandedOff { note } => json!({"status": "handed_off", "note": note}),
        Ended::LostLease => json!({"status": "lost_lease"}),
    }
}
