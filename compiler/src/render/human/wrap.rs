//! A report's message and help, wrapped once per distinct text instead of once per report.
//!
//! miette wraps both with textwrap on every report, and on a file with thousands of alike
//! warnings that was most of the rendering time. [`Wrapped`] wraps each distinct text once,
//! exactly as miette would (the same options, indents and textwrap features): the text as
//! miette writes it, for the drawing in `fast`, and the wrapped lines without their indents,
//! for a miette handler with wrapping off, which only puts the indents back. Each text is
//! checked when it is first wrapped (putting the indents back must give textwrap's answer);
//! one that fails has no unindented lines, and its report goes through miette's wrapping
//! handler as before.

use std::collections::HashMap;

use miette::GraphicalTheme;

use crate::diagnostic::Severity;

/// Wrapped texts of one rendering, by the indent they are drawn with.
pub(super) struct Wrapped {
    width: usize,
    error: Indent,
    warning: Indent,
    help: Indent,
}

/// miette's indents for one kind of text, and the texts wrapped with them so far.
struct Indent {
    initial: String,
    subsequent: String,
    texts: HashMap<String, Wrap>,
}

/// One text, wrapped.
pub(super) struct Wrap {
    /// What miette writes for the text: textwrap's lines, indented.
    pub(super) filled: String,
    /// The same lines without their indents, if miette's unwrapped drawing of them gives
    /// `filled` again; `None` for a text that must go through miette's own wrapping.
    pub(super) unindented: Option<String>,
}

impl Wrapped {
    /// The indents of miette's `render_causes` (the message, after the severity icon) and
    /// `render_footer` (the help) for `theme`, at miette's width for them.
    pub(super) fn new(theme: &GraphicalTheme, width: usize) -> Wrapped {
        let styles = &theme.styles;
        let characters = &theme.characters;
        Wrapped {
            width: width.saturating_sub(2),
            error: Indent::new(
                format!("  {} ", styles.error.style(&characters.error)),
                format!("  {} ", styles.error.style(characters.vbar)),
            ),
            warning: Indent::new(
                format!("  {} ", styles.warning.style(&characters.warning)),
                format!("  {} ", styles.warning.style(characters.vbar)),
            ),
            help: Indent::new(
                styles.help.style("  help: ").to_string(),
                "        ".to_owned(),
            ),
        }
    }

    /// A diagnostic's message, wrapped as miette wraps it after the severity's icon.
    pub(super) fn message(&mut self, severity: Severity, text: &str) -> &Wrap {
        let indent = match severity {
            Severity::Error => &mut self.error,
            Severity::Warning => &mut self.warning,
        };
        indent.wrapped(text, self.width)
    }

    /// A diagnostic's help, wrapped as miette wraps it after `help:`.
    pub(super) fn help(&mut self, text: &str) -> &Wrap {
        self.help.wrapped(text, self.width)
    }
}

impl Indent {
    fn new(initial: String, subsequent: String) -> Indent {
        Indent {
            initial,
            subsequent,
            texts: HashMap::new(),
        }
    }

    fn wrapped(&mut self, text: &str, width: usize) -> &Wrap {
        // `entry` would take an owned key for every lookup, and most are hits.
        if !self.texts.contains_key(text) {
            let wrap = wrap(text, &self.initial, &self.subsequent, width);
            self.texts.insert(text.to_owned(), wrap);
        }
        self.texts
            .get(text)
            .expect("the text was wrapped just above if it was not already")
    }
}

/// `text` as miette wraps it, with and without the indents.
fn wrap(text: &str, initial: &str, subsequent: &str, width: usize) -> Wrap {
    // The options of miette's `GraphicalReportHandler::wrap` callers, with its defaults: words
    // are broken, separators and splitters are textwrap's.
    let options = textwrap::Options::new(width)
        .initial_indent(initial)
        .subsequent_indent(subsequent)
        .break_words(true);
    let filled = textwrap::fill(text, options);
    let unindented = unindented(&filled, initial, subsequent);
    Wrap { filled, unindented }
}

/// `filled`'s lines with the indents taken off, if miette's unwrapped drawing of them gives
/// `filled` again.
fn unindented(filled: &str, initial: &str, subsequent: &str) -> Option<String> {
    let mut lines = Vec::new();
    for (idx, line) in filled.split('\n').enumerate() {
        let indent = if idx == 0 { initial } else { subsequent };
        let line = match line.strip_prefix(indent) {
            Some(line) => line,
            None if line == indent.trim_end() => "",
            None => return None,
        };
        lines.push(line);
    }
    let unindented = lines.join("\n");
    (indented(&unindented, initial, subsequent) == filled).then_some(unindented)
}

/// miette's `GraphicalReportHandler::wrap` with wrapping off (miette 7.6.0), restated: each
/// line gets its indent back, trimmed on blank lines.
fn indented(text: &str, initial: &str, subsequent: &str) -> String {
    let mut result = String::with_capacity(2 * text.len());
    let trimmed_indent = subsequent.trim_end();
    for (idx, line) in text.split_terminator('\n').enumerate() {
        if idx > 0 {
            result.push('\n');
        }
        if idx == 0 {
            if line.trim().is_empty() {
                result.push_str(initial.trim_end());
            } else {
                result.push_str(initial);
            }
        } else if line.trim().is_empty() {
            result.push_str(trimmed_indent);
        } else {
            result.push_str(subsequent);
        }
        result.push_str(line);
    }
    if text.ends_with('\n') {
        result.push('\n');
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts that wrap, that do not, with blank lines, long words, trailing spaces and
    /// non-ASCII: each is either pre-wrapped to textwrap's answer or left to miette.
    #[test]
    fn unindented_lines_indent_back_to_textwraps_answer() {
        let texts = [
            "",
            "short",
            "function `analyse` takes `text`; remove this input, or declare it in the function's `input`",
            "first line\nsecond line",
            "para\n\npara after a blank line",
            "trailing space \n  leading spaces",
            "\n",
            "ends with a break\n",
            "a_very_long_word_that_cannot_fit_on_one_line_of_the_terminal_so_textwrap_must_break_it_somewhere",
            "naïve café — déjà vu, with wide 漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字",
            "\ttabs\tin\ttext that is long enough to be wrapped somewhere past the eightieth column",
        ];
        let theme = GraphicalTheme::unicode();
        for width in [10, 40, 80, 200] {
            let mut wrapped = Wrapped::new(&theme, width);
            let indents = [
                (
                    wrapped.warning.initial.clone(),
                    wrapped.warning.subsequent.clone(),
                ),
                (
                    wrapped.help.initial.clone(),
                    wrapped.help.subsequent.clone(),
                ),
            ];
            for text in texts {
                for (initial, subsequent) in &indents {
                    let options = textwrap::Options::new(width.saturating_sub(2))
                        .initial_indent(initial)
                        .subsequent_indent(subsequent);
                    let expected = textwrap::fill(text, options);
                    let wrap = wrap(text, initial, subsequent, width - 2);
                    assert_eq!(wrap.filled, expected, "{text:?}");
                    if let Some(lines) = wrap.unindented {
                        assert_eq!(indented(&lines, initial, subsequent), expected, "{text:?}");
                    }
                }
                // The common case does not fall back.
                if text.bytes().all(|byte| (b' '..=b'~').contains(&byte))
                    && !text.is_empty()
                    && !text.ends_with(' ')
                {
                    let wrap = wrapped.help(text);
                    assert!(wrap.unindented.is_some(), "{text:?} at {width}");
                }
            }
        }
    }
}
