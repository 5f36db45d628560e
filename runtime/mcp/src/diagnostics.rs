//! A spec's diagnostics as an agent reads them: the reference's error fields (`error_type`,
//! `path`, `message`, `suggestion`) so that existing skills keep working, and beside them
//! everything the compiler knows (code, position, help, the machine-applicable fix) so that
//! the agent fixes every problem in one edit.

use schemars::JsonSchema;
use serde::Serialize;
use stratum_compiler::diagnostic::{Diagnostic, Severity};
use stratum_compiler::source::{SourceFile, SourceMap, Span};
use stratum_compiler::syntax::tree::{self, Node, NodeKind};

/// One diagnostic of a spec.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct SpecDiagnostic {
    /// Always `false` (the reference's field).
    pub success: bool,
    /// `ir_parse_error` (not readable YAML), `ir_validation_error` (a key or value of the
    /// wrong shape) or `ir_semantic_error` (names, types, references, the DAG).
    pub error_type: String,
    /// Where in the spec, as YAML keys joined by dots; steps are named by their id
    /// (`flows.review.steps.fetch.inputs`).
    pub path: String,
    pub message: String,
    /// What to change: the help text, else the fix's description.
    pub suggestion: Option<String>,
    /// The compiler's code (`E0029`); `stratumc explain CODE` tells more.
    pub code: String,
    /// The code's name (`unknown-field`).
    pub name: String,
    /// `error` or `warning`.
    pub severity: String,
    /// 1-based line and column (in characters) where the problem starts and ends.
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    /// What the problem is, at that place.
    pub label: String,
    pub help: Option<String>,
    /// A replacement that resolves the problem with no judgment needed.
    pub fix: Option<SpecFix>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct SpecFix {
    pub message: String,
    pub edits: Vec<SpecEdit>,
}

/// Replace the text from (line, column) up to (end_line, end_column) with `replacement`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct SpecEdit {
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub replacement: String,
}

/// The most diagnostics one answer lists. A spec of 20,000 bad lines drew a 19 MB answer
/// (38 MB from 400 KB of spec): more than an agent can read, and memory the server holds
/// while it writes it. The first ones are what an agent fixes first; the count of the rest
/// says there is more, and `stratumc check` lists every one.
pub const MAX_LISTED_DIAGNOSTICS: usize = 200;

/// The diagnostics of one checked spec, errors and warnings apart, in source order.
pub struct Report {
    pub errors: Vec<SpecDiagnostic>,
    pub warnings: Vec<SpecDiagnostic>,
}

/// Describes `diagnostics`, which the compiler reported for the files of `sources`. Only
/// what is listed is described (finding a diagnostic's YAML path parses the file again), so
/// callers pick the diagnostics first: [`listed_for_validation`], [`listed_in_order`].
pub fn report<'d>(
    sources: &SourceMap,
    diagnostics: impl IntoIterator<Item = &'d Diagnostic>,
) -> Report {
    let mut trees = Vec::new();
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    for diagnostic in diagnostics {
        let Some(file) = sources.get(diagnostic.primary.span.file) else {
            continue;
        };
        // Parsed again only when a spec has problems, and once per file.
        let root = match trees.iter().find(|(id, _)| *id == file.id()) {
            Some((_, root)) => root,
            None => {
                trees.push((file.id(), tree::load(file).root));
                match trees.last() {
                    Some((_, root)) => root,
                    None => continue,
                }
            }
        };
        let described = describe(file, root.as_ref(), diagnostic);
        if diagnostic.severity == Severity::Error {
            errors.push(described);
        } else {
            warnings.push(described);
        }
    }
    Report { errors, warnings }
}

/// What `stratum_validate` lists: the first errors, then the first warnings in the room left,
/// at most [`MAX_LISTED_DIAGNOSTICS`] in all; and how many it leaves out.
pub fn listed_for_validation(diagnostics: &[Diagnostic]) -> (Vec<&Diagnostic>, usize) {
    let is_error = |diagnostic: &&Diagnostic| diagnostic.severity == Severity::Error;
    let mut listed: Vec<&Diagnostic> = diagnostics
        .iter()
        .filter(is_error)
        .take(MAX_LISTED_DIAGNOSTICS)
        .collect();
    let room = MAX_LISTED_DIAGNOSTICS.saturating_sub(listed.len());
    listed.extend(
        diagnostics
            .iter()
            .filter(|diagnostic| !is_error(diagnostic))
            .take(room),
    );
    let omitted = diagnostics.len().saturating_sub(listed.len());
    (listed, omitted)
}

/// The first [`MAX_LISTED_DIAGNOSTICS`] diagnostics in the compiler's (source) order, and how
/// many it leaves out.
pub fn listed_in_order(diagnostics: &[Diagnostic]) -> (Vec<&Diagnostic>, usize) {
    let listed: Vec<&Diagnostic> = diagnostics.iter().take(MAX_LISTED_DIAGNOSTICS).collect();
    let omitted = diagnostics.len().saturating_sub(listed.len());
    (listed, omitted)
}

