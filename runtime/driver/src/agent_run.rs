//! One agent process, recorded: a row written before it starts, updated with its pid as soon
//! as it has one (so a driver that takes the flow over can find and end it), its live tail
//! written at most once a second while it runs, and its end written before the result is
//! reported to the flow.

use std::collections::VecDeque;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use stratum_agents::{Connector, Outcome, Request, Run, Usage, Watch, process_start};
use stratum_runtime::Store;
use stratum_runtime::store::drives::{TEXT_TAIL_CHARS, stored_events};
use stratum_runtime::store::{AgentRun, RunStatus};
use tokio_util::sync::CancellationToken;

use crate::DriveError;

/// The lines of a running agent's stream kept for its live tail.
const LIVE_LINES: usize = 40;

/// How often a running agent's row is brought up to date.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// A running agent as its watcher sees it.
#[derive(Default)]
struct Live {
    pid: Option<u32>,
    lines: VecDeque<String>,
    seen: u64,
    bytes: u64,
    start: Option<u64>,
    dirty: bool,
}

struct Watcher {
    live: Arc<Mutex<Live>>,
    store: Arc<dyn Store>,
    row: AgentRun,
}

impl Watch for Watcher {
    /// Records the process before the agent is given its prompt (the connector writes stdin
    /// only after this returns), so that a driver killed at any moment from here on leaves a
    /// row naming the process group to end.
    fn spawned(&mut self, pid: u32) {
        let start = process_start(pid);
        {
            let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
            live.pid = Some(pid);
            live.start = start;
        }
        self.row.pid = Some(pid);
        self.row.process_start = start;
        self.row.updated_ms = stratum_runtime::now_ms();
        // On a thread of its own: a store may run an async runtime of its own, which cannot
        // be entered from the connector's.
        let (store, row) = (&self.store, &self.row);
        std::thread::scope(|scope| {
            let _ = scope.spawn(|| store.put_run(row)).join();
        });
    }

    fn line(&mut self, line: &str) {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.seen += 1;
        live.bytes += line.len() as u64;
        if live.lines.len() == LIVE_LINES {
            live.lines.pop_front();
        }
        live.lines.push_back(line.chars().take(2_000).collect());
        live.dirty = true;
    }
}

/// Runs `request` on `connector`, recorded in `store` as `run` (its id, flow, step, owner
/// and host already set), until it ends or `cancel` fires. The row is final when this
/// returns.
pub fn run_recorded(
    store: &Arc<dyn Store>,
    connector: &Connector,
    request: &Request,
    mut run: AgentRun,
    cancel: &CancellationToken,
) -> Result<(AgentRun, Option<Run>), DriveError> {
    run.deadline_ms = run
        .started_ms
        .saturating_add(u64::try_from(request.deadline.as_millis()).unwrap_or(u64::MAX));
    store.put_run(&run)?;
    let live = Arc::new(Mutex::new(Live::default()));
    let (finished, wait) = mpsc::channel::<()>();
    let flusher = {
        let (store, live, mut row) = (store.clone(), live.clone(), run.clone());
        std::thread::spawn(move || flush_while_running(&*store, &live, &wait, &mut row))
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| DriveError::Runtime(error.to_string()));
    let outcome = runtime.and_then(|runtime| {
        let mut watcher = Watcher {
            live: live.clone(),
            store: store.clone(),
            row: run.clone(),
        };
        runtime
            .block_on(connector.run_watched(request, cancel, &mut watcher))
            .map_err(DriveError::from)
    });
    drop(finished);
    let _ = flusher.join();
    {
        let live = live.lock().unwrap_or_else(PoisonError::into_inner);
        run.pid = live.pid;
        run.process_start = live.start;
    }
    run.finished_ms = Some(stratum_runtime::now_ms());
    run.updated_ms = stratum_runtime::now_ms();
    match outcome {
        Ok(finished) => {
            settle(&mut run, &finished);
            store.put_run(&run)?;
            Ok((run, Some(finished)))
        }
        Err(error) => {
            run.status = RunStatus::Crashed;
            run.reason = Some(error.to_string());
            store.put_run(&run)?;
            Ok((run, None))
        }
    }
}

