//! Raw input → text the front end may parse, within fixed bounds.
//!
//! Takes a file's bytes; gives its text, or the reason it is not parsed at all: more than
//! [`MAX_FILE_SIZE`] bytes, or not UTF-8. [`forbidden_character`] then finds a NUL byte or
//! another control character YAML forbids. These checks run before the YAML parser, so that
//! binary or oversized input costs one linear scan and gives one clear diagnostic.

use crate::diagnostic::{Code, Diagnostic};
use crate::source::SourceFile;

/// The largest spec accepted, in bytes (16 MiB). A 10,000-step spec is about 3 MB.
pub const MAX_FILE_SIZE: usize = 16 * 1024 * 1024;

/// Input that is not parsed, with the text to show it by.
#[derive(Debug)]
pub struct Rejected {
    /// The text a diagnostic is rendered against: empty for an oversized file, the lossy
    /// decoding for one that is not UTF-8.
    pub text: String,
    pub reason: Reason,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// At least this many bytes: readers stop one byte past the limit.
    TooLarge { size: usize },
    /// The first invalid byte and how many bytes the replacement character covers.
    InvalidUtf8 { offset: usize, utf16: bool },
}

impl Reason {
    pub fn diagnostic(self, file: &SourceFile) -> Diagnostic {
        match self {
            Reason::TooLarge { .. } => Diagnostic::new(
                Code::E0002,
                format!(
                    "the file is larger than the {} MiB a spec may have",
                    MAX_FILE_SIZE / (1024 * 1024)
                ),
                file.span(0..0),
                "file not parsed",
            )
            .help("a spec this large is almost certainly not a spec; split real workflows into several files"),
            Reason::InvalidUtf8 { offset, utf16 } => {
                let end = file.text().get(offset..).and_then(|rest| rest.chars().next()).map_or(offset, |c| offset + c.len_utf8());
                Diagnostic::new(
                    Code::E0001,
                    "the file is not valid UTF-8",
                    file.span(offset..end),
                    "invalid byte here",
                )
                .help(if utf16 {
                    "the file looks like UTF-16; save it as UTF-8"
                } else {
                    "save the file as UTF-8"
                })
            }
        }
    }
}

/// Decodes a file's bytes, refusing more than [`MAX_FILE_SIZE`] of them or invalid UTF-8.
pub fn decode(bytes: &[u8]) -> Result<String, Rejected> {
    if bytes.len() > MAX_FILE_SIZE {
        return Err(Rejected {
            text: String::new(),
            reason: Reason::TooLarge { size: bytes.len() },
        });
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_owned()),
        Err(error) => Err(Rejected {
            text: String::from_utf8_lossy(bytes).into_owned(),
            reason: Reason::InvalidUtf8 {
                offset: error.valid_up_to(),
                utf16: bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]),
            },
        }),
    }
}

/// The first character YAML does not allow in a stream: C0 controls other than tab, line feed
/// and carriage return, DEL, and C1 controls other than NEL.
pub fn forbidden_character(src: &SourceFile) -> Option<Diagnostic> {
    let text = src.text();
    // By bytes: the text is UTF-8, so a control character below U+0080 is its own byte, and
    // one of U+0080..=U+009F is 0xC2 followed by its low byte (0xC2 is only ever a lead byte).
    let bytes = text.as_bytes();
    let offset = bytes.iter().enumerate().position(|(at, &b)| {
        (b < b' ' && !matches!(b, b'\t' | b'\n' | b'\r'))
            || b == 0x7f
            || (b == 0xc2
                && bytes
                    .get(at + 1)
                    .is_some_and(|&low| (0x80..=0x9f).contains(&low) && low != 0x85))
    })?;
    let c = text.get(offset..)?.chars().next()?;
    let span = src.span(offset..offset + c.len_utf8());
    let diagnostic = if c == '\0' {
        Diagnostic::new(
            Code::E0003,
            "the file contains a NUL byte",
            span,
            "NUL byte",
        )
        .help("a NUL byte means a binary file or a broken copy; remove it")
    } else {
        Diagnostic::new(
            Code::E0003,
            format!("the file contains the control character U+{:04X}, which YAML does not allow", u32::from(c)),
            span,
            "control character",
        )
        .help("remove it; to put it in a string, write it as an escape in double quotes (e.g. \"\\x07\")")
    };
    Some(diagnostic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_input_is_refused_without_decoding() {
        let bytes = vec![b'a'; MAX_FILE_SIZE + 1];
        let rejected = decode(&bytes).err();
        assert_eq!(
            rejected.map(|r| r.reason),
            Some(Reason::TooLarge {
                size: MAX_FILE_SIZE + 1
            })
        );
    }

    #[test]
    fn the_first_invalid_byte_is_located() {
        let rejected = decode(b"a: caf\xe9\n").err();
        assert_eq!(
            rejected.map(|r| r.reason),
            Some(Reason::InvalidUtf8 {
                offset: 6,
                utf16: false
            })
        );
    }

    /// The byte scan finds the first character the definition by characters forbids.
    #[test]
    fn control_characters_are_found_by_bytes_as_by_characters() {
        let forbidden = |c: char| {
            (c < ' ' && !matches!(c, '\t' | '\n' | '\r'))
                || c == '\u{7f}'
                || (('\u{80}'..='\u{9f}').contains(&c) && c != '\u{85}')
        };
        let found = |text: &str| {
            let file = SourceFile::new(crate::source::FileId(0), "t", text);
            forbidden_character(&file).map(|d| d.primary.span.range())
        };
        for c in (0..0x3000)
            .filter_map(char::from_u32)
            .chain(['\u{FEFF}', '😀'])
        {
            for text in [format!("{c}"), format!("aé{c}b{c}"), format!("\u{85}x{c}")] {
                let expected = text
                    .char_indices()
                    .find(|&(_, c)| forbidden(c))
                    .map(|(at, c)| at..at + c.len_utf8());
                assert_eq!(found(&text), expected, "{text:?}");
            }
        }
    }
}
