//! Drives the real `stratum-mcp` binary as a child process with rmcp's client, as an agent
//! does, over either protocol. Every answer is checked against the output schema its tool
//! declares (the compact one) and against the full one published in `runtime/cli/schemas/tools/`,
//! and its text copy against its structured content; a transcript of the calls
//! (ids replaced by `<flow-N>`) can be snapshotted.

#![allow(dead_code)]

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ProgressNotificationParam, ProtocolVersion, Tool,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// The client's handler: it keeps the progress notifications the server sends and, when made
/// with [`Recorder::asking`], answers elicitations as a person would, in turn.
#[derive(Clone, Default)]
pub struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    /// What the person answers to each form, in turn; `None`: the client declares no
    /// elicitation capability.
    answers: Option<Arc<Mutex<std::collections::VecDeque<Reply>>>>,
    /// The forms the server sent (their message and schema).
    asked: Arc<Mutex<Vec<Value>>>,
}

/// What the person does with a form.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Answers it: `accept` with the content, `decline` or `cancel`.
    Answer(Value),
    /// Leaves it open.
    Never,
}

impl Recorder {
    /// A client whose person answers the forms with `replies`, in turn.
    pub fn asking(replies: Vec<Reply>) -> Recorder {
        Recorder {
            answers: Some(Arc::new(Mutex::new(replies.into()))),
            ..Recorder::default()
        }
    }

    /// The progress notifications received so far, in order.
    pub fn progress(&self) -> Vec<ProgressNotificationParam> {
        self.progress.lock().unwrap().clone()
    }

    /// The forms the server sent so far.
    pub fn asked(&self) -> Vec<Value> {
        self.asked.lock().unwrap().clone()
    }
}

impl rmcp::ClientHandler for Recorder {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.client_info = rmcp::model::Implementation::new("stratum-test-client", "1.2.3");
        if self.answers.is_some() {
            info.capabilities.elicitation = Some(rmcp::model::ElicitationCapability::default());
        }
        info
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.asked
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request).unwrap());
        let reply = self
            .answers
            .as_ref()
            .and_then(|answers| answers.lock().unwrap().pop_front());
        match reply {
            Some(Reply::Answer(result)) => Ok(serde_json::from_value(result).unwrap()),
            Some(Reply::Never) => std::future::pending().await,
            None => Err(rmcp::ErrorData::internal_error("no answer scripted", None)),
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

/// How a client opens the conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `initialize` then `notifications/initialized` (2025-11-25).
    Handshake,
    /// No handshake: `server/discover`, then every request carries its version (2026-07-28).
    Stateless,
}

pub const BOTH: [Protocol; 2] = [Protocol::Handshake, Protocol::Stateless];

pub struct McpServer {
    client: RunningService<RoleClient, Recorder>,
    /// What the client received besides answers.
    pub received: Recorder,
    pub tools: Vec<Tool>,
    validators: HashMap<String, jsonschema::Validator>,
    full_validators: HashMap<String, jsonschema::Validator>,
    transcript: String,
    flows: Vec<String>,
    pub home: PathBuf,
}

/// The full output schemas of the tools, as published.
pub fn tool_schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/tools")
}

