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
//! Also reports an `accumulate` that is not a list (`E0045`), a `score_expr` that is not a
//! number (`E0046`), a function or flow step input whose value is not of the type the
//! function or the called flow declares (`E0076`), and a literal input of another kind than a
//! string where nothing declares a type (`E0078`).
//!
//! Invariant: a type that an earlier error left unknown is `any`, which checks clean.

use std::collections::BTreeMap;

use stratum_grammar::types::{Env, Record, Type};
use stratum_grammar::{Bindings, Limits, Problem, ProblemKind};

use crate::diagnostic::{Code, Diagnostic};
use crate::expression::{self, Expressions, Role};
use crate::sema::dag::{Ancestors, input_texts, step_references};
use crate::sema::resolve::StepKind;
use crate::sema::symbols::{Symbols, flow_steps};
use crate::sema::types::ContractTypes;
use crate::sema::{FlowModel, may_suggest};
use crate::syntax::ast::{Ast, Field, FieldDef, Flow, InputValue, Step, Text};
use crate::syntax::tree::NodeKind;

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
    // The input record of every function and flow, built once: each step that runs one is
    // checked against it. A flow step's inputs become the called flow's `$.input` as they are
    // (the runtime checks only a workflow's own inputs against a schema), so a value of
    // another kind reaches the called flow's steps unchecked, as it would reach a function.
    let callees = Callees {
        functions: ast
            .functions
            .iter()
            .map(|function| {
                function
                    .input
                    .as_ref()
                    .map(|input| contracts.record(&input.value))
            })
            .collect(),
        flows: ast
            .flows
            .iter()
            .map(|flow| {
                flow.input
                    .as_ref()
                    .map(|input| contracts.record(&input.value))
            })
            .collect(),
    };
    for (index, (flow, model)) in ast.flows.iter().zip(flows).enumerate() {
        let input = callees.flows.get(index).cloned().flatten();
        check_flow(
            ast,
            flow,
            model,
            input,
            symbols,
            &callees,
            expressions,
            diagnostics,
        );
    }
}

/// The `input` record types of the functions and of the flows, by index; `None` where there
/// is none.
struct Callees {
    functions: Vec<Option<Type>>,
    flows: Vec<Option<Type>>,
}

