//! The outline of a spec (contracts › fields, functions, flows › steps, the workflow) and its
//! folding ranges, from the spans the compiler's AST keeps.

use stratum_compiler::sema::resolve::StepKind;
use stratum_compiler::source::Span;
use stratum_compiler::syntax::ast::{FieldDef, Mode};
use tower_lsp_server::ls_types::{DocumentSymbol, FoldingRange, FoldingRangeKind, SymbolKind};

use crate::analysis::Analysis;

/// The document's symbols, in source order.
pub fn document_symbols(analysis: &Analysis) -> Vec<DocumentSymbol> {
    let ast = &analysis.compilation.ast;
    let model = &analysis.compilation.model;
    let mut symbols = Vec::new();
    for contract in &ast.contracts {
        let fields = contract
            .fields
            .iter()
            .map(|field| field_symbol(analysis, field))
            .collect();
        symbols.push(symbol(
            analysis,
            &contract.name.value,
            Some(format!("{} fields", contract.fields.len())),
            SymbolKind::STRUCT,
            contract.name.span.to(contract.span),
            contract.name.span,
            fields,
        ));
    }
    for function in &ast.functions {
        let mode = function.mode.as_ref().map(|mode| match mode.value {
            Mode::Infer => "infer",
            Mode::Compute => "compute",
            Mode::Gate => "gate",
        });
        let detail = match (mode, &function.output) {
            (Some(mode), Some(output)) => Some(format!("{mode} → {}", output.value)),
            (Some(mode), None) => Some(mode.to_owned()),
            (None, _) => None,
        };
        symbols.push(symbol(
            analysis,
            &function.name.value,
            detail,
            SymbolKind::FUNCTION,
            function.name.span.to(function.span),
            function.name.span,
            Vec::new(),
        ));
    }
    for (index, flow) in ast.flows.iter().enumerate() {
        let infos = model.flows.get(index).map(|flow| flow.steps.as_slice());
        let steps: Vec<DocumentSymbol> = flow
            .steps
            .iter()
            .flat_map(|steps| &steps.value)
            .enumerate()
            .filter_map(|(at, step)| {
                let id = step.id.as_ref()?;
                let kind = infos
                    .and_then(|infos| infos.get(at))
                    .map_or(StepKind::Unknown, |info| info.kind);
                Some(symbol(
                    analysis,
                    &id.value,
                    Some(kind.noun().to_owned()),
                    match kind {
                        StepKind::Gate(_) => SymbolKind::EVENT,
                        StepKind::Flow(_) => SymbolKind::MODULE,
                        _ => SymbolKind::METHOD,
                    },
                    step.span.to(id.span),
                    id.span,
                    Vec::new(),
                ))
            })
            .collect();
        let inputs: Vec<DocumentSymbol> = flow
            .input
            .iter()
            .flat_map(|input| &input.value)
            .map(|field| field_symbol(analysis, field))
            .collect();
        symbols.push(symbol(
            analysis,
            &flow.name.value,
            flow.output
                .as_ref()
                .map(|output| format!("→ {}", output.value)),
            SymbolKind::NAMESPACE,
            flow.name.span.to(flow.span),
            flow.name.span,
            inputs.into_iter().chain(steps).collect(),
        ));
    }
    if let Some(workflow) = &ast.workflow
        && let Some(name) = &workflow.value.name
    {
        symbols.push(symbol(
            analysis,
            &name.value,
            Some("workflow".to_owned()),
            SymbolKind::PACKAGE,
            workflow.key.to(workflow.span),
            name.span,
            Vec::new(),
        ));
    }
    symbols.sort_by_key(|symbol| (symbol.range.start.line, symbol.range.start.character));
    symbols
}

fn field_symbol(analysis: &Analysis, field: &FieldDef) -> DocumentSymbol {
    symbol(
        analysis,
        &field.name.value,
        field.ty.as_ref().map(|ty| ty.value.clone()),
        SymbolKind::FIELD,
        field.name.span.to(field.span),
        field.name.span,
        Vec::new(),
    )
}

#[allow(deprecated)] // `deprecated` is a required field of the type, superseded by `tags`
fn symbol(
    analysis: &Analysis,
    name: &str,
    detail: Option<String>,
    kind: SymbolKind,
    range: Span,
    selection: Span,
    children: Vec<DocumentSymbol>,
) -> DocumentSymbol {
    DocumentSymbol {
        name: if name.is_empty() {
            "?".to_owned()
        } else {
            name.to_owned()
        },
        detail,
        kind,
        tags: None,
        deprecated: None,
        range: analysis.range(range),
        selection_range: analysis.range(selection),
        children: (!children.is_empty()).then_some(children),
    }
}

/// A folding range for every symbol that spans lines, and for each run of comment lines.
pub fn folding_ranges(analysis: &Analysis) -> Vec<FoldingRange> {
    fn walk(symbols: &[DocumentSymbol], ranges: &mut Vec<FoldingRange>) {
        for symbol in symbols {
            if symbol.range.end.line > symbol.range.start.line {
                ranges.push(FoldingRange {
                    start_line: symbol.range.start.line,
                    end_line: symbol.range.end.line,
                    ..FoldingRange::default()
                });
            }
            walk(symbol.children.as_deref().unwrap_or_default(), ranges);
        }
    }
    let mut ranges = Vec::new();
    walk(&document_symbols(analysis), &mut ranges);
    let mut run: Option<(u32, u32)> = None;
    let close = |run: Option<(u32, u32)>, ranges: &mut Vec<FoldingRange>| {
        if let Some((start, end)) = run.filter(|(start, end)| end > start) {
            ranges.push(FoldingRange {
                start_line: start,
                end_line: end,
                kind: Some(FoldingRangeKind::Comment),
                ..FoldingRange::default()
            });
        }
    };
    for (line, text) in (0u32..).zip(analysis.text.lines()) {
        if text.trim_start().starts_with('#') {
            run = Some(run.map_or((line, line), |(start, _)| (start, line)));
        } else {
            close(run.take(), &mut ranges);
        }
    }
    close(run, &mut ranges);
    ranges.sort_by_key(|range| (range.start_line, range.end_line));
    ranges
}
