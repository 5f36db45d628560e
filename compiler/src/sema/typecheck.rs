//! Expression type checks: every expression of the spec against the names its place gives it.
//!
//! Takes the resolved steps and each flow's DAG; runs `stratum_grammar::check` on every
//! expression that parsed, in its environment:
//!
//! | where | names | `$.input` | `$.steps` |
//! |---|---|---|---|
//! | a function's `ensure` | `result`: the function's output contract | no | no |
//! | a step input, `skip_if` | — | the flow's `input` | every step of the flow |
//! | a step's `ensure`, `score_expr`, `accumulate` | `result`: the step's contract | the flow's `input` | ancestors only |
//! | `exit_criterion` | `result`, plus `best_score`, `prior_scores`, `iteration` with `score_expr` and `accumulator`, `accumulated_count`, `new_count`, `dry_streak` with `accumulate` | the flow's `input` | ancestors only |
//! | `accumulate_key` | `item`: an element of the `accumulate` list | the flow's `input` | ancestors only |
//!
//! Inputs and `skip_if` may name any step because what they name becomes a dependency; the
//! other expressions add no edge, so a step they name must already be an ancestor (`E0041`).
//! Also reports an `accumulate` that is not a list (`E0045`) and a `score_expr` that is not a
//! number (`E0046`).
//!
//! Invariant: a type that an earlier error left unknown is `any`, which checks clean.

use std::collections::BTreeMap;

use stratum_grammar::types::{Env, Type};
use stratum_grammar::{Bindings, Limits, Problem, ProblemKind};

use crate::diagnostic::{Code, Diagnostic};
use crate::expression::{self, Expressions, Role};
use crate::sema::dag::{Ancestors, input_texts, step_references};
use crate::sema::symbols::{Symbols, flow_steps};
use crate::sema::types::ContractTypes;
use crate::sema::{FlowModel, may_suggest};
use crate::syntax::ast::{Ast, Field, Flow, InputValue, Step, Text};

/// The names that exist in an `exit_criterion` only when the step scores its iterations.
const SCORE_NAMES: [&str; 3] = ["best_score", "prior_scores", "iteration"];
/// The names that exist in an `exit_criterion` only when the step accumulates.
const ACCUMULATE_NAMES: [&str; 4] = [
    "accumulator",
    "accumulated_count",
    "new_count",
    "dry_streak",
];

pub fn check(
    ast: &Ast,
    symbols: &Symbols,
    contracts: &ContractTypes,
    flows: &[FlowModel],
    expressions: &Expressions,
    diagnostics: &mut Vec<Diagnostic>,
) {
    for function in &ast.functions {
        let result = function
            .output
            .as_ref()
            .and_then(|output| contracts.contract(&output.value))
            .cloned()
            .unwrap_or(Type::Any);
        let mut env = Env::new().with("result", result);
        for text in function.ensure.iter().flat_map(|ensure| &ensure.value) {
            let before = diagnostics.len();
            check_text(text, &mut env, expressions, diagnostics);
            explain_constant(text, Role::Ensure, expressions, diagnostics, before);
        }
    }
    for (flow, model) in ast.flows.iter().zip(flows) {
        check_flow(flow, model, symbols, contracts, expressions, diagnostics);
    }
}

