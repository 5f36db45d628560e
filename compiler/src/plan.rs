//! The execution plan: what `stratumc build` writes and the runtime executes.
//!
//! A [`Plan`] holds the flows of one spec, each lowered to a linear program: its steps in the
//! deterministic topological order, each an instruction whose successors are explicit
//! [`Target`]s (a step index, the end of the flow or its kill), whose inputs are bindings to
//! interned slot paths or constants, and whose expressions are bytecode with constants folded.
//! Every step and expression keeps a [`Source`] entry, so a run-time error can point at the
//! spec line. Plans are serialised as JSON; the format is versioned by [`FORMAT`] and
//! published as a JSON Schema (`compiler/schemas/plan.schema.json`).
//!
//! Invariants: the same spec gives the same plan, byte for byte (every collection is a `Vec`
//! in a fixed order, and `serde_json` maps are sorted); every index in a plan that [`load`]
//! accepted points at something that exists, so the runtime may follow it without checking.

pub mod load;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use stratum_grammar::Program;

pub use load::{LoadError, load, nesting_beyond};

/// The plan format this compiler writes and this runtime reads. It changes whenever a plan
/// written by one could be misread by the other. A new built-in (`NoFileConflicts`,
/// `PlanCompletion`) or op does not change it: a runtime that predates it refuses a plan that
/// uses it as damaged, naming the unknown variant and the compiler that wrote it, and reads
/// every other plan as before; a new format would also refuse the plans stored for flows
/// already running.
pub const FORMAT: u32 = 2;

/// The formats [`load`] reads: format 2 added the version 0.3 step kinds (decompose,
/// parallel_dispatch, pipeline) and changed nothing else, so a format 1 plan means the same
/// under it, and flows stored by an older runtime keep running.
pub const READABLE_FORMATS: [u32; 2] = [1, 2];

/// The name this compiler writes into [`CompilerInfo`].
pub const COMPILER_NAME: &str = "stratumc";

/// One spec, lowered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Always [`FORMAT`] when written by this compiler.
    pub format: u32,
    pub compiler: CompilerInfo,
    pub spec: SpecInfo,
    /// SHA-256 of the plan's compact JSON with this field empty: catches a damaged file.
    pub checksum: String,
    pub workflow: Option<WorkflowInfo>,
    /// The flow a run starts with when none is named: the one `--flow` selected, else the
    /// workflow's entry flow, else the spec's only flow.
    pub entry: Option<u32>,
    /// The contracts the flows' steps and outputs name, in declaration order.
    pub contracts: Vec<Contract>,
    /// Interned field paths: bindings name a path by its index here.
    pub paths: Vec<Vec<String>>,
    /// The flows, in declaration order (with `--flow`: that flow and the flows it runs).
    pub flows: Vec<Flow>,
}

/// Which compiler wrote a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompilerInfo {
    pub name: String,
    pub version: String,
}

/// The spec a plan was built from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecInfo {
    /// The spec's path as it was given to the compiler.
    pub path: String,
    /// `sha256:` and the SHA-256 of the spec's bytes, in hex.
    pub hash: String,
    /// The spec's `version`: `0.1`, `0.2` or `0.3`.
    pub version: String,
}

/// The `workflow:` block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowInfo {
    pub name: String,
    pub description: Option<String>,
    pub input: Vec<WorkflowParam>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowParam {
    pub name: String,
    /// `string`, `boolean`, `integer`, `number`, `array` or `object`; `None` when unwritten.
    #[serde(rename = "type")]
    pub ty: Option<String>,
    pub required: bool,
    pub default: Option<Value>,
}

/// A contract: what a step's result must be.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    pub name: String,
    /// The first 12 hex digits of the SHA-256 of the canonical schema, as the reference
    /// computes it.
    pub hash: String,
    /// JSON Schema draft 2020-12.
    pub schema: Value,
}

/// One flow: a linear program of steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    pub name: String,
    /// JSON Schema of the flow's input (an object).
    pub input: Value,
    /// The contract the flow's result must satisfy (an index into [`Plan::contracts`]).
    pub output: Option<u32>,
    pub budget: Option<Budget>,
    /// How many gate revisions a run may go through.
    pub max_rounds: Option<u32>,
    /// Where a run starts: step 0, or the end for a flow without steps.
    pub start: Target,
    /// Step indices by DAG level: the steps of one level depend on none of each other and
    /// may be dispatched together.
    pub levels: Vec<Vec<u32>>,
    pub steps: Vec<Step>,
    pub source: Source,
}

/// Where control goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// The step at this index of the flow.
    Step(u32),
    /// The flow completes.
    End,
    /// The flow is killed.
    Kill,
}

