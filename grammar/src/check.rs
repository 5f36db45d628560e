//! The type checker: an expression's AST against an [`Env`] of typed names gives the
//! expression's [`Type`] and the [`Problem`]s found.
//!
//! The checker is gradual: `any` is the escape hatch, and every operation on an `any` value
//! (a field, an index, a method, an operator) is allowed and gives `any`. It never stops at the
//! first problem: a node with an error is typed `any` and checking goes on, so one mistake is
//! reported once, not again by everything around it. `ExprKind::Error` nodes (where the parser
//! recovered, having reported the error) are typed `any` silently.
//!
//! Rules worth knowing beyond the obvious ones:
//!
//! - An optional value `T?` is checked as `T`: whether it is `None` is a run-time matter. Only
//!   the [`NoneComparison`](ProblemKind::NoneComparison) warning looks at optionality. Reading
//!   into an optional value (a field, an index, a method) gives an optional result: `x.a` is
//!   `int?` when `x` is `{a: int}?`.
//! - An enum is checked as the type of its values (`string` for `'low' | 'high'`).
//! - `bool` counts as `int` in arithmetic and ordering, as in Python.
//! - A generator (`t.passed for t in result.tests`) is typed `list<T>` (its recorded type); it
//!   is accepted only where an iterable is (`any`, `all`, `min`, `max`, `string.join`).
//! - Built-in calls with the wrong number or types of arguments are
//!   [`CallArguments`](ProblemKind::CallArguments); methods called with the wrong number or
//!   types of arguments are [`UnknownMethod`](ProblemKind::UnknownMethod), as for a method the
//!   receiver lacks.
//! - `record.get('x')` with a literal key checks `x` like `record.x` (an unknown field of a
//!   closed record is an error).
//!
//! Problems come sorted by span (start, then end). Besides the type of the whole expression,
//! [`Checked::types`] holds the type of every node (and of every generator variable and
//! `$`-reference prefix), for tooling such as hover.

mod access;
mod calls;
mod methods;
mod names;
mod operators;
mod text;
mod warnings;

use crate::ast::{Expr, ExprKind, Generator};
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;
use crate::types::{Env, Type};

/// What checking an expression found.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The expression's type (`any` where an error left it unknown).
    pub ty: Type,
    /// Errors and warnings, sorted by span.
    pub problems: Vec<Problem>,
    /// The type of every node, in the order checked (children before their parent), with
    /// generator variables (at the variable's span) and the prefixes of `$`-references
    /// (`$.input.a` in `$.input.a.b`). A generator's own entry is `list<T>`.
    pub types: Vec<(Span, Type)>,
}

impl Checked {
    /// Whether any problem is an error (rather than a warning).
    pub fn has_errors(&self) -> bool {
        self.problems.iter().any(Problem::is_error)
    }
}

/// Checks `expr` against the names, input and step outputs of `env`.
pub fn check(expr: &Expr, env: &Env) -> Checked {
    let mut checker = Checker {
        env,
        scope: Vec::new(),
        problems: Vec::new(),
        types: Vec::new(),
        reads_input: false,
    };
    let ty = checker.expr(expr);
    if !checker.reads_input {
        checker.constant(expr);
    }
    let mut problems = checker.problems;
    problems.sort_by_key(|problem| problem.span);
    problems.dedup();
    Checked {
        ty,
        problems,
        types: checker.types,
    }
}

struct Checker<'e> {
    env: &'e Env,
    /// The generator variables in scope, innermost last.
    scope: Vec<(String, Type)>,
    problems: Vec<Problem>,
    types: Vec<(Span, Type)>,
    /// Whether the expression reads a free name, a `$`-reference or a file (or contains an
    /// error, which makes a constant warning noise).
    reads_input: bool,
}

/// What a value is for the operators: optionals looked through, enums widened to the type of
/// their values. Never `Optional` or `Enum`.
fn shape(ty: &Type) -> Type {
    ty.non_optional().widened()
}

