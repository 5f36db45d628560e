//! Text-level edits of JSON files that may hold comments and trailing commas (Claude Code's
//! settings), guided by a real parse (`jsonc-parser`'s AST, which records each node's byte
//! range): takes a file's text and returns the text with one member or element added or
//! removed, every other byte as it was.
//!
//! The invariant: [`remove_item`] is the exact inverse of [`insert_item`]. An insertion goes
//! at the end of its container, right after the last item, as `,` + newline + the last item's
//! indentation + the new item (or `, ` + item on a one-line container); into an empty
//! container, as newline + indentation + item + newline + the closing indentation. Removal
//! recognises these shapes and takes out exactly those bytes; anything else (comments in the
//! way) is removed with its comma only. New text follows the file's newline (`\r\n` or `\n`)
//! and indentation unit.

use std::fmt::Write;
use std::path::Path;

use jsonc_parser::ast::{Array, Object, Value};
use jsonc_parser::common::Range;
use jsonc_parser::{CollectOptions, ParseOptions, parse_to_ast};

use super::SetupError;

/// A JSON value to write, with its members in the order given (unlike `serde_json::Value`,
/// whose map would sort `matcher` after `hooks`).
#[derive(Debug, Clone)]
pub(crate) enum Json {
    Object(Vec<(&'static str, Json)>),
    Array(Vec<Json>),
    String(&'static str),
}

/// Where and why a text is not JSON (with comments).
#[derive(Debug)]
pub(crate) struct ParseFailure {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// The file's conventions, for the text we add.
#[derive(Debug, Clone)]
pub(crate) struct Style {
    pub newline: &'static str,
    pub unit: String,
}

/// What JSON files accept here: standard JSON plus comments and trailing commas, which
/// Claude Code's settings files may hold; not JSON5's other liberties.
fn options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

/// Parses `text`; `Ok(None)` for a text with no value (empty, or only comments).
pub(crate) fn parse(text: &str) -> Result<Option<Value<'_>>, ParseFailure> {
    match parse_to_ast(text, &CollectOptions::default(), &options()) {
        Ok(result) => Ok(result.value),
        Err(error) => {
            let message = error.kind().to_string();
            let mut chars = message.chars();
            let message = match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => message,
            };
            Err(ParseFailure {
                line: error.line_display(),
                column: error.column_display(),
                message,
            })
        }
    }
}

/// The newline and indentation unit of `text`: `\r\n` if it has any, and the leading
/// whitespace of its first indented line (two spaces for a file with none).
pub(crate) fn style(text: &str) -> Style {
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let unit = text
        .lines()
        .skip(1)
        .map(|line| {
            let content = line.trim_start_matches([' ', '\t']);
            line.get(..line.len() - content.len()).unwrap_or("")
        })
        .find(|indent| !indent.is_empty())
        .unwrap_or("  ")
        .to_owned();
    Style { newline, unit }
}

/// The byte range of any value.
pub(crate) fn range(value: &Value<'_>) -> Range {
    match value {
        Value::StringLit(it) => it.range,
        Value::NumberLit(it) => it.range,
        Value::BooleanLit(it) => it.range,
        Value::Object(it) => it.range,
        Value::Array(it) => it.range,
        Value::NullKeyword(it) => it.range,
    }
}

/// The members of an object, as `(name, value)`.
pub(crate) fn member<'a, 'b>(object: &'b Object<'a>, name: &str) -> Option<&'b Value<'a>> {
    object
        .properties
        .iter()
        .find(|prop| prop.name.as_str() == name)
        .map(|prop| &prop.value)
}

/// Whether `value` is exactly `expected`: the same members (in any order, none more), the same
/// elements, the same strings.
pub(crate) fn same(value: &Value<'_>, expected: &Json) -> bool {
    match (value, expected) {
        (Value::StringLit(it), Json::String(s)) => it.value == *s,
        (Value::Object(object), Json::Object(members)) => {
            object.properties.len() == members.len()
                && members
                    .iter()
                    .all(|(name, json)| member(object, name).is_some_and(|v| same(v, json)))
        }
        (Value::Array(array), Json::Array(elements)) => {
            array.elements.len() == elements.len()
                && array
                    .elements
                    .iter()
                    .zip(elements)
                    .all(|(value, json)| same(value, json))
        }
        _ => false,
    }
}

/// The text of `container` (an object or array spanning `container`, whose items span
/// `items`) with `item` added at its end. `item` renders the new item given its indentation
/// (`None` on a one-line container). `None` if a range does not fall in `text` (never for
/// ranges from a parse of `text`).
pub(crate) fn insert_item(
    text: &str,
    container: Range,
    items: &[Range],
    style: &Style,
    item: impl Fn(Option<&str>) -> String,
) -> Option<String> {
    match (items.first(), items.last()) {
        (Some(first), Some(last)) => {
            let before_first = text.get(container.start + 1..first.start)?;
            let inserted = if before_first.contains('\n') {
                let indent = line_indent(text, last.start);
                format!(",{}{indent}{}", style.newline, item(Some(indent)))
            } else {
                format!(", {}", item(None))
            };
            splice(text, last.end, last.end, &inserted)
        }
        _ => {
            let inserted = if text.contains('\n') {
                let outer = line_indent(text, container.start);
                let indent = format!("{outer}{}", style.unit);
                format!(
                    "{nl}{indent}{}{nl}{outer}",
                    item(Some(&indent)),
                    nl = style.newline
                )
            } else {
                format!(" {} ", item(None))
            };
            splice(text, container.start + 1, container.start + 1, &inserted)
        }
    }
}

/// The text with item `index` of `container` removed, undoing [`insert_item`] byte for byte
/// when the item is where and as insert put it. `None` if `index` is out of range.
pub(crate) fn remove_item(
    text: &str,
    container: Range,
    items: &[Range],
    index: usize,
    style: &Style,
) -> Option<String> {
    let this = *items.get(index)?;
    if let Some(previous) = index.checked_sub(1).and_then(|i| items.get(i)) {
        let gap = text.get(previous.end..this.start)?;
        if gap.strip_prefix(',').is_some_and(is_blank) {
            // As insert wrote it: `,` newline indentation item.
            return splice(text, previous.end, this.end, "");
        }
        // Comments between: keep them, take the comma and the item.
        let comma = previous.end + find_comma(gap)?;
        return splice(text, comma, this.end, "");
    }
    if let Some(next) = items.get(index + 1) {
        let gap = text.get(this.end..next.start)?;
        if gap.strip_prefix(',').is_some_and(is_blank) {
            return splice(text, this.start, next.start, "");
        }
        let comma = this.end + find_comma(gap)?;
        return splice(text, this.start, comma + 1, "");
    }
    // The only item.
    let open = container.start + 1;
    let close = container.end.checked_sub(1)?;
    let before = text.get(open..this.start)?;
    let after = text.get(this.end..close)?;
    let (after, comma) = match strip_comma(after) {
        Some(rest) => (rest, after.len() - rest.len()),
        None => (after, 0),
    };
    if !is_blank(before) {
        // Comments before it: take the item (and a trailing comma) only.
        return splice(text, this.start, this.end + comma, "");
    }
    let outer = line_indent(text, container.start);
    let closing = format!("{}{outer}", style.newline);
    let tail = if before.contains('\n') && after.starts_with(&closing) {
        closing.len()
    } else if !before.contains('\n') && after.starts_with(' ') {
        1
    } else {
        0
    };
    splice(text, open, this.end + comma + tail, "")
}

/// `text` with member `name: value` added at the end of `object`.
pub(crate) fn insert_member(
    text: &str,
    object: &Object<'_>,
    name: &str,
    value: &Json,
    style: &Style,
) -> Option<String> {
    let items: Vec<Range> = object.properties.iter().map(|prop| prop.range).collect();
    insert_item(text, object.range, &items, style, |indent| {
        format!("{}: {}", quote(name), render(value, indent, style))
    })
}

/// `text` without member `name` of `object` (unchanged if there is none).
pub(crate) fn remove_member(
    text: &str,
    object: &Object<'_>,
    name: &str,
    style: &Style,
) -> Option<String> {
    let items: Vec<Range> = object.properties.iter().map(|prop| prop.range).collect();
    match object
        .properties
        .iter()
        .position(|prop| prop.name.as_str() == name)
    {
        Some(index) => remove_item(text, object.range, &items, index, style),
        None => Some(text.to_owned()),
    }
}

/// `text` with `value` added at the end of `array`.
pub(crate) fn append_element(
    text: &str,
    array: &Array<'_>,
    value: &Json,
    style: &Style,
) -> Option<String> {
    let items: Vec<Range> = array.elements.iter().map(range).collect();
    insert_item(text, array.range, &items, style, |indent| {
        render(value, indent, style)
    })
}

/// `text` without element `index` of `array`.
pub(crate) fn remove_element(
    text: &str,
    array: &Array<'_>,
    index: usize,
    style: &Style,
) -> Option<String> {
    let items: Vec<Range> = array.elements.iter().map(range).collect();
    remove_item(text, array.range, &items, index, style)
}

/// The source text of a range (`""` if it does not fall in `text`).
pub(crate) fn slice(text: &str, range: Range) -> &str {
    text.get(range.start..range.end).unwrap_or("")
}

/// Renders `value` at indentation `indent` (one line when `None`).
pub(crate) fn render(value: &Json, indent: Option<&str>, style: &Style) -> String {
    let mut out = String::new();
    write_value(&mut out, value, indent, style);
    out
}

fn write_value(out: &mut String, value: &Json, indent: Option<&str>, style: &Style) {
    match value {
        Json::String(s) => out.push_str(&quote(s)),
        Json::Object(members) => {
            let items = members.iter().map(|(name, value)| (Some(*name), value));
            write_items(out, ('{', '}'), items, indent, style);
        }
        Json::Array(elements) => {
            let items = elements.iter().map(|value| (None, value));
            write_items(out, ('[', ']'), items, indent, style);
        }
    }
}

fn write_items<'a>(
    out: &mut String,
    (open, close): (char, char),
    items: impl ExactSizeIterator<Item = (Option<&'a str>, &'a Json)>,
    indent: Option<&str>,
    style: &Style,
) {
    out.push(open);
    if items.len() == 0 {
        out.push(close);
        return;
    }
    let inner = indent.map(|indent| format!("{indent}{}", style.unit));
    for (i, (name, value)) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        match &inner {
            Some(inner) => {
                let _ = write!(out, "{}{inner}", style.newline);
            }
            // One line: `{ "a": 1 }` but `["a"]`, as formatters write them.
            None if open == '{' || i > 0 => out.push(' '),
            None => {}
        }
        if let Some(name) = name {
            let _ = write!(out, "{}: ", quote(name));
        }
        write_value(out, value, inner.as_deref(), style);
    }
    match indent {
        Some(indent) => {
            let _ = write!(out, "{}{indent}", style.newline);
        }
        None if open == '{' => out.push(' '),
        None => {}
    }
    out.push(close);
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// The whitespace that starts the line holding byte `at`, up to its first other character.
fn line_indent(text: &str, at: usize) -> &str {
    let line_start = text
        .get(..at)
        .and_then(|head| head.rfind('\n'))
        .map_or(0, |newline| newline + 1);
    let line = text.get(line_start..).unwrap_or("");
    let content = line.trim_start_matches([' ', '\t']);
    line.get(..line.len() - content.len()).unwrap_or("")
}

fn is_blank(text: &str) -> bool {
    text.chars().all(char::is_whitespace)
}

/// `text` after a comma that only whitespace precedes.
fn strip_comma(text: &str) -> Option<&str> {
    text.trim_start().strip_prefix(',')
}

/// The offset of the comma in a gap between two items, which holds only whitespace,
/// comments and that comma.
fn find_comma(gap: &str) -> Option<usize> {
    let mut rest = gap;
    while let Some(c) = rest.chars().next() {
        let at = gap.len() - rest.len();
        if c == ',' {
            return Some(at);
        }
        rest = if let Some(comment) = rest.strip_prefix("//") {
            comment
                .find('\n')
                .and_then(|n| comment.get(n..))
                .unwrap_or("")
        } else if let Some(comment) = rest.strip_prefix("/*") {
            comment.find("*/").and_then(|n| comment.get(n + 2..))?
        } else {
            rest.get(c.len_utf8()..)?
        };
    }
    None
}

fn splice(text: &str, start: usize, end: usize, with: &str) -> Option<String> {
    Some(format!("{}{with}{}", text.get(..start)?, text.get(end..)?))
}

/// The text of a JSON file that does not exist yet: the base every created file is built
/// on, and what a created file comes back to when uninstall has taken out what it added.
pub(crate) const EMPTY_FILE: &str = "{}\n";

/// The top-level object of the JSON file at `path`.
pub(crate) fn root_object<'a>(path: &Path, text: &'a str) -> Result<Object<'a>, SetupError> {
    match parse(text) {
        Ok(Some(Value::Object(object))) => Ok(object),
        Ok(_) => Err(SetupError::NotAnObject {
            path: path.to_owned(),
            what: "the top level".to_owned(),
        }),
        Err(failure) => Err(SetupError::InvalidJson {
            path: path.to_owned(),
            line: failure.line,
            column: failure.column,
            message: failure.message,
        }),
    }
}