/// A validator of the published full output schema of `tool`.
fn full_validator(tool: &str) -> jsonschema::Validator {
    let path = tool_schemas_dir().join(format!("{tool}.output.schema.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let schema: Value = serde_json::from_str(&text).expect("a published schema is JSON");
    jsonschema::validator_for(&schema)
        .unwrap_or_else(|error| panic!("{}: invalid schema: {error}", path.display()))
}

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_stratum-mcp")
}

/// The identity the binary gives the user running the tests (`os:<user>`), found as `id`
/// finds it: the name of the effective uid, not `$USER`.
pub fn os_user() -> String {
    let output = std::process::Command::new("id")
        .arg("-un")
        .output()
        .expect("id runs");
    assert!(output.status.success(), "this user has no name: {output:?}");
    format!("os:{}", String::from_utf8_lossy(&output.stdout).trim())
}

impl McpServer {
    /// Starts `stratum-mcp` with its state in `home` and its working directory `cwd`.
    pub async fn start(home: &Path, cwd: &Path, protocol: Protocol) -> McpServer {
        McpServer::start_with_path(home, cwd, protocol, None).await
    }

    /// [`McpServer::start`], with `PATH` set to `path` when given (to find fake agent CLIs).
    pub async fn start_with_path(
        home: &Path,
        cwd: &Path,
        protocol: Protocol,
        path: Option<&std::ffi::OsStr>,
    ) -> McpServer {
        let mut command = tokio::process::Command::new(binary());
        command
            .env("STRATUM_HOME", home)
            .env_remove("STRATUM_DB")
            .current_dir(cwd)
            .stderr(Stdio::inherit());
        if let Some(path) = path {
            command.env("PATH", path);
        }
        let transport = TokioChildProcess::new(command).expect("stratum-mcp starts");
        McpServer::connect(transport, protocol, home).await
    }

    /// Connects to `stratum-mcp serve` at `url` (its `/mcp`), sending `token` as the bearer.
    pub async fn start_http(url: &str, token: &str, protocol: Protocol, home: &Path) -> McpServer {
        let config =
            StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token);
        let transport = StreamableHttpClientTransport::from_config(config);
        McpServer::connect(transport, protocol, home).await
    }

    /// [`McpServer::start_http`] with the client `received` (say, one that answers forms).
    pub async fn start_http_with_client(
        url: &str,
        token: &str,
        protocol: Protocol,
        home: &Path,
        received: Recorder,
    ) -> McpServer {
        let config =
            StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token);
        let transport = StreamableHttpClientTransport::from_config(config);
        McpServer::connect_with(transport, protocol, home, received).await
    }

    /// The binary on stdio with `env` set, its client `received` (say, one that answers forms).
    pub async fn start_with_client(
        home: &Path,
        cwd: &Path,
        protocol: Protocol,
        env: &[(&str, &str)],
        received: Recorder,
    ) -> McpServer {
        let mut command = tokio::process::Command::new(binary());
        command
            .env("STRATUM_HOME", home)
            .env_remove("STRATUM_DB")
            .envs(env.iter().copied())
            .current_dir(cwd)
            .stderr(Stdio::inherit());
        let transport = TokioChildProcess::new(command).expect("stratum-mcp starts");
        McpServer::connect_with(transport, protocol, home, received).await
    }

    async fn connect<T, E, A>(transport: T, protocol: Protocol, home: &Path) -> McpServer
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        McpServer::connect_with(transport, protocol, home, Recorder::default()).await
    }

    async fn connect_with<T, E, A>(
        transport: T,
        protocol: Protocol,
        home: &Path,
        received: Recorder,
    ) -> McpServer
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let client = match protocol {
            Protocol::Handshake => received.clone().serve(transport).await.expect("initialize"),
            Protocol::Stateless => received
                .clone()
                .serve_with_lifecycle(
                    transport,
                    ClientLifecycleMode::Discover {
                        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                    },
                )
                .await
                .expect("server/discover"),
        };
        let tools = client.list_all_tools().await.expect("tools/list");
        let validators = tools
            .iter()
            .map(|tool| {
                let schema = Value::Object(
                    tool.output_schema
                        .as_ref()
                        .map(|schema| (**schema).clone())
                        .expect("every tool declares an output schema"),
                );
                let validator = jsonschema::validator_for(&schema).unwrap_or_else(|error| {
                    panic!("{}: invalid output schema: {error}", tool.name)
                });
                (tool.name.to_string(), validator)
            })
            .collect();
        let full_validators = tools
            .iter()
            .map(|tool| (tool.name.to_string(), full_validator(&tool.name)))
            .collect();
        McpServer {
            client,
            received,
            tools,
            validators,
            full_validators,
            transcript: String::new(),
            flows: Vec::new(),
            home: home.to_owned(),
        }
    }

    /// The protocol version the client and server agreed on.
    pub fn protocol_version(&self) -> Option<String> {
        self.client
            .peer_info()
            .map(|info| info.protocol_version.to_string())
    }

    pub async fn raw(&self, tool: &str, arguments: Value) -> CallToolResult {
        let Value::Object(arguments) = arguments else {
            panic!("arguments are an object");
        };
        self.client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
            .await
            .unwrap_or_else(|error| panic!("{tool}: {error}"))
    }

    /// One `tools/call` as sent, with a multi-round-trip `requestState` and `inputResponses`
    /// when given: the client does not answer an `input_required` itself.
    pub async fn call_once(
        &self,
        tool: &str,
        arguments: Value,
        request_state: Option<&str>,
        responses: Option<Value>,
    ) -> rmcp::model::CallToolResponse {
        let Value::Object(arguments) = arguments else {
            panic!("arguments are an object");
        };
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        if let Some(state) = request_state {
            params = params.with_request_state(state);
        }
        if let Some(responses) = responses {
            params = params.with_input_responses(serde_json::from_value(responses).unwrap());
        }
        self.client
            .call_tool_once(params)
            .await
            .unwrap_or_else(|error| panic!("{tool}: {error}"))
    }

    /// Calls a tool expecting a JSON-RPC error (not a tool result), and returns its text.
    pub async fn raw_error(&self, tool: &str, arguments: serde_json::Map<String, Value>) -> String {
        match self
            .client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
            .await
        {
            Ok(result) => panic!("{tool} answered: {result:?}"),
            Err(error) => error.to_string(),
        }
    }

    /// Calls a tool that must answer (not refuse): the answer is checked against the tool's
    /// output schema and returned.
    pub async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let result = self.raw(tool, arguments.clone()).await;
        assert_ne!(result.is_error, Some(true), "{tool} refused: {result:?}");
        let answer = self.checked(tool, &result);
        self.record(tool, &arguments, &answer);
        answer
    }

    /// Calls a tool that must refuse the call (`isError`), and returns its structured error.
    pub async fn refused(&mut self, tool: &str, arguments: Value) -> Value {
        let result = self.raw(tool, arguments.clone()).await;
        assert_eq!(
            result.is_error,
            Some(true),
            "{tool} did not refuse: {result:?}"
        );
        let answer = self.checked(tool, &result);
        self.record(tool, &arguments, &answer);
        answer
    }

    fn checked(&self, tool: &str, result: &CallToolResult) -> Value {
        let answer = result
            .structured_content
            .clone()
            .unwrap_or_else(|| panic!("{tool}: no structuredContent in {result:?}"));
        let text = result
            .content
            .first()
            .and_then(|content| content.as_text())
            .map(|text| text.text.clone())
            .unwrap_or_else(|| panic!("{tool}: no text content"));
        let from_text: Value = serde_json::from_str(&text).expect("the text is JSON");
        assert_eq!(
            from_text, answer,
            "{tool}: text and structuredContent differ"
        );
        let validator = self
            .validators
            .get(tool)
            .unwrap_or_else(|| panic!("no tool {tool} listed"));
        let errors: Vec<String> = validator
            .iter_errors(&answer)
            .map(|error| format!("{error} at {}", error.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{tool}: the answer does not fit its output schema: {errors:?}\n{answer:#}"
        );
        let full = self
            .full_validators
            .get(tool)
            .unwrap_or_else(|| panic!("no full schema for {tool}"));
        let errors: Vec<String> = full
            .iter_errors(&answer)
            .map(|error| format!("{error} at {}", error.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{tool}: the answer does not fit its published schema: {errors:?}\n{answer:#}"
        );
        answer
    }

    fn record(&mut self, tool: &str, arguments: &Value, answer: &Value) {
        learn_ids(answer, &mut self.flows);
        let mut arguments = self.normalize(arguments);
        if let Some(spec) = arguments.get_mut("spec")
            && let Some(text) = spec.as_str()
        {
            *spec = Value::String(format!("<{} bytes of YAML>", text.len()));
        }
        let answer = self.normalize(answer);
        self.transcript.push_str(&format!(
            "→ {tool} {}\n← {}\n\n",
            serde_json::to_string(&arguments).unwrap_or_default(),
            serde_json::to_string_pretty(&answer).unwrap_or_default()
        ));
    }

    /// The n-th flow id seen (1-based).
    pub fn flow(&self, n: usize) -> String {
        self.flows
            .get(n - 1)
            .cloned()
            .unwrap_or_else(|| panic!("no flow {n} seen yet"))
    }

    pub fn transcript(&self) -> &str {
        &self.transcript
    }

    fn normalize(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.normalize_text(text)),
            Value::Array(items) => items.iter().map(|item| self.normalize(item)).collect(),
            Value::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(key, value)| {
                        let value = match key.as_str() {
                            "duration_ms" | "total_duration_ms" | "at_ms" | "wall_s" => json!(0),
                            "remaining_seconds" => json!("<seconds>"),
                            // Whoever runs the tests: the transcript reads the same for all.
                            "started_by" | "actor" | "identity"
                                if value.as_str().is_some_and(|who| who.starts_with("os:")) =>
                            {
                                json!("os:<user>")
                            }
                            "path" if value.as_str().is_some_and(|p| p.starts_with('/')) => {
                                json!("<path>")
                            }
                            _ => self.normalize(value),
                        };
                        (key.clone(), value)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn normalize_text(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (n, id) in self.flows.iter().enumerate() {
            text = text.replace(id, &format!("<flow-{}>", n + 1));
        }
        text
    }

    /// Closes the connection; the server exits when its input ends.
    pub async fn stop(self) {
        let _ = self.client.cancel().await;
    }
}

fn learn_ids(value: &Value, flows: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            for (key, value) in fields {
                if key.ends_with("flow_id")
                    && let Some(id) = value.as_str()
                    && !flows.iter().any(|known| known == id)
                {
                    flows.push(id.to_owned());
                }
                learn_ids(value, flows);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| learn_ids(item, flows)),
        _ => {}
    }
}

pub fn status(answer: &Value) -> &str {
    answer.get("status").and_then(Value::as_str).unwrap_or("")
}

pub fn error_type(answer: &Value) -> &str {
    answer
        .get("error_type")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Validates, starts and drives every example to completion on `server`, as an agent would,
/// and checks that each flow's audit says so.
pub async fn run_every_example(server: &mut McpServer) {
    for (file, flow, inputs, script) in examples() {
        let spec = example(file);
        let validation = server.call("stratum_validate", json!({"spec": spec})).await;
        assert_eq!(validation["valid"], json!(true), "{file}: {validation:#}");
        let first = server
            .call(
                "stratum_plan",
                json!({"spec": spec, "flow": flow, "inputs": inputs}),
            )
            .await;
        let last = drive(server, first, &script).await;
        assert_eq!(status(&last), "complete", "{file}: {last:#}");
        let audit = server
            .call("stratum_audit", json!({"flow_id": last["flow_id"]}))
            .await;
        assert_eq!(status(&audit), "complete", "{file}: {audit:#}");
    }
}

/// A `reviewed_work` flow (`examples/reviewed-work.stratum.yaml`) just started; its id.
pub async fn start_reviewed_work(server: &mut McpServer) -> String {
    let planned = server
        .call(
            "stratum_plan",
            json!({"spec": example("reviewed-work.stratum.yaml"), "flow": "reviewed_work",
                   "inputs": {"text": "t"}}),
        )
        .await;
    planned["flow_id"].as_str().unwrap().to_owned()
}

/// A `reviewed_work` flow at its `review` gate (its `work` step done); its id.
pub async fn flow_at_gate(server: &mut McpServer) -> String {
    let flow = start_reviewed_work(server).await;
    let gate = server
        .call(
            "stratum_step_done",
            json!({"flow_id": flow, "step_id": "work",
                   "result": {"result": "r1", "quality_score": 0.9}}),
        )
        .await;
    assert_eq!(status(&gate), "await_gate");
    flow
}

pub fn example(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Results an agent gives, by step id; a step whose entry is an array gets them in turn.
pub type Script = Value;

/// Plays an agent that answers every dispatch from `script` (approving every gate) until the
/// flow finishes, and returns the final answer.
pub fn drive<'a>(
    server: &'a mut McpServer,
    first: Value,
    script: &'a Script,
) -> Pin<Box<dyn Future<Output = Value> + 'a>> {
    play(server, first, script, Gates::Approve)
}

/// Plays an agent as [`drive`] does until the flow waits at a gate, and returns that
/// `await_gate` dispatch (or the final answer of a flow that finishes without one).
pub fn drive_to_gate<'a>(
    server: &'a mut McpServer,
    first: Value,
    script: &'a Script,
) -> Pin<Box<dyn Future<Output = Value> + 'a>> {
    play(server, first, script, Gates::Stop)
}

/// What the played agent does at a gate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Gates {
    Approve,
    Stop,
}

