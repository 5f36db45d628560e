//! Every definition and reference of a document, with the symbol it denotes.
//!
//! Built once from an [`Analysis`]: the AST gives the names written as YAML (definitions,
//! `output`, `function`, `flow`, `output_contract`, `depends_on`, routing targets, a flow
//! step's input keys, the workflow's name and inputs), the model gives the contract names used
//! in `type:` texts and the parsed expressions, which are walked for `$.steps.<id>`,
//! `$.steps.<id>.output.<field…>`, `$.input.<field…>` and `result.<field…>` (and the names
//! bound from them: generator variables, `item` and `accumulator`). A fan-out step's `source`
//! is walked too, and the placeholders of its intent templates (`crate::placeholders`) are
//! references to the fields of the contract its element is (`{description}`,
//! `{task.description}`).
//!
//! Invariants: an occurrence's span covers the name only (a quoted scalar's quotes are left
//! out when the name is written without escapes); a name that does not resolve is not indexed;
//! occurrences are sorted by span.

use stratum_compiler::Compilation;
use stratum_compiler::sema::contract_type::{self, TypeText};
use stratum_compiler::sema::dag::{input_texts, reference_texts};
use stratum_compiler::sema::fan_out::Reading;
use stratum_compiler::sema::resolve::StepKind;
use stratum_compiler::sema::symbols::flow_steps;
use stratum_compiler::sema::types::FieldType;
use stratum_compiler::source::Span;
use stratum_compiler::syntax::ast::{Ast, FieldDef, Flow, Text};
use stratum_grammar::ast::{Expr, ExprKind, Ident, RefRoot};

use crate::analysis::Analysis;
use crate::placeholders::{self, Located};

/// What a name denotes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Symbol {
    Contract(String),
    Function(String),
    Flow(String),
    /// A step of the flow at `flow` (an index into `Ast::flows`).
    Step {
        flow: usize,
        id: String,
    },
    /// A field of a contract.
    ContractField {
        contract: String,
        field: String,
    },
    /// A field of the `input` of the flow at `flow`.
    FlowInput {
        flow: usize,
        field: String,
    },
}

impl Symbol {
    /// The name as written.
    pub fn name(&self) -> &str {
        match self {
            Symbol::Contract(name) | Symbol::Function(name) | Symbol::Flow(name) => name,
            Symbol::Step { id, .. } => id,
            Symbol::ContractField { field, .. } | Symbol::FlowInput { field, .. } => field,
        }
    }

    /// What it is, for messages.
    pub fn noun(&self) -> &'static str {
        match self {
            Symbol::Contract(_) => "contract",
            Symbol::Function(_) => "function",
            Symbol::Flow(_) => "flow",
            Symbol::Step { .. } => "step",
            Symbol::ContractField { .. } => "contract field",
            Symbol::FlowInput { .. } => "flow input",
        }
    }
}

/// One place a symbol's name is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occurrence {
    pub span: Span,
    pub symbol: Symbol,
    /// Where the symbol is declared (a step's `id`, a contract's key, …).
    pub definition: bool,
    /// Inside a string the compiler parsed (an expression, a `$`-reference, a `type:` text):
    /// the span came through the scalar's offset map.
    pub in_string: bool,
}

/// The occurrences of one document, sorted by span.
#[derive(Clone, Debug, Default)]
pub struct Index {
    occurrences: Vec<Occurrence>,
}

impl Index {
    pub fn new(analysis: &Analysis) -> Index {
        let mut builder = Builder {
            text: &analysis.text,
            compilation: &analysis.compilation,
            placeholders: placeholders::all(&analysis.compilation),
            found: Vec::new(),
        };
        builder.build();
        let mut occurrences = builder.found;
        occurrences.sort_by_key(|a| (a.span, a.definition));
        occurrences.dedup_by(|a, b| a.span == b.span && a.symbol == b.symbol);
        Index { occurrences }
    }

    /// Every occurrence, sorted by span.
    pub fn occurrences(&self) -> &[Occurrence] {
        &self.occurrences
    }

