//! Positions inside YAML scalars.
//!
//! Takes the whole source text, the byte range of one scalar token as the parser reported it, the
//! scalar's style and the value the parser decoded from it; gives a [`ScalarMap`] that turns a byte
//! range of the decoded value into the byte range of the source text that produced it. Later
//! stages parse expression strings such as `ensure: ["result.confdence > 0.7"]` from the decoded
//! value, so this is what lets a diagnostic underline exactly `confdence` in the file, whatever
//! the quoting, escaping, folding or block indentation of the scalar.
//!
//! Invariant: a map is exact only when re-decoding the source text according to the scalar style
//! reproduces the parser's value byte for byte. Otherwise it falls back to mapping every range onto
//! the whole token, so a gap in this module costs precision but never gives a wrong position.
//!
//! The re-decoding follows `saphyr-parser` 0.3 (which implements YAML 1.2), quirks included, and
//! expects its token spans:
//! - plain scalars span exactly their text;
//! - quoted scalars span from the opening quote over the closing one and on over any blanks and
//!   comment after it (a span cut at the closing quote does as well);
//! - block scalars (`|`, `>`) span from the first content character of their first content line
//!   (after its indentation) to wherever the scanner stopped after the content: past trailing
//!   empty lines and part of the next line's indentation. The header and the empty lines between
//!   it and the content lie before the span and are found by scanning backwards. Without content
//!   lines the span is empty, at the next token; or, at the end of the input, it runs from the
//!   `|`/`>` indicator to the end;
//! - a scalar with properties (`&anchor`, `!tag`) has a span that starts at them instead. They
//!   are skipped, and a block span that then starts at its header is handled too, so callers may
//!   pass the parser's span or cut the properties off.
//!
//! Empty plain scalars the parser makes up for missing values (`{a}`) can carry the span of a
//! neighbouring token; those get the fallback.

use std::ops::Range;

/// How a scalar was written: our own copy of `saphyr_parser::ScalarStyle` (converted with `From`),
/// so that the AST and later stages do not depend on the YAML parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarStyle {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
    Folded,
}

impl From<saphyr_parser::ScalarStyle> for ScalarStyle {
    fn from(style: saphyr_parser::ScalarStyle) -> ScalarStyle {
        match style {
            saphyr_parser::ScalarStyle::Plain => ScalarStyle::Plain,
            saphyr_parser::ScalarStyle::SingleQuoted => ScalarStyle::SingleQuoted,
            saphyr_parser::ScalarStyle::DoubleQuoted => ScalarStyle::DoubleQuoted,
            saphyr_parser::ScalarStyle::Literal => ScalarStyle::Literal,
            saphyr_parser::ScalarStyle::Folded => ScalarStyle::Folded,
        }
    }
}

/// Maps byte offsets in a decoded scalar value to byte offsets in the source text.
///
/// Source offsets are byte offsets into the whole source text. A decoded range on character
/// boundaries maps to a source range on character boundaries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalarMap {
    repr: Repr,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Repr {
    /// Decoded byte `i` is source byte `base + i`. The common case: single-line plain scalars,
    /// single-line quoted scalars without escapes, one-line literal blocks.
    Shifted { base: u32, len: u32 },
    /// Where decoded byte `i` came from, one entry per decoded byte, and the source position just
    /// after the content, which is where an empty range at the end of the value points.
    /// Entries never go backwards, so a range's first and last entries bound all between them.
    Table { units: Box<[SourceUnit]>, end: u32 },
    /// Re-decoding disagreed with the parser: every range maps to the whole token.
    Whole { start: u32, end: u32 },
}

/// The source bytes one decoded byte came from: the character itself for text copied verbatim
/// (one byte each), the whole escape for an escaped character, the line break for a folded space
/// or a kept `\n`. Empty for the `\n` the parser adds to a final line cut off by the end of input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SourceUnit {
    start: u32,
    end: u32,
}

impl ScalarMap {
    /// `src` is the whole source text; `token` is the scalar's byte range as the parser reports it
    /// (see the module docs); `value` is the decoded value the parser produced. Re-decodes
    /// `src[token]` according to `style`; if the re-decoded string != `value` (or anything is out
    /// of range), falls back to mapping every offset onto the whole token span. Never panics on any
    /// input.
    pub fn new(src: &str, token: Range<usize>, style: ScalarStyle, value: &str) -> ScalarMap {
        // Offsets are stored as u32 (like `Span`); larger texts only get the fallback.
        let fits = u32::try_from(src.len()).is_ok();
        if fits && let Some(map) = verbatim(src, &token, style, value) {
            return map;
        }
        ScalarMap::decoded(src, token, style, value)
    }

    /// [`ScalarMap::new`] by re-decoding, whatever the scalar.
    fn decoded(src: &str, token: Range<usize>, style: ScalarStyle, value: &str) -> ScalarMap {
        let fits = u32::try_from(src.len()).is_ok();
        let decoded = if fits && src.get(token.clone()).is_some() {
            decode(src, token.clone(), style, value)
        } else {
            None
        };
        match decoded {
            Some(decoded) if decoded.text == value => decoded.into_map(),
            _ => ScalarMap::whole(src, token),
        }
    }

    /// Source byte range for a byte range of the decoded value. A non-empty decoded range maps to
    /// the smallest source range covering the source bytes of all its decoded bytes (an escape
    /// like `\u00e9` that decodes to 2 bytes maps to the whole 6-char escape). An empty range maps
    /// to an empty range at the source position of that offset. Offsets past the end are clamped.
    /// In the fallback, any range maps to the whole token.
    pub fn source_range(&self, decoded: Range<usize>) -> Range<usize> {
        match &self.repr {
            Repr::Whole { start, end } => widen(*start)..widen(*end),
            Repr::Shifted { base, len } => {
                let (start, end) = clamp_range(decoded, widen(*len));
                widen(*base) + start..widen(*base) + end
            }
            Repr::Table { units, end } => {
                let (first, past_last) = clamp_range(decoded, units.len());
                let start = widen(units.get(first).map_or(*end, |unit| unit.start));
                // Entries never go backwards, so the last byte's unit ends the range.
                let last = past_last.checked_sub(1).filter(|&last| last >= first);
                let end = last
                    .and_then(|last| units.get(last))
                    .map_or(start, |unit| widen(unit.end));
                start..end.max(start)
            }
        }
    }

    /// Whether the map is exact (false only in the fallback).
    pub fn is_exact(&self) -> bool {
        !matches!(self.repr, Repr::Whole { .. })
    }

    /// The fallback: the token, clamped to the source text.
    fn whole(src: &str, token: Range<usize>) -> ScalarMap {
        let start = token.start.min(src.len());
        let end = token.end.clamp(start, src.len());
        ScalarMap {
            repr: Repr::Whole {
                start: narrow(start),
                end: narrow(end),
            },
        }
    }
}

/// The map of a flow scalar written on one line exactly as its value, without escapes or
/// properties: the shifted copy that decoding would find, without decoding (most scalars are
/// such). `None` for any other scalar, which is decoded.
fn verbatim(src: &str, token: &Range<usize>, style: ScalarStyle, value: &str) -> Option<ScalarMap> {
    let text = src.get(token.clone())?;
    let base = match style {
        ScalarStyle::Plain => {
            let copy =
                text == value && !value.contains(['\n', '\r']) && !text.starts_with(['!', '&']);
            copy.then_some(token.start)?
        }
        ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => {
            let (quote, special): (char, &[char]) = match style {
                ScalarStyle::SingleQuoted => ('\'', &['\'', '\n', '\r']),
                _ => ('"', &['"', '\\', '\n', '\r']),
            };
            let after = text
                .strip_prefix(quote)?
                .strip_prefix(value)?
                .strip_prefix(quote)?;
            if value.contains(special) || !is_blanks_then_comment(after) {
                return None;
            }
            token.start.checked_add(1)?
        }
        ScalarStyle::Literal | ScalarStyle::Folded => return None,
    };
    Some(ScalarMap {
        repr: Repr::Shifted {
            base: narrow(base),
            len: narrow(value.len()),
        },
    })
}

/// Clamps a decoded range to `0..len`, never letting it end before it starts.
fn clamp_range(range: Range<usize>, len: usize) -> (usize, usize) {
    let start = range.start.min(len);
    (start, range.end.clamp(start, len))
}

fn widen(offset: u32) -> usize {
    offset as usize
}

/// Only called once the source is known to fit in u32.
fn narrow(offset: usize) -> u32 {
    u32::try_from(offset).unwrap_or(u32::MAX)
}

/// A re-decoded scalar: the text and where each of its bytes came from.
struct Decoded {
    text: String,
    units: Vec<SourceUnit>,
    /// The source position just after the content.
    end: usize,
}

impl Decoded {
    fn new(end: usize) -> Decoded {
        Decoded {
            text: String::new(),
            units: Vec::new(),
            end,
        }
    }