fn check_flow(
    flow: &Flow,
    model: &FlowModel,
    symbols: &Symbols,
    contracts: &ContractTypes,
    expressions: &Expressions,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let steps = flow_steps(flow);
    let mut outputs = BTreeMap::new();
    for (step, info) in steps.iter().zip(&model.steps) {
        if let Some(id) = &step.id {
            outputs
                .entry(id.value.clone())
                .or_insert_with(|| info.output.clone());
        }
    }
    let mut env = Env {
        names: BTreeMap::new(),
        input: Some(
            flow.input
                .as_ref()
                .map_or(Type::Any, |input| contracts.record(&input.value)),
        ),
        steps: outputs,
        suggest: true,
    };
    let table = symbols.steps.get(model.index);
    let mut ancestors = Ancestors::new(&model.dag.graph);
    for (index, (step, info)) in steps.iter().zip(&model.steps).enumerate() {
        env.names.clear();
        for text in input_texts(step) {
            let before = diagnostics.len();
            check_text(text, &mut env, expressions, diagnostics);
            whole_input_fix(step, text, env.input.as_ref(), diagnostics, before);
        }
        if let Some(skip_if) = &step.skip_if {
            let before = diagnostics.len();
            check_text(&skip_if.value, &mut env, expressions, diagnostics);
            explain_constant(
                &skip_if.value,
                Role::SkipIf,
                expressions,
                diagnostics,
                before,
            );
        }

        // The expressions below add no dependency: the steps they read must be ancestors.
        let mut no_edges: Vec<&Text> = Vec::new();
        env.names.insert("result".into(), info.result.clone());
        for text in step.ensure.iter().flat_map(|ensure| &ensure.value) {
            let before = diagnostics.len();
            check_text(text, &mut env, expressions, diagnostics);
            explain_constant(text, Role::Ensure, expressions, diagnostics, before);
            no_edges.push(text);
        }
        if let Some(score) = &step.score_expr {
            let ty = check_text(&score.value, &mut env, expressions, diagnostics);
            if let Some(ty) = ty.filter(|ty| !is_number(ty)) {
                diagnostics.push(score_not_number(score, &ty));
            }
            no_edges.push(&score.value);
        }
        let mut item = Type::Any;
        if let Some(accumulate) = &step.accumulate {
            let ty = check_text(&accumulate.value, &mut env, expressions, diagnostics);
            if let Some(ty) = ty {
                match list_element(&ty) {
                    Some(element) => item = element,
                    None => diagnostics.push(accumulate_not_list(accumulate, &ty)),
                }
            }
            no_edges.push(&accumulate.value);
        }
        if let Some(exit) = &step.exit_criterion {
            if step.score_expr.is_some() {
                env.names
                    .insert("best_score".into(), Type::Float.optional());
                env.names
                    .insert("prior_scores".into(), Type::list(Type::Float));
                env.names.insert("iteration".into(), Type::Int);
            }
            if step.accumulate.is_some() {
                env.names
                    .insert("accumulator".into(), Type::list(item.clone()));
                env.names.insert("accumulated_count".into(), Type::Int);
                env.names.insert("new_count".into(), Type::Int.optional());
                env.names.insert("dry_streak".into(), Type::Int);
            }
            check_exit_criterion(&exit.value, &mut env, expressions, diagnostics);
            no_edges.push(&exit.value);
        }
        if let Some(key) = &step.accumulate_key {
            env.names.clear();
            env.names.insert("item".into(), item);
            check_text(&key.value, &mut env, expressions, diagnostics);
            no_edges.push(&key.value);
        }

        for text in no_edges {
            let Some(expr) = expressions.get(text) else {
                continue;
            };
            for id in step_references(expr) {
                let Some(source) = table.and_then(|table| table.get(&id.name)) else {
                    continue;
                };
                if !ancestors.is_ancestor(source, index) {
                    diagnostics.push(not_an_ancestor(
                        flow,
                        step.id.as_ref().map_or("?", |id| id.value.as_str()),
                        &id.name,
                        text.span_of(id.span.range()),
                        table.and_then(|table| table.span(&id.name)),
                    ));
                }
            }
        }
    }
}

