//! One line per diagnostic: `path:line:col: error[E0007]: message`, for hooks and editors'
//! error formats (`%f:%l:%c: %m`). Columns count characters, from 1.

use super::{FileReport, locate};
use crate::source::SourceMap;
use std::fmt::Write;

pub fn render(sources: &SourceMap, reports: &[FileReport<'_>]) -> String {
    let mut out = String::new();
    for diagnostic in reports.iter().flat_map(|report| report.diagnostics) {
        let Some(at) = locate(sources, diagnostic.primary.span) else {
            continue;
        };
        let _ = writeln!(
            out,
            "{}:{}:{}: {}[{}]: {}",
            at.path,
            at.start.line,
            at.start.column,
            diagnostic.severity.as_str(),
            diagnostic.code,
            diagnostic.message
        );
    }
    out
}