    /// A character copied from the source: each byte maps to its own source byte.
    fn push_verbatim(&mut self, c: char, at: usize) {
        self.text.push(c);
        self.units
            .extend((at..at + c.len_utf8()).map(|byte| SourceUnit {
                start: narrow(byte),
                end: narrow(byte + 1),
            }));
    }

    /// A character the source spells differently (an escape, a folded break): every byte maps to
    /// the whole spelling.
    fn push_spelled(&mut self, c: char, spelling: Range<usize>) {
        self.text.push(c);
        let unit = SourceUnit {
            start: narrow(spelling.start),
            end: narrow(spelling.end),
        };
        self.units.extend(std::iter::repeat_n(unit, c.len_utf8()));
    }

    /// One `\n` per line break, each mapped to its break.
    fn push_breaks(&mut self, breaks: &[Range<usize>]) {
        for line_break in breaks {
            self.push_spelled('\n', line_break.clone());
        }
    }

    /// The compact form when the decoded text is a plain copy of one source slice.
    fn into_map(self) -> ScalarMap {
        let len = self.units.len();
        let base = self
            .units
            .first()
            .map_or(self.end, |unit| widen(unit.start));
        let is_shifted_copy = self.end == base + len
            && self
                .units
                .iter()
                .zip(base..)
                .all(|(unit, byte)| widen(unit.start) == byte && widen(unit.end) == byte + 1);
        let repr = if is_shifted_copy {
            Repr::Shifted {
                base: narrow(base),
                len: narrow(len),
            }
        } else {
            Repr::Table {
                units: self.units.into_boxed_slice(),
                end: narrow(self.end),
            }
        };
        ScalarMap { repr }
    }
}

/// Re-decodes one scalar; `None` when the source does not have the expected shape.
fn decode(src: &str, token: Range<usize>, style: ScalarStyle, value: &str) -> Option<Decoded> {
    // No flow scalar starts with `!` or `&`: those start properties, which the span includes.
    let flow_token = || skip_properties(src, token.clone())..token.end;
    match style {
        ScalarStyle::Plain => decode_flow(src, flow_token(), Quoting::Plain),
        ScalarStyle::SingleQuoted => decode_flow(src, flow_token(), Quoting::Single),
        ScalarStyle::DoubleQuoted => decode_flow(src, flow_token(), Quoting::Double),
        ScalarStyle::Literal => decode_block(src, token, BlockStyle::Literal, value),
        ScalarStyle::Folded => decode_block(src, token, BlockStyle::Folded, value),
    }
}

/// Skips the node properties (`!tag`, `&anchor`) a token starts with, and the blanks, comments
/// and line breaks after them: the parser's span of a scalar with properties starts at them.
fn skip_properties(src: &str, token: Range<usize>) -> usize {
    let mut cursor = Cursor {
        text: src,
        pos: token.start,
        limit: token.end,
    };
    while matches!(cursor.peek(), Some('!' | '&')) {
        cursor.skip_while(|c| !is_blank(c) && !is_break(c));
        cursor.skip_separation();
    }
    cursor.pos
}

/// Walks source text by characters, tracking a byte position. It may look at everything in `text`
/// but only consume up to `limit`, so decoding never runs past the token the parser reported.
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
    limit: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<char> {
        self.text.get(self.pos..)?.chars().next()
    }

    fn peek_second(&self) -> Option<char> {
        self.text.get(self.pos..)?.chars().nth(1)
    }

    fn at_limit(&self) -> bool {
        self.pos >= self.limit
    }

    /// Consumes the next character if there is one within the limit; gives it and its position.
    fn bump(&mut self) -> Option<(char, usize)> {
        let c = self.peek()?;
        let at = self.pos;
        let next = at.checked_add(c.len_utf8())?;
        if next > self.limit {
            return None;
        }
        self.pos = next;
        Some((c, at))
    }

    /// Consumes a line break (`\r\n`, `\r` or `\n`, as the parser accepts) and gives its extent.
    fn take_break(&mut self) -> Option<Range<usize>> {
        let start = self.pos;
        match self.bump()?.0 {
            '\r' if self.peek() == Some('\n') => {
                self.bump()?;
            }
            '\r' | '\n' => {}
            _ => return None,
        }
        Some(start..self.pos)
    }

    /// Consumes characters while `keep` holds for them, up to the limit.
    fn skip_while(&mut self, keep: impl Fn(char) -> bool) {
        while self.peek().is_some_and(&keep) && self.bump().is_some() {}
    }

    /// Consumes blanks, line breaks and comments, up to the limit.
    fn skip_separation(&mut self) {
        while !self.at_limit() {
            match self.peek() {
                Some('#') => self.skip_while(|c| !is_break(c)),
                Some(c) if is_blank(c) || is_break(c) => {
                    self.skip_while(|c| is_blank(c) || is_break(c));
                }
                _ => return,
            }
        }
    }

    fn next_is_break(&self) -> bool {
        self.peek().is_some_and(is_break)
    }

    fn next_is_blank(&self) -> bool {
        self.peek().is_some_and(is_blank)
    }
}

fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\r')
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t')
}

/// What the parser accepts as block scalar content: not a break, not NUL (its end-of-input
/// marker), not a byte order mark.
fn is_content_char(c: char) -> bool {
    !matches!(c, '\n' | '\r' | '\0' | '\u{FEFF}')
}

// ---------------------------------------------------------------------------------------------
// Flow scalars: plain, single-quoted, double-quoted.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Quoting {
    Plain,
    Single,
    Double,
}

/// Decodes a flow scalar: runs of non-blank characters (with `''` or backslash escapes inside
/// quotes) separated by whitespace, which is kept within a line and folded across lines.
fn decode_flow(src: &str, token: Range<usize>, quoting: Quoting) -> Option<Decoded> {
    // Looking stops at the end of the token, so decoding cannot run into the next one.
    let mut cursor = Cursor {
        text: src.get(..token.end)?,
        pos: token.start,
        limit: token.end,
    };
    let closing_quote = quoting.quote();
    if let Some(quote) = closing_quote
        && cursor.bump()?.0 != quote
    {
        return None;
    }
    let mut out = Decoded::new(token.end);
    let mut trailing_breaks = Vec::new();
    loop {
        let ended_in_escaped_break = decode_flow_run(&mut cursor, quoting, &mut out)?;
        if cursor.at_limit() || cursor.peek() == closing_quote {
            break;
        }
        fold_flow_whitespace(
            &mut cursor,
            quoting,
            ended_in_escaped_break,
            &mut trailing_breaks,
            &mut out,
        )?;
    }
    if let Some(quote) = closing_quote {
        // The parser's span of a quoted scalar runs on over blanks and a comment after it.
        out.end = cursor.pos;
        if cursor.bump()?.0 != quote {
            return None;
        }
        let after_quote = cursor.text.get(cursor.pos..)?;
        if !is_blanks_then_comment(after_quote) {
            return None;
        }
    }
    Some(out)
}

impl Quoting {
    fn quote(self) -> Option<char> {
        match self {
            Quoting::Plain => None,
            Quoting::Single => Some('\''),
            Quoting::Double => Some('"'),
        }
    }
}

/// Whether `text` is blanks, optionally followed by a comment (which needs a blank before it).
fn is_blanks_then_comment(text: &str) -> bool {
    let after_blanks = text.trim_start_matches([' ', '\t']);
    let is_comment = after_blanks.len() < text.len() && after_blanks.starts_with('#');
    (after_blanks.is_empty() || is_comment) && !after_blanks.contains(['\n', '\r'])
}

/// Decodes characters up to the next blank, line break or closing quote. Returns whether the run
/// ended in a double-quoted escaped line break (`\` at the end of a line), which joins lines
/// without a space.
fn decode_flow_run(cursor: &mut Cursor<'_>, quoting: Quoting, out: &mut Decoded) -> Option<bool> {
    while let Some(c) = cursor.peek() {
        if is_blank(c) || is_break(c) {
            break;
        }
        match (quoting, c) {
            (Quoting::Single, '\'') if cursor.peek_second() == Some('\'') => {
                let start = cursor.pos;
                cursor.bump()?;
                cursor.bump()?;
                out.push_spelled('\'', start..cursor.pos);
            }
            (Quoting::Single, '\'') | (Quoting::Double, '"') => break,
            (Quoting::Double, '\\') if cursor.peek_second().is_some_and(is_break) => {
                cursor.bump()?;
                cursor.take_break()?;
                return Some(true);
            }
            (Quoting::Double, '\\') => {
                let start = cursor.pos;
                let escaped = decode_escape(cursor)?;
                out.push_spelled(escaped, start..cursor.pos);
            }
            _ => {
                let (c, at) = cursor.bump()?;
                out.push_verbatim(c, at);
            }
        }
    }
    Some(false)
}

