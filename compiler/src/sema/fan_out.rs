//! Types of version 0.3 fan-out steps: the list a step fans out over, the placeholders of its
//! templates, and its stages' `when` and `exit_when`.
//!
//! Called by `typecheck` for each step, with the flow's environment (`$.input` and the outputs
//! of the steps). Reports `source` values that are not lists (E0083), template syntax (E0084),
//! placeholders reading fields their value lacks (E0085, with a did-you-mean) or names not
//! bound where they stand (E0086: `{prev}` in a first stage, `{prevs}` outside a join), and
//! type errors in `when` and `exit_when` as in any expression.
//!
//! What a placeholder may name (the reference's server bindings, in one grammar):
//! - parallel_dispatch: the fields of the task's element (`{description}`), the element as
//!   `{task}` (`{task.description}`, the corpus's spelling), and `{prev}` / `{prev_raw}`, the
//!   result of a task's single dependency (a task without exactly one fails at run time);
//! - a pipeline stage: the item as `{item}`, its fields (`{title}`), `{id}` (the task's id);
//!   after the first stage `{prev}` / `{prev_raw}`; in a lane `{item}` is the lane's element
//!   and `{source}` the item; in a join `{prevs}` / `{prevs_raw}` (the lanes' results) and
//!   `{source}`.
//!
//! Invariant: a field of `any` or of an open record is accepted (nothing says it is missing);
//! of a closed record (a contract) it must exist.

use stratum_grammar::types::{Env, Type};

use crate::diagnostic::{Code, Diagnostic, did_you_mean};
use crate::expression::Expressions;
use crate::sema::typecheck::check_text;
use crate::source::Span;
use crate::syntax::ast::{Field, PreMergeVerify, Stage, Step, StepType, Text};
use crate::template::{self, Placeholder};

/// The checks of one step; `env` is the flow's environment with no free names.
pub fn check_step(
    step: &Step,
    env: &mut Env,
    expressions: &Expressions,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let Some(ty) = step.step_type.as_ref().map(|ty| ty.value) else {
        return;
    };
    if !matches!(ty, StepType::ParallelDispatch | StepType::Pipeline) {
        return;
    }
    let element = step
        .source
        .as_ref()
        .and_then(|source| source_element(source, env, expressions, diagnostics))
        .unwrap_or(Type::Any);
    if let Some(Field {
        value: PreMergeVerify::Reference(commands),
        ..
    }) = &step.pre_merge_verify
    {
        // The commands are read when the step starts: the reference must name commands.
        if let Some(ty) = check_text(commands, env, expressions, diagnostics) {
            verify_commands(commands, &ty, diagnostics);
        }
    }
    if ty == StepType::ParallelDispatch {
        if let Some(template) = &step.intent_template {
            let scope = Scope::task(&element);
            check_template(&template.value, &scope, diagnostics);
        }
        return;
    }
    let Some(stages) = &step.stages else {
        return;
    };
    let region = region(&stages.value);
    for (index, stage) in stages.value.iter().enumerate() {
        let role = stage_role(region, index);
        let scope = Scope::stage(&element, role, index, step);
        if let Some(template) = &stage.intent_template {
            check_template(&template.value, &scope, diagnostics);
        }
        check_predicates(stage, &scope, expressions, diagnostics);
    }
}

