//! What `/metrics` says (OpenMetrics text, which Prometheus scrapes), in two parts.
//!
//! **This process's**, counted as it works: MCP calls by tool and their duration; store
//! commands by command and store kind and their duration; step attempts by flow and step
//! (accepted, refused by a check, failed for good) and `ensure` violations; gate decisions by
//! outcome and who decided. They are kept in one [`Metrics`] per process ([`global`]), fed by
//! the runtime's [`Observer`] and the MCP server; with several `serve` processes, sum them.
//!
//! **The store's**, read at each scrape, so that every process on one store reports the same
//! values: flows by status, the gates waiting and how long each has waited, the agent runs
//! recorded by agent and status and their durations. With several processes, take `max`.
//!
//! Names follow Prometheus's conventions: `stratum_` prefix, base units (`_seconds`),
//! `_total` on counters.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde_json::Value;
use stratum_runtime::{Command, FlowId, Observer, Response, Store, StoreError};

use crate::cli::query;

/// The content type of what [`render`] writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How many flow names the process remembers (a name is read once per flow).
const NAMES_KEPT: usize = 10_000;

/// How many recorded agent runs a scrape reads.
const RUNS_READ: usize = 10_000;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommandLabels {
    command: String,
    store: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    flow: String,
    step: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    flow: String,
    step: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    outcome: String,
    resolved_by: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    agent: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabels {
    agent: String,
}

type Durations<L> = Family<L, Histogram, fn() -> Histogram>;

/// Buckets from 1 ms to about 65 s: a store command, an MCP call.
fn call_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// Buckets from 1 s to about 3 days: a gate waiting, an agent running.
fn wait_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 3.0, 12))
}

