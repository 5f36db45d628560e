//! The keys valid at each place of a spec, by version: the format's schema as data.
//!
//! `syntax::read` checks every mapping against one of these shapes, so that unknown keys get a
//! did-you-mean over exactly the keys valid there, keys of a later version get a version
//! diagnostic, and required keys are enforced per version. The language server completes keys
//! from the same tables, and `spec_schema` turns them into the published JSON Schema: each key
//! also says what its value is (as `read` reads it) and carries its one line of documentation.
//!
//! The shapes are statics, not constants, because they refer to each other (a function's
//! `budget` is a budget) and to themselves (a field definition's `items` is one).

use std::borrow::Cow;
use std::fmt;

use crate::syntax::ast::Version;

/// Whether a key must be present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Required {
    No,
    Always,
    /// Required by version 0.1 only (0.2 relaxed it).
    InV01,
}

/// What a key's value must be, as `read` reads it. A value `read` keeps as written (to be
/// checked by a later stage, or not at all) is `Any`, `List` or `Mapping`: the tables promise
/// only what the front end checks.
#[derive(Clone, Copy)]
pub enum Value {
    /// Anything.
    Any,
    /// A string.
    Text,
    /// A string that is not only whitespace.
    NonEmptyText,
    /// A workflow name: a lowercase letter, then lowercase letters, digits and hyphens.
    WorkflowName,
    /// One of these words.
    Choice(&'static [&'static str]),
    Boolean,
    /// A number, integer or not, of at least `min`.
    Number {
        min: Option<f64>,
    },
    /// A number above 0.
    Positive,
    /// A whole number from `min` to `max`.
    Integer {
        min: u64,
        max: Option<u64>,
    },
    /// A list of strings (names, expressions).
    Texts,
    /// A list of strings that are not only whitespace.
    NonEmptyTexts,
    /// A step id, or null (`~`).
    Route,
    /// A list of anything.
    List,
    /// A mapping of anything (a JSON Schema, a template).
    Mapping,
    /// A mapping with the keys of a shape.
    Shape(&'static Shape),
    /// A mapping of names (chosen by the author) to values of one kind.
    Named(&'static Value),
    /// A list of at least one value of one kind.
    NonEmptyList(&'static Value),
    /// How many tasks must complete: `all`, `any` or a whole number of at least 1.
    Require,
    /// A string, or a list of strings (`pre_merge_verify`: commands, or a `$`-reference).
    TextOrTexts,
    /// A field definition: a type text (`text: string`), or a mapping with the keys of a shape.
    FieldDef(&'static Shape),
}

/// Shapes refer to themselves, so a derived `Debug` would never end: a shape is shown by name.
impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Any => f.write_str("Any"),
            Value::Text => f.write_str("Text"),
            Value::NonEmptyText => f.write_str("NonEmptyText"),
            Value::WorkflowName => f.write_str("WorkflowName"),
            Value::Choice(words) => f.debug_tuple("Choice").field(words).finish(),
            Value::Boolean => f.write_str("Boolean"),
            Value::Number { min } => f.debug_struct("Number").field("min", min).finish(),
            Value::Positive => f.write_str("Positive"),
            Value::Integer { min, max } => f
                .debug_struct("Integer")
                .field("min", min)
                .field("max", max)
                .finish(),
            Value::Texts => f.write_str("Texts"),
            Value::NonEmptyTexts => f.write_str("NonEmptyTexts"),
            Value::Route => f.write_str("Route"),
            Value::List => f.write_str("List"),
            Value::Mapping => f.write_str("Mapping"),
            Value::Shape(shape) => write!(f, "Shape({})", shape.name),
            Value::Named(value) => f.debug_tuple("Named").field(value).finish(),
            Value::NonEmptyList(value) => f.debug_tuple("NonEmptyList").field(value).finish(),
            Value::Require => f.write_str("Require"),
            Value::TextOrTexts => f.write_str("TextOrTexts"),
            Value::FieldDef(shape) => write!(f, "FieldDef({})", shape.name),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Key {
    pub name: &'static str,
    /// The first version that has it.
    pub since: Version,
    pub required: Required,
    /// An example value for the "add `key: value`" help.
    pub placeholder: &'static str,
    /// What the value must be.
    pub value: Value,
    /// One line of documentation, from the format reference's field reference.
    pub doc: &'static str,
}

impl Key {
    const fn value(self, value: Value) -> Key {
        Key { value, ..self }
    }

    const fn doc(self, doc: &'static str) -> Key {
        Key { doc, ..self }
    }
}

const fn key(name: &'static str) -> Key {
    Key {
        name,
        since: Version::V0_1,
        required: Required::No,
        placeholder: "…",
        value: Value::Any,
        doc: "",
    }
}

const fn v02(name: &'static str) -> Key {
    Key {
        since: Version::V0_2,
        ..key(name)
    }
}

const fn v03(name: &'static str) -> Key {
    Key {
        since: Version::V0_3,
        ..key(name)
    }
}

const fn required(name: &'static str, placeholder: &'static str) -> Key {
    Key {
        required: Required::Always,
        placeholder,
        ..key(name)
    }
}

const fn required_in_v01(name: &'static str, placeholder: &'static str) -> Key {
    Key {
        required: Required::InV01,
        placeholder,
        ..key(name)
    }
}

/// The keys of one kind of mapping.
#[derive(Clone, Debug)]
pub struct Shape {
    /// A stable identifier: the shape's name in the JSON Schema's `$defs`.
    pub name: &'static str,
    /// What the mapping is, for messages: "function `classify`", "a budget".
    pub what: Cow<'static, str>,
    pub keys: &'static [Key],
    /// Unknown keys are warnings here (contract fields, where the reference accepts any key).
    pub unknown_is_warning: bool,
}

impl Shape {
    const fn new(name: &'static str, what: &'static str, keys: &'static [Key]) -> Shape {
        Shape::with(name, what, keys, false)
    }

    const fn with(
        name: &'static str,
        what: &'static str,
        keys: &'static [Key],
        unknown_is_warning: bool,
    ) -> Shape {
        Shape {
            name,
            what: Cow::Borrowed(what),
            keys,
            unknown_is_warning,
        }
    }

    /// The same shape, described as the definition it belongs to.
    pub fn named(&self, what: &str) -> Shape {
        Shape {
            what: Cow::Owned(what.to_owned()),
            ..self.clone()
        }
    }

    pub fn key(&self, name: &str) -> Option<&Key> {
        self.keys.iter().find(|key| key.name == name)
    }
}

/// The spec versions `read` accepts.
pub const VERSIONS: &[&str] = &["0.1", "0.2", "0.3"];

/// `count32`'s bound: the largest count a run keeps.
const U32_MAX: Option<u64> = Some(u32::MAX as u64);

/// A whole number of at least `min` (`read`'s `count`).
const fn count(min: u64) -> Value {
    Value::Integer { min, max: None }
}

/// A whole number of at least `min` that fits 32 bits (`read`'s `count32`).
const fn count32(min: u64) -> Value {
    Value::Integer { min, max: U32_MAX }
}

pub static ROOT: Shape = Shape::new(
    "spec",
    "the spec",
    &[
        // Not `required`: `read` reports a missing version itself (E0014), before the shape check.
        key("version")
            .value(Value::Choice(VERSIONS))
            .doc("Required. The spec version: `\"0.1\"`, `\"0.2\"` or `\"0.3\"`; 0.2 adds gates, inline steps, flow composition, policies, iterations, `skip_if`, routing and workflows; 0.3 adds decompose, parallel_dispatch and pipeline steps."),
        key("contracts")
            .value(Value::Named(&Value::Named(&Value::FieldDef(&CONTRACT_FIELD))))
            .doc("Named output schemas: each contract maps field names to `{type: <type>}` definitions."),
        key("functions")
            .value(Value::Named(&Value::Shape(&FUNCTION)))
            .doc("Reusable step definitions, referenced by function steps."),
        key("flows")
            .value(Value::Named(&Value::Shape(&FLOW)))
            .doc("Flow definitions: an input schema, an output contract and ordered steps."),
        v02("workflow")
            .value(Value::Shape(&WORKFLOW))
            .doc("(v0.2) Self-registering workflow declaration, so that `stratum_list_workflows` can discover the spec."),
    ],
);

/// A contract field definition: `{type: string, …}`.
pub static CONTRACT_FIELD: Shape =
    Shape::with("contractField", "a contract field", &FIELD_KEYS, true);

/// A function's or flow's input parameter: the same keys as a contract field, `type` optional.
/// An `items` definition has these keys too, in contracts as well (`sema::fields` reads it).
pub static INPUT_PARAM: Shape = Shape::with("inputParam", "an input parameter", &PARAM_KEYS, true);

static FIELD_KEYS: [Key; 11] = field_keys(
    required("type", "string")
        .value(Value::Text)
        .doc("Required. The field's type: `string`, `number`, `integer`, `boolean`, `array`, `object`, a contract name, or a typed form such as `float[0.0..1.0]`, `Address[]`, `string?` or `'a' | 'b'`."),
);

static PARAM_KEYS: [Key; 11] = field_keys(
    key("type")
        .value(Value::Text)
        .doc("The parameter's type: `string`, `number`, `integer`, `boolean`, `array`, `object`, a contract name, or a typed form such as `string?` or `Address[]`."),
);

/// The keys of a field definition, after its `type`.
const fn field_keys(ty: Key) -> [Key; 11] {
    [
        ty,
        key("values")
            .value(Value::List)
            .doc("The fixed values the field may take (an enum)."),
        key("items")
            .value(Value::FieldDef(&INPUT_PARAM))
            .doc("The type of an array's items, as a field definition."),
        key("optional")
            .value(Value::Boolean)
            .doc("`true` when the field may be left out of the object."),
        key("required")
            .value(Value::Boolean)
            .doc("`false` when the field may be left out of the object."),
        key("description")
            .value(Value::Text)
            .doc("What the field holds, for people and agents."),
        key("default").doc("The value used when the field is left out."),
        key("minimum")
            .value(Value::Number { min: None })
            .doc("The smallest number the field accepts."),
        key("maximum")
            .value(Value::Number { min: None })
            .doc("The largest number the field accepts."),
        key("min_length")
            .value(count(0))
            .doc("The fewest characters the string accepts."),
        key("max_length")
            .value(count(0))
            .doc("The most characters the string accepts."),
    ]
}

/// The modes of a function.
const MODES: &[&str] = &["infer", "compute", "gate"];

/// The policies of a gate step.
const POLICIES: &[&str] = &["gate", "flag", "skip"];

/// The types of a workflow input.
const WORKFLOW_TYPES: &[&str] = &["string", "boolean", "integer", "number", "array", "object"];

/// A function's or flow's `input`: parameters by name.
const PARAMS: Value = Value::Named(&Value::FieldDef(&INPUT_PARAM));

/// A list of expressions (`ensure`).
const EXPRESSIONS: Value = Value::Texts;

/// One expression (`skip_if`, `exit_criterion`, …).
const EXPRESSION: Value = Value::Text;

pub static FUNCTION: Shape = Shape::new(
    "function",
    "a function",
    &[
        required("mode", "infer")
            .value(Value::Choice(MODES))
            .doc("Required. `infer`, `compute` or `gate`."),
        required_in_v01("intent", "\"what the function does\"")
            .value(Value::NonEmptyText)
            .doc("What the function does; required for `infer` and `compute`."),
        required_in_v01("input", "{text: {type: string}}")
            .value(PARAMS)
            .doc("The function's parameters, `name: {type: …}`; required for `infer` and `compute`."),
        required_in_v01("output", "ContractName")
            .value(Value::Text)
            .doc("The contract the function's result must satisfy; required for `infer` and `compute`."),
        key("ensure")
            .value(EXPRESSIONS)
            .doc("Expressions over `result` that must all hold, else the step is retried (forbidden on gates)."),
        key("budget")
            .value(Value::Shape(&BUDGET))
            .doc("Time and cost limits: `ms`, `usd` (forbidden on gates)."),
        key("retries")
            .value(count32(1))
            .doc("Attempts allowed when an `ensure` fails; default 3 (forbidden on gates)."),
        key("model")
            .value(Value::Text)
            .doc("The model to run the function with, such as `\"gpt-4o\"`."),
        v02("timeout")
            .value(count(1))
            .doc("(v0.2, gates only) Seconds before a pending gate is killed."),
        v02("guardrails")
            .value(Value::NonEmptyTexts)
            .doc("(v0.2) Regular expressions the output must not match (forbidden on gates)."),
        v02("cache")
            .value(Value::Boolean)
            .doc("(v0.2) `true` to reuse a result for the same inputs."),
    ],
);

pub static BUDGET: Shape = Shape::new(
    "budget",
    "a budget",
    &[
        key("ms").value(count(1)).doc("Time limit in milliseconds."),
        key("usd")
            .value(Value::Number { min: Some(0.0) })
            .doc("Cost limit in US dollars."),
        key("max_agent_dispatches")
            .value(count(1))
            .doc("The most agent dispatches a whole run may make."),
        key("max_tokens")
            .value(count(1))
            .doc("The most tokens a whole run may use."),
    ],
);

pub static FLOW: Shape = Shape::new(
    "flow",
    "a flow",
    &[
        required("input", "{text: {type: string}}")
            .value(PARAMS)
            .doc("Required. The flow's input schema, `name: {type: …}`, read as `$.input.<name>`."),
        required_in_v01("output", "ContractName")
            .value(Value::Text)
            .doc("The flow's output contract; optional for gate-only flows."),
        key("budget")
            .value(Value::Shape(&BUDGET))
            .doc("Time and cost limits of the whole flow: `ms`, `usd`."),
        v02("max_rounds")
            .value(count32(1))
            .doc("(v0.2) The most gate revise cycles."),
        required("steps", "[{id: first, function: my_function}]")
            .value(Value::NonEmptyList(&Value::Shape(&STEP)))
            .doc("Required. The flow's ordered steps."),
    ],
);

pub static STEP: Shape = Shape::with(
    "step",
    "a step",
    &[
        required("id", "step_name")
            .value(Value::NonEmptyText)
            .doc("Required. The step's id, unique within the flow."),
        Key {
            required: Required::InV01,
            placeholder: "function_name",
            ..key("function")
        }
        .value(Value::Text)
        .doc("Runs a function definition (function step); exactly one of `function`, `intent` and `flow`."),
        v02("intent")
            .value(Value::NonEmptyText)
            .doc("(v0.2) What an inline step does; exactly one of `function`, `intent` and `flow`."),
        v02("flow")
            .value(Value::Text)
            .doc("(v0.2) Runs another flow (sub-flow step); exactly one of `function`, `intent` and `flow`."),
        v02("judge")
            .value(Value::Shape(&JUDGE))
            .doc("(v0.2) Makes the step a judge step: the `predicates` the server decides, with `stakes` and a `budget`."),
        Key {
            required: Required::InV01,
            placeholder: "{}",
            ..key("inputs")
        }
        .value(Value::Named(&Value::Any))
        .doc("The step's inputs: literals, `$.input.<field>` or `$.steps.<id>.output[.<field>]`; references add dependencies."),
        key("depends_on")
            .value(Value::Texts)
            .doc("Explicit dependencies: steps that must finish first."),
        key("output_schema")
            .value(Value::Mapping)
            .doc("A JSON Schema the step's result is validated against."),
        v02("agent")
            .value(Value::Text)
            .doc("(v0.2, inline steps) The agent the step is assigned to."),
        v02("ensure")
            .value(EXPRESSIONS)
            .doc("(v0.2, inline steps) Expressions over `result` that must all hold."),
        v02("retries")
            .value(count32(1))
            .doc("(v0.2, inline steps) Attempts allowed when an `ensure` fails; default 1."),
        v02("output_contract")
            .value(Value::Text)
            .doc("(v0.2, inline steps) The contract the step's result must satisfy."),
        v02("model")
            .value(Value::Text)
            .doc("(v0.2, inline steps) The model to run the step with."),
        v02("budget")
            .value(Value::Shape(&BUDGET))
            .doc("(v0.2, inline steps) Time and cost limits: `ms`, `usd`."),
        v02("on_approve")
            .value(Value::Route)
            .doc("(v0.2, gate steps) Required. The step to route to on approval, or `~` to complete the flow."),
        v02("on_revise")
            .value(Value::Route)
            .doc("(v0.2, gate steps) Required. The step to route back to on revision; must run before the gate."),
        v02("on_kill")
            .value(Value::Route)
            .doc("(v0.2, gate steps) Required. The step to route to when killed, or `~` to terminate the flow."),
        v02("policy")
            .value(Value::Choice(POLICIES))
            .doc("(v0.2, gate steps) Auto-resolution policy: `gate`, `flag` or `skip`."),
        v02("policy_fallback")
            .value(Value::Choice(POLICIES))
            .doc("(v0.2, gate steps) The policy to fall back to; requires `policy`."),
        v02("on_fail")
            .value(Value::Text)
            .doc("(v0.2) The step to route to when retries are exhausted; requires an `ensure`."),
        v02("next")
            .value(Value::Text)
            .doc("(v0.2) The step to go to on success instead of the next one."),
        v02("skip_if")
            .value(EXPRESSION)
            .doc("(v0.2) An expression: when true, the step is skipped (forbidden on gates)."),
        v02("skip_reason")
            .value(Value::Text)
            .doc("(v0.2) Why the step was skipped, recorded in the trace."),
        v02("max_iterations")
            .value(count32(1))
            .doc("(v0.2) The most times the step is run in a loop (forbidden on gates)."),
        v02("exit_criterion")
            .value(EXPRESSION)
            .doc("(v0.2) An expression over `result` that ends the iterations when true; requires `max_iterations`."),
        v02("score_expr")
            .value(EXPRESSION)
            .doc("(v0.2) A number expression scoring each iteration (`best_score` in `exit_criterion`); requires `max_iterations`."),
        v02("accumulate")
            .value(EXPRESSION)
            .doc("(v0.2) A list expression whose items are collected across iterations, deduplicated; requires `max_iterations`."),
        v02("accumulate_key")
            .value(EXPRESSION)
            .doc("(v0.2) An expression over `item` that deduplicates accumulated items; requires `accumulate`."),
        v02("guardrails")
            .value(Value::NonEmptyTexts)
            .doc("(v0.2) Regular expressions the output must not match."),
        v02("cache")
            .value(Value::Boolean)
            .doc("(v0.2) `true` to reuse a result for the same inputs."),
        v02("reasoning_template")
            .value(Value::Mapping)
            .doc("(v0.2) A reasoning certificate template for the step."),
        v03("type")
            .value(Value::Choice(STEP_TYPES))
            .doc("(v0.3) What the step is: `function`, `inline` or `flow` (which must agree with its `function`, `intent` or `flow`), or `decompose`, `parallel_dispatch` or `pipeline`."),
        v03("source")
            .value(Value::Text)
            .doc("(v0.3, parallel_dispatch and pipeline steps) Required there. The list that fans out: `$.input.<field>` or `$.steps.<id>.output.<field>`; one task (or pipeline item) per element."),
        v03("intent_template")
            .value(Value::NonEmptyText)
            .doc("(v0.3, parallel_dispatch steps) Required there. Each task's intent, with `{field}` placeholders filled from the task's element (`{task.field}` too); `{{` and `}}` for braces."),
        v03("max_concurrent")
            .value(count32(1))
            .doc("(v0.3, parallel_dispatch and pipeline steps) The most tasks that run at once; default 3."),
        v03("isolation")
            .value(Value::Choice(ISOLATIONS))
            .doc("(v0.3, parallel_dispatch and pipeline steps) `worktree` (the default: each task in its own git worktree) or `none` (tasks share the project root)."),
        v03("require")
            .value(Value::Require)
            .doc("(v0.3, parallel_dispatch and pipeline steps) How many tasks (pipeline: items) must complete: `all` (the default), `any` or a number."),
        v03("merge")
            .value(Value::Choice(MERGES))
            .doc("(v0.3, parallel_dispatch and pipeline steps) How the tasks' changes are merged: `sequential_apply` (the default: in task order) or `manual`."),
        v03("task_timeout")
            .value(count(1))
            .doc("(v0.3, parallel_dispatch and pipeline steps) Seconds each task may run; default 1800."),
        v03("task_reasoning_template")
            .value(Value::Mapping)
            .doc("(v0.3, parallel_dispatch and pipeline steps) A reasoning certificate template each task's answer must follow."),
        v03("capture_diff")
            .value(Value::Boolean)
            .doc("(v0.3, parallel_dispatch and pipeline steps) `true` to record each task's changes as a diff."),
        v03("defer_advance")
            .value(Value::Boolean)
            .doc("(v0.3, parallel_dispatch and pipeline steps) `true` to wait, once every task has finished, for the client to advance the flow (after its own merge)."),
        v03("pre_merge_verify")
            .value(Value::TextOrTexts)
            .doc("(v0.3, parallel_dispatch and pipeline steps) Commands each task's worktree must pass before its changes are merged, or a `$.input` reference to such a list."),
        v03("stages")
            .value(Value::NonEmptyList(&Value::Shape(&STAGE)))
            .doc("(v0.3, pipeline steps) Required there. The stages every item of `source` goes through, in order."),
    ],
    false,
);

/// The kinds a step's `type` names.
pub const STEP_TYPES: &[&str] = &[
    "function",
    "inline",
    "flow",
    "decompose",
    "parallel_dispatch",
    "pipeline",
];

/// Where the tasks of a parallel step run.
const ISOLATIONS: &[&str] = &["worktree", "branch", "none"];

/// How the tasks' changes are merged.
const MERGES: &[&str] = &["sequential_apply", "manual"];

/// One stage of a pipeline step.
pub static STAGE: Shape = Shape::new(
    "stage",
    "a pipeline stage",
    &[
        required("intent_template", "\"what to do with {item}\"")
            .value(Value::NonEmptyText)
            .doc("Required. The stage's intent for one item: `{item}`, `{item.field}`, `{prev}` (the previous stage's result), in a join `{prevs}`; `{{` and `}}` for braces."),
        key("agent")
            .value(Value::Text)
            .doc("The agent that runs the stage; default the step's."),
        key("task_reasoning_template")
            .value(Value::Mapping)
            .doc("A reasoning certificate template the stage's answer must follow."),
        key("task_timeout")
            .value(count(1))
            .doc("Seconds the stage may run for one item; default the step's."),
        key("when")
            .value(EXPRESSION)
            .doc("An expression over `item` (and `prev`, `prev_raw` after the first stage): when false, the stage is skipped for the item and passes the previous result on."),
        key("exit_when")
            .value(EXPRESSION)
            .doc("An expression over `item`, `result` (the answer as JSON text) and `result_raw`: when true, the item's later stages are skipped."),
        key("fanout")
            .value(Value::Shape(&FANOUT))
            .doc("Splits the item: the stage answers a list, and the stages up to the `join` run once per element (lanes)."),
        key("join")
            .value(Value::Boolean)
            .doc("`true` on the stage that gathers the lanes of the `fanout` before it (`{prevs}`)."),
    ],
);

/// A pipeline stage's `fanout`.
pub static FANOUT: Shape = Shape::new(
    "fanout",
    "a fanout",
    &[
        required("max", "4")
            .value(count32(1))
            .doc("Required. The most lanes the split may produce."),
        key("require").value(Value::Require).doc(
            "How many lanes must complete for the join: `all` (the default), `any` or a number.",
        ),
    ],
);

/// A judge step's `judge:` block.
pub static JUDGE: Shape = Shape::new(
    "judge",
    "a judge",
    &[
        required("predicates", "[{id: tests, type: deterministic, statement: \"file_exists('artifacts/log.txt')\"}]")
            .value(Value::NonEmptyList(&Value::Shape(&PREDICATE)))
            .doc("Required. What must hold, one predicate each; the step is met when every predicate is."),
        key("stakes")
            .value(Value::Choice(STAKES))
            .doc("How hard the judge looks: `cheap` (deterministic predicates only), `default` (an agent reads the evidence) or `paranoid` (a second, cold read)."),
        key("budget")
            .value(Value::Shape(&JUDGE_BUDGET))
            .doc("The judge's limits: `max_turns`, `max_dollars`, `max_wall_clock_s`."),
    ],
);

/// How much checking a judge spends.
const STAKES: &[&str] = &["cheap", "default", "paranoid"];

/// One predicate of a judge.
pub static PREDICATE: Shape = Shape::new(
    "predicate",
    "a judge predicate",
    &[
        required("id", "tests")
            .value(Value::NonEmptyText)
            .doc("Required. The predicate's id, unique within the judge."),
        required("type", "deterministic")
            .value(Value::Choice(PREDICATE_KINDS))
            .doc("Required. `deterministic` (an expression over the staged files), `verified` (an agent quotes the evidence) or `judged` (an agent weighs it)."),
        required("statement", "\"file_exists('artifacts/log.txt')\"")
            .value(Value::NonEmptyText)
            .doc("Required. What must hold: for `deterministic`, an expression using `file_exists`, `file_contains`, `len`, `min`, `max`, `bool`, `int` and `str` on paths under `artifacts/` or `modified/`; otherwise a sentence."),
        key("applied_gate")
            .value(Value::Integer { min: 1, max: Some(10) })
            .doc("The confidence, 1 to 10, a `met` verdict needs; default 7."),
    ],
);

/// How a judge decides a predicate.
const PREDICATE_KINDS: &[&str] = &["deterministic", "verified", "judged"];

/// A judge's `budget`.
pub static JUDGE_BUDGET: Shape = Shape::new(
    "judgeBudget",
    "a judge budget",
    &[
        key("max_turns")
            .value(count32(1))
            .doc("The most turns the judge may take."),
        key("max_dollars")
            .value(Value::Positive)
            .doc("The most the judge's agents may cost, in US dollars; more than 0."),
        key("max_wall_clock_s")
            .value(Value::Positive)
            .doc("The most seconds the judge may take, all tiers together; more than 0."),
    ],
);

/// A reasoning certificate template: the sections an agent's answer must have. Templates are
/// read as written and checked by the middle end (E0069, E0092), so this shape and
/// [`SECTION`] are not in [`SHAPES`]: they give the rules their keys and the language server
/// its completions and hovers.
pub static CERTIFICATE: Shape = Shape::new(
    "reasoningTemplate",
    "a reasoning template",
    &[
        key("sections")
            .value(Value::NonEmptyList(&Value::Shape(&SECTION)))
            .doc("The sections the answer must have, in order; default premises, trace and conclusion."),
        key("require_citations")
            .value(Value::Boolean)
            .doc("`true` to require premises numbered `[P1]`, `[P2]`… and a conclusion that cites them."),
    ],
);

/// One section of a reasoning certificate template.
pub static SECTION: Shape = Shape::new(
    "section",
    "a reasoning template section",
    &[
        required("id", "premises")
            .value(Value::NonEmptyText)
            .doc("Required. The section's id, unique within the template."),
        required("label", "Premises")
            .value(Value::NonEmptyText)
            .doc("Required. The heading the answer writes as `## <label>`; unique within the template."),
        required("description", "\"the facts, each citing file:line\"")
            .value(Value::NonEmptyText)
            .doc("Required. What the agent writes in the section."),
    ],
);

pub static WORKFLOW: Shape = Shape::new(
    "workflow",
    "the workflow",
    &[
        required("name", "my-workflow")
            .value(Value::WorkflowName)
            .doc("Required. The workflow's name: lowercase words joined by hyphens; a flow of that name is the entry flow."),
        required("description", "\"what the workflow does\"")
            .value(Value::NonEmptyText)
            .doc("Required. What the workflow does."),
        required("input", "{}")
            .value(Value::Named(&Value::Shape(&WORKFLOW_PARAM)))
            .doc("Required. The workflow's inputs; keys must match the entry flow's input keys."),
    ],
);

pub static WORKFLOW_PARAM: Shape = Shape::new(
    "workflowInput",
    "a workflow input",
    &[
        required("type", "string")
            .value(Value::Choice(WORKFLOW_TYPES))
            .doc("Required. `string`, `boolean`, `integer`, `number`, `array` or `object`."),
        key("required")
            .value(Value::Boolean)
            .doc("Whether the input must be given."),
        key("default").doc("The value used when the input is not given."),
    ],
);

/// Every shape, in the order of the format reference: the root first.
pub static SHAPES: [&Shape; 14] = [
    &ROOT,
    &CONTRACT_FIELD,
    &INPUT_PARAM,
    &FUNCTION,
    &BUDGET,
    &FLOW,
    &STEP,
    &STAGE,
    &FANOUT,
    &JUDGE,
    &PREDICATE,
    &JUDGE_BUDGET,
    &WORKFLOW,
    &WORKFLOW_PARAM,
];
