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
