//! The format's rules about which keys go together: what a step runs, what gates, flow steps
//! and function steps may carry, when `on_fail`, iterations and `cache` make sense, guardrail
//! patterns, and how the `workflow:` block matches its entry flow.
//!
//! Takes the AST, its symbol tables and each flow's execution order; pushes one diagnostic per
//! broken rule and returns nothing. Invariants: a name that does not resolve is someone else's
//! diagnostic, so a rule that depends on what a name means (is this function a gate?) is
//! skipped when it does not resolve; a key whose value the front end rejected counts as
//! written, so "missing key" rules never follow from a bad value; and a key that is reported
//! as not allowed is not checked any further.

mod functions;
mod steps;
mod workflow;

use crate::diagnostic::{Diagnostic, did_you_mean};
use crate::sema::FlowModel;
use crate::sema::symbols::Symbols;
use crate::source::Span;
use crate::syntax::ast::{Ast, Name, Version};
use crate::syntax::keys::Shape;
use crate::syntax::tree::{Node, NodeKind};

/// Checks every format rule of `ast`, adding what it finds to `diagnostics`.
pub fn check(ast: &Ast, symbols: &Symbols, flows: &[FlowModel], diagnostics: &mut Vec<Diagnostic>) {
    let version = ast.version.as_ref().map(|version| version.value);
    for function in &ast.functions {
        functions::check(function, version, diagnostics);
    }
    for (flow_index, flow) in ast.flows.iter().enumerate() {
        let order = flows
            .get(flow_index)
            .map_or(&[][..], |flow| flow.order.as_slice());
        steps::check_flow(ast, symbols, flow_index, flow, order, diagnostics);
    }
    if let Some(workflow) = &ast.workflow {
        workflow::check(ast, symbols, workflow, diagnostics);
    }
}

/// Whether the mapping whose keys are `keys` (of `shape`) wrote `key`: under its own name (its
/// value may have been rejected), or misspelt so that the front end already suggested it.
fn is_written(keys: &[Name], key: &str, shape: &Shape) -> bool {
    keys.iter().any(|written| {
        written.value == key
            || (shape.key(&written.value).is_none()
                && did_you_mean(&written.value, shape.keys.iter().map(|k| k.name)) == Some(key))
    })
}

/// The span that removes the entry `key: value` from the mapping `owner` whose keys are
/// `keys`: up to the next key, so that neither a blank line nor a stray comma is left behind,
/// or to the end of the value for the last entry. `None` when an alias or merge key put
/// entries of the mapping elsewhere in the file, where an edit could change another mapping.
fn removal(keys: &[Name], owner: Span, key: Span, value: Span) -> Option<Span> {
    let inside = |span: Span| span.start >= owner.start && span.end <= owner.end;
    if !inside(key) || !inside(value) || !keys.iter().all(|k| inside(k.span)) {
        return None;
    }
    let end = keys
        .iter()
        .map(|k| k.span.start)
        .filter(|&start| start >= value.end)
        .min()
        .unwrap_or(value.end);
    Some(key.with_end(end))
}

/// Python's truthiness of a value written as is (`judge`, `output_schema`,
/// `reasoning_template`), which is what the reference implementation tests. A dropped value
/// counts as set: it was reported already, and nothing should follow from it.
fn is_truthy(node: &Node) -> bool {
    match &node.kind {
        NodeKind::Null => false,
        NodeKind::Bool(value) => *value,
        NodeKind::Int(value) => *value != 0,
        NodeKind::Float(value) => *value != 0.0,
        NodeKind::Str(value) => !value.value.is_empty(),
        NodeKind::Seq(items) => !items.is_empty(),
        NodeKind::Map(entries) => !entries.is_empty(),
        NodeKind::Invalid => true,
    }
}

/// Whether a version 0.2 rule applies: in a version 0.1 spec the front end already holds the
/// spec to the stricter 0.1 shapes.
fn is_v02(version: Option<Version>) -> bool {
    version != Some(Version::V0_1)
}
