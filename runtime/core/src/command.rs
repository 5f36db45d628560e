//! What the agent (or an operator) asks of the runtime: one [`Command`] per MCP tool that
//! touches a flow, and the [`Context`] it runs in (the time and the entropy the pure core may
//! not fetch for itself).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use stratum_compiler::plan::Plan;

/// One request.
#[derive(Clone, Debug)]
pub enum Command {
    /// Start a flow of a compiled plan (`stratum_plan` after compiling). `flow: None` starts
    /// the plan's entry flow.
    Start {
        plan: Arc<Plan>,
        flow: Option<String>,
        inputs: Value,
        /// The identity the server vouches for of whoever starts it (an access token's name
        /// over HTTP, `os:<user>` on stdio and from the CLI), kept on the flow: a gate whose
        /// rules forbid self-approval refuses its approval. `None` when no one is known.
        started_by: Option<String>,
    },
    StepDone {
        flow_id: String,
        step_id: String,
        result: Value,
        usage: Option<Value>,
    },
    /// An attempt at the current step that produced no result to check (the unattended
    /// driver's agent answered with no JSON object, crashed or ran out of time): a failed
    /// attempt with these violations, retried or routed as any other.
    StepFailed {
        flow_id: String,
        step_id: String,
        violations: Vec<String>,
        usage: Option<Value>,
    },
    SkipStep {
        flow_id: String,
        step_id: String,
        reason: String,
    },
    GateResolve {
        flow_id: String,
        step_id: String,
        outcome: String,
        rationale: String,
        /// Who the caller says decided: `human`, `agent` or `system`.
        resolved_by: String,
        /// Who the server knows decided, recorded beside `resolved_by` in the gate's audit
        /// record: the name of the access token of an HTTP request (`stratum-mcp serve` and
        /// its console), or the operating-system user (`os:<user>`) of the operator CLI and of
        /// a form answered in a stdio server's client. `None` for an agent's own call over
        /// stdio, which no gate with approval rules accepts.
        actor: Option<String>,
        /// How a person's decision reached the server, when the server knows: through the
        /// agent's client asking them (`elicitation`, with the client's name and version).
        via: Option<Via>,
        /// The round the decision is for, when the caller showed the person one round's gate
        /// (a form): refused once the flow is in another round, so that a decision never
        /// resolves a later round's gate.
        round: Option<u32>,
        /// The value the person approves with, when the gate's function declares `output`:
        /// checked against that contract, it becomes the step's output (the person's typed
        /// decision). Not read for revise and kill.
        value: Option<Value>,
    },
    CheckTimeouts {
        flow_id: String,
    },
    Commit {
        flow_id: String,
        label: String,
    },
    Revert {
        flow_id: String,
        label: String,
    },
    IterationStart {
        flow_id: String,
        step_id: String,
    },
    IterationReport {
        flow_id: String,
        step_id: String,
        result: Value,
    },
    IterationAbort {
        flow_id: String,
        step_id: String,
        reason: String,
    },
    Resume {
        flow_id: String,
    },
    Audit {
        flow_id: String,
    },
    /// `stratum_parallel_done`: the agent ran a fan-out step's tasks (consumer dispatch) and
    /// reports them, `[{task_id, status, result}]`, with how it merged them.
    ParallelDone {
        flow_id: String,
        step_id: String,
        task_results: Value,
        merge_status: Value,
    },
    /// The server takes a fan-out step's tasks of the current attempt to run them itself
    /// (`stratum_parallel_start`, the unattended driver). `base`: the commit task worktrees
    /// start from. Idempotent per attempt.
    ParallelStart {
        flow_id: String,
        step_id: String,
        base: Option<String>,
    },
    /// What became of one task the server runs, for attempt `attempt` of the step.
    TaskUpdate {
        flow_id: String,
        step_id: String,
        attempt: u32,
        task_id: String,
        report: TaskReport,
    },
    /// Every task is settled: evaluate the step (`stratum_parallel_advance`, or the server's
    /// executor once it merged). `merge_status` is the consumer's, for a deferred advance.
    ParallelAdvance {
        flow_id: String,
        step_id: String,
        merge_status: Option<Value>,
    },
    /// The server's verdict on a judge step (`stratum_judge` staged the artifacts and ran
    /// the tiers): `met` completes the step, `not_met` fails the attempt, `ambiguous` waits
    /// for a person. The only way a judge step completes.
    JudgeVerdict {
        flow_id: String,
        step_id: String,
        verdict: Value,
    },
    /// `stratum_parallel_poll`: where a fan-out step's tasks stand. Reads only.
    ParallelPoll {
        flow_id: String,
        step_id: String,
    },
}