#[allow(clippy::too_many_arguments)]
fn check_flow(
    ast: &Ast,
    flow: &Flow,
    model: &FlowModel,
    input: Option<Type>,
    symbols: &Symbols,
    callees: &Callees,
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
        input: Some(input.unwrap_or(Type::Any)),
        steps: outputs,
        suggest: true,
    };
    let table = symbols.steps.get(model.index);
    let mut ancestors = Ancestors::new(&model.dag.graph);
    for (index, (step, info)) in steps.iter().zip(&model.steps).enumerate() {
        env.names.clear();
        let mut reference_types: Vec<(&Text, Option<Type>)> = Vec::new();
        for text in input_texts(step) {
            let before = diagnostics.len();
            let ty = check_text(text, &mut env, expressions, diagnostics);
            whole_input_fix(step, text, env.input.as_ref(), diagnostics, before);
            reference_types.push((text, ty));
        }
        let callee = match info.kind {
            StepKind::Function(index) => callees
                .functions
                .get(index)
                .and_then(Option::as_ref)
                .zip(ast.functions.get(index))
                .map(|(ty, function)| {
                    (
                        ty,
                        function.input.as_ref(),
                        format!("function `{}`", function.name.value),
                    )
                }),
            StepKind::Flow(index) => callees
                .flows
                .get(index)
                .and_then(Option::as_ref)
                .zip(ast.flows.get(index))
                .map(|(ty, called)| {
                    (
                        ty,
                        called.input.as_ref(),
                        format!("flow `{}`", called.name.value),
                    )
                }),
            _ => None,
        };
        if declares_no_inputs(ast, info.kind) && !is_version_01(ast) {
            untyped_literals(step, info.kind, diagnostics);
        }
        if let Some((Type::Record(record), declared, callee)) = callee {
            check_input_types(
                step,
                record,
                declared,
                &callee,
                &reference_types,
                diagnostics,
            );
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

        crate::sema::fan_out::check_step(step, &mut env, expressions, diagnostics);

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

/// Type-checks one expression and reports its problems; its type, when it parsed and has no
/// error.
pub(crate) fn check_text(
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

/// E0076 `input-type-mismatch`: a function or flow step passes an input whose value (a
/// literal, or a `$`-reference whose type is known) is not of the type the function or flow
/// declares for it. Why: the agent, or the called flow's steps, get a value of the wrong kind.
/// Fix: pass a value of the declared type (a field of a whole step output, an unquoted
/// number), or change the declaration.
fn check_input_types(
    step: &Step,
    record: &Record,
    declared: Option<&Field<Vec<FieldDef>>>,
    callee: &str,
    reference_types: &[(&Text, Option<Type>)],
    diagnostics: &mut Vec<Diagnostic>,
) {
    for input in step.inputs.iter().flat_map(|inputs| &inputs.value) {
        let name = input.name.value.as_str();
        let Some(expected) = record.field(name) else {
            continue;
        };
        // `literal`: the text of a quoted value; `scalar`: an unquoted number or boolean.
        let (actual, span, literal, scalar) = match &input.value {
            InputValue::Text(text) if text.value.starts_with('$') => {
                let Some((_, Some(ty))) = reference_types
                    .iter()
                    .find(|(written, _)| std::ptr::eq(*written, text))
                else {
                    continue;
                };
                (ty.clone(), whole(text), None, false)
            }
            InputValue::Text(text) => (Type::String, text.span, Some(text.value.as_str()), false),
            InputValue::Literal(node) => {
                let ty = match &node.kind {
                    NodeKind::Bool(_) => Type::Bool,
                    NodeKind::Int(_) => Type::Int,
                    NodeKind::Float(_) => Type::Float,
                    NodeKind::Seq(_) => Type::list(Type::Any),
                    NodeKind::Map(_) => Type::record(Record {
                        fields: Vec::new(),
                        open: true,
                    }),
                    // `None` and what the front end dropped say nothing about the type.
                    NodeKind::Null | NodeKind::Str(_) | NodeKind::Invalid => continue,
                };
                let scalar = matches!(
                    node.kind,
                    NodeKind::Bool(_) | NodeKind::Int(_) | NodeKind::Float(_)
                );
                (ty, node.span, None, scalar)
            }
        };
        if fits(expected, &actual) {
            continue;
        }
        let declared_at = declared
            .and_then(|fields| fields.value.iter().find(|field| field.name.value == name))
            .map(|field| field.ty.as_ref().map_or(field.name.span, |ty| ty.span));
        let diagnostic = Diagnostic::new(
            Code::E0076,
            format!(
                "{callee} takes `{name}` as {}, but this is {}",
                shown(expected),
                shown(&actual)
            ),
            span,
            format!("this is {}", shown(&actual)),
        );
        let diagnostic = match declared_at {
            Some(at) => {
                diagnostic.secondary(at, format!("`{name}` is declared {} here", shown(expected)))
            }
            None => diagnostic,
        };
        let fitting: Vec<&str> = match actual.non_optional() {
            Type::Record(output) => output
                .fields
                .iter()
                .filter(|field| fits(expected, &field.ty))
                .map(|field| field.name.as_str())
                .take(3)
                .collect(),
            _ => Vec::new(),
        };
        let unquoted = literal.and_then(|text| {
            let text = text.trim();
            let number = match expected.non_optional().widened() {
                Type::Int => text.parse::<i64>().is_ok(),
                Type::Float => text.parse::<f64>().is_ok_and(f64::is_finite),
                _ => false,
            };
            number.then(|| text.to_owned())
        });
        let quote = scalar && matches!(expected.non_optional().widened(), Type::String);
        let diagnostic = match (fitting.as_slice(), unquoted) {
            ([], None) if quote => {
                let start = crate::source::Span::point(span.file, span.start as usize);
                let end = crate::source::Span::point(span.file, span.end as usize);
                let mut diagnostic = diagnostic.help(format!(
                    "quote the value to pass it as a string, or change the type of `{name}` in \
                     {callee}"
                ));
                diagnostic.fix = Some(crate::diagnostic::Fix {
                    message: "put the value in quotes".to_owned(),
                    edits: [start, end]
                        .into_iter()
                        .map(|span| crate::diagnostic::Edit {
                            span,
                            replacement: "\"".to_owned(),
                        })
                        .collect(),
                });
                diagnostic
            }
            (_, Some(number)) => diagnostic
                .help(format!(
                    "write the number without quotes: `{name}: {number}`"
                ))
                .fix(format!("replace the value with `{number}`"), span, number),
            ([one], None) => {
                let end = crate::source::Span::point(span.file, span.end as usize);
                diagnostic
                    .help(format!(
                        "this is a whole step output: pass its field `{one}`"
                    ))
                    .fix(format!("insert `.{one}`"), end, format!(".{one}"))
            }
            ([], None) => diagnostic.help(format!(
                "pass a value of type {}, or change the type of `{name}` in {callee}",
                shown(expected)
            )),
            (several, None) => diagnostic.help(format!(
                "this is a whole step output: pass one of its fields, such as {}",
                crate::diagnostic::backticked(several)
            )),
        };
        diagnostics.push(diagnostic);
    }
}

/// Whether nothing declares the types of the step's inputs: an inline or judge step, or a
/// step that runs a function or flow without `input`. (A name missing from an `input` that
/// exists is reported as such: `W0021`, `E0043`.)
fn declares_no_inputs(ast: &Ast, kind: StepKind) -> bool {
    match kind {
        StepKind::Inline
        | StepKind::Judge
        | StepKind::Decompose
        | StepKind::Parallel
        | StepKind::Pipeline => true,
        StepKind::Function(index) | StepKind::Gate(index) => ast
            .functions
            .get(index)
            .is_some_and(|function| function.input.is_none()),
        StepKind::Flow(index) => ast
            .flows
            .get(index)
            .is_some_and(|flow| flow.input.is_none()),
        StepKind::Unknown => false,
    }
}

/// Whether the spec says version 0.1, where a literal input of another kind than a string is
/// already reported by the front end (`E0016`).
fn is_version_01(ast: &Ast) -> bool {
    ast.version
        .as_ref()
        .is_some_and(|version| version.value == crate::syntax::ast::Version::V0_1)
}

/// E0078 `literal-input-without-type`: a step passes a number, boolean, list or mapping as an
/// input that no function or flow declares a type for. Why: every input is a string in the
/// reference implementation, which rejects the spec ("3 is not of type 'string'"); only a
/// declared type (checked by `E0076`) says that a value of another kind is meant. Fix: quote
/// the value, or pass it to a function or flow that declares the input's type.
fn untyped_literals(step: &Step, kind: StepKind, diagnostics: &mut Vec<Diagnostic>) {
    for input in step.inputs.iter().flat_map(|inputs| &inputs.value) {
        let InputValue::Literal(node) = &input.value else {
            continue;
        };
        let (what, scalar) = match node.kind {
            NodeKind::Bool(_) => ("a boolean", true),
            NodeKind::Int(_) | NodeKind::Float(_) => ("a number", true),
            NodeKind::Seq(_) => ("a list", false),
            NodeKind::Map(_) => ("a mapping", false),
            // `~` passes no value; what the front end dropped is reported there.
            NodeKind::Null | NodeKind::Str(_) | NodeKind::Invalid => continue,
        };
        let name = input.name.value.as_str();
        let diagnostic = Diagnostic::new(
            Code::E0078,
            format!(
                "input `{name}` is {what}, but nothing declares its type, so it must be a string"
            ),
            node.span,
            format!("{what}, not a string"),
        );
        let declare = match kind {
            StepKind::Function(_) | StepKind::Gate(_) => {
                "declare the input with its type in the function's `input`"
            }
            StepKind::Flow(_) => "declare the input with its type in the flow's `input`",
            _ => "call a function that declares the input with its type",
        };
        let diagnostic = if scalar {
            let span = node.span;
            let start = crate::source::Span::point(span.file, span.start as usize);
            let end = crate::source::Span::point(span.file, span.end as usize);
            let mut diagnostic =
                diagnostic.help(format!("quote the value to pass it as text, or {declare}"));
            diagnostic.fix = Some(crate::diagnostic::Fix {
                message: "put the value in quotes".to_owned(),
                edits: [start, end]
                    .into_iter()
                    .map(|span| crate::diagnostic::Edit {
                        span,
                        replacement: "\"".to_owned(),
                    })
                    .collect(),
            });
            diagnostic
        } else {
            diagnostic.help(format!(
                "pass it as JSON text in a quoted string, or {declare}"
            ))
        };
        diagnostics.push(diagnostic);
    }
}

/// Whether a value of type `actual` may be passed where `expected` is declared: the same kind
/// of value once optionals and enums are looked through (an enum narrows its plain type, and
/// whether a value is `None` or among the values is a run-time matter), `any` either way.
fn fits(expected: &Type, actual: &Type) -> bool {
    let expected = expected.non_optional().widened();
    let actual = actual.non_optional().widened();
    expected.accepts(&actual) || matches!(actual, Type::Null)
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

pub(crate) fn shown(ty: &Type) -> String {
    format!("`{ty}`")
}
