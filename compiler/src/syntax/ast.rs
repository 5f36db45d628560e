//! The typed AST of a `.stratum.yaml` spec, versions 0.1, 0.2 and 0.3.
//!
//! Built by `syntax::parse` from the YAML tree. Every definition, key and value carries its
//! [`Span`]. A [`Field`] records both where its key and where its value stand, so a later stage
//! can say "`retries` is not allowed here" on the key and "must be at least 1" on the value.
//! Optional parts are `Option`s: `None` means the spec did not write the key, or wrote it with a
//! value the front end already reported (so later stages stay silent about it).
//! Expression strings (`ensure`, `skip_if`, …) and step input strings are [`Text`]s: decoded
//! values with the map from offsets inside them back to the file.

use crate::source::Span;
use crate::syntax::scalar::ScalarMap;
use crate::syntax::tree::Node;

/// A value with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

/// A name the spec declares or refers to: a contract, function, flow, step or field name.
pub type Name = Spanned<String>;

/// A key the spec wrote and the value under it.
#[derive(Clone, Debug, PartialEq)]
pub struct Field<T> {
    /// The key's span.
    pub key: Span,
    /// The value's span.
    pub span: Span,
    pub value: T,
}

/// A string scalar whose inner offsets map back to the file, for expressions and `$`-references.
#[derive(Clone, Debug, PartialEq)]
pub struct Text {
    pub value: String,
    /// The whole scalar as written (quotes included).
    pub span: Span,
    pub map: ScalarMap,
}

impl Text {
    /// The span in the file of a byte range of the decoded value.
    pub fn span_of(&self, range: std::ops::Range<usize>) -> Span {
        Span::new(self.span.file, self.map.source_range(range))
    }
}

/// The whole spec.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ast {
    pub span: Span,
    pub version: Option<Field<Version>>,
    pub contracts: Vec<Contract>,
    pub functions: Vec<Function>,
    pub flows: Vec<Flow>,
    pub workflow: Option<Field<Workflow>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    V0_1,
    V0_2,
    V0_3,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V0_1 => "0.1",
            Version::V0_2 => "0.2",
            Version::V0_3 => "0.3",
        }
    }
}

/// A named record type: `contracts: {Name: {field: {type: …}}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Contract {
    pub name: Name,
    pub span: Span,
    pub fields: Vec<FieldDef>,
}

/// One field of a contract, or one parameter of a function's or flow's `input`.
///
/// `type` is kept as written (`string`, `number`, `string?`, `Address`, …); the middle end
/// gives it meaning. The other keys leave room for enums, items, optionality and ranges.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldDef {
    pub name: Name,
    pub span: Span,
    pub ty: Option<Field<String>>,
    pub values: Option<Field<Vec<Node>>>,
    pub items: Option<Field<Node>>,
    pub optional: Option<Field<bool>>,
    pub required: Option<Field<bool>>,
    pub description: Option<Field<String>>,
    pub default: Option<Field<Node>>,
    pub minimum: Option<Field<f64>>,
    pub maximum: Option<Field<f64>>,
    pub min_length: Option<Field<u64>>,
    pub max_length: Option<Field<u64>>,
}

impl FieldDef {
    /// A field with only its name: every key unwritten.
    pub fn new(name: Name, span: Span) -> FieldDef {
        FieldDef {
            name,
            span,
            ty: None,
            values: None,
            items: None,
            optional: None,
            required: None,
            description: None,
            default: None,
            minimum: None,
            maximum: None,
            min_length: None,
            max_length: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Infer,
    Compute,
    Gate,
}

/// A reusable step definition: `functions: {name: {mode: …}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: Name,
    pub span: Span,
    pub mode: Option<Field<Mode>>,
    pub intent: Option<Field<String>>,
    pub input: Option<Field<Vec<FieldDef>>>,
    /// The output contract's name.
    pub output: Option<Field<String>>,
    pub ensure: Option<Field<Vec<Text>>>,
    pub retries: Option<Field<u32>>,
    pub budget: Option<Field<Budget>>,
    pub model: Option<Field<String>>,
    /// Seconds before a pending gate is killed.
    pub timeout: Option<Field<u64>>,
    /// Regular expressions the output must not match.
    pub guardrails: Option<Field<Vec<Spanned<String>>>>,
    pub cache: Option<Field<bool>>,
    /// Every key written in the function's mapping, in order, known or not and whatever its
    /// value: the middle end tells a key that is absent from one whose value was rejected.
    pub keys: Vec<Name>,
}

/// Limits of a function, step or flow; the last two bound a whole run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budget {
    pub ms: Option<Field<u64>>,
    pub usd: Option<Field<f64>>,
    pub max_agent_dispatches: Option<Field<u64>>,
    pub max_tokens: Option<Field<u64>>,
}