fn play<'a>(
    server: &'a mut McpServer,
    first: Value,
    script: &'a Script,
    gates: Gates,
) -> Pin<Box<dyn Future<Output = Value> + 'a>> {
    Box::pin(async move {
        let mut answer = first;
        let mut turns = 0;
        loop {
            turns += 1;
            assert!(turns < 100, "the flow does not finish: {answer:#}");
            match status(&answer) {
                "execute_step" => {
                    let flow = answer["flow_id"].as_str().unwrap_or_default().to_owned();
                    let step = answer["step_id"].as_str().unwrap_or_default().to_owned();
                    let result = script
                        .get(&step)
                        .unwrap_or_else(|| panic!("no result scripted for {step}"))
                        .clone();
                    let result = if answer.get("max_iterations").is_some() {
                        iterate(server, &flow, &step, result).await
                    } else {
                        result
                    };
                    answer = server
                        .call(
                            "stratum_step_done",
                            json!({"flow_id": flow, "step_id": step, "result": result}),
                        )
                        .await;
                }
                "execute_flow" => {
                    let child = play(server, answer["child_step"].clone(), script, gates).await;
                    assert_eq!(status(&child), "complete", "{child:#}");
                    answer = server
                        .call(
                            "stratum_step_done",
                            json!({
                                "flow_id": answer["parent_flow_id"],
                                "step_id": answer["parent_step_id"],
                                "result": child,
                            }),
                        )
                        .await;
                }
                "await_gate" if gates == Gates::Approve => {
                    answer = server
                        .call(
                            "stratum_gate_resolve",
                            json!({
                                "flow_id": answer["flow_id"],
                                "step_id": answer["step_id"],
                                "outcome": "approve",
                                "rationale": "looks right",
                                "resolved_by": "human",
                            }),
                        )
                        .await;
                }
                _ => return answer,
            }
        }
    })
}

