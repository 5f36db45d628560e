//! The one diagnostic model of every stage and every output format.
//!
//! A [`Diagnostic`] is a stable [`Code`], a severity, a lowercase message, a primary label on the
//! exact span, secondary labels, an optional `help` and an optional machine-applicable [`Fix`].
//! Stages build them with the constructors beside their checks; the renderers in `crate::render`
//! turn the same struct into miette reports, one-line text, JSON, GitHub annotations and SARIF.
//! Invariant: a code never changes meaning once released, and every code has an explanation in
//! `compiler/src/diagnostic/explain/<CODE>.md`, printed by `stratumc explain`.

use crate::source::Span;
use std::fmt;
use stratum_grammar::suggest::distance as edit_distance;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

macro_rules! codes {
    ($($code:ident $severity:ident $slug:literal $summary:literal;)*) => {
        /// Every diagnostic code. `E` codes are errors, `W` codes warnings.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code { $($code,)* }

        impl Code {
            pub const ALL: &'static [Code] = &[$(Code::$code,)*];

            /// The code as written in output: `E0007`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$code => stringify!($code),)* }
            }

            /// The short kebab-case name, e.g. `duplicate-key`.
            pub fn slug(self) -> &'static str {
                match self { $(Code::$code => $slug,)* }
            }

            /// One line saying what the code reports.
            pub fn summary(self) -> &'static str {
                match self { $(Code::$code => $summary,)* }
            }

            pub fn severity(self) -> Severity {
                match self { $(Code::$code => Severity::$severity,)* }
            }

            /// The long explanation (Markdown) printed by `stratumc explain`.
            pub fn explanation(self) -> &'static str {
                match self {
                    $(Code::$code => include_str!(concat!("diagnostic/explain/", stringify!($code), ".md")),)*
                }
            }
        }
    };
}

