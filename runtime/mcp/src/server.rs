//! The MCP server: rmcp's [`ServerHandler`] over the runtime. Every call runs on tokio's
//! blocking pool, so a slow call never holds up the others, and is one store transaction, so
//! another server process or the operator CLI on the same store sees it at once.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CustomRequest, CustomResult,
    ErrorData, Implementation, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde::Serialize;
use serde_json::Value;
use stratum_compiler::diagnostic::Severity;
use stratum_compiler::plan::Plan;
use stratum_compiler::source::SourceMap;
use tracing::Instrument;

use super::args::{self, ArgumentError};
use super::background::Background;
use super::diagnostics;
use super::gate_wait;
use super::outputs::{SpecRejected, ToolError, Validation};
use super::paths::{self, PathScope};
use super::progress::Progress;
use super::request_state::{self as states, GateForm, Sealer};
use super::tools::{self, ToolName, ToolSpec};
use crate::command::Command;
use crate::compile::{self, CompileError};
use crate::plan_cache::{PlanCache, plan_size};
use crate::store::{PostgresStore, SqliteOptions, SqliteStore, Store, StoreError};
use crate::{Config, Runtime};

/// The name every diagnostic of a spec sent as text carries.
const SPEC_NAME: &str = "spec.stratum.yaml";

/// What the server runs on.
pub enum StoreChoice {
    /// `$STRATUM_HOME/stratum.db` (default `~/.stratum`), opened on first use.
    Default(SqliteOptions),
    /// A database file, opened on first use.
    Sqlite(PathBuf, SqliteOptions),
    /// A PostgreSQL database (a `postgres://` URL), connected on first use.
    Postgres(String),
    /// A store already open (tests, embedding).
    Open(Arc<dyn Store>),
}

/// The `stratum-mcp` tools, over one store.
#[derive(Clone)]
pub struct StratumServer {
    shared: Arc<Shared>,
}

struct Shared {
    choice: StoreChoice,
    config: Config,
    runtime: Mutex<Option<Runtime>>,
    /// Compiled plans by the SHA-256 of their spec text, bounded by size.
    plans: Mutex<PlanCache>,
    compilations: AtomicU64,
    /// Agent runs and flows this server runs in the background.
    background: Arc<Background>,
    driver: Mutex<Option<stratum_driver::Driver>>,
    /// Seals the `requestState` of gate forms on 2026-07-28, with the store's secret.
    sealer: Mutex<Option<Sealer>>,
    /// This process, as the one connection a stdio server has: a gate form's state issued
    /// here is answered here.
    instance: String,
}

/// Who sends a call, as its transport knows: on stdio, whoever started the process (all tools,
/// no actor, paths anywhere); over HTTP, an access token (its name is the actor a gate's audit
/// records, a read-only token may call only the tools annotated read-only, and path arguments
/// stay under the server's root).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub actor: Option<String>,
    /// On stdio, the operating-system user running the server (`os:alice`), who started its
    /// client: the identity of the flows it starts and of a person's answer to a form in that
    /// client, never of an agent's own `stratum_gate_resolve`, which carries only `actor`.
    pub os_user: Option<String>,
    pub read_only: bool,
    pub paths: PathScope,
}

impl Caller {
    /// The caller of a stdio server.
    pub fn stdio() -> Caller {
        Caller {
            os_user: Some(crate::identity::os_user()),
            ..Caller::default()
        }
    }

    /// Who the server vouches for behind the call: the token's name over HTTP, else the
    /// operating-system user of a stdio server.
    pub fn person(&self) -> Option<&str> {
        self.actor.as_deref().or(self.os_user.as_deref())
    }
}

/// What one call answers: a value of the tool's output schema, or a refusal of the call as
/// sent (`isError`).
enum Outcome {
    Answer(Value),
    Refused(ToolError),
}

impl StratumServer {
    pub fn new(choice: StoreChoice, config: Config) -> StratumServer {
        StratumServer::with_plan_budget(choice, config, crate::plan_cache::configured_budget())
    }

    /// A server that keeps at most `bytes` of compiled plans (their JSON size) in memory.
    pub fn with_plan_budget(choice: StoreChoice, config: Config, bytes: usize) -> StratumServer {
        StratumServer {
            shared: Arc::new(Shared {
                choice,
                config,
                runtime: Mutex::new(None),
                plans: Mutex::new(PlanCache::with_budget(bytes)),
                compilations: AtomicU64::new(0),
                background: Arc::default(),
                driver: Mutex::new(None),
                sealer: Mutex::new(None),
                instance: instance_id(),
            }),
        }
    }

    /// Ends every agent run and flow driver this server runs in the background (it is
    /// stopping): their runs are recorded `interrupted`, their flows handed back.
    pub fn stop_background(&self) {
        self.shared.background.stop_all();
    }

    /// How many specs this server compiled (a spec sent again is taken from the cache).
    pub fn compilations(&self) -> u64 {
        self.shared.compilations.load(Ordering::Relaxed)
    }

    /// The total size of the compiled plans the server keeps, in bytes (see
    /// [`crate::plan_cache`]).
    pub fn cached_plan_bytes(&self) -> usize {
        self.shared
            .plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .held_bytes()
    }

    /// Runs one tool call to its answer, on the calling thread: `Err` is a refusal of the
    /// call as sent.
    pub fn call_blocking(&self, name: &str, arguments: JsonObject) -> Result<Value, Value> {
        let Some(spec) = tools::find(name) else {
            return Err(to_value(&ToolError::new(
                "unknown_tool",
                unknown_tool_message(name),
            )));
        };
        match self
            .shared
            .call(spec, arguments, &Caller::default(), &Progress::none())
        {
            Outcome::Answer(value) => Ok(value),
            Outcome::Refused(error) => Err(to_value(&error)),
        }
    }

