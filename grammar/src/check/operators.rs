//! Unary and binary operators, and comparison chains.

use super::{Checker, is_number, is_stringy, shape, text};
use crate::ast::{BinaryOp, CompareOp, Comparison, Expr, ExprKind, UnaryOp};
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;
use crate::types::Type;

/// The type of `lhs op rhs` for an arithmetic operator, `None` when Python would raise a
/// `TypeError`.
fn arithmetic(op: BinaryOp, lhs: &Type, rhs: &Type) -> Option<Type> {
    let is_int = |ty: &Type| matches!(ty, Type::Int | Type::Bool);
    match (shape(lhs), shape(rhs)) {
        (Type::Any, _) | (_, Type::Any) => Some(Type::Any),
        (a, b) if is_number(&a) && is_number(&b) => Some(match op {
            BinaryOp::Div => Type::Float,
            _ if is_int(&a) && is_int(&b) => Type::Int,
            _ => Type::Float,
        }),
        (Type::String, Type::String) if op == BinaryOp::Add => Some(Type::String),
        (Type::List(a), Type::List(b)) if op == BinaryOp::Add => Some(Type::list(a.join(&b))),
        (Type::String, n) | (n, Type::String) if op == BinaryOp::Mul && is_int(&n) => {
            Some(Type::String)
        }
        (Type::List(item), n) | (n, Type::List(item)) if op == BinaryOp::Mul && is_int(&n) => {
            Some(Type::List(item))
        }
        _ => None,
    }
}

/// Whether `<`, `<=`, `>`, `>=` may compare the two: numbers with numbers, strings with
/// strings, lists with lists (or `any` with anything).
pub(super) fn orderable(lhs: &Type, rhs: &Type) -> bool {
    match (shape(lhs), shape(rhs)) {
        (Type::Any, _) | (_, Type::Any) => true,
        (a, b) if is_number(&a) && is_number(&b) => true,
        (Type::String, Type::String) | (Type::List(_), Type::List(_)) => true,
        _ => false,
    }
}

/// Whether a value of type `value` can ever equal an item of type `item` (for `in`): `any`
/// with anything, numbers with numbers, `None` with optional items, otherwise the same kind.
fn can_contain(item: &Type, value: &Type) -> bool {
    if matches!(value, Type::Null) {
        return item.can_be_none();
    }
    match (shape(item), shape(value)) {
        (Type::Any, _) | (_, Type::Any) => true,
        (a, b) if is_number(&a) && is_number(&b) => true,
        (Type::String, Type::String)
        | (Type::List(_), Type::List(_))
        | (Type::Record(_), Type::Record(_)) => true,
        (Type::Null, _) => true,
        _ => false,
    }
}

/// The literal number a string literal spells, if any: `"5"` → `5`.
fn numeric_text(expr: &Expr) -> Option<&str> {
    match &expr.kind {
        ExprKind::Str(text) if text.trim().parse::<f64>().is_ok_and(f64::is_finite) => {
            Some(text.trim())
        }
        _ => None,
    }
}

