//! `output_schema` meta-validation: every step's inline JSON Schema checked against the draft
//! 2020-12 meta-schema.
//!
//! Takes the AST; reports E0071 for each place where a step's `output_schema` breaks the
//! meta-schema, on the offending key's value (`type: strng` underlines `strng`, with a
//! did-you-mean and a fix), in words of our own for the common cases (an unknown type name, a
//! keyword's value of the wrong type, `required` that is not a list of names) and jsonschema's
//! otherwise. The YAML tree becomes a `serde_json::Value` with a table from each value's JSON
//! pointer to its spans, which is how an error's instance path finds its place in the file.
//!
//! Invariants: a node the front end already reported (`NodeKind::Invalid`) is left out and
//! nothing is said about it; at most one diagnostic per JSON pointer; work is linear in the
//! schema (the front end caps nesting, so the conversion's recursion is bounded). Only the
//! meta-schema is checked: no `$ref` is resolved, nothing is fetched.

use std::collections::{HashMap, HashSet};

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::{Map, Number, Value};

use crate::diagnostic::{Code, Diagnostic, backticked, did_you_mean};
use crate::sema::json_schema::python_float;
use crate::sema::symbols::flow_steps;
use crate::source::Span;
use crate::syntax::ast::Ast;
use crate::syntax::tree::{Node, NodeKind};

/// The names JSON Schema's `type` accepts.
pub const JSON_TYPES: &[&str] = &[
    "array", "boolean", "integer", "null", "number", "object", "string",
];

/// Names from YAML, Python or our contracts that mean a JSON type.
const TYPE_ALIASES: &[(&str, &str)] = &[
    ("str", "string"),
    ("int", "integer"),
    ("float", "number"),
    ("bool", "boolean"),
    ("list", "array"),
    ("dict", "object"),
    ("none", "null"),
];

/// Reports E0071 for every step `output_schema` that is not a valid draft 2020-12 schema.
pub fn check_output_schemas(ast: &Ast, diagnostics: &mut Vec<Diagnostic>) {
    for flow in &ast.flows {
        for step in flow_steps(flow) {
            if let Some(schema) = &step.output_schema {
                check_output_schema(&schema.value, diagnostics);
            }
        }
    }
}

/// Where a JSON value of the converted schema stands in the file.
#[derive(Clone, Copy, Debug)]
struct Place {
    value: Span,
}

/// Checks one `output_schema` mapping.
pub fn check_output_schema(node: &Node, diagnostics: &mut Vec<Diagnostic>) {
    let mut places = HashMap::new();
    let mut pointer = String::new();
    let Some(schema) = convert(node, &mut pointer, &mut places, diagnostics) else {
        return;
    };
    let validator = jsonschema::draft202012::meta::validator();
    let mut reported: HashSet<String> = HashSet::new();
    for error in validator.iter_errors(&schema) {
        let path = error.instance_path().as_str().to_owned();
        // Beneath a place already reported, the parent's message covers it.
        let covered = path
            .match_indices('/')
            .filter_map(|(at, _)| path.get(..at))
            .chain([path.as_str()])
            .any(|prefix| reported.contains(prefix));
        if covered {
            continue;
        }
        let place = places
            .get(&path)
            .copied()
            .unwrap_or(Place { value: node.span });
        let diagnostic = describe(&path, error.kind(), error.instance(), place, &places)
            .unwrap_or_else(|| {
                Diagnostic::new(
                    Code::E0071,
                    format!(
                        "invalid JSON Schema: {}",
                        lowercase_first(&error.to_string())
                    ),
                    place.value,
                    "invalid here",
                )
                .help("see the JSON Schema draft 2020-12 reference for this keyword")
            });
        reported.insert(path);
        diagnostics.push(diagnostic);
    }
}

/// A YAML value as JSON, the way `output_schema`s are read; `None` when it cannot be (an
/// invalid node, or a float that is not finite, which checking reported).
pub fn to_json(node: &Node) -> Option<Value> {
    let mut ignored = Vec::new();
    convert(node, &mut String::new(), &mut HashMap::new(), &mut ignored)
}

