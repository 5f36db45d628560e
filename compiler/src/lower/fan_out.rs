//! Lowering version 0.3 fan-out steps: the source binding, the settings with the reference's
//! defaults written out, compiled templates and the stages of a pipeline.
//!
//! A template is lowered to its text and the values it inserts, each a [`TemplateRoot`] and an
//! interned field path, so the runtime renders it without parsing a string. Which root a
//! placeholder names follows the bindings `sema::fan_out` checked: in a parallel template
//! `{task.f}` and `{f}` read the task's element; in a stage `{item.f}` and `{f}` the item.

use super::steps::FlowContext;
use super::{LowerError, Lowering};
use crate::plan::{self, TemplatePart, TemplateRoot};
use crate::syntax::ast::{self, Field, Step, Text};
use crate::template;

/// Where a template stands, which decides what its first name means.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// A parallel_dispatch task.
    Task,
    /// A pipeline stage.
    Stage,
}

impl Lowering<'_> {
    /// The settings a parallel or pipeline step shares.
    pub(super) fn fan_out(
        &mut self,
        context: &FlowContext<'_>,
        step: &Step,
    ) -> Result<plan::FanOut, LowerError> {
        let source = step
            .source
            .as_ref()
            .ok_or_else(|| LowerError::Internal("a fan-out step without `source`".to_owned()))?;
        let source = self.binding(&source.value, context.position, context.table)?;
        let pre_merge_verify = match step.pre_merge_verify.as_ref().map(|field| &field.value) {
            Some(ast::PreMergeVerify::Commands(commands)) => Some(plan::Verify::Commands(
                commands
                    .iter()
                    .map(|command| command.value.clone())
                    .collect(),
            )),
            Some(ast::PreMergeVerify::Reference(text)) => Some(plan::Verify::Binding(
                self.binding(text, context.position, context.table)?,
            )),
            None => None,
        };
        Ok(plan::FanOut {
            source,
            agent: step.agent.as_ref().map(|agent| agent.value.clone()),
            max_concurrent: step
                .max_concurrent
                .as_ref()
                .map_or(plan::DEFAULT_MAX_CONCURRENT, |max| max.value),
            isolation: match step.isolation.as_ref().map(|isolation| isolation.value) {
                None | Some(ast::Isolation::Worktree) => plan::Isolation::Worktree,
                Some(ast::Isolation::None) => plan::Isolation::None,
                Some(ast::Isolation::Branch) => {
                    return Err(LowerError::Internal(
                        "`isolation: branch` reached lowering".to_owned(),
                    ));
                }
            },
            require: lower_require(step.require.as_ref()),
            merge: match step.merge.as_ref().map(|merge| merge.value) {
                None | Some(ast::Merge::SequentialApply) => plan::Merge::SequentialApply,
                Some(ast::Merge::Manual) => plan::Merge::Manual,
            },
            task_timeout: step
                .task_timeout
                .as_ref()
                .map_or(plan::DEFAULT_TASK_TIMEOUT, |timeout| timeout.value),
            task_reasoning_template: step
                .task_reasoning_template
                .as_ref()
                .and_then(|template| crate::sema::schema::to_json(&template.value)),
            capture_diff: step.capture_diff.as_ref().is_some_and(|flag| flag.value),
            defer_advance: step.defer_advance.as_ref().is_some_and(|flag| flag.value),
            pre_merge_verify,
        })
    }

    /// A pipeline's stages.
    pub(super) fn stages(&mut self, step: &Step) -> Result<Vec<plan::Stage>, LowerError> {
        let mut stages = Vec::new();
        for stage in step.stages.iter().flat_map(|stages| &stages.value) {
            let template = stage.intent_template.as_ref().ok_or_else(|| {
                LowerError::Internal("a stage without `intent_template`".to_owned())
            })?;
            let optional = |field: &Option<Field<Text>>| {
                field
                    .as_ref()
                    .map(|field| self.expression(&field.value))
                    .transpose()
            };
            let when = optional(&stage.when)?;
            let exit_when = optional(&stage.exit_when)?;
            stages.push(plan::Stage {
                template: self.template(&template.value, Place::Stage),
                agent: stage.agent.as_ref().map(|agent| agent.value.clone()),
                task_timeout: stage.task_timeout.as_ref().map(|timeout| timeout.value),
                task_reasoning_template: stage
                    .task_reasoning_template
                    .as_ref()
                    .and_then(|template| crate::sema::schema::to_json(&template.value)),
                when,
                exit_when,
                fanout: stage.fanout.as_ref().map(|fanout| plan::Fanout {
                    max: fanout.value.max.as_ref().map_or(1, |max| max.value),
                    require: lower_require(fanout.value.require.as_ref()),
                }),
                join: stage.join.as_ref().is_some_and(|join| join.value),
            });
        }
        Ok(stages)
    }

    /// A template, compiled. Checking reported every template error, so what does not parse
    /// here is left out rather than failing the build of a spec that checked clean.
    pub(super) fn template(&mut self, text: &Text, place: Place) -> plan::Template {
        let (parsed, _) = template::parse(&text.value);
        let parts = parsed
            .parts
            .into_iter()
            .map(|part| match part {
                template::Part::Literal(text) => TemplatePart::Text(text),
                template::Part::Placeholder(placeholder) => {
                    let (root, rest) = root(&placeholder.path, place);
                    TemplatePart::Value {
                        root,
                        path: self.paths.intern(rest.to_vec()),
                    }
                }
            })
            .collect();
        plan::Template { parts }
    }
}

/// The root a placeholder's first name binds, and the fields read from it.
fn root(path: &[String], place: Place) -> (TemplateRoot, &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return (TemplateRoot::Item, path);
    };
    let named = match (first.as_str(), place) {
        ("task", Place::Task) | ("item", Place::Stage) => Some(TemplateRoot::Item),
        ("prev", _) => Some(TemplateRoot::Prev),
        ("prev_raw", _) => Some(TemplateRoot::PrevRaw),
        ("id", Place::Stage) => Some(TemplateRoot::TaskId),
        ("prevs", Place::Stage) => Some(TemplateRoot::Prevs),
        ("prevs_raw", Place::Stage) => Some(TemplateRoot::PrevsRaw),
        ("source", Place::Stage) => Some(TemplateRoot::Source),
        _ => None,
    };
    match named {
        Some(root) => (root, rest),
        // A field of the element, spread into the task's names.
        None => (TemplateRoot::Item, path),
    }
}

fn lower_require(require: Option<&Field<ast::Require>>) -> plan::Require {
    match require.map(|require| require.value) {
        None | Some(ast::Require::All) => plan::Require::All,
        Some(ast::Require::Any) => plan::Require::Any,
        Some(ast::Require::AtLeast(count)) => plan::Require::AtLeast(count),
    }
}