    /// Runs one `tools/call` for `caller` on tokio's blocking pool, reporting to `progress`
    /// when it waits. A tool that is not read-only is refused to a read-only caller
    /// (`isError`, `error_type: forbidden`) before its arguments are read.
    pub async fn call_tool_as(
        &self,
        request: CallToolRequestParams,
        caller: Caller,
        progress: Progress,
    ) -> Result<CallToolResponse, ErrorData> {
        let argument = |key: &str| {
            request
                .arguments
                .as_ref()
                .and_then(|arguments| arguments.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        // Named and attributed as the MCP semantic conventions name a call, so that a log
        // shipper (and a trace exporter) finds the same fields everywhere.
        let span = tracing::info_span!(
            "tools/call",
            "mcp.method.name" = "tools/call",
            "gen_ai.tool.name" = %request.name,
            flow_id = argument("flow_id").as_deref(),
            step_id = argument("step_id").as_deref(),
            actor = caller.actor.as_deref(),
        );
        let started = std::time::Instant::now();
        // A name the client made up is not a label: every unknown tool counts as one, so a
        // client cannot grow the metrics without bound.
        let tool = tools::find(&request.name).map_or("unknown", |spec| spec.name);
        let answer = self
            .run_call(request, caller, progress)
            .instrument(span.clone())
            .await;
        span.in_scope(|| log_answer(tool, &answer, started.elapsed()));
        answer
    }

    async fn run_call(
        &self,
        request: CallToolRequestParams,
        caller: Caller,
        progress: Progress,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(spec) = tools::find(&request.name) else {
            return Err(ErrorData::invalid_params(
                unknown_tool_message(&request.name),
                None,
            ));
        };
        if caller.read_only && !spec.read_only {
            let error = ToolError::new(
                "forbidden",
                format!(
                    "the access token `{}` is read-only, and {} changes state; call it with a \
                     token made without --read-only",
                    caller.actor.as_deref().unwrap_or_default(),
                    spec.name
                ),
            );
            return Ok(CallToolResponse::Complete(
                CallToolResult::structured_error(to_value(&error)),
            ));
        }
        let shared = self.shared.clone();
        let arguments = request.arguments.unwrap_or_default();
        let echoed = Echoed {
            request_state: request.request_state,
            input_responses: request.input_responses.unwrap_or_default(),
        };
        if spec.tool == ToolName::GateWait {
            let waited = self.gate_wait(arguments, echoed, caller, &progress).await;
            progress.finish().await;
            return Ok(waited.into_response());
        }
        // The call that reached a gate and asked the person on 2026-07-28 comes back with
        // their answer: it decides the gate; the call itself is not made again.
        if echoed.request_state.is_some() {
            let waited = self
                .answer_of_reached_gate(&arguments, echoed, caller, &progress)
                .await;
            progress.finish().await;
            return Ok(waited.into_response());
        }
        let asking_caller = caller.clone();
        // Only a call naming the flow whose gate it reached can be answered by its retry
        // (2026-07-28): the retry finds the form's state by that flow.
        let named_flow = arguments
            .get("flow_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let outcome = tokio::task::spawn_blocking(move || {
            let outcome = shared.call(spec, arguments, &caller, &progress);
            (outcome, progress)
        })
        .await;
        let outcome = match outcome {
            Ok((outcome, progress)) => {
                let reached =
                    self.asks_at_reached_gate(spec, &outcome, named_flow.as_deref(), &progress);
                let asked = match reached {
                    Some((flow_id, step_id)) => {
                        self.ask_at_reached_gate(flow_id, step_id, asking_caller, &progress)
                            .await
                    }
                    None => None,
                };
                // Every notification of the call goes out before its answer.
                progress.finish().await;
                match asked {
                    Some(Waited::Ask(form)) => return Ok(CallToolResponse::InputRequired(form)),
                    Some(Waited::Done(decided)) => decided,
                    None => outcome,
                }
            }
            Err(panic) => Outcome::Refused(ToolError::new(
                "internal_error",
                format!("the server failed while running {}: {panic}", spec.name),
            )),
        };
        Ok(CallToolResponse::Complete(match outcome {
            Outcome::Answer(value) => CallToolResult::structured(value),
            Outcome::Refused(error) => CallToolResult::structured_error(to_value(&error)),
        }))
    }
}

/// One line for a call's answer (at `info`; a refusal of the call as sent at `warn`), in the
/// call's span: its status, the error type of a refusal, the flow it started, how long it took.
fn log_answer(tool: &str, answer: &Result<CallToolResponse, ErrorData>, took: Duration) {
    let outcome = match answer {
        Ok(CallToolResponse::Complete(result)) if result.is_error != Some(true) => "ok",
        Ok(CallToolResponse::InputRequired(_)) => "input_required",
        Ok(CallToolResponse::Complete(_)) => "refused",
        Ok(_) => "ok",
        Err(_) => "refused",
    };
    super::metrics::global().call(tool, outcome, took);
    let duration_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    match answer {
        Ok(CallToolResponse::Complete(result)) => {
            let content = result.structured_content.as_ref();
            let field = |key: &str| {
                content
                    .and_then(|content| content.get(key))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let (status, error_type) = (field("status"), field("error_type"));
            if result.is_error == Some(true) {
                tracing::warn!(%error_type, duration_ms, "the call was refused");
            } else {
                tracing::info!(
                    %status,
                    %error_type,
                    answered_flow_id = %field("flow_id"),
                    duration_ms,
                    "the call answered"
                );
            }
        }
        Ok(CallToolResponse::InputRequired(_)) => {
            tracing::info!(duration_ms, "the call asks the person (input_required)");
        }
        Ok(_) => tracing::info!(duration_ms, "the call answered"),
        Err(error) => tracing::warn!(error = %error.message, duration_ms, "the call was refused"),
    }
}

/// What a client sent back with a call that a gate form's `input_required` answered
/// (2026-07-28): the sealed state, and the person's answer under [`gate_wait::INPUT_KEY`].
#[derive(Default)]
struct Echoed {
    request_state: Option<String>,
    input_responses: rmcp::model::InputResponses,
}

/// How `stratum_gate_wait` ends: an answer, or the form for the client to show and call again
/// with (2026-07-28).
enum Waited {
    Done(Outcome),
    Ask(rmcp::model::InputRequiredResult),
}

impl Waited {
    fn into_response(self) -> CallToolResponse {
        match self {
            Waited::Ask(form) => CallToolResponse::InputRequired(form),
            Waited::Done(Outcome::Answer(value)) => {
                CallToolResponse::Complete(CallToolResult::structured(value))
            }
            Waited::Done(Outcome::Refused(error)) => {
                CallToolResponse::Complete(CallToolResult::structured_error(to_value(&error)))
            }
        }
    }
}

/// Whether `outcome` says the person was not asked or did not decide (or could not be asked):
/// the gate still waits.
fn still_waiting(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Answer(answer) => at(answer, "status") == "gate_pending",
        Outcome::Refused(_) => true,
    }
}

impl StratumServer {
    /// The gate (flow, step) that `outcome` of a call of `spec` brought its flow to, when the
    /// person is to be asked about it now: the answer is `await_gate`, the server asks when a
    /// gate is reached (`gates.ask_when_reached`), the tool moves flows (or is
    /// `stratum_resume`), and the client can show a form (on 2026-07-28, by an `input_required`
    /// answer whose retry names the flow at the gate: `named_flow`, the call's `flow_id`).
    fn asks_at_reached_gate(
        &self,
        spec: &ToolSpec,
        outcome: &Outcome,
        named_flow: Option<&str>,
        progress: &Progress,
    ) -> Option<(String, String)> {
        let Outcome::Answer(answer) = outcome else {
            return None;
        };
        // A child's last step can bring its parent to a gate: that retry would name the child.
        let names_flow = named_flow.is_some_and(|flow| at(answer, "flow_id") == flow);
        let moves_flows = !spec.read_only || spec.tool == ToolName::Resume;
        let can_ask = (progress.asks_by_round_trip() && names_flow)
            || progress
                .peer()
                .is_some_and(|peer| gate_wait::can_ask(Some(peer)));
        if at(answer, "status") != "await_gate"
            || !self.shared.config.ask_when_reached
            || !moves_flows
            || !can_ask
        {
            return None;
        }
        Some((
            at(answer, "flow_id").as_str()?.to_owned(),
            at(answer, "step_id").as_str()?.to_owned(),
        ))
    }