/// The element type of `source`, after reporting a source that is not a list.
fn source_element(
    source: &Field<Text>,
    env: &mut Env,
    expressions: &Expressions,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Type> {
    if !source.value.value.starts_with('$') {
        diagnostics.push(
            Diagnostic::new(
                Code::E0082,
                "`source` must be a `$`-reference to a list",
                source.span,
                "not a reference",
            )
            .help("write `$.input.<field>` for a list the flow is given, or `$.steps.<id>.output.<field>` for one a step produced"),
        );
        return None;
    }
    let ty = check_text(&source.value, env, expressions, diagnostics)?;
    match ty.non_optional() {
        Type::List(item) => Some(item.as_ref().clone()),
        Type::Any => Some(Type::Any),
        other => {
            diagnostics.push(
                Diagnostic::new(
                    Code::E0083,
                    format!(
                        "`source` is {}, not a list",
                        crate::sema::typecheck::shown(other)
                    ),
                    source.span,
                    "not a list",
                )
                .help(
                    "a fan-out step runs one task per element of a list; name a list field, \
                     such as `$.steps.plan.output.tasks`",
                ),
            );
            None
        }
    }
}

/// E0094 `invalid-pre-merge-verify`: a `pre_merge_verify` reference whose value is not a
/// list of commands (strings), nor one command. Why: each command is split into an argument
/// vector and run in the task's worktree; a number or a record gives none. Fix: reference a
/// list of strings, or write the commands in the spec.
fn verify_commands(commands: &Text, ty: &Type, diagnostics: &mut Vec<Diagnostic>) {
    let commands_type = match ty.non_optional() {
        Type::Any | Type::String => true,
        Type::List(item) => matches!(item.non_optional(), Type::Any | Type::String),
        _ => false,
    };
    if commands_type {
        return;
    }
    diagnostics.push(
        Diagnostic::new(
            Code::E0094,
            format!(
                "`pre_merge_verify` names {}, not a list of commands",
                crate::sema::typecheck::shown(ty)
            ),
            commands.span,
            "not commands",
        )
        .help(
            "reference a list of strings (each one command, run without a shell in the task's \
             worktree), or write the commands here: `pre_merge_verify: [\"cargo test -q\"]`",
        ),
    );
}

/// Where a stage stands in its pipeline, which decides the names its templates may use.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    First,
    Later,
    Lane,
    Join,
}

