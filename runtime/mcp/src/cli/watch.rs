//! `stratum-mcp watch`: follows flows as they move, by polling the store. Each poll reads
//! every flow's version ([`Store::flow_versions`]); only when one moved does it read the
//! headers, and only a flow whose version moved is read further (its new trace events,
//! refused attempts included), so a quiet poll decodes nothing.
//!
//! What it reports, one [`Happening`] each: a flow started, a step dispatched, a step done,
//! an attempt refused, a step failed for good, a step skipped, a gate waiting, a gate
//! resolved, a flow finished.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Serialize;
use stratum_compiler::plan::{Action, Plan};
use stratum_grammar::print::visible;

use super::Plans;
use crate::ids::FlowId;
use crate::response::Record;
use crate::state::{Cursor, EventBody, FlowHeader, FlowStatus};
use crate::store::{Store, StoreError};

/// One thing that happened to a flow.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Happening {
    /// Wall-clock milliseconds since the Unix epoch (of the record, or of the poll that saw
    /// it).
    pub at_ms: u64,
    pub flow_id: String,
    pub flow_name: String,
    pub kind: Kind,
    pub step_id: Option<String>,
    /// What else there is to say: the attempts, the violations, the gate's outcome and
    /// rationale, the final status.
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Started,
    Dispatched,
    Done,
    AttemptRefused,
    Failed,
    Skipped,
    GateWaiting,
    /// An approval of a gate that needs more than one identity's; the gate still waits.
    GateApproval,
    GateResolved,
    Finished,
    /// The runtime launched an agent for a step (unattended).
    AgentStarted,
    /// That agent run ended (answered, or why not).
    AgentEnded,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Started => "started",
            Kind::Dispatched => "dispatched",
            Kind::Done => "done",
            Kind::AttemptRefused => "refused",
            Kind::Failed => "failed",
            Kind::Skipped => "skipped",
            Kind::GateWaiting => "gate waiting",
            Kind::GateApproval => "gate approval",
            Kind::GateResolved => "gate resolved",
            Kind::Finished => "finished",
            Kind::AgentStarted => "agent started",
            Kind::AgentEnded => "agent ended",
        }
    }
}

impl Happening {
    /// One line for a terminal: time, flow, step, what happened. Names, violations and
    /// rationales are made [`visible`]: they come from specs, agents and people, and a control
    /// character in one must not act on the terminal.
    pub fn to_line(&self) -> String {
        let id = self.flow_id.get(..8).unwrap_or(&self.flow_id);
        let mut line = format!(
            "{}  {}  {:<16}  {:<13}",
            utc(self.at_ms),
            visible(id),
            visible(&self.flow_name),
            self.kind.label()
        );
        if let Some(step) = &self.step_id {
            line.push_str("  ");
            line.push_str(&visible(step));
        }
        if !self.detail.is_empty() {
            line.push_str("  ");
            line.push_str(&visible(&self.detail));
        }
        line.trim_end().to_owned()
    }
}

/// What the watcher last saw of one flow.
struct Seen {
    version: u64,
    events: u64,
    cursor: Cursor,
    status: FlowStatus,
}

/// Follows the flows of a store (or one flow and its sub-flows) from one poll to the next.
pub struct Watcher {
    only: Option<FlowId>,
    seen: HashMap<FlowId, Seen>,
    plans: Plans,
    first: bool,
    /// Every flow's version at the last poll: a poll that finds them all unchanged reads
    /// nothing else of the flows.
    versions: HashMap<FlowId, u64>,
    /// The watched flows' names, by id, as of the last poll that read the headers.
    names: HashMap<FlowId, String>,
    /// The agent runs seen, by id, and whether each had ended.
    runs: HashMap<String, bool>,
}

/// How many of the newest agent runs each poll looks at.
const RUNS_PER_POLL: usize = 20;

impl Watcher {
    /// Watches every flow, or `only` that flow and its sub-flows.
    pub fn new(only: Option<FlowId>) -> Watcher {
        Watcher {
            only,
            seen: HashMap::new(),
            plans: Plans::default(),
            first: true,
            versions: HashMap::new(),
            names: HashMap::new(),
            runs: HashMap::new(),
        }
    }

    /// What happened since the last poll. The first poll tells where each running flow
    /// stands (and, for a single watched flow, whether it has finished).
    pub fn poll(&mut self, store: &dyn Store, now_ms: u64) -> Result<Vec<Happening>, StoreError> {
        let first = self.first;
        let mut happenings = self.poll_flows(store, now_ms)?;
        self.poll_runs(store, first, &mut happenings)?;
        // In the order they happened (stable: a flow's own lines keep theirs). Within one
        // millisecond an agent ends before its step is done, and starts after it is dispatched.
        happenings.sort_by_key(|happening| {
            let rank = match happening.kind {
                Kind::AgentEnded => 0,
                Kind::AgentStarted => 2,
                _ => 1,
            };
            (happening.at_ms, rank)
        });
        Ok(happenings)
    }

