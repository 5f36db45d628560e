//! The scenario driver: a spec, a store, a simulated clock, and a transcript of every command
//! and its response (flow ids replaced by `<flow-N>` in order of appearance), for snapshots.
//!
//! One suite for every store: a scenario made with [`Scenario::new`] runs each command on the
//! memory store and, with the same clock and entropy, on a SQLite database and a PostgreSQL
//! schema of its own, and fails on the first response that differs between them.

#![allow(dead_code)]

pub mod fake_agent;
pub mod linear;
pub mod postgres;
pub mod unattended;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use stratum_compiler::plan::Plan;
use stratum_runtime::{Command, Config, Context, FlowId, MemoryStore, Response, Store, execute};

/// The clock every scenario starts at: 2026-01-01T00:00:00Z.
pub const EPOCH_MS: u64 = 1_767_225_600_000;

pub struct Scenario {
    pub store: Arc<dyn Store>,
    /// The other stores every command also runs on, by name; their answers must be the
    /// store's.
    mirrors: Arc<Mirrors>,
    pub config: Arc<Config>,
    pub plan: Arc<Plan>,
    pub now_ms: u64,
    seed: u128,
    transcript: String,
    names: HashMap<String, String>,
    ids: Vec<String>,
    /// Who sends the commands, as a server would vouch for them (see [`Scenario::acting_as`]).
    identity: Option<String>,
}

/// Compiles a spec, or panics with its diagnostics.
pub fn plan(spec: &str) -> Plan {
    match stratum_runtime::compile::plan_from_spec("scenario.stratum.yaml", spec) {
        Ok(plan) => plan,
        Err(stratum_runtime::compile::CompileError::Spec { diagnostics, .. }) => {
            let messages: Vec<String> = diagnostics
                .iter()
                .filter(|d| d.is_error())
                .map(|d| format!("{:?}: {}", d.code, d.message))
                .collect();
            panic!("the scenario's spec has errors:\n{}", messages.join("\n"))
        }
        Err(error) => panic!("{error}"),
    }
}

impl Scenario {
    /// A scenario on the memory store, mirrored on SQLite and PostgreSQL.
    pub fn new(spec: &str) -> Scenario {
        Scenario::configured(spec, Config::default())
    }

    /// A scenario with these settings on the memory store, mirrored on SQLite and PostgreSQL.
    pub fn configured(spec: &str, config: Config) -> Scenario {
        let mut scenario = Scenario::with(spec, Arc::new(MemoryStore::new()), config);
        scenario.mirrors = Arc::new(Mirrors::every_database());
        scenario
    }

    /// A scenario on `store` alone.
    pub fn with(spec: &str, store: Arc<dyn Store>, config: Config) -> Scenario {
        Scenario {
            store,
            mirrors: Arc::new(Mirrors::default()),
            config: Arc::new(config),
            plan: Arc::new(plan(spec)),
            now_ms: EPOCH_MS,
            seed: 1,
            transcript: String::new(),
            names: HashMap::new(),
            ids: Vec::new(),
            identity: None,
        }
    }

    /// Moves the simulated clock.
    pub fn wait_ms(&mut self, ms: u64) {
        self.now_ms += ms;
        self.transcript.push_str(&format!("# {ms} ms pass\n\n"));
    }

    /// Sends the next commands as `identity`, the one a server vouches for (an access token's
    /// name, `os:<user>`): the flows they start record it, the gates they decide carry it as
    /// the actor. `None`, the default, is an agent over stdio, whom no server vouches for.
    pub fn acting_as(&mut self, identity: Option<&str>) {
        self.identity = identity.map(str::to_owned);
        self.transcript.push_str(&format!(
            "# acting as {}\n\n",
            identity.unwrap_or("(nobody known)")
        ));
    }

    /// A note in the transcript.
    pub fn note(&mut self, text: &str) {
        self.transcript.push_str(&format!("# {text}\n\n"));
    }

    /// The id of the `n`th flow seen (1-based).
    pub fn flow(&self, n: usize) -> String {
        self.ids
            .get(n - 1)
            .cloned()
            .unwrap_or_else(|| panic!("no flow {n} yet"))
    }

    pub fn transcript(&self) -> &str {
        &self.transcript
    }

    /// A restart: a new driver, as a new server process would be, over the same store, plan,
    /// settings and clock. Nothing but the store carries state; the transcript and the flow
    /// names carry over (with a note) so that one snapshot tells the whole story.
    pub fn reopen(&self) -> Scenario {
        self.reopen_with(self.store.clone())
    }

    /// A restart onto `store`: the same database opened again (say a `SqliteStore` on the
    /// file the old one wrote, after dropping the old one).
    pub fn reopen_with(&self, store: Arc<dyn Store>) -> Scenario {
        let mut reopened = Scenario {
            store,
            mirrors: self.mirrors.clone(),
            config: self.config.clone(),
            plan: self.plan.clone(),
            now_ms: self.now_ms,
            seed: self.seed.wrapping_add(1 << 64),
            transcript: self.transcript.clone(),
            names: self.names.clone(),
            ids: self.ids.clone(),
            identity: self.identity.clone(),
        };
        reopened.note("restart: a new process opens the same store");
        reopened
    }