/// The names a template may use, with their types.
struct Scope<'a> {
    /// Names bound here.
    names: Vec<(&'static str, Type)>,
    /// The element whose fields are bound by their own names (`{description}`).
    spread: Option<&'a Type>,
    /// Names the reference binds elsewhere, with why they are not bound here.
    unbound: Vec<(&'static str, String)>,
    /// What the template belongs to, for messages.
    place: String,
}

impl<'a> Scope<'a> {
    fn task(element: &'a Type) -> Scope<'a> {
        Scope {
            names: vec![
                ("task", element.clone()),
                ("prev", Type::String),
                ("prev_raw", Type::Any),
            ],
            spread: Some(element),
            unbound: vec![
                (
                    "item",
                    "a parallel_dispatch task is its element: write `{task.field}` or `{field}`"
                        .to_owned(),
                ),
                (
                    "prevs",
                    "`{prevs}` is bound in a pipeline's join stage only".to_owned(),
                ),
            ],
            place: "a parallel_dispatch template".to_owned(),
        }
    }

    fn stage(element: &'a Type, role: Role, index: usize, step: &Step) -> Scope<'a> {
        let mut names = vec![("id", Type::String)];
        let mut unbound = vec![(
            "task",
            "a pipeline stage names its item `{item}`".to_owned(),
        )];
        let lane_or_join = matches!(role, Role::Lane | Role::Join);
        names.push((
            "item",
            if lane_or_join {
                Type::Any
            } else {
                element.clone()
            },
        ));
        match role {
            Role::First => {
                let why = "the first stage has no previous stage; its input is `{item}`".to_owned();
                unbound.push(("prev", why.clone()));
                unbound.push(("prev_raw", why));
            }
            Role::Later | Role::Lane => {
                names.push(("prev", Type::String));
                names.push(("prev_raw", Type::Any));
            }
            Role::Join => {
                let why = "a join has one result per lane: use `{prevs}`".to_owned();
                unbound.push(("prev", why.clone()));
                unbound.push(("prev_raw", why));
            }
        }
        if role == Role::Join {
            names.push(("prevs", Type::String));
            names.push(("prevs_raw", Type::list(Type::Any)));
        } else {
            let why = "`{prevs}` is bound in the join stage only".to_owned();
            unbound.push(("prevs", why.clone()));
            unbound.push(("prevs_raw", why));
        }
        if lane_or_join {
            names.push(("source", element.clone()));
        } else {
            unbound.push((
                "source",
                "`{source}` (the item a lane belongs to) is bound in lanes and joins only"
                    .to_owned(),
            ));
        }
        Scope {
            names,
            // Dict items are spread into the task, except the task's own keys.
            spread: (!lane_or_join).then_some(element),
            unbound,
            place: match &step.id {
                Some(id) => format!("stage {index} of step `{}`", id.value),
                None => format!("stage {index}"),
            },
        }
    }

    fn lookup(&self, name: &str) -> Lookup<'_> {
        if let Some((_, ty)) = self.names.iter().find(|(bound, _)| *bound == name) {
            return Lookup::Bound(ty.clone());
        }
        if let Some((_, why)) = self.unbound.iter().find(|(bound, _)| *bound == name) {
            return Lookup::Unbound(why);
        }
        match self.spread {
            Some(element) => match field_of(element, name) {
                FieldLookup::Found(ty) => Lookup::Bound(ty),
                FieldLookup::Missing(_) => Lookup::Missing,
            },
            None => Lookup::Missing,
        }
    }

    /// Every name a placeholder may start with, for did-you-mean.
    fn candidates(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .names
            .iter()
            .map(|(name, _)| (*name).to_owned())
            .collect();
        if let Some(Type::Record(record)) = self.spread.map(Type::non_optional) {
            all.extend(record.fields.iter().map(|field| field.name.clone()));
        }
        all
    }
}

enum Lookup<'a> {
    Bound(Type),
    Unbound(&'a str),
    /// Not a name here, nor a field of the element (a closed record).
    Missing,
}

enum FieldLookup {
    Found(Type),
    /// The record's field names.
    Missing(Vec<String>),
}

/// The type of `name` read from a value of type `ty`: `any` unless `ty` is a closed record.
fn field_of(ty: &Type, name: &str) -> FieldLookup {
    match ty.non_optional() {
        Type::Record(record) => match record.field(name) {
            Some(field) => FieldLookup::Found(field.clone()),
            None if record.open => FieldLookup::Found(Type::Any),
            None => FieldLookup::Missing(record.fields.iter().map(|f| f.name.clone()).collect()),
        },
        _ => FieldLookup::Found(Type::Any),
    }
}

fn check_template(text: &Text, scope: &Scope<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let (parsed, errors) = template::parse(&text.value);
    for error in errors {
        let span = text.span_of(error.range.clone());
        let mut diagnostic =
            Diagnostic::new(Code::E0084, error.message, span, error.label).help(error.help);
        if let Some(fix) = error.fix {
            diagnostic = diagnostic.fix(format!("write `{fix}`"), span, fix);
        }
        diagnostics.push(diagnostic);
    }
    for placeholder in parsed.placeholders() {
        check_placeholder(text, placeholder, scope, diagnostics);
    }
}

fn check_placeholder(
    text: &Text,
    placeholder: &Placeholder,
    scope: &Scope<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let (Some(root), Some(root_range)) = (placeholder.path.first(), placeholder.ranges.first())
    else {
        return;
    };
    let root_span = text.span_of(root_range.clone());
    let mut ty = match scope.lookup(root) {
        Lookup::Bound(ty) => ty,
        Lookup::Unbound(why) => {
            diagnostics.push(
                Diagnostic::new(
                    Code::E0086,
                    format!("`{{{root}}}` is not bound in {}", scope.place),
                    root_span,
                    "not bound here",
                )
                .help(why.to_owned()),
            );
            return;
        }
        Lookup::Missing => {
            let candidates = scope.candidates();
            let message = match scope.spread {
                Some(_) => format!(
                    "`{{{root}}}` names no field of the element and nothing bound in {}",
                    scope.place
                ),
                None => format!("`{{{root}}}` is not bound in {}", scope.place),
            };
            diagnostics.push(unknown_field(
                root,
                root_span,
                &message,
                candidates.iter().map(String::as_str),
            ));
            return;
        }
    };
    for (name, range) in placeholder.path.iter().zip(&placeholder.ranges).skip(1) {
        match field_of(&ty, name) {
            FieldLookup::Found(next) => ty = next,
            FieldLookup::Missing(fields) => {
                diagnostics.push(unknown_field(
                    name,
                    text.span_of(range.clone()),
                    &format!("{} has no field `{name}`", describe_record(&ty)),
                    fields.iter().map(String::as_str),
                ));
                return;
            }
        }
    }
}

/// E0085 `unknown-template-field`, with a did-you-mean among `candidates`.
fn unknown_field<'c>(
    name: &str,
    span: Span,
    message: &str,
    candidates: impl Iterator<Item = &'c str> + Clone,
) -> Diagnostic {
    let diagnostic = Diagnostic::new(Code::E0085, message.to_owned(), span, "no such field");
    match did_you_mean(name, candidates.clone()) {
        Some(best) => diagnostic.help(format!("did you mean `{best}`?")).fix(
            format!("replace with `{best}`"),
            span,
            best,
        ),
        None => {
            let listed: Vec<&str> = candidates.collect();
            if listed.is_empty() {
                diagnostic.help("a template that cannot be filled is never sent to an agent; name a field the element has")
            } else {
                diagnostic.help(format!(
                    "the names here are {}",
                    crate::diagnostic::backticked(&listed)
                ))
            }
        }
    }
}

fn describe_record(ty: &Type) -> String {
    format!("a value of type {}", crate::sema::typecheck::shown(ty))
}

/// `when` and `exit_when`, checked in the stage's names (the reference allows `item`, `prev`
/// and `prev_raw` in `when`; `item`, `result` and `result_raw` in `exit_when`).
fn check_predicates(
    stage: &Stage,
    scope: &Scope<'_>,
    expressions: &Expressions,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let bound = |name: &str| {
        scope
            .names
            .iter()
            .find(|(bound, _)| *bound == name)
            .map(|(_, ty)| ty.clone())
    };
    if let Some(when) = &stage.when {
        let mut env = Env::new();
        for name in ["item", "prev", "prev_raw"] {
            if let Some(ty) = bound(name) {
                env.names.insert(name.to_owned(), ty);
            }
        }
        check_text(&when.value, &mut env, expressions, diagnostics);
    }
    if let Some(exit) = &stage.exit_when {
        let mut env = Env::new();
        if let Some(item) = bound("item") {
            env.names.insert("item".to_owned(), item);
        }
        env.names.insert("result".to_owned(), Type::String);
        env.names.insert("result_raw".to_owned(), Type::Any);
        check_text(&exit.value, &mut env, expressions, diagnostics);
    }
}

// ----- for tools: what a template may name, and what each placeholder reads ---------------------

/// A template of a fan-out step: the step's own (`parallel_dispatch`) or a stage's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateOf {
    Step,
    /// The stage at this index of a pipeline's `stages`.
    Stage(usize),
}

