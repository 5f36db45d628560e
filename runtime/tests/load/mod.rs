//! The shared-store load (issue 18): several `stratum-mcp` server processes on one store,
//! concurrent agents each driving its own long flow through them, and the operator's CLI
//! approving gates meanwhile, as separate processes of the real binary; then a check, from the
//! store through the CLI, that every flow completed with every step exactly once.
//!
//! - The spec ([`spec`]): one flow `main` of `steps` steps `s0`, `s1`, …, each inline step
//!   reading the previous step's output through a contract and an `ensure`; every
//!   `gate_every`-th step (not the last) is a gate whose approval goes on to the next step.
//! - Agent `i` talks to server `i % servers` over MCP (rmcp's client, as an agent does): it
//!   starts its flow with `stratum_plan`, submits each step's result with `stratum_step_done`
//!   (timing each round trip), and at a gate polls `stratum_resume` until someone else has
//!   approved it.
//! - The approver runs `stratum-mcp query gates --json` and `stratum-mcp gate approve` for
//!   each waiting gate, until every agent is done.
//! - The check: `query flows --json` lists exactly the agents' flows, all complete;
//!   `query flow ID --json` of each has the steps' records in order, each step once with one
//!   attempt, each gate approved once by the CLI, and every step's output as submitted. Each
//!   agent saw exactly the dispatches it expected, in order.
//!
//! Shared by the test (`tests/shared_store_load.rs`, asserting) and the benchmark
//! (`benches/shared_store_load.rs`, printing throughput and round trips).

#![allow(dead_code, clippy::indexing_slicing)] // JSON indexes to null

use std::ffi::OsString;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// Where the servers and the CLI keep state.
#[derive(Clone, Debug)]
pub enum StoreAt {
    /// A SQLite database file (`--db PATH`).
    Sqlite(PathBuf),
    /// A PostgreSQL URL (`--database-url URL`).
    Postgres(String),
}

impl StoreAt {
    pub fn name(&self) -> &'static str {
        match self {
            StoreAt::Sqlite(_) => "SQLite",
            StoreAt::Postgres(_) => "PostgreSQL",
        }
    }

    /// The binary's global options choosing this store.
    fn args(&self) -> Vec<OsString> {
        match self {
            StoreAt::Sqlite(path) => vec!["--db".into(), path.into()],
            StoreAt::Postgres(url) => vec!["--database-url".into(), url.into()],
        }
    }
}

/// The shape of the load.
#[derive(Clone, Debug)]
pub struct Load {
    pub servers: usize,
    pub agents: usize,
    /// Steps per flow, gates included.
    pub steps: usize,
    /// Every `gate_every`-th step is a gate.
    pub gate_every: usize,
    /// How long the approver sleeps when no gate waits.
    pub approver_idle: Duration,
    /// How long an agent at a gate sleeps between two `stratum_resume`s.
    pub gate_poll: Duration,
    /// The whole load fails if it has not finished by then.
    pub deadline: Duration,
}

impl Default for Load {
    /// Issue 18's: 4 servers, 8 agents, 200-step flows, a gate every 50 steps.
    fn default() -> Load {
        Load {
            servers: 4,
            agents: 8,
            steps: 200,
            gate_every: 50,
            approver_idle: Duration::from_millis(50),
            gate_poll: Duration::from_millis(20),
            deadline: Duration::from_secs(600),
        }
    }
}

impl Load {
    /// Whether step `index` is a gate.
    pub fn is_gate(&self, index: usize) -> bool {
        self.gate_every > 0
            && index % self.gate_every == self.gate_every - 1
            && index + 1 < self.steps
    }

    pub fn gates_per_flow(&self) -> usize {
        (0..self.steps).filter(|&index| self.is_gate(index)).count()
    }
}

/// What a load did.
#[derive(Debug)]
pub struct Report {
    pub store: &'static str,
    pub load: Load,
    /// From the first `stratum_plan` to the last flow's completion.
    pub elapsed: Duration,
    /// Every `stratum_step_done` round trip, sorted.
    pub step_done: Vec<Duration>,
    /// Gates approved by the CLI.
    pub approved: usize,
    /// `gate approve`s that found the gate no longer waiting (none are expected: one approver).
    pub conflicts: usize,
    /// `stratum_resume` calls made by agents waiting at gates.
    pub resumes: usize,
    /// The flows, agent by agent.
    pub flows: Vec<String>,
}

impl Report {
    /// Steps completed (gates included) per second of the run.
    pub fn throughput(&self) -> f64 {
        (self.load.agents * self.load.steps) as f64 / self.elapsed.as_secs_f64()
    }

