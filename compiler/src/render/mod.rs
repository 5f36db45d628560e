//! Diagnostics → text, for people and for machines.
//!
//! Every format renders the same [`Diagnostic`]s over the same [`SourceMap`]: `human` through
//! miette's graphical handler, `short` one line each for hooks and editors, `json` in the
//! published schema `compiler/schemas/check-output.schema.json`, `github` as workflow-command
//! annotations, `sarif` as SARIF 2.1.0. Each takes the files of a run and their diagnostics in
//! output order and returns a `String`; none does IO, so all are snapshot-tested.

pub mod github;
pub mod human;
pub mod json;
pub mod sarif;
pub mod short;

use crate::Compilation;
use crate::diagnostic::Diagnostic;
use crate::source::{LineCol, SourceFile, SourceMap, Span};

/// One file of a run and its diagnostics, in output order.
pub struct FileReport<'a> {
    pub file: &'a SourceFile,
    pub diagnostics: &'a [Diagnostic],
}

/// The reports of a run's compilations, in the order they were checked.
pub fn reports<'a>(sources: &'a SourceMap, compilations: &'a [Compilation]) -> Vec<FileReport<'a>> {
    compilations
        .iter()
        .filter_map(|compilation| {
            Some(FileReport {
                file: sources.get(compilation.file)?,
                diagnostics: &compilation.diagnostics,
            })
        })
        .collect()
}

/// Where a span starts and ends, as people count: 1-based lines and character columns.
pub(crate) struct Location<'a> {
    pub path: &'a str,
    pub start: LineCol,
    pub end: LineCol,
}

pub(crate) fn locate(sources: &SourceMap, span: Span) -> Option<Location<'_>> {
    let file = sources.get(span.file)?;
    Some(Location {
        path: file.name(),
        start: file.line_col(span.start as usize),
        end: file.line_col(span.end as usize),
    })
}