/// A DAG of steps: `flows: {name: {input: …, steps: […]}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Flow {
    pub name: Name,
    pub span: Span,
    pub input: Option<Field<Vec<FieldDef>>>,
    /// The output contract's name.
    pub output: Option<Field<String>>,
    pub budget: Option<Field<Budget>>,
    pub max_rounds: Option<Field<u32>>,
    pub steps: Option<Field<Vec<Step>>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Gate,
    Flag,
    Skip,
}

/// One step of a flow. Which of `function`, `intent`, `flow` and `judge` is set decides its
/// kind; the front end keeps whatever was written and the middle end enforces the rules.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub span: Span,
    pub id: Option<Field<String>>,
    pub function: Option<Field<String>>,
    pub intent: Option<Field<String>>,
    pub flow: Option<Field<String>>,
    /// A judge step's configuration: predicates, stakes and budget.
    pub judge: Option<Field<Judge>>,
    pub agent: Option<Field<String>>,
    pub inputs: Option<Field<Vec<Input>>>,
    pub depends_on: Option<Field<Vec<Name>>>,
    /// A JSON Schema, as written.
    pub output_schema: Option<Field<Node>>,
    pub ensure: Option<Field<Vec<Text>>>,
    pub retries: Option<Field<u32>>,
    pub output_contract: Option<Field<String>>,
    pub model: Option<Field<String>>,
    pub budget: Option<Field<Budget>>,
    /// Gate routing: a step id, or `None` for `~` (complete, or terminate, the flow).
    pub on_approve: Option<Field<Option<String>>>,
    pub on_revise: Option<Field<Option<String>>>,
    pub on_kill: Option<Field<Option<String>>>,
    pub policy: Option<Field<Policy>>,
    pub policy_fallback: Option<Field<Policy>>,
    pub on_fail: Option<Field<String>>,
    pub next: Option<Field<String>>,
    pub skip_if: Option<Field<Text>>,
    pub skip_reason: Option<Field<String>>,
    pub max_iterations: Option<Field<u32>>,
    pub exit_criterion: Option<Field<Text>>,
    pub score_expr: Option<Field<Text>>,
    pub accumulate: Option<Field<Text>>,
    pub accumulate_key: Option<Field<Text>>,
    pub guardrails: Option<Field<Vec<Spanned<String>>>>,
    pub cache: Option<Field<bool>>,
    /// A reasoning certificate template, kept as written.
    pub reasoning_template: Option<Field<Node>>,
    /// Version 0.3: what the step is, as written (`type:`).
    pub step_type: Option<Field<StepType>>,
    /// Version 0.3: the list a parallel or pipeline step fans out over, a `$`-reference.
    pub source: Option<Field<Text>>,
    /// Version 0.3: a parallel step's per-task intent, with placeholders.
    pub intent_template: Option<Field<Text>>,
    pub max_concurrent: Option<Field<u32>>,
    pub isolation: Option<Field<Isolation>>,
    pub require: Option<Field<Require>>,
    pub merge: Option<Field<Merge>>,
    /// Seconds each task may run.
    pub task_timeout: Option<Field<u64>>,
    /// A reasoning certificate template for each task, kept as written.
    pub task_reasoning_template: Option<Field<Node>>,
    pub capture_diff: Option<Field<bool>>,
    pub defer_advance: Option<Field<bool>>,
    pub pre_merge_verify: Option<Field<PreMergeVerify>>,
    /// Version 0.3: a pipeline step's stages.
    pub stages: Option<Field<Vec<Stage>>>,
    /// Every key written in the step's mapping, in order, known or not and whatever its value:
    /// the middle end tells a key that is absent from one whose value was rejected.
    pub keys: Vec<Name>,
}

/// A judge step's `judge:` block.
#[derive(Clone, Debug, PartialEq)]
pub struct Judge {
    /// The block as written: the reference makes a step a judge step when it is truthy.
    pub written: Node,
    pub predicates: Option<Field<Vec<Predicate>>>,
    pub stakes: Option<Field<Stakes>>,
    pub budget: Option<Field<JudgeBudget>>,
}