/// One instruction of a flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub id: String,
    pub action: Action,
    pub inputs: Vec<Input>,
    /// What the result must satisfy, checked in this order: `schema`, then `contract`.
    pub output: Output,
    /// Checked on every result, in order, after the output's schema and contract.
    pub ensure: Vec<Expression>,
    /// The step's `retries`, or its function's, with the reference's defaults written out (3
    /// for a function step, 1 otherwise): how the runtime bounds the attempts at a result.
    pub retries: u32,
    pub budget: Option<Budget>,
    /// Regular expressions the serialised output must not match.
    pub guardrails: Vec<String>,
    pub cache: bool,
    pub skip: Option<Skip>,
    pub iteration: Option<Iteration>,
    /// A reasoning certificate template, as written.
    pub reasoning_template: Option<Value>,
    /// Where to go when the step succeeds: the next step in order, its `next`, or the end. A
    /// skipped step goes on in order whatever its `next` says: a skip is not a success.
    pub next: Target,
    /// Where to go when its attempts are exhausted; `None`: the flow fails.
    pub on_fail: Option<Target>,
    /// The length of its longest chain of dependencies.
    pub level: u32,
    /// The steps it depends on (through `depends_on`, an input or its `skip_if`), sorted.
    pub depends_on: Vec<u32>,
    pub source: Source,
}

/// What a step does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// An agent runs an `infer` or `compute` function.
    Function {
        function: String,
        mode: FunctionMode,
        intent: Option<String>,
        agent: Option<String>,
        model: Option<String>,
    },
    /// An agent carries out the step's own intent.
    Inline {
        intent: String,
        agent: Option<String>,
        model: Option<String>,
    },
    /// Runs another flow of the plan (an index into [`Plan::flows`]) with the step's inputs.
    Flow { flow: u32 },
    /// Waits for approval, revision or a kill.
    Gate {
        function: String,
        on_approve: Target,
        on_revise: Target,
        on_kill: Target,
        policy: Option<Policy>,
        policy_fallback: Option<Policy>,
        /// Seconds before a pending gate is killed.
        timeout: Option<u64>,
    },
    /// The server's judge decides the step's predicates.
    Judge {
        predicates: Vec<JudgePredicate>,
        stakes: Stakes,
        budget: JudgeBudget,
    },
    /// An agent splits the work into a task graph (the step's output contract), checked by
    /// the step's `ensure`s.
    Decompose {
        intent: String,
        agent: Option<String>,
        model: Option<String>,
    },
    /// One task per element of `source`, each with its own intent from `template`.
    Parallel {
        fan_out: FanOut,
        template: Template,
        /// The contract every task's result must satisfy (an index into
        /// [`Plan::contracts`]): the step's `output_contract`.
        task_contract: Option<u32>,
    },
    /// Every element of `source` through `stages`, in order; the tasks of one item depend on
    /// its previous stage.
    Pipeline { fan_out: FanOut, stages: Vec<Stage> },
}

/// One predicate of a judge step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgePredicate {
    pub id: String,
    pub kind: PredicateKind,
    /// As written: an expression for a deterministic predicate, prose for the others.
    pub statement: String,
    /// The confidence, 1 to 10, a `met` verdict needs.
    pub applied_gate: u32,
    /// A deterministic predicate's statement, compiled; its file built-ins read the judge's
    /// staging directory.
    pub check: Option<Expression>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PredicateKind {
    Deterministic,
    Verified,
    Judged,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stakes {
    Cheap,
    Default,
    Paranoid,
}

/// A judge's limits; `None` where the spec sets none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeBudget {
    pub max_turns: Option<u32>,
    pub max_dollars: Option<f64>,
    pub max_wall_clock_s: Option<f64>,
}

/// The reference's default for `applied_gate`.
pub const DEFAULT_APPLIED_GATE: u32 = 7;

/// What parallel and pipeline steps share: where the tasks come from and how they run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FanOut {
    /// The list to fan out over.
    pub source: Binding,
    /// The step's agent, the default of its tasks.
    pub agent: Option<String>,
    pub max_concurrent: u32,
    pub isolation: Isolation,
    pub require: Require,
    pub merge: Merge,
    /// Seconds a task may run.
    pub task_timeout: u64,
    /// A reasoning certificate template each task's answer must follow, as written.
    pub task_reasoning_template: Option<Value>,
    pub capture_diff: bool,
    pub defer_advance: bool,
    pub pre_merge_verify: Option<Verify>,
}

/// The reference's defaults, written out.
pub const DEFAULT_MAX_CONCURRENT: u32 = 3;
pub const DEFAULT_TASK_TIMEOUT: u64 = 1800;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    Worktree,
    None,
}

/// How many tasks (a pipeline: items; a fanout: lanes) must complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Require {
    All,
    Any,
    AtLeast(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Merge {
    SequentialApply,
    Manual,
}

/// The commands a task's worktree must pass before its changes are merged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Verify {
    Commands(Vec<String>),
    /// A list of commands read when the step starts.
    Binding(Binding),
}

