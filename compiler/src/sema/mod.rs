//! The middle end: from the spec's AST to a resolved, typed [`Model`], with a diagnostic for
//! every rule of the format that the front end cannot see on its own.
//!
//! The passes, in order: [`symbols`] declares every name; [`types`] gives every contract its
//! record type; [`rules`] checks which keys go together on steps, functions, gates and the
//! workflow.
//!
//! Invariants: the middle end never reports what the front end already reported (a value the
//! front end rejected is `None` in the AST), and a name that does not resolve is reported once,
//! at its use; everything that depends on it is treated as unknown (`any`), never as a second
//! error.

pub mod rules;
pub mod symbols;
pub mod types;

use crate::diagnostic::Diagnostic;
use crate::syntax::ast::Ast;
use symbols::{Symbols, flow_steps};
use types::ContractTypes;

/// What the middle end knows about a spec: the input of lowering and of the language server.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Model {
    pub symbols: Symbols,
    pub contracts: ContractTypes,
    /// Per flow, in the order of `Ast::flows`.
    pub flows: Vec<FlowModel>,
}

/// One flow, resolved.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowModel {
    /// Indices into the flow's steps in execution order: topological, ties broken by
    /// declaration order.
    pub order: Vec<usize>,
}

/// Analyses `ast`, adding what it finds to `diagnostics`.
pub fn analyze(ast: &Ast, diagnostics: &mut Vec<Diagnostic>) -> Model {
    let symbols = Symbols::build(ast);
    let contracts = ContractTypes::build(ast, &symbols, diagnostics);
    let flows: Vec<FlowModel> = ast
        .flows
        .iter()
        .map(|flow| FlowModel {
            order: (0..flow_steps(flow).len()).collect(),
        })
        .collect();
    rules::check(ast, &symbols, &flows, diagnostics);
    Model {
        symbols,
        contracts,
        flows,
    }
}