/// How a person's decision reached the server: the channel (`elicitation`: the agent's client
/// asked them in its own UI, without the model in between) and the client as it declared itself
/// (`claude-code 2.1.76`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Via {
    pub channel: String,
    pub client: Option<String>,
}

/// One event in the life of a task the server runs.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskReport {
    /// Its agent was launched (`run_id`: the agent run's row).
    Running { run_id: Option<String> },
    /// Its agent answered: the result is checked against the task contract.
    Finished {
        result: Value,
        diff: Option<String>,
        usage: Option<Value>,
    },
    /// It produced nothing usable, ran out of time, or failed its pre-merge check (`bounce`).
    Failed {
        violations: Vec<String>,
        bounce: Option<Value>,
        diff: Option<String>,
        usage: Option<Value>,
    },
    /// Ended, or never started, because the step could no longer use it.
    Cancelled { reason: String },
    /// Its patch is about to be applied to the flow's working tree.
    Merging,
    /// Its patch is in the flow's working tree.
    Merged,
    /// Its patch conflicts with what was merged before it.
    Conflict { files: Vec<String>, message: String },
}

impl Command {
    /// The flow the command acts on, as sent (none for `Start`).
    pub fn flow_id(&self) -> Option<&str> {
        match self {
            Command::Start { .. } => None,
            Command::StepDone { flow_id, .. }
            | Command::StepFailed { flow_id, .. }
            | Command::SkipStep { flow_id, .. }
            | Command::GateResolve { flow_id, .. }
            | Command::CheckTimeouts { flow_id }
            | Command::Commit { flow_id, .. }
            | Command::Revert { flow_id, .. }
            | Command::IterationStart { flow_id, .. }
            | Command::IterationReport { flow_id, .. }
            | Command::IterationAbort { flow_id, .. }
            | Command::Resume { flow_id }
            | Command::Audit { flow_id }
            | Command::ParallelDone { flow_id, .. }
            | Command::ParallelStart { flow_id, .. }
            | Command::TaskUpdate { flow_id, .. }
            | Command::ParallelAdvance { flow_id, .. }
            | Command::JudgeVerdict { flow_id, .. }
            | Command::ParallelPoll { flow_id, .. } => Some(flow_id),
        }
    }

    /// The command's name, as metrics and logs label it (`step_done`, `gate_resolve`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Start { .. } => "start",
            Command::StepDone { .. } => "step_done",
            Command::StepFailed { .. } => "step_failed",
            Command::SkipStep { .. } => "skip_step",
            Command::GateResolve { .. } => "gate_resolve",
            Command::CheckTimeouts { .. } => "check_timeouts",
            Command::Commit { .. } => "commit",
            Command::Revert { .. } => "revert",
            Command::IterationStart { .. } => "iteration_start",
            Command::IterationReport { .. } => "iteration_report",
            Command::IterationAbort { .. } => "iteration_abort",
            Command::Resume { .. } => "resume",
            Command::Audit { .. } => "audit",
            Command::ParallelDone { .. } => "parallel_done",
            Command::ParallelStart { .. } => "parallel_start",
            Command::TaskUpdate { .. } => "task_update",
            Command::ParallelAdvance { .. } => "parallel_advance",
            Command::JudgeVerdict { .. } => "judge_verdict",
            Command::ParallelPoll { .. } => "parallel_poll",
        }
    }

    /// Whether the command only reads.
    pub fn is_read_only(&self) -> bool {
        matches!(self, Command::Audit { .. } | Command::ParallelPoll { .. })
    }

    /// Whether the command is refused on a flow another driver holds the lease of. A gate
    /// decision is not (a person decides while the driver waits), nor are gate timeouts.
    pub fn is_fenced(&self) -> bool {
        !matches!(
            self,
            Command::Start { .. }
                | Command::GateResolve { .. }
                | Command::CheckTimeouts { .. }
                | Command::Audit { .. }
                | Command::ParallelPoll { .. }
        )
    }
}

