//! Go to definition, find references and rename, over the [`Index`] of a document.
//!
//! Each function takes a byte offset into the analysed text and answers with byte [`Span`]s;
//! the server converts both to protocol positions. The `*_in` variants take an index the
//! caller already built (one per analysis), the others build it.
//!
//! Invariant: a rename is all or nothing. It is refused, with a lowercase message, when the
//! cursor is on no renamable name, when the new name is not a valid name of that kind, when it
//! clashes with a name of the same kind (the same flow's steps for a step), or when a
//! reference cannot be located exactly (written with escapes inside a string). Its edits are
//! sorted and never overlap.

use std::fmt;

use stratum_compiler::sema::fields::BUILT_IN_TYPES;
use stratum_compiler::source::Span;
use stratum_grammar::lexer::is_python_keyword;

use crate::analysis::Analysis;
use crate::index::{Index, Symbol};

/// Where the symbol under `offset` is defined.
pub fn definition(analysis: &Analysis, offset: usize) -> Option<Span> {
    definition_in(analysis, &Index::new(analysis), offset)
}

pub fn definition_in(_analysis: &Analysis, index: &Index, offset: usize) -> Option<Span> {
    let occurrence = index.at(offset)?;
    index
        .definition(&occurrence.symbol)
        .map(|definition| definition.span)
}

/// Every occurrence of the symbol under `offset`, sorted; its definitions only when
/// `include_declaration`. Empty when the cursor is on no symbol.
pub fn references(analysis: &Analysis, offset: usize, include_declaration: bool) -> Vec<Span> {
    references_in(analysis, &Index::new(analysis), offset, include_declaration)
}

pub fn references_in(
    _analysis: &Analysis,
    index: &Index,
    offset: usize,
    include_declaration: bool,
) -> Vec<Span> {
    let Some(occurrence) = index.at(offset) else {
        return Vec::new();
    };
    let mut spans: Vec<Span> = index
        .of(&occurrence.symbol)
        .filter(|found| include_declaration || !found.definition)
        .map(|found| found.span)
        .collect();
    spans.sort();
    spans.dedup();
    spans
}

/// The name under `offset` and its span, when it can be renamed.
pub fn prepare_rename(analysis: &Analysis, offset: usize) -> Option<(Span, String)> {
    prepare_rename_in(analysis, &Index::new(analysis), offset)
}

pub fn prepare_rename_in(
    _analysis: &Analysis,
    index: &Index,
    offset: usize,
) -> Option<(Span, String)> {
    let occurrence = index.at(offset)?;
    Some((occurrence.span, occurrence.symbol.name().to_owned()))
}

/// Why a rename was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RenameError {
    /// The cursor is on nothing that can be renamed.
    NoSymbol,
    /// The new name is not valid for that kind of symbol; the message says why.
    InvalidName(String),
    /// Another symbol of the same kind already has the new name.
    Clash(String),
    /// A reference cannot be edited safely; the message says where.
    Unsafe(String),
}