/// Member `name` of `object` as an object; `None` if it is absent, an error if it is not an
/// object.
pub(crate) fn object_member<'a, 'b>(
    path: &Path,
    object: &'b Object<'a>,
    name: &str,
) -> Result<Option<&'b Object<'a>>, SetupError> {
    match member(object, name) {
        None => Ok(None),
        Some(Value::Object(inner)) => Ok(Some(inner)),
        Some(_) => Err(SetupError::NotAnObject {
            path: path.to_owned(),
            what: format!("`{name}`"),
        }),
    }
}

/// Member `name` of `object` as an array; `None` if it is absent, an error if it is not an
/// array.
pub(crate) fn array_member<'a, 'b>(
    path: &Path,
    object: &'b Object<'a>,
    name: &str,
) -> Result<Option<&'b Array<'a>>, SetupError> {
    match member(object, name) {
        None => Ok(None),
        Some(Value::Array(inner)) => Ok(Some(inner)),
        Some(_) => Err(SetupError::NotAnArray {
            path: path.to_owned(),
            what: format!("`{name}`"),
        }),
    }
}

/// Checks an edited text before it is written: it must still be a JSON object.
pub(crate) fn verified(path: &Path, edited: Option<String>) -> Result<String, SetupError> {
    let edited = edited.ok_or_else(|| SetupError::EditBroke {
        path: path.to_owned(),
        message: "a parsed range fell outside the text".to_owned(),
    })?;
    match parse(&edited) {
        Ok(Some(Value::Object(_))) => Ok(edited),
        Ok(_) => Err(SetupError::EditBroke {
            path: path.to_owned(),
            message: "the top level is no longer an object".to_owned(),
        }),
        Err(failure) => Err(SetupError::EditBroke {
            path: path.to_owned(),
            message: format!(
                "{} at line {}, column {}",
                failure.message, failure.line, failure.column
            ),
        }),
    }
}