/// What a command may know of the world: the time, entropy for new ids, and the settings.
#[derive(Clone, Debug)]
pub struct Context {
    /// Wall-clock milliseconds since the Unix epoch.
    pub now_ms: u64,
    /// New flow ids are derived from it (see [`FlowId::derive`](crate::FlowId::derive)).
    pub seed: u128,
    pub config: Arc<Config>,
    /// The unattended driver sending the command (its lease owner id); `None` for an agent,
    /// a person or an operator. See [`crate::store::drives`].
    pub driver: Option<String>,
}

impl Context {
    pub fn new(now_ms: u64, seed: u128, config: Arc<Config>) -> Context {
        Context {
            now_ms,
            seed,
            config,
            driver: None,
        }
    }

    /// The same context, sent by the driver `owner`.
    pub fn driven_by(mut self, owner: impl Into<String>) -> Context {
        self.driver = Some(owner.into());
        self
    }
}

/// The runtime's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// How often routing may enter one step again in one round, when its flow sets no
    /// `max_rounds`.
    pub max_reentries: u32,
    /// Bounds of every expression evaluation (and the root `file_exists` / `file_contains`
    /// are confined to).
    pub limits: stratum_grammar::Limits,
    /// Prices of models, for `usage` given in tokens.
    pub pricing: Pricing,
    /// Bounds of one guardrail match.
    pub guardrail_backtrack_limit: usize,
    /// The web console's address (`http://127.0.0.1:7777`), which an `await_gate` dispatch
    /// links people to; `None` when no console is known.
    pub console_url: Option<String>,
    /// Who may decide a gate through the MCP tools (the server's config file).
    pub gate_policy: GatePolicy,
    /// Whether a tool call that brings a flow to a gate asks the person in the client's form
    /// at once, when the client shows forms (the config file's `gates.ask_when_reached`); else
    /// only `stratum_gate_wait` asks.
    pub ask_when_reached: bool,
    /// Approval rules by gate function name (the server's config file, `[gates.functions]`):
    /// enforced on every decision, whichever way it arrives.
    pub gate_rules: BTreeMap<String, GateRule>,
    /// The most bytes of diff a fan-out step's tasks may hold together
    /// ([`crate::state::MAX_STEP_DIFF_BYTES`] by default).
    pub max_step_diff_bytes: u64,
}

/// Who may decide a gate through the MCP tools. The console and the operator CLI, where the
/// server knows who decides, are not affected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GatePolicy {
    /// The agent may call `stratum_gate_resolve` (the reference's behaviour).
    #[default]
    AgentMayResolve,
    /// Only a person decides: an agent's `stratum_gate_resolve` is refused, and the agent
    /// hands the decision over with `stratum_gate_wait` (the person answers in the client's
    /// form) or asks the person to use the console or the CLI.
    PersonOnly,
}

impl GatePolicy {
    /// The policy as the config file names it.
    pub fn parse(name: &str) -> Option<GatePolicy> {
        match name {
            "agent-may-resolve" => Some(GatePolicy::AgentMayResolve),
            "person-only" => Some(GatePolicy::PersonOnly),
            _ => None,
        }
    }
}

/// Who decides a gate of one function and how many must agree. A gate whose function has a
/// rule takes decisions only from a verified identity (see `GateResolve::actor`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateRule {
    /// How many distinct identities must approve (at least 1): each approval before the last
    /// is recorded and the gate keeps waiting.
    pub min_approvals: u32,
    /// The identities that may decide the gate at all (approve, revise or kill); `None`: any
    /// verified identity.
    pub approvers: Option<Vec<String>>,
    /// Whether the identity that started the flow may approve it. Revise and kill stay open
    /// to it: sending work back or stopping it is not approving it.
    pub self_approval: bool,
}