fn describe(file: &SourceFile, root: Option<&Node>, diagnostic: &Diagnostic) -> SpecDiagnostic {
    let span = diagnostic.primary.span;
    let (line, column, end_line, end_column) = positions(file, span);
    let fix = diagnostic.fix.as_ref().map(|fix| SpecFix {
        message: fix.message.clone(),
        edits: fix
            .edits
            .iter()
            .map(|edit| {
                let (line, column, end_line, end_column) = positions(file, edit.span);
                SpecEdit {
                    line,
                    column,
                    end_line,
                    end_column,
                    replacement: edit.replacement.clone(),
                }
            })
            .collect(),
    });
    SpecDiagnostic {
        success: false,
        error_type: error_type(diagnostic.code.as_str()).to_owned(),
        path: root
            .map(|root| yaml_path(root, span.start))
            .unwrap_or_default(),
        message: diagnostic.message.clone(),
        suggestion: diagnostic
            .help
            .clone()
            .or_else(|| diagnostic.fix.as_ref().map(|fix| fix.message.clone())),
        code: diagnostic.code.as_str().to_owned(),
        name: diagnostic.code.slug().to_owned(),
        severity: diagnostic.severity.as_str().to_owned(),
        line,
        column,
        end_line,
        end_column,
        label: diagnostic.primary.message.clone(),
        help: diagnostic.help.clone(),
        fix,
    }
}

fn positions(file: &SourceFile, span: Span) -> (usize, usize, usize, usize) {
    let start = file.line_col(span.start as usize);
    let end = file.line_col(span.end as usize);
    (start.line, start.column, end.line, end.column)
}

/// The reference's three error types, by what kind of rule a code belongs to: the text
/// (E0001–E0010, E0024), the shape of keys and values (E0011–E0016, E0019–E0023), or meaning
/// (the rest, duplicate step ids and workflow names among them).
pub fn error_type(code: &str) -> &'static str {
    let number = code
        .strip_prefix(['E', 'W'])
        .and_then(|digits| digits.parse::<u32>().ok());
    match (code.starts_with('E'), number) {
        (true, Some(1..=10 | 24)) => "ir_parse_error",
        (true, Some(11..=16 | 19..=23)) => "ir_validation_error",
        _ => "ir_semantic_error",
    }
}

/// The keys from the document's root down to the innermost node at `offset`, joined by dots;
/// a sequence item with an `id` is named by it, others by their index.
pub fn yaml_path(root: &Node, offset: u32) -> String {
    let contains =
        |node: &Node| node.span.start <= offset && offset < node.span.end.max(node.span.start + 1);
    let mut parts: Vec<String> = Vec::new();
    let mut node = root;
    loop {
        match &node.kind {
            NodeKind::Map(entries) => {
                let Some(entry) = entries
                    .iter()
                    .find(|entry| contains(&entry.key) || contains(&entry.value))
                else {
                    break;
                };
                parts.push(
                    entry
                        .key
                        .as_str()
                        .map_or_else(|| "?".to_owned(), str::to_owned),
                );
                if contains(&entry.key) {
                    break;
                }
                node = &entry.value;
            }
            NodeKind::Seq(items) => {
                let Some((index, item)) = items.iter().enumerate().find(|(_, item)| contains(item))
                else {
                    break;
                };
                parts.push(item_name(item).unwrap_or_else(|| index.to_string()));
                node = item;
            }
            _ => break,
        }
    }
    parts.join(".")
}

fn item_name(item: &Node) -> Option<String> {
    let NodeKind::Map(entries) = &item.kind else {
        return None;
    };
    entries
        .iter()
        .find(|entry| entry.key.as_str() == Some("id"))
        .and_then(|entry| entry.value.as_str())
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_at(text: &str, needle: &str) -> String {
        let mut sources = SourceMap::new();
        let file = sources.add("spec.stratum.yaml", text.to_owned());
        let offset = text.find(needle).unwrap_or(0);
        let root = tree::load(file).root;
        root.map(|root| yaml_path(&root, offset as u32))
            .unwrap_or_default()
    }

    #[test]
    fn paths_name_steps_by_id() {
        let text = "flows:\n  main:\n    steps:\n      - id: fetch\n        intent: x\n      - id: sort\n        intnet: y\n";
        assert_eq!(path_at(text, "intnet"), "flows.main.steps.sort.intnet");
        assert_eq!(path_at(text, "x\n"), "flows.main.steps.fetch.intent");
        assert_eq!(path_at(text, "flows"), "flows");
    }

    #[test]
    fn error_types_follow_the_kind_of_rule() {
        assert_eq!(error_type("E0004"), "ir_parse_error");
        assert_eq!(error_type("E0011"), "ir_validation_error");
        assert_eq!(error_type("E0029"), "ir_semantic_error");
        assert_eq!(error_type("W0001"), "ir_semantic_error");
    }
}
