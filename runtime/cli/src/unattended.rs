//! `stratum-mcp run` and `stratum-mcp worker`: flows driven by the runtime itself, an agent
//! process launched for each step (see `stratum_driver`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stratum_agents::{Agent, Connector};
use stratum_driver::{Driver, Ended, Progress, StopSignal, Turn, Worker, agent_named};
use stratum_runtime::ids::FlowId;
use stratum_runtime::response::StepDispatch;
use stratum_runtime::store::{AgentRun, Drive, Enrolled};
use stratum_runtime::{Command, Config, Runtime, Store};

use stratum_grammar::print::visible;

use crate::operator::StoreAt;
use crate::print;

/// How agents are launched: the flags `run` and `worker` share.
#[derive(clap::Args, Clone)]
pub struct AgentOptions {
    /// The agent of steps that name none: claude, codex or opencode
    #[arg(long, value_name = "AGENT", default_value = "claude")]
    pub agent: String,
    /// The model of steps that name none (passed to the agent's CLI)
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// The `claude` binary (default: found on PATH)
    #[arg(long, value_name = "PATH")]
    pub claude: Option<PathBuf>,
    /// The `codex` binary (default: found on PATH)
    #[arg(long, value_name = "PATH")]
    pub codex: Option<PathBuf>,
    /// The `opencode` binary (default: found on PATH)
    #[arg(long, value_name = "PATH")]
    pub opencode: Option<PathBuf>,
    /// An environment variable agents may see besides the allow-list (repeatable)
    #[arg(long = "allow-env", value_name = "NAME")]
    pub allow_env: Vec<String>,
    /// Each agent run's deadline, in seconds; past it its process group is ended
    #[arg(long, value_name = "SECONDS", default_value_t = 1800)]
    pub step_timeout: u64,
    /// How long a driver's lease on a flow lasts unless renewed, in seconds: how long a flow
    /// whose driver was killed waits before another takes it over
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub lease: u64,
    /// The project root agents work in (default: the current directory)
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Where parallel tasks get their git worktrees (default: $STRATUM_HOME/worktrees, else
    /// ~/.stratum/worktrees); must be outside the project
    #[arg(long, value_name = "DIR")]
    pub worktrees: Option<PathBuf>,
    /// Keep each parallel task's worktree after the merge, for debugging
    #[arg(long)]
    pub keep_worktrees: bool,
    /// A program a `pre_merge_verify` read from the flow's data (a `$` reference, not written
    /// in the spec) may run (repeatable); commands written in the spec always run
    #[arg(long = "verify-allow", value_name = "PROGRAM")]
    pub verify_allow: Vec<String>,
    /// Each pre-merge command's deadline, in seconds
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub verify_timeout: u64,
}

impl AgentOptions {
    fn driver(&self, store: Arc<dyn Store>) -> Result<Driver, String> {
        let root = match &self.root {
            Some(root) => root.clone(),
            None => std::env::current_dir()
                .map_err(|error| format!("cannot read the current directory: {error}"))?,
        };
        let root = root
            .canonicalize()
            .map_err(|error| format!("--root {}: {error}", root.display()))?;
        let default_agent = agent_named(&self.agent).ok_or_else(|| {
            format!(
                "--agent {}: not an agent this runtime launches; use claude, codex or opencode",
                self.agent
            )
        })?;
        let config = Config::default().with_root(root.clone());
        let mut driver = Driver::new(Runtime::new(store, config), root);
        driver.default_agent = default_agent;
        driver.step_deadline = Duration::from_secs(self.step_timeout.max(1));
        driver.lease = Duration::from_secs(self.lease.max(1));
        if let Some(worktrees) = &self.worktrees {
            driver.worktrees = std::path::absolute(worktrees)
                .map_err(|error| format!("--worktrees {}: {error}", worktrees.display()))?;
        }
        if driver.worktrees.starts_with(&driver.root) {
            return Err(format!(
                "--worktrees {}: task worktrees must be outside the project {}, or git would see them as part of it",
                driver.worktrees.display(),
                driver.root.display()
            ));
        }
        driver.keep_worktrees = self.keep_worktrees;
        driver.verify_allow = self.verify_allow.clone();
        driver.verify_deadline = Duration::from_secs(self.verify_timeout.max(1));
        driver.verify_env = self.allow_env.clone();
        for agent in Agent::ALL {
            let mut connector = Connector::new(agent);
            let binary = match agent {
                Agent::Claude => &self.claude,
                Agent::Codex => &self.codex,
                Agent::OpenCode => &self.opencode,
            };
            if let Some(binary) = binary {
                connector.binary = binary.clone();
            }
            connector.extra_env = self.allow_env.clone();
            driver.connectors.insert(agent, connector);
        }
        Ok(driver)
    }
}

/// `stratum-mcp run SPEC`.
pub struct RunArgs<'a> {
    pub spec: &'a Path,
    pub flow: Option<String>,
    pub inputs: &'a [String],
    pub detach: bool,
    pub json: bool,
    pub options: &'a AgentOptions,
}