/// The names a template may use, as [`check_step`] scopes them.
#[derive(Clone, Debug)]
pub struct TemplateNames {
    /// Names bound here, with their types, in the reference's order.
    pub names: Vec<(&'static str, Type)>,
    /// The element whose fields are bound by their own names (`{description}`).
    pub spread: Option<Type>,
    /// Names bound elsewhere, with why they are not bound here.
    pub unbound: Vec<(&'static str, String)>,
}

/// What one identifier of a placeholder reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Reading {
    /// A name bound here; `element` when it is the fanned-out element itself (`{task}`, a
    /// stage's `{item}`, a lane's `{source}`).
    Name { ty: Type, element: bool },
    /// A field: of the element when `spread` (`{description}`), else of what the identifier
    /// before it reads.
    Field { ty: Type, spread: bool },
    /// A name bound elsewhere, with why it is not bound here.
    Unbound(String),
    /// Neither a name bound here nor a field (of a closed record).
    Missing,
}

/// One placeholder, located in the file.
#[derive(Clone, Debug)]
pub struct PlaceholderUse {
    pub template: TemplateOf,
    /// The whole placeholder, braces included.
    pub span: Span,
    /// Each identifier, its span and what it reads; the identifiers after one that does not
    /// resolve are left out, as the checks leave them unreported.
    pub segments: Vec<(String, Span, Reading)>,
}

/// The names the template `template` of `step` may use; `env` is the flow's environment with
/// no free names, as `typecheck` gives [`check_step`]. `None` when the step has no such
/// template place (not a fan-out step, no such stage).
pub fn template_names(
    step: &Step,
    template: TemplateOf,
    env: &mut Env,
    expressions: &Expressions,
) -> Option<TemplateNames> {
    let element = fan_out_element(step, env, expressions)?;
    let scope = match (step.step_type.as_ref()?.value, template) {
        (StepType::ParallelDispatch, TemplateOf::Step) => Scope::task(&element),
        (StepType::Pipeline, TemplateOf::Stage(index)) => {
            let stages = &step.stages.as_ref()?.value;
            stages.get(index)?;
            Scope::stage(&element, stage_role(region(stages), index), index, step)
        }
        _ => return None,
    };
    Some(TemplateNames {
        names: scope.names.clone(),
        spread: scope.spread.cloned(),
        unbound: scope.unbound.clone(),
    })
}

/// Every placeholder of the templates of `step`, in order, with what each identifier reads
/// under the same rules as [`check_step`]; `env` as for [`template_names`].
pub fn placeholder_uses(
    step: &Step,
    env: &mut Env,
    expressions: &Expressions,
) -> Vec<PlaceholderUse> {
    let mut out = Vec::new();
    let Some(element) = fan_out_element(step, env, expressions) else {
        return out;
    };
    match step.step_type.as_ref().map(|ty| ty.value) {
        Some(StepType::ParallelDispatch) => {
            if let Some(template) = &step.intent_template {
                let scope = Scope::task(&element);
                uses_in(&template.value, TemplateOf::Step, &scope, &mut out);
            }
        }
        Some(StepType::Pipeline) => {
            let stages = step.stages.as_ref().map_or(&[][..], |stages| &stages.value);
            let region = region(stages);
            for (index, stage) in stages.iter().enumerate() {
                if let Some(template) = &stage.intent_template {
                    let scope = Scope::stage(&element, stage_role(region, index), index, step);
                    uses_in(&template.value, TemplateOf::Stage(index), &scope, &mut out);
                }
            }
        }
        _ => {}
    }
    out
}

/// What reading the field `name` of a value of type `ty` gives, as the checks read it: `any`
/// unless `ty` is a closed record, `None` when that record lacks the field.
pub fn template_field(ty: &Type, name: &str) -> Option<Type> {
    match field_of(ty, name) {
        FieldLookup::Found(ty) => Some(ty),
        FieldLookup::Missing(_) => None,
    }
}

/// The element a fan-out step's templates read; `None` when the step does not fan out. `env`
/// is borrowed, not cloned: it holds every step of the flow, and this runs once per step.
fn fan_out_element(step: &Step, env: &mut Env, expressions: &Expressions) -> Option<Type> {
    let ty = step.step_type.as_ref()?.value;
    if !matches!(ty, StepType::ParallelDispatch | StepType::Pipeline) {
        return None;
    }
    // What the source is was reported by `check_step`: only its type matters here.
    let mut ignored = Vec::new();
    let suggest = std::mem::replace(&mut env.suggest, false);
    let element = step
        .source
        .as_ref()
        .and_then(|source| source_element(source, env, expressions, &mut ignored))
        .unwrap_or(Type::Any);
    env.suggest = suggest;
    Some(element)
}

/// Where a pipeline's fan-out region stands: the index of its `fanout` stage and of its
/// `join` stage. Computed once per pipeline: a hostile spec may have many stages.
fn region(stages: &[Stage]) -> (Option<usize>, Option<usize>) {
    let fanout = stages.iter().position(|stage| stage.fanout.is_some());
    let join = stages
        .iter()
        .position(|stage| stage.join.as_ref().is_some_and(|join| join.value));
    (fanout, join)
}

/// The role of the stage at `index` in a pipeline whose [`region`] is `(fanout, join)`.
/// Without a `join` (reported by the rules), the stages after the `fanout` are read as lanes,
/// so that their placeholders are not reported twice.
fn stage_role((fanout, join): (Option<usize>, Option<usize>), index: usize) -> Role {
    match (fanout, join) {
        (Some(fanout), Some(join)) if index == join && join > fanout => Role::Join,
        (Some(fanout), join) if index > fanout && join.is_none_or(|join| index < join) => {
            Role::Lane
        }
        _ if index == 0 => Role::First,
        _ => Role::Later,
    }
}

fn uses_in(text: &Text, template: TemplateOf, scope: &Scope<'_>, out: &mut Vec<PlaceholderUse>) {
    let (parsed, _) = template::parse(&text.value);
    for placeholder in parsed.placeholders() {
        let mut segments = Vec::new();
        let mut ty = Type::Any;
        for (at, (name, range)) in placeholder.path.iter().zip(&placeholder.ranges).enumerate() {
            let reading = if at == 0 {
                match scope.lookup(name) {
                    Lookup::Bound(bound) if scope.names.iter().any(|(n, _)| n == name) => {
                        // The element itself: `{task}`, or `{item}` where fields are spread
                        // from it, or a lane's `{source}`.
                        let element = matches!(name.as_str(), "task" | "source")
                            || (name == "item" && scope.spread.is_some());
                        Reading::Name { ty: bound, element }
                    }
                    Lookup::Bound(field) => Reading::Field {
                        ty: field,
                        spread: true,
                    },
                    Lookup::Unbound(why) => Reading::Unbound(why.to_owned()),
                    Lookup::Missing => Reading::Missing,
                }
            } else {
                match template_field(&ty, name) {
                    Some(field) => Reading::Field {
                        ty: field,
                        spread: false,
                    },
                    None => Reading::Missing,
                }
            };
            let resolved = match &reading {
                Reading::Name { ty, .. } | Reading::Field { ty, .. } => Some(ty.clone()),
                Reading::Unbound(_) | Reading::Missing => None,
            };
            segments.push((name.clone(), text.span_of(range.clone()), reading));
            match resolved {
                Some(next) => ty = next,
                None => break,
            }
        }
        out.push(PlaceholderUse {
            template,
            span: text.span_of(placeholder.range.clone()),
            segments,
        });
    }
}

#[cfg(test)]
mod placeholder_tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