fn is_number(ty: &Type) -> bool {
    matches!(ty, Type::Int | Type::Float | Type::Bool)
}

/// Whether the value may be used as a string: a string, a string enum or `any`.
fn is_stringy(ty: &Type) -> bool {
    matches!(shape(ty), Type::String | Type::Any)
}

/// Whether the value may be used as an index into a list: an `int`, a `bool` or `any`.
fn is_integer(ty: &Type) -> bool {
    matches!(shape(ty), Type::Int | Type::Bool | Type::Any)
}

/// How a field was named, for the did-you-mean replacement: `r.name` or `r['name']`.
#[derive(Clone, Copy)]
enum FieldSyntax {
    Attribute,
    Key,
}

impl Checker<'_> {
    fn report(&mut self, problem: Problem) {
        self.problems.push(problem);
    }

    fn expr(&mut self, expr: &Expr) -> Type {
        let ty = match &expr.kind {
            ExprKind::None => Type::Null,
            ExprKind::Bool(_) => Type::Bool,
            ExprKind::Int(_) => Type::Int,
            ExprKind::Float(_) => Type::Float,
            ExprKind::Str(_) => Type::String,
            ExprKind::List(items) | ExprKind::Tuple(items) => {
                let types: Vec<Type> = items.iter().map(|item| self.expr(item)).collect();
                let mut types = types.into_iter();
                let item = types
                    .next()
                    .map(|first| types.fold(first, |joined, ty| joined.join(&ty)))
                    .unwrap_or(Type::Any);
                Type::list(item)
            }
            ExprKind::Name(ident) => self.name(ident),
            ExprKind::Ref(reference) => self.reference(reference, expr.span),
            ExprKind::Attr { base, name } => {
                let base_ty = self.expr(base);
                self.attribute(base, &base_ty, name)
            }
            ExprKind::Index { base, index } => {
                let base_ty = self.expr(base);
                let index_ty = self.expr(index);
                self.index(base, &base_ty, index, &index_ty)
            }
            ExprKind::Call { func, args } => self.call(func, args, expr.span),
            ExprKind::Method {
                receiver,
                name,
                args,
            } => self.method(receiver, name, args, expr.span),
            ExprKind::Generator(generator) | ExprKind::ListComp(generator) => {
                Type::list(self.generator(generator))
            }
            ExprKind::Unary { op, operand } => self.unary(*op, operand, expr.span),
            ExprKind::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, expr.span),
            ExprKind::Logical { lhs, rhs, .. } => {
                let lhs = self.expr(lhs);
                let rhs = self.expr(rhs);
                lhs.join(&rhs)
            }
            ExprKind::Compare { first, rest } => self.compare(first, rest),
            ExprKind::Conditional {
                then,
                condition,
                otherwise,
            } => {
                let then = self.expr(then);
                self.expr(condition);
                let otherwise = self.expr(otherwise);
                then.join(&otherwise)
            }
            ExprKind::Error => {
                self.reads_input = true;
                Type::Any
            }
        };
        self.types.push((expr.span, ty.clone()));
        ty
    }

    /// Checks a generator's clauses and gives the type of its element.
    fn generator(&mut self, generator: &Generator) -> Type {
        let iter_ty = self.expr(&generator.iter);
        let item = match iter_ty.element_type() {
            Some(item) => item,
            None => {
                let shown = text::ty(&iter_ty);
                self.report(
                    Problem::new(
                        ProblemKind::OperandTypes,
                        format!("cannot iterate over {shown}"),
                        generator.iter.span,
                        format!("this is {shown}"),
                    )
                    .help("a generator goes over a list's items, a string's characters or a record's keys"),
                );
                Type::Any
            }
        };
        self.types.push((generator.var.span, item.clone()));
        self.scope.push((generator.var.name.clone(), item));
        for condition in &generator.conditions {
            self.expr(condition);
        }
        let element = self.expr(&generator.element);
        self.scope.pop();
        element
    }
}

#[cfg(test)]
mod tests;
