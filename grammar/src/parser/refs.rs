//! `$`-references: `$.input.<field>…` and `$.steps.<id>.output.<field>…`.
//!
//! The grammar collects `$` and the `.name` chain after it; this checks the chain against the
//! two accepted forms, so that each way of getting it wrong has its own message.

use crate::ast::{Expr, ExprKind, Ident, RefRoot, Reference};
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;

const FORMS: &str = "a reference is `$.input.<field>` or `$.steps.<step id>.output.<field>`";

/// The reference written as `$` (at `dollar`), a name glued to it without a dot (`$input`),
/// and the dotted `fields`; `whole` covers all of it.
pub(super) fn reference(
    dollar: Span,
    glued: Option<Ident>,
    fields: Vec<Ident>,
    whole: Span,
    mut emit: impl FnMut(Problem),
) -> Expr {
    let error = Expr::new(ExprKind::Error, whole);
    let syntax = |message: String, label: &str| {
        Problem::new(ProblemKind::Syntax, message, whole, label).help(FORMS)
    };
    if let Some(glued) = glued {
        let fix = Span::new(dollar.start as usize, glued.span.start as usize);
        emit(
            syntax(
                format!("expected `.` after `$`, found `{}`", glued.name),
                "missing `.`",
            )
            .replacement(fix, "$."),
        );
        return error;
    }
    let mut fields = fields.into_iter();
    let Some(root) = fields.next() else {
        emit(syntax(
            "expected `.input` or `.steps` after `$`".into(),
            "incomplete reference",
        ));
        return error;
    };
    match root.name.as_str() {
        "input" => reference_node(RefRoot::Input, fields.collect(), whole),
        "steps" => {
            let Some(step) = fields.next() else {
                emit(syntax(
                    "expected a step id after `$.steps`".into(),
                    "incomplete reference",
                ));
                return error;
            };
            let Some(output) = fields.next() else {
                let end = Span::new(step.span.end as usize, step.span.end as usize);
                emit(
                    syntax(
                        format!("expected `.output` after `$.steps.{}`", step.name),
                        "incomplete reference",
                    )
                    .replacement(end, ".output"),
                );
                return error;
            };
            if output.name != "output" {
                let start = Span::new(output.span.start as usize, output.span.start as usize);
                emit(
                    Problem::new(
                        ProblemKind::Syntax,
                        format!(
                            "expected `output` after `$.steps.{}.`, found `{}`",
                            step.name, output.name
                        ),
                        output.span,
                        "expected `output`",
                    )
                    .help(format!(
                        "a step's result is `$.steps.{}.output`, and its fields follow it: \
                         `$.steps.{}.output.{}`",
                        step.name, step.name, output.name
                    ))
                    .replacement(start, "output."),
                );
                return error;
            }
            reference_node(RefRoot::StepOutput { step }, fields.collect(), whole)
        }
        other => {
            let problem = Problem::new(
                ProblemKind::Syntax,
                format!("unknown reference root `$.{other}`"),
                root.span,
                "expected `input` or `steps`",
            )
            .help(FORMS);
            let problem = match other {
                "inputs" | "in" | "args" | "params" => problem.replacement(root.span, "input"),
                "step" => problem.replacement(root.span, "steps"),
                _ => problem,
            };
            emit(problem);
            error
        }
    }
}

fn reference_node(root: RefRoot, path: Vec<Ident>, whole: Span) -> Expr {
    Expr::new(ExprKind::Ref(Reference { root, path }), whole)
}