    /// Asks the person about the gate a call just reached, as `stratum_gate_wait` would:
    /// `None` when they did not decide (the call's own answer stands, the gate waits).
    async fn ask_at_reached_gate(
        &self,
        flow_id: String,
        step_id: String,
        caller: Caller,
        progress: &Progress,
    ) -> Option<Waited> {
        let mut arguments = JsonObject::new();
        arguments.insert("flow_id".to_owned(), Value::String(flow_id));
        arguments.insert("step_id".to_owned(), Value::String(step_id));
        match self
            .gate_wait(arguments, Echoed::default(), caller, progress)
            .await
        {
            Waited::Done(outcome) if still_waiting(&outcome) => None,
            waited => Some(waited),
        }
    }

    /// The retry of a call that reached a gate and answered its form as `input_required`
    /// (2026-07-28): the person's answer decides the gate the sealed state names. When they
    /// did not decide, the answer is the flow's current dispatch (`await_gate`), as the call
    /// first answered.
    async fn answer_of_reached_gate(
        &self,
        arguments: &JsonObject,
        echoed: Echoed,
        caller: Caller,
        progress: &Progress,
    ) -> Waited {
        let invalid = |message: &str| {
            Waited::Done(Outcome::Refused(ToolError::new(
                "invalid_request_state",
                format!("{message}; nothing changed: call again without a requestState"),
            )))
        };
        let Some(flow_id) = arguments.get("flow_id").and_then(Value::as_str) else {
            return invalid("this call names no flow_id, so it asked no form");
        };
        let Some(state) = echoed.request_state.clone() else {
            return invalid("the call carries no requestState");
        };
        let shared = self.shared.clone();
        let (flow, who) = (flow_id.to_owned(), self.shared.caller_identity(&caller));
        let opened = tokio::task::spawn_blocking(move || {
            let sealer = shared.sealer().ok()?;
            sealer.open(&state, &who, &flow, None).ok()
        })
        .await
        .ok()
        .flatten();
        let Some(form) = opened else {
            return invalid(&format!(
                "the requestState is not one this server issued to you for flow '{flow_id}' (it \
                 was altered, made up, issued to another caller, or it expired)"
            ));
        };
        let mut gate = JsonObject::new();
        gate.insert("flow_id".to_owned(), Value::String(form.flow_id.clone()));
        gate.insert("step_id".to_owned(), Value::String(form.step_id));
        match self.gate_wait(gate, echoed, caller, progress).await {
            Waited::Done(Outcome::Answer(answer)) if at(&answer, "status") == "gate_pending" => {
                let shared = self.shared.clone();
                let flow_id = form.flow_id;
                let current = tokio::task::spawn_blocking(move || {
                    shared
                        .runtime()
                        .and_then(|runtime| runtime.call(&Command::Resume { flow_id }))
                })
                .await;
                match current {
                    Ok(Ok(response)) => Waited::Done(Outcome::Answer(response.to_json())),
                    Ok(Err(error)) => Waited::Done(Outcome::Refused(ToolError::new(
                        "store_unavailable",
                        error.to_string(),
                    ))),
                    Err(panic) => Waited::Done(Outcome::Refused(ToolError::new(
                        "internal_error",
                        format!("the server failed while reading the flow: {panic}"),
                    ))),
                }
            }
            waited => waited,
        }
    }

