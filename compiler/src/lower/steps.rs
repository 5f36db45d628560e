//! Lowering one step: its action, inputs, output, checks, limits and successors.
//!
//! A function step takes its function's settings (intent, output contract, `ensure`s first,
//! retries, budget, model, guardrails, cache) where the step does not set its own. Unwritten
//! retries become the reference's defaults: 3 for a function, 1 for anything else.

use petgraph::Direction;
use petgraph::graph::NodeIndex;

use super::fan_out::Place;
use super::{LowerError, Lowering, index_u32, lower_budget, truthy};
use crate::plan::{self, Action, Target};
use crate::sema::FlowModel;
use crate::sema::resolve::StepKind;
use crate::sema::symbols::Table;
use crate::syntax::ast::{self, Field, Flow, Function, InputValue, Mode, Step, Text};

/// The retries of a function that does not set them, as the reference defaults them.
const FUNCTION_RETRIES: u32 = 3;
/// The retries of an inline step that does not set them.
const STEP_RETRIES: u32 = 1;
/// The retries of a decompose, parallel_dispatch or pipeline step that does not set them.
const FAN_OUT_RETRIES: u32 = 2;

/// What every step of one flow shares.
pub(super) struct FlowContext<'a> {
    pub flow: &'a Flow,
    pub model: &'a FlowModel,
    pub table: &'a Table,
    /// Declaration index → plan index.
    pub position: &'a [u32],
}

impl FlowContext<'_> {
    /// The plan index of the step named `id`.
    fn step(&self, id: &str) -> Result<u32, LowerError> {
        self.table
            .get(id)
            .and_then(|index| self.position.get(index).copied())
            .ok_or_else(|| {
                LowerError::Internal(format!(
                    "the step `{id}` of flow `{}` does not resolve",
                    self.flow.name.value
                ))
            })
    }

    /// Where a routing field goes: its step, else `absent` (`~` or unwritten).
    fn route(
        &self,
        field: Option<&Field<Option<String>>>,
        absent: Target,
    ) -> Result<Target, LowerError> {
        match field.and_then(|field| field.value.as_deref()) {
            Some(id) => Ok(Target::Step(self.step(id)?)),
            None => Ok(absent),
        }
    }
}

