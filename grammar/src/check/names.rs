//! Free names and `$`-references.

use super::{Checker, FieldSyntax, text};
use crate::ast::{Ident, RefRoot, Reference};
use crate::builtins;
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;
use crate::suggest::did_you_mean;
use crate::types::Type;

impl Checker<'_> {
    /// The names a free name could have meant: generator variables, then the environment's.
    pub(super) fn names_in_scope(&self) -> Vec<&str> {
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
    pub(super) fn available_names(&self) -> String {
        let names = self.names_in_scope();
        match names.len() {
            0 => "no names are available here".to_owned(),
            1 => format!("the only name available here is {}", text::listing(&names)),
            _ => format!("the names available here are {}", text::listing(&names)),
        }
    }

    pub(super) fn name(&mut self, ident: &Ident) -> Type {
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
        let suggestion = self
            .env
            .suggest
            .then(|| did_you_mean(name, candidates.iter().copied()))
            .flatten();
        let problem = if let Some(best) = suggestion {
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

    pub(super) fn reference(&mut self, reference: &Reference, span: Span) -> Type {
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
                Some(ty) if reference.path.is_empty() => {
                    self.input_without_field(ty, span);
                    return Type::Any;
                }
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
            let subject = || format!("`{}`", text::reference_prefix(&reference.root, prefix));
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

    /// `$.input` alone: the reference raises "`$.input` requires a field name" when it
    /// resolves it, so the whole input cannot be passed or compared.
    fn input_without_field(&mut self, input: &Type, span: Span) {
        let problem = Problem::new(
            ProblemKind::InputWithoutField,
            "`$.input` needs a field: the whole input cannot be read",
            span,
            "no field named",
        );
        let fields: Vec<&str> = match input.non_optional() {
            Type::Record(record) => record.fields.iter().map(|f| f.name.as_str()).collect(),
            _ => Vec::new(),
        };
        let end = Span {
            start: span.end,
            end: span.end,
        };
        let problem = match fields.as_slice() {
            [one] => problem
                .help(format!("read its only field: `$.input.{one}`"))
                .replacement(end, format!(".{one}")),
            [] => problem.help("name a field of the flow's `input`: `$.input.<field>`"),
            several => problem.help(format!(
                "name the field to read, as in `$.input.{}`; the inputs are {}",
                several.first().copied().unwrap_or("<field>"),
                text::listing(several)
            )),
        };
        self.report(problem);
    }

    fn unknown_step(&mut self, step: &Ident) {
        let name = step.name.as_str();
        let problem = Problem::new(
            ProblemKind::UnknownName,
            format!("unknown step `{name}` in `$.steps.{name}.output`"),
            step.span,
            "no such step here",
        );
        let steps = self.env.steps.keys().map(String::as_str);
        let suggestion = self
            .env
            .suggest
            .then(|| did_you_mean(name, steps.clone()))
            .flatten();
        let problem = match suggestion {
            Some(best) => problem
                .help(format!("did you mean `{best}`?"))
                .replacement(step.span, best),
            None if self.env.steps.is_empty() => problem.help("no step outputs can be read here"),
            None => problem.help(format!(
                "the steps whose output can be read here are {}",
                text::listing_of(steps, self.env.steps.len())
            )),
        };
        self.report(problem);
    }
}