    /// `stratum_gate_wait`: the gate read on the blocking pool, the person asked on the
    /// async side (the form may stay open for an hour without holding a thread), the decision
    /// applied on the blocking pool. On 2026-07-28 the person is asked by an `input_required`
    /// answer, and the call that brings the answer back decides.
    async fn gate_wait(
        &self,
        arguments: JsonObject,
        echoed: Echoed,
        caller: Caller,
        progress: &Progress,
    ) -> Waited {
        let args: args::GateWaitArgs = match args::gate_wait("stratum_gate_wait", arguments) {
            Ok(args) => args,
            Err(error) => {
                return Waited::Done(Outcome::Refused(ToolError {
                    argument: error.argument,
                    ..ToolError::new("invalid_argument", error.message)
                }));
            }
        };
        let shared = self.shared.clone();
        let asked = args.clone();
        let round_trip = progress.asks_by_round_trip() || echoed.request_state.is_some();
        let read = tokio::task::spawn_blocking(move || {
            let gate = shared.gate_view(&asked)?;
            let sealer = match round_trip {
                true => Some(shared.sealer().map_err(|error| {
                    Outcome::Refused(ToolError::new("store_unavailable", error.to_string()))
                })?),
                false => None,
            };
            Ok((gate, sealer))
        })
        .await;
        let (gate, sealer) = match read {
            Ok(Ok(read)) => read,
            Ok(Err(outcome)) => return Waited::Done(outcome),
            Err(panic) => {
                return Waited::Done(Outcome::Refused(ToolError::new(
                    "internal_error",
                    format!("the server failed while reading the gate: {panic}"),
                )));
            }
        };
        let asked_for = args
            .wait_seconds
            .map_or(gate_wait::DEFAULT_WAIT, Duration::from_secs);
        let until_timeout = gate.remaining_s.map(Duration::from_secs);
        let wait = until_timeout.map_or(asked_for, |left| left.min(asked_for));
        let who = self.shared.caller_identity(&caller);
        if let Some(sealer) = sealer {
            return match echoed.request_state {
                Some(state) => {
                    let answered = self.shared.answered(
                        &sealer,
                        &state,
                        &echoed.input_responses,
                        &who,
                        &gate,
                        progress.client().map(str::to_owned),
                    );
                    match answered {
                        Ok(Some((answer, round))) => {
                            Waited::Done(self.decide(answer, round, &gate, &caller, None).await)
                        }
                        // The state is good and the answer missing: ask again.
                        Ok(None) => form_for(&sealer, &gate, &who, wait),
                        Err(refused) => Waited::Done(Outcome::Refused(refused)),
                    }
                }
                None => form_for(&sealer, &gate, &who, wait),
            };
        }
        let Some(peer) = progress
            .peer()
            .filter(|peer| gate_wait::can_ask(Some(*peer)))
        else {
            return Waited::Done(Outcome::Answer(to_value(&gate_wait::GatePending {
                status: "gate_pending",
                flow_id: gate.flow_id.clone(),
                step_id: gate.step_id.clone(),
                reason: "not_asked",
                message: "this client cannot show the person a form (it declared no \
                          elicitation capability, or the transport cannot ask during a call); \
                          the gate still waits"
                    .to_owned(),
                how_to_decide: gate.how_to_decide.clone(),
            })));
        };
        let answer = match gate_wait::ask(peer, &gate, wait, progress).await {
            Ok(answer) => answer,
            Err(error) => return Waited::Done(Outcome::Refused(error)),
        };
        let round = u32::try_from(gate.round).ok();
        let timed_out = until_timeout.is_some_and(|left| left <= wait);
        Waited::Done(
            self.decide(answer, round, &gate, &caller, Some(timed_out))
                .await,
        )
    }

    /// Applies what the person answered about `gate` (a decision for `round`) on the blocking
    /// pool. `form_ended_with_gate`: whether an unanswered form was withdrawn at the gate's
    /// timeout, whose rule then decides.
    async fn decide(
        &self,
        answer: gate_wait::Answer,
        round: Option<u32>,
        gate: &gate_wait::GateView,
        caller: &Caller,
        form_ended_with_gate: Option<bool>,
    ) -> Outcome {
        let (flow_id, step_id) = (gate.flow_id.clone(), gate.step_id.clone());
        let command = match answer {
            gate_wait::Answer::Decided {
                outcome,
                rationale,
                client,
                value,
            } => Command::GateResolve {
                flow_id,
                step_id,
                outcome,
                rationale,
                resolved_by: "human".to_owned(),
                // The person who answered the form: the token's holder over HTTP, the user who
                // started the client on stdio.
                actor: caller.person().map(str::to_owned),
                via: Some(stratum_runtime::Via {
                    channel: "elicitation".to_owned(),
                    client,
                }),
                round,
                value,
            },
            gate_wait::Answer::Pending(pending)
                if pending.reason == "no_answer" && form_ended_with_gate == Some(true) =>
            {
                Command::CheckTimeouts { flow_id }
            }
            gate_wait::Answer::Pending(pending) => return Outcome::Answer(to_value(&pending)),
        };
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            match shared.runtime().and_then(|runtime| runtime.call(&command)) {
                Ok(response) => Outcome::Answer(response.to_json()),
                Err(error) => {
                    Outcome::Refused(ToolError::new("store_unavailable", error.to_string()))
                }
            }
        })
        .await
        .unwrap_or_else(|panic| {
            Outcome::Refused(ToolError::new(
                "internal_error",
                format!("the server failed while deciding the gate: {panic}"),
            ))
        })
    }
}

/// The `input_required` answer that asks the person about `gate` (2026-07-28): the form, and
/// its state sealed for `who`, valid for `wait`.
fn form_for(sealer: &Sealer, gate: &gate_wait::GateView, who: &str, wait: Duration) -> Waited {
    let request = match gate_wait::request(gate) {
        Ok(request) => request,
        Err(error) => return Waited::Done(Outcome::Refused(error)),
    };
    let form = GateForm {
        flow_id: gate.flow_id.clone(),
        step_id: gate.step_id.clone(),
        round: u32::try_from(gate.round).unwrap_or(u32::MAX),
        issued_ms: stratum_runtime::now_ms(),
    };
    let state = match sealer.seal(&form, who, wait) {
        Ok(state) => state,
        Err(error) => return Waited::Done(Outcome::Refused(error)),
    };
    let mut requests = rmcp::model::InputRequests::new();
    requests.insert(
        gate_wait::INPUT_KEY.to_owned(),
        rmcp::model::InputRequest::Elicitation(rmcp::model::ElicitRequest::new(request)),
    );
    Waited::Ask(rmcp::model::InputRequiredResult::new(
        Some(requests),
        Some(state),
    ))
}

/// A random id for this process.
fn instance_id() -> String {
    let mut bits = [0_u8; 16];
    // Without randomness, the time and the pid still tell processes apart.
    if getrandom::fill(&mut bits).is_err() {
        let fallback = format!("{}-{}", stratum_runtime::now_ms(), std::process::id());
        return fallback;
    }
    bits.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The field `key` of an answer, null when it has none.
fn at<'v>(value: &'v Value, key: &str) -> &'v Value {
    value.get(key).unwrap_or(&Value::Null)
}

/// The JSON Schema of the value the gate flow `id` waits at decides (its function's
/// `output`), when it declares one.
fn decided_schema(store: &dyn Store, id: &crate::ids::FlowId) -> Result<Option<Value>, StoreError> {
    let mut schema = None;
    store.read(&mut |snapshot| {
        schema = None;
        let Some(header) = snapshot.flow(id)? else {
            return Ok(());
        };
        let Some(plan) = snapshot.plan(&header.plan)? else {
            return Ok(());
        };
        let step = crate::exec::current(&header).and_then(|index| {
            plan.flows
                .get(header.flow as usize)
                .and_then(|flow| flow.steps.get(index as usize))
        });
        schema = step
            .and_then(|step| step.output.contract)
            .and_then(|index| plan.contracts.get(index as usize))
            .map(|contract| contract.schema.clone());
        Ok(())
    })?;
    Ok(schema)
}

