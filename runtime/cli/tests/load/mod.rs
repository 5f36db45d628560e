//! The loads of issues 18 and 19: concurrent agents each driving its own long flow through
//! the real `stratum-mcp` binary, over MCP with rmcp's client as an agent does; then a check,
//! from the store through the operator's CLI, that every flow completed with every step
//! exactly once.
//!
//! - The spec ([`spec`]): one flow `main` of `steps` steps `s0`, `s1`, …, each inline step
//!   reading the previous step's output through a contract and an `ensure`; every
//!   `gate_every`-th step (not the last) is a gate whose approval goes on to the next step.
//! - How agents reach the store ([`Via`]):
//!   - issue 18's shared store, [`Via::Stdio`]: several stdio server processes on one store,
//!     agent `i` talking to server `i % servers`, and the operator's CLI approving the gates
//!     meanwhile (`stratum-mcp query gates --json`, `stratum-mcp gate approve`), an agent at a
//!     gate polling `stratum_resume` until someone has;
//!   - issue 19's [`Via::Http`]: one `stratum-mcp serve` process, every agent its own
//!     Streamable HTTP client (every other one opening with `server/discover`, the rest with
//!     `initialize`) with its own access token `agent-N`, approving its own gates with
//!     `stratum_gate_resolve`; `serve` is stopped with SIGTERM afterwards and must exit 0.
//! - An agent starts its flow with `stratum_plan` and submits each step's result with
//!   `stratum_step_done`, timing each round trip.
//! - The check: `query flows --json` lists exactly the agents' flows, all complete;
//!   `query flow ID --json` of each has the steps' records in order, each step once with one
//!   attempt, each gate approved once (over HTTP, recorded with the agent's token as its
//!   actor), and every step's output as submitted. Each agent saw exactly the dispatches it
//!   expected, in order.
//!
//! Shared by the tests (`tests/shared_store_load.rs`, `tests/http_load.rs`, asserting) and the
//! benchmarks (`benches/shared_store_load.rs`, `benches/http_load.rs`, printing throughput and
//! round trips).

#![allow(dead_code, clippy::indexing_slicing)] // JSON indexes to null

use std::ffi::OsString;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

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

/// How the agents reach the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// `servers` stdio server processes, agent `i` on server `i % servers`; the operator's CLI
    /// approves the gates.
    Stdio { servers: usize },
    /// One `stratum-mcp serve` process on a free port of 127.0.0.1, each agent its own
    /// Streamable HTTP client and access token; each agent approves its own gates over MCP.
    Http,
}

/// The shape of the load.
#[derive(Clone, Debug)]
pub struct Load {
    pub via: Via,
    pub agents: usize,
    /// Steps per flow, gates included.
    pub steps: usize,
    /// Every `gate_every`-th step is a gate.
    pub gate_every: usize,
    /// How long the approver sleeps when no gate waits (over stdio).
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
            via: Via::Stdio { servers: 4 },
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
    /// Issue 19's: one `serve` process, 50 agents over HTTP, 100-step flows, a gate at the
    /// 50th step.
    pub fn http() -> Load {
        Load {
            via: Via::Http,
            agents: 50,
            steps: 100,
            gate_every: 50,
            deadline: Duration::from_secs(1800),
            ..Load::default()
        }
    }

