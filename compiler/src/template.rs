//! Intent templates of version 0.3 steps: `"Port {path}: {task.description}"`.
//!
//! One grammar for every template (the reference has two dialects and a silent fallback that
//! sends a template unrendered): literal text; `{name}` or `{name.field.…}`, a placeholder
//! whose parts are identifiers; `{{` and `}}` for literal braces. Nothing else is accepted
//! inside braces: no format specs (`{x:>4}`), conversions (`{x!r}`) or indexing (`{x[0]}`),
//! each reported with the position of the offending character. [`parse`] works on the
//! decoded string; ranges are byte offsets in it, which the caller maps into the file.
//! What names a placeholder may use, and the fields they have, is the middle end's business.

use std::ops::Range;

/// A template split into literal text and placeholders.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Template {
    pub parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// Text copied as is (`{{` and `}}` already turned into single braces).
    Literal(String),
    Placeholder(Placeholder),
}

/// `{a.b.c}`: a name and the fields read from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placeholder {
    /// The identifiers, in order: `["task", "description"]`.
    pub path: Vec<String>,
    /// Where each identifier stands in the decoded template.
    pub ranges: Vec<Range<usize>>,
    /// The whole placeholder, braces included.
    pub range: Range<usize>,
}

/// A template that does not follow the grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    pub range: Range<usize>,
    pub message: String,
    pub label: &'static str,
    pub help: String,
    /// A replacement for `range` that makes the template valid, when one is certain.
    pub fix: Option<String>,
}

impl Template {
    /// Every placeholder, in order.
    pub fn placeholders(&self) -> impl Iterator<Item = &Placeholder> {
        self.parts.iter().filter_map(|part| match part {
            Part::Placeholder(placeholder) => Some(placeholder),
            Part::Literal(_) => None,
        })
    }
}

/// Parses `text`; on errors, the template is whatever parsed around them.
pub fn parse(text: &str) -> (Template, Vec<TemplateError>) {
    let mut parts = Vec::new();
    let mut errors = Vec::new();
    let mut literal = String::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'{' if bytes.get(at + 1) == Some(&b'{') => {
                literal.push('{');
                at += 2;
            }
            b'}' if bytes.get(at + 1) == Some(&b'}') => {
                literal.push('}');
                at += 2;
            }
            b'}' => {
                errors.push(TemplateError {
                    range: at..at + 1,
                    message: "a lone `}` in a template".to_owned(),
                    label: "lone brace",
                    help: "write `}}` for a literal brace".to_owned(),
                    fix: Some("}}".to_owned()),
                });
                at += 1;
            }
            b'{' => {
                let end = match text.get(at + 1..).and_then(|rest| rest.find('}')) {
                    Some(offset) => at + 1 + offset,
                    None => {
                        errors.push(TemplateError {
                            range: at..text.len(),
                            message: "a placeholder is not closed".to_owned(),
                            label: "no closing `}`",
                            help: "close it with `}`, or write `{{` for a literal brace".to_owned(),
                            fix: None,
                        });
                        break;
                    }
                };
                match placeholder(text, at, end) {
                    Ok(placeholder) => {
                        if !literal.is_empty() {
                            parts.push(Part::Literal(std::mem::take(&mut literal)));
                        }
                        parts.push(Part::Placeholder(placeholder));
                    }
                    Err(error) => errors.push(error),
                }
                at = end + 1;
            }
            _ => {
                // Copy up to the next brace at once; braces are ASCII, so this is a char boundary.
                let next = text
                    .get(at..)
                    .and_then(|rest| rest.find(['{', '}']))
                    .map_or(text.len(), |offset| at + offset);
                literal.push_str(text.get(at..next).unwrap_or_default());
                at = next;
            }
        }
    }
    if !literal.is_empty() {
        parts.push(Part::Literal(literal));
    }
    (Template { parts }, errors)
}

/// The placeholder between the `{` at `open` and the `}` at `close`.
fn placeholder(text: &str, open: usize, close: usize) -> Result<Placeholder, TemplateError> {
    let inner = text.get(open + 1..close).unwrap_or_default();
    let whole = open..close + 1;
    if inner.trim().is_empty() {
        return Err(TemplateError {
            range: whole,
            message: "an empty placeholder".to_owned(),
            label: "names nothing",
            help: "name a field, as in `{description}`, or write `{{}}` for literal braces"
                .to_owned(),
            fix: None,
        });
    }
    let mut path = Vec::new();
    let mut ranges = Vec::new();
    let mut start = open + 1;
    for segment in inner.split('.') {
        let end = start + segment.len();
        if !is_identifier(segment) {
            return Err(bad_segment(text, start, end));
        }
        path.push(segment.to_owned());
        ranges.push(start..end);
        start = end + 1;
    }
    Ok(Placeholder {
        path,
        ranges,
        range: whole,
    })
}