/// The refusal of an agent's `stratum_gate_resolve` under the `person-only` policy.
fn person_required(flow_id: &str, step_id: &str, console: Option<&str>) -> ToolError {
    let console = console.map_or_else(
        || "the web console's Gates page".to_owned(),
        |base| format!("the web console, {}/gates", base.trim_end_matches('/')),
    );
    ToolError::new(
        "person_required",
        format!(
            "this server lets only a person decide gates: call stratum_gate_wait(flow_id, \
             step_id) to ask the person in your client, or ask them to decide in {console} or \
             with `stratum-mcp gate approve {flow_id} {step_id} --note \"why\"`"
        ),
    )
}

impl ServerHandler for StratumServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "stratum-mcp",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            tools::TOOLS.iter().map(ToolSpec::to_tool).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::find(name).map(ToolSpec::to_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call_tool_as(request, Caller::stdio(), Progress::of(&context))
            .await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(custom_request_error(&request))
    }
}

/// The methods of the protocol a client may call. rmcp reads a request of one of them whose
/// params do not fit (`tools/call` with `"name": 5`) as a custom request, which its default
/// answers "method not found" (-32601): the method exists, its params are wrong (-32602).
const PROTOCOL_METHODS: [&str; 20] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "resources/directory/read",
    "subscriptions/listen",
    "prompts/list",
    "prompts/get",
    "logging/setLevel",
    "completion/complete",
    "skills/list",
    "skills/get",
    "tasks/get",
    "tasks/cancel",
];

/// The answer to a request rmcp could not read as one of the protocol's: invalid params
/// (-32602, saying what is wrong with them) for a method of the protocol, method not found
/// (-32601) for any other.
pub fn custom_request_error(request: &CustomRequest) -> ErrorData {
    let method = request.method.as_str();
    if !PROTOCOL_METHODS.contains(&method) {
        return ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("no method `{method}`"),
            None,
        );
    }
    let why = if method == "tools/call" {
        match request.params_as::<CallToolRequestParams>() {
            Ok(Some(_)) => "they do not fit the request".to_owned(),
            Ok(None) => "they are missing".to_owned(),
            Err(error) => error.to_string(),
        }
    } else {
        "they do not fit the request".to_owned()
    };
    ErrorData::invalid_params(
        format!("the params of `{method}` are not valid: {why}"),
        None,
    )
}

const INSTRUCTIONS: &str = "Stratum runs typed workflow specs (`.stratum.yaml`): you write or \
receive a spec, start a flow with stratum_plan, do each step it dispatches yourself and report \
it with stratum_step_done, until the flow completes. The server checks every result against the \
spec (contracts, output schemas, ensure expressions), retries, routes, asks the person at gates \
in your client's form when it can (else stratum_gate_wait or stratum_gate_resolve), and keeps the state durably: after a restart, stratum_resume returns the \
current step. Check a spec with stratum_validate before running it.";

fn unknown_tool_message(name: &str) -> String {
    let names = tools::TOOLS.iter().map(|spec| spec.name);
    match stratum_compiler::diagnostic::did_you_mean(name, names) {
        Some(close) => format!("no tool named `{name}`; did you mean `{close}`?"),
        None => format!("no tool named `{name}`"),
    }
}

