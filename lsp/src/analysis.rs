//! One document, checked: its text, what the compiler made of it, and the conversions between
//! the compiler's byte offsets and the protocol's UTF-16 positions.
//!
//! Every feature of the server is a function of an [`Analysis`]; none parses anything itself.
//! Positions go through the compiler's [`LineIndex`] of the file, the one every renderer of
//! `stratumc` uses: a binary search per conversion, never a scan of the text.
//! Invariant: an `Analysis` is never edited; a new text gets a new one, so a feature never sees
//! positions of one text applied to another.

use stratum_compiler::source::{FileId, LineIndex, SourceFile, SourceMap, Span};
use stratum_compiler::{Compilation, check_bytes};
use tower_lsp_server::ls_types::{Position, Range};

/// A document and its compilation.
#[derive(Debug)]
pub struct Analysis {
    /// The compiler's view of the text (empty when the bytes were refused).
    pub sources: SourceMap,
    pub compilation: Compilation,
    /// The document's text, as the client sent it.
    pub text: String,
    /// A line index of `text` for a text the compiler did not keep (one over 16 MiB is checked
    /// as empty); otherwise the file's own index serves.
    own_lines: Option<LineIndex>,
    /// Every definition and reference, built on first use.
    index: std::sync::OnceLock<crate::index::Index>,
}

impl Analysis {
    /// Checks `text` as the file `name`.
    pub fn new(name: &str, text: &str) -> Analysis {
        let mut sources = SourceMap::new();
        let compilation = check_bytes(&mut sources, name, text.as_bytes());
        let kept = sources
            .get(compilation.file)
            .is_some_and(|file| file.text() == text);
        Analysis {
            sources,
            compilation,
            text: text.to_owned(),
            own_lines: (!kept).then(|| LineIndex::new(text)),
            index: std::sync::OnceLock::new(),
        }
    }

    /// The occurrence index of the document, built once.
    pub fn index(&self) -> &crate::index::Index {
        self.index.get_or_init(|| crate::index::Index::new(self))
    }

    /// The checked file.
    pub fn file(&self) -> Option<&SourceFile> {
        self.sources.get(self.compilation.file)
    }

    /// The file id spans of this document carry.
    pub fn file_id(&self) -> FileId {
        self.compilation.file
    }

    /// The line index of the text.
    fn lines(&self) -> &LineIndex {
        self.own_lines
            .as_ref()
            .or_else(|| self.file().map(SourceFile::lines))
            .expect("an analysis keeps its file's text or an index of its own")
    }

    /// The byte offset of a protocol position, clamped to its line and to the text.
    pub fn offset(&self, position: Position) -> usize {
        offset(self.lines(), &self.text, position)
    }

    /// The protocol position of a byte offset.
    pub fn position(&self, offset: usize) -> Position {
        position(self.lines(), &self.text, offset)
    }

    /// The protocol range of a span.
    pub fn range(&self, span: Span) -> Range {
        Range {
            start: self.position(span.start as usize),
            end: self.position(span.end as usize),
        }
    }

    /// The text a span covers; empty when it does not fit.
    pub fn slice(&self, span: Span) -> &str {
        self.text.get(span.range()).unwrap_or("")
    }
}

/// The analysis of a spec that must check clean, for tests: they assert against a spec whose
/// every name resolves.
#[cfg(test)]
pub(crate) fn clean(text: &str) -> Analysis {
    let analysis = Analysis::new("spec.stratum.yaml", text);
    assert!(
        analysis.compilation.diagnostics.is_empty(),
        "{:#?}",
        analysis.compilation.diagnostics
    );
    analysis
}

/// The byte offset of `position` in `text`: a character past the end of its line is the
/// line's end (before its line break), a line past the end is the end of the text, and a
/// position inside a surrogate pair is the start of that character.
pub fn offset(lines: &LineIndex, text: &str, position: Position) -> usize {
    let line_idx = position.line as usize;
    let Some(start) = lines.line_start(line_idx) else {
        return text.len();
    };
    let end = lines.line_start(line_idx + 1).unwrap_or(text.len());
    let line = text.get(start..end).unwrap_or("");
    let line = line.trim_end_matches(['\n', '\r']);
    if lines.is_ascii(line_idx) {
        return start + line.len().min(position.character as usize);
    }
    let mut units = 0u32;
    for (at, c) in line.char_indices() {
        let width = c.len_utf16() as u32;
        if units + width > position.character {
            return start + at;
        }
        units += width;
    }
    start + line.len()
}

/// The position of a byte offset in `text` (clamped to the text, and down to a character
/// boundary).
pub fn position(lines: &LineIndex, text: &str, offset: usize) -> Position {
    let mut offset = offset.min(text.len());
    while offset > 0 && !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let line = lines.line_of(offset);
    let start = lines.line_start(line).unwrap_or(0).min(offset);
    let character = if lines.is_ascii(line) {
        offset - start
    } else {
        text.get(start..offset)
            .map_or(0, |prefix| prefix.encode_utf16().count())
    };
    Position {
        line: u32::try_from(line).unwrap_or(u32::MAX),
        character: u32::try_from(character).unwrap_or(u32::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) {
        let index = LineIndex::new(text);
        for (offset, _) in text.char_indices().chain([(text.len(), ' ')]) {
            // Between `\r` and `\n` is no position at all.
            if text
                .get(..offset)
                .is_some_and(|before| before.ends_with('\r'))
                && text
                    .get(offset..)
                    .is_some_and(|after| after.starts_with('\n'))
            {
                continue;
            }
            let position = position(&index, text, offset);
            assert_eq!(
                super::offset(&index, text, position),
                offset,
                "{text:?} at {offset}"
            );
        }
    }

    #[test]
    fn positions_count_utf16_units() {
        let text = "a: \"é😀x\"\nb: 1\n";
        let index = LineIndex::new(text);
        let x = text.find('x').unwrap_or_default();
        // `a: "` is 4 units, `é` 1, `😀` 2.
        assert_eq!(position(&index, text, x), Position::new(0, 7));
        assert_eq!(offset(&index, text, Position::new(0, 7)), x);
        assert_eq!(
            position(&index, text, text.find('b').unwrap_or_default()),
            Position::new(1, 0)
        );
        round_trip(text);
    }

    #[test]
    fn out_of_range_positions_are_clamped() {
        let text = "ab\r\ncd\rxy";
        let index = LineIndex::new(text);
        assert_eq!(
            offset(&index, text, Position::new(0, 99)),
            2,
            "before the line break"
        );
        assert_eq!(offset(&index, text, Position::new(2, 1)), text.len() - 1);
        assert_eq!(offset(&index, text, Position::new(9, 0)), text.len());
        round_trip(text);
    }

    #[test]
    fn a_position_inside_a_surrogate_pair_is_the_character() {
        let text = "😀b";
        let index = LineIndex::new(text);
        assert_eq!(offset(&index, text, Position::new(0, 1)), 0);
        assert_eq!(offset(&index, text, Position::new(0, 2)), 4);
    }
}
