//! Judge steps: what the reference checks at run time, or never, checked when the spec is.
//!
//! The front end reads the `judge:` block against its shape (unknown keys, predicate types,
//! `applied_gate` from 1 to 10, budget values). Here:
//! - two predicates with one id, and `stakes: cheap` with a predicate only an agent decides
//!   (E0090);
//! - the statement of each deterministic predicate: type-checked with no free name and no
//!   `$`-reference (the first tier evaluates it over the staged files alone), calling only the
//!   first tier's built-ins, and reading only paths under `artifacts/` or `modified/` (E0091);
//! - a `reasoning_template` on a judge step (E0093).
//!
//! Invariant: a statement that did not parse was reported by `expression::parse_all` and is
//! not looked at again.

use std::collections::HashMap;

use stratum_grammar::ast::{Expr, ExprKind};
use stratum_grammar::span::Span as TextSpan;
use stratum_grammar::types::Env;

use crate::diagnostic::{Code, Diagnostic, backticked};
use crate::expression::Expressions;
use crate::sema::typecheck::check_text;
use crate::source::Span;
use crate::syntax::ast::{Ast, Judge, PredicateKind, Stakes, Step, Text};

/// The built-ins the first tier offers a deterministic statement (the reference evaluates it
/// with exactly these names).
const FIRST_TIER: [&str; 8] = [
    "file_exists",
    "file_contains",
    "len",
    "min",
    "max",
    "bool",
    "int",
    "str",
];

/// Where the judge stages what it reads: the step's artifacts and the files the flow modified.
const STAGED_ROOTS: [&str; 2] = ["artifacts/", "modified/"];

/// The checks of every judge step of the spec.
pub fn check(ast: &Ast, expressions: &Expressions, diagnostics: &mut Vec<Diagnostic>) {
    let steps = ast
        .flows
        .iter()
        .flat_map(|flow| &flow.steps)
        .flat_map(|steps| &steps.value);
    for step in steps {
        let Some(judge) = &step.judge else {
            continue;
        };
        duplicate_ids(step, &judge.value, diagnostics);
        cheap_stakes(step, &judge.value, diagnostics);
        statements(&judge.value, expressions, diagnostics);
        if let Some(template) = &step.reasoning_template {
            diagnostics.push(reasoning_template_on_judge(step, template.key));
        }
    }
}

/// How a step is named in messages.
fn step_name(step: &Step) -> String {
    match &step.id {
        Some(id) => format!("judge step `{}`", id.value),
        None => "this judge step".to_owned(),
    }
}

/// E0090 `invalid-judge`, for two predicates with one id. Why: the verdict and its findings
/// name predicates by id, so two of one name cannot be told apart (the reference accepts
/// them). Fix: rename one.
fn duplicate_ids(step: &Step, judge: &Judge, diagnostics: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for predicate in judge.predicates.iter().flat_map(|list| &list.value) {
        let Some(id) = &predicate.id else {
            continue;
        };
        match seen.get(id.value.as_str()) {
            Some(&first) => diagnostics.push(
                Diagnostic::new(
                    Code::E0090,
                    format!(
                        "two predicates of {} have the id `{}`",
                        step_name(step),
                        id.value
                    ),
                    id.span,
                    "used again here",
                )
                .secondary(first, "first used here")
                .help("the verdict names each predicate by its id; rename one of them"),
            ),
            None => {
                seen.insert(&id.value, id.span);
            }
        }
    }
}

/// E0090 `invalid-judge`, for `stakes: cheap` with a predicate that is not deterministic.
/// Why: cheap stakes run the first tier only, which decides deterministic predicates and
/// nothing else; the reference fails the step at run time (`StakesPredicateMismatchError`).
/// Fix: `stakes: default`, or make the predicate deterministic.
fn cheap_stakes(step: &Step, judge: &Judge, diagnostics: &mut Vec<Diagnostic>) {
    let Some(stakes) = judge
        .stakes
        .as_ref()
        .filter(|stakes| stakes.value == Stakes::Cheap)
    else {
        return;
    };
    let agent_decided = judge
        .predicates
        .iter()
        .flat_map(|list| &list.value)
        .filter_map(|predicate| predicate.kind.as_ref().map(|kind| (predicate, kind)))
        .filter(|(_, kind)| kind.value != PredicateKind::Deterministic);
    for (predicate, kind) in agent_decided {
        let named = predicate.id.as_ref().map_or_else(
            || "a predicate".to_owned(),
            |id| format!("predicate `{}`", id.value),
        );
        diagnostics.push(
            Diagnostic::new(
                Code::E0090,
                format!(
                    "{named} of {} is `{}`, which `stakes: cheap` never decides",
                    step_name(step),
                    kind.value.as_str()
                ),
                kind.span,
                "an agent decides this",
            )
            .secondary(stakes.span, "deterministic predicates only")
            .help(
                "cheap stakes run the deterministic tier alone; use `stakes: default` to let an \
                 agent decide the predicate, or write it as a deterministic expression",
            )
            .fix("replace `cheap` with `default`", stakes.span, "default"),
        );
    }
}