    /// The actor a gate's record names: the token of the agent that approved it over HTTP;
    /// none when the CLI did.
    pub fn actor(&self, agent: usize) -> Value {
        match self.via {
            // The operator CLI decides as the operating-system user running it.
            Via::Stdio { .. } => json!(stratum_mcp::identity::os_user()),
            Via::Http => json!(token_name(agent)),
        }
    }

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
    /// Gates approved: by the CLI over stdio, by the agents over HTTP.
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
        let (servers, approver) = match self.load.via {
            Via::Stdio { servers } => (format!("{servers} stdio servers"), "from the CLI"),
            Via::Http => ("1 HTTP server".to_owned(), "over MCP"),
        };
        let mut text = String::new();
        let _ = write!(
            text,
            "{}: {servers}, {} agents × {}-step flows ({} step_done, {} gates approved \
             {approver}, {} conflicts) in {:.2} s: {:.0} steps/s; step_done round trip p50 \
             {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.store,
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

/// The name of agent `agent`'s access token over HTTP.
pub fn token_name(agent: usize) -> String {
    format!("agent-{agent}")
}

/// `stratum-mcp [store options]` with `home` as its `STRATUM_HOME` and working directory, and
/// none of the caller's store or log settings.
fn command(binary: &Path, store: &StoreAt, home: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(binary);
    command
        .args(store.args())
        .env("STRATUM_HOME", home)
        .env_remove("STRATUM_DB")
        .env_remove("STRATUM_DATABASE_URL")
        .env_remove("STRATUM_LOG")
        .current_dir(home);
    command
}

/// An MCP client: of a stdio server process it started, or of `serve` over HTTP.
struct Client {
    client: RunningService<RoleClient, ()>,
}

impl Client {
    /// Starts a stdio server process and opens the conversation (`initialize`).
    async fn start(binary: &Path, store: &StoreAt, home: &Path) -> Client {
        let mut command = command(binary, store, home);
        command.stderr(Stdio::inherit());
        let transport = TokioChildProcess::new(command).expect("stratum-mcp starts");
        let client = ().serve(transport).await.unwrap_or_else(|error| {
            panic!(
                "stratum-mcp on {} did not initialize: {error}",
                store.name()
            )
        });
        Client { client }
    }

    /// Connects to `serve`'s `/mcp` at `url` with the bearer `token`, opening with
    /// `server/discover` (2026-07-28, stateless) or with `initialize` (2025-11-25).
    async fn connect(url: &str, token: &str, discover: bool) -> Client {
        let config =
            StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token);
        let transport = StreamableHttpClientTransport::from_config(config);
        let client = if discover {
            let lifecycle = ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            };
            ().serve_with_lifecycle(transport, lifecycle).await
        } else {
            ().serve(transport).await
        };
        let client = client.unwrap_or_else(|error| panic!("{url}: no MCP conversation: {error}"));
        Client { client }
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

/// A running `stratum-mcp serve` on a free port of 127.0.0.1, its standard error kept.
struct Serve {
    child: tokio::process::Child,
    url: String,
    stderr: Arc<Mutex<String>>,
}

impl Serve {
    /// Starts `serve` and waits until it listens (at most `timeout`).
    async fn start(binary: &Path, store: &StoreAt, home: &Path, timeout: Duration) -> Serve {
        let mut child = command(binary, store, home)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("stratum-mcp serve starts");
        let stderr = child
            .stderr
            .take()
            .expect("serve's standard error is piped");
        let mut lines = BufReader::new(stderr).lines();
        let mut seen = String::new();
        let listening = async {
            while let Ok(Some(line)) = lines.next_line().await {
                seen.push_str(&line);
                seen.push('\n');
                if let Some(rest) = line.split("listening on ").nth(1) {
                    return rest.split(' ').next().map(|url| format!("{url}/mcp"));
                }
            }
            None
        };
        let url = tokio::time::timeout(timeout, listening).await;
        let Ok(Some(url)) = url else {
            panic!("serve on {} is not listening: {seen}", store.name());
        };
        // The rest is kept for a failure's message, and read so that logging never blocks.
        let kept = Arc::new(Mutex::new(seen));
        let sink = kept.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
                sink.push_str(&line);
                sink.push('\n');
            }
        });
        Serve {
            child,
            url,
            stderr: kept,
        }
    }

    /// Stops it as an operator does (SIGTERM); it must exit 0 within `timeout`.
    async fn stop(mut self, timeout: Duration) {
        let pid = self.child.id().expect("serve still runs").to_string();
        let signalled = tokio::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .expect("kill runs");
        assert!(signalled.success(), "kill -TERM {pid}: {signalled}");
        let exited = tokio::time::timeout(timeout, self.child.wait()).await;
        let stderr = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        match exited {
            Ok(Ok(status)) => assert!(status.success(), "serve exited {status}: {stderr}"),
            Ok(Err(error)) => panic!("serve: {error}"),
            Err(_) => panic!("serve still runs {timeout:?} after SIGTERM: {stderr}"),
        }
    }
}

