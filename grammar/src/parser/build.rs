//! The nodes that the grammar's parsers build from what they matched: brackets' contents,
//! comprehensions and operators.

use chumsky::span::SimpleSpan;

use super::grammar::{Error, custom, span};
use crate::ast::{BinaryOp, Expr, ExprKind, Generator, Ident, LogicalOp, UnaryOp};
use crate::problem::{Problem, ProblemKind};

pub(super) fn node(kind: ExprKind, s: SimpleSpan) -> Expr {
    Expr::new(kind, span(s))
}

pub(super) fn error_node(s: SimpleSpan) -> Expr {
    node(ExprKind::Error, s)
}

/// A comprehension's `for … in … if …` clauses, before they meet their element.
#[derive(Clone)]
pub(super) struct Clauses {
    pub var: Ident,
    pub iter: Expr,
    pub conditions: Vec<Expr>,
}

/// The items between brackets: the first, and either comprehension clauses or more items.
#[derive(Clone)]
pub(super) struct Items {
    pub first: Option<Expr>,
    pub clauses: Option<Clauses>,
    pub rest: Vec<Expr>,
    pub trailing_comma: bool,
}

pub(super) type Emitter<'t, 's> = chumsky::input::Emitter<Error<'t, 's>>;

/// `(…)`: the empty tuple, a parenthesised expression, a tuple, or a generator.
pub(super) fn parenthesised(items: Items, at: SimpleSpan, emitter: &mut Emitter) -> Expr {
    let Items {
        first,
        clauses,
        rest,
        trailing_comma,
    } = items;
    let Some(first) = first else {
        return node(ExprKind::Tuple(Vec::new()), at);
    };
    if let Some(clauses) = clauses {
        not_sole(&rest, trailing_comma, at, emitter, "remove the other items");
        return comprehension(first, clauses, at, ExprKind::Generator);
    }
    if rest.is_empty() && !trailing_comma {
        return first;
    }
    let mut all = vec![first];
    all.extend(rest);
    node(ExprKind::Tuple(all), at)
}

/// `[…]`: a list or a list comprehension.
pub(super) fn bracketed(items: Items, at: SimpleSpan, emitter: &mut Emitter) -> Expr {
    let Items {
        first,
        clauses,
        rest,
        trailing_comma,
    } = items;
    let Some(first) = first else {
        return node(ExprKind::List(Vec::new()), at);
    };
    if let Some(clauses) = clauses {
        not_sole(
            &rest,
            trailing_comma,
            at,
            emitter,
            "a comprehension builds the whole list; to add items, concatenate lists with `+`",
        );
        return comprehension(first, clauses, at, ExprKind::ListComp);
    }
    let mut all = vec![first];
    all.extend(rest);
    node(ExprKind::List(all), at)
}

/// A call's arguments. A generator among others is reported after parsing, with generators
/// out of place elsewhere.
pub(super) fn arguments(items: Items) -> Vec<Expr> {
    let Items {
        first,
        clauses,
        rest,
        trailing_comma: _,
    } = items;
    let Some(first) = first else {
        return Vec::new();
    };
    let first = match clauses {
        Some(clauses) => {
            let from = first.span.start as usize;
            let to = clauses.conditions.last().unwrap_or(&clauses.iter).span.end as usize;
            comprehension(
                first,
                clauses,
                SimpleSpan::from(from..to),
                ExprKind::Generator,
            )
        }
        None => first,
    };
    let mut all = vec![first];
    all.extend(rest);
    all
}

fn comprehension(
    element: Expr,
    clauses: Clauses,
    at: SimpleSpan,
    kind: fn(Box<Generator>) -> ExprKind,
) -> Expr {
    let Clauses {
        var,
        iter,
        conditions,
    } = clauses;
    node(
        kind(Box::new(Generator {
            element,
            var,
            iter,
            conditions,
        })),
        at,
    )
}

/// A comprehension followed by more items, as in `f(x for x in y, 1)`.
fn not_sole(
    rest: &[Expr],
    trailing_comma: bool,
    at: SimpleSpan,
    emitter: &mut Emitter,
    help: &str,
) {
    if rest.is_empty() && !trailing_comma {
        return;
    }
    emitter.emit(custom(
        Problem::new(
            ProblemKind::Syntax,
            "a comprehension must stand alone between its brackets",
            span(at),
            "more than the comprehension",
        )
        .help(help),
    ));
}

pub(super) fn prefix(op: Option<UnaryOp>, operand: Expr, at: SimpleSpan) -> Expr {
    match op {
        Some(op) => node(
            ExprKind::Unary {
                op,
                operand: Box::new(operand),
            },
            at,
        ),
        None => error_node(at),
    }
}

pub(super) fn binary(op: Option<BinaryOp>, lhs: Expr, rhs: Expr, at: SimpleSpan) -> Expr {
    match op {
        Some(op) => node(
            ExprKind::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            },
            at,
        ),
        None => error_node(at),
    }
}

pub(super) fn logical(op: LogicalOp, lhs: Expr, rhs: Expr, at: SimpleSpan) -> Expr {
    node(
        ExprKind::Logical {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        },
        at,
    )
}
