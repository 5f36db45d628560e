//! The names a spec declares: contracts, functions, flows and, per flow, steps.
//!
//! Every table maps a name to the index of its definition in the AST, so a later stage (or
//! the language server) goes from a name to its definition's spans in one lookup. YAML
//! mappings cannot repeat a key (the front end reports `E0007`), so contract, function and
//! flow names are unique; a repeated step id is `E0017`, and the table keeps the first.

use std::collections::HashMap;

use crate::diagnostic::did_you_mean;
use crate::source::Span;
use crate::syntax::ast::{Ast, Contract, Flow, Function, Step};

/// What kind of thing a name names, for messages ("no contract named `X`").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    Contract,
    Function,
    Flow,
    Step,
}

impl SymbolKind {
    pub fn noun(self) -> &'static str {
        match self {
            SymbolKind::Contract => "contract",
            SymbolKind::Function => "function",
            SymbolKind::Flow => "flow",
            SymbolKind::Step => "step",
        }
    }
}

/// One table of names: name → index of the definition, with the names in declaration order
/// (so that suggestions and listings do not depend on hashing).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    index: HashMap<String, usize>,
    /// `(name, definition index, span of the name)` in declaration order.
    declared: Vec<(String, usize, Span)>,
}

impl Table {
    fn declare(&mut self, name: &str, index: usize, span: Span) {
        if !self.index.contains_key(name) {
            self.index.insert(name.to_owned(), index);
            self.declared.push((name.to_owned(), index, span));
        }
    }

    /// The index of the definition named `name`.
    pub fn get(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Every name in declaration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.declared.iter().map(|(name, _, _)| name.as_str())
    }

    /// Every `(name, index, name span)` in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, usize, Span)> {
        self.declared
            .iter()
            .map(|(name, index, span)| (name.as_str(), *index, *span))
    }

    /// The declared name closest to `name`, with the span of its declaration, when one is a
    /// plausible typo of it.
    pub fn closest(&self, name: &str) -> Option<(&str, Span)> {
        let found = did_you_mean(name, self.names())?;
        self.declared
            .iter()
            .find(|(declared, _, _)| declared == found)
            .map(|(declared, _, span)| (declared.as_str(), *span))
    }

    /// The span of the declaration of `name`.
    pub fn span(&self, name: &str) -> Option<Span> {
        let index = self.get(name)?;
        self.declared
            .iter()
            .find(|(declared, at, _)| *at == index && declared == name)
            .map(|(_, _, span)| *span)
    }

    pub fn len(&self) -> usize {
        self.declared.len()
    }

    pub fn is_empty(&self) -> bool {
        self.declared.is_empty()
    }
}

/// Every name the spec declares.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Symbols {
    pub contracts: Table,
    pub functions: Table,
    pub flows: Table,
    /// Per flow, in the order of `Ast::flows`: the step ids of that flow.
    pub steps: Vec<Table>,
}

impl Symbols {
    pub fn build(ast: &Ast) -> Symbols {
        let mut symbols = Symbols::default();
        for (index, contract) in ast.contracts.iter().enumerate() {
            symbols
                .contracts
                .declare(&contract.name.value, index, contract.name.span);
        }
        for (index, function) in ast.functions.iter().enumerate() {
            symbols
                .functions
                .declare(&function.name.value, index, function.name.span);
        }
        for (index, flow) in ast.flows.iter().enumerate() {
            symbols
                .flows
                .declare(&flow.name.value, index, flow.name.span);
            let mut steps = Table::default();
            for (index, step) in flow_steps(flow).iter().enumerate() {
                if let Some(id) = &step.id {
                    steps.declare(&id.value, index, id.span);
                }
            }
            symbols.steps.push(steps);
        }
        symbols
    }

    pub fn table(&self, kind: SymbolKind, flow: usize) -> Option<&Table> {
        match kind {
            SymbolKind::Contract => Some(&self.contracts),
            SymbolKind::Function => Some(&self.functions),
            SymbolKind::Flow => Some(&self.flows),
            SymbolKind::Step => self.steps.get(flow),
        }
    }

    pub fn contract<'a>(&self, ast: &'a Ast, name: &str) -> Option<&'a Contract> {
        ast.contracts.get(self.contracts.get(name)?)
    }

    pub fn function<'a>(&self, ast: &'a Ast, name: &str) -> Option<&'a Function> {
        ast.functions.get(self.functions.get(name)?)
    }

    pub fn flow<'a>(&self, ast: &'a Ast, name: &str) -> Option<&'a Flow> {
        ast.flows.get(self.flows.get(name)?)
    }

    /// The step with id `id` in the flow at `flow` (an index into `Ast::flows`).
    pub fn step<'a>(&self, ast: &'a Ast, flow: usize, id: &str) -> Option<&'a Step> {
        let index = self.steps.get(flow)?.get(id)?;
        flow_steps(ast.flows.get(flow)?).get(index)
    }
}

/// A flow's steps; none when the spec wrote none (or wrote something the front end rejected).
pub fn flow_steps(flow: &Flow) -> &[Step] {
    flow.steps.as_ref().map_or(&[], |steps| &steps.value)
}
