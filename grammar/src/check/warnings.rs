//! Comparisons decided by their literals: a literal outside an enum's values (an error), a
//! `None` test on a value that cannot be `None` and an expression that reads nothing
//! (warnings).

use super::{Checker, text};
use crate::ast::{CompareOp, Expr, ExprKind, UnaryOp};
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;
use crate::suggest::did_you_mean;
use crate::types::{Literal, Type};

/// The literal an expression spells: a string, a number (negative ones too) or a bool.
fn literal(expr: &Expr) -> Option<Literal> {
    match &expr.kind {
        ExprKind::Str(value) => Some(Literal::Str(value.clone())),
        ExprKind::Int(value) => Some(Literal::Int(*value)),
        ExprKind::Float(value) => Some(Literal::Float(*value)),
        ExprKind::Bool(value) => Some(Literal::Bool(*value)),
        ExprKind::Unary {
            op: UnaryOp::Neg,
            operand,
        } => match operand.kind {
            ExprKind::Int(value) => value.checked_neg().map(Literal::Int),
            ExprKind::Float(value) => Some(Literal::Float(-value)),
            _ => None,
        },
        _ => None,
    }
}

/// What a literal outside an enum's values does to its test.
#[derive(Clone, Copy)]
enum Unmatched<'t> {
    /// The test is always this (`"`==` is always `False` here"`).
    Always(&'t str),
    /// One item of a literal list that never matches, and the span that removes it with its
    /// comma (`None` when it is the only item).
    Item(Option<Span>),
}