impl Lowering<'_> {
    /// Lowers `step` (declaration index `index`), which runs at plan index `at`.
    pub(super) fn step(
        &mut self,
        context: &FlowContext<'_>,
        step: &Step,
        index: usize,
        at: usize,
    ) -> Result<plan::Step, LowerError> {
        let info = context
            .model
            .steps
            .get(index)
            .ok_or_else(|| LowerError::Internal(format!("step {index} was not resolved")))?;
        let function = match info.kind {
            StepKind::Function(function) | StepKind::Gate(function) => {
                self.ast.functions.get(function)
            }
            _ => None,
        };
        let id = step
            .id
            .as_ref()
            .map(|id| id.value.clone())
            .ok_or_else(|| LowerError::Internal("a step without an id".to_owned()))?;
        let following = if at + 1 < context.position.len() {
            Target::Step(index_u32(at + 1))
        } else {
            Target::End
        };
        let action = self.action(context, step, info.kind, function, following)?;

        let mut inputs = Vec::new();
        for input in step.inputs.iter().flat_map(|inputs| &inputs.value) {
            let value = match &input.value {
                InputValue::Text(text) => self.binding(text, context.position, context.table)?,
                InputValue::Literal(node) => plan::Binding::Const(
                    crate::sema::schema::to_json(node).unwrap_or(serde_json::Value::Null),
                ),
            };
            inputs.push(plan::Input {
                name: input.name.value.clone(),
                value,
            });
        }

        // A gate's contract is that of the value the person decides.
        let output = plan::Output {
            contract: info
                .contract
                .as_deref()
                .or(info.decision.as_deref())
                .and_then(|name| self.contract_index.get(name).copied()),
            schema: step
                .output_schema
                .as_ref()
                .and_then(|schema| crate::sema::schema::to_json(&schema.value)),
        };

        let mut ensure = Vec::new();
        let written = function
            .and_then(|function| function.ensure.as_ref())
            .into_iter()
            .chain(step.ensure.as_ref())
            .flat_map(|ensure| &ensure.value);
        for text in written {
            let expression = self.expression(text)?;
            // An `ensure` that always holds checks nothing (W0004 said so).
            if truthy(&expression.program) != Some(true) {
                ensure.push(expression);
            }
        }

        let skip = match &step.skip_if {
            Some(skip_if) => {
                let condition = self.expression(&skip_if.value)?;
                // A `skip_if` that is always false never skips (W0004 said so).
                (truthy(&condition.program) != Some(false)).then(|| plan::Skip {
                    condition,
                    reason: step.skip_reason.as_ref().map(|reason| reason.value.clone()),
                })
            }
            None => None,
        };

        let iteration = self.iteration(step)?;

        let retries = step
            .retries
            .as_ref()
            .or(function.and_then(|function| function.retries.as_ref()))
            .map(|retries| retries.value)
            .unwrap_or(match info.kind {
                StepKind::Function(_) => FUNCTION_RETRIES,
                StepKind::Decompose | StepKind::Parallel | StepKind::Pipeline => FAN_OUT_RETRIES,
                _ => STEP_RETRIES,
            });

        let mut guardrails: Vec<String> = Vec::new();
        for written in function
            .and_then(|function| function.guardrails.as_ref())
            .into_iter()
            .chain(step.guardrails.as_ref())
        {
            guardrails.extend(written.value.iter().map(|pattern| pattern.value.clone()));
        }

        let next = match &step.next {
            Some(next) => Target::Step(context.step(&next.value)?),
            None => following,
        };
        let on_fail = match &step.on_fail {
            Some(on_fail) => Some(Target::Step(context.step(&on_fail.value)?)),
            None => None,
        };

        let graph = &context.model.dag.graph;
        let mut depends_on: Vec<u32> = graph
            .neighbors_directed(NodeIndex::new(index), Direction::Incoming)
            .filter_map(|node| graph.node_weight(node))
            .filter_map(|&dependency| context.position.get(dependency).copied())
            .collect();
        depends_on.sort_unstable();
        depends_on.dedup();

        Ok(plan::Step {
            id,
            action,
            inputs,
            output,
            ensure,
            retries,
            budget: step
                .budget
                .as_ref()
                .or(function.and_then(|function| function.budget.as_ref()))
                .map(|budget| lower_budget(&budget.value)),
            guardrails,
            cache: step
                .cache
                .as_ref()
                .or(function.and_then(|function| function.cache.as_ref()))
                .is_some_and(|cache| cache.value),
            skip,
            iteration,
            reasoning_template: step
                .reasoning_template
                .as_ref()
                .and_then(|template| crate::sema::schema::to_json(&template.value)),
            next,
            on_fail,
            level: context
                .model
                .dag
                .levels
                .get(index)
                .copied()
                .map_or(0, index_u32),
            depends_on,
            source: self.source(step.span),
        })
    }

    fn action(
        &mut self,
        context: &FlowContext<'_>,
        step: &Step,
        kind: StepKind,
        function: Option<&Function>,
        following: Target,
    ) -> Result<Action, LowerError> {
        let text = |field: &Option<Field<String>>| field.as_ref().map(|f| f.value.clone());
        let model = || text(&step.model).or_else(|| function.and_then(|f| text(&f.model)));
        Ok(match (kind, function) {
            (StepKind::Function(_), Some(function)) => Action::Function {
                function: function.name.value.clone(),
                mode: match function.mode.as_ref().map(|mode| mode.value) {
                    Some(Mode::Compute) => plan::FunctionMode::Compute,
                    _ => plan::FunctionMode::Infer,
                },
                intent: text(&function.intent),
                agent: text(&step.agent),
                model: model(),
            },
            (StepKind::Gate(_), Some(function)) => Action::Gate {
                function: function.name.value.clone(),
                on_approve: context.route(step.on_approve.as_ref(), Target::End)?,
                on_revise: context.route(step.on_revise.as_ref(), following)?,
                on_kill: context.route(step.on_kill.as_ref(), Target::Kill)?,
                policy: step
                    .policy
                    .as_ref()
                    .map(|policy| lower_policy(policy.value)),
                policy_fallback: step
                    .policy_fallback
                    .as_ref()
                    .map(|policy| lower_policy(policy.value)),
                timeout: function.timeout.as_ref().map(|timeout| timeout.value),
            },
            (StepKind::Inline, _) => Action::Inline {
                intent: text(&step.intent).unwrap_or_default(),
                agent: text(&step.agent),
                model: model(),
            },
            (StepKind::Flow(called), _) => Action::Flow {
                flow: self.flow_index.get(&called).copied().ok_or_else(|| {
                    LowerError::Internal(format!("the flow {called} was not selected"))
                })?,
            },
            (StepKind::Decompose, _) => Action::Decompose {
                intent: text(&step.intent).unwrap_or_default(),
                agent: text(&step.agent),
                model: model(),
            },
            (StepKind::Parallel, _) => {
                let fan_out = self.fan_out(context, step)?;
                let template = match &step.intent_template {
                    Some(template) => self.template(&template.value, Place::Task),
                    None => plan::Template::default(),
                };
                let task_contract = step
                    .output_contract
                    .as_ref()
                    .and_then(|name| self.contract_index.get(&name.value).copied());
                Action::Parallel {
                    fan_out,
                    template,
                    task_contract,
                }
            }
            (StepKind::Pipeline, _) => Action::Pipeline {
                fan_out: self.fan_out(context, step)?,
                stages: self.stages(step)?,
            },
            (StepKind::Judge, _) => self.judge(step)?,
            (kind, _) => {
                return Err(LowerError::Internal(format!(
                    "a {} that does not resolve",
                    kind.noun()
                )));
            }
        })
    }

    fn iteration(&self, step: &Step) -> Result<Option<plan::Iteration>, LowerError> {
        let optional =
            |field: &Option<Field<Text>>| -> Result<Option<plan::Expression>, LowerError> {
                field
                    .as_ref()
                    .map(|field| self.expression(&field.value))
                    .transpose()
            };
        let iteration = plan::Iteration {
            max_iterations: step.max_iterations.as_ref().map(|max| max.value),
            exit_criterion: optional(&step.exit_criterion)?,
            score: optional(&step.score_expr)?,
            accumulate: optional(&step.accumulate)?,
            accumulate_key: optional(&step.accumulate_key)?,
        };
        let any = iteration.max_iterations.is_some()
            || iteration.exit_criterion.is_some()
            || iteration.score.is_some()
            || iteration.accumulate.is_some();
        Ok(any.then_some(iteration))
    }
}

fn lower_policy(policy: ast::Policy) -> plan::Policy {
    match policy {
        ast::Policy::Gate => plan::Policy::Gate,
        ast::Policy::Flag => plan::Policy::Flag,
        ast::Policy::Skip => plan::Policy::Skip,
    }
}
