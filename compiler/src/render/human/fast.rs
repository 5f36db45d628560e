//! The commonest report, drawn directly: what miette's graphical handler draws for it, byte
//! for byte, without its per-report machinery.
//!
//! [`draw`] takes a diagnostic with one label (no secondary labels), on a non-empty span
//! within one line, whose window of context lines is printable ASCII without tabs or `\r`, a
//! one-line label, and no colour, with the message and help already wrapped as miette wraps
//! them. That is most reports of a large file (a warning per step, say), and for it miette
//! spends microseconds on line splitting, Unicode widths, styling and allocations whose answer
//! is known. Any other report returns false and goes through miette. The drawing restates
//! miette 7.6.0's `GraphicalReportHandler` (`render_header`, `render_causes`, `render_context`,
//! `render_single_line_highlights`, `write_label_text`, `render_footer`) for that shape; the
//! tests in `human.rs` compare the two on every corpus file and on every span of a set of
//! generated texts.

use std::fmt::Write;

use miette::SourceSpan;

use super::source::window;
use crate::diagnostic::Diagnostic;
use crate::source::SourceFile;

/// Appends `diagnostic`'s report to `out` if it has the shape above, given its message and
/// help as miette writes them (indents included); false, with `out` untouched, otherwise.
pub(super) fn draw(
    out: &mut String,
    diagnostic: &Diagnostic,
    file: &SourceFile,
    message: &str,
    help: Option<&str>,
) -> bool {
    let label = &diagnostic.primary;
    if !diagnostic.secondary.is_empty() || label.span.file != file.id() {
        return false;
    }
    let (start, end) = (label.span.start as usize, label.span.end as usize);
    let text = file.text();
    if start >= end || label.message.contains('\n') {
        return false;
    }
    let Ok(found) = window(text, file.lines(), &SourceSpan::from(start..end), 1, 1) else {
        return false;
    };
    let Some(data) = text.get(found.range.clone()) else {
        return false;
    };
    // One column per byte, and no line break but `\n`: miette's widths and line splitting
    // need no counting.
    if !data
        .bytes()
        .all(|byte| byte == b'\n' || (b' '..=b'~').contains(&byte))
    {
        return false;
    }
    // miette's `get_lines`: a line ends after each `\n`, and at the end of the window.
    let mut lines = Vec::new();
    let mut offset = found.range.start;
    let mut labelled = None;
    for piece in data.split_inclusive('\n') {
        let line = piece.strip_suffix('\n').unwrap_or(piece);
        if offset <= start && end <= offset + line.len() {
            labelled = Some(lines.len());
        }
        lines.push((offset, line));
        offset += piece.len();
    }
    let Some(labelled) = labelled else {
        return false;
    };
    // Lines are numbered from 1; the gutter is as wide as the last number.
    let first = found.line + 1;
    let linum_width = decimal_digits(first + lines.len() - 1);

    out.push_str(diagnostic.code.as_str());
    out.push_str("\n\n");
    out.push_str(message);
    out.push('\n');
    push_repeated(out, " ", linum_width + 2);
    out.push_str("╭─[");
    out.push_str(file.name());
    let at = file.line_col(start);
    // Writing to a `String` does not fail.
    let _ = writeln!(out, ":{}:{}]", file.lines().line_of(start) + 1, at.column);
    for (idx, &(offset, line)) in lines.iter().enumerate() {
        let _ = write!(out, " {:>linum_width$} │ ", first + idx);
        out.push_str(line);
        out.push('\n');
        if idx == labelled {
            // `render_single_line_highlights`: the underline, its `┬` in the middle, then the
            // label hanging from it.
            let (left, right) = (start - offset, end - offset);
            let middle = (left + right) / 2;
            push_no_linum(out, linum_width);
            push_repeated(out, " ", left);
            push_repeated(out, "─", middle - left);
            out.push('┬');
            push_repeated(out, "─", right - middle - 1);
            out.push('\n');
            push_no_linum(out, linum_width);
            push_repeated(out, " ", middle);
            out.push_str("╰── ");
            out.push_str(&label.message);
            out.push('\n');
        }
    }
    push_repeated(out, " ", linum_width + 2);
    out.push_str("╰────\n");
    if let Some(help) = help {
        out.push_str(help);
        out.push('\n');
    }
    true
}

/// miette's `write_no_linum`: the gutter of a line that is not the file's.
fn push_no_linum(out: &mut String, linum_width: usize) {
    out.push(' ');
    push_repeated(out, " ", linum_width);
    out.push_str(" · ");
}

fn push_repeated(out: &mut String, piece: &str, times: usize) {
    for _ in 0..times {
        out.push_str(piece);
    }
}

fn decimal_digits(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}
