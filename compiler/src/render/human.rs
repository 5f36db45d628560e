//! miette's graphical reports, for people.
//!
//! [`render`] builds one miette report per diagnostic: the primary label and the secondary
//! labels of the same file drawn on the source, labels in other files as related reports, the
//! code, the help, and the fix's description as a note. Colour is the caller's choice (the
//! CLI turns it on only for a terminal without `NO_COLOR`); tests render without it at a fixed
//! width, so snapshots do not depend on the terminal.

mod source;

use std::fmt;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, SourceCode, SourceSpan};

use super::FileReport;
use crate::diagnostic::{Diagnostic, Severity};
use crate::source::{SourceFile, SourceMap};
use source::Source;

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
                    file: Source::new(other),
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
            file: Source::new(file),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Code;
    use crate::source::FileId;
    use std::sync::atomic::Ordering;

    /// A diagnostic at the end of a long file reads the lines it draws, not the file before
    /// them: rendering stays linear however many diagnostics a file has.
    #[test]
    fn a_report_reads_only_the_lines_around_its_labels() {
        let mut text = String::new();
        for line in 0..20_000 {
            text.push_str(&format!("key_{line}: value\n"));
        }
        let file = SourceFile::new(FileId(0), "long.stratum.yaml", text);
        let start = file.text().len() - "value\n".len();
        let diagnostic = Diagnostic::new(
            Code::W0021,
            "a warning on the last line",
            file.span(start..start + "value".len()),
            "here",
        )
        .secondary(file.span(start - 20..start - 15), "and here");
        let sources = SourceMap::new();
        let report = Report::new(&diagnostic, &file, &sources);
        let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor());
        let mut out = String::new();
        assert!(handler.render_report(&mut out, &report).is_ok());
        assert!(out.contains("key_19999: value"), "{out}");
        // Three lines of context drawn at most five times (each label, the merged window, the
        // header's position): a few hundred bytes, against 350 KB of file.
        let read = report.file.bytes_read.load(Ordering::Relaxed);
        assert!(read < 1_000, "the report read {read} bytes of the file");
    }
}
