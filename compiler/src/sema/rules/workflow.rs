//! The rules of the `workflow:` block: it has an entry flow, and takes exactly that flow's
//! input keys.
//!
//! Takes the AST and its workflow block; pushes diagnostics. The entry flow is the flow named
//! like the workflow, else the spec's only flow. Input keys are compared only when both
//! `input` mappings were read whole (no diagnostic inside either), so that a parameter the
//! front end dropped is not reported again as missing.

use crate::diagnostic::{Code, Diagnostic, backticked};
use crate::sema::symbols::Symbols;
use crate::source::Span;
use crate::syntax::ast::{Ast, Field, FieldDef, Flow, Workflow, WorkflowParam};

pub(super) fn check(
    ast: &Ast,
    symbols: &Symbols,
    workflow: &Field<Workflow>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let name = workflow.value.name.as_ref();
    let entry = match name {
        Some(name) => symbols.flow(ast, &name.value),
        None => None,
    };
    let entry = match (entry, ast.flows.as_slice(), name) {
        (Some(entry), _, _) => entry,
        (None, [only], _) => only,
        (None, flows, Some(name)) => {
            diagnostics.push(no_entry_flow(name, flows));
            return;
        }
        (None, _, None) => return,
    };
    let (Some(params), Some(inputs)) = (&workflow.value.input, &entry.input) else {
        return;
    };
    let reported_within = |span: Span| {
        diagnostics.iter().any(|d| {
            d.is_error()
                && d.primary.span.file == span.file
                && d.primary.span.start >= span.start
                && d.primary.span.end <= span.end
        })
    };
    if reported_within(params.key.to(params.span)) || reported_within(inputs.key.to(inputs.span)) {
        return;
    }
    let mut found = Vec::new();
    for param in &params.value {
        if !inputs
            .value
            .iter()
            .any(|input| input.name.value == param.name.value)
        {
            found.push(extra_workflow_input(param, entry, inputs));
        }
    }
    let missing: Vec<&FieldDef> = inputs
        .value
        .iter()
        .filter(|input| {
            !params
                .value
                .iter()
                .any(|param| param.name.value == input.name.value)
        })
        .collect();
    if !missing.is_empty() {
        found.push(missing_workflow_inputs(params, entry, &missing));
    }
    diagnostics.extend(found);
}

/// E0065 `no-entry-flow`: no flow is named like the workflow, and the spec does not have
/// exactly one flow. Why: the workflow runs its entry flow; the server cannot tell which one
/// that is. Fix: name the entry flow like the workflow, or the workflow like the entry flow.
fn no_entry_flow(name: &Field<String>, flows: &[Flow]) -> Diagnostic {
    let names: Vec<&str> = flows.iter().map(|flow| flow.name.value.as_str()).collect();
    let (message, help) = match names.as_slice() {
        [] => (
            format!(
                "workflow `{}` has no flow to run: the spec has no flows",
                name.value
            ),
            format!("add a flow named `{}`", name.value),
        ),
        _ => (
            format!(
                "no flow is named `{}`, and with {} flows the workflow's entry flow is ambiguous",
                name.value,
                names.len()
            ),
            format!(
                "name the entry flow `{}`, or rename the workflow after one of {}",
                name.value,
                backticked(&names)
            ),
        ),
    };
    Diagnostic::new(Code::E0065, message, name.span, "matches no flow").help(help)
}

/// E0066 `workflow-input-mismatch`, for a key the entry flow does not take. Why: the workflow's
/// input is what callers pass to the entry flow; the reference rejects any difference. Fix:
/// remove the key, or add it to the flow's `input`.
fn extra_workflow_input(
    param: &WorkflowParam,
    entry: &Flow,
    inputs: &Field<Vec<FieldDef>>,
) -> Diagnostic {
    let flow = &entry.name.value;
    Diagnostic::new(
        Code::E0066,
        format!(
            "the workflow takes `{}`, but its entry flow `{flow}` does not",
            param.name.value
        ),
        param.name.span,
        format!("not an input of `{flow}`"),
    )
    .secondary(inputs.key, format!("the input of `{flow}`"))
    .help(format!(
        "remove `{}` from the workflow's input, or add it to the input of flow `{flow}`",
        param.name.value
    ))
}

/// E0066 `workflow-input-mismatch`, for keys of the entry flow the workflow does not take.
fn missing_workflow_inputs(
    params: &Field<Vec<WorkflowParam>>,
    entry: &Flow,
    missing: &[&FieldDef],
) -> Diagnostic {
    let flow = &entry.name.value;
    let names: Vec<&str> = missing
        .iter()
        .map(|input| input.name.value.as_str())
        .collect();
    let mut diagnostic = Diagnostic::new(
        Code::E0066,
        format!(
            "the workflow's input lacks {} of its entry flow `{flow}`",
            backticked(&names)
        ),
        params.key,
        format!("no {}", backticked(&names)),
    );
    for input in missing {
        diagnostic = diagnostic.secondary(
            input.name.span,
            format!("`{flow}` takes `{}`", input.name.value),
        );
    }
    let (them, its) = if names.len() == 1 {
        ("it", "its")
    } else {
        ("them", "their")
    };
    diagnostic.help(format!(
        "add {} to the workflow's `input` (with {its} `type`), or remove {them} from the input of flow `{flow}`",
        backticked(&names)
    ))
}
