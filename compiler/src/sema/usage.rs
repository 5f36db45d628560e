//! Warnings about what a spec declares but never uses: contracts and functions nothing names
//! (`W0010`, `W0011`), steps that no route reaches (`W0012`), and a flow whose declared output
//! contract no step produces, nor a contract that fits it (`W0013`; not given where the error
//! `E0077` already names the step that ends the flow with another contract).
//!
//! Reachability follows the routing the runtime applies, over the execution order: a step goes
//! on to the next one in order, or to its `next`; on failure to its `on_fail`; when skipped, to
//! the next one in order; a gate goes to `on_approve` (`~` ends the flow), `on_revise` and
//! `on_kill` (`~` kills the flow). A routing target that does not resolve is treated as going on
//! in order, so an error never makes a step look unreachable.

use std::collections::HashSet;

use crate::diagnostic::{Code, Diagnostic, backticked};
use crate::sema::reach::{positions, reached};
use crate::sema::resolve::StepKind;
use crate::sema::symbols::{Symbols, Table, flow_steps};
use crate::sema::types::ContractTypes;
use crate::sema::{FlowModel, may_suggest};
use crate::syntax::ast::{Ast, Field, Flow, Step};

pub fn check(
    ast: &Ast,
    symbols: &Symbols,
    contracts: &ContractTypes,
    flows: &[FlowModel],
    mismatched_outputs: &[bool],
    diagnostics: &mut Vec<Diagnostic>,
) {
    unused_contracts(ast, symbols, contracts, diagnostics);
    unused_functions(ast, symbols, diagnostics);
    for (flow, model) in ast.flows.iter().zip(flows) {
        if let Some(table) = symbols.steps.get(model.index) {
            unreachable_steps(flow, model, table, diagnostics);
        }
        // A step that ends the flow with another contract is the error E0077, which says more.
        if !mismatched_outputs
            .get(model.index)
            .copied()
            .unwrap_or(false)
        {
            unproduced_output(flow, model, symbols, contracts, diagnostics);
        }
    }
}

/// Marks as used the definition that a name which does not resolve was probably meant to
/// name, so that one typo is one error and not also a warning about what it missed.
fn meant<'a>(used: &mut HashSet<&'a str>, table: &'a Table, diagnostics: &[Diagnostic]) {
    let unresolved: Vec<&str> = used
        .iter()
        .copied()
        .filter(|name| table.get(name).is_none())
        .collect();
    if !may_suggest(diagnostics, unresolved.len().saturating_mul(table.len())) {
        return;
    }
    for name in unresolved {
        if let Some((closest, _)) = table.closest(name) {
            used.insert(closest);
        }
    }
}

fn unused_contracts(
    ast: &Ast,
    symbols: &Symbols,
    contracts: &ContractTypes,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let mut used: HashSet<&str> = HashSet::new();
    used.extend(
        ast.functions
            .iter()
            .filter_map(|function| named(&function.output)),
    );
    for flow in &ast.flows {
        used.extend(named(&flow.output));
        used.extend(
            flow_steps(flow)
                .iter()
                .filter_map(|step| named(&step.output_contract)),
        );
    }
    used.extend(contracts.uses().map(|(name, _)| name));
    meant(&mut used, &symbols.contracts, diagnostics);
    for contract in &ast.contracts {
        if !used.contains(contract.name.value.as_str()) {
            diagnostics.push(
                Diagnostic::new(
                    Code::W0010,
                    format!("contract `{}` is never used", contract.name.value),
                    contract.name.span,
                    "declared but never used",
                )
                .help(
                    "name it as a function's `output`, a step's `output_contract`, a flow's \
                     `output` or another contract's field type, or remove it",
                ),
            );
        }
    }
}

fn named(field: &Option<Field<String>>) -> Option<&str> {
    field.as_ref().map(|name| name.value.as_str())
}

fn unused_functions(ast: &Ast, symbols: &Symbols, diagnostics: &mut Vec<Diagnostic>) {
    let mut called: HashSet<&str> = ast
        .flows
        .iter()
        .flat_map(flow_steps)
        .filter_map(|step| step.function.as_ref().map(|name| name.value.as_str()))
        .collect();
    meant(&mut called, &symbols.functions, diagnostics);
    for function in &ast.functions {
        if !called.contains(function.name.value.as_str()) {
            diagnostics.push(
                Diagnostic::new(
                    Code::W0011,
                    format!("function `{}` is never called", function.name.value),
                    function.name.span,
                    "no step calls it",
                )
                .help(format!(
                    "call it from a step with `function: {}`, or remove it",
                    function.name.value
                )),
            );
        }
    }
}

