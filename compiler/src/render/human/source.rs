//! A source file as miette reads it, through the file's [`LineIndex`].
//!
//! miette asks for the lines around each label, once per label and again for each merged
//! window and each header. Its own `SourceCode` for `str` walks the text from the first byte
//! to the end of the window every time, so a file's many diagnostics cost diagnostics × file
//! size. [`window`] finds the same window by binary search over the index instead: its cost is
//! the lines it returns. It reproduces `str`'s answer exactly (the window's bytes, first line,
//! column and line count), so the drawing does not change; a test compares the two on every
//! span of a set of awkward texts.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use miette::{MietteError, MietteSpanContents, SourceCode, SourceSpan, SpanContents};

use crate::source::{LineIndex, SourceFile};

/// A file named for the report's header, with the header's column counted in characters
/// (miette's own `str` source counts bytes, which is wrong after non-ASCII text).
pub(super) struct Source<'a> {
    pub(super) file: &'a SourceFile,
    /// How many bytes of the file the reads so far have walked through, for the test that
    /// keeps each read proportional to the lines it returns.
    pub(super) bytes_read: AtomicUsize,
}

impl<'a> Source<'a> {
    pub(super) fn new(file: &'a SourceFile) -> Source<'a> {
        Source {
            file,
            bytes_read: AtomicUsize::new(0),
        }
    }
}

impl SourceCode for Source<'_> {
    fn read_span<'b>(
        &'b self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'b> + 'b>, MietteError> {
        let text = self.file.text();
        let found = window(
            text,
            self.file.lines(),
            span,
            context_lines_before,
            context_lines_after,
        )?;
        let data = text
            .as_bytes()
            .get(found.range.clone())
            .ok_or(MietteError::OutOfBounds)?;
        self.bytes_read.fetch_add(data.len(), Ordering::Relaxed);
        let column = if context_lines_before == 0 && context_lines_after == 0 {
            self.file.line_col(span.offset()).column - 1
        } else {
            found.column
        };
        Ok(Box::new(MietteSpanContents::new_named(
            self.file.name().to_owned(),
            data,
            (found.range.start, found.range.len()).into(),
            found.line,
            column,
            found.line_count,
        )))
    }
}

/// The lines miette draws around a span, as `str`'s `read_span` delimits them.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Window {
    /// The window's bytes: from the start of the first context line (or the span's start,
    /// without context before) to just past the last context line's break.
    pub(super) range: Range<usize>,
    /// The 0-based line the window starts on.
    pub(super) line: usize,
    /// The window's first column in bytes; 0 unless it starts at the span itself.
    pub(super) column: usize,
    /// The line breaks from the start of the file to the end of the window. miette compares
    /// it with the next label's line to decide whether two windows merge into one, so it must
    /// be exactly `str`'s count, odd as it is.
    pub(super) line_count: usize,
}

/// `str`'s window around `span`, with `before` and `after` lines of context, found through
/// the line index in O(log lines + window).
///
/// `str`'s walk, restated: the span ends at its last byte (`start + len - 1`; an empty span at
/// the byte before it); a `\r` of a `\r\n` is never visited, so an end there moves to its
/// `\n`. Without lines after, the window stops just past that end; with `after` lines, it runs
/// on past the first line break after the end and `after` more (or to the end of the file).
/// Before the span it keeps the starts of the last `before` lines. A span ending just past
/// the file still reads to the end; one further out is out of bounds.
pub(super) fn window(
    text: &str,
    lines: &LineIndex,
    span: &SourceSpan,
    before: usize,
    after: usize,
) -> Result<Window, MietteError> {
    let bytes = text.as_bytes();
    let start = span.offset();
    let last = start.saturating_add(span.len()).saturating_sub(1);
    // The last byte the walk visits before it starts counting lines after the span.
    let last = match bytes.get(last) {
        None if last == bytes.len() => None,
        None => return Err(MietteError::OutOfBounds),
        Some(b'\r') if bytes.get(last + 1) == Some(&b'\n') => Some(last + 1),
        Some(_) => Some(last),
    };
    let end = match last {
        None => bytes.len(),
        Some(last) if after == 0 => last + 1,
        // Line `line_of(last + 1) + 1` starts after the first break past `last`.
        Some(last) => lines
            .line_start(lines.line_of(last + 1) + 1 + after)
            .unwrap_or(bytes.len()),
    };
    let line = lines.line_of(start).saturating_sub(before);
    let (window_start, column) = if before > 0 {
        (lines.line_start(line).unwrap_or(0), 0)
    } else if after > 0 && last.is_some_and(|last| lines.line_of(end) > lines.line_of(last + 1)) {
        // The walk resets its column at every line break after the span.
        (start, 0)
    } else {
        (start, bytes_into_line(bytes, lines, start))
    };
    if window_start > end {
        return Err(MietteError::OutOfBounds);
    }
    Ok(Window {
        range: window_start..end,
        line,
        column,
        // Every line starting at or before `end` follows a break before it.
        line_count: lines.line_of(end),
    })
}

/// The bytes between the start of `start`'s line and `start`, as `str`'s walk counts them: the
/// `\r` of a `\r\n` whose `\n` is at `start` is not visited, so not counted.
fn bytes_into_line(bytes: &[u8], lines: &LineIndex, start: usize) -> usize {
    let line_start = lines.line_start(lines.line_of(start)).unwrap_or(0);
    let split_crlf = start
        .checked_sub(1)
        .and_then(|at| bytes.get(at))
        .is_some_and(|&byte| byte == b'\r')
        && bytes.get(start) == Some(&b'\n');
    start.saturating_sub(line_start) - usize::from(split_crlf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window from the index is `str`'s, for every span (empty ones included) of texts
    /// with every kind of line break, at the edges, and for every amount of context.
    #[test]
    fn windows_are_those_of_miettes_str_source() {
        let texts = [
            "",
            "a",
            "\n",
            "\n\n",
            "ab\ncd",
            "ab\ncd\n",
            "a\r\nb\r\n",
            "\r\n\r\nx",
            "a\rb\r",
            "a\r\rb\n\r",
            "one\ntwo\r\nthree\rfour\n\nsix é\n seven\neight",
        ];
        for text in texts {
            let lines = LineIndex::new(text);
            for start in 0..=text.len() {
                for len in 0..=text.len() + 1 - start {
                    let span = SourceSpan::from((start, len));
                    for before in 0..3 {
                        for after in 0..3 {
                            let case = format!("{text:?} {start}+{len} ({before}, {after})");
                            let ours = window(text, &lines, &span, before, after);
                            let theirs = text.read_span(&span, before, after);
                            match (ours, theirs) {
                                (Ok(ours), Ok(theirs)) => {
                                    let theirs = Window {
                                        range: theirs.span().offset()
                                            ..theirs.span().offset() + theirs.span().len(),
                                        line: theirs.line(),
                                        column: theirs.column(),
                                        line_count: theirs.line_count(),
                                    };
                                    assert_eq!(ours, theirs, "{case}");
                                }
                                (Err(_), Err(_)) => {}
                                (ours, theirs) => panic!(
                                    "{case}: ours {ours:?}, str's {:?}",
                                    theirs.map(|contents| *contents.span())
                                ),
                            }
                        }
                    }
                }
            }
        }
    }
}