    /// Runs a command and records it; returns the response as JSON (ids as they are).
    pub fn run(&mut self, label: &str, command: Command) -> Value {
        let response = self
            .raw(&command)
            .unwrap_or_else(|error| panic!("{label}: store error: {error}"));
        let json = response.to_json();
        self.learn_ids(&json);
        let shown = self.normalize(&json);
        let shown_label = self.normalize_text(label);
        self.transcript.push_str(&format!(
            "> {shown_label}\n{}\n\n",
            serde_json::to_string_pretty(&shown).unwrap_or_default()
        ));
        json
    }

    /// Runs a command without recording it (on the mirrors too).
    pub fn raw(&mut self, command: &Command) -> Result<Response, stratum_runtime::StoreError> {
        self.seed += 1;
        let ctx = Context::new(self.now_ms, self.seed, self.config.clone());
        let response = execute(self.store.as_ref(), command, &ctx);
        let expected = response
            .as_ref()
            .map(Response::to_json)
            .map_err(|e| e.to_string());
        for (name, mirror) in &self.mirrors.stores {
            let mirrored = execute(mirror.as_ref(), command, &ctx);
            let got = mirrored
                .as_ref()
                .map(Response::to_json)
                .map_err(|e| e.to_string());
            assert_eq!(
                got, expected,
                "the {name} store answered {command:?} differently from the memory store"
            );
        }
        response
    }

    pub fn start(&mut self, flow: Option<&str>, inputs: Value) -> Value {
        let label = format!("start {} {}", flow.unwrap_or("(entry)"), inputs);
        self.run(
            &label,
            Command::Start {
                plan: self.plan.clone(),
                flow: flow.map(str::to_owned),
                inputs,
                started_by: self.identity.clone(),
            },
        )
    }

    pub fn done(&mut self, flow: &str, step: &str, result: Value) -> Value {
        self.run(
            &format!("step_done {flow} {step} {result}"),
            Command::StepDone {
                flow_id: flow.to_owned(),
                step_id: step.to_owned(),
                result,
                usage: None,
            },
        )
    }

    pub fn done_with_usage(
        &mut self,
        flow: &str,
        step: &str,
        result: Value,
        usage: Value,
    ) -> Value {
        self.run(
            &format!("step_done {flow} {step} {result} usage={usage}"),
            Command::StepDone {
                flow_id: flow.to_owned(),
                step_id: step.to_owned(),
                result,
                usage: Some(usage),
            },
        )
    }

    /// `stratum_parallel_done`.
    pub fn parallel_done(
        &mut self,
        flow: &str,
        step: &str,
        task_results: Value,
        merge_status: Value,
    ) -> Value {
        self.run(
            &format!("parallel_done {flow} {step} {task_results} merge={merge_status}"),
            Command::ParallelDone {
                flow_id: flow.to_owned(),
                step_id: step.to_owned(),
                task_results,
                merge_status,
            },
        )
    }

    /// `stratum_parallel_start`.
    pub fn parallel_start(&mut self, flow: &str, step: &str, base: Option<&str>) -> Value {
        self.run(
            &format!("parallel_start {flow} {step} base={base:?}"),
            Command::ParallelStart {
                flow_id: flow.to_owned(),
                step_id: step.to_owned(),
                base: base.map(str::to_owned),
            },
        )
    }

    /// One server task event.
    pub fn task(
        &mut self,
        flow: &str,
        step: &str,
        attempt: u32,
        task: &str,
        report: stratum_runtime::TaskReport,
    ) -> Value {
        self.run(
            &format!("task {flow} {step} attempt={attempt} {task} {report:?}"),
            Command::TaskUpdate {
                flow_id: flow.to_owned(),
                step_id: step.to_owned(),
                attempt,
                task_id: task.to_owned(),
                report,
            },
        )
    }

    /// `stratum_parallel_advance`.
    pub fn parallel_advance(
        &mut self,
        flow: &str,
        step: &str,
        merge_status: Option<Value>,
    ) -> Value {
        self.run(
            &format!("parallel_advance {flow} {step} merge={merge_status:?}"),
            Command::ParallelAdvance {
                flow_id: flow.to_owned(),
                step_id: step.to_owned(),
                merge_status,
            },
        )
    }

    /// `stratum_parallel_poll`.
    pub fn parallel_poll(&mut self, flow: &str, step: &str) -> Value {
        self.run(
            &format!("parallel_poll {flow} {step}"),
            Command::ParallelPoll {
                flow_id: flow.to_owned(),
                step_id: step.to_owned(),
            },
        )
    }