fn status(answer: &Value) -> &str {
    answer.get("status").and_then(Value::as_str).unwrap_or("")
}

/// Runs `stratum-mcp [store options] ARGS` as the operator does.
async fn cli(binary: &Path, store: &StoreAt, home: &Path, args: &[&str]) -> Output {
    command(binary, store, home)
        .args(args)
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
    /// Gates it approved itself (over HTTP).
    approved: usize,
}

/// Drives one flow on `server` to its end, checking each dispatch is the step expected.
async fn agent(
    number: usize,
    server: Arc<Client>,
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
        approved: 0,
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
                if load.via == Via::Http {
                    // The agent passes on its human's decision, as the token's holder.
                    let arguments = json!({"flow_id": flow, "step_id": expected,
                                           "outcome": "approve", "rationale": NOTE,
                                           "resolved_by": "human"});
                    answer = server.call("stratum_gate_resolve", arguments).await;
                    done.approved += 1;
                }
                // Else the operator decides; the agent looks again now and then.
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

/// How long starting or stopping `serve` may take on a busy machine.
const PATIENCE: Duration = Duration::from_secs(120);

/// The clients the agents use (agent `i` takes client `i % len`), after starting the servers:
/// the stdio processes, or `serve` (returned, to be stopped) with a token and client per agent.
async fn connect(
    binary: &Path,
    store: &StoreAt,
    home: &Path,
    load: &Load,
) -> (Option<Serve>, Vec<Arc<Client>>) {
    match load.via {
        Via::Stdio { servers } => {
            let mut clients = Vec::with_capacity(servers);
            for _ in 0..servers {
                clients.push(Arc::new(Client::start(binary, store, home).await));
            }
            (None, clients)
        }
        Via::Http => {
            let mut tokens = Vec::with_capacity(load.agents);
            for number in 0..load.agents {
                let name = token_name(number);
                let args = ["token", "create", "--name", &name, "--json"];
                let created = json_of(&args, &cli(binary, store, home, &args).await);
                let secret = created["secret"].as_str().expect("a token has a secret");
                tokens.push(secret.to_owned());
            }
            let serve = Serve::start(binary, store, home, PATIENCE).await;
            let mut clients = Vec::with_capacity(load.agents);
            for (number, token) in tokens.iter().enumerate() {
                let client = Client::connect(&serve.url, token, number % 2 == 1).await;
                clients.push(Arc::new(client));
            }
            (Some(serve), clients)
        }
    }
}

/// Runs the load with `binary` (`stratum-mcp`) on `store`, `home` as every process's
/// `STRATUM_HOME` and working directory; checks the store afterwards and panics on any
/// missing, repeated or unexpected step.
pub async fn run(binary: &Path, store: &StoreAt, home: &Path, load: &Load) -> Report {
    let spec = Arc::new(spec(load));
    let (serve, clients) = connect(binary, store, home, load).await;
    let began = Instant::now();
    let deadline = began + load.deadline;
    let finished = Arc::new(AtomicUsize::new(0));
    let approving = matches!(load.via, Via::Stdio { .. }).then(|| {
        tokio::spawn(approver(
            binary.to_owned(),
            store.clone(),
            home.to_owned(),
            load.clone(),
            finished.clone(),
            deadline,
        ))
    });
    let agents: Vec<_> = (0..load.agents)
        .map(|number| {
            let server = clients
                .get(number % clients.len())
                .cloned()
                .expect("a client for every agent");
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
    let (approved, conflicts) = match approving {
        Some(approving) => joined(approving).await,
        None => (done.iter().map(|agent| agent.approved).sum(), 0),
    };
    for client in clients {
        if let Ok(client) = Arc::try_unwrap(client) {
            client.stop().await;
        }
    }
    if let Some(serve) = serve {
        serve.stop(PATIENCE).await;
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
    assert_eq!(
        report.conflicts, 0,
        "one approver per gate meets no conflict"
    );

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
                        &record["rationale"],
                        &record["actor"]
                    ),
                    (
                        &json!("gate"),
                        &json!("approve"),
                        &json!("human"),
                        &json!(NOTE),
                        &load.actor(number)
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