impl Checker<'_> {
    /// `value == literal` (either way round) where `value` is an enum without that literal.
    pub(super) fn enum_equality(
        &mut self,
        lhs: &Expr,
        lhs_ty: &Type,
        op: CompareOp,
        rhs: &Expr,
        rhs_ty: &Type,
    ) {
        let always = if op == CompareOp::Eq {
            "`==` is always `False` here"
        } else {
            "`!=` is always `True` here"
        };
        if let Some(values) = lhs_ty.enum_values() {
            self.enum_literal(lhs, values, rhs, Unmatched::Always(always));
        } else if let Some(values) = rhs_ty.enum_values() {
            self.enum_literal(rhs, values, lhs, Unmatched::Always(always));
        }
    }

    /// `value in [literals]` where `value` is an enum, and `literal in values` where `values`
    /// is a list of an enum.
    pub(super) fn enum_membership(&mut self, lhs: &Expr, lhs_ty: &Type, rhs: &Expr, rhs_ty: &Type) {
        if let Some(values) = lhs_ty.enum_values() {
            if let ExprKind::List(items) | ExprKind::Tuple(items) = &rhs.kind {
                // A tuple of two would become a parenthesised string, which `in` searches.
                let removable = matches!(rhs.kind, ExprKind::List(_)) || items.len() > 2;
                for (index, item) in items.iter().enumerate() {
                    // The item and the comma before it (after it, for the first): removing
                    // them changes nothing, since the item never matches.
                    let removal = match (
                        index.checked_sub(1).and_then(|i| items.get(i)),
                        items.get(index + 1),
                    ) {
                        (Some(before), _) => {
                            Some(Span::new(before.span.end as usize, item.span.end as usize))
                        }
                        (None, Some(after)) => Some(Span::new(
                            item.span.start as usize,
                            after.span.start as usize,
                        )),
                        (None, None) => None,
                    };
                    let removal = removal.filter(|_| removable);
                    self.enum_literal(lhs, values, item, Unmatched::Item(removal));
                }
            }
        } else if let Type::List(item) = rhs_ty.non_optional()
            && let Some(values) = item.enum_values()
        {
            self.enum_literal_in_items(rhs, values, lhs);
        }
    }

    fn enum_literal(
        &mut self,
        value: &Expr,
        values: &[Literal],
        candidate: &Expr,
        unmatched: Unmatched<'_>,
    ) {
        let message = |literal: &Literal| {
            format!(
                "{} is never `{literal}`: its values are {}",
                text::subject(value),
                text::values(values)
            )
        };
        let secondary = || format!("this is {}", text::ty(&Type::enumeration(values.to_vec())));
        self.enum_warning(value, values, candidate, unmatched, message, secondary);
    }

    /// `literal in items` where the items are of an enum type.
    fn enum_literal_in_items(&mut self, items: &Expr, values: &[Literal], candidate: &Expr) {
        let message = |literal: &Literal| {
            format!(
                "no item of {} is ever `{literal}`: the items' values are {}",
                text::subject(items),
                text::values(values)
            )
        };
        let secondary = || {
            format!(
                "this is {}",
                text::ty(&Type::list(Type::enumeration(values.to_vec())))
            )
        };
        self.enum_warning(
            items,
            values,
            candidate,
            Unmatched::Always("`in` is never true here"),
            message,
            secondary,
        );
    }

    fn enum_warning(
        &mut self,
        value: &Expr,
        values: &[Literal],
        candidate: &Expr,
        unmatched: Unmatched<'_>,
        message: impl Fn(&Literal) -> String,
        secondary: impl FnOnce() -> String,
    ) {
        let Some(literal) = literal(candidate) else {
            return;
        };
        if values.iter().any(|known| known.same_value(&literal)) {
            return;
        }
        let problem = Problem::new(
            ProblemKind::EnumLiteral,
            message(&literal),
            candidate.span,
            "not one of its values",
        )
        .secondary(value.span, secondary());
        let suggestion = match &literal {
            Literal::Str(written) => {
                let strings: Vec<&str> = values
                    .iter()
                    .filter_map(|value| match value {
                        Literal::Str(value) => Some(value.as_str()),
                        _ => None,
                    })
                    .collect();
                did_you_mean(written, strings.iter().copied())
                    .map(|best| Literal::Str(best.to_owned()))
            }
            _ => None,
        };
        let problem = match (suggestion, unmatched) {
            (Some(best), _) => problem
                .help(format!("did you mean `{best}`?"))
                .replacement(candidate.span, best.to_string()),
            (None, Unmatched::Item(Some(removal))) => problem
                .help(format!(
                    "this item never matches: remove `{literal}` from the list, or add it to \
                     the values if it can be one"
                ))
                .replacement(removal, ""),
            (None, Unmatched::Item(None)) => problem.help(format!(
                "this item never matches, so the test is always `False`: compare with one of \
                 the values, or add `{literal}` to them if it can be one"
            )),
            (None, Unmatched::Always(always)) => problem.help(format!(
                "{always}: compare with one of the values, or add `{literal}` to them if it can \
                 be one"
            )),
        };
        self.report(problem);
    }

    /// `value == None`, `value is not None`, … where `value` cannot be `None`.
    pub(super) fn none_comparison(
        &mut self,
        lhs: &Expr,
        lhs_ty: &Type,
        op: CompareOp,
        rhs: &Expr,
        rhs_ty: &Type,
    ) {
        let (value, ty) = match (&lhs.kind, &rhs.kind) {
            (_, ExprKind::None) => (lhs, lhs_ty),
            (ExprKind::None, _) => (rhs, rhs_ty),
            _ => return,
        };
        if ty.can_be_none() {
            return;
        }
        let outcome = match op {
            CompareOp::Eq | CompareOp::Is => "`False`",
            _ => "`True`",
        };
        let shown = text::ty(ty);
        self.report(
            Problem::new(
                ProblemKind::NoneComparison,
                format!(
                    "{} is never `None`: its type is {shown}",
                    text::subject(value)
                ),
                value.span,
                format!("this is {shown}"),
            )
            .help(format!(
                "the test is always {outcome}: remove it, or make the type optional if the value \
                 can be missing"
            )),
        );
    }

    /// The whole expression reads no name, no `$`-reference and no file.
    pub(super) fn constant(&mut self, expr: &Expr) {
        // `result` is the name an `ensure` is about: name it alone when it is there.
        let names: Vec<&str> = if self.env.names.contains_key("result") {
            vec!["result"]
        } else {
            self.env.names.keys().map(String::as_str).take(3).collect()
        };
        let help = match names.as_slice() {
            [] => "it reads no input, so it always has the same value".to_owned(),
            [one] => {
                format!("it does not read `{one}` or any input, so it always has the same value")
            }
            [init @ .., last] => {
                let init: Vec<String> = init.iter().map(|name| format!("`{name}`")).collect();
                format!(
                    "it does not read {}, `{last}` or any input, so it always has the same value",
                    init.join(", ")
                )
            }
        };
        self.report(
            Problem::new(
                ProblemKind::ConstantExpression,
                "this expression is constant",
                expr.span,
                "always the same value",
            )
            .help(help),
        );
    }
}