    pub fn skip(&mut self, flow: &str, step: &str, reason: &str) -> Value {
        self.run(
            &format!("skip_step {flow} {step} {reason:?}"),
            Command::SkipStep {
                flow_id: flow.to_owned(),
                step_id: step.to_owned(),
                reason: reason.to_owned(),
            },
        )
    }

    pub fn gate(
        &mut self,
        flow: &str,
        step: &str,
        outcome: &str,
        rationale: &str,
        by: &str,
    ) -> Value {
        self.run(
            &format!("gate_resolve {flow} {step} {outcome} {rationale:?} by {by}"),
            Command::GateResolve {
                flow_id: flow.to_owned(),
                step_id: step.to_owned(),
                outcome: outcome.to_owned(),
                rationale: rationale.to_owned(),
                resolved_by: by.to_owned(),
                actor: self.identity.clone(),
                via: None,
                round: None,
                value: None,
            },
        )
    }

    pub fn check_timeouts(&mut self, flow: &str) -> Value {
        self.run(
            &format!("check_timeouts {flow}"),
            Command::CheckTimeouts {
                flow_id: flow.to_owned(),
            },
        )
    }

    pub fn commit(&mut self, flow: &str, label: &str) -> Value {
        self.run(
            &format!("commit {flow} {label:?}"),
            Command::Commit {
                flow_id: flow.to_owned(),
                label: label.to_owned(),
            },
        )
    }

    pub fn revert(&mut self, flow: &str, label: &str) -> Value {
        self.run(
            &format!("revert {flow} {label:?}"),
            Command::Revert {
                flow_id: flow.to_owned(),
                label: label.to_owned(),
            },
        )
    }

    pub fn iteration_start(&mut self, flow: &str, step: &str) -> Value {
        self.run(
            &format!("iteration_start {flow} {step}"),
            Command::IterationStart {
                flow_id: flow.to_owned(),
                step_id: step.to_owned(),
            },
        )
    }

    pub fn iteration_report(&mut self, flow: &str, step: &str, result: Value) -> Value {
        self.run(
            &format!("iteration_report {flow} {step} {result}"),
            Command::IterationReport {
                flow_id: flow.to_owned(),
                step_id: step.to_owned(),
                result,
            },
        )
    }

    pub fn iteration_abort(&mut self, flow: &str, step: &str, reason: &str) -> Value {
        self.run(
            &format!("iteration_abort {flow} {step} {reason:?}"),
            Command::IterationAbort {
                flow_id: flow.to_owned(),
                step_id: step.to_owned(),
                reason: reason.to_owned(),
            },
        )
    }

    pub fn resume(&mut self, flow: &str) -> Value {
        self.run(
            &format!("resume {flow}"),
            Command::Resume {
                flow_id: flow.to_owned(),
            },
        )
    }

    pub fn audit(&mut self, flow: &str) -> Value {
        self.run(
            &format!("audit {flow}"),
            Command::Audit {
                flow_id: flow.to_owned(),
            },
        )
    }

    fn learn_ids(&mut self, value: &Value) {
        match value {
            Value::String(text)
                if FlowId::parse(text).is_some() && !self.names.contains_key(text) =>
            {
                self.ids.push(text.clone());
                self.names
                    .insert(text.clone(), format!("<flow-{}>", self.ids.len()));
            }
            Value::Array(items) => items.iter().for_each(|item| self.learn_ids(item)),
            Value::Object(map) => map.values().for_each(|item| self.learn_ids(item)),
            _ => {}
        }
    }

    fn normalize(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.normalize_text(text)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|item| self.normalize(item)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, item)| (key.clone(), self.normalize(item)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn normalize_text(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (id, name) in &self.names {
            text = text.replace(id, name);
        }
        text
    }
}

/// The stores a scenario mirrors its commands on, with the directory the SQLite one lives in.
#[derive(Default)]
pub struct Mirrors {
    stores: Vec<(&'static str, Arc<dyn Store>)>,
    _dir: Option<tempfile::TempDir>,
}

impl Mirrors {
    /// A fresh SQLite database and a fresh PostgreSQL schema.
    fn every_database() -> Mirrors {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let sqlite = stratum_store_sqlite::SqliteStore::open(dir.path().join("state.db"))
            .expect("the SQLite store opens");
        let url = postgres::database_url();
        let postgres = stratum_store_postgres::PostgresStore::connect(&url)
            .unwrap_or_else(|error| panic!("the PostgreSQL store opens: {error}"));
        Mirrors {
            stores: vec![
                ("SQLite", Arc::new(sqlite)),
                ("PostgreSQL", Arc::new(postgres)),
            ],
            _dir: Some(dir),
        }
    }
}

/// A response's `status`.
pub fn status(response: &Value) -> &str {
    response["status"]
        .as_str()
        .expect("every response has a status")
}

/// An error's `error_type` (asserting it is an error).
pub fn error_type(response: &Value) -> &str {
    assert_eq!(status(response), "error", "expected an error: {response}");
    response["error_type"]
        .as_str()
        .expect("an error has an error_type")
}