    /// The `p`-th percentile (0–100) of the step_done round trips (nearest rank).
    pub fn percentile(&self, p: f64) -> Duration {
        let Some(last) = self.step_done.len().checked_sub(1) else {
            return Duration::ZERO;
        };
        let rank = ((p / 100.0) * self.step_done.len() as f64).ceil() as usize;
        self.step_done
            .get(rank.saturating_sub(1).min(last))
            .copied()
            .unwrap_or_default()
    }

    /// One paragraph: the load, throughput and round trips.
    pub fn summary(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mut text = String::new();
        let _ = write!(
            text,
            "{}: {} servers, {} agents × {}-step flows ({} step_done, {} gates approved from the \
             CLI, {} conflicts) in {:.2} s: {:.0} steps/s; step_done round trip p50 {:.2} ms, \
             p99 {:.2} ms, max {:.2} ms",
            self.store,
            self.load.servers,
            self.load.agents,
            self.load.steps,
            self.step_done.len(),
            self.approved,
            self.conflicts,
            self.elapsed.as_secs_f64(),
            self.throughput(),
            ms(self.percentile(50.0)),
            ms(self.percentile(99.0)),
            ms(self.percentile(100.0)),
        );
        text
    }
}

/// The spec of the load: flow `main` of `load.steps` steps.
pub fn spec(load: &Load) -> String {
    let mut spec = String::from(
        "version: \"0.2\"\n\
         contracts:\n\
         \x20 Part:\n\
         \x20   n: {type: integer}\n\
         \x20   note: {type: string}\n\
         functions:\n\
         \x20 approval:\n\
         \x20   mode: gate\n\
         flows:\n\
         \x20 main:\n\
         \x20   input: {text: {type: string}}\n\
         \x20   output: Part\n\
         \x20   steps:\n",
    );
    let mut previous_work: Option<usize> = None;
    for index in 0..load.steps {
        let id = step_id(index);
        let _ = writeln!(spec, "      - id: {id}");
        if load.is_gate(index) {
            let _ = writeln!(spec, "        function: approval");
            let _ = writeln!(spec, "        depends_on: [{}]", step_id(index - 1));
            let _ = writeln!(spec, "        on_approve: {}", step_id(index + 1));
            let _ = writeln!(spec, "        on_revise: {}", step_id(index - 1));
            let _ = writeln!(spec, "        on_kill: ~");
            continue;
        }
        let _ = writeln!(spec, "        intent: \"Do part {index} of the work\"");
        match previous_work {
            None => {
                let _ = writeln!(spec, "        inputs: {{text: \"$.input.text\"}}");
            }
            Some(work) => {
                let _ = writeln!(
                    spec,
                    "        inputs: {{previous: \"$.steps.{}.output.note\"}}",
                    step_id(work)
                );
                let _ = writeln!(spec, "        depends_on: [{}]", step_id(index - 1));
            }
        }
        let _ = writeln!(spec, "        output_contract: Part");
        let _ = writeln!(spec, "        ensure: [\"result.n >= 0\"]");
        previous_work = Some(index);
    }
    spec
}

/// The id of step `index`.
pub fn step_id(index: usize) -> String {
    format!("s{index}")
}

/// The result agent `agent` submits for step `index`: it passes the step's contract and ensure.
pub fn result(agent: usize, index: usize) -> Value {
    json!({"n": index, "note": format!("agent {agent}, part {index}")})
}

/// The note the approver leaves on every gate.
const NOTE: &str = "approved by the load's operator";

/// A `stratum-mcp` server process and the client talking to it.
struct Server {
    client: RunningService<RoleClient, ()>,
}

impl Server {
    async fn start(binary: &Path, store: &StoreAt, home: &Path) -> Server {
        let mut command = tokio::process::Command::new(binary);
        command
            .args(store.args())
            .env("STRATUM_HOME", home)
            .env_remove("STRATUM_DB")
            .env_remove("STRATUM_DATABASE_URL")
            .env_remove("STRATUM_LOG")
            .current_dir(home)
            .stderr(Stdio::inherit());
        let transport = TokioChildProcess::new(command).expect("stratum-mcp starts");
        let client = ().serve(transport).await.unwrap_or_else(|error| {
            panic!(
                "stratum-mcp on {} did not initialize: {error}",
                store.name()
            )
        });
        Server { client }
    }

    /// Calls a tool that must answer; its structured answer.
    async fn call(&self, tool: &str, arguments: Value) -> Value {
        let Value::Object(arguments) = arguments else {
            panic!("arguments are an object");
        };
        let result = self
            .client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
            .await
            .unwrap_or_else(|error| panic!("{tool}: {error}"));
        assert_ne!(result.is_error, Some(true), "{tool} refused: {result:?}");
        result
            .structured_content
            .unwrap_or_else(|| panic!("{tool}: no structuredContent"))
    }

    async fn stop(self) {
        let _ = self.client.cancel().await;
    }
}

fn status(answer: &Value) -> &str {
    answer.get("status").and_then(Value::as_str).unwrap_or("")
}