codes! {
    E0001 Error "invalid-utf8" "the file is not valid UTF-8";
    E0002 Error "file-too-large" "the file is larger than the front end accepts";
    E0003 Error "control-character" "the file contains a NUL byte or another control character YAML forbids";
    E0004 Error "yaml-syntax" "the file is not well-formed YAML";
    E0005 Error "alias-expansion-limit" "YAML aliases expand to more nodes than the front end accepts";
    E0006 Error "nesting-too-deep" "mappings and sequences are nested deeper than the front end accepts";
    E0007 Error "duplicate-key" "a mapping has the same key twice";
    E0008 Error "empty-spec" "the file holds no YAML document";
    E0009 Error "top-level-not-mapping" "the top level of the spec is not a mapping";
    E0010 Error "multiple-documents" "the file holds more than one YAML document";
    E0011 Error "unknown-key" "a key that is not valid at this place in the spec";
    E0012 Error "wrong-type" "a value of the wrong type";
    E0013 Error "missing-field" "a required key is missing";
    E0014 Error "invalid-version" "`version` is missing or not a known spec version";
    // Retired with version 0.3 support: no known version is unsupported today. Kept so that the
    // number is never given another meaning.
    E0015 Error "unsupported-version" "the spec version is known but not supported yet";
    E0016 Error "requires-version-0.2" "a key or value that needs `version: \"0.2\"` in a version 0.1 spec";
    E0017 Error "duplicate-step-id" "two steps of one flow have the same id";
    E0018 Error "duplicate-workflow-name" "two specs checked together declare the same workflow name";
    E0019 Error "invalid-value" "a value that is not one of the allowed choices";
    E0020 Error "value-out-of-range" "a number below its minimum or above its maximum";
    E0021 Error "empty-value" "a string or list that must not be empty is empty";
    E0022 Error "invalid-workflow-name" "a workflow name that is not lowercase words joined by hyphens";
    E0023 Error "version-0.3-feature" "a key of spec version 0.3 in a version 0.1 or 0.2 spec";
    E0024 Error "unsupported-tag" "a YAML tag other than the core schema's";
    E0025 Error "expression-syntax" "an expression is not well-formed";
    E0026 Error "unsupported-expression" "an expression uses Python syntax outside the expression language";
    E0027 Error "dunder-name" "an expression contains `__`";
    E0028 Error "unknown-name" "an expression uses a name that is not defined where it stands";
    E0029 Error "unknown-field" "an expression reads a field that its record type does not have";
    E0030 Error "operand-types" "an operator or access applied to values of types it does not accept";
    E0031 Error "unknown-function" "an expression calls a function that is not a built-in";
    E0032 Error "call-arguments" "a built-in called with the wrong number or types of arguments";
    E0033 Error "unknown-method" "a method that the value's type does not have";
    E0034 Error "evaluation-failed" "an expression failed while it was evaluated";
    // Middle end: names, references, the DAG and flow composition (E0035–E0049).
    E0035 Error "undeclared-contract" "a contract name that the spec does not declare";
    E0036 Error "undeclared-function" "a step calls a function that the spec does not declare";
    E0037 Error "undeclared-flow" "a step runs a flow that the spec does not declare";
    E0038 Error "undeclared-step" "a step id in `depends_on` or a routing field that the flow does not have";
    E0039 Error "invalid-input-reference" "a step input that starts with `$` but is not a `$`-reference";
    E0040 Error "dependency-cycle" "steps of a flow that depend on each other in a cycle";
    E0041 Error "step-not-an-ancestor" "an expression reads the output of a step that may not have run";
    E0042 Error "recursive-flow" "a flow that runs itself, directly or through other flows";
    E0043 Error "unknown-flow-input" "a flow step passes an input that the flow it runs does not declare";
    E0044 Error "missing-flow-input" "a flow step leaves out an input that the flow it runs requires";
    E0045 Error "accumulate-not-list" "an `accumulate` expression whose value is not a list";
    E0046 Error "score-not-number" "a `score_expr` whose value is not a number";
    E0047 Error "enum-literal-not-a-value" "a comparison with a literal that is not among an enum's values";
    E0048 Error "input-without-field" "`$.input` with no field after it";
    E0049 Error "unsupported-builtin" "an expression calls a built-in of the reference runtime that is not supported";

    // Middle end: format rules of steps, functions, gates, routing and workflows (E0050–E0069).
    E0050 Error "missing-step-kind" "a step has none of `function`, `intent` and `flow`, so nothing says what it runs";
    E0051 Error "conflicting-step-kinds" "a step has more than one of `function`, `intent`, `flow` and `judge`";
    E0052 Error "not-on-gate-function" "a gate function has `ensure`, `budget`, `retries` or `guardrails`";
    E0053 Error "not-on-gate-step" "a gate step has a key that only steps producing output can have";
    E0054 Error "missing-gate-route" "a gate step does not declare `on_approve` or `on_kill`, or has no `on_revise` target";
    E0055 Error "revise-target-not-earlier" "a gate's `on_revise` names the gate itself or a step that runs after it";
    E0056 Error "gate-key-on-non-gate-step" "gate routing or a gate policy on a step that is not a gate";
    E0057 Error "policy-fallback-without-policy" "a gate step has `policy_fallback` but no `policy`";
    E0058 Error "not-on-flow-step" "a flow step has a key that belongs on the steps of the sub-flow";
    E0059 Error "not-on-function-step" "a function step sets a key that belongs on its function";
    E0060 Error "on-fail-never-triggers" "a step has `on_fail` but nothing that can fail";
    E0061 Error "iteration-key-without-max-iterations" "`exit_criterion`, `score_expr` or `accumulate` on a step without `max_iterations`";
    E0062 Error "accumulate-key-without-accumulate" "`accumulate_key` on a step without `accumulate`";
    E0063 Error "cache-not-allowed" "`cache: true` where a cached result cannot be reused";
    E0064 Error "invalid-guardrail" "a guardrail that is not a valid regular expression";
    E0065 Error "no-entry-flow" "the `workflow` block names no flow and the spec has several";
    E0066 Error "workflow-input-mismatch" "the workflow's input keys differ from its entry flow's";
    E0067 Error "workflow-default-type" "a workflow input's `default` is not of its `type`";
    E0068 Error "workflow-input-type-mismatch" "a workflow input's type disagrees with the entry flow's input of the same name";
    E0069 Error "invalid-reasoning-template" "a `reasoning_template` whose `sections` are empty or malformed";

    // Middle end: contract types and JSON Schemas (E0070–E0079).
    E0070 Error "unknown-type" "a field's `type` is not a built-in type, a contract or a well-formed type";
    E0071 Error "invalid-output-schema" "a step's `output_schema` is not a valid JSON Schema (draft 2020-12)";
    E0072 Error "invalid-range" "a numeric or length range that is empty, misplaced or written twice";
    E0073 Error "recursive-contract" "a contract contains itself through its fields";
    E0074 Error "values-items-mismatch" "`values` or `items` that do not fit the field's type";
    E0075 Error "contract-too-large" "a contract's schema, nested contracts inlined, is larger or deeper than accepted";
    E0076 Error "input-type-mismatch" "a function or flow step passes an input of another type than the function or flow declares";
    E0077 Error "flow-output-mismatch" "a step whose output can end the flow produces another contract than the flow's `output`";
    E0078 Error "literal-input-without-type" "a number, boolean, list or mapping passed as a step input that nothing declares a type for";

    // Middle end: version 0.3 steps — decompose, parallel_dispatch, pipeline (E0080–E0099).
    E0080 Error "step-type-mismatch" "a step's `type` disagrees with the key that says what it runs";
    E0081 Error "not-on-step-kind" "a key on a kind of step that does not read it (a fan-out key elsewhere, a per-step key on a fan-out)";
    E0082 Error "invalid-source" "a fan-out step's `source` that is not a `$.input` or `$.steps` reference";
    E0083 Error "source-not-a-list" "a fan-out step's `source` whose value is not a list";
    E0084 Error "template-syntax" "an intent template that does not follow the template grammar";
    E0085 Error "unknown-template-field" "a template placeholder that reads a field its value does not have";
    E0086 Error "unbound-placeholder" "a template placeholder whose name is not bound where the template stands";
    E0087 Error "impossible-require" "a `require` that no run can meet";
    E0088 Error "fanout-shape" "a pipeline whose `fanout` and `join` stages do not form one region";
    E0089 Error "unsupported-isolation" "`isolation: branch`, which the runtime does not support";
    E0090 Error "invalid-judge" "a judge with two predicates of one id, or `stakes: cheap` with predicates only an agent decides";
    E0091 Error "invalid-judge-statement" "a deterministic judge statement that calls what the first tier lacks or reads outside the staged files";
    E0092 Error "ambiguous-reasoning-template" "a reasoning template with keys nothing reads, or sections that cannot be told apart";
    E0093 Error "reasoning-template-on-judge" "a `reasoning_template` on a judge step, whose verdict never has its sections";
    E0094 Error "invalid-pre-merge-verify" "a `pre_merge_verify` reference whose value is not a list of commands";

    W0001 Warning "unknown-contract-field-key" "a key in a contract field definition that nothing reads";
    // Retired: reported as the error E0047 since the comparison cannot hold. Kept so that the
    // number is never given another meaning and `--allow W0002` still parses.
    W0002 Warning "enum-literal-never-matches" "retired: a literal outside an enum's values is now the error E0047";
    W0003 Warning "none-comparison-never-true" "a comparison with `None` of a value that is never `None`";
    W0004 Warning "constant-expression" "an expression whose value does not depend on its inputs";
    // Middle end: format rules (W0005–W0009).
    W0005 Warning "timeout-without-effect" "`timeout` on an infer or compute function, where nothing reads it";
    W0006 Warning "default-never-applies" "a workflow input with `required: true` and a `default`";
    W0007 Warning "null-gate-route-on-non-gate-step" "`on_approve: ~`, `on_revise: ~` or `on_kill: ~` on a step that is not a gate";
    W0008 Warning "skip-reason-without-skip-if" "`skip_reason` on a step without `skip_if`";
    W0009 Warning "routes-to-itself" "`on_fail` or `next` naming the step itself, or a gate's `on_approve` naming the gate";

    // Middle end: unused definitions, unreachable steps, unproduced outputs (W0010–W0019).
    W0010 Warning "unused-contract" "a contract that nothing uses";
    W0011 Warning "unused-function" "a function that no step calls";
    W0012 Warning "unreachable-step" "a step that no route of its flow reaches";
    W0013 Warning "flow-output-not-produced" "a flow's declared output contract that none of its steps produces";

    // Middle end: format rules, continued (W0020–W0029).
    W0020 Warning "max-rounds-without-gate" "`max_rounds` on a flow that has no gate step";
    W0021 Warning "unknown-function-input" "a function step passes an input that its function does not declare";
    W0022 Warning "unknown-agent" "an `agent` that is neither `claude` nor `codex` (with an optional `:profile`) nor a `$`-reference";

    // Middle end: version 0.3 steps (W0030–W0039).
    W0030 Warning "key-without-effect" "a fan-out key that the step's other settings make useless";
    W0031 Warning "defer-advance-without-client-merge" "`defer_advance` on a step that leaves the client nothing to merge before it advances";

}

