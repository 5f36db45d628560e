//! Flow composition: which flows run which, through flow steps.
//!
//! Takes the resolved steps of every flow; builds the call graph (an edge from a flow to each
//! flow one of its steps runs, labelled at that step's `flow:` value) and reports each
//! recursion once, direct or indirect, with its whole call path (`E0042`). Checks each flow
//! step's `inputs` against the called flow's `input`: a name it does not declare (`E0043`) and
//! a required field left out (`E0044`).
//!
//! Unlike the reference implementation, whose search also flags a flow that two steps reach by
//! different paths (a diamond), only a real cycle is reported.

use std::collections::HashSet;

use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};

use crate::diagnostic::{Code, Diagnostic, did_you_mean};
use crate::sema::dag::{MAX_CYCLE_LABELS, cycle_path, cycles};
use crate::sema::resolve::{StepKind, listing, name_span};
use crate::sema::symbols::flow_steps;
use crate::sema::{FlowModel, may_suggest};
use crate::source::Span;
use crate::syntax::ast::{Ast, FieldDef, Flow, Step};

/// The call graph: node `i` is flow `i`; an edge is a flow step, at its `flow:` value.
pub type CallGraph = DiGraph<usize, Span>;

pub fn check(ast: &Ast, flows: &[FlowModel], diagnostics: &mut Vec<Diagnostic>) -> CallGraph {
    let mut graph = CallGraph::with_capacity(ast.flows.len(), 0);
    for index in 0..ast.flows.len() {
        graph.add_node(index);
    }
    for (caller, (flow, model)) in ast.flows.iter().zip(flows).enumerate() {
        for (step, info) in flow_steps(flow).iter().zip(&model.steps) {
            let (StepKind::Flow(callee), Some(name)) = (info.kind, &step.flow) else {
                continue;
            };
            graph.add_edge(
                NodeIndex::new(caller),
                NodeIndex::new(callee),
                name_span(&name.value, name.span),
            );
            if let Some(called) = ast.flows.get(callee) {
                check_inputs(step, called, diagnostics);
            }
        }
    }
    report_recursion(ast, &graph, diagnostics);
    graph
}

fn report_recursion(ast: &Ast, graph: &CallGraph, diagnostics: &mut Vec<Diagnostic>) {
    for path in cycles(graph, |span| *span) {
        diagnostics.push(recursive_flow(ast, graph, &path));
    }
}

/// E0042: a flow that runs itself, directly or through other flows, and so never ends.
fn recursive_flow(ast: &Ast, graph: &CallGraph, path: &[EdgeIndex]) -> Diagnostic {
    let name = |node: NodeIndex| {
        ast.flows
            .get(node.index())
            .map_or("?", |flow| flow.name.value.as_str())
    };
    let calls: Vec<(Span, &str, &str)> = path
        .iter()
        .filter_map(|&call| {
            let (from, to) = graph.edge_endpoints(call)?;
            Some((*graph.edge_weight(call)?, name(from), name(to)))
        })
        .collect();
    let flows: Vec<&str> = calls.iter().map(|(_, from, _)| *from).collect();
    let chain = cycle_path(&flows);
    let Some(((first_span, first, _), rest)) = calls.split_first() else {
        return Diagnostic::new(Code::E0042, "recursive flow", Span::default(), "");
    };
    let (message, label) = if calls.len() == 1 {
        (
            format!("flow `{first}` runs itself"),
            format!("`{first}` runs `{first}` here"),
        )
    } else {
        (
            format!("flow `{first}` runs itself through {chain}"),
            format!(
                "`{first}` runs `{}` here",
                calls.first().map_or("?", |c| c.2)
            ),
        )
    };
    let mut diagnostic = Diagnostic::new(Code::E0042, message, *first_span, label);
    for (span, from, to) in rest.iter().take(MAX_CYCLE_LABELS - 1) {
        diagnostic = diagnostic.secondary(*span, format!("`{from}` runs `{to}` here"));
    }
    diagnostic.help(
        "a flow step waits for the flow it runs to finish, so a flow that runs itself never \
         finishes; to repeat work, use `max_iterations` on a step, or route back with `next`, \
         `on_fail` or a gate's `on_revise`",
    )
}