fn to_value(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

impl Shared {
    fn call(
        &self,
        spec: &ToolSpec,
        arguments: JsonObject,
        caller: &Caller,
        progress: &Progress,
    ) -> Outcome {
        match self.run(spec, arguments, caller, progress) {
            Ok(value) => Outcome::Answer(value),
            Err(Refusal::Argument(error)) => Outcome::Refused(ToolError {
                argument: error.argument,
                ..ToolError::new("invalid_argument", error.message)
            }),
            Err(Refusal::Store(error)) => {
                Outcome::Refused(ToolError::new("store_unavailable", error.to_string()))
            }
            Err(Refusal::Tool(error)) => Outcome::Refused(error),
        }
    }

    fn run(
        &self,
        spec: &ToolSpec,
        arguments: JsonObject,
        caller: &Caller,
        progress: &Progress,
    ) -> Result<Value, Refusal> {
        let name = spec.name;
        let actor = caller.actor.as_ref();
        let directory = |argument: &str, given: &str| {
            paths::directory(
                &caller.paths,
                self.config.limits.root.as_deref(),
                argument,
                given,
            )
        };
        let background = &self.background;
        let command = match spec.tool {
            ToolName::AgentRun => {
                let args: args::AgentRunArgs = args::parse(name, arguments)?;
                return Ok(background.agent_run(&self.driver()?, args)?);
            }
            ToolName::AgentPoll => {
                let args: args::RunIdArgs = args::parse(name, arguments)?;
                return Ok(background.agent_poll(&self.runtime()?, args)?);
            }
            ToolName::CancelAgentRun => {
                let args: args::RunIdArgs = args::parse(name, arguments)?;
                return Ok(background.cancel_agent_run(&self.driver()?, args)?);
            }
            ToolName::FlowRunBg => {
                let args: args::FlowRunBgArgs = args::parse(name, arguments)?;
                return Ok(background.flow_run_bg(&self.driver()?, args)?);
            }
            ToolName::FlowBgPoll => {
                let args: args::FlowArgs = args::parse(name, arguments)?;
                return Ok(background.flow_bg_poll(&self.runtime()?, args)?);
            }
            ToolName::FlowCancelBg => {
                let args: args::FlowArgs = args::parse(name, arguments)?;
                return Ok(background.flow_cancel_bg(&self.runtime()?, args)?);
            }
            ToolName::Judge => {
                let args: args::JudgeArgs = args::parse(name, arguments)?;
                if let Some(seconds) = args.wait_seconds {
                    args::check_wait(seconds)?;
                }
                return Ok(background.judge(&self.driver()?, args, progress));
            }
            ToolName::JudgePoll => {
                let args: args::JudgePollArgs = args::parse(name, arguments)?;
                args::check_wait(args.wait_seconds)?;
                return Ok(background.judge_wait(
                    &args.flow_id,
                    &args.step_id,
                    Some(Duration::from_secs(args.wait_seconds)),
                    progress,
                ));
            }
            ToolName::GateWait => {
                return Err(Refusal::Tool(ToolError::new(
                    "not_over_mcp",
                    "stratum_gate_wait asks a person through the MCP client; call it over MCP",
                )));
            }
            ToolName::ParallelStart => {
                let args = args::parallel_step(name, arguments)?;
                return Ok(background.parallel_start(&self.driver()?, args, progress)?);
            }
            ToolName::ParallelPoll => {
                let args = args::parallel_step(name, arguments)?;
                return Ok(background.parallel_poll(&self.runtime()?, args, progress)?);
            }
            ToolName::ParallelDone => {
                let args: args::ParallelDoneArgs = args::parse(name, arguments)?;
                Command::ParallelDone {
                    flow_id: args.flow_id,
                    step_id: args.step_id,
                    task_results: Value::Array(args.task_results),
                    merge_status: args.merge_status,
                }
            }
            ToolName::ParallelAdvance => {
                let args: args::ParallelAdvanceArgs = args::parse(name, arguments)?;
                Command::ParallelAdvance {
                    flow_id: args.flow_id,
                    step_id: args.step_id,
                    merge_status: args.merge_status,
                }
            }
            ToolName::Validate => {
                let args: args::ValidateArgs = args::parse(name, arguments)?;
                return Ok(to_value(&validate(&args.spec)));
            }
            ToolName::Plan => {
                let args: args::PlanArgs = args::parse(name, arguments)?;
                let plan = match self.plan(&args.spec) {
                    Ok(plan) => plan,
                    Err(rejected) => return Ok(rejected),
                };
                Command::Start {
                    plan,
                    flow: args.flow,
                    inputs: Value::Object(args.inputs.unwrap_or_default()),
                    started_by: caller.person().map(str::to_owned),
                }
            }
            ToolName::StepDone => {
                let args: args::StepDoneArgs = args::parse(name, arguments)?;
                Command::StepDone {
                    flow_id: args.flow_id,
                    step_id: args.step_id,
                    result: Value::Object(args.result),
                    usage: args.usage.map(Value::Object),
                }
            }
            ToolName::Audit => Command::Audit {
                flow_id: args::parse::<args::FlowArgs>(name, arguments)?.flow_id,
            },
            ToolName::CheckTimeouts => Command::CheckTimeouts {
                flow_id: args::parse::<args::FlowArgs>(name, arguments)?.flow_id,
            },
            ToolName::Resume => Command::Resume {
                flow_id: args::parse::<args::FlowArgs>(name, arguments)?.flow_id,
            },
            ToolName::GateResolve => {
                let args: args::GateResolveArgs = args::parse(name, arguments)?;
                if self.config.gate_policy == stratum_runtime::GatePolicy::PersonOnly {
                    return Err(Refusal::Tool(person_required(
                        &args.flow_id,
                        &args.step_id,
                        self.config.console_url.as_deref(),
                    )));
                }
                Command::GateResolve {
                    flow_id: args.flow_id,
                    step_id: args.step_id,
                    outcome: args.outcome,
                    rationale: args.rationale,
                    resolved_by: args.resolved_by,
                    actor: actor.cloned(),
                    via: None,
                    round: None,
                    value: args.value,
                }
            }
            ToolName::SkipStep => {
                let args: args::SkipStepArgs = args::parse(name, arguments)?;
                Command::SkipStep {
                    flow_id: args.flow_id,
                    step_id: args.step_id,
                    reason: args.reason,
                }
            }
            ToolName::Commit => {
                let args: args::CheckpointArgs = args::parse(name, arguments)?;
                Command::Commit {
                    flow_id: args.flow_id,
                    label: args.label,
                }
            }
            ToolName::Revert => {
                let args: args::CheckpointArgs = args::parse(name, arguments)?;
                Command::Revert {
                    flow_id: args.flow_id,
                    label: args.label,
                }
            }
            ToolName::IterationStart => {
                let args: args::IterationStartArgs = args::parse(name, arguments)?;
                Command::IterationStart {
                    flow_id: args.flow_id,
                    step_id: args.step_id,
                }
            }
            ToolName::IterationReport => {
                let args: args::IterationReportArgs = args::parse(name, arguments)?;
                Command::IterationReport {
                    flow_id: args.flow_id,
                    step_id: args.step_id,
                    result: Value::Object(args.result),
                }
            }
            ToolName::IterationAbort => {
                let args: args::IterationAbortArgs = args::parse(name, arguments)?;
                Command::IterationAbort {
                    flow_id: args.flow_id,
                    step_id: args.step_id,
                    reason: args.reason,
                }
            }
            ToolName::CompileSpeckit => {
                let args: args::CompileSpeckitArgs = args::parse(name, arguments)?;
                let dir = directory("tasks_dir", &args.tasks_dir)?;
                let compiled = crate::speckit::compile_tasks_dir_under(
                    &dir.path,
                    &args.flow_name,
                    dir.root.as_deref(),
                );
                return Ok(match compiled {
                    Ok(compiled) => to_value(&compiled),
                    Err(error) => to_value(&error.failure()),
                });
            }
            ToolName::ListWorkflows => {
                let args: args::ListWorkflowsArgs = args::parse(name, arguments)?;
                let dir = directory("workflows_dir", &args.workflows_dir)?;
                return Ok(to_value(&crate::workflows::list_workflows_under(
                    &dir.path,
                    dir.root.as_deref(),
                )));
            }
            ToolName::DraftPipeline => {
                let args: args::DraftPipelineArgs = args::parse(name, arguments)?;
                let dir = paths::writable_directory(
                    &caller.paths,
                    self.config.limits.root.as_deref(),
                    "project_dir",
                    &args.project_dir,
                )?;
                let draft = Value::Object(args.draft);
                return Ok(
                    match crate::draft::save_draft_under(&draft, &dir.path, dir.root.as_deref()) {
                        Ok(saved) => to_value(&saved),
                        Err(error) => to_value(&error.failure()),
                    },
                );
            }
        };
        let runtime = self.runtime()?;
        let response = runtime.call(&command)?;
        Ok(response.to_json())
    }

    /// The driver of agent runs and background flows: the runtime, the connectors at their
    /// defaults (binaries on `PATH`), agents working under the root.
    fn driver(&self) -> Result<stratum_driver::Driver, StoreError> {
        let mut slot = self.driver.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(driver) = slot.as_ref() {
            return Ok(driver.clone());
        }
        let root = match &self.config.limits.root {
            Some(root) => root.clone(),
            None => std::env::current_dir().map_err(|error| {
                StoreError::Database(format!("cannot read the current directory: {error}"))
            })?,
        };
        let root = root.canonicalize().unwrap_or(root);
        let driver = stratum_driver::Driver::new(self.runtime()?, root);
        *slot = Some(driver.clone());
        Ok(driver)
    }

    /// The gate `args` names, as the form shows it; or the answer instead: the flow is not
    /// waiting at that gate (its current dispatch, or a refusal), or the gate timed out now.
    fn gate_view(&self, args: &args::GateWaitArgs) -> Result<gate_wait::GateView, Outcome> {
        let store_error = |error: StoreError| {
            Outcome::Refused(ToolError::new("store_unavailable", error.to_string()))
        };
        let runtime = self.runtime().map_err(store_error)?;
        let flow_id = args.flow_id.clone();
        // A gate past its timeout is decided by it now, as on any call of the flow.
        let timeouts = runtime
            .call(&Command::CheckTimeouts {
                flow_id: flow_id.clone(),
            })
            .map_err(store_error)?
            .to_json();
        if at(&timeouts, "status") != "no_timeout" {
            return Err(Outcome::Answer(timeouts));
        }
        let current = runtime
            .call(&Command::Resume {
                flow_id: flow_id.clone(),
            })
            .map_err(store_error)?
            .to_json();
        if at(&current, "status") != "await_gate"
            || at(&current, "step_id") != args.step_id.as_str()
        {
            return Err(Outcome::Refused(ToolError::new(
                "not_at_gate",
                format!(
                    "flow '{}' is not waiting at gate '{}': it is at {} '{}'; call stratum_resume",
                    args.flow_id,
                    args.step_id,
                    at(&current, "status").as_str().unwrap_or("error"),
                    at(&current, "step_id").as_str().unwrap_or_default()
                ),
            )));
        }
        let not_at_gate = || {
            Outcome::Refused(ToolError::new(
                "not_at_gate",
                format!(
                    "flow '{}' is not waiting at gate '{}' any more; call stratum_resume",
                    args.flow_id, args.step_id
                ),
            ))
        };
        let id = crate::ids::FlowId::parse(&flow_id).ok_or_else(not_at_gate)?;
        // Read after the flow was found at the gate: a decision made meanwhile shows as the
        // flow having moved on.
        let context = crate::gate_context::read(runtime.store().as_ref(), &id, crate::now_ms())
            .map_err(store_error)?
            .filter(|context| context.step_id == args.step_id)
            .ok_or_else(not_at_gate)?;
        let value_schema = decided_schema(runtime.store().as_ref(), &id).map_err(store_error)?;
        Ok(gate_wait::GateView {
            flow_id,
            step_id: args.step_id.clone(),
            round: u64::from(context.round),
            how_to_decide: at(&current, "how_to_decide")
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            remaining_s: at(&timeouts, "remaining_seconds")
                .as_f64()
                .map(|seconds| seconds.max(0.0).ceil() as u64),
            context,
            value_schema,
        })
    }

    /// The sealer of gate-form states, with the store's secret (read once).
    fn sealer(&self) -> Result<Sealer, StoreError> {
        let mut slot = self.sealer.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sealer) = slot.as_ref() {
            return Ok(sealer.clone());
        }
        let runtime = self.runtime()?;
        let sealer = Sealer::of_store(runtime.store().as_ref())?;
        *slot = Some(sealer.clone());
        Ok(sealer)
    }

    /// Who a gate form's state is issued to: the access token over HTTP, this process (the
    /// one connection of a stdio server) otherwise.
    fn caller_identity(&self, caller: &Caller) -> String {
        match &caller.actor {
            Some(name) => format!("token:{name}"),
            None => format!("stdio:{}", self.instance),
        }
    }

    /// The person's answer a client brought back with `state` (2026-07-28), and the round it
    /// decides; `None` when the state is good and the answer is missing. A state that is not
    /// this store's for `who` and this gate, or expired, is refused and changes nothing.
    fn answered(
        &self,
        sealer: &Sealer,
        state: &str,
        responses: &rmcp::model::InputResponses,
        who: &str,
        gate: &gate_wait::GateView,
        client: Option<String>,
    ) -> Result<Option<(gate_wait::Answer, Option<u32>)>, ToolError> {
        let form = sealer
            .open(state, who, &gate.flow_id, Some(&gate.step_id))
            .map_err(|refusal| match refusal {
                states::Refusal::Invalid => ToolError::new(
                    "invalid_request_state",
                    format!(
                        "the requestState is not one this server issued to you for gate '{}' of \
                         flow '{}' (it was altered, made up, or issued to another caller); \
                         nothing changed: call stratum_gate_wait again without it for a fresh \
                         form",
                        gate.step_id, gate.flow_id
                    ),
                ),
                states::Refusal::Expired => ToolError::new(
                    "request_state_expired",
                    format!(
                        "the form for gate '{}' expired before its answer came back; nothing \
                         changed: call stratum_gate_wait again for a fresh form",
                        gate.step_id
                    ),
                ),
            })?;
        let Some(response) = responses.get(gate_wait::INPUT_KEY) else {
            return Ok(None);
        };
        let result: rmcp::model::ElicitResult =
            serde_json::from_value(response.clone()).map_err(|error| {
                ToolError::new(
                    "invalid_input_response",
                    format!(
                        "inputResponses.{} is not an elicitation result ({error}); nothing \
                         changed: send the client's answer to the form as it gave it",
                        gate_wait::INPUT_KEY
                    ),
                )
            })?;
        Ok(Some((
            gate_wait::answer(result, gate, client),
            Some(form.round),
        )))
    }

    /// The store, opened on first use (so that starting the server touches nothing).
    fn runtime(&self) -> Result<Runtime, StoreError> {
        let mut slot = self.runtime.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(runtime) = slot.as_ref() {
            return Ok(runtime.clone());
        }
        let store: Arc<dyn Store> = match &self.choice {
            StoreChoice::Default(options) => Arc::new(SqliteStore::open_with(
                SqliteStore::default_path()?,
                *options,
            )?),
            StoreChoice::Sqlite(path, options) => Arc::new(SqliteStore::open_with(path, *options)?),
            StoreChoice::Postgres(url) => Arc::new(PostgresStore::connect(url)?),
            StoreChoice::Open(store) => store.clone(),
        };
        let runtime = Runtime::new(store.clone(), self.config.clone())
            .observed_by(Arc::new(super::metrics::CommandMetrics::new(store)));
        *slot = Some(runtime.clone());
        Ok(runtime)
    }

    /// The plan of a spec text: from the cache when the same text was compiled before, else
    /// compiled. A spec with errors gives the answer that reports them.
    fn plan(&self, text: &str) -> Result<Arc<Plan>, Value> {
        let key = stratum_compiler::plan::sha256(text.as_bytes());
        let cached = self
            .plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key);
        if let Some(plan) = cached {
            return Ok(plan);
        }
        self.compilations.fetch_add(1, Ordering::Relaxed);
        let plan = match compile::plan_from_spec(SPEC_NAME, text) {
            Ok(plan) => Arc::new(plan),
            Err(CompileError::Spec {
                sources,
                diagnostics,
            }) => return Err(to_value(&rejected(&sources, &diagnostics))),
            Err(CompileError::Lower(error)) => {
                return Err(to_value(&ToolError::new(
                    "execution_error",
                    format!("the spec checks but could not be prepared to run: {error}"),
                )));
            }
        };
        let size = plan_size(&plan);
        self.plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, plan.clone(), size);
        Ok(plan)
    }
}

