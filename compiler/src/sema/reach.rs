//! Which steps of a flow a run can reach: the routes out of each step (its successor in
//! execution order, `next`, `on_fail`, a gate's approve, revise and kill) followed from the
//! first step. The unused-definition warnings (`usage`) and the flow-output rule
//! (`flow_output`) both ask it; it lives on its own so that neither imports the other.

use crate::sema::FlowModel;
use crate::sema::resolve::StepKind;
use crate::sema::symbols::{Table, flow_steps};
use crate::syntax::ast::{Field, Flow, Step};

/// Where a step may go next: step indices, each with how it gets there.
pub(crate) fn routes(
    step: &Step,
    kind: StepKind,
    after: Option<usize>,
    table: &Table,
) -> Vec<Option<usize>> {
    let target = |name: &str| Some(table.get(name).or(after));
    match kind {
        StepKind::Gate(_) => {
            let gate = |field: &Option<Field<Option<String>>>| match field {
                Some(Field {
                    value: Some(name), ..
                }) => target(name),
                Some(Field { value: None, .. }) => None,
                None => Some(after),
            };
            vec![
                gate(&step.on_approve).flatten(),
                gate(&step.on_revise).flatten(),
                gate(&step.on_kill).flatten(),
            ]
        }
        _ => {
            let mut routes = vec![match &step.next {
                Some(next) => target(&next.value).flatten(),
                None => after,
            }];
            if let Some(on_fail) = &step.on_fail {
                routes.push(target(&on_fail.value).flatten());
            }
            if step.skip_if.is_some() {
                routes.push(after);
            }
            routes
        }
    }
}

/// Per step (declaration index), its position in the execution order.
pub(crate) fn positions(model: &FlowModel) -> Vec<usize> {
    let mut position = vec![0; model.steps.len()];
    for (at, &index) in model.dag.order.iter().enumerate() {
        if let Some(slot) = position.get_mut(index) {
            *slot = at;
        }
    }
    position
}

/// Per step (declaration index), whether some route of the flow leads to it from its first
/// step in execution order.
pub(crate) fn reached(flow: &Flow, model: &FlowModel, table: &Table) -> Vec<bool> {
    let steps = flow_steps(flow);
    let order = &model.dag.order;
    let position = positions(model);
    let after = |index: usize| {
        position
            .get(index)
            .and_then(|&at| order.get(at + 1))
            .copied()
    };
    let mut reached = vec![false; steps.len()];
    let mut pending: Vec<usize> = order.first().copied().into_iter().collect();
    while let Some(index) = pending.pop() {
        match reached.get_mut(index) {
            Some(seen) if !*seen => *seen = true,
            _ => continue,
        }
        let (Some(step), Some(info)) = (steps.get(index), model.steps.get(index)) else {
            continue;
        };
        pending.extend(
            routes(step, info.kind, after(index), table)
                .into_iter()
                .flatten(),
        );
    }
    reached
}