    /// The agent runs of the watched flows that started or ended since the last poll (the
    /// first poll tells those still running).
    fn poll_runs(
        &mut self,
        store: &dyn Store,
        first: bool,
        happenings: &mut Vec<Happening>,
    ) -> Result<(), StoreError> {
        let runs = store.agent_runs(None, RUNS_PER_POLL)?;
        // Oldest first, as they happened.
        for run in runs.iter().rev() {
            let Some(flow) = &run.flow else { continue };
            let Some(name) = self.names.get(flow) else {
                continue;
            };
            let ended = run.status.is_finished();
            let before = self.runs.insert(run.id.clone(), ended);
            let mut say = |kind, at_ms, detail: String| {
                happenings.push(Happening {
                    at_ms,
                    flow_id: flow.to_string(),
                    flow_name: name.clone(),
                    kind,
                    step_id: run.step.clone(),
                    detail,
                });
            };
            let started = || {
                format!(
                    "{} run {} attempt {}{}",
                    run.agent,
                    run.id,
                    run.attempt.unwrap_or(1),
                    run.pid
                        .map(|pid| format!(" (pid {pid})"))
                        .unwrap_or_default()
                )
            };
            let end = || {
                let mut detail = format!("{} run {}", run.status.as_str(), run.id);
                if let Some(reason) = &run.reason {
                    detail.push_str(": ");
                    detail.push_str(reason);
                }
                detail
            };
            match before {
                None if first && ended => {}
                None if ended => {
                    say(Kind::AgentStarted, run.started_ms, started());
                    say(
                        Kind::AgentEnded,
                        run.finished_ms.unwrap_or(run.updated_ms),
                        end(),
                    );
                }
                None => say(Kind::AgentStarted, run.started_ms, started()),
                Some(false) if ended => say(
                    Kind::AgentEnded,
                    run.finished_ms.unwrap_or(run.updated_ms),
                    end(),
                ),
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn poll_flows(&mut self, store: &dyn Store, now_ms: u64) -> Result<Vec<Happening>, StoreError> {
        let versions: HashMap<FlowId, u64> = store.flow_versions()?.into_iter().collect();
        if !self.first && versions == self.versions {
            return Ok(Vec::new());
        }
        self.versions = versions;
        let headers = self.watched(store.list_flows()?);
        self.names = headers
            .iter()
            .map(|header| (header.id.clone(), header.flow_name.clone()))
            .collect();
        let mut happenings = Vec::new();
        let first = std::mem::replace(&mut self.first, false);
        // Oldest first, so that a parent's lines come before its children's.
        for header in headers.iter().rev() {
            if self
                .seen
                .get(&header.id)
                .is_some_and(|seen| seen.version == header.version)
            {
                continue;
            }
            let Some(plan) = self.plans.get(store, &header.plan)? else {
                continue;
            };
            let seen = self.seen.get(&header.id);
            let mut say = |kind, step_id: Option<String>, detail: String, at_ms| {
                happenings.push(Happening {
                    at_ms,
                    flow_id: header.id.to_string(),
                    flow_name: header.flow_name.clone(),
                    kind,
                    step_id,
                    detail,
                });
            };
            match seen {
                None if first => {
                    if header.status.is_finished() {
                        if self.only.as_ref() == Some(&header.id) {
                            say(Kind::Finished, None, finished_detail(header), now_ms);
                        }
                    } else {
                        say_current(&mut say, header, &plan, now_ms);
                    }
                }
                None => {
                    say(Kind::Started, None, String::new(), header.started_ms);
                    for event in events_from(store, header, 0)? {
                        say_event(&mut say, event);
                    }
                    say_end_or_current(&mut say, header, &plan, now_ms);
                }
                Some(seen) => {
                    for event in events_from(store, header, seen.events)? {
                        say_event(&mut say, event);
                    }
                    let moved = seen.cursor != header.cursor || seen.status != header.status;
                    if moved {
                        say_end_or_current(&mut say, header, &plan, now_ms);
                    }
                }
            }
            self.seen.insert(
                header.id.clone(),
                Seen {
                    version: header.version,
                    events: header.events,
                    cursor: header.cursor,
                    status: header.status,
                },
            );
        }
        Ok(happenings)
    }

    /// Whether every watched flow has finished (a watch of one flow may then stop).
    pub fn all_finished(&self) -> bool {
        !self.seen.is_empty() && self.seen.values().all(|seen| seen.status.is_finished())
    }

    /// The headers of the watched flows.
    fn watched(&self, headers: Vec<FlowHeader>) -> Vec<FlowHeader> {
        let Some(only) = &self.only else {
            return headers;
        };
        let parents: HashMap<FlowId, FlowId> = headers
            .iter()
            .filter_map(|header| {
                header
                    .parent
                    .as_ref()
                    .map(|link| (header.id.clone(), link.flow.clone()))
            })
            .collect();
        let under = |id: &FlowId| {
            let mut at = id;
            for _ in 0..=parents.len() {
                if at == only {
                    return true;
                }
                match parents.get(at) {
                    Some(parent) => at = parent,
                    None => return false,
                }
            }
            false
        };
        headers
            .into_iter()
            .filter(|header| under(&header.id))
            .collect()
    }
}

type Say<'a> = dyn FnMut(Kind, Option<String>, String, u64) + 'a;

/// A flow's end, or the step it moved to.
fn say_end_or_current(say: &mut Say<'_>, header: &FlowHeader, plan: &Plan, now_ms: u64) {
    if header.status.is_finished() {
        say(
            Kind::Finished,
            None,
            finished_detail(header),
            header.finished_ms.unwrap_or(now_ms),
        );
    } else {
        say_current(say, header, plan, now_ms);
    }
}

/// The step a running flow waits on: a gate waiting, or a step dispatched.
fn say_current(say: &mut Say<'_>, header: &FlowHeader, plan: &Plan, now_ms: u64) {
    let Cursor::Step(index) = header.cursor else {
        return;
    };
    let Some(step) = plan
        .flows
        .get(header.flow as usize)
        .and_then(|flow| flow.steps.get(index as usize))
    else {
        return;
    };
    let at = header.dispatched_ms.unwrap_or(now_ms);
    match &step.action {
        Action::Gate { timeout, .. } => say(
            Kind::GateWaiting,
            Some(step.id.clone()),
            timeout.map_or_else(String::new, |seconds| {
                format!("times out after {seconds} s")
            }),
            at,
        ),
        Action::Flow { .. } => say(
            Kind::Dispatched,
            Some(step.id.clone()),
            "sub-flow".to_owned(),
            at,
        ),
        _ => say(Kind::Dispatched, Some(step.id.clone()), String::new(), at),
    }
}

fn say_event(say: &mut Say<'_>, event: EventBody) {
    let record = match event {
        EventBody::Record(record) => record,
        // The last attempt is told by the step's record (failed), with its violations.
        EventBody::Attempt(attempt) if attempt.retries_remaining > 0 => {
            return say(
                Kind::AttemptRefused,
                Some(attempt.step_id),
                format!(
                    "attempt {}: {}",
                    attempt.attempt,
                    attempt.violations.join("; ")
                ),
                attempt.at_ms,
            );
        }
        EventBody::Attempt(_) | EventBody::Iteration { .. } => return,
    };
    match record {
        Record::Step(step) if step.violations.is_empty() => say(
            Kind::Done,
            Some(step.step_id),
            plural(step.attempts, "attempt"),
            step.at_ms,
        ),
        Record::Step(step) => say(
            Kind::Failed,
            Some(step.step_id),
            format!(
                "{}: {}",
                plural(step.attempts, "attempt"),
                step.violations.join("; ")
            ),
            step.at_ms,
        ),
        Record::Gate(gate) => say(
            Kind::GateResolved,
            Some(gate.step_id),
            format!(
                "{} by {}{}",
                gate.outcome,
                gate.actor.unwrap_or(gate.resolved_by),
                if gate.rationale.is_empty() {
                    String::new()
                } else {
                    format!(": {}", gate.rationale)
                }
            ),
            gate.at_ms,
        ),
        Record::Skip(skip) => say(
            Kind::Skipped,
            Some(skip.step_id),
            skip.skip_reason,
            skip.at_ms,
        ),
        Record::Policy(policy) => say(
            Kind::GateResolved,
            Some(policy.step_id),
            format!(
                "{} by policy {}",
                policy.resolved_outcome, policy.effective_policy
            ),
            policy.at_ms,
        ),
        Record::Approval(approval) => say(
            Kind::GateApproval,
            Some(approval.step_id),
            format!(
                "approved by {} ({} of {}){}",
                approval.identity,
                approval.approvals,
                approval.min_approvals,
                if approval.rationale.is_empty() {
                    String::new()
                } else {
                    format!(": {}", approval.rationale)
                }
            ),
            approval.at_ms,
        ),
    }
}

fn plural(count: u32, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

fn finished_detail(header: &FlowHeader) -> String {
    match &header.error_type {
        Some(error) => format!("{} ({error})", header.status.as_str()),
        None => header.status.as_str().to_owned(),
    }
}

/// The flow's trace events numbered `from` or later, not undone by a revert.
fn events_from(
    store: &dyn Store,
    header: &FlowHeader,
    from: u64,
) -> Result<Vec<EventBody>, StoreError> {
    if header.events <= from {
        return Ok(Vec::new());
    }
    let mut bodies = Vec::new();
    store.read(&mut |snapshot| {
        bodies = snapshot
            .events(&header.id)?
            .into_iter()
            .filter(|event| event.seq >= from && !event.reverted)
            .map(|event| event.body)
            .collect();
        Ok(())
    })?;
    Ok(bodies)
}

/// `ms` (Unix milliseconds) as UTC, `2026-11-26T01:41:01Z`.
pub fn utc(ms: u64) -> String {
    stratum_runtime::utc(ms)
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn times_are_utc() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_657_261_000), "2026-11-26T01:41:01Z");
    }
}
