//! Method calls, against the catalogue in [`crate::builtins`].

use super::calls::{Callee, as_receiver, receiver};
use super::{Checker, FieldSyntax, is_integer, is_number, is_stringy, shape, text};
use crate::ast::{Expr, ExprKind, Ident};
use crate::builtins::{self, Method, Receiver};
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;
use crate::suggest::did_you_mean;
use crate::types::Type;

impl Checker<'_> {
    pub(super) fn method(
        &mut self,
        receiver_expr: &Expr,
        name: &Ident,
        args: &[Expr],
        span: Span,
    ) -> Type {
        let receiver_ty = self.expr(receiver_expr);
        let types: Vec<Type> = args.iter().map(|arg| self.expr(arg)).collect();
        let call_span = Span {
            start: name.span.start,
            end: span.end,
        };
        let ty = match shape(&receiver_ty) {
            Type::Any => {
                let candidates: Vec<&Method> = builtins::methods_named(&name.name).collect();
                match candidates.as_slice() {
                    [] => {
                        self.unknown_method(receiver_expr, &receiver_ty, None, name, span);
                        Type::Any
                    }
                    [method] => self.known_method(
                        method,
                        receiver_expr,
                        &Type::Any,
                        args,
                        &types,
                        call_span,
                    ),
                    [first, ..] => {
                        // `count`, on a string or a list: the same arity and result.
                        let callee = Callee {
                            name: name.name.clone(),
                            ..Callee::method(first)
                        };
                        if self.arity(&callee, args, call_span) {
                            static_result(first)
                        } else {
                            Type::Any
                        }
                    }
                }
            }
            shaped => match receiver(&shaped)
                .and_then(|r| builtins::method_named(r, &name.name).map(|m| (r, m)))
            {
                Some((_, method)) => {
                    let plain = receiver_ty.non_optional().clone();
                    self.known_method(method, receiver_expr, &plain, args, &types, call_span)
                }
                None => {
                    self.unknown_method(receiver_expr, &receiver_ty, receiver(&shaped), name, span);
                    Type::Any
                }
            },
        };
        if receiver_ty.is_optional() {
            ty.optional()
        } else {
            ty
        }
    }

    fn known_method(
        &mut self,
        method: &Method,
        receiver_expr: &Expr,
        receiver_ty: &Type,
        args: &[Expr],
        types: &[Type],
        call_span: Span,
    ) -> Type {
        let callee = Callee::method(method);
        let result = static_result(method);
        if !self.arity(&callee, args, call_span) {
            return result;
        }
        let typed: Vec<(&Expr, &Type)> = args.iter().zip(types).collect();
        match (method.name, typed.as_slice()) {
            ("strip" | "lstrip" | "rstrip", [(arg, ty)]) => {
                self.expect_string(&callee, "chars", arg, ty, true);
            }
            ("startswith" | "endswith", [(arg, ty)]) => self.affix(&callee, receiver_expr, arg, ty),
            ("split", typed) => {
                if let Some((arg, ty)) = typed.first() {
                    self.expect_string(&callee, "sep", arg, ty, true);
                }
                if let Some((arg, ty)) = typed.get(1)
                    && !self.no_generator(&callee, arg)
                    && !is_integer(ty)
                {
                    self.bad_argument(
                        &callee,
                        format!(
                            "`string.split` needs an `int` for `maxsplit`, found {}",
                            text::ty(ty)
                        ),
                        arg,
                        ty,
                        callee.signature_help(),
                    );
                }
            }
            ("count" | "find", [(arg, ty)]) if method.receiver == Receiver::String => {
                self.expect_string(&callee, "sub", arg, ty, false);
            }
            ("replace", typed) => {
                for ((arg, ty), param) in typed.iter().zip(["old", "new"]) {
                    self.expect_string(&callee, param, arg, ty, false);
                }
            }
            ("join", [(arg, ty)]) => self.join(&callee, receiver_expr, arg, ty),
            ("get", typed) => return self.get(&callee, receiver_expr, receiver_ty, typed),
            (_, typed) => {
                for (arg, _) in typed {
                    self.no_generator(&callee, arg);
                }
            }
        }
        result
    }

    /// The argument of `startswith` / `endswith`: a string or a tuple of strings.
    fn affix(&mut self, callee: &Callee, receiver_expr: &Expr, arg: &Expr, ty: &Type) {
        let param = if callee.name.ends_with("startswith") {
            "prefix"
        } else {
            "suffix"
        };
        match &arg.kind {
            ExprKind::Tuple(items) => {
                let item_types: Vec<Type> =
                    items.iter().map(|item| self.expr_type_of(item)).collect();
                for (item, item_ty) in items.iter().zip(&item_types) {
                    self.expect_string(callee, param, item, item_ty, false);
                }
            }
            ExprKind::List(items) => {
                let sources: Vec<String> = items.iter().map(text::source).collect();
                let tuple = match sources.as_slice() {
                    [one] => format!("({one},)"),
                    _ => format!("({})", sources.join(", ")),
                };
                self.report(
                    Problem::new(
                        callee.kind,
                        format!(
                            "`{}` needs a string or a tuple of strings, not a list",
                            callee.name
                        ),
                        arg.span,
                        format!("this is {}", text::ty(ty)),
                    )
                    .help(format!("write a tuple: `{tuple}`"))
                    .replacement(arg.span, tuple),
                );
            }
            _ if matches!(shape(ty), Type::List(_)) => {
                self.bad_argument(
                    callee,
                    format!(
                        "`{}` needs a string or a tuple of strings, found {}",
                        callee.name,
                        text::ty(ty)
                    ),
                    arg,
                    ty,
                    format!(
                        "test each item in turn: `any({}.{}(p) for p in {})`",
                        as_receiver(receiver_expr),
                        callee.name.trim_start_matches("string."),
                        as_receiver(arg)
                    ),
                );
            }
            _ => self.expect_string(callee, param, arg, ty, false),
        }
    }

    /// The type recorded for an already checked node.
    fn expr_type_of(&self, expr: &Expr) -> Type {
        self.types
            .iter()
            .rev()
            .find(|(span, _)| *span == expr.span)
            .map_or(Type::Any, |(_, ty)| ty.clone())
    }

    /// The argument of `string.join`: an iterable of strings.
    fn join(&mut self, callee: &Callee, receiver_expr: &Expr, arg: &Expr, ty: &Type) {
        let separator = as_receiver(receiver_expr);
        match ty.element_type() {
            None => self.bad_argument(
                callee,
                format!(
                    "`string.join` needs an iterable of strings, found {}",
                    text::ty(ty)
                ),
                arg,
                ty,
                callee.signature_help(),
            ),
            Some(item) if !is_stringy(&item) => {
                let fix = match &arg.kind {
                    ExprKind::Generator(generator) => format!(
                        "{separator}.join(str({}) for {} in {})",
                        text::source(&generator.element),
                        generator.var.name,
                        as_receiver(&generator.iter)
                    ),
                    _ => format!("{separator}.join(str(x) for x in {})", as_receiver(arg)),
                };
                self.bad_argument(
                    callee,
                    format!(
                        "`string.join` needs strings to join, found {} items",
                        text::ty(&item)
                    ),
                    arg,
                    ty,
                    format!("convert each item with `str(...)`: `{fix}`"),
                );
            }
            Some(_) => {}
        }
    }

    /// `record.get(key[, default])`: a literal key is checked like a field.
    fn get(
        &mut self,
        callee: &Callee,
        receiver_expr: &Expr,
        receiver_ty: &Type,
        typed: &[(&Expr, &Type)],
    ) -> Type {
        let Some((key, key_ty)) = typed.first() else {
            return Type::Any;
        };
        let found = match (&key.kind, receiver_ty) {
            (ExprKind::Str(name), Type::Record(_)) => {
                let ident = Ident {
                    name: name.clone(),
                    span: key.span,
                };
                let subject = || text::subject(receiver_expr);
                self.field(
                    &subject,
                    receiver_expr.span,
                    receiver_ty,
                    &ident,
                    FieldSyntax::Key,
                )
            }
            _ => {
                self.expect_string(callee, "key", key, key_ty, false);
                Type::Any
            }
        };
        match typed.get(1) {
            Some((_, default)) => found.join(default),
            None => found,
        }
    }

    fn unknown_method(
        &mut self,
        receiver_expr: &Expr,
        receiver_ty: &Type,
        receiver: Option<Receiver>,
        name: &Ident,
        span: Span,
    ) {
        let method = name.name.as_str();
        let subject = text::subject(receiver_expr);
        let shown = text::ty(receiver_ty);
        let label = match (receiver, shape(receiver_ty)) {
            (_, Type::Any) => "not a method of any type".to_owned(),
            (Some(_), _) => format!("{shown} has no method `{method}`"),
            (None, _) => format!("{shown} has no methods"),
        };
        let mut problem = Problem::new(
            ProblemKind::UnknownMethod,
            format!("unknown method `{method}` on {subject}"),
            name.span,
            label,
        );
        if shape(receiver_ty) != Type::Any {
            problem = problem.secondary(receiver_expr.span, format!("this is {shown}"));
        }
        let own: Vec<&str> = match receiver {
            Some(receiver) => builtins::methods_of(receiver).map(|m| m.name).collect(),
            None if shape(receiver_ty) == Type::Any => {
                let mut all: Vec<&str> = builtins::METHODS.iter().map(|m| m.name).collect();
                all.sort_unstable();
                all.dedup();
                all
            }
            None => Vec::new(),
        };
        let elsewhere: Vec<&str> = builtins::methods_named(method)
            .map(|m| m.receiver.name())
            .collect();
        let source = as_receiver(receiver_expr);
        let is_field = matches!(receiver_ty.non_optional(), Type::Record(record) if record.field(method).is_some());
        problem = if let Some(best) = did_you_mean(method, own.iter().copied()) {
            problem
                .help(format!("did you mean `{best}`?"))
                .replacement(name.span, best)
        } else if is_field {
            problem
                .help(format!(
                    "`{method}` is a field, not a method: write `{source}.{method}`"
                ))
                .replacement(
                    Span {
                        start: name.span.start,
                        end: span.end,
                    },
                    method,
                )
        } else if elsewhere.contains(&"string") && is_number(&shape(receiver_ty)) {
            problem.help(format!(
                "convert it to a string first: `str({}).{method}()`",
                text::source(receiver_expr)
            ))
        } else if elsewhere.contains(&"string")
            && matches!(shape(receiver_ty), Type::List(item) if is_stringy(&item))
        {
            problem.help(format!(
                "`{method}` is a method of strings; to apply it to every item, write \
                 `[x.{method}() for x in {source}]`"
            ))
        } else if let Some(first) = elsewhere.first() {
            problem.help(format!(
                "`{method}` is a method of `{first}`, not of {shown}"
            ))
        } else if own.is_empty() {
            problem.help(format!("{shown} values have no methods"))
        } else if shape(receiver_ty) == Type::Any {
            problem.help(format!("the methods are {}", text::listing(&own)))
        } else {
            let kind = receiver.map_or("", Receiver::name);
            problem.help(format!(
                "the methods of `{kind}` values are {}",
                text::listing(&own)
            ))
        };
        self.report(problem);
    }
}

/// The result of a method, whatever its arguments (`record.get` gives `any`).
fn static_result(method: &Method) -> Type {
    match method.name {
        "lower" | "upper" | "strip" | "lstrip" | "rstrip" | "replace" | "join" => Type::String,
        "startswith" | "endswith" | "isdigit" | "isalpha" | "isspace" | "isupper" | "islower" => {
            Type::Bool
        }
        "split" | "keys" => Type::list(Type::String),
        "count" | "find" | "index" => Type::Int,
        "values" => Type::list(Type::Any),
        _ => Type::Any,
    }
}
