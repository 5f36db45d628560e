//! Source files and spans.
//!
//! Takes the text of a spec and its display name; gives a [`SourceFile`] with a line index, and
//! [`Span`]s (a [`FileId`] plus a byte range) that every later stage uses to point into it.
//! Invariant: spans are byte offsets on UTF-8 character boundaries; line and column are computed
//! only when a diagnostic is rendered, never stored.

use std::ops::Range;

/// Identifies one source file in a [`SourceMap`]. A lone file checked on its own is `FileId(0)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileId(pub u32);

/// A byte range in one source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, range: Range<usize>) -> Span {
        Span {
            file,
            start: saturate(range.start),
            end: saturate(range.end.max(range.start)),
        }
    }

    /// An empty span at `offset`, for things that are missing (pointing where they should be).
    pub fn point(file: FileId, offset: usize) -> Span {
        Span::new(file, offset..offset)
    }

    pub fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }

    pub fn is_empty(self) -> bool {
        self.start == self.end
    }

    /// The same span, ending at `end` instead.
    pub fn with_end(self, end: u32) -> Span {
        Span {
            end: end.max(self.start),
            ..self
        }
    }

    /// The smallest span covering both. Both must be in the same file.
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

fn saturate(offset: usize) -> u32 {
    u32::try_from(offset).unwrap_or(u32::MAX)
}

/// One spec's text, its display name and its line index.
#[derive(Clone, Debug)]
pub struct SourceFile {
    id: FileId,
    name: String,
    text: String,
    lines: LineIndex,
}

/// A 1-based line and column; the column counts Unicode scalar values, as editors do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LineCol {
    pub line: usize,
    pub column: usize,
}

/// Where every line of a text starts, built once per file in one pass and shared by every
/// renderer and the language server, so that each position is a binary search rather than a
/// scan from the start of the file.
///
/// A line ends at `\n`, `\r\n` or a lone `\r`: the line breaks of YAML, of the language server
/// protocol and of miette's drawing alike, so every output counts the same lines.
#[derive(Clone, Debug, Default)]
pub struct LineIndex {
    /// Byte offset of the start of every line; always starts with 0.
    starts: Vec<u32>,
    /// The 0-based numbers of the lines holding a character beyond ASCII, sorted: on every
    /// other line a column is a byte difference, with no characters to count.
    non_ascii: Vec<u32>,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        let mut non_ascii = Vec::new();
        for (at, &byte) in bytes.iter().enumerate() {
            match byte {
                b'\n' => starts.push(saturate(at + 1)),
                b'\r' if bytes.get(at + 1) != Some(&b'\n') => starts.push(saturate(at + 1)),
                byte if !byte.is_ascii() => {
                    let line = saturate(starts.len() - 1);
                    if non_ascii.last() != Some(&line) {
                        non_ascii.push(line);
                    }
                }
                _ => {}
            }
        }
        LineIndex { starts, non_ascii }
    }

    /// How many lines the text has (an empty text has one, empty line).
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Never: every text has at least one line.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The 0-based line holding byte `offset`; an offset past the end is on the last line.
    pub fn line_of(&self, offset: usize) -> usize {
        self.starts
            .partition_point(|&start| start as usize <= offset)
            .saturating_sub(1)
    }

    /// The byte offset where the 0-based `line` starts, if the text has that line.
    pub fn line_start(&self, line: usize) -> Option<usize> {
        self.starts.get(line).map(|&start| start as usize)
    }

    /// Whether the 0-based `line` is all ASCII, so that its columns are byte differences.
    pub fn is_ascii(&self, line: usize) -> bool {
        u32::try_from(line).is_ok_and(|line| self.non_ascii.binary_search(&line).is_err())
    }
}

impl SourceFile {
    pub fn new(id: FileId, name: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let text = text.into();
        let lines = LineIndex::new(&text);
        SourceFile {
            id,
            name: name.into(),
            text,
            lines,
        }
    }

