//! A vocabulary file's YAML → the [`Vocabulary`] that `vocabulary_compliance` scans for.
//!
//! Takes the text of `contracts/vocabulary.yaml` (read by the expression VM, under the project
//! root); gives its canonical names, each with the aliases it rejects and why, or the
//! reference's error message word for word (`vocabulary.yaml schema error: …`, the values shown
//! as Python's `repr` shows them). The expression grammar knows no YAML, so the hosts that
//! evaluate expressions (the runtime, `stratumc eval`) hand it [`READER`]. Pure: no IO.
//!
//! The YAML is read by the spec's own front end ([`crate::syntax::tree`]: PyYAML's types,
//! aliases within a budget), so a syntax error reads `vocabulary.yaml malformed: <our message>
//! at line L, column C` rather than PyYAML's words, and a duplicate key is malformed (PyYAML
//! keeps the last).

use std::collections::{HashMap, HashSet};

use stratum_grammar::{Canonical, Vocabulary, VocabularyReader};

use crate::source::{FileId, SourceFile};
use crate::syntax::tree::{self, Node, NodeKind};

/// The reader the expression VM calls for `vocabulary_compliance`.
pub const READER: VocabularyReader = VocabularyReader(read);

/// The fields an entry may have.
const ALLOWED_FIELDS: [&str; 2] = ["reason", "reject"];

/// Reads a vocabulary: no entries for an empty or comments-only file.
pub fn read(text: &str) -> Result<Vocabulary, String> {
    let src = SourceFile::new(FileId(0), "vocabulary.yaml", text);
    let loaded = tree::load(&src);
    if let Some(error) = loaded.diagnostics.iter().find(|d| d.is_error()) {
        let at = src.line_col(error.primary.span.start as usize);
        return Err(format!(
            "vocabulary.yaml malformed: {} at line {}, column {}",
            error.message, at.line, at.column
        ));
    }
    let entries = match loaded.root.as_ref().map(|root| &root.kind) {
        None | Some(NodeKind::Null) => return Ok(Vocabulary::default()),
        Some(NodeKind::Map(entries)) => entries,
        Some(_) => {
            return Err(schema_error("top-level must be a mapping".to_owned()));
        }
    };

    let mut vocabulary = Vocabulary::default();
    for entry in entries {
        let canonical = match entry.key.as_str() {
            Some(name) if is_identifier(name) => name,
            _ => {
                return Err(schema_error(format!(
                    "canonical name {} must match identifier syntax (letters, digits, \
                     underscore; starts with letter or underscore)",
                    repr(&entry.key)
                )));
            }
        };
        let shown = py_str(canonical);
        let NodeKind::Map(fields) = &entry.value.kind else {
            return Err(schema_error(format!(
                "entry for {shown} must be a mapping, got {}",
                type_name(&entry.value)
            )));
        };
        let mut unknown: Vec<String> = fields
            .iter()
            .filter(|field| {
                field
                    .key
                    .as_str()
                    .is_none_or(|name| !ALLOWED_FIELDS.contains(&name))
            })
            .map(|field| repr(&field.key))
            .collect();
        if !unknown.is_empty() {
            unknown.sort();
            return Err(schema_error(format!(
                "entry for {shown} has unknown fields: [{}]. Allowed: ['reason', 'reject']",
                unknown.join(", ")
            )));
        }
        let field = |name: &str| {
            fields
                .iter()
                .find(|field| field.key.as_str() == Some(name))
                .map(|field| &field.value)
        };
        let reject = match field("reject").map(|node| &node.kind) {
            Some(NodeKind::Seq(aliases)) if !aliases.is_empty() => aliases,
            _ => {
                return Err(schema_error(format!(
                    "entry for {shown} must have non-empty 'reject' list"
                )));
            }
        };
        let mut aliases = Vec::with_capacity(reject.len());
        for alias in reject {
            let Some(name) = alias.as_str().filter(|name| is_identifier(name)) else {
                return Err(schema_error(format!(
                    "alias {} in {shown} must match identifier syntax",
                    repr(alias)
                )));
            };
            if name == canonical {
                return Err(schema_error(format!(
                    "canonical {shown} cannot reject itself"
                )));
            }
            aliases.push(name.to_owned());
        }
        let reason = match field("reason").map(|node| &node.kind) {
            None | Some(NodeKind::Null) => String::new(),
            Some(NodeKind::Str(reason)) => reason.value.clone(),
            Some(_) => {
                return Err(schema_error(format!("reason for {shown} must be a string")));
            }
        };
        vocabulary.entries.push(Canonical {
            name: canonical.to_owned(),
            reject: aliases,
            reason,
        });
    }

    // Across entries: an alias is no canonical name, and only one canonical rejects it.
    let canonicals: HashSet<&str> = vocabulary
        .entries
        .iter()
        .map(|entry| entry.name.as_str())
        .collect();
    let mut rejected_by: HashMap<&str, &str> = HashMap::new();
    for entry in &vocabulary.entries {
        for alias in &entry.reject {
            if canonicals.contains(alias.as_str()) {
                return Err(schema_error(format!(
                    "{} is both a canonical and a rejected alias for {}",
                    py_str(alias),
                    py_str(&entry.name)
                )));
            }
            if let Some(first) = rejected_by.get(alias.as_str()) {
                return Err(schema_error(format!(
                    "alias {} is rejected by multiple canonicals ({first}, {})",
                    py_str(alias),
                    entry.name
                )));
            }
            rejected_by.insert(alias, &entry.name);
        }
    }
    Ok(vocabulary)
}

