//! Calls of built-in functions and methods, against the catalogue in [`crate::builtins`].

use super::{Checker, FieldSyntax, is_integer, is_number, is_stringy, shape, text};
use crate::ast::{Expr, ExprKind, Ident};
use crate::builtins::{self, Function, Method, Receiver};
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;
use crate::suggest::did_you_mean;
use crate::types::Type;

/// The receiver whose methods a value of this type has.
pub(super) fn receiver(ty: &Type) -> Option<Receiver> {
    match shape(ty) {
        Type::String => Some(Receiver::String),
        Type::List(_) => Some(Receiver::List),
        Type::Record(_) => Some(Receiver::Record),
        _ => None,
    }
}

fn is_generator(expr: &Expr) -> bool {
    matches!(expr.kind, ExprKind::Generator(_))
}

/// The source of `expr` as the receiver of a method call: parenthesised unless it is a
/// primary (a name, field, index, call or literal).
fn as_receiver(expr: &Expr) -> String {
    let source = text::source(expr);
    match expr.kind {
        ExprKind::Name(_)
        | ExprKind::Ref(_)
        | ExprKind::Attr { .. }
        | ExprKind::Index { .. }
        | ExprKind::Call { .. }
        | ExprKind::Method { .. }
        | ExprKind::Str(_)
        | ExprKind::List(_)
        | ExprKind::ListComp(_) => source,
        _ => format!("({source})"),
    }
}

/// Who is called, for messages: `len` or `string.split`.
struct Callee {
    name: String,
    signature: &'static str,
    min: usize,
    max: Option<usize>,
    /// `CallArguments` for functions, `UnknownMethod` for methods.
    kind: ProblemKind,
}

impl Callee {
    fn function(function: &Function) -> Callee {
        Callee {
            name: function.name.to_owned(),
            signature: function.signature,
            min: function.min_args,
            max: function.max_args,
            kind: ProblemKind::CallArguments,
        }
    }

    fn method(method: &Method) -> Callee {
        Callee {
            name: format!("{}.{}", method.receiver.name(), method.name),
            signature: method.signature,
            min: method.min_args,
            max: Some(method.max_args),
            kind: ProblemKind::UnknownMethod,
        }
    }

    fn signature_help(&self) -> String {
        format!("the signature is `{}`", self.signature)
    }
}