    pub fn id(&self) -> FileId {
        self.id
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The file's line index, built when the file was.
    pub fn lines(&self) -> &LineIndex {
        &self.lines
    }

    pub fn span(&self, range: Range<usize>) -> Span {
        Span::new(self.id, range)
    }

    /// The whole file's span.
    pub fn full_span(&self) -> Span {
        self.span(0..self.text.len())
    }

    /// The text a span covers; empty when the span does not fit this file.
    pub fn slice(&self, span: Span) -> &str {
        self.text.get(span.range()).unwrap_or("")
    }

    /// The 1-based line and character column of a byte offset (clamped to the file).
    pub fn line_col(&self, offset: usize) -> LineCol {
        let (line, line_start, offset) = self.locate(offset);
        let column = if self.lines.is_ascii(line) {
            offset - line_start
        } else {
            self.text
                .get(line_start..offset)
                .map_or(0, |prefix| prefix.chars().count())
        };
        LineCol {
            line: line + 1,
            column: column + 1,
        }
    }

    /// The 1-based UTF-16 column of a byte offset, for clients such as the LSP and SARIF viewers.
    pub fn utf16_column(&self, offset: usize) -> usize {
        let (line, line_start, offset) = self.locate(offset);
        let column = if self.lines.is_ascii(line) {
            offset - line_start
        } else {
            self.text
                .get(line_start..offset)
                .map_or(0, |prefix| prefix.encode_utf16().count())
        };
        column + 1
    }

    /// The 0-based line of an offset, the byte where that line starts, and the offset itself
    /// clamped to the file and down to a character boundary.
    fn locate(&self, offset: usize) -> (usize, usize, usize) {
        let offset = self.floor_char_boundary(offset.min(self.text.len()));
        let line = self.lines.line_of(offset);
        let line_start = self.lines.line_start(line).unwrap_or(0).min(offset);
        (line, line_start, offset)
    }

    fn floor_char_boundary(&self, mut offset: usize) -> usize {
        while offset > 0 && !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    }
}

/// Every file of one run, addressed by [`FileId`].
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    /// Adds a file and returns it with its new id.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> &SourceFile {
        let id = FileId(saturate(self.files.len()));
        self.files.push(SourceFile::new(id, name, text));
        self.files.last().expect("a file was just pushed")
    }

    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0 as usize)
    }

    pub fn iter(&self) -> impl Iterator<Item = &SourceFile> {
        self.files.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters_not_bytes() {
        let file = SourceFile::new(FileId(0), "t", "a: é\nb: \"xé\"\n");
        let offset = file.text().find("xé").unwrap_or_default();
        assert_eq!(file.line_col(offset), LineCol { line: 2, column: 5 });
        let after = offset + "xé".len();
        assert_eq!(file.line_col(after), LineCol { line: 2, column: 7 });
        assert_eq!(file.line_col(0), LineCol { line: 1, column: 1 });
    }

    #[test]
    fn utf16_column_counts_surrogate_pairs() {
        let file = SourceFile::new(FileId(0), "t", "k: \"😀x\"");
        let offset = file.text().find('x').unwrap_or_default();
        assert_eq!(file.line_col(offset).column, 6);
        assert_eq!(file.utf16_column(offset), 7);
    }

    #[test]
    fn a_lone_carriage_return_ends_a_line_as_in_yaml() {
        let file = SourceFile::new(FileId(0), "t", "a: 1\rb: 2\r\nc: 3\n");
        let at = |needle: &str| file.line_col(file.text().find(needle).unwrap_or_default());
        assert_eq!(at("b"), LineCol { line: 2, column: 1 });
        assert_eq!(at("c"), LineCol { line: 3, column: 1 });
        assert_eq!(at("2"), LineCol { line: 2, column: 4 });
    }

    #[test]
    fn only_lines_beyond_ascii_count_characters() {
        let file = SourceFile::new(FileId(0), "t", "ab\né: x\ncd\n");
        assert!(file.lines().is_ascii(0));
        assert!(!file.lines().is_ascii(1));
        assert!(file.lines().is_ascii(2));
        let x = file.text().find('x').unwrap_or_default();
        assert_eq!(file.line_col(x), LineCol { line: 2, column: 4 });
        assert_eq!(file.utf16_column(x), 4);
    }

    #[test]
    fn offsets_past_the_end_are_clamped() {
        let file = SourceFile::new(FileId(0), "t", "ab\n");
        assert_eq!(file.line_col(99), LineCol { line: 2, column: 1 });
        assert_eq!(file.slice(file.span(1..99)), "");
    }
}
