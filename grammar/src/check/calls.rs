//! Calls of built-in functions and methods, against the catalogue in [`crate::builtins`].

use super::{Checker, is_number, is_stringy, shape, text};
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

/// A generator argument rewritten as a list comprehension: `[t for t in xs]`.
fn list_comprehension(arg: &Expr) -> String {
    match &arg.kind {
        ExprKind::Generator(generator) => {
            crate::print::print(&Expr::new(ExprKind::ListComp(generator.clone()), arg.span))
        }
        _ => format!("[{}]", text::source(arg)),
    }
}

/// `''.join(arg)`, printed as one call so that a generator keeps its bare form.
fn joined(arg: &Expr) -> String {
    let call = ExprKind::Method {
        receiver: Box::new(Expr::new(ExprKind::Str(String::new()), arg.span)),
        name: Ident {
            name: "join".to_owned(),
            span: arg.span,
        },
        args: vec![arg.clone()],
    };
    crate::print::print(&Expr::new(call, arg.span))
}

fn is_generator(expr: &Expr) -> bool {
    matches!(expr.kind, ExprKind::Generator(_))
}

/// The source of `expr` as the receiver of a method call: parenthesised unless it is a
/// primary (a name, field, index, call or literal).
pub(super) fn as_receiver(expr: &Expr) -> String {
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

/// What a list argument must hold.
#[derive(Clone, Copy)]
enum Items {
    Records,
    Strings,
}

impl Items {
    fn plural(self) -> &'static str {
        match self {
            Items::Records => "records",
            Items::Strings => "strings",
        }
    }
}

/// Who is called, for messages: `len` or `string.split`.
pub(super) struct Callee {
    pub(super) name: String,
    pub(super) signature: &'static str,
    pub(super) min: usize,
    pub(super) max: Option<usize>,
    /// `CallArguments` for functions, `UnknownMethod` for methods.
    pub(super) kind: ProblemKind,
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

    pub(super) fn method(method: &Method) -> Callee {
        Callee {
            name: format!("{}.{}", method.receiver.name(), method.name),
            signature: method.signature,
            min: method.min_args,
            max: Some(method.max_args),
            kind: ProblemKind::UnknownMethod,
        }
    }

