//! GitHub Actions workflow commands: `::error file=…,line=…,col=…::message`, which GitHub shows
//! as annotations on the pull request's diff.

use super::{FileReport, locate};
use crate::diagnostic::Severity;
use crate::source::SourceMap;
use std::fmt::Write;

pub fn render(sources: &SourceMap, reports: &[FileReport<'_>]) -> String {
    let mut out = String::new();
    for diagnostic in reports.iter().flat_map(|report| report.diagnostics) {
        let Some(at) = locate(sources, diagnostic.primary.span) else {
            continue;
        };
        let command = match diagnostic.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut message = diagnostic.message.clone();
        if let Some(help) = &diagnostic.help {
            message.push_str("\nhelp: ");
            message.push_str(help);
        }
        let _ = writeln!(
            out,
            "::{command} file={},line={},col={},endLine={},endColumn={},title={}::{}",
            escape_property(at.path),
            at.start.line,
            at.start.column,
            at.end.line,
            at.end.column,
            escape_property(&format!("{} {}", diagnostic.code, diagnostic.code.slug())),
            escape_data(&message),
        );
    }
    out
}

/// The escaping GitHub's runner undoes in a command's message.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Property values also escape the separators `:` and `,`.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_are_escaped() {
        assert_eq!(escape_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
        assert_eq!(escape_data("a:b\r\n"), "a:b%0D%0A");
    }
}