impl Code {
    /// Parses `E0007`, `e0007` or a slug such as `duplicate-key`.
    pub fn parse(text: &str) -> Option<Code> {
        Code::ALL
            .iter()
            .copied()
            .find(|code| code.as_str().eq_ignore_ascii_case(text) || code.slug() == text)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A span with a few words on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// A text replacement that resolves a diagnostic on its own, with no judgment needed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fix {
    /// What applying it does, e.g. "replace `tpye` with `type`".
    pub message: String,
    pub edits: Vec<Edit>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    pub span: Span,
    pub replacement: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub primary: Label,
    pub secondary: Vec<Label>,
    pub help: Option<String>,
    pub fix: Option<Fix>,
}

impl Diagnostic {
    /// A diagnostic with the code's own severity, its message and the primary label.
    pub fn new(
        code: Code,
        message: impl Into<String>,
        span: Span,
        label: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            code,
            severity: code.severity(),
            message: shown(message.into()),
            primary: Label {
                span,
                message: shown(label.into()),
            },
            secondary: Vec::new(),
            help: None,
            fix: None,
        }
    }

    pub fn secondary(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label {
            span,
            message: shown(label.into()),
        });
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(shown(help.into()));
        self
    }

    /// Attaches a one-edit machine-applicable fix.
    pub fn fix(
        mut self,
        message: impl Into<String>,
        span: Span,
        replacement: impl Into<String>,
    ) -> Diagnostic {
        self.fix = Some(Fix {
            message: shown(message.into()),
            edits: vec![Edit {
                span,
                replacement: replacement.into(),
            }],
        });
        self
    }

    pub fn primary_span(&self) -> Span {
        self.primary.span
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The order of every output: by file, position, then code.
    pub fn sort_key(&self) -> (Span, Code) {
        (self.primary.span, self.code)
    }
}