impl Checker<'_> {
    pub(super) fn unary(&mut self, op: UnaryOp, operand: &Expr, span: Span) -> Type {
        let ty = self.expr(operand);
        if op == UnaryOp::Not {
            return Type::Bool;
        }
        match shape(&ty) {
            Type::Any => Type::Any,
            Type::Int | Type::Bool => Type::Int,
            Type::Float => Type::Float,
            _ => {
                let shown = text::ty(&ty);
                let op = op.as_str();
                self.report(
                    Problem::new(
                        ProblemKind::OperandTypes,
                        format!("cannot use unary `{op}` on {shown}"),
                        span,
                        format!("unary `{op}` needs a number"),
                    )
                    .secondary(operand.span, format!("this is {shown}"))
                    .help(format!("unary `{op}` works on numbers only")),
                );
                Type::Any
            }
        }
    }

    pub(super) fn binary(&mut self, op: BinaryOp, lhs: &Expr, rhs: &Expr, span: Span) -> Type {
        let lhs_ty = self.expr(lhs);
        let rhs_ty = self.expr(rhs);
        if let Some(ty) = arithmetic(op, &lhs_ty, &rhs_ty) {
            return ty;
        }
        let (a, b) = (text::ty(&lhs_ty), text::ty(&rhs_ty));
        let symbol = op.as_str();
        let (lhs_shape, rhs_shape) = (shape(&lhs_ty), shape(&rhs_ty));
        let help = if lhs_shape == Type::Null || rhs_shape == Type::Null {
            "`None` cannot take part in arithmetic: test for it first with `is not None`".to_owned()
        } else {
            match op {
                BinaryOp::Add
                    if (lhs_shape == Type::String && is_number(&rhs_shape))
                        || (is_number(&lhs_shape) && rhs_shape == Type::String) =>
                {
                    "to join text, convert the number with `str(...)`; to add numbers, \
                     convert the text with `int(...)`"
                        .to_owned()
                }
                BinaryOp::Add => {
                    "`+` adds two numbers, or joins two strings or two lists".to_owned()
                }
                BinaryOp::Mul => "`*` multiplies two numbers, or repeats a string or a list an \
                                  `int` number of times"
                    .to_owned(),
                _ => format!("`{symbol}` works on numbers only"),
            }
        };
        self.report(
            Problem::new(
                ProblemKind::OperandTypes,
                format!("cannot use `{symbol}` on {a} and {b}"),
                span,
                format!("{a} {symbol} {b}"),
            )
            .secondary(lhs.span, format!("this is {a}"))
            .secondary(rhs.span, format!("this is {b}"))
            .help(help),
        );
        Type::Any
    }

    pub(super) fn compare(&mut self, first: &Expr, rest: &[Comparison]) -> Type {
        let mut lhs = first;
        let mut lhs_ty = self.expr(first);
        for comparison in rest {
            let rhs_ty = self.expr(&comparison.rhs);
            self.comparison(lhs, &lhs_ty, comparison, &rhs_ty);
            lhs = &comparison.rhs;
            lhs_ty = rhs_ty;
        }
        Type::Bool
    }

    fn comparison(&mut self, lhs: &Expr, lhs_ty: &Type, comparison: &Comparison, rhs_ty: &Type) {
        let rhs = &comparison.rhs;
        match comparison.op {
            CompareOp::Eq | CompareOp::Ne => {
                self.enum_equality(lhs, lhs_ty, comparison.op, rhs, rhs_ty);
                self.none_comparison(lhs, lhs_ty, comparison.op, rhs, rhs_ty);
            }
            CompareOp::Lt | CompareOp::Le | CompareOp::Gt | CompareOp::Ge => {
                if !orderable(lhs_ty, rhs_ty) {
                    self.not_orderable(lhs, lhs_ty, comparison, rhs_ty);
                }
            }
            CompareOp::In | CompareOp::NotIn => {
                self.membership(lhs, lhs_ty, comparison, rhs_ty);
                self.enum_membership(lhs, lhs_ty, rhs, rhs_ty);
            }
            CompareOp::Is | CompareOp::IsNot => {
                if matches!(rhs.kind, ExprKind::None | ExprKind::Bool(_)) {
                    self.none_comparison(lhs, lhs_ty, comparison.op, rhs, rhs_ty);
                } else {
                    let (op, instead) = if comparison.op == CompareOp::Is {
                        ("is", "==")
                    } else {
                        ("is not", "!=")
                    };
                    self.report(
                        Problem::new(
                            ProblemKind::OperandTypes,
                            format!("`{op}` compares identity, not values"),
                            comparison.op_span,
                            format!("use `{instead}` here"),
                        )
                        .secondary(
                            rhs.span,
                            "`is` is only reliable with `None`, `True` or `False`",
                        )
                        .help(format!("use `{instead}` to compare values"))
                        .replacement(comparison.op_span, instead),
                    );
                }
            }
        }
    }

    fn not_orderable(&mut self, lhs: &Expr, lhs_ty: &Type, comparison: &Comparison, rhs_ty: &Type) {
        let rhs = &comparison.rhs;
        let op = comparison.op.as_str();
        let (a, b) = (text::ty(lhs_ty), text::ty(rhs_ty));
        let (lhs_shape, rhs_shape) = (shape(lhs_ty), shape(rhs_ty));
        let mut problem = Problem::new(
            ProblemKind::OperandTypes,
            format!("cannot compare {a} with {b} using `{op}`"),
            comparison.op_span,
            "these cannot be ordered",
        )
        .secondary(lhs.span, format!("this is {a}"))
        .secondary(rhs.span, format!("this is {b}"));
        let quoted_number = if is_number(&lhs_shape) {
            numeric_text(rhs).map(|number| (rhs.span, number))
        } else if is_number(&rhs_shape) {
            numeric_text(lhs).map(|number| (lhs.span, number))
        } else {
            None
        };
        problem = if let Some((span, number)) = quoted_number {
            problem
                .help(format!("write the number without quotes: `{number}`"))
                .replacement(span, number)
        } else if lhs_shape == Type::Null || rhs_shape == Type::Null {
            problem.help("`None` cannot be ordered: test for it first with `is not None`")
        } else if (lhs_shape == Type::String && is_number(&rhs_shape))
            || (is_number(&lhs_shape) && rhs_shape == Type::String)
        {
            let text_side = if lhs_shape == Type::String { lhs } else { rhs };
            if matches!(text_side.kind, ExprKind::Str(_)) {
                problem.help(format!(
                    "`{op}` orders two numbers or two strings, and {} is not a number: compare \
                     with a number",
                    text::subject(text_side)
                ))
            } else {
                problem.help(format!(
                    "`{op}` orders two numbers or two strings; convert a numeric string with \
                     `int(...)`"
                ))
            }
        } else {
            problem.help(format!(
                "`{op}` orders two numbers, two strings or two lists"
            ))
        };
        self.report(problem);
    }

    fn membership(&mut self, lhs: &Expr, lhs_ty: &Type, comparison: &Comparison, rhs_ty: &Type) {
        let rhs = &comparison.rhs;
        let op = comparison.op.as_str();
        let never = if comparison.op == CompareOp::In {
            "never true"
        } else {
            "always true"
        };
        let (a, b) = (text::ty(lhs_ty), text::ty(rhs_ty));
        let mismatch = |message: String, help: String| {
            Problem::new(
                ProblemKind::OperandTypes,
                message,
                comparison.op_span,
                never,
            )
            .secondary(lhs.span, format!("this is {a}"))
            .secondary(rhs.span, format!("this is {b}"))
            .help(help)
        };
        let problem = match shape(rhs_ty) {
            Type::Any => None,
            Type::String if is_stringy(lhs_ty) => None,
            Type::String => Some(mismatch(
                format!("`{op}` on a string needs a string on its left, found {a}"),
                "convert the value with `str(...)` to look for its text".to_owned(),
            )),
            Type::Record(_) if is_stringy(lhs_ty) => None,
            Type::Record(_) => Some(mismatch(
                format!("cannot look for {a} among a record's keys, which are strings"),
                "`in` on a record tests whether it has a field of that name".to_owned(),
            )),
            Type::List(item) if can_contain(&item, lhs_ty) => None,
            Type::List(item) => {
                let item_shape = shape(&item);
                let help = if item_shape == Type::String && is_number(&shape(lhs_ty)) {
                    "the items are strings: convert the value with `str(...)`".to_owned()
                } else if is_number(&item_shape) && shape(lhs_ty) == Type::String {
                    "the items are numbers: convert the value with `int(...)`".to_owned()
                } else {
                    format!("the items are {}", text::ty(&item))
                };
                Some(mismatch(format!("cannot look for {a} in {b}"), help))
            }
            _ => {
                let instead = if comparison.op == CompareOp::In {
                    "=="
                } else {
                    "!="
                };
                let problem = Problem::new(
                    ProblemKind::OperandTypes,
                    format!("`{op}` needs a string, list or record on its right, found {b}"),
                    rhs.span,
                    format!("this is {b}"),
                )
                .secondary(
                    comparison.op_span,
                    format!("`{op}` looks for a value in a collection"),
                );
                Some(if is_number(&shape(rhs_ty)) && is_number(&shape(lhs_ty)) {
                    problem
                        .help(format!("to compare two numbers, use `{instead}`"))
                        .replacement(comparison.op_span, instead)
                } else {
                    problem.help(format!(
                        "`{op}` looks for a value in a list, a substring in a string, or a key in a record"
                    ))
                })
            }
        };
        if let Some(problem) = problem {
            self.report(problem);
        }
    }
}