/// Decodes one double-quoted escape sequence starting at the backslash.
fn decode_escape(cursor: &mut Cursor<'_>) -> Option<char> {
    cursor.bump()?;
    let (code, _) = cursor.bump()?;
    let hex_digits = match code {
        'x' => 2,
        'u' => 4,
        'U' => 8,
        _ => return single_char_escape(code),
    };
    let mut scalar_value: u32 = 0;
    for _ in 0..hex_digits {
        let digit = cursor.bump()?.0.to_digit(16)?;
        scalar_value = scalar_value.checked_mul(16)?.checked_add(digit)?;
    }
    char::from_u32(scalar_value)
}

/// The character a one-letter escape (`\n`, `\"`, `\_`, …) stands for.
fn single_char_escape(code: char) -> Option<char> {
    Some(match code {
        '0' => '\0',
        'a' => '\u{7}',
        'b' => '\u{8}',
        't' | '\t' => '\t',
        'n' => '\n',
        'v' => '\u{b}',
        'f' => '\u{c}',
        'r' => '\r',
        'e' => '\u{1b}',
        ' ' => ' ',
        '"' => '"',
        '/' => '/',
        '\\' => '\\',
        'N' => '\u{85}',
        '_' => '\u{a0}',
        'L' => '\u{2028}',
        'P' => '\u{2029}',
        _ => return None,
    })
}

/// Consumes the blanks and line breaks between two runs and emits what they decode to. Blanks
/// within a line are kept; at a line break the blanks before it and the indentation after it are
/// dropped, and the break becomes a space, or, when empty lines follow, one `\n` per empty line.
/// After an escaped line break there is no break to fold: only the empty lines count.
fn fold_flow_whitespace(
    cursor: &mut Cursor<'_>,
    quoting: Quoting,
    after_escaped_break: bool,
    trailing_breaks: &mut Vec<Range<usize>>,
    out: &mut Decoded,
) -> Option<()> {
    let mut in_line_break = after_escaped_break;
    let mut blanks: Option<Range<usize>> = None;
    let mut first_break: Option<Range<usize>> = None;
    trailing_breaks.clear();
    while let Some(c) = cursor.peek() {
        if is_blank(c) {
            let (_, at) = cursor.bump()?;
            if !in_line_break {
                let start = blanks.map_or(at, |run| run.start);
                blanks = Some(start..cursor.pos);
            }
        } else if c == '#' && in_line_break && quoting == Quoting::Plain {
            // A plain scalar never has a line starting with `#`: the parser ends it there, except
            // after tab indentation, where it skips the comment and reads the line as empty.
            while cursor.peek().is_some_and(|c| !is_break(c)) {
                cursor.bump()?;
            }
        } else if is_break(c) {
            let line_break = cursor.take_break()?;
            if in_line_break {
                trailing_breaks.push(line_break);
            } else {
                blanks = None;
                first_break = Some(line_break);
                in_line_break = true;
            }
        } else {
            break;
        }
    }
    match (first_break, in_line_break) {
        (Some(line_break), _) if trailing_breaks.is_empty() => {
            out.push_spelled(' ', line_break);
        }
        (_, true) => out.push_breaks(trailing_breaks),
        (_, false) => {
            for at in blanks.into_iter().flatten() {
                let blank = cursor.text.get(at..)?.chars().next()?;
                out.push_verbatim(blank, at);
            }
        }
    }
    Some(())
}

// ---------------------------------------------------------------------------------------------
// Block scalars: literal `|` and folded `>`.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum BlockStyle {
    Literal,
    Folded,
}

impl BlockStyle {
    fn indicator(self) -> char {
        match self {
            BlockStyle::Literal => '|',
            BlockStyle::Folded => '>',
        }
    }
}

/// What happens to the line breaks at the end of a block scalar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chomping {
    /// `-`: drop them all.
    Strip,
    /// Default: keep the one ending the last content line.
    Clip,
    /// `+`: keep them all.
    Keep,
}

/// Decodes a block scalar. Its span starts at the first content character, so the header is found
/// by scanning backwards. The header line can hold other `|`/`>` characters (in a key, in a
/// comment), so every spelling of a valid header on it is a candidate; candidates differ only in
/// chomping, which is tried in turn against the parser's value. Two chompings that decode to the
/// same text map it the same way, so the first match is right.
///
/// A span may also start at the header: the parser's own span when there is no content before the
/// end of input, and any span that begins with properties (`!!str |`), which the parser's span
/// then includes and a caller may have cut off.
fn decode_block(src: &str, token: Range<usize>, style: BlockStyle, value: &str) -> Option<Decoded> {
    if let Some(decoded) = decode_block_from_content(src, token.clone(), style, value) {
        return Some(decoded);
    }
    let header = skip_properties(src, token.clone())..token.end;
    if let Some(decoded) =
        decode_contentless_block(src, header.clone(), style).filter(|decoded| decoded.text == value)
    {
        return Some(decoded);
    }
    let content = first_content_after_header(src, header.start, value)?;
    decode_block_from_content(src, content..token.end, style, value)
}

/// Decodes a block scalar whose span starts at its first content character.
fn decode_block_from_content(
    src: &str,
    token: Range<usize>,
    style: BlockStyle,
    value: &str,
) -> Option<Decoded> {
    let layout = find_block_layout(src, token.start)?;
    let header_line = src.get(layout.header_line.clone())?;
    header_chompings(header_line, style)
        .into_iter()
        .flatten()
        .filter_map(|chomping| decode_block_body(src, token.clone(), style, chomping, &layout))
        .find(|decoded| decoded.text == value)
}

/// For a span that starts at the header, where the parser's span would start: the first content
/// line is the one after the header and as many empty lines as the value starts with `\n`s, and
/// its content starts where its indentation leaves as many leading spaces as the value's first
/// line has. The decoding that follows checks the guess.
fn first_content_after_header(src: &str, header: usize, value: &str) -> Option<usize> {
    let empty_lines = value.bytes().take_while(|&byte| byte == b'\n').count();
    let first_value_line = value.get(empty_lines..).filter(|line| !line.is_empty())?;
    let mut line = next_line_start(src, header)?;
    for _ in 0..empty_lines {
        line = next_line_start(src, line)?;
    }
    let count_spaces = |text: &str| text.bytes().take_while(|&byte| byte == b' ').count();
    let indentation = count_spaces(src.get(line..)?).checked_sub(count_spaces(first_value_line))?;
    Some(line + indentation)
}

/// Start of the line after the one holding `pos`.
fn next_line_start(src: &str, pos: usize) -> Option<usize> {
    let rest = src.get(pos..)?;
    let line_break = rest.find(['\n', '\r'])?;
    let break_len = if rest.get(line_break..)?.starts_with("\r\n") {
        2
    } else {
        1
    };
    Some(pos + line_break + break_len)
}

/// Where a block scalar's pieces are, found from its first content character.
struct BlockLayout {
    /// The line holding the `|`/`>` header, without its line break.
    header_line: Range<usize>,
    /// Just after the header line's break.
    content_start: usize,
    /// Start of the line holding the span's start.
    first_content_line: usize,
    /// The content indentation: the span starts at the first content line's indentation.
    indent: usize,
}

/// Scans back from the span start over its line's indentation and the empty (spaces-only) lines
/// above it to the header line.
fn find_block_layout(src: &str, span_start: usize) -> Option<BlockLayout> {
    let first_content_line = line_start(src, span_start);
    let indentation = src.get(first_content_line..span_start)?;
    if !is_spaces(indentation) {
        return None;
    }
    let mut line = first_content_line;
    loop {
        let (text, line_break) = previous_line(src, line)?;
        if !is_spaces(src.get(text.clone())?) {
            return Some(BlockLayout {
                header_line: text,
                content_start: line_break.end,
                first_content_line,
                indent: indentation.len(),
            });
        }
        line = text.start;
    }
}

fn is_spaces(text: &str) -> bool {
    text.bytes().all(|byte| byte == b' ')
}

/// Start of the line holding `pos`: just after the last line break before it.
fn line_start(src: &str, pos: usize) -> usize {
    src.get(..pos)
        .and_then(|before| before.rfind(['\n', '\r']))
        .map_or(0, |line_break| line_break + 1)
}

/// The line before the one starting at `start`: its text and its line break.
fn previous_line(src: &str, start: usize) -> Option<(Range<usize>, Range<usize>)> {
    let before = src.get(..start)?;
    let break_len = if before.ends_with("\r\n") {
        2
    } else if before.ends_with(['\n', '\r']) {
        1
    } else {
        return None;
    };
    let break_start = start.checked_sub(break_len)?;
    Some((
        line_start(src, break_start)..break_start,
        break_start..start,
    ))
}

