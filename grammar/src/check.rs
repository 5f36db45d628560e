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

mod calls;
mod operators;
mod text;
mod warnings;

use crate::ast::{Expr, ExprKind, Generator, Ident, RefRoot, Reference};
use crate::builtins;
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;
use crate::suggest::did_you_mean;
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

    /// The names a free name could have meant: generator variables, then the environment's.
    fn names_in_scope(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for (name, _) in self.scope.iter().rev() {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        for name in self.env.names.keys() {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        names
    }

    /// "the names available here are `result` and `item`".
    fn available_names(&self) -> String {
        let names = self.names_in_scope();
        match names.len() {
            0 => "no names are available here".to_owned(),
            1 => format!("the only name available here is {}", text::listing(&names)),
            _ => format!("the names available here are {}", text::listing(&names)),
        }
    }

    fn name(&mut self, ident: &Ident) -> Type {
        if let Some((_, ty)) = self
            .scope
            .iter()
            .rev()
            .find(|(name, _)| *name == ident.name)
        {
            return ty.clone();
        }
        self.reads_input = true;
        if let Some(ty) = self.env.names.get(&ident.name) {
            return ty.clone();
        }
        let name = ident.name.as_str();
        let problem = Problem::new(
            ProblemKind::UnknownName,
            format!("unknown name `{name}`"),
            ident.span,
            "not defined here",
        );
        let mut candidates = self.names_in_scope();
        candidates.extend(["None", "True", "False"]);
        let problem = if let Some(best) = did_you_mean(name, candidates.iter().copied()) {
            problem
                .help(format!("did you mean `{best}`?"))
                .replacement(ident.span, best)
        } else if name == "input" && self.env.input.is_some() {
            problem
                .help("the workflow's input is `$.input`")
                .replacement(ident.span, "$.input")
        } else if builtins::function_named(name).is_some() {
            problem.help(format!(
                "`{name}` is a built-in function: call it, as in `{name}(...)`"
            ))
        } else {
            problem.help(self.available_names())
        };
        self.report(problem);
        Type::Any
    }

    fn reference(&mut self, reference: &Reference, span: Span) -> Type {
        self.reads_input = true;
        // Where the root (`$.input`, `$.steps.x.output`) ends: just before the first field's
        // dot, or the whole reference.
        let root_end = reference.path.first().map_or(span.end, |field| {
            field.span.start.saturating_sub(1).max(span.start)
        });
        let root_span = Span {
            start: span.start,
            end: root_end,
        };
        let root_ty = match &reference.root {
            RefRoot::Input => match &self.env.input {
                Some(ty) => ty.clone(),
                None => {
                    self.report(
                        Problem::new(
                            ProblemKind::UnknownName,
                            "`$.input` is not available here",
                            root_span,
                            "not available here",
                        )
                        .help(format!(
                            "the workflow's input cannot be read here; {}",
                            self.available_names()
                        )),
                    );
                    return Type::Any;
                }
            },
            RefRoot::StepOutput { step } => match self.env.steps.get(&step.name) {
                Some(ty) => ty.clone(),
                None => {
                    self.unknown_step(step);
                    return Type::Any;
                }
            },
        };
        let mut ty = root_ty;
        let mut base_span = root_span;
        for (i, field) in reference.path.iter().enumerate() {
            let prefix = reference.path.get(..i).unwrap_or(&[]);
            let subject = format!("`{}`", text::reference_prefix(&reference.root, prefix));
            ty = self.field(&subject, base_span, &ty, field, FieldSyntax::Attribute);
            base_span = Span {
                start: span.start,
                end: field.span.end,
            };
            if i + 1 < reference.path.len() {
                self.types.push((base_span, ty.clone()));
            }
        }
        ty
    }

    fn unknown_step(&mut self, step: &Ident) {
        let name = step.name.as_str();
        let problem = Problem::new(
            ProblemKind::UnknownName,
            format!("unknown step `{name}` in `$.steps.{name}.output`"),
            step.span,
            "no such step here",
        );
        let steps: Vec<&str> = self.env.steps.keys().map(String::as_str).collect();
        let problem = match did_you_mean(name, steps.iter().copied()) {
            Some(best) => problem
                .help(format!("did you mean `{best}`?"))
                .replacement(step.span, best),
            None if steps.is_empty() => problem.help("no step outputs can be read here"),
            None => problem.help(format!(
                "the steps whose output can be read here are {}",
                text::listing(&steps)
            )),
        };
        self.report(problem);
    }

    fn attribute(&mut self, base: &Expr, base_ty: &Type, name: &Ident) -> Type {
        let subject = text::subject(base);
        self.field(&subject, base.span, base_ty, name, FieldSyntax::Attribute)
    }

    /// The field `name` of a value of type `ty`: `subject` (already in backticks) and
    /// `base_span` say what the value is in messages.
    fn field(
        &mut self,
        subject: &str,
        base_span: Span,
        ty: &Type,
        name: &Ident,
        syntax: FieldSyntax,
    ) -> Type {
        match ty {
            Type::Any => Type::Any,
            Type::Optional(inner) => self
                .field(subject, base_span, inner, name, syntax)
                .optional(),
            Type::Record(record) => match record.field(&name.name) {
                Some(ty) => ty.clone(),
                None if record.open => Type::Any,
                None => {
                    self.unknown_field(subject, base_span, record, name, syntax);
                    Type::Any
                }
            },
            Type::Enum(_) if ty.widened() == Type::Any => Type::Any,
            other => {
                self.no_fields(subject, base_span, other, name, syntax);
                Type::Any
            }
        }
    }

    fn unknown_field(
        &mut self,
        subject: &str,
        base_span: Span,
        record: &crate::types::Record,
        name: &Ident,
        syntax: FieldSyntax,
    ) {
        let field = name.name.as_str();
        let problem = Problem::new(
            ProblemKind::UnknownField,
            format!("unknown field `{field}` on {subject}"),
            name.span,
            "unknown field",
        )
        .secondary(
            base_span,
            format!("this is {}", text::ty(&Type::Record(record.clone()))),
        );
        let names: Vec<&str> = record.fields.iter().map(|f| f.name.as_str()).collect();
        let problem = match did_you_mean(field, names.iter().copied()) {
            Some(best) => {
                let replacement = match syntax {
                    FieldSyntax::Attribute => best.to_owned(),
                    FieldSyntax::Key => crate::print::string_literal(best),
                };
                problem
                    .help(format!("did you mean `{best}`?"))
                    .replacement(name.span, replacement)
            }
            None if record.fields.is_empty() => {
                problem.help(format!("{subject} is a record with no fields"))
            }
            None => {
                let fields: Vec<String> = record
                    .fields
                    .iter()
                    .map(|f| format!("{}: {}", f.name, f.ty))
                    .collect();
                problem.help(format!(
                    "the fields of {subject} are {}",
                    text::listing(&fields)
                ))
            }
        };
        self.report(problem);
    }

    fn no_fields(
        &mut self,
        subject: &str,
        base_span: Span,
        ty: &Type,
        name: &Ident,
        syntax: FieldSyntax,
    ) {
        let field = name.name.as_str();
        let shown = text::ty(ty);
        let problem = Problem::new(
            ProblemKind::OperandTypes,
            format!("{subject} is {shown}, which has no fields"),
            name.span,
            format!("{shown} has no fields"),
        )
        .secondary(base_span, format!("this is {shown}"));
        let method =
            calls::receiver(ty).and_then(|receiver| builtins::method_named(receiver, field));
        let problem = match (syntax, ty, method) {
            (FieldSyntax::Attribute, _, Some(method)) if method.max_args == 0 => problem
                .help(format!("`{field}` is a method: call it, as in `{field}()`"))
                .replacement(name.span, format!("{field}()")),
            (FieldSyntax::Attribute, _, Some(method)) => problem.help(format!(
                "`{field}` is a method: call it, as in `{}`",
                method.signature
            )),
            (_, Type::List(item), _)
                if matches!(item.non_optional(), Type::Record(_) | Type::Any) =>
            {
                let list = subject
                    .strip_prefix('`')
                    .and_then(|rest| rest.strip_suffix('`'))
                    .unwrap_or("...");
                problem.help(format!(
                    "a list has no fields; to read `{field}` of every item, write \
                     `[x.{field} for x in {list}]`"
                ))
            }
            _ => problem.help("only records have fields"),
        };
        self.report(problem);
    }

    fn index(&mut self, base: &Expr, base_ty: &Type, index: &Expr, index_ty: &Type) -> Type {
        let ty = match base_ty.non_optional() {
            Type::Any => Type::Any,
            Type::Record(_) => match &index.kind {
                ExprKind::Str(key) => {
                    let name = Ident {
                        name: key.clone(),
                        span: index.span,
                    };
                    let subject = text::subject(base);
                    self.field(
                        &subject,
                        base.span,
                        base_ty.non_optional(),
                        &name,
                        FieldSyntax::Key,
                    )
                }
                _ if is_stringy(index_ty) => Type::Any,
                _ => {
                    self.bad_index(base, base_ty, index, index_ty, "a field name (`string`)");
                    Type::Any
                }
            },
            Type::List(item) => {
                if !is_integer(index_ty) {
                    self.bad_index(base, base_ty, index, index_ty, "a position (`int`)");
                }
                item.as_ref().clone()
            }
            other if shape(other) == Type::String => {
                if !is_integer(index_ty) {
                    self.bad_index(base, base_ty, index, index_ty, "a position (`int`)");
                }
                Type::String
            }
            other if shape(other) == Type::Any => Type::Any,
            other => {
                let shown = text::ty(other);
                self.report(
                    Problem::new(
                        ProblemKind::OperandTypes,
                        format!(
                            "{} is {shown}, which cannot be indexed",
                            text::subject(base)
                        ),
                        base.span,
                        format!("this is {shown}"),
                    )
                    .help("only lists, strings and records can be indexed"),
                );
                Type::Any
            }
        };
        if base_ty.is_optional() {
            ty.optional()
        } else {
            ty
        }
    }

    fn bad_index(&mut self, base: &Expr, base_ty: &Type, index: &Expr, index_ty: &Type, by: &str) {
        let base_shown = text::ty(base_ty.non_optional());
        let index_shown = text::ty(index_ty);
        let help = if by.contains("int") {
            if shape(index_ty) == Type::Float {
                "convert the index with `int(...)`".to_owned()
            } else {
                format!("index {} by a position, as in `[0]`", text::subject(base))
            }
        } else {
            format!(
                "read a field by its name, as in `{}['name']`",
                text::source(base)
            )
        };
        self.report(
            Problem::new(
                ProblemKind::OperandTypes,
                format!("{base_shown} is indexed by {by}, not by {index_shown}"),
                index.span,
                format!("this is {index_shown}"),
            )
            .secondary(base.span, format!("this is {base_shown}"))
            .help(help),
        );
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