/// This process's metrics.
pub struct Metrics {
    registry: Registry,
    calls: Durations<ToolLabels>,
    commands: Durations<CommandLabels>,
    attempts: Family<AttemptLabels, Counter>,
    violations: Family<StepLabels, Counter>,
    decisions: Family<DecisionLabels, Counter>,
    /// Flow names by id, so that a command's flow is labelled by its name.
    names: Mutex<HashMap<String, String>>,
}

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::default();
        let calls: Durations<ToolLabels> = Family::new_with_constructor(call_buckets);
        let commands: Durations<CommandLabels> = Family::new_with_constructor(call_buckets);
        let attempts = Family::<AttemptLabels, Counter>::default();
        let violations = Family::<StepLabels, Counter>::default();
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "stratum_mcp_call_duration_seconds",
            "MCP tools/call answered by this process, by tool and outcome (ok, refused, input_required)",
            calls.clone(),
        );
        registry.register(
            "stratum_store_command_duration_seconds",
            "Runtime commands this process ran, one store transaction each, by command and store kind",
            commands.clone(),
        );
        registry.register(
            "stratum_step_attempts",
            "Results reported for a step, by flow name, step and outcome (accepted, refused, failed)",
            attempts.clone(),
        );
        registry.register(
            "stratum_ensure_violations",
            "Violations in refused results (schema, guardrail, ensure), by flow name and step",
            violations.clone(),
        );
        registry.register(
            "stratum_gate_decisions",
            "Gates decided through this process, by outcome and who decided (human, agent, system)",
            decisions.clone(),
        );
        Metrics {
            registry,
            calls,
            commands,
            attempts,
            violations,
            decisions,
            names: Mutex::default(),
        }
    }

    /// An MCP call to `tool` that answered with `outcome` after `took`.
    pub fn call(&self, tool: &str, outcome: &str, took: Duration) {
        self.calls
            .get_or_create(&ToolLabels {
                tool: tool.to_owned(),
                outcome: outcome.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// What a command's answer says about its step's attempt or its gate.
    fn outcome_of(&self, store: &dyn Store, command: &Command, answer: &Value) {
        let status = answer.get("status").and_then(Value::as_str).unwrap_or("");
        match command {
            Command::StepDone {
                flow_id, step_id, ..
            }
            | Command::StepFailed {
                flow_id, step_id, ..
            } => {
                let outcome = match status {
                    "ensure_failed" | "schema_failed" | "guardrail_blocked" | "no_result" => {
                        "refused"
                    }
                    "error" => match answer.get("error_type").and_then(Value::as_str) {
                        Some("retries_exhausted") => "failed",
                        // Refused as sent (wrong step, a finished flow): no attempt was made.
                        _ => return,
                    },
                    _ => "accepted",
                };
                let flow = self.flow_name(store, flow_id);
                self.attempts
                    .get_or_create(&AttemptLabels {
                        flow: flow.clone(),
                        step: step_id.clone(),
                        outcome: outcome.to_owned(),
                    })
                    .inc();
                let violations = answer
                    .get("violations")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                if violations > 0 {
                    self.violations
                        .get_or_create(&StepLabels {
                            flow,
                            step: step_id.clone(),
                        })
                        .inc_by(u64::try_from(violations).unwrap_or(u64::MAX));
                }
            }
            Command::GateResolve {
                outcome,
                resolved_by,
                ..
            } if status != "error" => {
                self.decisions
                    .get_or_create(&DecisionLabels {
                        outcome: outcome.clone(),
                        resolved_by: resolved_by.clone(),
                    })
                    .inc();
            }
            _ => {}
        }
    }

    /// The name of the flow `id`, read from the store once.
    fn flow_name(&self, store: &dyn Store, id: &str) -> String {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(name) = names.get(id) {
            return name.clone();
        }
        let mut name = String::new();
        if let Some(flow) = FlowId::parse(id) {
            let _ = store.read(&mut |snapshot| {
                name = snapshot
                    .flow(&flow)?
                    .map(|header| header.flow_name)
                    .unwrap_or_default();
                Ok(())
            });
        }
        if names.len() >= NAMES_KEPT {
            names.clear();
        }
        names.insert(id.to_owned(), name.clone());
        name
    }
}

/// Feeds a runtime's commands into [`global`].
pub struct CommandMetrics {
    store: Arc<dyn Store>,
}

impl CommandMetrics {
    pub fn new(store: Arc<dyn Store>) -> CommandMetrics {
        CommandMetrics { store }
    }
}

impl Observer for CommandMetrics {
    fn observe(&self, command: &Command, took: Duration, outcome: &Result<Response, StoreError>) {
        let metrics = global();
        metrics
            .commands
            .get_or_create(&CommandLabels {
                command: command.name().to_owned(),
                store: self.store.kind().to_owned(),
            })
            .observe(took.as_secs_f64());
        if let Ok(response) = outcome {
            metrics.outcome_of(self.store.as_ref(), command, &response.to_json());
        }
    }
}

/// The whole exposition: this process's metrics, then the store's read now (`now_ms`).
pub fn render(store: &dyn Store, now_ms: u64) -> Result<String, StoreError> {
    let mut text = String::new();
    let fmt_error = |_| StoreError::Database("cannot write the metrics".to_owned());
    encode_registry(&mut text, &global().registry).map_err(fmt_error)?;
    encode_registry(&mut text, &store_registry(store, now_ms)?).map_err(fmt_error)?;
    encode_eof(&mut text).map_err(fmt_error)?;
    Ok(text)
}

/// The store's state as metrics, read now.
fn store_registry(store: &dyn Store, now_ms: u64) -> Result<Registry, StoreError> {
    let mut registry = Registry::default();
    let flows = Family::<StatusLabels, Gauge>::default();
    registry.register(
        "stratum_flows",
        "Flows in the store, by status",
        flows.clone(),
    );
    let headers = store.list_flows()?;
    for summary in query::flows(store)? {
        let status = serde_json::to_value(summary.status)
            .ok()
            .and_then(|status| status.as_str().map(str::to_owned))
            .unwrap_or_default();
        flows.get_or_create(&StatusLabels { status }).inc();
    }
    let pending = Gauge::<i64>::default();
    let waited = wait_buckets();
    for gate in query::gates_of(store, &headers)? {
        pending.inc();
        let since = headers
            .iter()
            .find(|header| header.id.as_str() == gate.flow_id)
            .and_then(|header| header.dispatched_ms);
        if let Some(since) = since {
            waited.observe(now_ms.saturating_sub(since) as f64 / 1000.0);
        }
    }
    registry.register(
        "stratum_gates_pending",
        "Gates a running flow waits at",
        pending,
    );
    registry.register(
        "stratum_gate_waiting_seconds",
        "How long each gate that waits now has waited",
        waited,
    );
    let runs = Family::<RunLabels, Gauge>::default();
    let run_time: Durations<AgentLabels> = Family::new_with_constructor(wait_buckets);
    for run in store.agent_runs(None, RUNS_READ)? {
        let status = serde_json::to_value(run.status)
            .ok()
            .and_then(|status| status.as_str().map(str::to_owned))
            .unwrap_or_default();
        runs.get_or_create(&RunLabels {
            agent: run.agent.clone(),
            status,
        })
        .inc();
        if let Some(finished) = run.finished_ms {
            run_time
                .get_or_create(&AgentLabels { agent: run.agent })
                .observe(finished.saturating_sub(run.started_ms) as f64 / 1000.0);
        }
    }
    registry.register(
        "stratum_agent_runs",
        "Agent runs recorded in the store (the latest 10000), by agent and status",
        runs,
    );
    registry.register(
        "stratum_agent_run_duration_seconds",
        "How long the recorded agent runs that ended took, by agent",
        run_time,
    );
    Ok(registry)
}

/// A line of the exposition, for tests: the value of `name` with `labels`
/// (`key="value"` pairs as written), if the text has it.
pub fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    let mut wanted = String::from(name);
    if !labels.is_empty() {
        let _ = write!(wanted, "{{{labels}}}");
    }
    text.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        (series == wanted).then(|| value.parse().ok()).flatten()
    })
}