    use super::*;
    use crate::sema::symbols::flow_steps;
    use crate::source::{FileId, SourceFile};

    const SPEC: &str = r#"version: "0.3"
contracts:
  Task: {id: {type: string}, description: {type: string}}
  TaskGraph: {tasks: {type: "Task[]"}}
flows:
  implement:
    input: {feature: {type: string}}
    steps:
      - {id: plan, type: decompose, agent: claude, output_contract: TaskGraph, intent: "Split", inputs: {feature: "$.input.feature"}}
      - id: build
        type: parallel_dispatch
        source: "$.steps.plan.output.tasks"
        intent_template: "Task {task.id}: {description} {prev} {item}"
      - id: review
        type: pipeline
        source: "$.steps.plan.output.tasks"
        stages:
          - intent_template: "Review {item.description}"
          - intent_template: "Then {prev}"
"#;

    /// Each placeholder as `text=reading` lines, and the names of the second stage.
    fn readings() -> (Vec<String>, Vec<&'static str>) {
        let src = SourceFile::new(FileId::default(), "t.stratum.yaml", SPEC.to_owned());
        let compilation = crate::check(&src);
        let ast = &compilation.ast;
        let model = &compilation.model;
        let flow = &ast.flows[0];
        let mut env = Env::new();
        env.input = Some(model.contracts.record(&flow.input.as_ref().unwrap().value));
        for (step, info) in flow_steps(flow).iter().zip(&model.flows[0].steps) {
            env.steps
                .insert(step.id.as_ref().unwrap().value.clone(), info.output.clone());
        }
        let mut out = Vec::new();
        for step in flow_steps(flow) {
            for placeholder in placeholder_uses(step, &mut env, &model.expressions) {
                for (name, span, reading) in placeholder.segments {
                    assert_eq!(&SPEC[span.range()], name);
                    let reading = match reading {
                        Reading::Name { ty, element } => format!("name {ty} element={element}"),
                        Reading::Field { ty, spread } => format!("field {ty} spread={spread}"),
                        Reading::Unbound(_) => "unbound".to_owned(),
                        Reading::Missing => "missing".to_owned(),
                    };
                    out.push(format!("{:?} {name}: {reading}", placeholder.template));
                }
            }
        }
        let review = &flow_steps(flow)[2];
        let names = template_names(review, TemplateOf::Stage(1), &mut env, &model.expressions)
            .unwrap()
            .names
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        (out, names)
    }

    #[test]
    fn each_identifier_reads_what_the_checks_give_it() {
        let (readings, names) = readings();
        assert_eq!(
            readings,
            [
                "Step task: name {id: string, description: string} element=true",
                "Step id: field string spread=false",
                "Step description: field string spread=true",
                "Step prev: name string element=false",
                "Step item: unbound",
                "Stage(0) item: name {id: string, description: string} element=true",
                "Stage(0) description: field string spread=false",
                "Stage(1) prev: name string element=false",
            ]
        );
        assert_eq!(names, ["id", "item", "prev", "prev_raw"]);
    }
}