/// `text` with every character a terminal would obey rather than show (control characters,
/// bidirectional overrides; see [`stratum_grammar::print::visible`]) written as an escape:
/// messages quote names from the spec, and a name such as `"a\e[2J"` in a double-quoted YAML
/// key must not clear the screen of the person reading the report (or move their cursor, or
/// print itself backwards). The one place every renderer and the language server read from.
fn shown(text: String) -> String {
    match stratum_grammar::print::visible(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(escaped) => escaped,
    }
}

/// What the user asked of particular warnings: `deny` reports them as errors, `allow` drops
/// them. Errors are never changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Levels {
    pub deny: Vec<Code>,
    pub allow: Vec<Code>,
}

impl Levels {
    pub fn apply(&self, diagnostics: &mut Vec<Diagnostic>) {
        diagnostics.retain(|d| !(d.severity == Severity::Warning && self.allow.contains(&d.code)));
        for diagnostic in diagnostics.iter_mut() {
            if diagnostic.severity == Severity::Warning && self.deny.contains(&diagnostic.code) {
                diagnostic.severity = Severity::Error;
            }
        }
    }
}

/// Sorts diagnostics into their output order (file, position, code) and drops exact repeats.
pub fn sort(diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.sort_by(|a, b| {
        a.sort_key()
            .cmp(&b.sort_key())
            .then_with(|| a.message.cmp(&b.message))
    });
    diagnostics.dedup();
}

