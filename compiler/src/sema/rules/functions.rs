//! The rules of one function definition: what a gate function may not carry, what an infer or
//! compute function must declare, `timeout` and `cache` by mode, and guardrail patterns.
//!
//! Takes one [`Function`]; pushes diagnostics. A function whose `mode` is missing or was
//! rejected gets none of these checks: every one of them depends on the mode.

use crate::diagnostic::{Code, Diagnostic};
use crate::sema::rules::{is_v02, is_written, removal};
use crate::source::Span;
use crate::syntax::ast::{Field, Function, Mode, Spanned, Version};
use crate::syntax::keys;

pub(super) fn check(
    function: &Function,
    version: Option<Version>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let Some(mode) = function.mode.as_ref().map(|mode| mode.value) else {
        return;
    };
    if mode == Mode::Gate {
        let forbidden = [
            ("ensure", function.ensure.as_ref().map(spans)),
            ("budget", function.budget.as_ref().map(spans)),
            ("retries", function.retries.as_ref().map(spans)),
            ("guardrails", function.guardrails.as_ref().map(spans)),
        ];
        for (key, written) in forbidden {
            if let Some((key_span, value_span)) = written {
                diagnostics.push(not_on_gate_function(function, key, key_span, value_span));
            }
        }
    } else {
        if is_v02(version) {
            // In a version 0.1 spec the front end reports `timeout` as a 0.2 key already.
            if let Some(timeout) = &function.timeout {
                diagnostics.push(timeout_without_effect(function, timeout));
            }
            for key in ["intent", "input", "output"] {
                if !is_written(&function.keys, key, &keys::FUNCTION) {
                    diagnostics.push(missing_function_field(function, key));
                }
            }
        }
        for pattern in function.guardrails.iter().flat_map(|g| &g.value) {
            if let Some(diagnostic) = invalid_guardrail(pattern) {
                diagnostics.push(diagnostic);
            }
        }
    }
    if mode != Mode::Compute
        && let Some(cache) = function.cache.as_ref().filter(|cache| cache.value)
    {
        diagnostics.push(cache_on_non_compute_function(function, mode, cache));
    }
}

fn spans<T>(field: &Field<T>) -> (Span, Span) {
    (field.key, field.span)
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Infer => "infer",
        Mode::Compute => "compute",
        Mode::Gate => "gate",
    }
}

/// E0052 `not-on-gate-function`: a gate function with `ensure`, `budget`, `retries` or
/// `guardrails`. Why: a gate produces no output and runs no agent, so there is nothing to
/// check, budget, retry or scan; the reference rejects them. Fix: remove the key.
fn not_on_gate_function(function: &Function, key: &str, key_span: Span, value: Span) -> Diagnostic {
    let why = match key {
        "ensure" => {
            "a gate produces no output to check; the person or agent who resolves it decides"
        }
        "budget" => "a gate runs no agent, so there is nothing to budget",
        "retries" => {
            "a gate produces no output to retry; revisions go through the gate step's `on_revise`"
        }
        _ => "a gate produces no output to scan",
    };
    let diagnostic = Diagnostic::new(
        Code::E0052,
        format!(
            "gate function `{}` cannot have `{key}`",
            function.name.value
        ),
        key_span,
        "not allowed on a gate function",
    )
    .help(format!("remove `{key}`: {why}"));
    match removal(&function.keys, function.span, key_span, value) {
        Some(span) => diagnostic.fix(format!("remove `{key}`"), span, ""),
        None => diagnostic,
    }
}

/// W0005 `timeout-without-effect`: `timeout` on an infer or compute function. Why: only a
/// pending gate times out; the reference accepts the key anywhere and ignores it elsewhere, so
/// a spec that relies on it to stop a slow step is wrong. Fix: remove it.
fn timeout_without_effect(function: &Function, timeout: &Field<u64>) -> Diagnostic {
    let mode = function
        .mode
        .as_ref()
        .map_or("infer", |mode| mode_name(mode.value));
    let diagnostic = Diagnostic::new(
        Code::W0005,
        format!(
            "`timeout` has no effect on {mode} function `{}`",
            function.name.value
        ),
        timeout.key,
        "ignored",
    )
    .help("remove it: only gate functions time out; to bound an agent's work, give the flow a `budget`");
    match removal(&function.keys, function.span, timeout.key, timeout.span) {
        Some(span) => diagnostic.fix("remove `timeout`", span, ""),
        None => diagnostic,
    }
}

/// E0013 `missing-field`, for version 0.2: an infer or compute function without `intent`,
/// `input` or `output`. Why: the format requires them (the reference's code only requires
/// `output`, through its contract lookup); without them the agent is told neither what to do,
/// with what, nor what to return. Fix: add the key.
fn missing_function_field(function: &Function, key: &str) -> Diagnostic {
    let placeholder = keys::FUNCTION.key(key).map_or("…", |key| key.placeholder);
    Diagnostic::new(
        Code::E0013,
        format!("function `{}` has no `{key}`", function.name.value),
        function.name.span,
        format!("`{key}` is missing"),
    )
    .help(format!(
        "add `{key}: {placeholder}`; infer and compute functions need `intent`, `input` and `output`"
    ))
}

/// E0063 `cache-not-allowed`, on a function: `cache: true` on an infer or gate function. Why:
/// only a compute function is deterministic, so only its result may be reused for the same
/// inputs. Fix: remove `cache`, or make the function `mode: compute` if it is deterministic.
fn cache_on_non_compute_function(
    function: &Function,
    mode: Mode,
    cache: &Field<bool>,
) -> Diagnostic {
    Diagnostic::new(
        Code::E0063,
        format!(
            "{} function `{}` has `cache: true`, but only compute functions can be cached",
            mode_name(mode),
            function.name.value
        ),
        cache.key,
        "not a compute function",
    )
    .help("remove `cache: true`: the result of an agent or a gate is not reusable for the same inputs")
}

/// E0064 `invalid-guardrail`: a guardrail pattern that does not compile. Why: the reference
/// rejects the spec (it compiles each pattern with `re.IGNORECASE | re.MULTILINE`). Fix: correct
/// the pattern, escaping the characters it means literally.
pub(super) fn invalid_guardrail(pattern: &Spanned<String>) -> Option<Diagnostic> {
    let error = fancy_regex::RegexBuilder::new(&pattern.value)
        .case_insensitive(true)
        .multi_line(true)
        .build()
        .err()?;
    Some(
        Diagnostic::new(
            Code::E0064,
            format!(
                "guardrail `{}` is not a valid regular expression",
                pattern.value
            ),
            pattern.span,
            regex_problem(&error),
        )
        .help("correct the pattern; escape characters meant literally, such as `\\(` or `\\.`"),
    )
}

/// The regex library's complaint as a label: without its "Parsing error at position N:"
/// preamble (a position in the decoded pattern, not in the file) and lowercase like our labels.
fn regex_problem(error: &fancy_regex::Error) -> String {
    let text = match error {
        fancy_regex::Error::ParseError(_, problem) => problem.to_string(),
        other => other.to_string(),
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => "not a valid regular expression".to_owned(),
    }
}
