//! The JSON Schema of the spec format, generated from the key tables of `syntax::keys`.
//!
//! Takes nothing; [`spec_schema`] returns a draft 2020-12 schema (published as
//! `compiler/schemas/stratum-spec.schema.json`, printed by `stratumc schema`) that editors use
//! through yaml-language-server: one `$defs` entry per shape reachable from the root, every key
//! of a shape with its value's type and its documentation as `description`, `required` for the
//! keys every version requires, and `additionalProperties: false` where `read` rejects unknown
//! keys.
//!
//! Invariant: the schema accepts every spec `stratumc check` accepts. What it cannot say
//! without rejecting valid specs is left out: keys required by version 0.1 only, the keys that
//! go together or exclude each other (exactly one of `function`, `intent` and `flow`), names
//! that must resolve, and everything the middle end checks. So a spec the schema accepts can
//! still have errors; it only catches misspelt keys, wrong value types and missing keys early,
//! in any editor.

use serde_json::{Map, Value as Json, json};

use crate::syntax::keys::{self, Key, Required, Shape, Value};

/// The schema's `$id`, named like the plan schema's.
pub const SCHEMA_ID: &str = "https://stratumc.dev/schemas/stratum-spec";

/// The JSON Schema of a `.stratum.yaml` spec.
pub fn spec_schema() -> Json {
    let mut defs = Map::new();
    let mut pending: Vec<&'static Shape> = vec![&keys::ROOT];
    // A walk over the shapes the root reaches, each emitted once under its name; the tables
    // are small and finite, and `defs` stops the walk at a shape already emitted.
    while let Some(shape) = pending.pop() {
        if defs.contains_key(shape.name) {
            continue;
        }
        let mut reached = Vec::new();
        let schema = shape_schema(shape, &mut reached);
        defs.insert(shape.name.to_owned(), schema);
        pending.extend(reached.into_iter().rev());
    }
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "Stratum workflow spec (.stratum.yaml)",
        "description": format!(
            "A Stratum workflow spec, versions {}. Generated from stratumc's key tables by `stratumc schema`; `stratumc check` checks much more (names, types, the rules of steps and gates).",
            keys::VERSIONS.join(" and ")
        ),
        "$ref": format!("#/$defs/{}", keys::ROOT.name),
        "$defs": defs,
    })
}

/// A shape's mapping: its keys, those always required, and whether others are allowed.
fn shape_schema(shape: &'static Shape, reached: &mut Vec<&'static Shape>) -> Json {
    let mut properties = Map::new();
    for key in shape.keys {
        properties.insert(key.name.to_owned(), key_schema(key, reached));
    }
    let mut required: Vec<&str> = shape
        .keys
        .iter()
        .filter(|key| key.required == Required::Always)
        .map(|key| key.name)
        .collect();
    // `read` checks the version before the root's shape and reports its absence itself
    // (E0014), so the table does not mark it required; the compiler still requires it.
    if std::ptr::eq(shape, &keys::ROOT) {
        required.insert(0, "version");
    }
    let mut schema = Map::new();
    schema.insert("title".to_owned(), json!(shape.what));
    schema.insert("type".to_owned(), json!("object"));
    schema.insert("properties".to_owned(), Json::Object(properties));
    if !required.is_empty() {
        schema.insert("required".to_owned(), json!(required));
    }
    // Where unknown keys are only warnings (W0001), the spec is valid with them.
    if !shape.unknown_is_warning {
        schema.insert("additionalProperties".to_owned(), json!(false));
    }
    Json::Object(schema)
}

/// One key's value, with its documentation.
fn key_schema(key: &Key, reached: &mut Vec<&'static Shape>) -> Json {
    let mut schema = match value_schema(&key.value, reached) {
        Json::Object(schema) => schema,
        _ => Map::new(),
    };
    if !key.doc.is_empty() {
        schema.insert("description".to_owned(), json!(key.doc));
    }
    Json::Object(schema)
}

/// What a value must be, as JSON Schema; the shapes it names are pushed on `reached`.
fn value_schema(value: &Value, reached: &mut Vec<&'static Shape>) -> Json {
    // `\S`: at least one character that is not whitespace, as `read`'s trimmed-empty check.
    const NOT_BLANK: &str = "\\S";
    match value {
        Value::Any => json!({}),
        Value::Text => json!({"type": "string"}),
        Value::NonEmptyText => json!({"type": "string", "pattern": NOT_BLANK}),
        Value::WorkflowName => json!({"type": "string", "pattern": "^[a-z][a-z0-9-]*$"}),
        Value::Choice(words) => json!({"type": "string", "enum": words}),
        Value::Boolean => json!({"type": "boolean"}),
        Value::Number { min } => {
            let mut schema = json!({"type": "number"});
            if let (Some(min), Some(object)) = (min, schema.as_object_mut()) {
                object.insert("minimum".to_owned(), json!(min));
            }
            schema
        }
        Value::Integer { min, max } => {
            let mut schema = json!({"type": "integer", "minimum": min});
            if let (Some(max), Some(object)) = (max, schema.as_object_mut()) {
                object.insert("maximum".to_owned(), json!(max));
            }
            schema
        }
        Value::Texts => json!({"type": "array", "items": {"type": "string"}}),
        Value::NonEmptyTexts => {
            json!({"type": "array", "items": {"type": "string", "pattern": NOT_BLANK}})
        }
        // A step id, or `~` (end or terminate the flow).
        Value::Route => json!({"type": ["string", "null"]}),
        Value::List => json!({"type": "array"}),
        Value::Mapping => json!({"type": "object"}),
        Value::Shape(shape) => {
            reached.push(shape);
            json!({"$ref": format!("#/$defs/{}", shape.name)})
        }
        Value::Named(value) => {
            json!({"type": "object", "additionalProperties": value_schema(value, reached)})
        }
        Value::NonEmptyList(value) => {
            json!({"type": "array", "items": value_schema(value, reached), "minItems": 1})
        }
        Value::FieldDef(shape) => {
            reached.push(shape);
            json!({"anyOf": [
                {"type": "string", "description": "A type, as `text: string` is short for `text: {type: string}`."},
                {"$ref": format!("#/$defs/{}", shape.name)},
            ]})
        }
    }
}

/// The schema as published: indented JSON and a final newline.
pub fn spec_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&spec_schema()).unwrap_or_default();
    text.push('\n');
    text
}
