//! The flow's `output` against the result that reaches its end (`E0077`).
//!
//! Takes the resolved steps, each flow's execution order and routing; for every way a flow can
//! end, finds the steps whose output can become the flow's result and reports each one whose
//! contract does not fit the flow's `output` contract. Returns, per flow, whether it reported
//! one (the usage pass then leaves out `W0013`, which says less about the same problem).
//!
//! The rule is the runtime's (`runtime/core/src/exec/finish.rs`): when the cursor reaches the end,
//! the flow's result is the output of the last step, in execution order, that has one, and it
//! is validated against the schema of the flow's `output`; a mismatch fails the step that
//! produced it, which retries and then ends the flow `retries_exhausted`, after all the work.
//! The runtime clears the steps from a routing target on whenever it jumps or moves back, so
//! while the cursor is at a step no step at or after it in execution order has an output. A
//! flow therefore ends
//! - after a step that completes with nowhere further to go (the last step in order without a
//!   `next`, or the cleanup a gate's `on_kill` routes to): its output is the result;
//! - after a step skipped by its `skip_if` with nowhere further to go, or a gate approved with
//!   `on_approve: ~` (a gate has no output): the result is the output of the nearest step
//!   before it in execution order that ran. A step with a `skip_if` is one candidate and the
//!   search goes on past it; the first step without one ends it. A step that a route may jump
//!   over (`next`, `on_fail`, a gate's routes) is taken to have run: whether a jump and the
//!   skip that ends the flow can happen in one run depends on values (a recovery step that is
//!   skipped when the release it recovers from succeeded), which the checker does not follow,
//!   and an error must not be given for a path that cannot happen.
//!
//! A step whose output type is unknown (an inline step without `output_contract`, a function
//! or flow without `output`, a judge) may produce anything: it is never reported, and it ends
//! the search like any step that always runs. A flow whose every step may be skipped can end
//! with no result at all; the runtime refuses that too, but it is not reported here.

use stratum_grammar::types::Type;

use crate::diagnostic::{Code, Diagnostic};
use crate::sema::FlowModel;
use crate::sema::reach::reached;
use crate::sema::resolve::{StepKind, name_span};
use crate::sema::symbols::{Symbols, Table, flow_steps};
use crate::sema::types::ContractTypes;
use crate::syntax::ast::{Ast, Field, Flow, Step};

