//! miette's graphical reports, for people.
//!
//! [`render`] builds one miette report per diagnostic: the primary label and the secondary
//! labels of the same file drawn on the source, labels in other files as related reports, the
//! code, the help, and the fix's description as a note. Colour is the caller's choice (the
//! CLI turns it on only for a terminal without `NO_COLOR`); tests render without it at a fixed
//! width, so snapshots do not depend on the terminal.

mod fast;
mod source;
mod wrap;

use std::borrow::Cow;
use std::fmt;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, SourceCode, SourceSpan};

use super::FileReport;
use crate::diagnostic::{Diagnostic, Severity};
use crate::source::{SourceFile, SourceMap};
use source::Source;
use wrap::Wrapped;

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
    draw(sources, reports, style, Drawing::Fast)
}

/// How [`draw`] goes about it: the same text either way.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Drawing {
    /// Every report through miette's handler as it comes, wrapping included: the reference.
    Miette,
    /// Each distinct message and help wrapped once; the commonest reports drawn by `fast`,
    /// the others by miette with wrapping off where their texts allow it.
    Fast,
}

fn draw(sources: &SourceMap, reports: &[FileReport<'_>], style: Style, drawing: Drawing) -> String {
    let theme = if style.color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let mut wrapped = Wrapped::new(&theme, style.width);
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(style.width)
        .with_links(false);
    // For reports whose texts are wrapped already: miette only indents them.
    let unwrapping = handler.clone().with_wrap_lines(false);
    let mut out = String::new();
    for report in reports {
        for diagnostic in report.diagnostics {
            let mut rendered = Report::new(diagnostic, report.file, sources);
            let result = if drawing == Drawing::Miette {
                handler.render_report(&mut out, &rendered)
            } else if !style.color && draw_fast(&mut out, diagnostic, report.file, &mut wrapped) {
                Ok(())
            } else if rendered.prewrap(&mut wrapped) {
                unwrapping.render_report(&mut out, &rendered)
            } else {
                handler.render_report(&mut out, &rendered)
            };
            if result.is_err() {
                // miette fails only when a span lies outside its file, which would be our bug;
                // fall back to the message rather than lose the diagnostic.
                out.push_str(&format!("{}: {}\n", diagnostic.code, diagnostic.message));
            }
        }
    }
    out
}

/// `fast::draw` with the message and help wrapped through `wrapped`.
fn draw_fast(
    out: &mut String,
    diagnostic: &Diagnostic,
    file: &SourceFile,
    wrapped: &mut Wrapped,
) -> bool {
    let help = help_text(diagnostic).map(|help| wrapped.help(&help).filled.clone());
    let message = wrapped.message(diagnostic.severity, &diagnostic.message);
    fast::draw(out, diagnostic, file, &message.filled, help.as_deref())
}

/// A diagnostic seen through miette's eyes: labels in its own file, related reports for
/// labels in others.
struct Report<'a> {
    diagnostic: &'a Diagnostic,
    label: Option<&'a str>,
    /// The message and help as [`Report::prewrap`] wrapped them, for a handler that does not
    /// wrap; `None` for miette to wrap.
    message: Option<String>,
    help: Option<Option<String>>,
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
                    message: None,
                    help: None,
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
            message: None,
            help: None,
            file: Source::new(file),
            labels,
            related,
        }
    }

    /// Wraps the message and help through `wrapped`, for the handler that does not wrap; false
    /// when miette must wrap them itself. A report with related reports always goes through
    /// miette's wrapping: it wraps their whole drawing, not only their texts.
    fn prewrap(&mut self, wrapped: &mut Wrapped) -> bool {
        if self.label.is_some() || !self.related.is_empty() {
            return false;
        }
        let message = wrapped.message(self.diagnostic.severity, &self.diagnostic.message);
        let Some(message) = message.unindented.clone() else {
            return false;
        };
        let help = match help_text(self.diagnostic) {
            Some(help) => match &wrapped.help(&help).unindented {
                Some(help) => Some(help.clone()),
                None => return false,
            },
            None => None,
        };
        self.message = Some(message);
        self.help = Some(help);
        true
    }
}

