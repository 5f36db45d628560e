//! miette's graphical reports, for people.
//!
//! [`render`] builds one miette report per diagnostic: the primary label and the secondary
//! labels of the same file drawn on the source, labels in other files as related reports, the
//! code, the help, and the fix's description as a note. Colour is the caller's choice (the
//! CLI turns it on only for a terminal without `NO_COLOR`); tests render without it at a fixed
//! width, so snapshots do not depend on the terminal.

use std::fmt;

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents,
    SourceCode, SourceSpan, SpanContents,
};

use super::FileReport;
use crate::diagnostic::{Diagnostic, Severity};
use crate::source::{SourceFile, SourceMap};

#[derive(Clone, Copy, Debug)]
pub struct Style {
    pub color: bool,
    pub width: usize,
}

impl Style {
    /// What snapshots use: no colour, 80 columns.
    pub const PLAIN: Style = Style {
        color: false,
        width: 80,
    };
}

pub fn render(sources: &SourceMap, reports: &[FileReport<'_>], style: Style) -> String {
    let theme = if style.color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(style.width)
        .with_links(false);
    let mut out = String::new();
    for report in reports {
        for diagnostic in report.diagnostics {
            let rendered = Report::new(diagnostic, report.file, sources);
            if handler.render_report(&mut out, &rendered).is_err() {
                // miette fails only when a span lies outside its file, which would be our bug;
                // fall back to the message rather than lose the diagnostic.
                out.push_str(&format!("{}: {}\n", diagnostic.code, diagnostic.message));
            }
        }
    }
    out
}

/// A diagnostic seen through miette's eyes: labels in its own file, related reports for
/// labels in others.
struct Report<'a> {
    diagnostic: &'a Diagnostic,
    label: Option<&'a str>,
    file: Source<'a>,
    labels: Vec<LabeledSpan>,
    related: Vec<Report<'a>>,
}

impl<'a> Report<'a> {
    fn new(diagnostic: &'a Diagnostic, file: &'a SourceFile, sources: &'a SourceMap) -> Report<'a> {
        let mut labels = vec![LabeledSpan::new_primary_with_span(
            Some(diagnostic.primary.message.clone()),
            miette_span(diagnostic.primary.span),
        )];
        let mut related = Vec::new();
        for label in &diagnostic.secondary {
            if label.span.file == file.id() {
                labels.push(LabeledSpan::new_with_span(
                    Some(label.message.clone()),
                    miette_span(label.span),
                ));
            } else if let Some(other) = sources.get(label.span.file) {
                related.push(Report {
                    diagnostic,
                    label: Some(&label.message),
                    file: Source(other),
                    labels: vec![LabeledSpan::new_primary_with_span(
                        Some(label.message.clone()),
                        miette_span(label.span),
                    )],
                    related: Vec::new(),
                });
            }
        }
        Report {
            diagnostic,
            label: None,
            file: Source(file),
            labels,
            related,
        }
    }
}

fn miette_span(span: crate::source::Span) -> SourceSpan {
    SourceSpan::from(span.range())
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Report")
            .field("code", &self.diagnostic.code)
            .finish()
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.label {
            Some(label) => f.write_str(label),
            None => f.write_str(&self.diagnostic.message),
        }
    }
}

impl std::error::Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.label
            .is_none()
            .then(|| Box::new(self.diagnostic.code) as Box<dyn fmt::Display>)
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match (self.label, self.diagnostic.severity) {
            (Some(_), _) => miette::Severity::Advice,
            (None, Severity::Error) => miette::Severity::Error,
            (None, Severity::Warning) => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        if self.label.is_some() {
            return None;
        }
        let help = self.diagnostic.help.as_deref();
        let fix = self.diagnostic.fix.as_ref().map(|fix| fix.message.as_str());
        match (help, fix) {
            (Some(help), Some(fix)) => Some(Box::new(format!("{help}\nfix available: {fix}"))),
            (Some(help), None) => Some(Box::new(help)),
            (None, Some(fix)) => Some(Box::new(format!("fix available: {fix}"))),
            (None, None) => None,
        }
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.file)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().cloned()))
    }

    fn related<'b>(&'b self) -> Option<Box<dyn Iterator<Item = &'b dyn miette::Diagnostic> + 'b>> {
        if self.related.is_empty() {
            return None;
        }
        Some(Box::new(
            self.related
                .iter()
                .map(|report| report as &dyn miette::Diagnostic),
        ))
    }
}

/// A source file as miette reads it: named, with the header's column counted in characters
/// (miette's own `str` source counts bytes, which is wrong after non-ASCII text).
struct Source<'a>(&'a SourceFile);

impl SourceCode for Source<'_> {
    fn read_span<'b>(
        &'b self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'b> + 'b>, MietteError> {
        let text = self.0.text();
        let contents = text.read_span(span, context_lines_before, context_lines_after)?;
        let column = if context_lines_before == 0 && context_lines_after == 0 {
            self.0.line_col(span.offset()).column - 1
        } else {
            contents.column()
        };
        Ok(Box::new(MietteSpanContents::new_named(
            self.0.name().to_owned(),
            contents.data(),
            *contents.span(),
            contents.line(),
            column,
            contents.line_count(),
        )))
    }
}