/// Per flow (in `Ast::flows` order), whether an `E0077` was reported for it.
pub fn check(
    ast: &Ast,
    symbols: &Symbols,
    contracts: &ContractTypes,
    flows: &[FlowModel],
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<bool> {
    // A contract whose type is in error (unknown or recursive field types, ranges, values,
    // size) has a type made up to recover from it: comparing two would only repeat the error.
    let contract_errors = diagnostics.iter().any(|diagnostic| {
        matches!(
            diagnostic.code,
            Code::E0070 | Code::E0072 | Code::E0073 | Code::E0074 | Code::E0075
        )
    });
    if contract_errors {
        return vec![false; ast.flows.len()];
    }
    ast.flows
        .iter()
        .zip(flows)
        .map(|(flow, model)| match symbols.steps.get(model.index) {
            Some(table) => check_flow(flow, model, table, contracts, diagnostics),
            None => false,
        })
        .collect()
}

/// Why a value that satisfies `actual` may fail the schema of `expected`, or `None` when it
/// passes.
///
/// The runtime's check is JSON Schema validation, and a contract's schema lists its fields
/// and the required ones without forbidding others: a contract passes for another when every
/// field the other requires is there with a type that fits, whatever else it has and in
/// whatever order. Optionals and enums are looked through, as for step inputs (`E0076`):
/// whether a value is `None`, or among an enum's values, is decided by the value the agent
/// returns. `actual_name` and `expected_name` are the contracts' names, for the reason.
pub(crate) fn mismatch(
    expected: &Type,
    actual: &Type,
    expected_name: &str,
    actual_name: &str,
) -> Option<String> {
    field_mismatch(expected, actual, "").map(|problem| match problem {
        Problem::Missing(path) => {
            format!("`{actual_name}` has no field `{path}`, which `{expected_name}` requires")
        }
        Problem::Type { path, actual, .. } if path.is_empty() => {
            format!("`{actual_name}` is `{actual}`, not `{expected_name}`")
        }
        Problem::Type {
            path,
            expected,
            actual,
        } => format!(
            "field `{path}` is `{actual}` in `{actual_name}` but `{expected}` in `{expected_name}`"
        ),
    })
}

/// Where a flow ends without the producing step having completed there.
#[derive(Clone, Copy)]
enum End {
    /// A gate approved with `on_approve: ~` (declaration index).
    Approved(usize),
    /// A last step skipped by its `skip_if` (declaration index).
    Skipped(usize),
}

/// The first difference [`mismatch`] found, at a dotted field path.
enum Problem {
    Missing(String),
    Type {
        path: String,
        expected: Type,
        actual: Type,
    },
}

fn field_mismatch(expected: &Type, actual: &Type, path: &str) -> Option<Problem> {
    let expected = expected.non_optional().widened();
    let actual = actual.non_optional().widened();
    match (&expected, &actual) {
        (Type::Any, _) | (_, Type::Any) | (_, Type::Null) => None,
        (Type::Record(wanted), Type::Record(given)) => wanted.fields.iter().find_map(|field| {
            let at = if path.is_empty() {
                field.name.clone()
            } else {
                format!("{path}.{}", field.name)
            };
            match given.field(&field.name) {
                Some(ty) => field_mismatch(&field.ty, ty, &at),
                None if given.open || field.ty.can_be_none() => None,
                None => Some(Problem::Missing(at)),
            }
        }),
        (Type::List(wanted), Type::List(given)) => {
            field_mismatch(wanted, given, &format!("{path}[]"))
        }
        _ if expected.accepts(&actual) => None,
        _ => Some(Problem::Type {
            path: path.to_owned(),
            expected,
            actual,
        }),
    }
}

fn check_flow(
    flow: &Flow,
    model: &FlowModel,
    table: &Table,
    contracts: &ContractTypes,
    diagnostics: &mut Vec<Diagnostic>,
) -> bool {
    let Some(output) = &flow.output else {
        return false;
    };
    let Some(expected) = contracts.contract(&output.value) else {
        return false;
    };
    // A step of unknown kind may be meant to produce the output: an error already says why.
    if model
        .steps
        .iter()
        .any(|info| info.kind == StepKind::Unknown)
    {
        return false;
    }
    let steps = flow_steps(flow);
    // Two steps with one id (E0017) make routes to it ambiguous: which ends the flow is not
    // known, and the error about the id comes first.
    if steps.iter().filter(|step| step.id.is_some()).count() != table.len() {
        return false;
    }
    let order = &model.dag.order;
    let reached = reached(flow, model, table);
    // The steps a gate's kill routes to: after them the flow ends unless they route on.
    let mut cleanup = vec![false; steps.len()];
    for (step, info) in steps.iter().zip(&model.steps) {
        let target = step.on_kill.as_ref().and_then(|kill| kill.value.as_deref());
        if let (StepKind::Gate(_), Some(index)) = (info.kind, target.and_then(|t| table.get(t)))
            && let Some(slot) = cleanup.get_mut(index)
        {
            *slot = true;
        }
    }

    // Each step that may produce the flow's result, once, with the first end it reaches.
    let mut producers: Vec<(usize, Option<End>)> = Vec::new();
    let mut is_producer = vec![false; steps.len()];
    let mut searched = vec![false; order.len()];
    for (at, &index) in order.iter().enumerate() {
        let (Some(step), Some(info)) = (steps.get(index), model.steps.get(index)) else {
            continue;
        };
        if !reached.get(index).copied().unwrap_or(false) {
            continue;
        }
        let mut add = |producer: usize, end: Option<End>| {
            if let Some(seen) = is_producer.get_mut(producer)
                && !*seen
            {
                *seen = true;
                producers.push((producer, end));
            }
        };
        if let StepKind::Gate(_) = info.kind {
            // Approved (or skipped by its `skip_if`), a gate goes to `on_approve`; `~` ends.
            let ends = match &step.on_approve {
                None | Some(Field { value: None, .. }) => true,
                Some(Field { value: Some(_), .. }) => false,
            };
            if ends {
                search_back(
                    at,
                    End::Approved(index),
                    &mut SearchState {
                        order,
                        steps,
                        model,
                        reached: &reached,
                        searched: &mut searched,
                        add: &mut add,
                    },
                );
            }
            continue;
        }
        let last = at + 1 == order.len();
        if step.next.is_some() || !(last || cleanup.get(index).copied().unwrap_or(false)) {
            continue;
        }
        add(index, None);
        if step.skip_if.is_some() {
            search_back(
                at,
                End::Skipped(index),
                &mut SearchState {
                    order,
                    steps,
                    model,
                    reached: &reached,
                    searched: &mut searched,
                    add: &mut add,
                },
            );
        }
    }

    let mut reported = false;
    for (index, end) in producers {
        let (Some(step), Some(info)) = (steps.get(index), model.steps.get(index)) else {
            continue;
        };
        let Some(produced) = info.contract.as_deref() else {
            continue;
        };
        if let Some(reason) = mismatch(expected, &info.result, &output.value, produced) {
            diagnostics.push(output_mismatch(
                flow, output, step, info.kind, produced, end, steps, reason,
            ));
            reported = true;
        }
    }
    reported
}

/// What a search back from an end reads and where it records the producers it finds.
struct SearchState<'a, F: FnMut(usize, Option<End>)> {
    order: &'a [usize],
    steps: &'a [Step],
    model: &'a FlowModel,
    reached: &'a [bool],
    /// Positions an earlier search went through: the search from there on would find the
    /// same steps again, so it stops (each position is searched once per flow).
    searched: &'a mut [bool],
    add: &'a mut F,
}