/// The distinct chompings of every valid header spelling on the line, leftmost first.
fn header_chompings(line: &str, style: BlockStyle) -> [Option<Chomping>; 3] {
    let mut found = [None; 3];
    let mut count = 0;
    for (at, _) in line.match_indices(style.indicator()) {
        let Some(chomping) = line.get(at..).and_then(parse_header) else {
            continue;
        };
        if found.contains(&Some(chomping)) {
            continue;
        }
        if let Some(slot) = found.get_mut(count) {
            *slot = Some(chomping);
            count += 1;
        }
    }
    found
}

/// Parses a header from its indicator to the end of its line: the indicator; chomping and
/// indentation indicators in either order (`|2-`, `>+`, `|-1`); then only blanks, or blanks and
/// a comment. What precedes the indicator is not checked: a false candidate can only offer a
/// chomping, which the value check rejects or which maps the same as the real one. The
/// indentation indicator is not needed either: the content indentation is where the content
/// starts.
fn parse_header(header: &str) -> Option<Chomping> {
    let mut rest = header.chars().skip(1).peekable();
    let mut chomping = None;
    let mut has_indentation = false;
    for _ in 0..2 {
        match rest.peek() {
            Some('-') if chomping.is_none() => chomping = Some(Chomping::Strip),
            Some('+') if chomping.is_none() => chomping = Some(Chomping::Keep),
            Some('1'..='9') if !has_indentation => has_indentation = true,
            _ => break,
        }
        rest.next();
    }
    let mut separated = false;
    while rest.next_if(|&c| is_blank(c)).is_some() {
        separated = true;
    }
    match rest.next() {
        None => Some(chomping.unwrap_or(Chomping::Clip)),
        Some('#') if separated => Some(chomping.unwrap_or(Chomping::Clip)),
        Some(_) => None,
    }
}

/// Decodes a block scalar with content lines (or, when the span is empty, one whose content
/// lines are missing and whose span sits at the next token), as the parser's scanner does.
fn decode_block_body(
    src: &str,
    token: Range<usize>,
    style: BlockStyle,
    chomping: Chomping,
    layout: &BlockLayout,
) -> Option<Decoded> {
    let mut tail = BlockTail {
        column: layout.indent,
        last_break: None,
        empty_line_breaks: leading_empty_line_breaks(src, layout)?,
    };
    let mut cursor = Cursor {
        text: src,
        pos: token.start,
        limit: token.end,
    };
    let mut out = Decoded::new(token.start);
    if !token.is_empty() {
        decode_block_lines(&mut cursor, style, layout.indent, &mut tail, &mut out)?;
    }
    chomp_block(&cursor, chomping, layout.indent, &tail, &mut out);
    if cursor.pos != token.end {
        return None;
    }
    out.end = out.units.last().map_or(token.start, |unit| widen(unit.end));
    Some(out)
}

/// What chomping decides about once the content lines are read, and where the scanner is.
struct BlockTail {
    /// The scanner's column, in characters.
    column: usize,
    /// The break ending the last content line.
    last_break: Option<Range<usize>>,
    /// The breaks of the empty lines after it (or, before any content, after the header).
    empty_line_breaks: Vec<Range<usize>>,
}

/// The breaks of the spaces-only lines between the header and the first content line; each
/// becomes `\n` once content follows.
fn leading_empty_line_breaks(src: &str, layout: &BlockLayout) -> Option<Vec<Range<usize>>> {
    let mut breaks = Vec::new();
    let mut cursor = Cursor {
        text: src,
        pos: layout.content_start,
        limit: layout.first_content_line,
    };
    while !cursor.at_limit() {
        while cursor.peek() == Some(' ') {
            cursor.bump()?;
        }
        breaks.push(cursor.take_break()?);
    }
    Some(breaks)
}

/// The content lines, starting at the first content character. Each line's text is kept
/// verbatim without its indentation; the break before it is kept as `\n` (literal), or, in a
/// folded scalar between two lines that do not start with a blank, becomes a space when no empty
/// lines intervene and is dropped when some do (each empty line still gives `\n`). The break
/// after the last content line and the empty lines after it are left to chomping.
fn decode_block_lines(
    cursor: &mut Cursor<'_>,
    style: BlockStyle,
    indent: usize,
    tail: &mut BlockTail,
    out: &mut Decoded,
) -> Option<()> {
    let mut previous_starts_blank = false;
    while tail.column == indent && cursor.peek().is_some_and(is_content_char) {
        if indent == 0 && next_is_document_end(cursor) {
            break;
        }
        let starts_blank = cursor.next_is_blank();
        match tail.last_break.take() {
            Some(line_break)
                if style == BlockStyle::Folded && !previous_starts_blank && !starts_blank =>
            {
                if tail.empty_line_breaks.is_empty() {
                    out.push_spelled(' ', line_break);
                } else {
                    out.push_breaks(&tail.empty_line_breaks);
                }
            }
            line_break => {
                out.push_breaks(line_break.as_slice());
                out.push_breaks(&tail.empty_line_breaks);
            }
        }
        tail.empty_line_breaks.clear();
        previous_starts_blank = starts_blank;

        while cursor.peek().is_some_and(is_content_char) {
            let (c, at) = cursor.bump()?;
            out.push_verbatim(c, at);
            tail.column += 1;
        }
        if !cursor.next_is_break() {
            break;
        }
        tail.last_break = Some(cursor.take_break()?);
        tail.column = 0;
        skip_block_indentation(cursor, indent, tail)?;
    }
    Some(())
}

/// Skips up to `indent` spaces of each following line, collecting the breaks of empty lines.
fn skip_block_indentation(
    cursor: &mut Cursor<'_>,
    indent: usize,
    tail: &mut BlockTail,
) -> Option<()> {
    loop {
        while tail.column < indent && cursor.peek() == Some(' ') {
            cursor.bump()?;
            tail.column += 1;
        }
        if !cursor.next_is_break() {
            return Some(());
        }
        tail.empty_line_breaks.push(cursor.take_break()?);
        tail.column = 0;
    }
}

/// Applies chomping to the break after the last content line and the empty lines after it. Like
/// the parser, a last line cut off by the end of input still gets its `\n` unless stripped; that
/// `\n` has no source, so it maps to an empty range at the end of input, or, when kept empty
/// lines come after it in the value, at the first of them, so the map never goes backwards.
fn chomp_block(
    cursor: &Cursor<'_>,
    chomping: Chomping,
    indent: usize,
    tail: &BlockTail,
    out: &mut Decoded,
) {
    if chomping != Chomping::Strip {
        out.push_breaks(tail.last_break.as_slice());
        if is_end_of_input(cursor.text, cursor.pos) && tail.column >= indent.max(1) {
            let at = tail
                .empty_line_breaks
                .first()
                .filter(|_| chomping == Chomping::Keep)
                .map_or(cursor.pos, |line_break| line_break.start);
            out.push_spelled('\n', at..at);
        }
    }
    if chomping == Chomping::Keep {
        out.push_breaks(&tail.empty_line_breaks);
    }
}

/// Whether the parser sees the end of its input at `pos`: the real end, or a NUL character,
/// which it uses as its end marker.
fn is_end_of_input(src: &str, pos: usize) -> bool {
    src.get(pos..)
        .is_none_or(|rest| rest.is_empty() || rest.starts_with('\0'))
}

/// `...` followed by a blank, a break or the end ends a top-level block scalar.
fn next_is_document_end(cursor: &Cursor<'_>) -> bool {
    cursor.text.get(cursor.pos..).is_some_and(|rest| {
        rest.strip_prefix("...").is_some_and(|after| {
            after
                .chars()
                .next()
                .is_none_or(|c| is_blank(c) || is_break(c) || c == '\0')
        })
    })
}