    /// The occurrence under `offset`: the smallest one that contains it, its end included (a
    /// cursor just after a name is on it).
    pub fn at(&self, offset: usize) -> Option<&Occurrence> {
        self.occurrences
            .iter()
            .filter(|occurrence| occurrence.span.range().contains(&offset))
            .min_by_key(|occurrence| occurrence.span.len())
            .or_else(|| {
                self.occurrences
                    .iter()
                    .filter(|occurrence| occurrence.span.end as usize == offset)
                    .min_by_key(|occurrence| occurrence.span.len())
            })
    }

    /// The first definition of `symbol`.
    pub fn definition(&self, symbol: &Symbol) -> Option<&Occurrence> {
        self.occurrences
            .iter()
            .filter(|occurrence| occurrence.definition && &occurrence.symbol == symbol)
            .min_by_key(|occurrence| occurrence.span)
    }

    /// Every occurrence of `symbol`, definitions included, in order.
    pub fn of<'a>(&'a self, symbol: &'a Symbol) -> impl Iterator<Item = &'a Occurrence> + 'a {
        self.occurrences
            .iter()
            .filter(move |occurrence| &occurrence.symbol == symbol)
    }
}

/// The span of the name `name` written at `span`: without its quotes when it is a quoted
/// scalar without escapes, else as it is.
pub fn name_span(text: &str, span: Span, name: &str) -> Span {
    let Some(written) = text.get(span.range()) else {
        return span;
    };
    if written == name {
        return span;
    }
    let quoted = written.len() == name.len() + 2
        && ((written.starts_with('"') && written.ends_with('"'))
            || (written.starts_with('\'') && written.ends_with('\'')))
        && written.get(1..written.len() - 1) == Some(name);
    if quoted {
        Span {
            start: span.start + 1,
            end: span.end - 1,
            ..span
        }
    } else {
        span
    }
}

/// What an expression's sub-expression is, as far as navigation needs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Ty {
    Unknown,
    /// An object of the contract so named.
    Contract(String),
    /// The `input` of the flow at this index.
    Input(usize),
    List(Box<Ty>),
}

impl Ty {
    pub(crate) fn of_field(ty: &FieldType) -> Ty {
        match ty {
            FieldType::Contract(name) => Ty::Contract(name.clone()),
            FieldType::Array(Some(item)) => Ty::List(Box::new(Ty::of_field(item))),
            FieldType::Optional(inner) => Ty::of_field(inner),
            _ => Ty::Unknown,
        }
    }

    fn element(self) -> Ty {
        match self {
            Ty::List(item) => *item,
            _ => Ty::Unknown,
        }
    }
}

/// The type of an `input` field, from its `type:` text: only what names a contract matters.
pub(crate) fn input_field_ty(compilation: &Compilation, def: &FieldDef) -> Ty {
    fn walk(compilation: &Compilation, ty: &TypeText) -> Ty {
        match ty {
            TypeText::Named { name, .. }
                if compilation.model.contracts.contract(name).is_some() =>
            {
                Ty::Contract(name.clone())
            }
            TypeText::List(item, _) => Ty::List(Box::new(walk(compilation, item))),
            TypeText::Optional(inner, _) => walk(compilation, inner),
            _ => Ty::Unknown,
        }
    }
    def.ty
        .as_ref()
        .and_then(|ty| contract_type::parse(&ty.value).ok())
        .map_or(Ty::Unknown, |ty| walk(compilation, &ty))
}

/// The names an expression may use and the flow it stands in.
struct Scope {
    flow: Option<usize>,
    names: Vec<(String, Ty)>,
}

struct Builder<'a> {
    text: &'a str,
    compilation: &'a Compilation,
    /// The placeholders of the fan-out steps' templates.
    placeholders: Vec<Located>,
    found: Vec<Occurrence>,
}