/// One stage of a pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    pub template: Template,
    pub agent: Option<String>,
    pub task_timeout: Option<u64>,
    pub task_reasoning_template: Option<Value>,
    /// Runs before the stage; false: the stage is skipped for the item.
    pub when: Option<Expression>,
    /// Runs after the stage; true: the item's later stages are skipped.
    pub exit_when: Option<Expression>,
    pub fanout: Option<Fanout>,
    pub join: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fanout {
    pub max: u32,
    pub require: Require,
}

/// An intent template, compiled: text and the values to insert, so the runtime renders it
/// without parsing. A string value is inserted as it is, anything else as compact JSON; a
/// value missing at run time fails the task, it never reaches an agent unrendered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    pub parts: Vec<TemplatePart>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TemplatePart {
    Text(String),
    /// A value bound where the template runs, then the fields of `path` (an index into
    /// [`Plan::paths`]).
    Value {
        root: TemplateRoot,
        path: u32,
    },
}

/// What a placeholder starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemplateRoot {
    /// The task's element: a parallel task's element, a pipeline's item, a lane's element.
    Item,
    /// A lane's or join's item.
    Source,
    /// The task's id.
    TaskId,
    /// The result of the task's single dependency, as text (JSON unless it is a string).
    Prev,
    /// The same result as a value.
    PrevRaw,
    /// A join's lane results, as JSON text.
    Prevs,
    /// The same as a list.
    PrevsRaw,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FunctionMode {
    Infer,
    Compute,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    Gate,
    Flag,
    Skip,
}

/// One input of a step, resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub name: String,
    pub value: Binding,
}

/// Where an input's value comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Binding {
    /// The flow's input, then the fields of `path` (an index into [`Plan::paths`]).
    Input { path: u32 },
    /// The output of the flow's step `step`, then the fields of `path`.
    Step { step: u32, path: u32 },
    /// A constant.
    Const(Value),
}

/// What a step's result must satisfy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// An index into [`Plan::contracts`]. For a gate step: the contract of the value the
    /// person decides (its function's `output`); the step's output is then that decision.
    pub contract: Option<u32>,
    /// The step's `output_schema`, as written.
    pub schema: Option<Value>,
}

/// A compiled expression and where it was written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expression {
    pub program: Program,
    pub source: Source,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Skip {
    /// When it holds, the step is skipped and its output is `None`.
    pub condition: Expression,
    pub reason: Option<String>,
}

/// How a step repeats.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Iteration {
    pub max_iterations: Option<u32>,
    pub exit_criterion: Option<Expression>,
    pub score: Option<Expression>,
    pub accumulate: Option<Expression>,
    pub accumulate_key: Option<Expression>,
}

/// Limits of a step or flow.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    pub ms: Option<u64>,
    pub usd: Option<f64>,
    pub max_agent_dispatches: Option<u64>,
    pub max_tokens: Option<u64>,
}

/// Where something was written in the spec: byte offsets, and the 1-based line and column
/// (in characters) of its start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub start: u32,
    pub end: u32,
    pub line: u32,
    pub column: u32,
}

impl Plan {
    /// The plan as JSON, compact or indented; the same plan always gives the same bytes.
    pub fn to_json(&self, pretty: bool) -> String {
        let written = if pretty {
            serde_json::to_string_pretty(self)
        } else {
            serde_json::to_string(self)
        };
        // Serialising plain data with string keys cannot fail.
        let mut text = written.unwrap_or_default();
        text.push('\n');
        text
    }

    /// The checksum the plan should carry: over its compact JSON with the checksum empty, so
    /// that indentation does not change it. The checksum is set aside while it is computed,
    /// rather than the plan copied.
    pub fn compute_checksum(&mut self) -> String {
        let checksum = std::mem::take(&mut self.checksum);
        let mut hasher = HashWriter(Sha256::new());
        // Writing into a hasher cannot fail, nor can serialising plain data.
        let _ = serde_json::to_writer(&mut hasher, self);
        let _ = std::io::Write::write_all(&mut hasher, b"\n");
        self.checksum = checksum;
        hex_digest(hasher.0)
    }

    /// Sets the checksum: the last step of building a plan.
    pub fn seal(&mut self) {
        self.checksum = self.compute_checksum();
    }

    /// Whether the plan was built from exactly these spec bytes.
    pub fn is_built_from(&self, spec: &[u8]) -> bool {
        self.spec.hash == sha256(spec)
    }

    /// The flow named `name`.
    pub fn flow(&self, name: &str) -> Option<&Flow> {
        self.flows.iter().find(|flow| flow.name == name)
    }
}

/// `sha256:` and the hex SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    hex_digest(Sha256::new_with_prefix(bytes))
}

fn hex_digest(hasher: Sha256) -> String {
    use std::fmt::Write;
    let digest = hasher.finalize();
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in digest {
        let _ = write!(text, "{byte:02x}");
    }
    text
}

/// Feeds what is written into a SHA-256, so that a plan is hashed without being held as text.
struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
