//! The middle end: from the spec's AST to a resolved, typed [`Model`], with a diagnostic for
//! every rule of the format that the front end cannot see on its own.
//!
//! The passes, in order: [`symbols`] declares every name; [`types`] gives every contract field its
//! type ([`field_type`] holds the data, [`contract_type`] parses the `type:` text, [`fields`]
//! resolves one definition) and every contract its record type, JSON Schema ([`json_schema`]) and
//! content hash; [`schema`] checks every step's `output_schema` against the JSON Schema
//! meta-schema; [`resolve`] resolves every name a spec uses and says what each step is; [`dag`]
//! builds each flow's dependency graph, reports its cycles and orders its steps; [`rules`] checks
//! which keys go together on steps, functions, gates and the workflow; [`compose`] builds the graph
//! of flows running flows and reports recursion; [`typecheck`] type-checks every expression in its
//! environment; [`flow_output`] checks the result that reaches each end of a flow against the
//! flow's `output`; [`usage`] warns about what is declared but never used or reached.
//!
//! Invariants: the middle end never reports what the front end already reported (a value the
//! front end rejected is `None` in the AST), and a name that does not resolve is reported once,
//! at its use; everything that depends on it is treated as unknown (`any`), never as a second
//! error.

pub mod aggregate;
pub mod compose;
pub mod contract_type;
pub mod dag;
pub mod fan_out;
pub mod field_type;
pub mod fields;
pub mod flow_output;
pub mod json_schema;
pub mod judge;
pub mod reach;
pub mod resolve;
pub mod rules;
pub mod schema;
pub mod symbols;
pub mod typecheck;
pub mod types;
pub mod usage;

#[cfg(test)]
mod type_tests;

use crate::diagnostic::Diagnostic;
use crate::expression::Expressions;
use crate::syntax::ast::Ast;
use compose::CallGraph;
use dag::FlowDag;
use resolve::StepInfo;
use symbols::Symbols;
use types::ContractTypes;

/// What the middle end knows about a spec: the input of lowering and of the language server.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub symbols: Symbols,
    pub contracts: ContractTypes,
    /// Every expression and `$`-reference that parsed, by the span of its scalar.
    pub expressions: Expressions,
    /// Per flow, in the order of `Ast::flows`.
    pub flows: Vec<FlowModel>,
    /// Which flows run which: node `i` is flow `i`.
    pub calls: CallGraph,
}

/// One flow, resolved.
#[derive(Clone, Debug, Default)]
pub struct FlowModel {
    /// The flow's index in `Ast::flows`.
    pub index: usize,
    /// Per step, in declaration order: what it is and what it produces.
    pub steps: Vec<StepInfo>,
    /// The dependencies of its steps, their execution order and levels.
    pub dag: FlowDag,
}

/// How many name comparisons a did-you-mean may cost, scaled by the diagnostics so far.
const SUGGESTION_LIMIT: usize = 1_000_000;

/// Whether a did-you-mean over `candidates` names may still be made. Each costs a comparison
/// with every candidate, so a spec with a typo in each of its 20,000 steps would be quadratic;
/// allowing one only while (diagnostics so far + 1) × candidates stays under a limit bounds all
/// of them together by the limit times the logarithm of their number.
pub(crate) fn may_suggest(diagnostics: &[Diagnostic], candidates: usize) -> bool {
    diagnostics
        .len()
        .saturating_add(1)
        .saturating_mul(candidates)
        <= SUGGESTION_LIMIT
}

/// Analyses `ast`, adding what it finds to `diagnostics`. `expressions` are the expressions
/// that parsed; the references in step inputs are added to them.
pub fn analyze(
    ast: &Ast,
    mut expressions: Expressions,
    diagnostics: &mut Vec<Diagnostic>,
) -> Model {
    let symbols = Symbols::build(ast);
    let no_steps = symbols::Table::default();
    let contracts = ContractTypes::build(ast, &symbols, diagnostics);
    schema::check_output_schemas(ast, diagnostics);
    let steps = resolve::resolve(ast, &symbols, &contracts, diagnostics);
    let flows: Vec<FlowModel> = ast
        .flows
        .iter()
        .zip(steps)
        .enumerate()
        .map(|(index, (flow, steps))| {
            let table = symbols.steps.get(index).unwrap_or(&no_steps);
            let dag = dag::build(flow, table, &mut expressions, diagnostics);
            FlowModel { index, steps, dag }
        })
        .collect();
    rules::check(ast, &symbols, &contracts, &flows, diagnostics);
    let calls = compose::check(ast, &flows, diagnostics);
    typecheck::check(ast, &symbols, &contracts, &flows, &expressions, diagnostics);
    judge::check(ast, &expressions, diagnostics);
    let mismatched_outputs = flow_output::check(ast, &symbols, &contracts, &flows, diagnostics);
    usage::check(
        ast,
        &symbols,
        &contracts,
        &flows,
        &mismatched_outputs,
        diagnostics,
    );
    Model {
        symbols,
        contracts,
        expressions,
        flows,
        calls,
    }
}
