//! Contract fields as types of the expression language.
//!
//! Every contract becomes a record type of `stratum-grammar`, so `ensure` expressions, `$`-
//! references and the language server see one type system.

use std::collections::HashMap;

use stratum_grammar::types::{Record, RecordField, Type};

use crate::diagnostic::Diagnostic;
use crate::sema::symbols::Symbols;
use crate::syntax::ast::{Ast, FieldDef};

/// The type of every contract, by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContractTypes {
    contracts: HashMap<String, Type>,
}

impl ContractTypes {
    pub fn build(ast: &Ast, symbols: &Symbols, diagnostics: &mut Vec<Diagnostic>) -> ContractTypes {
        let _ = (symbols, diagnostics);
        let contracts = ast
            .contracts
            .iter()
            .map(|contract| (contract.name.value.clone(), record(&contract.fields)))
            .collect();
        ContractTypes { contracts }
    }

    /// The record type of the contract named `name`; `None` when no contract has that name.
    pub fn contract(&self, name: &str) -> Option<&Type> {
        self.contracts.get(name)
    }

    /// The contract names that field types refer to, with the span of each reference.
    pub fn uses(&self) -> impl Iterator<Item = (&str, crate::source::Span)> {
        std::iter::empty()
    }

    /// The record type of a function's or flow's `input` fields.
    pub fn record(&self, fields: &[FieldDef]) -> Type {
        record(fields)
    }
}

fn record(fields: &[FieldDef]) -> Type {
    Type::Record(Record {
        fields: fields
            .iter()
            .map(|field| RecordField {
                name: field.name.value.clone(),
                ty: Type::Any,
            })
            .collect(),
        open: false,
    })
}
