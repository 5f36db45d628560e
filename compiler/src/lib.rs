//! `stratum-compiler`: checks Stratum workflow specs (`.stratum.yaml`).
//!
//! The pipeline, top to bottom: [`check_bytes`] decodes and bounds the input, [`syntax::parse`]
//! turns the text into a spanned [`syntax::ast::Ast`] with every structural diagnostic,
//! [`expression::parse_all`] parses every expression string with `stratum-grammar`,
//! [`sema::analyze`] resolves names, builds each flow's DAG and checks types and format rules,
//! and [`render`] turns diagnostics into human, one-line, JSON, GitHub and SARIF output;
//! [`graph`] draws a checked spec's flows as Graphviz or Mermaid. The library does no IO; the
//! `stratumc` binary reads files and writes reports.

pub mod diagnostic;
pub mod expression;
pub mod graph;
pub mod input;
pub mod render;
pub mod sema;
pub mod source;
pub mod syntax;

use diagnostic::Diagnostic;
use sema::Model;
use source::{FileId, SourceFile, SourceMap};
use syntax::ast::Ast;

/// What checking one file gives: its AST (empty when unusable), what the middle end resolved,
/// and its diagnostics, sorted.
#[derive(Debug)]
pub struct Compilation {
    pub file: FileId,
    pub ast: Ast,
    pub model: Model,
    pub diagnostics: Vec<Diagnostic>,
}

impl Compilation {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Checks a spec's text.
pub fn check(src: &SourceFile) -> Compilation {
    let (ast, model, mut diagnostics) = match input::forbidden_character(src) {
        Some(diagnostic) => (Ast::default(), Model::default(), vec![diagnostic]),
        None => {
            let (ast, mut diagnostics) = syntax::parse(src);
            let expressions = expression::parse_all(&ast, &mut diagnostics);
            let model = sema::analyze(&ast, expressions, &mut diagnostics);
            (ast, model, diagnostics)
        }
    };
    diagnostic::sort(&mut diagnostics);
    Compilation {
        file: src.id(),
        ast,
        model,
        diagnostics,
    }
}

/// Adds a file's raw bytes to `sources` and checks it. Bytes that are too many or not UTF-8
/// give a diagnostic instead of a parse; the file is still added, so that it can be rendered.
pub fn check_bytes(sources: &mut SourceMap, name: &str, bytes: &[u8]) -> Compilation {
    match input::decode(bytes) {
        Ok(text) => check(sources.add(name, text)),
        Err(rejected) => {
            let reason = rejected.reason;
            let file = sources.add(name, rejected.text);
            let diagnostic = reason.diagnostic(file);
            Compilation {
                file: file.id(),
                ast: Ast::default(),
                model: Model::default(),
                diagnostics: vec![diagnostic],
            }
        }
    }
}

/// Reports workflow names declared by more than one of the specs checked together, on every
/// declaration after the first (what `stratum_list_workflows` would reject at run time).
pub fn check_workflow_names(compilations: &mut [Compilation]) {
    let mut first: std::collections::HashMap<String, source::Span> = Default::default();
    for compilation in compilations.iter_mut() {
        let Some(name) = compilation
            .ast
            .workflow
            .as_ref()
            .and_then(|workflow| workflow.value.name.as_ref())
        else {
            continue;
        };
        match first.get(&name.value) {
            Some(&earlier) => {
                compilation.diagnostics.push(
                    Diagnostic::new(
                        diagnostic::Code::E0018,
                        format!("the workflow name `{}` is already taken", name.value),
                        name.span,
                        "declared again here",
                    )
                    .secondary(earlier, "first declared here")
                    .help("workflow names must be unique among the specs of a project; rename one of them"),
                );
                diagnostic::sort(&mut compilation.diagnostics);
            }
            None => {
                first.insert(name.value.clone(), name.span);
            }
        }
    }
}