/// Why one part of a placeholder is not an identifier.
fn bad_segment(text: &str, start: usize, end: usize) -> TemplateError {
    let segment = text.get(start..end).unwrap_or_default();
    let offending = segment
        .char_indices()
        .find(|&(index, c)| {
            !(c == '_' || c.is_ascii_alphabetic() || index > 0 && c.is_ascii_digit())
        })
        .map_or(start..end, |(index, c)| {
            start + index..start + index + c.len_utf8()
        });
    let (message, help) = match text.get(offending.clone()).unwrap_or_default() {
        "" => (
            "a placeholder has an empty field name".to_owned(),
            "write the field after the dot, as in `{task.description}`".to_owned(),
        ),
        ":" | "!" => (
            "format specs and conversions are not supported in templates".to_owned(),
            "write the field alone, as in `{name}`: strings are inserted as they are, other values as compact JSON".to_owned(),
        ),
        "[" => (
            "indexing is not supported in templates".to_owned(),
            "name a field, as in `{item.name}`; a list is inserted as compact JSON".to_owned(),
        ),
        " " => (
            "a placeholder holds a space".to_owned(),
            "a placeholder is a field name, as in `{description}`; write `{{` and `}}` for literal braces".to_owned(),
        ),
        other => (
            format!("`{other}` cannot stand in a placeholder"),
            "a placeholder is a name and its fields, as in `{task.description}`; write `{{` and `}}` for literal braces".to_owned(),
        ),
    };
    TemplateError {
        range: if offending.is_empty() {
            start.saturating_sub(1)..end
        } else {
            offending
        },
        message,
        label: "not a field name",
        help,
        fix: None,
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|first| first == '_' || first.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn paths(text: &str) -> Vec<String> {
        let (template, errors) = parse(text);
        assert!(errors.is_empty(), "{errors:?}");
        template
            .placeholders()
            .map(|placeholder| placeholder.path.join("."))
            .collect()
    }

    #[test]
    // A placeholder's ranges are a list of ranges, one per identifier; here there is one.
    #[allow(clippy::single_range_in_vec_init)]
    fn placeholders_and_literal_braces_are_read() {
        assert_eq!(
            paths("Task {id}: {task.description}"),
            ["id", "task.description"]
        );
        let (template, _) = parse("a {{b}} {c} d");
        assert_eq!(
            template.parts,
            [
                Part::Literal("a {b} ".to_owned()),
                Part::Placeholder(Placeholder {
                    path: vec!["c".to_owned()],
                    ranges: vec![9..10],
                    range: 8..11,
                }),
                Part::Literal(" d".to_owned()),
            ]
        );
        assert_eq!(paths("{{}} only braces"), Vec::<String>::new());
        let (template, _) = parse("ünïcode {x}");
        let placeholder = template.placeholders().next().unwrap();
        assert_eq!(&"ünïcode {x}"[placeholder.ranges[0].clone()], "x");
        assert!(!parse("{ä}").1.is_empty(), "identifiers are ASCII");
    }

    #[test]
    fn each_mistake_is_reported_where_it_stands() {
        let cases: [(&str, Range<usize>, &str); 8] = [
            ("a } b", 2..3, "a lone `}` in a template"),
            ("a {b", 2..4, "a placeholder is not closed"),
            ("{}", 0..2, "an empty placeholder"),
            ("{ }", 0..3, "an empty placeholder"),
            (
                "{x:>4}",
                2..3,
                "format specs and conversions are not supported in templates",
            ),
            (
                "{x!r}",
                2..3,
                "format specs and conversions are not supported in templates",
            ),
            ("{f[0]}", 2..3, "indexing is not supported in templates"),
            ("{a..b}", 2..3, "a placeholder has an empty field name"),
        ];
        for (text, range, message) in cases {
            let (_, errors) = parse(text);
            assert_eq!(errors.len(), 1, "{text}: {errors:?}");
            assert_eq!(errors[0].range, range, "{text}");
            assert_eq!(errors[0].message, message, "{text}");
        }
    }

    #[test]
    fn hostile_templates_end() {
        for text in [
            "{",
            "}",
            "{{{",
            "}}}",
            "{\u{0}}",
            "{é}",
            &"{a}".repeat(10_000),
        ] {
            let _ = parse(text);
        }
    }
}