/// YAML → JSON, recording each value's place under its JSON pointer. `None` for a node left
/// out (invalid, or not representable in JSON, which is reported).
fn convert(
    node: &Node,
    pointer: &mut String,
    places: &mut HashMap<String, Place>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Value> {
    let value = match &node.kind {
        NodeKind::Invalid => return None,
        NodeKind::Null => Value::Null,
        NodeKind::Bool(b) => Value::Bool(*b),
        NodeKind::Int(i) => Value::from(*i),
        NodeKind::Float(f) => match Number::from_f64(*f) {
            Some(number) => Value::Number(number),
            None => {
                diagnostics.push(
                    Diagnostic::new(
                        Code::E0071,
                        format!("`{}` is not a JSON number", python_float(*f)),
                        node.span,
                        "not finite",
                    )
                    .help("JSON has no NaN or infinity; write a finite number or leave the keyword out"),
                );
                return None;
            }
        },
        NodeKind::Str(s) => Value::String(s.value.clone()),
        NodeKind::Seq(items) => {
            let mut values = Vec::with_capacity(items.len());
            for item in items {
                let length = pointer.len();
                pointer.push('/');
                pointer.push_str(&values.len().to_string());
                let converted = convert(item, pointer, places, diagnostics);
                pointer.truncate(length);
                values.extend(converted);
            }
            Value::Array(values)
        }
        NodeKind::Map(entries) => {
            let mut map = Map::new();
            for entry in entries {
                let name = match &entry.key.kind {
                    NodeKind::Str(s) => s.value.clone(),
                    // As Python's json.dumps writes non-string keys.
                    NodeKind::Int(i) => i.to_string(),
                    NodeKind::Float(f) => python_float(*f),
                    NodeKind::Bool(b) => b.to_string(),
                    NodeKind::Null => "null".to_owned(),
                    NodeKind::Invalid => continue,
                    NodeKind::Seq(_) | NodeKind::Map(_) => {
                        diagnostics.push(
                            Diagnostic::new(
                                Code::E0071,
                                "a JSON Schema key must be a string",
                                entry.key.span,
                                format!("this is {}", entry.key.kind_name()),
                            )
                            .help("write the key as a string"),
                        );
                        continue;
                    }
                };
                let length = pointer.len();
                pointer.push('/');
                pointer.push_str(&name.replace('~', "~0").replace('/', "~1"));
                let converted = convert(&entry.value, pointer, places, diagnostics);
                pointer.truncate(length);
                if let Some(value) = converted {
                    map.insert(name, value);
                }
            }
            Value::Object(map)
        }
    };
    places.insert(pointer.clone(), Place { value: node.span });
    Some(value)
}

/// Our words for the common errors; `None` leaves jsonschema's.
fn describe(
    path: &str,
    kind: &ValidationErrorKind,
    instance: &Value,
    place: Place,
    places: &HashMap<String, Place>,
) -> Option<Diagnostic> {
    let segments: Vec<String> = path
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    let last = segments.last().map(String::as_str);
    let parent = segments
        .len()
        .checked_sub(2)
        .and_then(|i| segments.get(i))
        .map(String::as_str);

    // `type: strng`, `type: [string, nul]`.
    if last == Some("type") || (parent == Some("type") && last.is_some_and(is_index)) {
        match instance {
            Value::String(name) if !JSON_TYPES.contains(&name.as_str()) => {
                return Some(unknown_type(name, place.value));
            }
            Value::Array(names) => {
                let bad = names.iter().enumerate().find_map(|(i, name)| match name {
                    Value::String(n) if JSON_TYPES.contains(&n.as_str()) => None,
                    other => Some((i, other)),
                })?;
                let at = places
                    .get(&format!("{path}/{}", bad.0))
                    .map_or(place.value, |p| p.value);
                return Some(match bad.1 {
                    Value::String(name) => unknown_type(name, at),
                    other => type_must_be(other, at),
                });
            }
            Value::String(_) => {}
            other => return Some(type_must_be(other, place.value)),
        }
    }

    // `required: true`, `required: [1]`.
    if last == Some("required") || (parent == Some("required") && last.is_some_and(is_index)) {
        return Some(
            Diagnostic::new(
                Code::E0071,
                "`required` must be a list of property names",
                place.value,
                format!("this is {}", json_kind(instance)),
            )
            .help("list the names as strings, e.g. `required: [label, confidence]`"),
        );
    }

    let keyword = match (last, parent) {
        (Some(index), Some(parent)) if is_index(index) => format!("the entries of `{parent}`"),
        (Some(last), _) => format!("`{last}`"),
        (None, _) => "the schema".to_owned(),
    };
    match kind {
        ValidationErrorKind::Type { kind } => {
            let expected: Vec<String> = match kind {
                TypeKind::Single(ty) => vec![ty.to_string()],
                TypeKind::Multiple(set) => set.iter().map(|ty| ty.to_string()).collect(),
            };
            let expected = expected
                .iter()
                .map(|ty| json_type_phrase(ty))
                .collect::<Vec<_>>()
                .join(" or ");
            Some(
                Diagnostic::new(
                    Code::E0071,
                    format!("{keyword} must be {expected}, not {}", json_kind(instance)),
                    place.value,
                    format!("this is {}", json_kind(instance)),
                )
                .help(format!("write {expected} here")),
            )
        }
        ValidationErrorKind::Minimum { limit } => Some(
            Diagnostic::new(
                Code::E0071,
                format!("{keyword} must be at least {limit}"),
                place.value,
                "too small",
            )
            .help(format!("write {limit} or more")),
        ),
        _ => None,
    }
}

fn unknown_type(name: &str, span: Span) -> Diagnostic {
    let diagnostic = Diagnostic::new(
        Code::E0071,
        format!("`{name}` is not a JSON Schema type"),
        span,
        "unknown type",
    );
    let suggestion = TYPE_ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .map(|(_, ty)| *ty)
        .or_else(|| did_you_mean(name, JSON_TYPES.iter().copied()));
    match suggestion {
        Some(best) => diagnostic.help(format!("did you mean `{best}`?")).fix(
            format!("replace `{name}` with `{best}`"),
            span,
            best,
        ),
        None => diagnostic.help(format!(
            "the JSON Schema types are {}",
            backticked(JSON_TYPES)
        )),
    }
}

fn type_must_be(value: &Value, span: Span) -> Diagnostic {
    Diagnostic::new(
        Code::E0071,
        format!(
            "`type` must be a type name or a list of them, not {}",
            json_kind(value)
        ),
        span,
        format!("this is {}", json_kind(value)),
    )
    .help(format!("write one of {}", backticked(JSON_TYPES)))
}

fn is_index(segment: &str) -> bool {
    !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit())
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn json_type_phrase(ty: &str) -> &'static str {
    match ty {
        "array" => "a list",
        "boolean" => "a boolean",
        "integer" => "an integer",
        "null" => "null",
        "number" => "a number",
        "object" => "a mapping",
        _ => "a string",
    }
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing)] // tests index what they built

    use crate::diagnostic::Code;
    use crate::source::{FileId, SourceFile};

    /// The (code, message, underlined text) of each diagnostic of a step with this schema.
    fn check(schema: &str) -> Vec<(Code, String, String)> {
        let text = format!(
            "version: \"0.2\"\nflows:\n  f:\n    input: {{}}\n    steps:\n      - id: s\n        \
             intent: \"Do it\"\n        output_schema: {schema}\n"
        );
        let src = SourceFile::new(FileId::default(), "t.stratum.yaml", text.clone());
        crate::check(&src)
            .diagnostics
            .iter()
            .map(|d| {
                let underlined = text.get(d.primary.span.range()).unwrap_or("?").to_owned();
                (d.code, d.message.clone(), underlined)
            })
            .collect()
    }

    #[test]
    fn valid_schemas_pass() {
        assert_eq!(
            check(
                "{type: object, required: [a], properties: {a: {type: [string, \"null\"]}, \
                 b: {type: array, items: {type: integer, minimum: 0}}, c: {$ref: '#/$defs/x'}}, \
                 $defs: {x: {enum: [1, two]}}, x-unknown-keyword: 1}"
            ),
            []
        );
    }

    #[test]
    fn common_mistakes_are_rewritten() {
        let found = check(
            "{type: Str, required: [1], properties: {a: {type: 5}, b: {minItems: 1.5}, \
             c: {items: 3}}}",
        );
        let found: Vec<(&str, &str)> = found
            .iter()
            .map(|(_, message, underlined)| (message.as_str(), underlined.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("`Str` is not a JSON Schema type", "Str"),
                ("`required` must be a list of property names", "1"),
                (
                    "`type` must be a type name or a list of them, not an integer",
                    "5"
                ),
                ("`minItems` must be an integer, not a number", "1.5"),
                (
                    "`items` must be a boolean or a mapping, not an integer",
                    "3"
                ),
            ]
        );
    }

    #[test]
    fn values_json_cannot_hold_are_reported() {
        let found = check("{type: number, maximum: .inf, [a]: 1}");
        let codes: Vec<(Code, &str)> = found
            .iter()
            .map(|(code, _, underlined)| (*code, underlined.as_str()))
            .collect();
        assert_eq!(codes, [(Code::E0071, ".inf"), (Code::E0071, "[a]")]);
    }
}
