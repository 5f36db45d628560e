//! The placeholders of version 0.3 intent templates (`"Task {task.id}: {description}"`), as
//! the compiler's checks read them.
//!
//! Takes an [`Analysis`]; gives each placeholder of each fan-out step with what each of its
//! identifiers reads (`sema::fan_out::placeholder_uses`), and the flow environment the checks
//! give a step. Hover, the index and completion use it; none of them scopes a name itself, so
//! what the server says a placeholder is cannot drift from what `stratumc check` reports.

use stratum_compiler::Compilation;
use stratum_compiler::sema::fan_out::{self, PlaceholderUse, Reading};
use stratum_compiler::sema::symbols::flow_steps;
use stratum_compiler::source::Span;
use stratum_grammar::types::{Env, Type};

/// One placeholder of a step's template.
#[derive(Clone, Debug)]
pub struct Located {
    /// The flow and the step (indices into the AST) the template belongs to.
    pub flow: usize,
    pub step: usize,
    pub placeholder: PlaceholderUse,
}

/// The environment `typecheck` gives the steps of the flow at `flow`: its `input`, the outputs
/// of its steps, no free names. `None` when there is no such flow.
pub fn flow_env(compilation: &Compilation, flow: usize) -> Option<Env> {
    let model = &compilation.model;
    let ast_flow = compilation.ast.flows.get(flow)?;
    let flow_model = model.flows.get(flow)?;
    let mut env = Env::new();
    env.input = Some(
        ast_flow
            .input
            .as_ref()
            .map_or(Type::Any, |input| model.contracts.record(&input.value)),
    );
    env.suggest = false;
    for (step, info) in flow_steps(ast_flow).iter().zip(&flow_model.steps) {
        if let Some(id) = &step.id {
            env.steps
                .entry(id.value.clone())
                .or_insert_with(|| info.output.clone());
        }
    }
    Some(env)
}

/// Every placeholder of every fan-out step, in document order per step.
pub fn all(compilation: &Compilation) -> Vec<Located> {
    let mut out = Vec::new();
    for (flow_index, flow) in compilation.ast.flows.iter().enumerate() {
        let steps = flow_steps(flow);
        // Most flows have no fan-out step: build no environment for them.
        if !steps.iter().any(|step| step.step_type.is_some()) {
            continue;
        }
        let Some(mut env) = flow_env(compilation, flow_index) else {
            continue;
        };
        for (step_index, step) in steps.iter().enumerate() {
            for placeholder in
                fan_out::placeholder_uses(step, &mut env, &compilation.model.expressions)
            {
                out.push(Located {
                    flow: flow_index,
                    step: step_index,
                    placeholder,
                });
            }
        }
    }
    out
}

/// The identifier of a placeholder under `offset` (its end included): the placeholder and the
/// identifier's position in it.
pub fn at(compilation: &Compilation, offset: usize) -> Option<(Located, usize)> {
    all(compilation).into_iter().find_map(|located| {
        let position = located
            .placeholder
            .segments
            .iter()
            .position(|(_, span, _)| contains(*span, offset))?;
        Some((located, position))
    })
}

fn contains(span: Span, offset: usize) -> bool {
    span.start as usize <= offset && offset <= span.end as usize
}

/// What a name bound in a template holds; `element` when it is the fanned-out element.
pub fn name_doc(name: &str, element: bool) -> &'static str {
    match name {
        "task" => "The task's element of the `source` list.",
        "item" if element => "The item: an element of the `source` list.",
        "item" => "The lane's element: one of the list the `fanout` stage answered.",
        "source" => "The item the lane belongs to: an element of the `source` list.",
        "id" => "The task's id.",
        "prev" => "The previous result, as text (a task's single dependency, or the stage before).",
        "prev_raw" => "The previous result, as its JSON value.",
        "prevs" => "The lanes' results, as text.",
        "prevs_raw" => "The lanes' results, as JSON values.",
        _ => "A name bound in this template.",
    }
}

/// The type a reading gives, when it resolved.
pub fn reading_type(reading: &Reading) -> Option<&Type> {
    match reading {
        Reading::Name { ty, .. } | Reading::Field { ty, .. } => Some(ty),
        Reading::Unbound(_) | Reading::Missing => None,
    }
}

/// A clean version 0.3 spec with a parallel_dispatch step and a pipeline, for the tests of
/// every feature that reads placeholders.
#[cfg(test)]
pub(crate) const V03_SPEC: &str = r#"version: "0.3"
contracts:
  Task: {id: {type: string}, description: {type: string}, files_owned: {type: array}}
  TaskGraph: {tasks: {type: "Task[]"}}
flows:
  implement:
    input: {feature: {type: string}}
    output: TaskGraph
    steps:
      - {id: plan, type: decompose, agent: claude, output_contract: TaskGraph, intent: "Split", inputs: {feature: "$.input.feature"}}
      - id: build
        type: parallel_dispatch
        source: "$.steps.plan.output.tasks"
        intent_template: "Task {task.id}: {description}"
      - id: review
        type: pipeline
        source: "$.steps.plan.output.tasks"
        depends_on: [build]
        stages:
          - intent_template: "Review {item.description} ({id})"
          - intent_template: "Fix {prev} for {description}"
            fanout: {max: 3, require: all}
          - intent_template: "Lane {item} of {source.id}"
          - intent_template: "Join {prevs}"
            join: true
"#;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    #[test]
    fn every_placeholder_of_the_spec_is_found_where_it_stands() {
        let analysis = crate::analysis::clean(V03_SPEC);
        let found: Vec<String> = all(&analysis.compilation)
            .iter()
            .map(|located| analysis.slice(located.placeholder.span).to_owned())
            .collect();
        assert_eq!(
            found,
            [
                "{task.id}",
                "{description}",
                "{item.description}",
                "{id}",
                "{prev}",
                "{description}",
                "{item}",
                "{source.id}",
                "{prevs}",
            ]
        );
        let offset = V03_SPEC.find("{task.id}").unwrap() + 6;
        let (located, position) = at(&analysis.compilation, offset).unwrap();
        assert_eq!(position, 1);
        assert_eq!((located.flow, located.step), (0, 1));
    }
}
