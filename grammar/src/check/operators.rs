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
/// strings, lists with lists (or `any` with anything). A `bool` orders against a `bool`, but
/// not against an `int` or a `float`: Python allows it (`True` is `1`), yet `flag >= 1` in a
/// spec is a mistake about the field's type, never a deliberate test.
pub(super) fn orderable(lhs: &Type, rhs: &Type) -> bool {
    match (shape(lhs), shape(rhs)) {
        (Type::Any, _) | (_, Type::Any) => true,
        (Type::Bool, Type::Int | Type::Float) | (Type::Int | Type::Float, Type::Bool) => false,
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

/// Whether a value of type `lhs` can ever be equal to one of type `rhs`: `any` with anything,
/// `None` with anything (whether that can hold is [`NoneComparison`](ProblemKind::NoneComparison)'s
/// business), numbers (`bool` included, as in Python) with numbers, otherwise only two values of
/// the same kind. A string never equals a number or a `bool`, a list never equals a scalar.
fn can_equal(lhs: &Type, rhs: &Type) -> bool {
    match (shape(lhs), shape(rhs)) {
        (Type::Any, _) | (_, Type::Any) | (Type::Null, _) | (_, Type::Null) => true,
        (a, b) if is_number(&a) && is_number(&b) => true,
        (Type::String, Type::String)
        | (Type::List(_), Type::List(_))
        | (Type::Record(_), Type::Record(_)) => true,
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

/// A string literal spelling a number on the other side of a number: its span and the number.
fn quoted_number<'a>(
    lhs: &'a Expr,
    lhs_shape: &Type,
    rhs: &'a Expr,
    rhs_shape: &Type,
) -> Option<(Span, &'a str)> {
    if is_number(lhs_shape) && *lhs_shape != Type::Bool {
        numeric_text(rhs).map(|number| (rhs.span, number))
    } else if is_number(rhs_shape) && *rhs_shape != Type::Bool {
        numeric_text(lhs).map(|number| (lhs.span, number))
    } else {
        None
    }
}

/// A string literal on the other side of a `bool`: its span, and `True` / `False` when it
/// spells one (`'true'`, `'False'`).
fn quoted_bool(
    lhs: &Expr,
    lhs_shape: &Type,
    rhs: &Expr,
    rhs_shape: &Type,
) -> Option<(Span, Option<&'static str>)> {
    let literal = match (lhs_shape, rhs_shape) {
        (Type::Bool, Type::String) => rhs,
        (Type::String, Type::Bool) => lhs,
        _ => return None,
    };
    let ExprKind::Str(text) = &literal.kind else {
        return None;
    };
    let spelled = match text.trim().to_ascii_lowercase().as_str() {
        "true" => Some("True"),
        "false" => Some("False"),
        _ => None,
    };
    Some((literal.span, spelled))
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
                if !can_equal(lhs_ty, rhs_ty) {
                    // The types already decide it; an enum's values add nothing.
                    self.never_equal(lhs, lhs_ty, comparison, rhs_ty);
                    return;
                }
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

    /// `==` / `!=` between values of types that are never equal: always `False` (`True`).
    fn never_equal(&mut self, lhs: &Expr, lhs_ty: &Type, comparison: &Comparison, rhs_ty: &Type) {
        let rhs = &comparison.rhs;
        let op = comparison.op.as_str();
        let (a, b) = (text::ty(lhs_ty), text::ty(rhs_ty));
        let outcome = if comparison.op == CompareOp::Eq {
            "`False`"
        } else {
            "`True`"
        };
        let problem = Problem::new(
            ProblemKind::OperandTypes,
            format!("`{op}` between {a} and {b} is always {outcome}: they are never equal"),
            comparison.op_span,
            format!("always {outcome}"),
        )
        .secondary(lhs.span, format!("this is {a}"))
        .secondary(rhs.span, format!("this is {b}"));
        let (lhs_shape, rhs_shape) = (shape(lhs_ty), shape(rhs_ty));
        let problem = if let Some(problem) =
            self.record_instead(problem.clone(), (lhs, lhs_ty), (rhs, rhs_ty), can_equal)
        {
            problem
        } else if let Some((span, number)) = quoted_number(lhs, &lhs_shape, rhs, &rhs_shape) {
            problem
                .help(format!("write the number without quotes: `{number}`"))
                .replacement(span, number)
        } else if let Some((span, written)) = quoted_bool(lhs, &lhs_shape, rhs, &rhs_shape) {
            match written {
                Some(value) => problem
                    .help(format!("write the boolean without quotes: `{value}`"))
                    .replacement(span, value),
                None => problem.help("a `bool` is `True` or `False`: compare with one of them"),
            }
        } else if let Some((value, values)) = lhs_ty
            .enum_values()
            .map(|values| (lhs, values))
            .or_else(|| rhs_ty.enum_values().map(|values| (rhs, values)))
        {
            problem.help(format!(
                "{} is one of {}: compare with one of them",
                text::subject(value),
                text::values(values)
            ))
        } else if (lhs_shape == Type::String && is_number(&rhs_shape))
            || (is_number(&lhs_shape) && rhs_shape == Type::String)
        {
            problem.help(
                "a string never equals a number: convert one side, with `str(...)` to compare \
                 text or `int(...)` to compare numbers",
            )
        } else if let Some((list, value)) = match (&lhs_shape, &rhs_shape) {
            (Type::List(_), other) if !matches!(other, Type::List(_)) => Some((lhs, rhs)),
            (other, Type::List(_)) if !matches!(other, Type::List(_)) => Some((rhs, lhs)),
            _ => None,
        } {
            let not = if comparison.op == CompareOp::Eq {
                ""
            } else {
                "not "
            };
            problem.help(format!(
                "a list never equals a single value; to test whether it holds the value, write \
                 `{} {not}in {}`",
                text::source(value),
                text::source(list)
            ))
        } else {
            problem.help(format!(
                "`{op}` is only ever decided by values of one kind: two numbers, two strings, \
                 two lists or two records"
            ))
        };
        self.report(problem);
    }

    /// When one side is a record (a whole step output, `result`) and the other is not, the
    /// help to compare one of its fields instead, with the fix when exactly one field fits.
    fn record_instead(
        &self,
        problem: Problem,
        (lhs, lhs_ty): (&Expr, &Type),
        (rhs, rhs_ty): (&Expr, &Type),
        fits: fn(&Type, &Type) -> bool,
    ) -> Option<Problem> {
        let (record_side, record, other_ty) = match (shape(lhs_ty), shape(rhs_ty)) {
            (Type::Record(record), other) if !matches!(other, Type::Record(_)) => {
                (lhs, record, rhs_ty)
            }
            (other, Type::Record(record)) if !matches!(other, Type::Record(_)) => {
                (rhs, record, lhs_ty)
            }
            _ => return None,
        };
        let subject = text::subject(record_side);
        let fitting: Vec<&str> = record
            .fields
            .iter()
            .filter(|field| fits(&field.ty, other_ty))
            .map(|field| field.name.as_str())
            .take(3)
            .collect();
        let end = Span {
            start: record_side.span.end,
            end: record_side.span.end,
        };
        Some(match fitting.as_slice() {
            [one] => problem
                .help(format!(
                    "{subject} is a whole record: compare its field `{one}`, as in `{}.{one}`",
                    text::source(record_side)
                ))
                .replacement(end, format!(".{one}")),
            [] => problem.help(format!(
                "{subject} is a whole record, and none of its fields is {}: compare a field \
                 of the right type",
                text::ty(other_ty)
            )),
            several => problem.help(format!(
                "{subject} is a whole record: compare one of its fields, such as {}",
                text::listing(several)
            )),
        })
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
        let record = self.record_instead(problem.clone(), (lhs, lhs_ty), (rhs, rhs_ty), orderable);
        problem = if let Some(record) = record {
            record
        } else if let Some((span, number)) = quoted_number(lhs, &lhs_shape, rhs, &rhs_shape) {
            problem
                .help(format!("write the number without quotes: `{number}`"))
                .replacement(span, number)
        } else if lhs_shape == Type::Null || rhs_shape == Type::Null {
            problem.help("`None` cannot be ordered: test for it first with `is not None`")
        } else if lhs_shape == Type::Bool || rhs_shape == Type::Bool {
            let flag = if lhs_shape == Type::Bool { lhs } else { rhs };
            problem.help(format!(
                "{} is `True` or `False`, not a quantity: test it with `== True` or `== False`, \
                 or compare a numeric field",
                text::subject(flag)
            ))
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