impl fmt::Display for RenameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenameError::NoSymbol => {
                f.write_str("no contract, function, flow, step or field name here to rename")
            }
            RenameError::InvalidName(message)
            | RenameError::Clash(message)
            | RenameError::Unsafe(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for RenameError {}

/// The edits that rename the symbol under `offset` to `new_name` everywhere in the document:
/// `(span, replacement)`, sorted, not overlapping. Renaming to the same name is no edit.
pub fn rename(
    analysis: &Analysis,
    offset: usize,
    new_name: &str,
) -> Result<Vec<(Span, String)>, RenameError> {
    rename_in(analysis, &Index::new(analysis), offset, new_name)
}

pub fn rename_in(
    analysis: &Analysis,
    index: &Index,
    offset: usize,
    new_name: &str,
) -> Result<Vec<(Span, String)>, RenameError> {
    let symbol = &index.at(offset).ok_or(RenameError::NoSymbol)?.symbol;
    let old = symbol.name();
    if new_name == old {
        return Ok(Vec::new());
    }
    check_name(symbol, new_name)?;
    check_clash(analysis, symbol, new_name)?;
    check_entry_flow(analysis, symbol, new_name)?;
    let mut edits = Vec::new();
    for occurrence in index.of(symbol) {
        let written = analysis.slice(occurrence.span);
        if written != old && occurrence.in_string {
            let line = analysis.position(occurrence.span.start as usize).line + 1;
            return Err(RenameError::Unsafe(format!(
                "the reference to {} `{old}` on line {line} is written with escapes inside a \
                 string; write it plainly, then rename",
                symbol.noun()
            )));
        }
        if occurrence.in_string
            && TEMPLATE_NAMES.contains(&new_name)
            && starts_placeholder(&analysis.text, occurrence.span)
        {
            let line = analysis.position(occurrence.span.start as usize).line + 1;
            return Err(RenameError::Unsafe(format!(
                "the placeholder `{{{old}}}` on line {line} would read the template's own \
                 `{{{new_name}}}` instead of the field; choose another name"
            )));
        }
        // A name written as YAML with escapes is replaced whole, quotes and all: the new name
        // needs none.
        edits.push((occurrence.span, new_name.to_owned()));
    }
    edits.sort();
    edits.dedup();
    if edits
        .windows(2)
        .any(|pair| matches!(pair, [(a, _), (b, _)] if a.end > b.start))
    {
        return Err(RenameError::Unsafe(format!(
            "the occurrences of {} `{old}` overlap; rename it by hand",
            symbol.noun()
        )));
    }
    Ok(edits)
}

/// The names an intent template binds itself (`sema::fan_out`): a field read by its own name
/// (`{description}`) must not be renamed to one of them.
const TEMPLATE_NAMES: [&str; 8] = [
    "task",
    "item",
    "id",
    "source",
    "prev",
    "prev_raw",
    "prevs",
    "prevs_raw",
];

/// Whether the name at `span` is the first identifier of a template placeholder: `{name`, not
/// `{{name` (a literal brace).
fn starts_placeholder(text: &str, span: Span) -> bool {
    let before = text.get(..span.start as usize).unwrap_or("");
    let braces = before.chars().rev().take_while(|c| *c == '{').count();
    braces % 2 == 1
}

/// Whether `name` is `[A-Za-z_][A-Za-z0-9_]*`.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Plain scalars that YAML (1.1, as PyYAML reads specs) takes for something else than a string.
fn is_yaml_word(name: &str) -> bool {
    matches!(
        name.to_ascii_lowercase().as_str(),
        "null" | "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n"
    )
}

fn check_name(symbol: &Symbol, name: &str) -> Result<(), RenameError> {
    let noun = symbol.noun();
    let invalid = |why: &str| Err(RenameError::InvalidName(format!("`{name}` {why}")));
    if name.is_empty() {
        return Err(RenameError::InvalidName(format!(
            "a {noun} name cannot be empty"
        )));
    }
    match symbol {
        Symbol::Contract(_) => {
            // What a `type:` text reads as a name.
            let mut chars = name.chars();
            let valid = chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
                && chars.all(|c| c.is_alphanumeric() || c == '_');
            if !valid {
                return invalid(
                    "is not a valid contract name: start with a letter or `_`, then use \
                     letters, digits and `_`",
                );
            }
            if BUILT_IN_TYPES.contains(&name) {
                return invalid("is a built-in type, so field types could not name the contract");
            }
        }
        Symbol::Function(_) | Symbol::Flow(_) => {
            if !is_identifier(name) {
                return invalid(&format!(
                    "is not a valid {noun} name: start with a letter or `_`, then use ASCII \
                     letters, digits and `_`"
                ));
            }
        }
        Symbol::Step { .. } | Symbol::ContractField { .. } | Symbol::FlowInput { .. } => {
            if !is_identifier(name) {
                return invalid(&format!(
                    "is not a valid {noun} name: start with a letter or `_`, then use ASCII \
                     letters, digits and `_` (expressions read it as a name)"
                ));
            }
            if name.contains("__") {
                return invalid("contains `__`, which expressions reject");
            }
            if is_python_keyword(name) || matches!(name, "true" | "false" | "null") {
                return invalid("is a keyword of the expression language");
            }
        }
    }
    if is_yaml_word(name) {
        return invalid("would be read by YAML as a boolean or null, not a name");
    }
    Ok(())
}

fn check_clash(analysis: &Analysis, symbol: &Symbol, name: &str) -> Result<(), RenameError> {
    let ast = &analysis.compilation.ast;
    let symbols = &analysis.compilation.model.symbols;
    let flow_name = |flow: usize| {
        ast.flows
            .get(flow)
            .map_or("?", |flow| flow.name.value.as_str())
    };
    let clash = match symbol {
        Symbol::Contract(_) => symbols.contracts.get(name).is_some(),
        Symbol::Function(_) => symbols.functions.get(name).is_some(),
        Symbol::Flow(_) => symbols.flows.get(name).is_some(),
        Symbol::Step { flow, .. } => symbols
            .steps
            .get(*flow)
            .is_some_and(|steps| steps.get(name).is_some()),
        Symbol::ContractField { contract, .. } => symbols
            .contract(ast, contract)
            .is_some_and(|def| def.fields.iter().any(|f| f.name.value == name)),
        Symbol::FlowInput { flow, .. } => ast
            .flows
            .get(*flow)
            .and_then(|flow| flow.input.as_ref())
            .is_some_and(|input| input.value.iter().any(|def| def.name.value == name)),
    };
    if !clash {
        return Ok(());
    }
    Err(RenameError::Clash(match symbol {
        Symbol::Step { flow, .. } => {
            format!("flow `{}` already has a step `{name}`", flow_name(*flow))
        }
        Symbol::ContractField { contract, .. } => {
            format!("contract `{contract}` already has a field `{name}`")
        }
        Symbol::FlowInput { flow, .. } => {
            format!("flow `{}` already has an input `{name}`", flow_name(*flow))
        }
        other => format!("a {} named `{name}` already exists", other.noun()),
    }))
}

/// A flow that the workflow names as its entry keeps being named by it: the new name must be
/// a workflow name too (`E0022`).
fn check_entry_flow(analysis: &Analysis, symbol: &Symbol, name: &str) -> Result<(), RenameError> {
    let Symbol::Flow(old) = symbol else {
        return Ok(());
    };
    let named_by_workflow = analysis
        .compilation
        .ast
        .workflow
        .as_ref()
        .and_then(|workflow| workflow.value.name.as_ref())
        .is_some_and(|workflow| &workflow.value == old);
    let mut chars = name.chars();
    let workflow_name = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if named_by_workflow && !workflow_name {
        return Err(RenameError::InvalidName(format!(
            "flow `{old}` is the workflow's entry flow by name, and `{name}` is not a valid \
             workflow name (a lowercase letter, then lowercase letters, digits and hyphens)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    const SPEC: &str = r#"version: "0.2"
contracts:
  Draft:
    text: {type: string}
    score: {type: number}
  Bundle:
    drafts: {type: "Draft[]"}
functions:
  write:
    mode: infer
    intent: "Write"
    input: {topic: {type: string}}
    output: Draft
    ensure: ["result.score >= 0"]
  approve:
    mode: gate
flows:
  main:
    input: {topic: {type: string}, prior: {type: "Bundle?"}}
    output: Draft
    steps:
      - id: scan
        function: write
        inputs: {topic: "$.input.topic"}
      - id: polish
        intent: "Polish"
        inputs: {text: "$.steps.scan.output.text", note: 'ünïcode'}
        output_contract: Draft
        skip_if: "$.steps.scan.output.score > 0.9"
        ensure:
          - "result.text != '' and \"ß\" != $.steps.scan.output.text"
        on_fail: scan
      - id: review
        function: approve
        depends_on: ["scan", polish]
        on_approve: ~
        on_revise: scan
        on_kill: ~
"#;

    fn analysis() -> Analysis {
        crate::analysis::clean(SPEC)
    }

    /// The offset of the `nth` (from 0) occurrence of `needle`, plus `into`.
    fn at(needle: &str, nth: usize, into: usize) -> usize {
        SPEC.match_indices(needle).nth(nth).unwrap().0 + into
    }

    /// Each span with the text of its line, to assert where it is.
    fn lines(analysis: &Analysis, spans: &[Span]) -> Vec<String> {
        spans
            .iter()
            .map(|span| {
                let line = analysis.position(span.start as usize).line as usize;
                format!(
                    "{} @ {}",
                    analysis.slice(*span),
                    SPEC.lines().nth(line).unwrap().trim()
                )
            })
            .collect()
    }

    #[test]
    fn definition_from_a_reference_inside_an_expression() {
        let analysis = analysis();
        // `scan` in the `ensure`, after non-ASCII text in a double-quoted scalar.
        let offset = at("$.steps.scan.output.text\"", 0, "$.steps.".len() + 1);
        let ensure = at(
            "\\\"ß\\\" != $.steps.scan",
            0,
            "\\\"ß\\\" != $.steps.".len() + 2,
        );
        for offset in [offset, ensure] {
            let span = definition(&analysis, offset).unwrap();
            assert_eq!(analysis.slice(span), "scan");
            assert_eq!(span.start as usize, at("id: scan", 0, 4));
        }
        // A contract field through `result`.
        let span = definition(&analysis, at("result.score", 0, 8)).unwrap();
        assert_eq!(span.start as usize, at("score: {type", 0, 0));
        // Nothing under the cursor.
        assert_eq!(definition(&analysis, at("mode: infer", 0, 1)), None);
    }

    #[test]
    fn references_are_sorted_with_or_without_the_declaration() {
        let analysis = analysis();
        let with = references(&analysis, at("id: scan", 0, 5), true);
        insta::assert_debug_snapshot!(lines(&analysis, &with), @r#"
        [
            "scan @ - id: scan",
            "scan @ inputs: {text: \"$.steps.scan.output.text\", note: 'ünïcode'}",
            "scan @ skip_if: \"$.steps.scan.output.score > 0.9\"",
            "scan @ - \"result.text != '' and \\\"ß\\\" != $.steps.scan.output.text\"",
            "scan @ on_fail: scan",
            "scan @ depends_on: [\"scan\", polish]",
            "scan @ on_revise: scan",
        ]
        "#);
        let without = references(&analysis, at("on_revise: scan", 0, 12), false);
        assert_eq!(without, with[1..].to_vec());
        assert!(references(&analysis, at("mode: gate", 0, 0), true).is_empty());
    }

    #[test]
    fn rename_a_step_everywhere() {
        let analysis = analysis();
        let (span, name) = prepare_rename(&analysis, at("on_fail: scan", 0, 9)).unwrap();
        assert_eq!((analysis.slice(span), name.as_str()), ("scan", "scan"));
        let edits = rename(&analysis, at("on_fail: scan", 0, 9), "survey").unwrap();
        assert_eq!(edits.len(), 7);
        let mut text = SPEC.to_owned();
        for (span, new) in edits.iter().rev() {
            text.replace_range(span.range(), new);
        }
        assert!(!text.contains("scan"), "{text}");
        let renamed = Analysis::new("spec.stratum.yaml", &text);
        assert!(renamed.compilation.diagnostics.is_empty(), "{text}");
        assert!(text.contains("depends_on: [\"survey\", polish]"), "{text}");
        assert!(
            text.contains("\\\"ß\\\" != $.steps.survey.output.text"),
            "{text}"
        );
    }

    #[test]
    fn rename_contracts_functions_flows_and_fields() {
        let analysis = analysis();
        let apply = |offset: usize, new: &str| {
            let mut text = SPEC.to_owned();
            for (span, replacement) in rename(&analysis, offset, new).unwrap().iter().rev() {
                text.replace_range(span.range(), replacement);
            }
            let renamed = Analysis::new("spec.stratum.yaml", &text);
            assert!(renamed.compilation.diagnostics.is_empty(), "{text}");
            text
        };
        let text = apply(at("Draft[]", 0, 1), "Version");
        assert!(!text.contains("Draft"));
        assert_eq!(text.matches("Version").count(), 5);
        let text = apply(at("function: write", 0, 11), "compose");
        assert_eq!(text.matches("compose").count(), 2);
        let text = apply(at("main:", 0, 0), "primary");
        assert!(text.contains("  primary:\n"));
        let text = apply(at("result.score", 0, 9), "quality");
        assert_eq!(text.matches("quality").count(), 3);
        let text = apply(at("$.input.topic", 0, 9), "subject");
        // The flow's input and its reference; the function's own input is another symbol.
        assert_eq!(text.matches("subject").count(), 2);
    }

    #[test]
    fn rename_refusals() {
        let analysis = analysis();
        let scan = at("id: scan", 0, 4);
        let refuse = |offset: usize, new: &str| rename(&analysis, offset, new).unwrap_err();
        assert_eq!(
            refuse(scan, "polish").to_string(),
            "flow `main` already has a step `polish`"
        );
        assert_eq!(
            refuse(at("Draft:", 0, 0), "Bundle").to_string(),
            "a contract named `Bundle` already exists"
        );
        assert_eq!(
            refuse(at("write:", 0, 0), "approve").to_string(),
            "a function named `approve` already exists"
        );
        assert_eq!(
            refuse(at("text: {type", 0, 0), "score").to_string(),
            "contract `Draft` already has a field `score`"
        );
        assert!(matches!(
            refuse(scan, "1st"),
            RenameError::InvalidName(message) if message.starts_with("`1st` is not a valid step name")
        ));
        assert_eq!(
            refuse(scan, "not").to_string(),
            "`not` is a keyword of the expression language"
        );
        assert_eq!(
            refuse(scan, "a__b").to_string(),
            "`a__b` contains `__`, which expressions reject"
        );
        assert_eq!(
            refuse(at("write:", 0, 0), "yes").to_string(),
            "`yes` would be read by YAML as a boolean or null, not a name"
        );
        assert_eq!(
            refuse(at("Draft:", 0, 0), "string").to_string(),
            "`string` is a built-in type, so field types could not name the contract"
        );
        assert_eq!(refuse(at("mode: gate", 0, 2), "x"), RenameError::NoSymbol);
        assert_eq!(
            RenameError::NoSymbol.to_string(),
            "no contract, function, flow, step or field name here to rename"
        );
        assert_eq!(rename(&analysis, scan, "scan"), Ok(Vec::new()));
    }

    #[test]
    fn a_reference_written_with_escapes_refuses_the_rename() {
        let text = SPEC.replace(
            "skip_if: \"$.steps.scan.output.score > 0.9\"",
            "skip_if: \"$.steps.sc\\x61n.output.score > 0.9\"",
        );
        let analysis = Analysis::new("spec.stratum.yaml", &text);
        let error = rename(&analysis, text.find("id: scan").unwrap() + 4, "survey").unwrap_err();
        assert_eq!(
            error.to_string(),
            "the reference to step `scan` on line 29 is written with escapes inside a string; \
             write it plainly, then rename"
        );
    }

    #[test]
    fn the_entry_flow_keeps_a_valid_workflow_name() {
        let text = SPEC.replace("  main:", "  review-drafts:").replace(
            "flows:",
            "workflow:\n  name: review-drafts\n  description: d\n  input: {topic: {type: string}, prior: {type: object}}\nflows:",
        );
        let analysis = Analysis::new("spec.stratum.yaml", &text);
        let flow = text.find("  review-drafts:").unwrap() + 2;
        assert!(matches!(
            rename(&analysis, flow, "drafts_flow"),
            Err(RenameError::InvalidName(_))
        ));
        // `review-drafts` is not an identifier, but renaming from it is fine.
        let edits = rename(&analysis, flow, "drafts").unwrap();
        assert_eq!(edits.len(), 2);
        let names = references(
            &analysis,
            text.find("topic: {type: string}, prior: {type: object}}")
                .unwrap(),
            true,
        );
        assert_eq!(
            names.len(),
            3,
            "the workflow input, the flow input and `$.input.topic`"
        );
    }

    #[test]
    fn placeholders_lead_to_their_contract_field_and_rename_with_it() {
        let spec = crate::placeholders::V03_SPEC;
        let analysis = crate::analysis::clean(spec);
        let declared = spec.find("description: {type").unwrap();
        for needle in ["{description}", "{task.id}", "{item.description}"] {
            let offset = spec.find(needle).unwrap() + needle.len() - 2;
            let target = definition(&analysis, offset).unwrap();
            let name = if needle.contains("id}") {
                "id"
            } else {
                "description"
            };
            assert_eq!(analysis.slice(target), name, "{needle}");
            if name == "description" {
                assert_eq!(target.start as usize, declared, "{needle}");
            }
        }
        // The stage's own `{id}` is no contract field.
        let own = spec.find("({id})").unwrap() + 2;
        assert_eq!(definition(&analysis, own), None);
        let mut text = spec.to_owned();
        for (span, new) in rename(&analysis, declared, "summary").unwrap().iter().rev() {
            text.replace_range(span.range(), new);
        }
        assert!(text.contains("\"Task {task.id}: {summary}\""), "{text}");
        assert!(text.contains("{item.summary}"), "{text}");
        assert!(!text.contains("description"), "{text}");
        crate::analysis::clean(&text);
        // `{description}` renamed `{prev}` would read the previous result.
        assert!(matches!(
            rename(&analysis, declared, "prev"),
            Err(RenameError::Unsafe(message)) if message.contains("`{prev}`")
        ));
    }
}

#[cfg(test)]
mod corpus {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::hover::hover_in;

    /// Every offset of every corpus spec, valid or not: each request answers without panicking,
    /// and what it answers is consistent.
    #[test]
    fn every_offset_of_the_corpus_answers() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus");
        let mut pending = vec![root];
        let mut files = Vec::new();
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.to_string_lossy().ends_with(".yaml") {
                    files.push(path);
                }
            }
        }
        assert!(files.len() > 20);
        for path in files {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            let analysis = Analysis::new("spec.stratum.yaml", &text);
            let index = Index::new(&analysis);
            for occurrence in index.occurrences() {
                // The name itself, unless written with escapes.
                let written = text.get(occurrence.span.range()).unwrap();
                assert!(
                    written == occurrence.symbol.name() || written.contains('\\'),
                    "{path:?}: {written:?} for {occurrence:?}"
                );
            }
            for offset in 0..=text.len() {
                let definition = definition_in(&analysis, &index, offset);
                let references = references_in(&analysis, &index, offset, true);
                if let Some(definition) = definition {
                    assert!(references.contains(&definition), "{path:?} at {offset}");
                }
                prepare_rename_in(&analysis, &index, offset);
                hover_in(&analysis, &index, offset);
                if let Ok(edits) = rename_in(&analysis, &index, offset, "renamed_x") {
                    for pair in edits.windows(2) {
                        assert!(pair[0].0.end <= pair[1].0.start, "{path:?} at {offset}");
                    }
                }
            }
        }
    }
}