pub fn run(at: &StoreAt, args: &RunArgs<'_>) -> ExitCode {
    match run_inner(at, args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("stratum-mcp: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(at: &StoreAt, args: &RunArgs<'_>) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(args.spec)
        .map_err(|error| format!("cannot read {}: {error}", args.spec.display()))?;
    let name = args.spec.display().to_string();
    let plan = stratum_runtime::compile::plan_from_spec(&name, &text).map_err(|error| {
        format!("{name}: {error}; `stratum-mcp validate {name}` shows where and how to fix it")
    })?;
    let inputs = parse_inputs(args.inputs)?;
    let store = at.open_or_create().map_err(|error| error.to_string())?;
    let driver = args.options.driver(store.clone())?;
    let started = driver
        .runtime
        .call(&Command::Start {
            plan: Arc::new(plan),
            flow: args.flow.clone(),
            inputs,
            // The person at the terminal started it: a gate that forbids self-approval
            // refuses their approval.
            started_by: Some(stratum_mcp::identity::os_user()),
        })
        .map_err(|error| error.to_string())?
        .to_json();
    let Some(id) = started
        .get("flow_id")
        .and_then(Value::as_str)
        .and_then(FlowId::parse)
    else {
        return Ok(print::json_with(&started, 1));
    };
    let mut drive = Drive::new(id.clone(), stratum_runtime::now_ms());
    drive.agent = Some(args.options.agent.clone());
    drive.model = args.options.model.clone();
    if let Enrolled::AlreadyActive(_) = store.enroll(&drive).map_err(|e| e.to_string())? {
        return Err(format!("flow {id} is already driven"));
    }
    if args.detach {
        let answer = json!({
            "status": "enrolled",
            "flow_id": id.to_string(),
            "how_to_follow": format!("stratum-mcp query flow {id}"),
            "note": "a worker drives it: stratum-mcp worker (on any machine on this store)",
        });
        return Ok(if args.json || !std::io::stdout().is_terminal() {
            print::json_with(&answer, 0)
        } else {
            print::text_with(
                &format!(
                    "flow {id} enrolled; `stratum-mcp worker` drives it (follow it with \
                     `stratum-mcp query flow {id}`)\n"
                ),
                0,
            )
        });
    }
    let stop = StopSignal::new();
    let signals = listen_for_signals(stop.clone());
    let mut progress = Display::new(std::io::stderr().is_terminal() && !args.json);
    let ended = drive_to_end(&driver, &id, &stop, &mut progress)?;
    drop(signals);
    let audit = driver
        .runtime
        .call(&Command::Audit {
            flow_id: id.to_string(),
        })
        .map_err(|error| error.to_string())?
        .to_json();
    let code = match &ended {
        Ended::Finished { status } if status == "complete" => 0,
        Ended::Yielded => 130,
        _ => 1,
    };
    let answer = json!({
        "status": field(&stratum_driver::ended_json(&ended), "status"),
        "flow_id": id.to_string(),
        "ended": stratum_driver::ended_json(&ended),
        "audit": audit,
    });
    Ok(if args.json || !std::io::stdout().is_terminal() {
        print::json_with(&answer, code)
    } else {
        print::text_with(&summary(&id, &ended, &audit), code)
    })
}

/// Drives `id` until it finishes, hands off or is stopped, waiting at gates for a person.
fn drive_to_end(
    driver: &Driver,
    id: &FlowId,
    stop: &StopSignal,
    progress: &mut Display,
) -> Result<Ended, String> {
    let store = driver.runtime.store().clone();
    let mut told = false;
    loop {
        let ended = driver
            .drive(id, Turn::Whole, stop, progress)
            .map_err(|error| error.to_string())?;
        match &ended {
            Ended::Parked { flow, step } if !stop.requested() => {
                if !told {
                    let step = visible(step);
                    progress.note(&format!(
                        "waiting at gate `{step}` for a person: stratum-mcp gate approve {flow} \
                         {step} --note \"…\" (or revise, kill), or the console"
                    ));
                    told = true;
                }
            }
            Ended::NotClaimable if !stop.requested() => {}
            Ended::Parked { .. } | Ended::NotClaimable => return Ok(Ended::Yielded),
            _ => return Ok(ended),
        }
        let _ = store.wait_for_change(Duration::from_millis(500));
        stop.sleep(Duration::from_millis(100));
        if !matches!(ended, Ended::Parked { .. }) {
            told = false;
        }
    }
}

/// `k=v` pairs: a value that is JSON is taken as JSON, any other as a string.
fn parse_inputs(pairs: &[String]) -> Result<Value, String> {
    let mut inputs = serde_json::Map::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("--input {pair}: write it as NAME=VALUE"));
        };
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        inputs.insert(key.trim().to_owned(), value);
    }
    Ok(Value::Object(inputs))
}

