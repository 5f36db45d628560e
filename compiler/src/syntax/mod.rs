//! The front end: spec text → typed [`Ast`] with spans, plus every structural diagnostic.
//!
//! `tree` turns YAML into a spanned tree of plain data, `read` checks that tree against the
//! format's shapes (`keys`) and builds the AST, and `scalar` maps offsets inside string
//! scalars back to source bytes. Parsing never fails: whatever the input, `parse` returns an
//! AST (possibly empty) and the diagnostics that explain what is missing from it.

pub mod ast;
pub mod keys;
pub mod read;
pub mod scalar;
pub mod tree;

use crate::diagnostic::{Code, Diagnostic};
use crate::source::SourceFile;
use ast::Ast;
use tree::NodeKind;

/// Parses a spec's text into its AST.
pub fn parse(src: &SourceFile) -> (Ast, Vec<Diagnostic>) {
    let loaded = tree::load(src);
    let mut diagnostics = loaded.diagnostics;
    let Some(root) = loaded.root else {
        if diagnostics.is_empty() {
            diagnostics.push(empty_spec(src));
        }
        return (Ast::default(), diagnostics);
    };
    let ast = match &root.kind {
        NodeKind::Map(_) => read::read(&root, src, &mut diagnostics),
        NodeKind::Null => {
            diagnostics.push(empty_spec(src));
            Ast::default()
        }
        NodeKind::Invalid => Ast::default(),
        _ => {
            // The whole document would be a wall of underlining: mark its first line.
            let first_line_end = src
                .text()
                .get(root.span.range())
                .and_then(|text| text.find('\n'))
                .map_or(root.span.end, |at| root.span.start + at as u32);
            let first_line = root.span.with_end(first_line_end);
            diagnostics.push(
                Diagnostic::new(
                    Code::E0009,
                    format!("a spec is a mapping of `version`, `contracts`, `functions` and `flows`, but this document is {}", root.kind_name()),
                    first_line,
                    format!("this is {}", root.kind_name()),
                )
                .help("start the file with `version: \"0.2\"` and the sections under it as keys"),
            );
            Ast::default()
        }
    };
    (ast, diagnostics)
}

fn empty_spec(src: &SourceFile) -> Diagnostic {
    Diagnostic::new(
        Code::E0008,
        "the spec is empty",
        src.span(0..0),
        "no YAML document here",
    )
    .help("a spec needs at least `version: \"0.2\"`, and `flows` to do anything")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::source::FileId;

    /// The expression diagnostics of later stages depend on this: an offset inside an
    /// expression's decoded text lands on the exact source bytes, whatever the quoting.
    #[test]
    fn expression_offsets_map_to_the_exact_source_bytes() {
        let text = "version: \"0.2\"\nflows:\n  run:\n    input: {}\n    steps:\n      - id: é\n        intent: \"go\"\n        ensure:\n          - \"r\\u0065sult.confdence > 0.7\"\n          - 'result.label != ''x'' and result.confdence'\n          - |\n            len(result.items)\n              > result.confdence\n";
        let file = SourceFile::new(FileId(0), "t.stratum.yaml", text);
        let (ast, diagnostics) = parse(&file);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        let ensures = &ast.flows[0].steps.as_ref().unwrap().value[0]
            .ensure
            .as_ref()
            .unwrap()
            .value;
        for ensure in ensures {
            let at = ensure.value.find("confdence").unwrap();
            let span = ensure.span_of(at..at + "confdence".len());
            assert_eq!(file.slice(span), "confdence", "in {:?}", ensure.value);
        }
        let escaped = &ensures[0];
        assert_eq!(file.slice(escaped.span_of(0..2)), "r\\u0065");
    }
}