impl<'a> Builder<'a> {
    fn ast(&self) -> &'a Ast {
        &self.compilation.ast
    }

    /// A name written as YAML.
    fn name(&mut self, span: Span, name: &str, symbol: Symbol, definition: bool) {
        self.found.push(Occurrence {
            span: name_span(self.text, span, name),
            symbol,
            definition,
            in_string: false,
        });
    }

    fn reference(&mut self, span: Span, name: &str, symbol: Symbol) {
        self.name(span, name, symbol, false);
    }

    fn contract_reference(&mut self, span: Span, name: &str) {
        if self.compilation.model.symbols.contracts.get(name).is_some() {
            self.reference(span, name, Symbol::Contract(name.to_owned()));
        }
    }

    fn step_reference(&mut self, flow: usize, span: Span, id: &str) {
        if self.step_index(flow, id).is_some() {
            self.reference(
                span,
                id,
                Symbol::Step {
                    flow,
                    id: id.to_owned(),
                },
            );
        }
    }

    fn step_index(&self, flow: usize, id: &str) -> Option<usize> {
        self.compilation.model.symbols.steps.get(flow)?.get(id)
    }

    fn build(&mut self) {
        let ast = self.ast();
        for contract in &ast.contracts {
            let name = &contract.name.value;
            self.name(
                contract.name.span,
                name,
                Symbol::Contract(name.clone()),
                true,
            );
            for field in &contract.fields {
                self.name(
                    field.name.span,
                    &field.name.value,
                    Symbol::ContractField {
                        contract: name.clone(),
                        field: field.name.value.clone(),
                    },
                    true,
                );
            }
        }
        let uses: Vec<(String, Span)> = self
            .compilation
            .model
            .contracts
            .uses()
            .map(|(name, span)| (name.to_owned(), span))
            .collect();
        for (name, span) in uses {
            self.found.push(Occurrence {
                span: name_span(self.text, span, &name),
                symbol: Symbol::Contract(name),
                definition: false,
                in_string: true,
            });
        }
        for function in &ast.functions {
            let name = &function.name.value;
            self.name(
                function.name.span,
                name,
                Symbol::Function(name.clone()),
                true,
            );
            let contract = function.output.as_ref().and_then(|output| {
                self.contract_reference(output.span, &output.value);
                self.compilation
                    .model
                    .contracts
                    .contract(&output.value)
                    .map(|_| output.value.clone())
            });
            let result = contract.map_or(Ty::Unknown, Ty::Contract);
            for text in function.ensure.iter().flat_map(|ensure| &ensure.value) {
                self.expression(
                    text,
                    Scope {
                        flow: None,
                        names: vec![("result".to_owned(), result.clone())],
                    },
                );
            }
        }
        for (index, flow) in ast.flows.iter().enumerate() {
            self.flow(index, flow);
        }
        if let Some(workflow) = &ast.workflow {
            let entry = match &workflow.value.name {
                Some(name) => match self.compilation.model.symbols.flows.get(&name.value) {
                    Some(index) => {
                        self.reference(name.span, &name.value, Symbol::Flow(name.value.clone()));
                        Some(index)
                    }
                    None => None,
                },
                None => None,
            }
            .or(if ast.flows.len() == 1 { Some(0) } else { None });
            if let (Some(entry), Some(params)) = (entry, &workflow.value.input) {
                for param in &params.value {
                    self.flow_input_reference(entry, param.name.span, &param.name.value);
                }
            }
        }
    }

    fn flow_input_reference(&mut self, flow: usize, span: Span, field: &str) {
        let declared = self
            .ast()
            .flows
            .get(flow)
            .and_then(|flow| flow.input.as_ref())
            .is_some_and(|input| input.value.iter().any(|def| def.name.value == field));
        if declared {
            self.reference(
                span,
                field,
                Symbol::FlowInput {
                    flow,
                    field: field.to_owned(),
                },
            );
        }
    }

    fn flow(&mut self, index: usize, flow: &'a Flow) {
        let name = &flow.name.value;
        self.name(flow.name.span, name, Symbol::Flow(name.clone()), true);
        for def in flow.input.iter().flat_map(|input| &input.value) {
            self.name(
                def.name.span,
                &def.name.value,
                Symbol::FlowInput {
                    flow: index,
                    field: def.name.value.clone(),
                },
                true,
            );
        }
        if let Some(output) = &flow.output {
            self.contract_reference(output.span, &output.value);
        }
        let infos = self
            .compilation
            .model
            .flows
            .get(index)
            .map_or(&[][..], |model| &model.steps);
        for (step_index, step) in flow_steps(flow).iter().enumerate() {
            if let Some(id) = &step.id {
                self.name(
                    id.span,
                    &id.value,
                    Symbol::Step {
                        flow: index,
                        id: id.value.clone(),
                    },
                    true,
                );
            }
            if let Some(function) = &step.function
                && self
                    .compilation
                    .model
                    .symbols
                    .functions
                    .get(&function.value)
                    .is_some()
            {
                self.reference(
                    function.span,
                    &function.value,
                    Symbol::Function(function.value.clone()),
                );
            }
            if let Some(called) = &step.flow
                && self
                    .compilation
                    .model
                    .symbols
                    .flows
                    .get(&called.value)
                    .is_some()
            {
                self.reference(
                    called.span,
                    &called.value,
                    Symbol::Flow(called.value.clone()),
                );
            }
            if let Some(contract) = &step.output_contract {
                self.contract_reference(contract.span, &contract.value);
            }
            for name in step.depends_on.iter().flat_map(|names| &names.value) {
                self.step_reference(index, name.span, &name.value);
            }
            for target in [&step.on_fail, &step.next].into_iter().flatten() {
                self.step_reference(index, target.span, &target.value);
            }
            for target in [&step.on_approve, &step.on_revise, &step.on_kill]
                .into_iter()
                .flatten()
            {
                if let Some(id) = &target.value {
                    self.step_reference(index, target.span, id);
                }
            }
            let info = infos.get(step_index);
            if let Some(StepKind::Flow(called)) = info.map(|info| info.kind) {
                for input in step.inputs.iter().flat_map(|inputs| &inputs.value) {
                    self.flow_input_reference(called, input.name.span, &input.name.value);
                }
            }

            let plain = || Scope {
                flow: Some(index),
                names: Vec::new(),
            };
            for text in input_texts(step) {
                self.expression(text, plain());
            }
            // `source` and a `pre_merge_verify` reference; the source's element is what the
            // step's templates read.
            let mut element = Ty::Unknown;
            for text in reference_texts(step) {
                let ty = self.expression(text, plain());
                if step
                    .source
                    .as_ref()
                    .is_some_and(|source| std::ptr::eq(&source.value, text))
                {
                    element = ty.element();
                }
            }
            self.placeholders(index, step_index, &element);
            if let Some(skip_if) = &step.skip_if {
                self.expression(&skip_if.value, plain());
            }
            let result = info
                .and_then(|info| info.contract.clone())
                .map_or(Ty::Unknown, Ty::Contract);
            let with_result = |extra: Vec<(String, Ty)>| {
                let mut names = vec![("result".to_owned(), result.clone())];
                names.extend(extra);
                Scope {
                    flow: Some(index),
                    names,
                }
            };
            for text in step.ensure.iter().flat_map(|ensure| &ensure.value) {
                self.expression(text, with_result(Vec::new()));
            }
            if let Some(score) = &step.score_expr {
                self.expression(&score.value, with_result(Vec::new()));
            }
            let item = step
                .accumulate
                .as_ref()
                .map_or(Ty::Unknown, |accumulate| {
                    self.expression(&accumulate.value, with_result(Vec::new()))
                })
                .element();
            if let Some(exit) = &step.exit_criterion {
                let accumulator = ("accumulator".to_owned(), Ty::List(Box::new(item.clone())));
                self.expression(&exit.value, with_result(vec![accumulator]));
            }
            if let Some(key) = &step.accumulate_key {
                self.expression(
                    &key.value,
                    Scope {
                        flow: Some(index),
                        names: vec![("item".to_owned(), item.clone())],
                    },
                );
            }
        }
    }

    /// Indexes the fields the placeholders of a step's templates read, when they are fields of
    /// a contract (`{description}`, `{task.description}` of a `Task` element).
    fn placeholders(&mut self, flow: usize, step: usize, element: &Ty) {
        let placeholders: Vec<Located> = self
            .placeholders
            .iter()
            .filter(|located| located.flow == flow && located.step == step)
            .cloned()
            .collect();
        for located in placeholders {
            let mut ty = Ty::Unknown;
            for (name, span, reading) in &located.placeholder.segments {
                ty = match reading {
                    Reading::Name { element: true, .. } => element.clone(),
                    Reading::Name { .. } => Ty::Unknown,
                    Reading::Field { spread: true, .. } => {
                        self.member_at(element.clone(), name, *span)
                    }
                    Reading::Field { spread: false, .. } => self.member_at(ty, name, *span),
                    Reading::Unbound(_) | Reading::Missing => break,
                };
            }
        }
    }

    /// Indexes the expression written in `text`; its type.
    fn expression(&mut self, text: &Text, mut scope: Scope) -> Ty {
        let Some(expr) = self.compilation.model.expressions.get(text) else {
            return Ty::Unknown;
        };
        self.visit(text, expr, &mut scope)
    }

    fn in_string(&mut self, span: Span, symbol: Symbol) {
        self.found.push(Occurrence {
            span,
            symbol,
            definition: false,
            in_string: true,
        });
    }

    fn visit(&mut self, text: &Text, expr: &Expr, scope: &mut Scope) -> Ty {
        match &expr.kind {
            ExprKind::None
            | ExprKind::Bool(_)
            | ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Error => Ty::Unknown,
            ExprKind::Name(ident) => scope
                .names
                .iter()
                .rev()
                .find(|(name, _)| *name == ident.name)
                .map_or(Ty::Unknown, |(_, ty)| ty.clone()),
            ExprKind::Ref(reference) => {
                let mut ty = match (&reference.root, scope.flow) {
                    (RefRoot::Input, Some(flow)) => Ty::Input(flow),
                    (RefRoot::StepOutput { step }, Some(flow)) => {
                        match self.step_index(flow, &step.name) {
                            Some(index) => {
                                self.in_string(
                                    text.span_of(step.span.range()),
                                    Symbol::Step {
                                        flow,
                                        id: step.name.clone(),
                                    },
                                );
                                self.step_contract(flow, index)
                                    .map_or(Ty::Unknown, Ty::Contract)
                            }
                            None => Ty::Unknown,
                        }
                    }
                    _ => Ty::Unknown,
                };
                for ident in &reference.path {
                    ty = self.member(text, ty, ident);
                }
                ty
            }
            ExprKind::Attr { base, name } => {
                let ty = self.visit(text, base, scope);
                self.member(text, ty, name)
            }
            ExprKind::Index { base, index } => {
                let ty = self.visit(text, base, scope);
                self.visit(text, index, scope);
                ty.element()
            }
            ExprKind::Call { args, .. } => {
                for arg in args {
                    self.visit(text, arg, scope);
                }
                Ty::Unknown
            }
            ExprKind::Method { receiver, args, .. } => {
                self.visit(text, receiver, scope);
                for arg in args {
                    self.visit(text, arg, scope);
                }
                Ty::Unknown
            }
            ExprKind::Generator(generator) | ExprKind::ListComp(generator) => {
                let item = self.visit(text, &generator.iter, scope).element();
                scope.names.push((generator.var.name.clone(), item));
                self.visit(text, &generator.element, scope);
                for condition in &generator.conditions {
                    self.visit(text, condition, scope);
                }
                scope.names.pop();
                Ty::Unknown
            }
            ExprKind::List(items) | ExprKind::Tuple(items) => {
                for item in items {
                    self.visit(text, item, scope);
                }
                Ty::Unknown
            }
            ExprKind::Unary { operand, .. } => {
                self.visit(text, operand, scope);
                Ty::Unknown
            }
            ExprKind::Binary { lhs, rhs, .. } | ExprKind::Logical { lhs, rhs, .. } => {
                self.visit(text, lhs, scope);
                self.visit(text, rhs, scope);
                Ty::Unknown
            }
            ExprKind::Compare { first, rest } => {
                self.visit(text, first, scope);
                for comparison in rest {
                    self.visit(text, &comparison.rhs, scope);
                }
                Ty::Unknown
            }
            ExprKind::Conditional {
                then,
                condition,
                otherwise,
            } => {
                self.visit(text, then, scope);
                self.visit(text, condition, scope);
                self.visit(text, otherwise, scope);
                Ty::Unknown
            }
        }
    }

    fn step_contract(&self, flow: usize, index: usize) -> Option<String> {
        self.compilation
            .model
            .flows
            .get(flow)?
            .steps
            .get(index)?
            .contract
            .clone()
    }

    /// `ident` read from a value of type `ty`: indexed when it is a declared field; its type.
    fn member(&mut self, text: &Text, ty: Ty, ident: &Ident) -> Ty {
        self.member_at(ty, &ident.name, text.span_of(ident.span.range()))
    }

    /// The field `name`, written at `span` (in the file), read from a value of type `ty`.
    fn member_at(&mut self, ty: Ty, name: &str, span: Span) -> Ty {
        match ty {
            Ty::Contract(contract) => {
                let model = &self.compilation.model;
                let declared = model
                    .symbols
                    .contract(self.ast(), &contract)
                    .is_some_and(|def| def.fields.iter().any(|f| f.name.value == name));
                if !declared {
                    return Ty::Unknown;
                }
                let ty = model
                    .contracts
                    .fields(&contract)
                    .and_then(|fields| fields.iter().find(|field| field.name == name))
                    .map_or(Ty::Unknown, |field| Ty::of_field(&field.ty));
                self.in_string(
                    span,
                    Symbol::ContractField {
                        contract,
                        field: name.to_owned(),
                    },
                );
                ty
            }
            Ty::Input(flow) => {
                let def = self
                    .ast()
                    .flows
                    .get(flow)
                    .and_then(|flow| flow.input.as_ref())
                    .and_then(|input| input.value.iter().find(|def| def.name.value == name));
                let Some(def) = def else {
                    return Ty::Unknown;
                };
                let ty = input_field_ty(self.compilation, def);
                self.in_string(
                    span,
                    Symbol::FlowInput {
                        flow,
                        field: name.to_owned(),
                    },
                );
                ty
            }
            Ty::List(_) | Ty::Unknown => Ty::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    pub(crate) const SPEC: &str = r#"version: "0.2"
contracts:
  Finding:
    title: {type: string}
    severity: {type: "'low' | 'high'"}
  Report:
    summary: {type: string}
    findings: {type: "Finding[]"}
    top: {type: "Finding?"}
functions:
  scan_code:
    mode: infer
    intent: "Scan the code"
    input: {path: {type: string}}
    output: Report
    ensure:
      - "len(result.summary) > 0"
      - "all(f.title != '' for f in result.findings)"
flows:
  review:
    input:
      path: {type: string}
      strict: {type: boolean}
    output: Report
    steps:
      - id: scan
        function: "scan_code"
        inputs: {path: "$.input.path"}
      - id: triage
        intent: "Triage"
        inputs: {summary: "$.steps.scan.output.summary"}
        output_contract: Report
        depends_on: [scan]
        skip_if: "$.input.strict and $.steps.scan.output.top.severity == 'low'"
        ensure:
          - "len('é') > 0 or $.steps.scan.output.summary != ''"
"#;

    fn slices(analysis: &Analysis, index: &Index) -> Vec<(String, Symbol, bool)> {
        index
            .occurrences()
            .iter()
            .map(|o| {
                (
                    analysis.slice(o.span).to_owned(),
                    o.symbol.clone(),
                    o.definition,
                )
            })
            .collect()
    }

    #[test]
    fn names_are_indexed_without_their_quotes() {
        let analysis = Analysis::new("spec.stratum.yaml", SPEC);
        let index = Index::new(&analysis);
        let at = SPEC.find("\"scan_code\"").unwrap() + 1;
        let occurrence = index.at(at).unwrap();
        assert_eq!(analysis.slice(occurrence.span), "scan_code");
        assert_eq!(occurrence.symbol, Symbol::Function("scan_code".into()));
        assert!(!occurrence.definition);
    }

    #[test]
    fn every_reference_is_indexed() {
        let analysis = Analysis::new("spec.stratum.yaml", SPEC);
        let index = Index::new(&analysis);
        let all = slices(&analysis, &index);
        let count = |symbol: &Symbol| all.iter().filter(|(_, s, _)| s == symbol).count();
        let scan = Symbol::Step {
            flow: 0,
            id: "scan".into(),
        };
        // id, the input, depends_on, skip_if and the ensure.
        assert_eq!(count(&scan), 5, "{all:#?}");
        assert!(
            all.iter().all(|(text, symbol, _)| text == symbol.name()),
            "{all:#?}"
        );
        // `Report`: definition, function output, flow output, output_contract.
        assert_eq!(count(&Symbol::Contract("Report".into())), 4);
        // `Finding`: definition and the two `type:` texts.
        assert_eq!(count(&Symbol::Contract("Finding".into())), 3);
        let field = |contract: &str, field: &str| Symbol::ContractField {
            contract: contract.into(),
            field: field.into(),
        };
        // Declared, in the function's ensure, in an input and an ensure of `triage`.
        assert_eq!(count(&field("Report", "summary")), 4, "{all:#?}");
        // Through `result.findings` and a generator variable.
        assert_eq!(count(&field("Finding", "title")), 2);
        // Through the nested contract of `top`.
        assert_eq!(count(&field("Finding", "severity")), 2);
        assert_eq!(count(&field("Report", "top")), 2);
        let input = |name: &str| Symbol::FlowInput {
            flow: 0,
            field: name.into(),
        };
        assert_eq!(count(&input("path")), 2);
        assert_eq!(count(&input("strict")), 2);
    }

    #[test]
    fn a_reference_after_non_ascii_text_is_exact() {
        let analysis = Analysis::new("spec.stratum.yaml", SPEC);
        let index = Index::new(&analysis);
        let line = SPEC.find("\"len('é') > 0 or $.steps.scan").unwrap();
        let at = line + SPEC[line..].find("scan").unwrap();
        let occurrence = index.at(at + 2).unwrap();
        assert_eq!(occurrence.span.start as usize, at);
        assert_eq!(analysis.slice(occurrence.span), "scan");
        assert!(occurrence.in_string);
    }

    #[test]
    fn placeholders_and_sources_read_contract_fields() {
        let spec = crate::placeholders::V03_SPEC;
        let analysis = crate::analysis::clean(spec);
        let index = Index::new(&analysis);
        let all = slices(&analysis, &index);
        let field = |contract: &str, field: &str| Symbol::ContractField {
            contract: contract.into(),
            field: field.into(),
        };
        let lines_of = |symbol: &Symbol| -> Vec<String> {
            index
                .of(symbol)
                .map(|o| {
                    let line = analysis.position(o.span.start as usize).line as usize;
                    format!(
                        "{} @ {}",
                        analysis.slice(o.span),
                        spec.lines().nth(line).unwrap().trim()
                    )
                })
                .collect()
        };
        // Declared; `{description}` spread from the task; `{item.description}`; a later
        // stage's `{description}`.
        assert_eq!(
            lines_of(&field("Task", "description")),
            [
                "description @ Task: {id: {type: string}, description: {type: string}, files_owned: {type: array}}",
                "description @ intent_template: \"Task {task.id}: {description}\"",
                "description @ - intent_template: \"Review {item.description} ({id})\"",
                "description @ - intent_template: \"Fix {prev} for {description}\"",
            ],
            "{all:#?}"
        );
        // `{task.id}` and a lane's `{source.id}`, not the stage's own `{id}`.
        assert_eq!(lines_of(&field("Task", "id")).len(), 3, "{all:#?}");
        // The two `source`s read `tasks` of the plan's output.
        assert_eq!(lines_of(&field("TaskGraph", "tasks")).len(), 3, "{all:#?}");
    }
}