/// E0091 `invalid-judge-statement` and the type checks of every deterministic statement.
fn statements(judge: &Judge, expressions: &Expressions, diagnostics: &mut Vec<Diagnostic>) {
    let deterministic = judge
        .predicates
        .iter()
        .flat_map(|list| &list.value)
        .filter(|predicate| {
            predicate
                .kind
                .as_ref()
                .is_some_and(|kind| kind.value == PredicateKind::Deterministic)
        })
        .filter_map(|predicate| predicate.statement.as_ref());
    for statement in deterministic {
        let Some(expr) = expressions.get(&statement.value) else {
            continue;
        };
        // No free names and no `$`: the first tier sees the staged files and nothing else.
        let mut env = Env::new();
        check_text(&statement.value, &mut env, expressions, diagnostics);
        first_tier(expr, &statement.value, diagnostics);
    }
}

/// Reports, in `expr`, calls the first tier does not offer and staged paths it cannot read.
fn first_tier(expr: &Expr, text: &Text, diagnostics: &mut Vec<Diagnostic>) {
    let mut calls = Vec::new();
    collect_calls(expr, &mut calls);
    for (name, span, args) in calls {
        if !FIRST_TIER.contains(&name) {
            diagnostics.push(
                Diagnostic::new(
                    Code::E0091,
                    format!("`{name}` is not available in a deterministic judge statement"),
                    text.span_of(span.range()),
                    "not a first-tier built-in",
                )
                .help(format!(
                    "a deterministic statement may call {}; write the check with those, or make \
                     the predicate `verified` for an agent to decide",
                    backticked(&FIRST_TIER)
                )),
            );
            continue;
        }
        if !matches!(name, "file_exists" | "file_contains") {
            continue;
        }
        let Some(Expr {
            kind: ExprKind::Str(path),
            span,
        }) = args.first()
        else {
            continue;
        };
        if let Some(problem) = staged_path_problem(path) {
            diagnostics.push(
                Diagnostic::new(
                    Code::E0091,
                    format!("the judge cannot read `{path}`: {problem}"),
                    text.span_of(span.range()),
                    "outside the staged files",
                )
                .help(
                    "the judge stages the step's artifacts as `artifacts/<name>.txt` and the \
                     files the flow modified as `modified/<path>`; name the file from there",
                ),
            );
        }
    }
}

/// Why a literal path is not one the first tier may read, if it is not.
fn staged_path_problem(path: &str) -> Option<&'static str> {
    if path.starts_with('/') || path.contains('\\') {
        return Some("a path is relative to the judge's staging directory, with `/` separators");
    }
    if path.split('/').any(|segment| segment == "..") {
        return Some("`..` would leave the staged files");
    }
    if !STAGED_ROOTS.iter().any(|root| path.starts_with(root)) {
        return Some("it is not under `artifacts/` or `modified/`");
    }
    None
}

/// Every call of a built-in in `expr`: its name, the name's span and its arguments.
fn collect_calls<'e>(expr: &'e Expr, calls: &mut Vec<(&'e str, TextSpan, &'e [Expr])>) {
    let mut pending = vec![expr];
    while let Some(expr) = pending.pop() {
        if let ExprKind::Call { func, args } = &expr.kind {
            calls.push((func.name.as_str(), func.span, args));
        }
        pending.extend(expr.children());
    }
    calls.sort_by_key(|(_, span, _)| span.start);
}

/// E0093 `reasoning-template-on-judge`. Why: the reference then checks the judge's verdict
/// against the template, but the verdict is written by the server, never with the
/// template's sections, so the step fails every time. Fix: put the template on the step whose
/// answer the judge checks.
fn reasoning_template_on_judge(step: &Step, key: Span) -> Diagnostic {
    Diagnostic::new(
        Code::E0093,
        format!("{} cannot have `reasoning_template`", step_name(step)),
        key,
        "never satisfied",
    )
    .help(
        "the judge's verdict is written by the server, not by an agent, so it never has the \
         template's sections; put the template on the step whose answer the judge checks",
    )
}