/// From the end at position `at`, where the step there left no output, back to the nearest
/// step that always runs: every step on the way may produce the flow's result.
fn search_back<F: FnMut(usize, Option<End>)>(at: usize, end: End, state: &mut SearchState<'_, F>) {
    for before in (0..at).rev() {
        match state.searched.get_mut(before) {
            Some(seen) if !*seen => *seen = true,
            _ => return,
        }
        let Some(&index) = state.order.get(before) else {
            return;
        };
        let (Some(step), Some(info)) = (state.steps.get(index), state.model.steps.get(index))
        else {
            return;
        };
        if !state.reached.get(index).copied().unwrap_or(false)
            || matches!(info.kind, StepKind::Gate(_))
        {
            continue;
        }
        (state.add)(index, Some(end));
        if step.skip_if.is_none() {
            return;
        }
    }
}

/// E0077 `flow-output-mismatch`: a step whose output can become the flow's result produces
/// another contract than the flow's `output`. Why: the runtime checks the result against the
/// flow's `output` only when the flow ends, after every step has run, and refuses it. Fix:
/// produce the flow's contract in that step, or change the flow's `output`.
#[allow(clippy::too_many_arguments)]
fn output_mismatch(
    flow: &Flow,
    output: &Field<String>,
    step: &Step,
    kind: StepKind,
    produced: &str,
    end: Option<End>,
    steps: &[Step],
    reason: String,
) -> Diagnostic {
    let wanted = output.value.as_str();
    let id = step.id.as_ref().map_or("?", |id| id.value.as_str());
    let (at, fix) = match kind {
        StepKind::Function(_) => (
            step.function.as_ref(),
            format!("call a function whose `output` is `{wanted}`"),
        ),
        StepKind::Flow(_) => (
            step.flow.as_ref(),
            format!("run a flow whose `output` is `{wanted}`"),
        ),
        _ => (
            step.output_contract.as_ref(),
            format!("give the step `output_contract: {wanted}`"),
        ),
    };
    let span = at.map_or_else(
        || step.id.as_ref().map_or(step.span, |id| id.span),
        |field| name_span(&field.value, field.span),
    );
    let diagnostic = Diagnostic::new(
        Code::E0077,
        format!(
            "step `{id}` produces `{produced}`, but flow `{}` must end with `{wanted}`",
            flow.name.value
        ),
        span,
        format!("produces `{produced}`"),
    )
    .secondary(
        name_span(&output.value, output.span),
        format!("the flow's result must be `{wanted}`"),
    );
    let ending = |index: usize| steps.get(index).and_then(|step| step.id.as_ref());
    let diagnostic = match end {
        Some(End::Approved(gate)) => match ending(gate) {
            Some(gate) => diagnostic.secondary(
                gate.span,
                format!(
                    "the flow ends with the result of `{id}` when `{}` is approved",
                    gate.value
                ),
            ),
            None => diagnostic,
        },
        Some(End::Skipped(last)) => match ending(last) {
            Some(last) => diagnostic.secondary(
                last.span,
                format!(
                    "the flow ends with the result of `{id}` when `{}` is skipped",
                    last.value
                ),
            ),
            None => diagnostic,
        },
        None => diagnostic,
    };
    diagnostic.help(format!(
        "{reason}, so the runtime would refuse the flow's result after all its steps have run; \
         {fix}, or change the flow's `output`"
    ))
}