/// The help miette draws: the diagnostic's help, then the fix's description.
fn help_text(diagnostic: &Diagnostic) -> Option<Cow<'_, str>> {
    let help = diagnostic.help.as_deref();
    let fix = diagnostic.fix.as_ref().map(|fix| fix.message.as_str());
    match (help, fix) {
        (Some(help), Some(fix)) => Some(Cow::Owned(format!("{help}\nfix available: {fix}"))),
        (Some(help), None) => Some(Cow::Borrowed(help)),
        (None, Some(fix)) => Some(Cow::Owned(format!("fix available: {fix}"))),
        (None, None) => None,
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
        match (self.label, &self.message) {
            (Some(label), _) => f.write_str(label),
            (None, Some(message)) => f.write_str(message),
            (None, None) => f.write_str(&self.diagnostic.message),
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
        match &self.help {
            Some(help) => help
                .as_deref()
                .map(|help| Box::new(help) as Box<dyn fmt::Display>),
            None => help_text(self.diagnostic).map(|help| Box::new(help) as Box<dyn fmt::Display>),
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
    use std::path::Path;
    use std::sync::atomic::Ordering;

    const STYLES: [Style; 3] = [
        Style::PLAIN,
        Style {
            color: false,
            width: 40,
        },
        Style {
            color: true,
            width: 80,
        },
    ];

    /// Every way of drawing `reports` in `styles` gives miette's text.
    fn assert_drawn_as_miette_draws(
        sources: &SourceMap,
        reports: &[FileReport<'_>],
        styles: &[Style],
    ) {
        for &style in styles {
            let theirs = draw(sources, reports, style, Drawing::Miette);
            let ours = draw(sources, reports, style, Drawing::Fast);
            assert_eq!(ours, theirs, "{style:?}");
        }
    }

    fn yaml_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
        let entries = std::fs::read_dir(dir).expect("the directory is readable");
        for entry in entries {
            let path = entry.expect("the directory is readable").path();
            if path.is_dir() {
                yaml_files(&path, files);
            } else if path.extension().is_some_and(|ext| ext == "yaml") {
                files.push(path);
            }
        }
    }

    /// The fast drawing and the prewrapped texts change nothing on the corpus and examples.
    #[test]
    fn corpus_reports_are_drawn_as_miette_draws_them() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for dir in ["tests/corpus", "tests/fuzz_findings", "examples"] {
            if root.join(dir).is_dir() {
                yaml_files(&root.join(dir), &mut files);
            }
        }
        assert!(files.len() > 50, "found only {} files", files.len());
        for path in files {
            let bytes = std::fs::read(&path).expect("the file is readable");
            let mut sources = SourceMap::new();
            let name = path.to_string_lossy();
            let compilations = [crate::check_bytes(&mut sources, &name, &bytes)];
            let reports = super::super::reports(&sources, &compilations);
            assert_drawn_as_miette_draws(&sources, &reports, &STYLES);
        }
    }

    /// A report on every short span (and every span to the end) of texts with short, long,
    /// blank, CRLF, tabbed and non-ASCII lines, line numbers that change width, and a file end
    /// with and without a line break, with short and wrapping texts and labels, is drawn as
    /// miette draws it. Longer spans cross lines, which `fast` leaves to miette.
    #[test]
    fn generated_reports_are_drawn_as_miette_draws_them() {
        let long_line = format!("key: {}\n", "word ".repeat(30));
        let numbered: String = (1..=12).map(|n| format!("line_{n}: v\n")).collect();
        let texts = [
            "a".to_owned(),
            "ab\ncd".to_owned(),
            "ab\ncd\n".to_owned(),
            "one\n\nthree\n\n".to_owned(),
            "a: 1\r\nb: 2\r\n".to_owned(),
            "a:\tb\nc: d\n".to_owned(),
            "name: café\nnext: 漢字\n".to_owned(),
            "x\ry\nz".to_owned(),
            long_line,
            numbered,
        ];
        let labels = ["here", "", "two\nlines"];
        let short_message = "a short message";
        let long_message =
            "a message long enough that miette must wrap it onto a second line at eighty columns";
        for text in texts {
            let mut sources = SourceMap::new();
            let file = sources.add("gen.stratum.yaml", text.clone()).clone();
            let mut out = String::new();
            let mut wrapped = Wrapped::new(&GraphicalTheme::unicode_nocolor(), 80);
            let first = Diagnostic::new(Code::W0021, "m", file.span(0..1), "here");
            let drawn = draw_fast(&mut out, &first, &file, &mut wrapped);
            assert_eq!(
                drawn,
                text.is_ascii() && !text.contains(['\t', '\r']),
                "{text:?}"
            );
            for start in 0..=text.len() {
                for end in start..=text.len() {
                    let short = end - start <= 6 || end == text.len();
                    if !short || !text.is_char_boundary(start) || !text.is_char_boundary(end) {
                        continue;
                    }
                    for (idx, label) in labels.iter().enumerate() {
                        let message = if idx % 2 == 0 {
                            short_message
                        } else {
                            long_message
                        };
                        let mut diagnostic =
                            Diagnostic::new(Code::W0021, message, file.span(start..end), *label);
                        if idx == 0 {
                            diagnostic = diagnostic.help(long_message);
                        }
                        let diagnostics = [diagnostic];
                        let reports = [FileReport {
                            file: &file,
                            diagnostics: &diagnostics,
                        }];
                        assert_drawn_as_miette_draws(&sources, &reports, &STYLES[..2]);
                    }
                }
            }
        }
    }

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