/// Type-checks one expression and reports its problems; its type, when it parsed.
fn check_text(
    text: &Text,
    env: &mut Env,
    expressions: &Expressions,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Type> {
    let expr = expressions.get(text)?;
    env.suggest = may_suggest(diagnostics, env.steps.len().max(1));
    let checked = stratum_grammar::check(expr, env);
    report(text, &checked.problems, diagnostics, |_| None);
    let failed = checked.problems.iter().any(Problem::is_error);
    (!failed).then_some(checked.ty)
}

/// Like [`check_text`], with a better help for an iteration name the step does not provide.
fn check_exit_criterion(
    text: &Text,
    env: &mut Env,
    expressions: &Expressions,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let Some(expr) = expressions.get(text) else {
        return;
    };
    env.suggest = may_suggest(diagnostics, env.steps.len().max(1));
    let checked = stratum_grammar::check(expr, env);
    report(text, &checked.problems, diagnostics, |problem| {
        if problem.kind != ProblemKind::UnknownName {
            return None;
        }
        let name = text.value.get(problem.span.range())?;
        if SCORE_NAMES.contains(&name) {
            Some(format!(
                "`{name}` exists only on a step that scores its iterations: add a `score_expr`"
            ))
        } else if ACCUMULATE_NAMES.contains(&name) {
            Some(format!(
                "`{name}` exists only on a step that accumulates: add an `accumulate` expression"
            ))
        } else {
            None
        }
    });
}

/// Gives `$.input` alone in a step input (`E0048`, among the diagnostics from `from` on) the
/// fix `$.input.<name>` when the input's own name is a field of the flow's input: the usual
/// way to pass a workflow input on is under its own name.
fn whole_input_fix(
    step: &Step,
    text: &Text,
    input: Option<&Type>,
    diagnostics: &mut [Diagnostic],
    from: usize,
) {
    let Some(Type::Record(record)) = input.map(Type::non_optional) else {
        return;
    };
    let Some(name) = step
        .inputs
        .iter()
        .flat_map(|inputs| &inputs.value)
        .find(|input| matches!(&input.value, InputValue::Text(value) if std::ptr::eq(value, text)))
        .map(|input| input.name.value.as_str())
        .filter(|name| record.field(name).is_some())
    else {
        return;
    };
    for diagnostic in diagnostics.get_mut(from..).into_iter().flatten() {
        if diagnostic.code == Code::E0048 {
            let span = diagnostic.primary.span;
            let end = crate::source::Span::point(span.file, span.end as usize);
            diagnostic.help = Some(format!(
                "pass the flow's input of the same name: `$.input.{name}`"
            ));
            diagnostic.fix = Some(crate::diagnostic::Fix {
                message: format!("insert `.{name}`"),
                edits: vec![crate::diagnostic::Edit {
                    span: end,
                    replacement: format!(".{name}"),
                }],
            });
        }
    }
}

/// Makes a constant `ensure` or `skip_if` (`W0004`, among the diagnostics from `from` on) say
/// what its value does to the step, and that `stratumc build` drops the ones that do nothing.
fn explain_constant(
    text: &Text,
    role: Role,
    expressions: &Expressions,
    diagnostics: &mut [Diagnostic],
    from: usize,
) {
    let Some(diagnostic) = diagnostics
        .get_mut(from..)
        .into_iter()
        .flatten()
        .find(|diagnostic| diagnostic.code == Code::W0004)
    else {
        return;
    };
    let Some(expr) = expressions.get(text) else {
        return;
    };
    let program = stratum_grammar::compile(expr, &text.value);
    if program.is_constant().is_none() {
        return;
    }
    let Ok(value) = program.evaluate_bool(&Bindings::new(), &Limits::default()) else {
        return;
    };
    let (message, label, help) = match (role, value) {
        (Role::Ensure, true) => (
            "this `ensure` always holds",
            "always true",
            "it reads neither `result` nor any input, so it checks nothing and `stratumc build` \
             leaves it out of the plan; test a field of `result` instead",
        ),
        (Role::Ensure, false) => (
            "this `ensure` never holds",
            "always false",
            "it reads neither `result` nor any input, so every attempt fails; test a field of \
             `result` instead",
        ),
        (_, false) => (
            "this `skip_if` never skips the step",
            "always false",
            "it reads no input and no step output, so `stratumc build` leaves it out of the plan; \
             remove it, or test a `$`-reference",
        ),
        (_, true) => (
            "this `skip_if` always skips the step",
            "always true",
            "it reads no input and no step output, so the step never runs; remove the step, or \
             test a `$`-reference",
        ),
    };
    diagnostic.message = message.to_owned();
    diagnostic.help = Some(help.to_owned());
    diagnostic.primary.message = label.to_owned();
}

fn report(
    text: &Text,
    problems: &[Problem],
    diagnostics: &mut Vec<Diagnostic>,
    better_help: impl Fn(&Problem) -> Option<String>,
) {
    for problem in problems {
        let mut diagnostic =
            expression::diagnostic(problem, &text.value, |span| text.span_of(span.range()));
        if let Some(help) = better_help(problem) {
            diagnostic.help = Some(help);
            diagnostic.fix = None;
        }
        diagnostics.push(diagnostic);
    }
}

fn is_number(ty: &Type) -> bool {
    matches!(
        ty.non_optional().widened(),
        Type::Int | Type::Float | Type::Any
    )
}

/// The element type of a list (or `any`); `None` when the type is not a list.
fn list_element(ty: &Type) -> Option<Type> {
    match ty.non_optional() {
        Type::List(item) => Some((**item).clone()),
        Type::Any => Some(Type::Any),
        _ => None,
    }
}

/// E0041: an expression that adds no dependency reads a step that may not have run.
fn not_an_ancestor(
    flow: &Flow,
    step: &str,
    source: &str,
    span: crate::source::Span,
    declared: Option<crate::source::Span>,
) -> Diagnostic {
    let (message, label, help) = if step == source {
        (
            format!("step `{step}` reads its own output through `$.steps.{step}.output`"),
            "its own output".to_owned(),
            "a step's own result is `result`".to_owned(),
        )
    } else {
        (
            format!("`{source}` may not have run when `{step}` reads its output"),
            format!("`{source}` is not a dependency of `{step}`"),
            format!(
                "only inputs and `skip_if` make a step depend on what they read; add `{source}` \
                 to the `depends_on` of `{step}` (in flow `{}`), or read it through an input",
                flow.name.value
            ),
        )
    };
    let diagnostic = Diagnostic::new(Code::E0041, message, span, label).help(help);
    match declared {
        Some(declared) if step != source => {
            diagnostic.secondary(declared, format!("`{source}` is declared here"))
        }
        _ => diagnostic,
    }
}

/// E0045: `accumulate` must give the list of a round's items.
fn accumulate_not_list(accumulate: &Field<Text>, ty: &Type) -> Diagnostic {
    Diagnostic::new(
        Code::E0045,
        format!("`accumulate` must give a list, but this is {}", shown(ty)),
        whole(&accumulate.value),
        format!("this is {}", shown(ty)),
    )
    .help("name the list field of the result that holds the round's items, as in `result.findings`")
}

/// E0046: `score_expr` must give a number.
fn score_not_number(score: &Field<Text>, ty: &Type) -> Diagnostic {
    Diagnostic::new(
        Code::E0046,
        format!("`score_expr` must give a number, but this is {}", shown(ty)),
        whole(&score.value),
        format!("this is {}", shown(ty)),
    )
    .help("score each iteration with a numeric field of the result, as in `result.score`")
}

/// The expression's own text, without the quotes around it.
fn whole(text: &Text) -> crate::source::Span {
    text.span_of(0..text.value.len())
}

fn shown(ty: &Type) -> String {
    format!("`{ty}`")
}