/// Why a call was not run.
enum Refusal {
    Argument(ArgumentError),
    Store(StoreError),
    Tool(ToolError),
}

impl From<ToolError> for Refusal {
    fn from(error: ToolError) -> Refusal {
        Refusal::Tool(error)
    }
}

impl From<ArgumentError> for Refusal {
    fn from(error: ArgumentError) -> Refusal {
        Refusal::Argument(error)
    }
}

impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Refusal {
        Refusal::Store(error)
    }
}

/// `stratum_validate`: the compiler's check, every diagnostic (up to the listed bound).
pub fn validate(text: &str) -> Validation {
    let mut sources = SourceMap::new();
    let compilation = stratum_compiler::check_bytes(&mut sources, SPEC_NAME, text.as_bytes());
    let valid = !compilation
        .diagnostics
        .iter()
        .any(|diagnostic| diagnostic.severity == Severity::Error);
    let (listed, omitted) = diagnostics::listed_for_validation(&compilation.diagnostics);
    let report = diagnostics::report(&sources, listed);
    Validation {
        valid,
        errors: report.errors,
        warnings: report.warnings,
        omitted_diagnostics: (omitted > 0).then_some(omitted),
    }
}

fn rejected(
    sources: &SourceMap,
    compiler_diagnostics: &[stratum_compiler::diagnostic::Diagnostic],
) -> SpecRejected {
    let (listed, omitted) = diagnostics::listed_in_order(compiler_diagnostics);
    let report = diagnostics::report(sources, listed);
    // The first error heads the answer even when the listed ones are all warnings.
    let first = match report.errors.first() {
        Some(first) => Some(first.clone()),
        None => {
            let first_error = compiler_diagnostics
                .iter()
                .find(|diagnostic| diagnostic.severity == Severity::Error);
            diagnostics::report(sources, first_error)
                .errors
                .into_iter()
                .next()
        }
    };
    let mut all = report.errors;
    all.extend(report.warnings);
    all.sort_by_key(|diagnostic| (diagnostic.line, diagnostic.column));
    SpecRejected {
        status: "error",
        success: false,
        error_type: first
            .as_ref()
            .map_or_else(|| "ir_semantic_error".to_owned(), |d| d.error_type.clone()),
        path: first.as_ref().map(|d| d.path.clone()).unwrap_or_default(),
        message: first
            .as_ref()
            .map_or_else(|| "the spec has errors".to_owned(), |d| d.message.clone()),
        suggestion: first.and_then(|d| d.suggestion),
        diagnostics: all,
        omitted_diagnostics: (omitted > 0).then_some(omitted),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::MemoryStore;

    const SENTIMENT: &str = include_str!("../../../examples/sentiment.stratum.yaml");

    fn server() -> StratumServer {
        StratumServer::new(
            StoreChoice::Open(Arc::new(MemoryStore::default())),
            Config::default(),
        )
    }

    fn object(value: Value) -> JsonObject {
        match value {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        }
    }

    #[test]
    fn the_same_spec_text_is_compiled_once() {
        let server = server();
        let plan = || object(json!({"spec": SENTIMENT, "flow": "run", "inputs": {"text": "t"}}));
        let first = server.call_blocking("stratum_plan", plan());
        let second = server.call_blocking("stratum_plan", plan());
        assert_eq!(server.compilations(), 1);
        let flow_id = |answer: &Result<Value, Value>| {
            answer
                .as_ref()
                .ok()
                .and_then(|value| value.get("flow_id").cloned())
        };
        assert!(flow_id(&first).is_some());
        assert_ne!(flow_id(&first), flow_id(&second), "two flows of one plan");
        let edited = SENTIMENT.replace("I love it", "I like it") + "\n";
        let _ = server.call_blocking(
            "stratum_plan",
            object(json!({"spec": edited, "flow": "run", "inputs": {"text": "t"}})),
        );
        assert_eq!(server.compilations(), 2);
    }

    #[test]
    fn compiled_plans_are_kept_within_a_budget_in_bytes() {
        // Four specs differing only by a comment (the case, at a smaller scale): a
        // bound by count kept all four, whatever their size.
        let variant = |n: usize| format!("{SENTIMENT}\n# variant {n}\n");
        let size = compile::plan_from_spec(SPEC_NAME, &variant(0))
            .map(|plan| plan_size(&plan))
            .unwrap_or_default();
        assert!(size > 0);
        let budget = size * 2 + size / 2;
        let server = StratumServer::with_plan_budget(
            StoreChoice::Open(Arc::new(MemoryStore::default())),
            Config::default(),
            budget,
        );
        let plan = |n: usize| {
            let _ = server.call_blocking(
                "stratum_plan",
                object(json!({"spec": variant(n), "flow": "run", "inputs": {"text": "t"}})),
            );
        };
        for n in 0..4 {
            plan(n);
            assert!(server.cached_plan_bytes() <= budget);
        }
        assert_eq!(server.compilations(), 4);
        assert!(
            server.cached_plan_bytes() >= size * 2,
            "the newest two are kept"
        );
        plan(3);
        assert_eq!(
            server.compilations(),
            4,
            "the newest is taken from the cache"
        );
        plan(0);
        assert_eq!(server.compilations(), 5, "the oldest was dropped");
    }

    #[test]
    fn an_unknown_tool_is_named_with_the_closest_one() {
        let refused = server().call_blocking("stratum_audti", JsonObject::new());
        let message = refused
            .err()
            .and_then(|error| error.get("message").cloned())
            .unwrap_or_default();
        assert_eq!(
            message,
            json!("no tool named `stratum_audti`; did you mean `stratum_audit`?")
        );
    }
}