/// The known name closest to `name`, if one is close enough to be a plausible typo.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let name_lower = name.to_lowercase();
    let name_len = name.chars().count();
    let max_distance = match name_len {
        0..=2 => 1,
        3..=5 => 2,
        _ => 3,
    };
    let candidates: Vec<&str> = candidates
        .into_iter()
        .filter(|candidate| *candidate != name)
        .collect();
    let closest = candidates
        .iter()
        .filter_map(|&candidate| {
            // Lengths that differ by more than the allowance cannot be close; skipping them
            // keeps a megabyte-long key from costing a megabyte of work per candidate.
            if name_len.abs_diff(candidate.chars().count()) > max_distance {
                return None;
            }
            let distance = edit_distance(&name_lower, &candidate.to_lowercase());
            (distance <= max_distance).then_some((distance, candidate))
        })
        .min_by_key(|&(distance, candidate)| (distance, candidate))
        .map(|(_, candidate)| candidate);
    // An abbreviation (`str` for `string`) or an extension (`inference` for `infer`) is far in
    // edits but plainly meant; accept it when it is unambiguous.
    closest.or_else(|| {
        let mut related = candidates.iter().copied().filter(|candidate| {
            let candidate = candidate.to_lowercase();
            name_lower.len() >= 3
                && candidate.len() >= 3
                && (candidate.starts_with(&name_lower) || name_lower.starts_with(&candidate))
        });
        let first = related.next()?;
        related.next().is_none().then_some(first)
    })
}

/// `a`, `b` and `c` — names in backticks for a help line.
pub fn backticked<S: AsRef<str>>(names: &[S]) -> String {
    let quoted: Vec<String> = names
        .iter()
        .map(|name| format!("`{}`", name.as_ref()))
        .collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names() {
        let keys = ["type", "values", "items"];
        assert_eq!(did_you_mean("tpye", keys), Some("type"));
        assert_eq!(did_you_mean("value", keys), Some("values"));
        assert_eq!(did_you_mean("colour", keys), None);
        assert_eq!(did_you_mean("Type", keys), Some("type"));
        assert_eq!(did_you_mean("str", ["string", "number"]), Some("string"));
        assert_eq!(
            did_you_mean("inference", ["infer", "compute"]),
            Some("infer")
        );
        assert_eq!(did_you_mean("max", ["max_rounds", "max_tokens"]), None);
    }

    #[test]
    fn edit_distance_counts_transpositions_once() {
        assert_eq!(edit_distance("tpye", "type"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("depends_on", "depend_on"), 1);
    }

    #[test]
    fn every_code_has_an_explanation_that_names_it() {
        for code in Code::ALL {
            let text = code.explanation();
            assert!(
                text.starts_with(&format!("# {code}: ")),
                "{code}'s explanation must start with `# {code}: <title>`"
            );
            assert!(
                text.contains("```yaml"),
                "{code}'s explanation must show an example"
            );
            assert_eq!(Code::parse(code.as_str()), Some(*code));
            assert_eq!(Code::parse(code.slug()), Some(*code));
        }
    }

    #[test]
    fn backticked_lists_read_as_prose() {
        assert_eq!(backticked(&["a"]), "`a`");
        assert_eq!(backticked(&["a", "b", "c"]), "`a`, `b` and `c`");
    }
}
