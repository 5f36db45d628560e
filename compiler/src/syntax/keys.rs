//! The keys valid at each place of a spec, by version: the format's schema as data.
//!
//! `syntax::read` checks every mapping against one of these shapes, so that unknown keys get a
//! did-you-mean over exactly the keys valid there, keys of a later version get a version
//! diagnostic, and required keys are enforced per version. The language server completes keys
//! from the same tables.

use std::borrow::Cow;

use crate::syntax::ast::Version;

/// Whether a key must be present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Required {
    No,
    Always,
    /// Required by version 0.1 only (0.2 relaxed it).
    InV01,
}

#[derive(Clone, Copy, Debug)]
pub struct Key {
    pub name: &'static str,
    /// The first version that has it.
    pub since: Version,
    pub required: Required,
    /// An example value for the "add `key: value`" help.
    pub placeholder: &'static str,
}

const fn key(name: &'static str) -> Key {
    Key {
        name,
        since: Version::V0_1,
        required: Required::No,
        placeholder: "…",
    }
}

const fn v02(name: &'static str) -> Key {
    Key {
        since: Version::V0_2,
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
    /// What the mapping is, for messages: "function `classify`", "a budget".
    pub what: Cow<'static, str>,
    pub keys: &'static [Key],
    /// Unknown keys are warnings here (contract fields, where the reference accepts any key).
    pub unknown_is_warning: bool,
    /// Version 0.3 step keys get their own diagnostic here.
    pub has_v03_keys: bool,
}

impl Shape {
    const fn new(what: &'static str, keys: &'static [Key]) -> Shape {
        Shape::with(what, keys, false, false)
    }

    const fn with(
        what: &'static str,
        keys: &'static [Key],
        unknown_is_warning: bool,
        has_v03_keys: bool,
    ) -> Shape {
        Shape {
            what: Cow::Borrowed(what),
            keys,
            unknown_is_warning,
            has_v03_keys,
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

pub const ROOT: Shape = Shape::new(
    "the spec",
    &[
        key("version"),
        key("contracts"),
        key("functions"),
        key("flows"),
        v02("workflow"),
    ],
);

/// A contract field definition: `{type: string, …}`.
pub const CONTRACT_FIELD: Shape = Shape::with("a contract field", FIELD_KEYS, true, false);

/// A function's or flow's input parameter: the same keys as a contract field, `type` optional.
pub const INPUT_PARAM: Shape = Shape::with("an input parameter", PARAM_KEYS, true, false);

const FIELD_KEYS: &[Key] = &[
    required("type", "string"),
    key("values"),
    key("items"),
    key("optional"),
    key("required"),
    key("description"),
    key("default"),
    key("minimum"),
    key("maximum"),
    key("min_length"),
    key("max_length"),
];

const PARAM_KEYS: &[Key] = &[
    key("type"),
    key("values"),
    key("items"),
    key("optional"),
    key("required"),
    key("description"),
    key("default"),
    key("minimum"),
    key("maximum"),
    key("min_length"),
    key("max_length"),
];

pub const FUNCTION: Shape = Shape::new(
    "a function",
    &[
        required("mode", "infer"),
        required_in_v01("intent", "\"what the function does\""),
        required_in_v01("input", "{text: {type: string}}"),
        required_in_v01("output", "ContractName"),
        key("ensure"),
        key("budget"),
        key("retries"),
        key("model"),
        v02("timeout"),
        v02("guardrails"),
        v02("cache"),
    ],
);

pub const BUDGET: Shape = Shape::new(
    "a budget",
    &[
        key("ms"),
        key("usd"),
        key("max_agent_dispatches"),
        key("max_tokens"),
    ],
);

pub const FLOW: Shape = Shape::new(
    "a flow",
    &[
        required("input", "{text: {type: string}}"),
        required_in_v01("output", "ContractName"),
        key("budget"),
        v02("max_rounds"),
        required("steps", "[{id: first, function: my_function}]"),
    ],
);

pub const STEP: Shape = Shape::with(
    "a step",
    &[
        required("id", "step_name"),
        Key {
            required: Required::InV01,
            placeholder: "function_name",
            ..key("function")
        },
        v02("intent"),
        v02("flow"),
        v02("judge"),
        Key {
            required: Required::InV01,
            placeholder: "{}",
            ..key("inputs")
        },
        key("depends_on"),
        key("output_schema"),
        v02("agent"),
        v02("ensure"),
        v02("retries"),
        v02("output_contract"),
        v02("model"),
        v02("budget"),
        v02("on_approve"),
        v02("on_revise"),
        v02("on_kill"),
        v02("policy"),
        v02("policy_fallback"),
        v02("on_fail"),
        v02("next"),
        v02("skip_if"),
        v02("skip_reason"),
        v02("max_iterations"),
        v02("exit_criterion"),
        v02("score_expr"),
        v02("accumulate"),
        v02("accumulate_key"),
        v02("guardrails"),
        v02("cache"),
        v02("reasoning_template"),
    ],
    false,
    true,
);

/// Step keys of version 0.3 (decompose, parallel_dispatch and pipeline steps).
pub const V03_STEP_KEYS: &[&str] = &[
    "type",
    "source",
    "max_concurrent",
    "isolation",
    "require",
    "merge",
    "intent_template",
    "stages",
    "task_timeout",
    "task_reasoning_template",
    "capture_diff",
    "defer_advance",
    "pre_merge_verify",
];

pub const WORKFLOW: Shape = Shape::new(
    "the workflow",
    &[
        required("name", "my-workflow"),
        required("description", "\"what the workflow does\""),
        required("input", "{}"),
    ],
);

pub const WORKFLOW_PARAM: Shape = Shape::new(
    "a workflow input",
    &[required("type", "string"), key("required"), key("default")],
);