    pub(super) fn signature_help(&self) -> String {
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
        if name.starts_with("file_") || name == "vocabulary_compliance" {
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
                        .replacement(arg.span, list_comprehension(arg)),
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
                        .replacement(span, joined(arg)),
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
            "no_file_conflicts" => self.expect_list(&callee, "tasks", arg, ty, Items::Records),
            "plan_completion" => {
                // `None` is no items: the reference checks nothing. (A generator can be only
                // the sole argument of a call, which `plan_completion` never has.)
                if !matches!(shape(ty), Type::Null) {
                    self.expect_list(&callee, "plan_items", arg, ty, Items::Records);
                }
                if let Some((arg, ty)) = args_typed.next()
                    && !matches!(shape(ty), Type::Null)
                {
                    self.expect_list(&callee, "files_changed", arg, ty, Items::Strings);
                }
                if let Some((arg, ty)) = args_typed.next()
                    && !self.no_generator(&callee, arg)
                    && !matches!(shape(ty), Type::Int | Type::Float | Type::Bool | Type::Any)
                {
                    let problem = Problem::new(
                        callee.kind,
                        format!(
                            "`plan_completion` needs a number for `threshold`, found {}",
                            text::ty(ty)
                        ),
                        arg.span,
                        format!("this is {}", text::ty(ty)),
                    );
                    // A quoted percentage is the usual slip, and unquoting it the one fix.
                    let number = match &arg.kind {
                        ExprKind::Str(quoted) => quoted
                            .trim()
                            .parse::<f64>()
                            .ok()
                            .filter(|n| n.is_finite())
                            .map(|_| quoted.trim().to_owned()),
                        _ => None,
                    };
                    self.report(match number {
                        Some(number) => problem
                            .help(format!("write the percentage without quotes: `{number}`"))
                            .replacement(arg.span, number),
                        None => problem.help(
                            "the threshold is a percentage, as in \
                             `plan_completion(items, files, 80)`",
                        ),
                    });
                }
            }
            "vocabulary_compliance" => {
                self.expect_string(&callee, "path", arg, ty, false);
                // `None` (like an empty list) is no files: the reference scans none, or asks git.
                if let Some((arg, ty)) = args_typed.next()
                    && !matches!(shape(ty), Type::Null)
                {
                    self.expect_list(&callee, "files_changed", arg, ty, Items::Strings);
                }
                if let Some((arg, ty)) = args_typed.next()
                    && !self.no_generator(&callee, arg)
                    && !matches!(shape(ty), Type::Bool | Type::Any)
                {
                    self.bad_argument(
                        &callee,
                        format!(
                            "`vocabulary_compliance` needs a bool for `git_fallback`, found {}",
                            text::ty(ty)
                        ),
                        arg,
                        ty,
                        callee.signature_help(),
                    );
                }
                if let Some((arg, ty)) = args_typed.next() {
                    self.expect_string(&callee, "base", arg, ty, false);
                }
            }
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

    /// Checks that the argument for `param` is a list (or a generator) of `items`: not a
    /// string, whose characters Python would iterate, nor a record, whose keys it would.
    fn expect_list(&mut self, callee: &Callee, param: &str, arg: &Expr, ty: &Type, items: Items) {
        let element = match shape(ty) {
            Type::List(element) => shape(&element),
            Type::Any => return,
            _ => {
                let help = match (shape(ty), items) {
                    (Type::String, Items::Strings) => format!(
                        "to pass one file, put it in a list: `[{}]`",
                        text::source(arg)
                    ),
                    _ => callee.signature_help(),
                };
                self.bad_argument(
                    callee,
                    format!(
                        "`{}` needs a list of {} for `{param}`, found {}",
                        callee.name,
                        items.plural(),
                        text::ty(ty)
                    ),
                    arg,
                    ty,
                    help,
                );
                return;
            }
        };
        let fits = match items {
            Items::Records => matches!(element, Type::Record(_) | Type::Any),
            Items::Strings => matches!(element, Type::String | Type::Any),
        };
        // The one field the built-in cannot do without: records that cannot have it make the
        // call always true (no task owns a file, every item is done).
        let needed = match (callee.name.as_str(), items, &element) {
            ("no_file_conflicts", Items::Records, Type::Record(record)) => {
                Some(("files_owned", "no two tasks can conflict", record))
            }
            ("plan_completion", Items::Records, Type::Record(record)) => {
                Some(("file", "every item counts as done", record))
            }
            _ => None,
        };
        if let Some((field, consequence, record)) = needed
            && !record.open
            && record.field(field).is_none()
        {
            let names: Vec<&str> = record
                .fields
                .iter()
                .map(|field| field.name.as_str())
                .collect();
            self.report(
                Problem::new(
                    callee.kind,
                    format!("the items of `{param}` have no field `{field}`, so {consequence}"),
                    arg.span,
                    format!("these have no `{field}`"),
                )
                .help(format!(
                    "pass records with a `{field}` field (these have {})",
                    if names.is_empty() {
                        "no fields".to_owned()
                    } else {
                        text::listing(&names)
                    }
                )),
            );
            return;
        }
        if !fits {
            self.bad_argument(
                callee,
                format!(
                    "`{}` needs a list of {} for `{param}`, found {}",
                    callee.name,
                    items.plural(),
                    text::ty(ty)
                ),
                arg,
                ty,
                callee.signature_help(),
            );
        }
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
    pub(super) fn arity(&mut self, callee: &Callee, args: &[Expr], call_span: Span) -> bool {
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
    pub(super) fn no_generator(&mut self, callee: &Callee, arg: &Expr) -> bool {
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

    pub(super) fn bad_argument(
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
    pub(super) fn expect_string(
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
        if let Some(entry) = builtins::not_supported(name) {
            self.report(
                Problem::new(
                    ProblemKind::UnsupportedBuiltin,
                    format!("the reference's built-in `{name}` is not supported"),
                    func.span,
                    "not supported",
                )
                .help(format!("{}; {}", entry.reason, entry.instead)),
            );
            return;
        }
        if let Some(entry) = builtins::not_provided(name) {
            let help = match entry.alternative {
                Some(_) if name == "abs" && args.len() == 1 => {
                    let value = args.first().map(as_receiver).unwrap_or_default();
                    format!(
                        "the reference runtime does not provide it either; write \
                         `{value} if {value} >= 0 else -{value}`"
                    )
                }
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
}