/// Runs an iteration loop that reports `result` once, and returns the loop's final result.
pub async fn iterate(server: &mut McpServer, flow: &str, step: &str, result: Value) -> Value {
    let started = server
        .call(
            "stratum_iteration_start",
            json!({"flow_id": flow, "step_id": step}),
        )
        .await;
    assert_eq!(status(&started), "iteration_started", "{started:#}");
    let report = server
        .call(
            "stratum_iteration_report",
            json!({"flow_id": flow, "step_id": step, "result": result}),
        )
        .await;
    assert_eq!(status(&report), "iteration_exit", "{report:#}");
    report["final_result"].clone()
}

pub fn examples() -> Vec<(&'static str, &'static str, Value, Script)> {
    let sha = "a".repeat(64);
    vec![
        (
            "sentiment.stratum.yaml",
            "run",
            json!({"text": "I love it"}),
            json!({"s1": {"label": "positive", "confidence": 0.95}}),
        ),
        (
            "reviewed-work.stratum.yaml",
            "reviewed_work",
            json!({"text": "t"}),
            json!({"work": {"result": "r", "quality_score": 0.9}}),
        ),
        (
            "code-review.stratum.yaml",
            "review",
            json!({"files": ["src/a.rs"]}),
            json!({
                "summarize": {"summary": "adds a", "files_changed": ["src/a.rs"], "risk": "low"},
                "security": {"findings": [], "files_reviewed": 1},
                "logic": {"findings": [], "files_reviewed": 1},
                "performance": {"findings": [], "files_reviewed": 1},
                "report": {"verdict": "approve", "summary": "fine", "findings": [], "blocking_count": 0},
            }),
        ),
        (
            "deploy.stratum.yaml",
            "deploy",
            json!({"project": "shop", "git_sha": "abc123"}),
            json!({
                "current": {"version": "1.0"},
                "build": {"artifact": "shop.tar.gz", "version": "1.1", "sha256": sha},
                "provision": {"url": "https://ephemeral.test"},
                "run": {"all_passed": true, "passed": 12, "failed": 0},
                "release": {"status": "deployed", "version": "1.1", "url": "https://shop.test", "healthy": true},
            }),
        ),
        (
            "test-fix-loop.stratum.yaml",
            "test_fix_loop",
            json!({"repo": ".", "command": "make test"}),
            json!({
                "baseline": {"passing": 5, "failing": 1, "findings": [{"id": "t1"}]},
                "fix": {"failing": 0, "findings": [], "files_changed": []},
                "add_regression_tests": {"tests_added": ["t1_regression"], "files_changed": []},
                "review_tests": {"approved": true, "comments": []},
                "verify": {"passing": 6, "failing": 0, "findings": []},
            }),
        ),
    ]
}
