//! Values for people, cut after a bound while they are written: a value of megabytes is
//! never held twice, and what was cut is counted exactly, so that every surface can say
//! `… (N more characters)`.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// A value for a person: its text (a string as it is, anything else as indented JSON), cut
/// after a bound, and how many characters were cut.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Folded {
    pub text: String,
    /// Characters left out after `text` (0: the whole value).
    pub more_chars: u64,
}

impl Folded {
    /// `value` as text (a string as it is, anything else as indented JSON), cut after
    /// `max_chars`. The JSON is written through the cut, so a huge value is never held
    /// twice.
    pub fn of_value(value: &Value, max_chars: usize) -> Folded {
        match value {
            Value::String(text) => Folded::of_text(text, max_chars),
            other => {
                let mut fold = Fold::new(max_chars);
                // Writing into a `Fold` cannot fail, and a `Value` always serialises.
                let _ = serde_json::to_writer_pretty(&mut fold, other);
                fold.finish()
            }
        }
    }

    /// `text` cut after `max_chars`.
    pub fn of_text(text: &str, max_chars: usize) -> Folded {
        let mut fold = Fold::new(max_chars);
        fold.push(text.as_bytes());
        fold.finish()
    }

    /// Cut again, shorter (a surface with less room: the form).
    pub fn refold(&self, max_chars: usize) -> Folded {
        match self.text.char_indices().nth(max_chars) {
            Some((at, _)) => {
                let kept = self.text.get(..at).unwrap_or_default();
                let cut = self.text.get(at..).unwrap_or_default().chars().count();
                Folded {
                    text: kept.to_owned(),
                    more_chars: self
                        .more_chars
                        .saturating_add(u64::try_from(cut).unwrap_or(u64::MAX)),
                }
            }
            None => self.clone(),
        }
    }

    /// Its text, and when it was cut, `… (N more characters)`.
    pub fn shown(&self) -> String {
        if self.more_chars == 0 {
            self.text.clone()
        } else {
            format!("{}… ({} more characters)", self.text, self.more_chars)
        }
    }
}

/// A text being written, keeping its first `limit` characters and counting the rest. Fed
/// bytes (UTF-8, possibly cut inside a character), it counts a character at each byte that
/// starts one.
pub(super) struct Fold {
    kept: Vec<u8>,
    chars: u64,
    limit: u64,
    keeping: bool,
}

impl Fold {
    pub(super) fn new(limit: usize) -> Fold {
        Fold {
            kept: Vec::new(),
            chars: 0,
            limit: u64::try_from(limit).unwrap_or(u64::MAX),
            keeping: true,
        }
    }

    pub(super) fn push(&mut self, bytes: &[u8]) {
        if !self.keeping {
            // Past the limit: only counting.
            let starts = bytes.iter().filter(|byte| (**byte & 0xC0) != 0x80).count();
            self.chars = self
                .chars
                .saturating_add(u64::try_from(starts).unwrap_or(u64::MAX));
            return;
        }
        for &byte in bytes {
            if (byte & 0xC0) != 0x80 {
                self.chars = self.chars.saturating_add(1);
                self.keeping = self.chars <= self.limit;
            }
            if self.keeping {
                self.kept.push(byte);
            }
        }
    }

    pub(super) fn finish(self) -> Folded {
        Folded {
            text: String::from_utf8_lossy(&self.kept).into_owned(),
            more_chars: self.chars.saturating_sub(self.limit),
        }
    }
}

impl std::io::Write for Fold {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.push(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing, clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn a_short_value_is_whole_and_a_long_one_says_how_much_was_cut() {
        assert_eq!(
            Folded::of_text("short", 10),
            Folded {
                text: "short".to_owned(),
                more_chars: 0
            }
        );
        let long = Folded::of_text(&"é".repeat(25), 10);
        assert_eq!(long.text, "é".repeat(10));
        assert_eq!(long.more_chars, 15);
        assert_eq!(
            long.shown(),
            format!("{}… (15 more characters)", "é".repeat(10))
        );
        // Cut again, the count adds up.
        let shorter = long.refold(4);
        assert_eq!(shorter.text, "éééé");
        assert_eq!(shorter.more_chars, 21);
        assert_eq!(long.refold(100), long);
    }

    #[test]
    fn a_json_value_is_indented_and_cut_while_it_is_written() {
        let value = json!({"result": "r1", "quality_score": 0.9});
        let folded = Folded::of_value(&value, 1_000);
        assert_eq!(
            folded.text,
            "{\n  \"quality_score\": 0.9,\n  \"result\": \"r1\"\n}"
        );
        assert_eq!(folded.more_chars, 0);
        // A string is shown as itself, not quoted.
        assert_eq!(Folded::of_value(&json!("plain"), 100).text, "plain");
        // A large value keeps only the bound, and counts the rest exactly.
        let big = json!({"items": vec!["ünïcode"; 100_000]});
        let whole = serde_json::to_string_pretty(&big).unwrap().chars().count();
        let folded = Folded::of_value(&big, 50);
        assert_eq!(folded.text.chars().count(), 50);
        assert!(folded.text.capacity() < 1_000, "never held whole");
        assert_eq!(folded.more_chars as usize, whole - 50);
    }

    #[test]
    fn a_cut_inside_a_character_keeps_whole_characters() {
        let mut fold = Fold::new(2);
        // "aé€" written a byte at a time.
        for byte in "aé€x".as_bytes() {
            fold.push(std::slice::from_ref(byte));
        }
        let folded = fold.finish();
        assert_eq!(folded.text, "aé");
        assert_eq!(folded.more_chars, 2);
    }
}