/// Runs `stratum-mcp [store options] ARGS` as the operator does.
async fn cli(binary: &Path, store: &StoreAt, home: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(binary)
        .args(store.args())
        .args(args)
        .env("STRATUM_HOME", home)
        .env_remove("STRATUM_DB")
        .env_remove("STRATUM_DATABASE_URL")
        .env_remove("STRATUM_LOG")
        .current_dir(home)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("stratum-mcp runs")
}

/// The JSON a CLI command printed, which must have succeeded.
fn json_of(args: &[&str], output: &Output) -> Value {
    assert!(
        output.status.success(),
        "stratum-mcp {args:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "stratum-mcp {args:?} printed no JSON ({error}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// What one agent did.
struct Agent {
    flow: String,
    step_done: Vec<Duration>,
    resumes: usize,
}

/// Drives one flow on `server` to its end, checking each dispatch is the step expected.
async fn agent(
    number: usize,
    server: Arc<Server>,
    spec: Arc<String>,
    load: Load,
    deadline: Instant,
) -> Agent {
    let planned = server
        .call(
            "stratum_plan",
            json!({"spec": spec.as_str(), "flow": "main", "inputs": {"text": format!("agent {number}")}}),
        )
        .await;
    let flow = planned["flow_id"]
        .as_str()
        .unwrap_or_else(|| panic!("agent {number}: stratum_plan gave no flow: {planned:#}"))
        .to_owned();
    let mut done = Agent {
        flow: flow.clone(),
        step_done: Vec::with_capacity(load.steps),
        resumes: 0,
    };
    let mut answer = planned;
    let mut next = 0;
    loop {
        assert!(
            Instant::now() < deadline,
            "agent {number}: the load did not finish in {:?}",
            load.deadline
        );
        let expected = step_id(next);
        match status(&answer) {
            "execute_step" => {
                assert!(!load.is_gate(next), "agent {number}: {answer:#}");
                assert_eq!(
                    answer["step_id"],
                    json!(expected),
                    "agent {number}: {answer:#}"
                );
                let arguments = json!({"flow_id": flow, "step_id": expected,
                                       "result": result(number, next)});
                let sent = Instant::now();
                answer = server.call("stratum_step_done", arguments).await;
                done.step_done.push(sent.elapsed());
                next += 1;
            }
            "await_gate" => {
                assert!(load.is_gate(next), "agent {number}: {answer:#}");
                assert_eq!(
                    answer["step_id"],
                    json!(expected),
                    "agent {number}: {answer:#}"
                );
                // The operator decides; the agent looks again now and then.
                while status(&answer) == "await_gate" {
                    assert!(
                        Instant::now() < deadline,
                        "agent {number}: gate {expected} never approved"
                    );
                    tokio::time::sleep(load.gate_poll).await;
                    answer = server
                        .call("stratum_resume", json!({"flow_id": flow}))
                        .await;
                    done.resumes += 1;
                }
                next += 1;
            }
            "complete" => {
                assert_eq!(next, load.steps, "agent {number}: complete too soon");
                return done;
            }
            _ => panic!("agent {number} at {expected}: {answer:#}"),
        }
    }
}

/// Approves every waiting gate from the CLI until `finished` reaches the number of agents;
/// (approved, conflicts).
async fn approver(
    binary: PathBuf,
    store: StoreAt,
    home: PathBuf,
    load: Load,
    finished: Arc<AtomicUsize>,
    deadline: Instant,
) -> (usize, usize) {
    let (mut approved, mut conflicts) = (0, 0);
    while finished.load(Ordering::SeqCst) < load.agents {
        assert!(
            Instant::now() < deadline,
            "the approver: the load did not finish in {:?}",
            load.deadline
        );
        let args = ["query", "gates", "--json"];
        let gates = json_of(&args, &cli(&binary, &store, &home, &args).await);
        let gates = gates.as_array().cloned().unwrap_or_default();
        if gates.is_empty() {
            tokio::time::sleep(load.approver_idle).await;
            continue;
        }
        for gate in gates {
            let (Some(flow), Some(step)) = (gate["flow_id"].as_str(), gate["step_id"].as_str())
            else {
                panic!("a gate without flow or step: {gate:#}");
            };
            let args = ["gate", "approve", flow, step, "--note", NOTE, "--json"];
            let output = cli(&binary, &store, &home, &args).await;
            match output.status.code() {
                Some(0) => approved += 1,
                Some(2) => conflicts += 1,
                _ => panic!(
                    "stratum-mcp {args:?}: {}\n{}{}",
                    output.status,
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ),
            }
        }
    }
    (approved, conflicts)
}

/// Awaits a task, passing its panic on.
async fn joined<T>(task: tokio::task::JoinHandle<T>) -> T {
    match task.await {
        Ok(value) => value,
        Err(error) => match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(error) => panic!("a task of the load was cancelled: {error}"),
        },
    }
}

/// Runs the load with `binary` (`stratum-mcp`) on `store`, `home` as every process's
/// `STRATUM_HOME` and working directory; checks the store afterwards and panics on any
/// missing, repeated or unexpected step.
pub async fn run(binary: &Path, store: &StoreAt, home: &Path, load: &Load) -> Report {
    let spec = Arc::new(spec(load));
    let mut servers = Vec::with_capacity(load.servers);
    for _ in 0..load.servers {
        servers.push(Arc::new(Server::start(binary, store, home).await));
    }
    let began = Instant::now();
    let deadline = began + load.deadline;
    let finished = Arc::new(AtomicUsize::new(0));
    let approving = tokio::spawn(approver(
        binary.to_owned(),
        store.clone(),
        home.to_owned(),
        load.clone(),
        finished.clone(),
        deadline,
    ));
    let agents: Vec<_> = (0..load.agents)
        .map(|number| {
            let server = servers
                .get(number % load.servers)
                .cloned()
                .expect("a server for every agent");
            let (spec, load, finished) = (spec.clone(), load.clone(), finished.clone());
            tokio::spawn(async move {
                let done = agent(number, server, spec, load, deadline).await;
                finished.fetch_add(1, Ordering::SeqCst);
                done
            })
        })
        .collect();
    let mut done = Vec::with_capacity(load.agents);
    for task in agents {
        done.push(joined(task).await);
    }
    let elapsed = began.elapsed();
    let (approved, conflicts) = joined(approving).await;
    for server in servers {
        if let Ok(server) = Arc::try_unwrap(server) {
            server.stop().await;
        }
    }

    let mut step_done: Vec<Duration> = done
        .iter()
        .flat_map(|agent| agent.step_done.iter().copied())
        .collect();
    step_done.sort_unstable();
    let report = Report {
        store: store.name(),
        load: load.clone(),
        elapsed,
        step_done,
        approved,
        conflicts,
        resumes: done.iter().map(|agent| agent.resumes).sum(),
        flows: done.into_iter().map(|agent| agent.flow).collect(),
    };
    check(binary, store, home, &report).await;
    report
}

/// Checks from the store, through the CLI, that every flow completed with each step once.
async fn check(binary: &Path, store: &StoreAt, home: &Path, report: &Report) {
    let load = &report.load;
    let gates = load.agents * load.gates_per_flow();
    assert_eq!(
        report.step_done.len(),
        load.agents * (load.steps - load.gates_per_flow())
    );
    assert_eq!(report.approved, gates, "every gate approved once");
    assert_eq!(report.conflicts, 0, "one approver meets no conflict");

    let args = ["query", "flows", "--json"];
    let flows = json_of(&args, &cli(binary, store, home, &args).await);
    let mut listed: Vec<&str> = flows
        .as_array()
        .map(|flows| flows.iter().filter_map(|f| f["flow_id"].as_str()).collect())
        .unwrap_or_default();
    listed.sort_unstable();
    let mut ours: Vec<&str> = report.flows.iter().map(String::as_str).collect();
    ours.sort_unstable();
    assert_eq!(listed, ours, "the store holds exactly the agents' flows");

    for (number, flow) in report.flows.iter().enumerate() {
        let args = ["query", "flow", flow.as_str(), "--json"];
        let state = json_of(&args, &cli(binary, store, home, &args).await);
        let context = format!("agent {number}'s flow {flow}");
        assert_eq!(state["status"], "complete", "{context}");
        assert_eq!(state["terminal_status"], "complete", "{context}");
        assert_eq!(
            state["rounds"],
            json!([]),
            "{context}: no revise, one round"
        );
        let records = state["records"].as_array().cloned().unwrap_or_default();
        let traced: Vec<&str> = records
            .iter()
            .map(|record| record["step_id"].as_str().unwrap_or("?"))
            .collect();
        let expected: Vec<String> = (0..load.steps).map(step_id).collect();
        assert_eq!(traced, expected, "{context}: every step once, in order");
        for (index, record) in records.iter().enumerate() {
            if load.is_gate(index) {
                assert_eq!(
                    (
                        &record["type"],
                        &record["outcome"],
                        &record["resolved_by"],
                        &record["rationale"]
                    ),
                    (
                        &json!("gate"),
                        &json!("approve"),
                        &json!("human"),
                        &json!(NOTE)
                    ),
                    "{context}: {record:#}"
                );
            } else {
                assert_eq!(
                    (&record["type"], &record["attempts"]),
                    (&json!("step"), &json!(1)),
                    "{context}: {record:#}"
                );
                assert_eq!(
                    state["step_outputs"][step_id(index)],
                    result(number, index),
                    "{context}: the output of {}",
                    step_id(index)
                );
            }
        }
    }
}