impl Checker<'_> {
    pub(super) fn call(&mut self, func: &Ident, args: &[Expr], span: Span) -> Type {
        let types: Vec<Type> = args.iter().map(|arg| self.expr(arg)).collect();
        let name = func.name.as_str();
        let Some(function) = builtins::function_named(name) else {
            // An unknown function is an error already; a constant warning would be noise.
            self.reads_input = true;
            self.unknown_function(func, args);
            return Type::Any;
        };
        let callee = Callee::function(function);
        let fallback = match name {
            "len" | "int" => Type::Int,
            "str" => Type::String,
            "min" | "max" => Type::Any,
            _ => Type::Bool,
        };
        if name.starts_with("file_") {
            self.reads_input = true;
        }
        if !self.arity(&callee, args, span) {
            return fallback;
        }
        let mut args_typed = args.iter().zip(&types);
        let Some((arg, ty)) = args_typed.next() else {
            return fallback;
        };
        match name {
            "len" => {
                if is_generator(arg) {
                    self.report(
                        Problem::new(
                            ProblemKind::CallArguments,
                            "`len` does not take a generator",
                            arg.span,
                            "a generator has no length",
                        )
                        .help("collect the items in a list to count them")
                        .replacement(arg.span, format!("[{}]", text::source(arg))),
                    );
                } else if receiver(ty).is_none() && shape(ty) != Type::Any {
                    self.bad_argument(
                        &callee,
                        format!(
                            "`len` needs a string, list or record, found {}",
                            text::ty(ty)
                        ),
                        arg,
                        ty,
                        "`len` counts the characters of a string, the items of a list or the \
                         fields of a record"
                            .to_owned(),
                    );
                }
            }
            "bool" => {
                if is_generator(arg) {
                    self.report(
                        Problem::new(
                            ProblemKind::CallArguments,
                            "`bool` of a generator is always `True`",
                            arg.span,
                            "a generator is always truthy",
                        )
                        .help("did you mean `any(...)`?")
                        .replacement(func.span, "any"),
                    );
                }
            }
            "int" => {
                if !self.no_generator(&callee, arg)
                    && !matches!(
                        shape(ty),
                        Type::Int | Type::Float | Type::String | Type::Bool | Type::Any
                    )
                {
                    self.bad_argument(
                        &callee,
                        format!(
                            "`int` needs a number, a string or a bool, found {}",
                            text::ty(ty)
                        ),
                        arg,
                        ty,
                        callee.signature_help(),
                    );
                }
            }
            "str" => {
                if is_generator(arg) {
                    self.report(
                        Problem::new(
                            ProblemKind::CallArguments,
                            "`str` of a generator does not give its items",
                            arg.span,
                            "a generator",
                        )
                        .help("to join the items into one string, write `''.join(...)`")
                        .replacement(span, format!("''.join({})", text::source(arg))),
                    );
                }
            }
            "any" | "all" => {
                if ty.element_type().is_none() {
                    self.bad_argument(
                        &callee,
                        format!(
                            "`{name}` needs an iterable (a list, string, record or generator), found {}",
                            text::ty(ty)
                        ),
                        arg,
                        ty,
                        callee.signature_help(),
                    );
                }
            }
            "min" | "max" => return self.min_max(&callee, args, &types),
            _ => {
                // file_exists(path), file_contains(path, substring)
                let params = ["path", "substring"];
                for ((arg, ty), param) in args.iter().zip(&types).zip(params) {
                    self.expect_string(&callee, param, arg, ty, false);
                }
            }
        }
        fallback
    }

    fn min_max(&mut self, callee: &Callee, args: &[Expr], types: &[Type]) -> Type {
        let name = callee.name.as_str();
        if let ([arg], [ty]) = (args, types) {
            return match ty.element_type() {
                Some(item) => item,
                None => {
                    self.bad_argument(
                        callee,
                        format!(
                            "`{name}` of one argument needs an iterable, found {}",
                            text::ty(ty)
                        ),
                        arg,
                        ty,
                        format!("to compare values, pass two or more: `{name}(a, b)`"),
                    );
                    Type::Any
                }
            };
        }
        let typed: Vec<(&Expr, &Type)> = args.iter().zip(types).collect();
        let mut ok = true;
        for (i, (arg, ty)) in typed.iter().enumerate() {
            if self.no_generator(callee, arg) {
                ok = false;
                continue;
            }
            let earlier = typed.get(..i).unwrap_or(&[]);
            if let Some((other, other_ty)) = earlier
                .iter()
                .find(|(_, other_ty)| !super::operators::orderable(other_ty, ty))
            {
                ok = false;
                let (a, b) = (text::ty(other_ty), text::ty(ty));
                self.report(
                    Problem::new(
                        ProblemKind::CallArguments,
                        format!("`{name}` cannot compare {a} with {b}"),
                        arg.span,
                        format!("this is {b}"),
                    )
                    .secondary(other.span, format!("this is {a}"))
                    .help(format!(
                        "the arguments of `{name}` must be comparable: all numbers, all strings \
                         or all lists"
                    )),
                );
            }
        }
        if !ok {
            return Type::Any;
        }
        let mut types = types.iter();
        let first = types.next().cloned().unwrap_or(Type::Any);
        types.fold(first, |joined, ty| joined.join(ty))
    }

    /// Reports a wrong number of arguments; whether the number is right.
    fn arity(&mut self, callee: &Callee, args: &[Expr], call_span: Span) -> bool {
        let count = args.len();
        let too_many = callee.max.is_some_and(|max| count > max);
        if count >= callee.min && !too_many {
            return true;
        }
        let expected = text::arity(callee.min, callee.max);
        let (span, label) = match (too_many, callee.max.and_then(|max| args.get(max..))) {
            (true, Some(extra @ [first, ..])) => {
                let last = extra.last().unwrap_or(first);
                let label = if extra.len() == 1 {
                    "extra argument"
                } else {
                    "extra arguments"
                };
                (first.span.to(last.span), label.to_owned())
            }
            _ => (call_span, format!("expected {expected}")),
        };
        self.report(
            Problem::new(
                callee.kind,
                format!("`{}` takes {expected}, found {count}", callee.name),
                span,
                label,
            )
            .help(callee.signature_help()),
        );
        false
    }

    /// Reports a generator where no iterable is expected; whether it was one.
    fn no_generator(&mut self, callee: &Callee, arg: &Expr) -> bool {
        if !is_generator(arg) {
            return false;
        }
        self.report(
            Problem::new(
                callee.kind,
                format!("`{}` does not take a generator", callee.name),
                arg.span,
                "a generator",
            )
            .help(
                "a generator can be passed only where an iterable is expected: to `any`, \
                 `all`, `min`, `max` or `string.join`",
            ),
        );
        true
    }

    fn bad_argument(
        &mut self,
        callee: &Callee,
        message: String,
        arg: &Expr,
        ty: &Type,
        help: String,
    ) {
        self.report(
            Problem::new(
                callee.kind,
                message,
                arg.span,
                format!("this is {}", text::ty(ty)),
            )
            .help(help),
        );
    }

    /// Checks that the argument for `param` is a string (or `None`, when `allow_null`).
    fn expect_string(
        &mut self,
        callee: &Callee,
        param: &str,
        arg: &Expr,
        ty: &Type,
        allow_null: bool,
    ) {
        if self.no_generator(callee, arg)
            || is_stringy(ty)
            || (allow_null && matches!(shape(ty), Type::Null))
        {
            return;
        }
        let problem = Problem::new(
            callee.kind,
            format!(
                "`{}` needs a `string` for `{param}`, found {}",
                callee.name,
                text::ty(ty)
            ),
            arg.span,
            format!("this is {}", text::ty(ty)),
        );
        let problem = if is_number(&shape(ty)) {
            problem
                .help("convert it with `str(...)`")
                .replacement(arg.span, format!("str({})", text::source(arg)))
        } else {
            problem.help(callee.signature_help())
        };
        self.report(problem);
    }

    fn unknown_function(&mut self, func: &Ident, args: &[Expr]) {
        let name = func.name.as_str();
        if let Some(entry) = builtins::not_provided(name) {
            let help = match entry.alternative {
                Some(alternative) => {
                    format!("the reference runtime does not provide it either; {alternative}")
                }
                None => "the reference runtime does not provide it either".to_owned(),
            };
            self.report(
                Problem::new(
                    ProblemKind::UnknownFunction,
                    format!("`{name}` is not provided"),
                    func.span,
                    "not a built-in function",
                )
                .help(help),
            );
            return;
        }
        let problem = Problem::new(
            ProblemKind::UnknownFunction,
            format!("unknown function `{name}`"),
            func.span,
            "not a built-in function",
        );
        let functions = builtins::FUNCTIONS.iter().map(|function| function.name);
        let problem = if let Some(best) = did_you_mean(name, functions) {
            problem
                .help(format!("did you mean `{best}`?"))
                .replacement(func.span, best)
        } else if builtins::methods_named(name).next().is_some() {
            let call = match args.split_first() {
                Some((first, rest)) => {
                    let rest: Vec<String> = rest.iter().map(text::source).collect();
                    format!("{}.{name}({})", as_receiver(first), rest.join(", "))
                }
                None => format!("x.{name}()"),
            };
            problem.help(format!("`{name}` is a method: write `{call}`"))
        } else if self.names_in_scope().contains(&name) {
            problem.help(format!("`{name}` is a value, not a function"))
        } else {
            let names: Vec<&str> = builtins::FUNCTIONS.iter().map(|f| f.name).collect();
            problem.help(format!(
                "the built-in functions are {}",
                text::listing(&names)
            ))
        };
        self.report(problem);
    }

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
                        if self.arity(&Callee::method(first), args, call_span) {
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
            ("startswith" | "endswith", [(arg, ty)]) => self.affix(&callee, arg, ty),
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
    fn affix(&mut self, callee: &Callee, arg: &Expr, ty: &Type) {
        match &arg.kind {
            ExprKind::Tuple(items) => {
                let item_types: Vec<Type> =
                    items.iter().map(|item| self.expr_type_of(item)).collect();
                for (item, item_ty) in items.iter().zip(&item_types) {
                    self.expect_string(callee, "prefix", item, item_ty, false);
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
                    "test each item instead: `any(s.startswith(p) for p in prefixes)`".to_owned(),
                );
            }
            _ => self.expect_string(callee, "prefix", arg, ty, false),
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
                let subject = text::subject(receiver_expr);
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
            problem.help(format!(
                "the methods of {shown} are {}",
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