fn unreachable_steps(
    flow: &Flow,
    model: &FlowModel,
    table: &Table,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let steps = flow_steps(flow);
    let order = &model.dag.order;
    let position = positions(model);
    let reached = reached(flow, model, table);
    for &index in order {
        if reached.get(index).copied().unwrap_or(true) {
            continue;
        }
        let Some(step) = steps.get(index) else {
            continue;
        };
        let span = step.id.as_ref().map_or(step.span, |id| id.span);
        let id = step.id.as_ref().map_or("?", |id| id.value.as_str());
        let before = position
            .get(index)
            .and_then(|&at| at.checked_sub(1))
            .and_then(|at| order.get(at))
            .copied();
        diagnostics.push(unreachable_step(id, span, before, steps, model, &reached));
    }
}

/// W0012: no route of the flow leads to the step.
fn unreachable_step(
    id: &str,
    span: crate::source::Span,
    before: Option<usize>,
    steps: &[Step],
    model: &FlowModel,
    reached: &[bool],
) -> Diagnostic {
    let diagnostic = Diagnostic::new(
        Code::W0012,
        format!("step `{id}` is never reached"),
        span,
        "no route leads here",
    );
    let why = before.and_then(|before| {
        let step = steps.get(before)?;
        let name = step.id.as_ref()?.value.as_str();
        if !reached.get(before).copied().unwrap_or(true) {
            return Some(format!(
                "the step before it, `{name}`, is never reached either"
            ));
        }
        let kind = model.steps.get(before)?.kind;
        Some(match (kind, &step.on_approve, &step.next) {
            (StepKind::Gate(_), Some(Field { value: None, .. }), _) => format!(
                "the step before it, gate `{name}`, ends the flow when approved (`on_approve: ~`)"
            ),
            (
                StepKind::Gate(_),
                Some(Field {
                    value: Some(to), ..
                }),
                _,
            ) => {
                format!("the step before it, gate `{name}`, goes on to `{to}` when approved")
            }
            (_, _, Some(next)) => format!(
                "the step before it, `{name}`, always goes on to `{}` (`next`)",
                next.value
            ),
            _ => return None,
        })
    });
    let fix =
        "route to it with `next`, `on_fail` or a gate's `on_approve` or `on_kill`, or remove it";
    match why {
        Some(why) => diagnostic.help(format!("{why}; {fix}")),
        None => diagnostic.help(fix),
    }
}

/// W0013: the flow declares an output contract that none of its steps produces.
fn unproduced_output(
    flow: &Flow,
    model: &FlowModel,
    symbols: &Symbols,
    contracts: &ContractTypes,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let Some(output) = &flow.output else {
        return;
    };
    if symbols.contracts.get(&output.value).is_none() {
        return;
    }
    let Some(expected) = contracts.contract(&output.value) else {
        return;
    };
    // A step whose kind is unknown may be meant to produce it: stay silent rather than guess.
    let unknown = model
        .steps
        .iter()
        .any(|info| info.kind == StepKind::Unknown);
    // A contract with the fields the output requires passes the runtime's check as well.
    let produced = model.steps.iter().any(|info| {
        info.contract.as_deref().is_some_and(|produced| {
            produced == output.value
                || crate::sema::flow_output::mismatch(
                    expected,
                    &info.result,
                    &output.value,
                    produced,
                )
                .is_none()
        })
    });
    if produced || unknown {
        return;
    }
    let producers: Vec<&str> = model
        .steps
        .iter()
        .filter_map(|info| info.contract.as_deref())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let produced_note = if producers.is_empty() {
        "no step of it declares an output contract".to_owned()
    } else {
        format!("its steps produce {}", backticked(&producers))
    };
    diagnostics.push(
        Diagnostic::new(
            Code::W0013,
            format!(
                "flow `{}` declares the output `{}`, which none of its steps produces",
                flow.name.value, output.value
            ),
            crate::sema::resolve::name_span(&output.value, output.span),
            "no step produces this",
        )
        .help(format!(
            "{produced_note}; give the step that produces the flow's result `output_contract: {}` \
             (or call a function whose `output` is `{}`), or change the flow's `output`",
            output.value, output.value
        )),
    );
}