/// Checks a flow step's `inputs` against the `input` fields of the flow it runs.
fn check_inputs(step: &Step, called: &Flow, diagnostics: &mut Vec<Diagnostic>) {
    let Some(declared) = &called.input else {
        return;
    };
    let fields: Vec<&str> = declared
        .value
        .iter()
        .map(|field| field.name.value.as_str())
        .collect();
    let given = step
        .inputs
        .as_ref()
        .map_or(&[][..], |inputs| &inputs.value[..]);
    let declared_names: HashSet<&str> = fields.iter().copied().collect();
    for input in given {
        if !declared_names.contains(input.name.value.as_str()) {
            let suggest = may_suggest(diagnostics, fields.len());
            diagnostics.push(unknown_flow_input(
                &input.name.value,
                input.name.span,
                called,
                &fields,
                suggest,
            ));
        }
    }
    let given_names: HashSet<&str> = given
        .iter()
        .map(|input| input.name.value.as_str())
        .collect();
    let missing: Vec<&FieldDef> = declared
        .value
        .iter()
        .filter(|field| is_required(field))
        .filter(|field| !given_names.contains(field.name.value.as_str()))
        .collect();
    if !missing.is_empty() {
        let at = step
            .inputs
            .as_ref()
            .map(|inputs| inputs.key)
            .or(step.flow.as_ref().map(|flow| flow.span))
            .unwrap_or(step.span);
        diagnostics.push(missing_flow_inputs(at, called, &missing));
    }
}

/// Whether a flow input must be given: not optional and without a default.
fn is_required(field: &FieldDef) -> bool {
    let optional = field
        .optional
        .as_ref()
        .is_some_and(|optional| optional.value)
        || field
            .required
            .as_ref()
            .is_some_and(|required| !required.value)
        || field
            .ty
            .as_ref()
            .is_some_and(|ty| ty.value.trim_end().ends_with('?'));
    !optional && field.default.is_none()
}

/// E0043: a flow step passes an input the flow it runs does not declare.
fn unknown_flow_input(
    name: &str,
    span: Span,
    called: &Flow,
    fields: &[&str],
    suggest: bool,
) -> Diagnostic {
    let diagnostic = Diagnostic::new(
        Code::E0043,
        format!("flow `{}` has no input `{name}`", called.name.value),
        span,
        "not an input of the flow",
    );
    if let Some(best) = suggest
        .then(|| did_you_mean(name, fields.iter().copied()))
        .flatten()
    {
        let declared = called
            .input
            .iter()
            .flat_map(|input| &input.value)
            .find(|field| field.name.value == best)
            .map(|field| field.name.span);
        let diagnostic = match declared {
            Some(declared) => diagnostic.secondary(declared, format!("`{best}` is declared here")),
            None => diagnostic,
        };
        return diagnostic.help(format!("did you mean `{best}`?")).fix(
            format!("replace `{name}` with `{best}`"),
            span,
            best,
        );
    }
    let help = if fields.is_empty() {
        format!("flow `{}` takes no input; remove it", called.name.value)
    } else {
        format!(
            "flow `{}` takes {}; remove this input or declare it in the flow's `input`",
            called.name.value,
            listing(fields)
        )
    };
    diagnostic
        .secondary(
            called.name.span,
            format!("flow `{}` is declared here", called.name.value),
        )
        .help(help)
}

/// E0044: a flow step leaves out inputs that the flow it runs requires.
fn missing_flow_inputs(at: Span, called: &Flow, missing: &[&FieldDef]) -> Diagnostic {
    let names: Vec<&str> = missing
        .iter()
        .map(|field| field.name.value.as_str())
        .collect();
    let (noun, pronoun) = if names.len() == 1 {
        ("input", "it")
    } else {
        ("inputs", "them")
    };
    let mut diagnostic = Diagnostic::new(
        Code::E0044,
        format!(
            "flow `{}` needs the {noun} {}, which this step does not give",
            called.name.value,
            listing(&names)
        ),
        at,
        format!("missing {}", listing(&names)),
    );
    for field in missing {
        diagnostic = diagnostic.secondary(field.name.span, "required here");
    }
    diagnostic.help(format!(
        "pass {pronoun} in the step's `inputs`, as in `{}: \"$.input.{}\"`, or make the flow's \
         field optional (`optional: true`) or give it a `default`",
        names.first().copied().unwrap_or("name"),
        names.first().copied().unwrap_or("name"),
    ))
}