/// The live progress of `run`: a line per step attempt on standard error.
struct Display {
    terminal: bool,
    started: Instant,
    step_started: Instant,
}

impl Display {
    fn new(terminal: bool) -> Display {
        Display {
            terminal,
            started: Instant::now(),
            step_started: Instant::now(),
        }
    }

    fn note(&self, text: &str) {
        if self.terminal {
            eprintln!("  {text}");
        }
    }
}

impl Progress for Display {
    fn step_started(&mut self, step: &StepDispatch, attempt: u32, agent: &str) {
        self.step_started = Instant::now();
        if self.terminal {
            eprintln!(
                "[{}/{}] {} · attempt {attempt} · {agent} · {:.0}s elapsed",
                step.step_number,
                step.total_steps,
                visible(&step.step_id),
                self.started.elapsed().as_secs_f64()
            );
        }
    }

    fn step_ended(&mut self, _step: &StepDispatch, run: &AgentRun) {
        if self.terminal {
            let reason = run
                .reason
                .as_deref()
                .map(|r| format!(": {}", visible(r)))
                .unwrap_or_default();
            eprintln!(
                "      {} in {:.1}s (run {}){reason}",
                run.status.as_str(),
                self.step_started.elapsed().as_secs_f64(),
                run.id
            );
        }
    }
}

fn summary(id: &FlowId, ended: &Ended, audit: &Value) -> String {
    let status = field(audit, "status").as_str().unwrap_or("unknown");
    let mut text = format!(
        "flow {id}: {status} ({} of {} steps)\n",
        field(audit, "steps_completed"),
        field(audit, "total_steps")
    );
    if let Some(trace) = field(audit, "trace").as_array() {
        for record in trace {
            let step = visible(field(record, "step_id").as_str().unwrap_or("?"));
            match field(record, "type").as_str() {
                Some("gate") => text.push_str(&format!(
                    "  {step}: gate {} by {}\n",
                    visible(field(record, "outcome").as_str().unwrap_or("?")),
                    visible(field(record, "resolved_by").as_str().unwrap_or("?"))
                )),
                _ => text.push_str(&format!(
                    "  {step}: {} attempt(s)\n",
                    field(record, "attempts")
                )),
            }
        }
    }
    match ended {
        Ended::HandedOff { note } => text.push_str(&format!(
            "stopped: {}; the flow is an agent's to continue (stratum_resume)\n",
            visible(note)
        )),
        Ended::Yielded => text
            .push_str("interrupted: the flow stays enrolled; `stratum-mcp worker` continues it\n"),
        Ended::LostLease => text.push_str("another driver took the flow over\n"),
        _ => {}
    }
    text
}

/// `stratum-mcp worker`.
pub fn worker(at: &StoreAt, concurrency: usize, options: &AgentOptions) -> ExitCode {
    let store = match at.open_or_create() {
        Ok(store) => store,
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            return ExitCode::from(3);
        }
    };
    let driver = match options.driver(store) {
        Ok(driver) => driver,
        Err(message) => {
            eprintln!("stratum-mcp: {message}");
            return ExitCode::from(2);
        }
    };
    let worker = Worker::start(driver, concurrency);
    let stop = worker.stop_signal().clone();
    let signals = listen_for_signals(stop.clone());
    while !stop.requested() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let tallies = worker.stop_and_join();
    drop(signals);
    let turns: u64 = tallies.iter().map(|tally| tally.turns).sum();
    let finished: u64 = tallies.iter().map(|tally| tally.finished).sum();
    let errors: Vec<&String> = tallies.iter().flat_map(|tally| &tally.errors).collect();
    eprintln!(
        "stratum-mcp worker: stopped after {turns} turn(s); {finished} flow(s) finished; {} \
         error(s)",
        errors.len()
    );
    for error in errors.iter().take(10) {
        eprintln!("  {error}");
    }
    ExitCode::SUCCESS
}

/// SIGTERM or SIGINT once: stop after the step under way; twice: stop now (the agent run is
/// ended and its flow handed back).
fn listen_for_signals(stop: StopSignal) -> Option<std::thread::JoinHandle<()>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    Some(std::thread::spawn(move || {
        runtime.block_on(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                return;
            };
            let mut seen = 0;
            loop {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = int.recv() => {},
                }
                seen += 1;
                if seen == 1 {
                    stop.stop();
                    eprintln!("stratum-mcp: stopping after the step under way (again to stop now)");
                } else {
                    stop.stop_now();
                    return;
                }
            }
        });
    }))
}