/// Writes the live tail every [`FLUSH_EVERY`] while it changes, until `finished` is dropped
/// (which wakes it at once: a run's end never waits for a tick).
fn flush_while_running(
    store: &dyn Store,
    live: &Mutex<Live>,
    finished: &mpsc::Receiver<()>,
    row: &mut AgentRun,
) {
    while let Err(RecvTimeoutError::Timeout) = finished.recv_timeout(FLUSH_EVERY) {
        let mut state = live.lock().unwrap_or_else(PoisonError::into_inner);
        if !state.dirty {
            continue;
        }
        row.pid = state.pid;
        row.process_start = state.start;
        row.events = stored_events(state.lines.iter().map(String::as_str));
        row.events_seen = state.seen;
        row.bytes_seen = state.bytes;
        row.updated_ms = stratum_runtime::now_ms();
        state.dirty = false;
        drop(state);
        // A failed write of the live tail loses only the tail: the end is written anyway.
        let _ = store.put_run(row);
    }
}

/// The row's end, from how the run ended.
fn settle(row: &mut AgentRun, run: &Run) {
    let (status, reason) = match &run.outcome {
        Outcome::Answered { object } => {
            row.result = Some(Value::Object(object.clone()));
            (RunStatus::Answered, None)
        }
        Outcome::NoJson => (
            RunStatus::NoJson,
            Some("the agent's final text held no JSON object".to_owned()),
        ),
        Outcome::AgentError { message } => (RunStatus::AgentError, Some(message.clone())),
        Outcome::Crashed { message } => (
            RunStatus::Crashed,
            Some(message.clone().unwrap_or_else(|| describe_exit(run))),
        ),
        Outcome::TimedOut => (
            RunStatus::TimedOut,
            Some(format!(
                "the agent ran past its deadline ({} s); its process group was ended",
                run.elapsed.as_secs()
            )),
        ),
        Outcome::Cancelled => (
            RunStatus::Cancelled,
            Some("cancelled; the process group was ended".to_owned()),
        ),
    };
    row.status = status;
    row.reason = reason;
    row.exit_code = run.exit.code;
    row.signal = run.exit.signal;
    row.usage = usage_json(&run.usage);
    if row.model.is_none() {
        row.model = run.usage.model.clone();
    }
    let chars = run.text.chars().count();
    row.text_tail = run
        .text
        .chars()
        .skip(chars.saturating_sub(TEXT_TAIL_CHARS))
        .collect();
    row.stderr_tail = run.stderr.text();
    row.events = stored_events(run.log.lines());
    row.events_seen = run.log.lines_seen;
    row.bytes_seen = run.log.bytes_seen;
}

fn describe_exit(run: &Run) -> String {
    match (run.exit.code, run.exit.signal) {
        (Some(code), _) => format!("the agent exited with status {code}"),
        (None, Some(signal)) => format!("the agent was killed by signal {signal}"),
        (None, None) => "the agent ended with no exit status".to_owned(),
    }
}

/// Usage as the runtime's budget reads it: tokens and model, and dollars when the CLI
/// reported its cost.
pub fn usage_json(usage: &Usage) -> Value {
    let input = usage.input_tokens.unwrap_or(0);
    let output = usage.output_tokens.unwrap_or(0);
    let mut value = serde_json::Map::new();
    value.insert("input_tokens".to_owned(), json!(input));
    value.insert("output_tokens".to_owned(), json!(output));
    if let Some(model) = &usage.model {
        value.insert("model".to_owned(), json!(model));
    }
    if let Some(cost) = usage.cost_usd {
        value.insert("tokens".to_owned(), json!(input.saturating_add(output)));
        value.insert("dollars".to_owned(), json!(cost));
    }
    Value::Object(value)
}

/// What a failed run tells the next attempt: its status and reason, as one violation.
pub fn violation(run: &AgentRun) -> String {
    let reason = run.reason.as_deref().unwrap_or("no result");
    match run.status {
        RunStatus::NoJson => format!(
            "no_result: your answer held no JSON object; end your answer with one JSON object \
             matching the output schema ({reason})"
        ),
        status => format!(
            "no_result: the agent run ended {}: {reason}",
            status.as_str()
        ),
    }
}