/// A block scalar without content lines, with a span from its `|`/`>` indicator: the parser's
/// at the end of input, or one that starts at properties. Only `+` chomping keeps anything: the
/// breaks of the empty lines after the header.
fn decode_contentless_block(src: &str, token: Range<usize>, style: BlockStyle) -> Option<Decoded> {
    let mut cursor = Cursor {
        text: src,
        pos: token.start,
        limit: token.end,
    };
    if cursor.peek() != Some(style.indicator()) {
        return None;
    }
    while cursor.peek().is_some_and(|c| !is_break(c) && c != '\0') {
        cursor.bump()?;
    }
    let chomping = parse_header(src.get(token.start..cursor.pos)?)?;
    let header_has_break = cursor.next_is_break();
    if header_has_break {
        cursor.take_break()?;
    }
    let mut breaks = Vec::new();
    let mut last_line = cursor.pos;
    loop {
        while cursor.peek() == Some(' ') {
            cursor.bump()?;
        }
        if !cursor.next_is_break() {
            break;
        }
        breaks.push(cursor.take_break()?);
        last_line = cursor.pos;
    }
    if !cursor.at_limit() {
        return None;
    }
    let mut out = Decoded::new(token.start);
    if chomping == Chomping::Keep {
        let at_end = is_end_of_input(src, cursor.pos);
        if breaks.is_empty() && header_has_break && cursor.pos > last_line && at_end {
            // At the end of input the parser counts an unterminated spaces-only line as a line.
            out.push_spelled('\n', last_line..cursor.pos);
        } else {
            out.push_breaks(&breaks);
        }
    }
    out.end = out.units.last().map_or(token.start, |unit| widen(unit.end));
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use saphyr_parser::{Event, Parser};

    /// A scalar as the parser reports it, with its span converted to bytes.
    #[derive(Debug)]
    struct ParsedScalar {
        value: String,
        style: ScalarStyle,
        token: Range<usize>,
    }

    fn style_of(style: saphyr_parser::ScalarStyle) -> ScalarStyle {
        ScalarStyle::from(style)
    }

    /// Every scalar of `src`, in order. The parser's markers count characters.
    fn parse_scalars(src: &str) -> Vec<ParsedScalar> {
        let char_to_byte: Vec<usize> = src
            .char_indices()
            .map(|(byte, _)| byte)
            .chain(std::iter::once(src.len()))
            .collect();
        Parser::new_from_str(src)
            .map(|event| event.unwrap_or_else(|e| panic!("{e} in {src:?}")))
            .filter_map(|(event, span)| match event {
                Event::Scalar(value, style, _, _) => Some(ParsedScalar {
                    value: value.into_owned(),
                    style: style_of(style),
                    token: char_to_byte[span.start.index()]..char_to_byte[span.end.index()],
                }),
                _ => None,
            })
            .collect()
    }

    /// The first scalar whose decoded value contains `marker`, and its map.
    fn scalar_with(src: &str, marker: &str) -> (ParsedScalar, ScalarMap) {
        let scalar = parse_scalars(src)
            .into_iter()
            .find(|scalar| scalar.value.contains(marker))
            .unwrap_or_else(|| panic!("no scalar contains {marker:?} in {src:?}"));
        let map = ScalarMap::new(src, scalar.token.clone(), scalar.style, &scalar.value);
        (scalar, map)
    }

    /// The source text that the first occurrence of `marker` in a decoded value maps to.
    fn source_of<'s>(src: &'s str, marker: &str) -> &'s str {
        let (scalar, map) = scalar_with(src, marker);
        assert!(map.is_exact(), "inexact map for {scalar:?} in {src:?}");
        let at = scalar.value.find(marker).unwrap();
        &src[map.source_range(at..at + marker.len())]
    }

    /// The source position an empty range at decoded offset `offset` maps to.
    fn point_in(src: &str, marker: &str, offset: usize) -> usize {
        let (_, map) = scalar_with(src, marker);
        let range = map.source_range(offset..offset);
        assert!(range.is_empty());
        range.start
    }

    #[test]
    fn plain_single_line_is_a_shifted_copy() {
        let src = "ensure: result.confdence > 0.7\n";
        assert_eq!(source_of(src, "confdence"), "confdence");
        let (_, map) = scalar_with(src, "confdence");
        assert!(matches!(map.repr, Repr::Shifted { .. }));
        assert_eq!(map.source_range(0..0), 8..8);
        assert_eq!(map.source_range(22..99), 30..30, "clamped to the end");
    }

    #[test]
    fn plain_multi_line_folds() {
        let src = "a: first line   \n   second  line\n\n   third\nb: 1\n";
        let (scalar, _) = scalar_with(src, "first");
        assert_eq!(scalar.value, "first line second  line\nthird");
        assert_eq!(source_of(src, "second  line"), "second  line");
        assert_eq!(source_of(src, "line second"), "line   \n   second");
        assert_eq!(source_of(src, "third"), "third");
        // The `\n` for the empty line maps to that empty line's break.
        assert_eq!(source_of(src, "\nthird"), "\n   third");
        // The folded space maps to the break it replaces.
        let space = scalar.value.find(" second").unwrap();
        let (_, map) = scalar_with(src, "first");
        let range = map.source_range(space..space + 1);
        assert_eq!(&src[range], "\n");
    }

    #[test]
    fn plain_continued_past_a_tab_indented_comment_line() {
        // The parser skips a comment after tab indentation and reads the line as empty.
        let src = "a: x\n\t# c\n  y.z\n";
        let (scalar, _) = scalar_with(src, "y.z");
        assert_eq!(scalar.value, "x\ny.z");
        assert_eq!(source_of(src, "y.z"), "y.z");
        assert_eq!(source_of(src, "\n"), "\n");
    }

    #[test]
    fn made_up_empty_plain_scalar_gets_the_fallback() {
        let src = "{a, b: c}\n";
        let scalars = parse_scalars(src);
        let missing = &scalars[1];
        assert_eq!(
            (missing.value.as_str(), &src[missing.token.clone()]),
            ("", ", ")
        );
        let map = ScalarMap::new(src, missing.token.clone(), missing.style, &missing.value);
        assert!(!map.is_exact());
        assert_eq!(map.source_range(0..0), missing.token);
    }

    #[test]
    fn single_quoted_with_doubled_quote() {
        let src = "a: 'it''s x.y'\n";
        assert_eq!(source_of(src, "'"), "''");
        assert_eq!(source_of(src, "s x"), "s x");
        assert_eq!(source_of(src, "it's"), "it''s");
        assert_eq!(point_in(src, "x.y", 6), 11);
        assert_eq!(
            point_in(src, "x.y", 8),
            13,
            "the end is at the closing quote"
        );
        let src = "a: 'x' # 'y'\n";
        let (scalar, map) = scalar_with(src, "x");
        assert_eq!(
            &src[scalar.token.clone()],
            "'x' # 'y'",
            "quoted spans run over a comment"
        );
        assert!(map.is_exact());
        assert_eq!(map.source_range(0..1), 4..5);
        assert_eq!(map.source_range(1..1), 5..5);
    }

    #[test]
    fn double_quoted_escapes_map_to_the_whole_escape() {
        let src = r#"a: "t\tq\"b\\u\u00e9x\x41e\U0001F600 z""#;
        assert_eq!(source_of(src, "\t"), r"\t");
        assert_eq!(source_of(src, "\"b"), r#"\"b"#);
        assert_eq!(source_of(src, "\\u"), r"\\u");
        assert_eq!(source_of(src, "é"), r"\u00e9");
        assert_eq!(source_of(src, "A"), r"\x41");
        assert_eq!(source_of(src, "😀 z"), r"\U0001F600 z");
        assert_eq!(source_of(src, "éxA"), r"\u00e9x\x41");
        // Either byte of an escaped two-byte character maps to the whole escape.
        let (scalar, map) = scalar_with(src, "é");
        let at = scalar.value.find('é').unwrap();
        assert_eq!(&src[map.source_range(at + 1..at + 2)], r"\u00e9");
        assert_eq!(map.source_range(at..at), 14..14);
    }

    #[test]
    fn double_quoted_other_escapes() {
        let src = r#"k: "0\0a\ab\bv\vf\fr\re\e_\_N\NL\LP\P/\/ \ sp\	tab""#;
        let (scalar, map) = scalar_with(src, "sp");
        assert!(map.is_exact());
        assert_eq!(
            scalar.value,
            "0\0a\u{7}b\u{8}v\u{b}f\u{c}r\re\u{1b}_\u{a0}N\u{85}L\u{2028}P\u{2029}//  sp\ttab"
        );
        assert_eq!(source_of(src, "\u{a0}"), r"\_");
        assert_eq!(source_of(src, "\u{2029}"), r"\P");
        assert_eq!(source_of(src, " sp\t"), "\\ sp\\\t");
    }

    #[test]
    fn double_quoted_escaped_line_break_joins_lines() {
        let src = "a: \"abc\\\n     def \\\n  \\ ghi\"\n";
        let (scalar, _) = scalar_with(src, "abc");
        assert_eq!(scalar.value, "abcdef  ghi");
        assert_eq!(source_of(src, "cd"), "c\\\n     d");
        assert_eq!(source_of(src, "f "), "f ");
        assert_eq!(source_of(src, "  g"), " \\\n  \\ g");
    }

    #[test]
    fn double_quoted_multi_line_with_empty_line() {
        let src = "a: \"one  \n\n   two\n  three\"\n";
        let (scalar, _) = scalar_with(src, "one");
        assert_eq!(scalar.value, "one\ntwo three");
        assert_eq!(source_of(src, "two"), "two");
        assert_eq!(source_of(src, "\n"), "\n");
        assert_eq!(point_in(src, "two", 3), src.find("\n\n").unwrap() + 1);
        assert_eq!(source_of(src, "o t"), "o\n  t");
        assert_eq!(source_of(src, "three"), "three");
    }

    #[test]
    fn non_ascii_before_and_inside() {
        let src = "é😀: [ \"x é😀 \\u00e9 y.confdence\" ]\nb: ré😀sumé.confdence\n";
        assert_eq!(source_of(src, "é😀 é"), "é😀 \\u00e9");
        assert_eq!(source_of(src, "y.confdence"), "y.confdence");
        assert_eq!(source_of(src, "😀sumé"), "😀sumé");
        let src = "é: |\n  😀 x.confdence\n";
        assert_eq!(source_of(src, "confdence"), "confdence");
    }

    #[test]
    fn literal_block_clip() {
        let src = "a: |\n  foo bar\n  baz\nb: 1\n";
        let (scalar, map) = scalar_with(src, "foo");
        assert_eq!(scalar.value, "foo bar\nbaz\n");
        assert!(
            matches!(map.repr, Repr::Table { .. }),
            "indentation is skipped"
        );
        let (_, map) = scalar_with("a: |\n  foo\n", "foo");
        assert_eq!(map.repr, Repr::Shifted { base: 7, len: 4 });
        assert_eq!(source_of(src, "bar\nbaz"), "bar\n  baz");
        assert_eq!(source_of(src, "baz\n"), "baz\n");
        assert_eq!(
            point_in(src, "foo", scalar.value.len()),
            src.find("b: 1").unwrap()
        );
    }

    #[test]
    fn literal_block_strip_keep_and_leading_empty_lines() {
        let src = "a: |-\n\n  \n  foo\n\n\nb: |+\n  bar\n\n\nc: end\n";
        let (scalar, _) = scalar_with(src, "foo");
        assert_eq!(scalar.value, "\n\nfoo");
        assert_eq!(source_of(src, "\n\nfoo"), "\n  \n  foo");
        assert_eq!(point_in(src, "foo", 5), src.find("foo").unwrap() + 3);
        let (scalar, _) = scalar_with(src, "bar");
        assert_eq!(scalar.value, "bar\n\n\n");
        assert_eq!(source_of(src, "bar\n\n\n"), "bar\n\n\n");
    }

    #[test]
    fn literal_block_with_explicit_indentation() {
        // The indicator counts from the sequence's indentation (2), so the content is at 4.
        let src = "seq:\n  - |2\n     more\n    base\n  - other\n";
        let (scalar, _) = scalar_with(src, "more");
        assert_eq!(scalar.value, " more\nbase\n");
        assert_eq!(source_of(src, " more"), " more");
        assert_eq!(source_of(src, "base"), "base");
        let src = "a: |1-\n  \n x\n";
        let (scalar, _) = scalar_with(src, "x");
        assert_eq!(scalar.value, " \nx");
        assert_eq!(source_of(src, " \nx"), " \n x");
    }

    #[test]
    fn folded_block() {
        let src = "a: >\n  one\n  two\n\n  three\n    more\n  four\nb: 1\n";
        let (scalar, _) = scalar_with(src, "one");
        assert_eq!(scalar.value, "one two\nthree\n  more\nfour\n");
        assert_eq!(source_of(src, "one two"), "one\n  two");
        assert_eq!(source_of(src, "two\nthree"), "two\n\n  three");
        assert_eq!(source_of(src, "  more\n"), "  more\n");
        assert_eq!(source_of(src, "four"), "four");
    }

    #[test]
    fn folded_block_strip_with_more_indented_line() {
        let src = "a: >-\n  one\n    more\n  two\n  three\n\n";
        let (scalar, _) = scalar_with(src, "one");
        assert_eq!(scalar.value, "one\n  more\ntwo three");
        assert_eq!(source_of(src, "more"), "more");
        assert_eq!(source_of(src, "two three"), "two\n  three");
        assert_eq!(source_of(src, "one\n"), "one\n");
    }

    #[test]
    fn block_followed_by_another_key_in_a_nested_mapping() {
        let src = "x:\n  a: |\n    foo.bar\n\n  b: 1\n";
        assert_eq!(source_of(src, "bar"), "bar");
        let (scalar, map) = scalar_with(src, "foo");
        assert_eq!(scalar.value, "foo.bar\n");
        assert_eq!(&src[scalar.token.clone()], "foo.bar\n\n  ");
        assert_eq!(map.source_range(0..99), 14..22);
    }

    #[test]
    fn block_at_end_of_input_without_final_break() {
        let src = "a: |\n  foo";
        let (scalar, map) = scalar_with(src, "foo");
        // The parser adds the missing final break; it maps to the end of input.
        assert_eq!(scalar.value, "foo\n");
        assert_eq!(map.source_range(3..4), 10..10);
        assert_eq!(map.source_range(0..4), 7..10);
        assert_eq!(source_of(src, "foo"), "foo");
        let src = "a: >-\n  foo\n  bar";
        assert_eq!(source_of(src, "o b"), "o\n  b");
        // A trailing spaces-only line at the end of input gets the parser's extra `\n`.
        let src = "a: |\n  foo\n  ";
        let (scalar, map) = scalar_with(src, "foo");
        assert_eq!(scalar.value, "foo\n\n");
        assert!(map.is_exact());
    }

    #[test]
    fn header_with_comment_or_indicators_elsewhere_on_the_line() {
        let src = "a: | # note: use | or >- here é\n  x > 1\n";
        assert_eq!(source_of(src, "x > 1"), "x > 1");
        let src = "\"k |- # \": |+ # |-\n  x > 1\n\nb: 2\n";
        let (scalar, _) = scalar_with(src, "x > 1");
        assert_eq!(scalar.value, "x > 1\n\n");
        assert_eq!(source_of(src, "1\n\n"), "1\n\n");
        let src = "- >2- #c\n    x\n   y\n";
        let (scalar, _) = scalar_with(src, "x");
        assert_eq!(scalar.value, "  x\n y");
        assert_eq!(source_of(src, "x\n y"), "x\n   y");
    }

    #[test]
    fn properties_before_the_scalar() {
        let src = "a: &x !!str |\n  foo.bar\nb: !t &y # c\n  >2-\n   more\n  z.w\nc: &w\n  'it''s'\n\
                   d: [!!str a.b, &q \"c\\td\"]\ne: !!str |+\n\nf: 1\n";
        assert_eq!(source_of(src, "bar"), "bar");
        assert_eq!(source_of(src, " more\nz"), " more\n  z");
        assert_eq!(source_of(src, "it's"), "it''s");
        assert_eq!(source_of(src, "a.b"), "a.b");
        assert_eq!(source_of(src, "c\td"), "c\\td");
        let (scalar, map) = last_scalar_with(src, "\n");
        assert_eq!(&src[scalar.token.clone()], "!!str |+\n\n");
        assert_eq!(&src[map.source_range(0..1)], "\n");
    }

    #[test]
    fn span_cut_at_the_header() {
        // A caller that cuts a tag off the parser's span hands over a span starting at `|`/`>`.
        let src = "a: !!str >2\n\n   more\n  x.y\n  b\nc: 1\n";
        let scalar = parse_scalars(src).swap_remove(1);
        assert_eq!(scalar.value, "\n more\nx.y b\n");
        let header = src.find('>').unwrap();
        let map = ScalarMap::new(src, header..scalar.token.end, scalar.style, &scalar.value);
        assert!(map.is_exact());
        let at = scalar.value.find("x.y b").unwrap();
        assert_eq!(&src[map.source_range(at..at + 5)], "x.y\n  b");
        assert_eq!(&src[map.source_range(0..3)], "\n   m");
    }

    #[test]
    fn top_level_block_and_document_end() {
        let src = "--- |\nfoo\n---\n...\n";
        let (scalar, _) = scalar_with(src, "foo");
        assert_eq!(scalar.value, "foo\n---\n");
        assert_eq!(source_of(src, "---"), "---");
    }

    #[test]
    fn flow_sequence_items() {
        let src = "ensure: [\"a > 1\", 'b', c.d  ]\n";
        assert_eq!(source_of(src, "a > 1"), "a > 1");
        assert_eq!(source_of(src, "b"), "b");
        assert_eq!(source_of(src, "c.d"), "c.d");
        let src = "ensure: [ x.y\n   z, 'p\n\n  q' ]\n";
        assert_eq!(source_of(src, "y z"), "y\n   z");
        assert_eq!(source_of(src, "p\nq"), "p\n\n  q");
    }

    #[test]
    fn crlf_line_endings() {
        let src = "a: |\r\n  foo\r\n\r\n  bar\r\nb: >-\r\n  one\r\n  two\r\nc: \"x\r\n  y\\\r\n  z\"\r\nd: p\r\n  q\r\n";
        let (scalar, _) = scalar_with(src, "foo");
        assert_eq!(scalar.value, "foo\n\nbar\n");
        assert_eq!(source_of(src, "foo\n\nbar\n"), "foo\r\n\r\n  bar\r\n");
        assert_eq!(source_of(src, "\nbar"), "\r\n  bar");
        assert_eq!(source_of(src, "one two"), "one\r\n  two");
        assert_eq!(source_of(src, "x yz"), "x\r\n  y\\\r\n  z");
        assert_eq!(source_of(src, "p q"), "p\r\n  q");
    }

    #[test]
    fn empty_scalars() {
        let src = "a:\nb: \"\"\nc: '' # c\nd: |-\ne: >\n\nf: |+\n\n\ng: x\n";
        let scalars = parse_scalars(src);
        let values: Vec<&str> = scalars.iter().map(|scalar| scalar.value.as_str()).collect();
        assert_eq!(
            values,
            [
                "a", "", "b", "", "c", "", "d", "", "e", "", "f", "\n\n", "g", "x"
            ]
        );
        let point = |index: usize| {
            let scalar: &ParsedScalar = &scalars[index];
            let map = ScalarMap::new(src, scalar.token.clone(), scalar.style, &scalar.value);
            assert!(map.is_exact(), "{scalar:?}");
            map.source_range(0..0).start
        };
        assert_eq!(
            point(1),
            1,
            "an empty plain scalar is where the parser put it"
        );
        assert_eq!(
            point(3),
            src.find("\"\"").unwrap() + 1,
            "between the quotes"
        );
        assert_eq!(point(5), src.find("''").unwrap() + 1, "between the quotes");
        assert_eq!(
            point(7),
            src.find("e:").unwrap(),
            "a block without content: the next token"
        );
        assert_eq!(point(9), src.find("f:").unwrap());
        // `|+` with only empty lines keeps one `\n` per empty line, mapped to its break.
        let kept = &scalars[11];
        let map = ScalarMap::new(src, kept.token.clone(), kept.style, &kept.value);
        let empty_lines = src.find("|+\n").unwrap() + 3;
        assert_eq!(map.source_range(0..2), empty_lines..empty_lines + 2);
        assert_eq!(map.source_range(2..2), empty_lines + 2..empty_lines + 2);
    }

    /// The last scalar whose decoded value contains `marker`, and its map.
    fn last_scalar_with(src: &str, marker: &str) -> (ParsedScalar, ScalarMap) {
        let scalar = parse_scalars(src)
            .into_iter()
            .rev()
            .find(|scalar| scalar.value.contains(marker))
            .unwrap();
        let map = ScalarMap::new(src, scalar.token.clone(), scalar.style, &scalar.value);
        (scalar, map)
    }

    /// The map of the last scalar in `src`.
    fn last_scalar(src: &str) -> (ParsedScalar, ScalarMap) {
        let scalar = parse_scalars(src).pop().unwrap();
        let map = ScalarMap::new(src, scalar.token.clone(), scalar.style, &scalar.value);
        (scalar, map)
    }

    #[test]
    fn block_without_content_at_end_of_input() {
        for (src, value) in [
            ("a: |", ""),
            ("a: |+", ""),
            ("a: |-\n", ""),
            ("a: >+\n\n \n", "\n\n"),
            ("a: |+\n  ", "\n"),
        ] {
            let (scalar, map) = last_scalar(src);
            assert_eq!(scalar.value, value, "{src:?}");
            assert_eq!(scalar.token.start, 3, "the span starts at the indicator");
            assert!(map.is_exact(), "{src:?}");
            assert!(map.source_range(0..value.len()).end <= src.len());
        }
    }

    #[test]
    fn block_whose_content_looks_like_a_header() {
        let src = "a: |\n  |+\n";
        let (scalar, _) = scalar_with(src, "|+");
        assert_eq!(scalar.value, "|+\n");
        assert_eq!(source_of(src, "|+"), "|+");
    }

    #[test]
    fn wrong_value_falls_back_to_the_whole_token() {
        let src = "a: \"x\\ty\"\n";
        let map = ScalarMap::new(src, 3..9, ScalarStyle::DoubleQuoted, "not it");
        assert!(!map.is_exact());
        for range in [0..0, 0..1, 1..3, 5..99, 99..100] {
            assert_eq!(map.source_range(range), 3..9);
        }
        // Wrong style, span outside the source, span off a character boundary.
        let map = ScalarMap::new(src, 3..9, ScalarStyle::Literal, "x\ty");
        assert!(!map.is_exact());
        let map = ScalarMap::new(src, 5..400, ScalarStyle::Plain, "x");
        assert!(!map.is_exact());
        assert_eq!(map.source_range(0..1), 5..src.len());
        let map = ScalarMap::new("é", 1..2, ScalarStyle::Plain, "x");
        assert_eq!(map.source_range(0..1), 1..2);
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 4..2;
        assert_eq!(map.source_range(reversed), 1..2);
    }

    #[test]
    fn never_panics_on_odd_inputs() {
        let sources = [
            "",
            "é",
            "a: |",
            "|",
            ">",
            "\"",
            "'",
            "\"\\",
            "\"\\u12\"",
            "\r",
            "a: |\n\r",
        ];
        let styles = [
            ScalarStyle::Plain,
            ScalarStyle::SingleQuoted,
            ScalarStyle::DoubleQuoted,
            ScalarStyle::Literal,
            ScalarStyle::Folded,
        ];
        for src in sources {
            for style in styles {
                for start in 0..=src.len() + 1 {
                    for end in 0..=src.len() + 1 {
                        for value in ["", "\n", "a", "é"] {
                            let map = ScalarMap::new(src, start..end, style, value);
                            let _ = map.source_range(0..9);
                            #[allow(clippy::reversed_empty_ranges)]
                            let _ = map.source_range(9..0);
                        }
                    }
                }
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Property-style: encode tricky strings in every style, parse them, check the maps.
    // -----------------------------------------------------------------------------------------

    const TRICKY: &[&str] = &[
        "",
        "a",
        "a b",
        "a  b",
        "result.confdence > 0.7",
        "  lead",
        "trail  ",
        "x\ny",
        "x\n\ny",
        "\n",
        "\n\n",
        "\nstart",
        "end\n",
        "end\n\n",
        "tab\there",
        "é😀 mixed ü",
        "quote ' and \" both",
        "back\\slash",
        "colon: x",
        "hash # y",
        "\u{85}\u{2028}\u{a0}",
        "ctrl\u{7}\u{1b}",
        "  \n  ",
        "line1\n  indented\nline3",
        "first\nsecond\n\nthird\n",
        "#start",
        "-dash",
        "...",
        "a\r b",
        "é\ne",
        "x\u{FEFF}y",
        "long words to fold across several lines of text",
    ];

    /// Characters a block or quoted scalar cannot hold literally.
    fn needs_escape(c: char) -> bool {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{FEFF}')
    }

    fn is_word_char(c: Option<char>) -> bool {
        c.is_some_and(|c| !c.is_whitespace())
    }

    /// `"…"`. With `fold`, some spaces between words become line breaks, some newlines become
    /// empty lines, some characters are escaped and long words are split with escaped breaks.
    fn double_quoted(value: &str, fold: bool, continuation: &str) -> String {
        let chars: Vec<char> = value.chars().collect();
        let mut out = String::from("\"");
        for (i, &c) in chars.iter().enumerate() {
            let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
            let next = chars.get(i + 1).copied();
            let between_words = is_word_char(prev) && is_word_char(next);
            match c {
                ' ' if fold && between_words && i % 2 == 0 => {
                    out.push('\n');
                    out.push_str(continuation);
                }
                '\n' if fold && between_words => {
                    out.push_str("\n \n");
                    out.push_str(continuation);
                }
                ' ' if fold && i % 3 == 0 => out.push_str("\\ "),
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                '\u{7}' => out.push_str("\\a"),
                '\u{1b}' => out.push_str("\\x1B"),
                '\u{85}' => out.push_str("\\N"),
                'é' if fold => out.push_str("\\u00e9"),
                '😀' if fold => out.push_str("\\U0001F600"),
                c if needs_escape(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
                c => {
                    if fold && i % 7 == 6 && is_word_char(prev) && !c.is_whitespace() {
                        // An escaped break joins the lines without a space.
                        out.push_str("\\\n");
                        out.push_str(continuation);
                    }
                    out.push(c);
                }
            }
        }
        out.push('"');
        out
    }

    /// `'…'` when representable: no escapes needed, no blanks next to a newline.
    fn single_quoted(value: &str, continuation: &str) -> Option<String> {
        let blank_at_break = ["\n ", " \n", "\t\n", "\n\t"]
            .iter()
            .any(|pattern| value.contains(pattern));
        if value.chars().any(|c| needs_escape(c) || c == '\r') || blank_at_break {
            return None;
        }
        Some(format!(
            "'{}'",
            fold_newlines(&value.replace('\'', "''"), continuation)
        ))
    }

    /// Spells each run of n newlines as a line break and n empty lines.
    fn fold_newlines(text: &str, continuation: &str) -> String {
        let mut out = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            out.push(c);
            if c == '\n' {
                out.push('\n');
                while chars.next_if_eq(&'\n').is_some() {
                    out.push('\n');
                }
                out.push_str(continuation);
            }
        }
        out
    }

    /// A plain scalar when representable; every other space folds onto a new line.
    fn plain(value: &str, continuation: &str) -> Option<String> {
        let safe = |c: char| c.is_alphanumeric() || ".>_😀".contains(c);
        let representable = value.chars().next().is_some_and(char::is_alphanumeric)
            && value.chars().last().is_some_and(safe)
            && !value.contains("  ")
            && value.chars().all(|c| safe(c) || c == ' ');
        if !representable {
            return None;
        }
        let mut out = String::new();
        for (i, c) in value.chars().enumerate() {
            if c == ' ' && i % 2 == 1 {
                out.push('\n');
                out.push_str(continuation);
            } else {
                out.push(c);
            }
        }
        Some(out)
    }

    /// `|2…` or `>2…` with the chomping the value needs, when representable. `content` is the
    /// content indentation (the parent's plus 2).
    fn block(value: &str, folded: bool, content: &str) -> Option<String> {
        if value.chars().any(|c| needs_escape(c) || c == '\r') {
            return None;
        }
        let body = value.trim_end_matches('\n');
        let final_breaks = value.len() - body.len();
        let chomping = match final_breaks {
            0 => "-",
            1 => "",
            _ => "+",
        };
        let lines: Vec<&str> = body.split('\n').collect();
        if folded && lines.iter().any(|line| line.starts_with([' ', '\t'])) {
            return None;
        }
        let indicator = if folded { '>' } else { '|' };
        if body.is_empty() && final_breaks > 0 {
            // Only line breaks: each is an empty line, kept by `+`.
            return Some(format!("{indicator}2+\n{}", "\n".repeat(final_breaks)));
        }
        let mut out = format!("{indicator}2{chomping}\n");
        for (i, line) in lines.iter().enumerate() {
            if !line.is_empty() {
                out.push_str(content);
                out.push_str(&fold_block_line(line, folded, content));
            }
            out.push('\n');
            // A folded break between text lines reads as a space: a newline needs an empty line.
            if folded && !line.is_empty() && i + 1 < lines.len() {
                out.push('\n');
            }
        }
        out.push_str(&"\n".repeat(final_breaks.saturating_sub(1)));
        Some(out)
    }

    /// In a folded block, splits a line at its second single space between words.
    fn fold_block_line(line: &str, folded: bool, content: &str) -> String {
        let chars: Vec<char> = line.chars().collect();
        let mut spaces = 0;
        let mut out = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
            let next = chars.get(i + 1).copied();
            if folded && c == ' ' && is_word_char(prev) && is_word_char(next) {
                spaces += 1;
                if spaces == 2 {
                    out.push('\n');
                    out.push_str(content);
                    continue;
                }
            }
            out.push(c);
        }
        out
    }

    /// Every encoding of `value` this test can write, for a parent at `indent`.
    fn encodings(value: &str, indent: &str, in_flow: bool) -> Vec<(ScalarStyle, String)> {
        let continuation = format!("{indent}  ");
        let mut all = vec![
            (
                ScalarStyle::DoubleQuoted,
                double_quoted(value, false, &continuation),
            ),
            (
                ScalarStyle::DoubleQuoted,
                double_quoted(value, true, &continuation),
            ),
        ];
        if let Some(encoded) = single_quoted(value, &continuation) {
            all.push((ScalarStyle::SingleQuoted, encoded));
        }
        if let Some(encoded) = plain(value, &continuation) {
            all.push((ScalarStyle::Plain, encoded));
        }
        if !in_flow {
            for (style, folded) in [(ScalarStyle::Literal, false), (ScalarStyle::Folded, true)] {
                if let Some(encoded) = block(value, folded, &continuation) {
                    all.push((style, encoded));
                }
            }
        }
        all
    }

    /// Documents that put an encoded scalar at a known offset: (before, after, parent indent).
    const CONTEXTS: &[(&str, &str, &str, bool)] = &[
        ("v: ", "\nnext: 1\n", "", false),
        (
            "é😀: x\nlist:\n  - k: 0\n    v: ",
            "\n  - other\n",
            "    ",
            false,
        ),
        ("v: [x, ", "]\n", "", true),
        ("v: ", "", "", false),
        ("a:\r\n  v: ", "\r\n  w: 1\r\n", "  ", false),
    ];

    #[test]
    fn every_encoding_of_tricky_strings_maps_exactly() {
        let mut checked = 0;
        for &value in TRICKY {
            for &(before, after, indent, in_flow) in CONTEXTS {
                let crlf = after.contains('\r');
                for (style, mut encoded) in encodings(value, indent, in_flow) {
                    // A block scalar's last line break is the one the context starts with.
                    if after.starts_with(['\n', '\r']) && encoded.ends_with('\n') {
                        encoded.pop();
                    }
                    let encoded = if crlf {
                        encoded.replace('\n', "\r\n")
                    } else {
                        encoded
                    };
                    let src = format!("{before}{encoded}{after}");
                    check_encoded(&src, before.len(), style, value);
                    checked += 1;
                }
            }
        }
        assert!(checked > 300, "only {checked} encodings");
    }

    fn check_encoded(src: &str, offset: usize, style: ScalarStyle, value: &str) {
        let scalar = parse_scalars(src)
            .into_iter()
            .find(|scalar| scalar.token.start >= offset)
            .unwrap();
        assert_eq!(scalar.style, style, "{src:?}");
        assert_eq!(scalar.value, value, "encoder bug: {src:?}");
        let map = ScalarMap::new(src, scalar.token.clone(), style, value);
        assert!(map.is_exact(), "{style:?} {value:?} in {src:?}");
        assert_eq!(
            map,
            ScalarMap::decoded(src, scalar.token.clone(), style, value),
            "the shortcut differs from decoding: {style:?} {value:?} in {src:?}"
        );
        // Block scalars map their leading empty lines between the header and the span start.
        let allowed = offset..scalar.token.end.max(offset);
        let mut previous = 0..0;
        for (at, c) in value.char_indices() {
            let range = map.source_range(at..at + c.len_utf8());
            assert!(
                allowed.start <= range.start && range.end <= allowed.end,
                "{c:?} at {at} maps to {range:?} outside {allowed:?} in {src:?}"
            );
            assert!(previous.start <= range.start && previous.end <= range.end);
            let spelled = &src[range.clone()];
            if !c.is_whitespace() && c != '\u{FEFF}' {
                assert!(
                    spelled == c.to_string() || spelled.starts_with('\\') || spelled == "''",
                    "{c:?} maps to {spelled:?} in {src:?}"
                );
            }
            let point = map.source_range(at..at);
            assert_eq!(point, range.start..range.start);
            previous = range;
        }
        let end = map.source_range(value.len()..value.len());
        assert!(
            previous.end <= end.start && allowed.contains(&end.start) || end.start == allowed.end
        );
    }

    /// A scalar the shortcut maps is mapped exactly as decoding maps it, with the parser's span
    /// and with the span cut at the closing quote; the rest are decoded.
    #[test]
    fn verbatim_scalars_map_as_decoding_maps_them() {
        let docs = [
            "a: x\nb: 'y z'\nc: \"w\"  # c\nd: ''\ne: \"\"\n",
            "a: 'it''s'\nb: \"q\\\"x\"\nc: \"t\\tx\"\nd: !!str x\ne: &k v\nf: *k\n",
            "a: x #c\nb: x#c\nc: 'x' #c\nd: \"a\tb \" \ne: [a b, 'c d', \"e\", ]\n",
            "a: 'x\n  y'\nb: \"x\\\n  y\"\nc: x\n  y\nd: |\n  z\ne: >\n  w\n",
            "{a: b, 'c': \"d\", e}\n",
            "- 'é😀'\n- \"é\"\n- é x\n- ! x\n- !t 'y'\n",
        ];
        let mut shortcut = 0;
        for src in docs {
            for scalar in parse_scalars(src) {
                let mut tokens = vec![scalar.token.clone()];
                if let Some(close) = src[scalar.token.clone()].rfind(['\'', '"']) {
                    tokens.push(scalar.token.start..scalar.token.start + close + 1);
                }
                for token in tokens {
                    let decoded =
                        ScalarMap::decoded(src, token.clone(), scalar.style, &scalar.value);
                    if let Some(map) = verbatim(src, &token, scalar.style, &scalar.value) {
                        assert_eq!(map, decoded, "{scalar:?} as {token:?} in {src:?}");
                        shortcut += 1;
                    }
                    assert_eq!(
                        ScalarMap::new(src, token.clone(), scalar.style, &scalar.value),
                        decoded
                    );
                }
            }
        }
        assert!(shortcut > 20, "only {shortcut} scalars took the shortcut");
    }
}