fn schema_error(detail: String) -> String {
    format!("vocabulary.yaml schema error: {detail}")
}

/// The reference's identifier syntax: `^[A-Za-z_][A-Za-z0-9_]*$`.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Python's `type(value).__name__` of what PyYAML loads.
fn type_name(node: &Node) -> &'static str {
    match node.kind {
        NodeKind::Null | NodeKind::Invalid => "NoneType",
        NodeKind::Bool(_) => "bool",
        NodeKind::Int(_) => "int",
        NodeKind::Float(_) => "float",
        NodeKind::Str(_) => "str",
        NodeKind::Seq(_) => "list",
        NodeKind::Map(_) => "dict",
    }
}

/// Python's `repr` of what PyYAML loads.
fn repr(node: &Node) -> String {
    match &node.kind {
        NodeKind::Null | NodeKind::Invalid => "None".to_owned(),
        NodeKind::Bool(true) => "True".to_owned(),
        NodeKind::Bool(false) => "False".to_owned(),
        NodeKind::Int(value) => value.to_string(),
        NodeKind::Float(value) => stratum_grammar::print::float_literal(*value),
        NodeKind::Str(text) => py_str(&text.value),
        NodeKind::Seq(items) => {
            let items: Vec<String> = items.iter().map(repr).collect();
            format!("[{}]", items.join(", "))
        }
        NodeKind::Map(entries) => {
            let entries: Vec<String> = entries
                .iter()
                .map(|entry| format!("{}: {}", repr(&entry.key), repr(&entry.value)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
    }
}

/// Python's `repr` of a string: single quotes unless it holds one and no double quote.
fn py_str(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        read(text).unwrap_err()
    }

    #[test]
    fn a_vocabulary_keeps_the_files_order() {
        let vocabulary = read(
            "# terms\ncolor:\n  reject: [colour, hue_value]\n  reason: US spelling\nsize:\n  reject:\n    - sz\n",
        )
        .unwrap();
        assert_eq!(
            vocabulary.entries,
            vec![
                Canonical {
                    name: "color".into(),
                    reject: vec!["colour".into(), "hue_value".into()],
                    reason: "US spelling".into(),
                },
                Canonical {
                    name: "size".into(),
                    reject: vec!["sz".into()],
                    reason: String::new(),
                },
            ]
        );
    }

    #[test]
    fn nothing_to_read_is_an_empty_vocabulary() {
        for text in ["", "# only a comment\n", "~\n"] {
            assert_eq!(read(text).unwrap(), Vocabulary::default(), "{text:?}");
        }
    }

    #[test]
    fn schema_errors_are_the_references_word_for_word() {
        let cases = [
            (
                "- a\n",
                "vocabulary.yaml schema error: top-level must be a mapping",
            ),
            (
                "1x: {reject: [a]}\n",
                "vocabulary.yaml schema error: canonical name '1x' must match identifier \
                 syntax (letters, digits, underscore; starts with letter or underscore)",
            ),
            (
                "color: [a]\n",
                "vocabulary.yaml schema error: entry for 'color' must be a mapping, got list",
            ),
            (
                "color: {reject: [a], why: x, also: y}\n",
                "vocabulary.yaml schema error: entry for 'color' has unknown fields: \
                 ['also', 'why']. Allowed: ['reason', 'reject']",
            ),
            (
                "color: {reject: []}\n",
                "vocabulary.yaml schema error: entry for 'color' must have non-empty \
                 'reject' list",
            ),
            (
                "color: {reason: x}\n",
                "vocabulary.yaml schema error: entry for 'color' must have non-empty \
                 'reject' list",
            ),
            (
                "color: {reject: [3]}\n",
                "vocabulary.yaml schema error: alias 3 in 'color' must match identifier syntax",
            ),
            (
                "color: {reject: [color]}\n",
                "vocabulary.yaml schema error: canonical 'color' cannot reject itself",
            ),
            (
                "color: {reject: [a], reason: 5}\n",
                "vocabulary.yaml schema error: reason for 'color' must be a string",
            ),
            (
                "color: {reject: [size]}\nsize: {reject: [sz]}\n",
                "vocabulary.yaml schema error: 'size' is both a canonical and a rejected \
                 alias for 'color'",
            ),
            (
                "color: {reject: [c]}\ncolour: {reject: [c]}\n",
                "vocabulary.yaml schema error: alias 'c' is rejected by multiple canonicals \
                 (color, colour)",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(error(text), expected, "{text:?}");
        }
    }

    #[test]
    fn malformed_yaml_says_where() {
        let message = error("color: {reject: [a\n");
        assert!(
            message.starts_with("vocabulary.yaml malformed: ") && message.contains("at line"),
            "{message}"
        );
    }
}