/// One predicate a judge decides.
#[derive(Clone, Debug, PartialEq)]
pub struct Predicate {
    pub span: Span,
    pub id: Option<Field<String>>,
    pub kind: Option<Field<PredicateKind>>,
    /// An expression for a deterministic predicate, prose for the others.
    pub statement: Option<Field<Text>>,
    /// The confidence, 1 to 10, that a `met` verdict needs.
    pub applied_gate: Option<Field<u32>>,
}

/// How a judge decides a predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PredicateKind {
    /// An expression over the staged files, evaluated by the VM.
    Deterministic,
    /// An agent reads the evidence and quotes it.
    Verified,
    /// An agent weighs the evidence.
    Judged,
}

impl PredicateKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PredicateKind::Deterministic => "deterministic",
            PredicateKind::Verified => "verified",
            PredicateKind::Judged => "judged",
        }
    }
}

/// How much checking a judge spends: `cheap` runs deterministic predicates only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stakes {
    Cheap,
    Default,
    Paranoid,
}

impl Stakes {
    pub fn as_str(self) -> &'static str {
        match self {
            Stakes::Cheap => "cheap",
            Stakes::Default => "default",
            Stakes::Paranoid => "paranoid",
        }
    }
}

/// A judge's limits.
#[derive(Clone, Debug, PartialEq)]
pub struct JudgeBudget {
    pub max_turns: Option<Field<u32>>,
    pub max_dollars: Option<Field<f64>>,
    pub max_wall_clock_s: Option<Field<f64>>,
}

/// A step's `type` (version 0.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepType {
    Function,
    Inline,
    Flow,
    Decompose,
    ParallelDispatch,
    Pipeline,
}

impl StepType {
    /// The type as a spec writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            StepType::Function => "function",
            StepType::Inline => "inline",
            StepType::Flow => "flow",
            StepType::Decompose => "decompose",
            StepType::ParallelDispatch => "parallel_dispatch",
            StepType::Pipeline => "pipeline",
        }
    }
}

/// Where the tasks of a parallel or pipeline step run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    Worktree,
    Branch,
    None,
}

/// How many tasks (a pipeline's items, a fanout's lanes) must complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Require {
    All,
    Any,
    AtLeast(u32),
}

/// How the tasks' changes are merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    SequentialApply,
    Manual,
}

/// A parallel step's `pre_merge_verify`: commands, or a `$`-reference to a list of them.
#[derive(Clone, Debug, PartialEq)]
pub enum PreMergeVerify {
    Commands(Vec<Spanned<String>>),
    Reference(Text),
}

/// One stage of a pipeline step (version 0.3).
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub span: Span,
    pub intent_template: Option<Field<Text>>,
    pub agent: Option<Field<String>>,
    pub task_reasoning_template: Option<Field<Node>>,
    pub task_timeout: Option<Field<u64>>,
    pub when: Option<Field<Text>>,
    pub exit_when: Option<Field<Text>>,
    pub fanout: Option<Field<Fanout>>,
    pub join: Option<Field<bool>>,
}

/// A pipeline stage's `fanout`.
#[derive(Clone, Debug, PartialEq)]
pub struct Fanout {
    pub max: Option<Field<u32>>,
    pub require: Option<Field<Require>>,
}

/// One entry of a step's `inputs`.
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    pub name: Name,
    pub value: InputValue,
}

#[derive(Clone, Debug, PartialEq)]
pub enum InputValue {
    /// A string: a `$`-reference (`$.input.text`, `$.steps.s1.output.label`) or a literal.
    Text(Text),
    /// Any other literal, passed through as is (version 0.2).
    Literal(Node),
}

/// The `workflow:` block that registers a spec under a name.
#[derive(Clone, Debug, PartialEq)]
pub struct Workflow {
    pub name: Option<Field<String>>,
    pub description: Option<Field<String>>,
    pub input: Option<Field<Vec<WorkflowParam>>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct WorkflowParam {
    pub name: Name,
    pub span: Span,
    pub ty: Option<Field<ParamType>>,
    pub required: Option<Field<bool>>,
    pub default: Option<Field<Node>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamType {
    String,
    Boolean,
    Integer,
    Number,
    Array,
    Object,
}

impl ParamType {
    /// The type's name, as a spec writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Boolean => "boolean",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Array => "array",
            ParamType::Object => "object",
        }
    }
}
