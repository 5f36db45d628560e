//! Machine-readable output: one JSON document per run, in the schema published at
//! `compiler/schemas/check-output.schema.json` (format version 1).
//!
//! The schema is stable: fields may be added in a later format version, none removed or
//! changed in meaning. Byte offsets are into the file as read; lines and columns are 1-based
//! and columns count Unicode scalar values.

use serde::Serialize;

use super::FileReport;
use crate::diagnostic::{Diagnostic, Label, Severity};
use crate::source::{SourceMap, Span};

/// The `version` field of the output; bumped only when a field changes meaning.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Serialize)]
struct Output<'a> {
    version: u32,
    files: Vec<FileOut<'a>>,
    summary: Summary,
}

#[derive(Serialize)]
struct FileOut<'a> {
    path: &'a str,
    diagnostics: Vec<DiagnosticOut<'a>>,
}

#[derive(Serialize)]
struct DiagnosticOut<'a> {
    code: &'static str,
    name: &'static str,
    severity: &'static str,
    message: &'a str,
    primary: LocationOut<'a>,
    secondary: Vec<LocationOut<'a>>,
    help: Option<&'a str>,
    fix: Option<FixOut<'a>>,
}

#[derive(Serialize)]
struct LocationOut<'a> {
    path: &'a str,
    label: &'a str,
    #[serde(flatten)]
    range: RangeOut,
}

#[derive(Serialize)]
struct RangeOut {
    start: PositionOut,
    end: PositionOut,
}

#[derive(Serialize)]
struct PositionOut {
    offset: u32,
    line: usize,
    column: usize,
}

#[derive(Serialize)]
struct FixOut<'a> {
    message: &'a str,
    edits: Vec<EditOut<'a>>,
}

#[derive(Serialize)]
struct EditOut<'a> {
    path: &'a str,
    #[serde(flatten)]
    range: RangeOut,
    replacement: &'a str,
}

#[derive(Serialize)]
struct Summary {
    files: usize,
    errors: usize,
    warnings: usize,
}

pub fn render(sources: &SourceMap, reports: &[FileReport<'_>]) -> String {
    let all = || reports.iter().flat_map(|report| report.diagnostics);
    let output = Output {
        version: FORMAT_VERSION,
        files: reports
            .iter()
            .map(|report| FileOut {
                path: report.file.name(),
                diagnostics: report
                    .diagnostics
                    .iter()
                    .map(|diagnostic| diagnostic_out(sources, diagnostic))
                    .collect(),
            })
            .collect(),
        summary: Summary {
            files: reports.len(),
            errors: all().filter(|d| d.severity == Severity::Error).count(),
            warnings: all().filter(|d| d.severity == Severity::Warning).count(),
        },
    };
    let mut text = serde_json::to_string_pretty(&output).unwrap_or_default();
    text.push('\n');
    text
}

fn diagnostic_out<'a>(sources: &'a SourceMap, diagnostic: &'a Diagnostic) -> DiagnosticOut<'a> {
    DiagnosticOut {
        code: diagnostic.code.as_str(),
        name: diagnostic.code.slug(),
        severity: diagnostic.severity.as_str(),
        message: &diagnostic.message,
        primary: location_out(sources, &diagnostic.primary),
        secondary: diagnostic
            .secondary
            .iter()
            .map(|label| location_out(sources, label))
            .collect(),
        help: diagnostic.help.as_deref(),
        fix: diagnostic.fix.as_ref().map(|fix| FixOut {
            message: &fix.message,
            edits: fix
                .edits
                .iter()
                .map(|edit| EditOut {
                    path: path_of(sources, edit.span),
                    range: range_out(sources, edit.span),
                    replacement: &edit.replacement,
                })
                .collect(),
        }),
    }
}

fn location_out<'a>(sources: &'a SourceMap, label: &'a Label) -> LocationOut<'a> {
    LocationOut {
        path: path_of(sources, label.span),
        label: &label.message,
        range: range_out(sources, label.span),
    }
}

fn path_of(sources: &SourceMap, span: Span) -> &str {
    sources.get(span.file).map_or("", |file| file.name())
}

fn range_out(sources: &SourceMap, span: Span) -> RangeOut {
    let position = |offset: u32| {
        let at = sources
            .get(span.file)
            .map(|file| file.line_col(offset as usize));
        PositionOut {
            offset,
            line: at.map_or(1, |at| at.line),
            column: at.map_or(1, |at| at.column),
        }
    };
    RangeOut {
        start: position(span.start),
        end: position(span.end),
    }
}
