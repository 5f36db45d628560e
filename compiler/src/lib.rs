//! `stratum-compiler`: checks Stratum workflow specs (`.stratum.yaml`).
//!
//! The pipeline, top to bottom: [`check_bytes`] decodes and bounds the input, [`syntax::parse`]
//! turns the text into a spanned [`syntax::ast::Ast`] with every structural diagnostic,
//! [`expression::parse_all`] parses every expression string with `stratum-grammar`,
//! [`sema::analyze`] resolves names, builds each flow's DAG and checks types and format rules,
//! and [`render`] turns diagnostics into human, one-line, JSON, GitHub and SARIF output;
//! [`graph`] draws a checked spec's flows as Graphviz or Mermaid, and [`spec_schema`] turns the
//! format's key tables into a JSON Schema for editors; [`migrate`] raises a clean spec's version
//! by editing its text; [`vocabulary`] reads the YAML of the vocabulary files that the
//! `vocabulary_compliance` built-in scans for. The library does no IO; the `stratumc` binary
//! reads files and writes reports.

pub mod cli;
pub mod diagnostic;
pub mod expression;
pub mod graph;
pub mod input;
pub mod lower;
pub mod migrate;
pub mod plan;
pub mod render;
pub mod sema;
pub mod source;
pub mod spec_schema;
pub mod syntax;
pub mod template;
pub mod vocabulary;

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

    /// The indices (into `Ast::flows`) of the flows a command works on, in declaration order:
    /// all of them, or the one `flow` names and those it runs, directly or not (`--flow` of
    /// `build` and `graph`).
    pub fn select_flows(&self, flow: Option<&str>) -> Result<Vec<usize>, UnknownFlow> {
        let symbols = &self.model.symbols;
        let Some(name) = flow else {
            return Ok((0..self.ast.flows.len()).collect());
        };
        let Some(root) = symbols.flows.get(name) else {
            return Err(UnknownFlow {
                name: name.to_owned(),
                suggestion: diagnostic::did_you_mean(name, symbols.flows.names())
                    .map(str::to_owned),
                flows: symbols.flows.names().map(str::to_owned).collect(),
            });
        };
        let calls = &self.model.calls;
        let mut found = std::collections::BTreeSet::from([root]);
        let mut pending = vec![root];
        while let Some(caller) = pending.pop() {
            if caller >= calls.node_count() {
                continue;
            }
            for callee in calls.neighbors(petgraph::graph::NodeIndex::new(caller)) {
                if found.insert(callee.index()) {
                    pending.push(callee.index());
                }
            }
        }
        Ok(found.into_iter().collect())
    }
}

/// `--flow` named a flow the spec does not declare.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no flow named `{name}`{}", unknown_flow_hint(.suggestion, .flows))]
pub struct UnknownFlow {
    pub name: String,
    /// The declared flow whose name is closest, when it is a plausible typo.
    pub suggestion: Option<String>,
    /// Every declared flow, in declaration order.
    pub flows: Vec<String>,
}

fn unknown_flow_hint(suggestion: &Option<String>, flows: &[String]) -> String {
    match (suggestion, flows) {
        (Some(best), _) => format!("; did you mean `{best}`?"),
        (None, []) => "; the spec declares no flows".to_owned(),
        (None, flows) => format!("; the spec declares {}", diagnostic::backticked(flows)),
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
