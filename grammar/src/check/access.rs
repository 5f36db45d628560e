//! Fields and indexes.

use super::{Checker, FieldSyntax, calls, is_integer, is_stringy, shape, text};
use crate::ast::{Expr, ExprKind, Ident};
use crate::builtins;
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;
use crate::suggest::did_you_mean;
use crate::types::Type;

impl Checker<'_> {
    pub(super) fn attribute(&mut self, base: &Expr, base_ty: &Type, name: &Ident) -> Type {
        let subject = || text::subject(base);
        self.field(&subject, base.span, base_ty, name, FieldSyntax::Attribute)
    }

    /// The field `name` of a value of type `ty`: `subject` (already in backticks; made only for
    /// a message) and `base_span` say what the value is in messages.
    pub(super) fn field(
        &mut self,
        subject: &dyn Fn() -> String,
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
        subject: &dyn Fn() -> String,
        base_span: Span,
        record: &std::sync::Arc<crate::types::Record>,
        name: &Ident,
        syntax: FieldSyntax,
    ) {
        let subject = subject();
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
        let suggestion = self
            .env
            .suggest
            .then(|| did_you_mean(field, names.iter().copied()))
            .flatten();
        let problem = match suggestion {
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
        subject: &dyn Fn() -> String,
        base_span: Span,
        ty: &Type,
        name: &Ident,
        syntax: FieldSyntax,
    ) {
        let subject = subject();
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
                "`{field}` is a method: call it with its arguments (`{}`)",
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

    pub(super) fn index(
        &mut self,
        base: &Expr,
        base_ty: &Type,
        index: &Expr,
        index_ty: &Type,
    ) -> Type {
        let ty = match base_ty.non_optional() {
            Type::Any => Type::Any,
            Type::Record(_) => match &index.kind {
                ExprKind::Str(key) => {
                    let name = Ident {
                        name: key.clone(),
                        span: index.span,
                    };
                    let subject = || text::subject(base);
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
        let kind = match shape(base_ty) {
            Type::Record(_) => "record",
            Type::List(_) => "list",
            _ => "string",
        };
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
                format!("a {kind} is indexed by {by}, not by {index_shown}"),
                index.span,
                format!("this is {index_shown}"),
            )
            .secondary(base.span, format!("this is {base_shown}"))
            .help(help),
        );
    }
}