impl Default for GateRule {
    fn default() -> GateRule {
        GateRule {
            min_approvals: 1,
            approvers: None,
            self_approval: true,
        }
    }
}

impl GateRule {
    /// Whether `identity` may decide gates under this rule at all.
    pub fn admits(&self, identity: &str) -> bool {
        self.approvers
            .as_ref()
            .is_none_or(|approvers| approvers.iter().any(|name| name == identity))
    }
}

/// The bound on routing back into a step when a flow sets no `max_rounds`.
pub const DEFAULT_MAX_REENTRIES: u32 = 100;

impl Default for Config {
    fn default() -> Config {
        Config {
            max_reentries: DEFAULT_MAX_REENTRIES,
            // The YAML of `vocabulary_compliance`'s vocabulary files is the compiler's to read.
            limits: stratum_grammar::Limits::default()
                .with_vocabulary_reader(stratum_compiler::vocabulary::READER),
            pricing: Pricing::default(),
            guardrail_backtrack_limit: 1_000_000,
            console_url: None,
            gate_policy: GatePolicy::default(),
            ask_when_reached: true,
            gate_rules: BTreeMap::new(),
            max_step_diff_bytes: crate::state::MAX_STEP_DIFF_BYTES,
        }
    }
}

impl Config {
    /// Confines the file built-ins to `root`.
    pub fn with_root(mut self, root: impl Into<PathBuf>) -> Config {
        self.limits.root = Some(root.into());
        self
    }

    /// Who may decide a gate through the MCP tools.
    pub fn with_gate_policy(mut self, policy: GatePolicy) -> Config {
        self.gate_policy = policy;
        self
    }

    /// Whether the call that brings a flow to a gate asks the person (see
    /// [`Config::ask_when_reached`]).
    pub fn with_ask_when_reached(mut self, ask: bool) -> Config {
        self.ask_when_reached = ask;
        self
    }

    /// The approval rules of gate functions, by function name.
    pub fn with_gate_rules(mut self, rules: BTreeMap<String, GateRule>) -> Config {
        self.gate_rules = rules;
        self
    }

    /// Links `await_gate` dispatches to the web console at `url` (none: no link).
    pub fn with_console_url(mut self, url: Option<String>) -> Config {
        self.console_url = url
            .map(|url| url.trim().trim_end_matches('/').to_owned())
            .filter(|url| !url.is_empty());
        self
    }
}

/// Dollars per million tokens, by model name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pricing {
    pub models: BTreeMap<String, ModelPrice>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelPrice {
    /// Dollars per million input tokens.
    pub input: f64,
    /// Dollars per million output tokens.
    pub output: f64,
}

impl Default for Pricing {
    /// Public list prices (dollars per million tokens) of the models agents commonly name.
    fn default() -> Pricing {
        let models = [
            ("claude-opus-4", 15.0, 75.0),
            ("claude-sonnet-4", 3.0, 15.0),
            ("claude-haiku-4", 1.0, 5.0),
            ("gpt-5", 1.25, 10.0),
            ("gpt-5-mini", 0.25, 2.0),
        ];
        Pricing {
            models: models
                .into_iter()
                .map(|(name, input, output)| (name.to_owned(), ModelPrice { input, output }))
                .collect(),
        }
    }
}

impl Pricing {
    /// The price of `model`: an exact name, else the longest listed name it starts with
    /// (`claude-sonnet-4-6` is priced as `claude-sonnet-4`).
    pub fn price(&self, model: &str) -> Option<ModelPrice> {
        if let Some(price) = self.models.get(model) {
            return Some(*price);
        }
        self.models
            .iter()
            .filter(|(name, _)| model.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| *price)
    }

    /// A table read from JSON (`{"models": {"name": {"input": 3.0, "output": 15.0}}}`) laid
    /// over the defaults: a user's prices win.
    pub fn with_overrides(mut self, json: &str) -> Result<Pricing, serde_json::Error> {
        let overrides: Pricing = serde_json::from_str(json)?;
        self.models.extend(overrides.models);
        Ok(self)
    }
}