/// `stratum-mcp query runs`.
pub fn query_runs(at: &StoreAt, flow: Option<&str>, limit: usize, json: bool) -> ExitCode {
    let flow = match flow.map(|text| (text, FlowId::parse(text))) {
        Some((text, None)) => {
            eprintln!("stratum-mcp: `{text}` is not a flow id");
            return ExitCode::from(1);
        }
        Some((_, id)) => id,
        None => None,
    };
    let runs = match at
        .open()
        .and_then(|store| store.agent_runs(flow.as_ref(), limit))
    {
        Ok(runs) => runs,
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            return ExitCode::from(3);
        }
    };
    if json || !std::io::stdout().is_terminal() {
        return print::json_with(&serde_json::to_value(&runs).unwrap_or_default(), 0);
    }
    let mut text = String::new();
    if runs.is_empty() {
        text.push_str("no agent runs\n");
    }
    for run in &runs {
        text.push_str(&format!(
            "{}  {:<11} {:<8} {} {}{}\n",
            run.id,
            run.status.as_str(),
            visible(&run.agent),
            run.flow
                .as_ref()
                .map_or_else(|| "-".to_owned(), ToString::to_string),
            visible(run.step.as_deref().unwrap_or("-")),
            run.reason
                .as_deref()
                .map(|reason| format!("  ({})", visible(reason)))
                .unwrap_or_default()
        ));
    }
    print::text_with(&text, 0)
}

/// `stratum-mcp query run ID`.
pub fn query_run(at: &StoreAt, id: &str, json: bool) -> ExitCode {
    if !stratum_runtime::store::drives::is_run_id(id) {
        eprintln!("stratum-mcp: `{id}` is not a run id (16 hex digits)");
        return ExitCode::from(1);
    }
    let run = match at.open().and_then(|store| store.agent_run(id)) {
        Ok(Some(run)) => run,
        Ok(None) => {
            eprintln!("stratum-mcp: no agent run `{id}`");
            return ExitCode::from(1);
        }
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            return ExitCode::from(3);
        }
    };
    if json || !std::io::stdout().is_terminal() {
        return print::json_with(&serde_json::to_value(&run).unwrap_or_default(), 0);
    }
    let mut text = format!(
        "run {}: {} ({}{})\n",
        run.id,
        run.status.as_str(),
        visible(&run.agent),
        run.model
            .as_deref()
            .map(|m| format!(", {}", visible(m)))
            .unwrap_or_default()
    );
    if let Some(reason) = &run.reason {
        text.push_str(&format!("  {}\n", visible(reason)));
    }
    if let Some(pid) = run.pid {
        text.push_str(&format!("  pid {pid} on {}\n", visible(&run.host)));
    }
    if let Some(result) = &run.result {
        text.push_str(&format!("  result: {}\n", visible(&result.to_string())));
    }
    text.push_str(&format!(
        "  {} events, the last {}:\n",
        run.events_seen,
        run.events.len()
    ));
    for line in run.events.iter().rev().take(20).rev() {
        text.push_str(&format!("    {}\n", visible(line)));
    }
    if !run.stderr_tail.is_empty() {
        text.push_str("  stderr:\n");
        for line in run.stderr_tail.lines() {
            text.push_str(&format!("    {}\n", visible(line)));
        }
    }
    print::text_with(&text, 0)
}

/// `stratum-mcp query drives`.
pub fn query_drives(at: &StoreAt, json: bool) -> ExitCode {
    let drives = match at.open().and_then(|store| store.drives()) {
        Ok(drives) => drives,
        Err(error) => {
            eprintln!("stratum-mcp: {error}");
            return ExitCode::from(3);
        }
    };
    if json || !std::io::stdout().is_terminal() {
        return print::json_with(&serde_json::to_value(&drives).unwrap_or_default(), 0);
    }
    let mut text = String::new();
    if drives.is_empty() {
        text.push_str("no flow is driven unattended\n");
    }
    for drive in &drives {
        let who = match (&drive.owner, &drive.parked) {
            (Some(owner), _) => format!("driven by {}", visible(owner)),
            (None, Some(_)) => "waiting at a gate".to_owned(),
            (None, None) => String::new(),
        };
        text.push_str(&format!(
            "{}  {:<9} {who}{}\n",
            drive.flow,
            drive.state.as_str(),
            drive
                .note
                .as_deref()
                .map(|note| format!(" ({})", visible(note)))
                .unwrap_or_default()
        ));
    }
    print::text_with(&text, 0)
}

/// `value.key`, or null: answers are read without indexing that could panic.
fn field<'v>(value: &'v Value, key: &str) -> &'v Value {
    value.get(key).unwrap_or(&Value::Null)
}
