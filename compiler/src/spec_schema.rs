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
        Value::Positive => json!({"type": "number", "exclusiveMinimum": 0}),
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
        Value::Require => json!({"anyOf": [
            {"type": "string", "enum": ["all", "any"]},
            {"type": "integer", "minimum": 1, "maximum": u32::MAX},
        ]}),
        Value::TextOrTexts => json!({"anyOf": [
            {"type": "string", "pattern": NOT_BLANK},
            {"type": "array", "items": {"type": "string", "pattern": NOT_BLANK}},
        ]}),
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use std::ops::Range;

    use jsonschema::error::ValidationErrorKind;

    use super::*;
    use crate::diagnostic::Code;
    use crate::source::{FileId, SourceFile, SourceMap};

    /// A spec with `KV` where a mapping of `shape` has its entries, and that mapping's JSON
    /// pointer. Flow style, so that one line holds the whole spec.
    fn place(shape: &Shape) -> (&'static str, &'static str) {
        match shape.name {
            "spec" => (r#"{version: "0.3", KV}"#, ""),
            "contractField" => (
                r#"{version: "0.3", contracts: {C: {x: {KV}}}}"#,
                "/contracts/C/x",
            ),
            "inputParam" => (
                r#"{version: "0.3", flows: {g: {input: {x: {KV}}}}}"#,
                "/flows/g/input/x",
            ),
            "function" => (r#"{version: "0.3", functions: {f: {KV}}}"#, "/functions/f"),
            "budget" => (
                r#"{version: "0.3", flows: {g: {budget: {KV}}}}"#,
                "/flows/g/budget",
            ),
            "flow" => (r#"{version: "0.3", flows: {g: {KV}}}"#, "/flows/g"),
            "step" => (
                r#"{version: "0.3", flows: {g: {steps: [{KV}]}}}"#,
                "/flows/g/steps/0",
            ),
            "stage" => (
                r#"{version: "0.3", flows: {g: {steps: [{stages: [{KV}]}]}}}"#,
                "/flows/g/steps/0/stages/0",
            ),
            "fanout" => (
                r#"{version: "0.3", flows: {g: {steps: [{stages: [{fanout: {KV}}]}]}}}"#,
                "/flows/g/steps/0/stages/0/fanout",
            ),
            "judge" => (
                r#"{version: "0.3", flows: {g: {steps: [{judge: {KV}}]}}}"#,
                "/flows/g/steps/0/judge",
            ),
            "predicate" => (
                r#"{version: "0.3", flows: {g: {steps: [{judge: {predicates: [{KV}]}}]}}}"#,
                "/flows/g/steps/0/judge/predicates/0",
            ),
            "judgeBudget" => (
                r#"{version: "0.3", flows: {g: {steps: [{judge: {budget: {KV}}}]}}}"#,
                "/flows/g/steps/0/judge/budget",
            ),
            "workflow" => (r#"{version: "0.3", workflow: {KV}}"#, "/workflow"),
            "workflowInput" => (
                r#"{version: "0.3", workflow: {input: {x: {KV}}}}"#,
                "/workflow/input/x",
            ),
            other => panic!("no place for shape `{other}`: add one"),
        }
    }

    /// Values a key of this kind takes, and values it refuses, as YAML flow text.
    fn samples(value: &Value) -> (Vec<String>, Vec<String>) {
        let texts = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        match value {
            Value::Any => (texts(&["1", "x", "[1]", "{a: 1}", "~"]), vec![]),
            Value::Text => (texts(&["x", "''"]), texts(&["1", "true", "[x]", "{a: 1}"])),
            Value::NonEmptyText => (texts(&["x"]), texts(&["' '", "1", "[x]"])),
            Value::WorkflowName => (texts(&["my-flow-2"]), texts(&["My_Flow", "2x", "1"])),
            Value::Choice(words) => (texts(words), texts(&["zzz", "1"])),
            Value::Boolean => (texts(&["true", "false"]), texts(&["'true'", "1", "[true]"])),
            Value::Number { min } => {
                let mut bad = texts(&["x", "[1]"]);
                if min.is_some() {
                    bad.push("-1".to_owned());
                }
                (texts(&["0.5", "3"]), bad)
            }
            Value::Positive => (texts(&["0.5", "3"]), texts(&["x", "[1]", "0", "-1"])),
            Value::Integer { min, max } => {
                let mut bad = texts(&["x", "1.5"]);
                bad.push(format!("{}", *min as i64 - 1));
                if let Some(max) = max {
                    bad.push(format!("{}", max + 1));
                }
                (vec![min.to_string(), (min + 7).to_string()], bad)
            }
            Value::Texts => (texts(&["[a, b]", "[]"]), texts(&["a", "[[a]]", "{a: 1}"])),
            Value::NonEmptyTexts => (texts(&["[a]"]), texts(&["a", "['']", "[[a]]"])),
            Value::Route => (texts(&["a", "~"]), texts(&["[a]", "1"])),
            Value::List => (texts(&["[1, a]"]), texts(&["a", "{a: 1}"])),
            Value::Mapping => (texts(&["{}", "{a: 1}"]), texts(&["a", "[1]"])),
            Value::Shape(_) => (texts(&["{}"]), texts(&["a", "[1]"])),
            Value::Named(inner) => {
                let (good, bad) = samples(inner);
                let mut goods = texts(&["{}"]);
                goods.extend(good.first().map(|g| format!("{{n: {g}}}")));
                let mut bads = texts(&["a", "[1]"]);
                bads.extend(bad.first().map(|b| format!("{{n: {b}}}")));
                (goods, bads)
            }
            Value::NonEmptyList(inner) => {
                let (good, bad) = samples(inner);
                let goods = good
                    .first()
                    .map(|g| vec![format!("[{g}]")])
                    .unwrap_or_default();
                let mut bads = texts(&["[]", "a"]);
                bads.extend(bad.first().map(|b| format!("[{b}]")));
                (goods, bads)
            }
            Value::FieldDef(_) => (texts(&["string", "{}"]), texts(&["1", "[a]"])),
            Value::Require => (texts(&["all", "any", "2"]), texts(&["0", "x", "[1]"])),
            Value::TextOrTexts => (
                texts(&["make test", "'$.input.gate'", "[a, b]"]),
                texts(&["1", "{a: 1}", "' '"]),
            ),
        }
    }

    /// Codes that say a value is not what its key takes.
    const VALUE_CODES: &[Code] = &[
        Code::E0012,
        Code::E0019,
        Code::E0020,
        Code::E0021,
        Code::E0022,
        Code::E0074,
    ];

    /// Whether the compiler says a value in `range` is wrong: the front end alone when
    /// `front_end_only`, else the whole pipeline (which reads `items` in `sema::fields`).
    fn compiler_refuses(text: &str, range: &Range<usize>, front_end_only: bool) -> bool {
        let diagnostics = if front_end_only {
            let src = SourceFile::new(FileId(0), "t.stratum.yaml", text);
            crate::syntax::parse(&src).1
        } else {
            let mut sources = SourceMap::new();
            crate::check_bytes(&mut sources, "t.stratum.yaml", text.as_bytes()).diagnostics
        };
        diagnostics.iter().any(|d| {
            VALUE_CODES.contains(&d.code) && range.contains(&(d.primary.span.start as usize))
        })
    }

    /// Whether the schema has errors at or below `pointer`, other than missing keys (a sample
    /// `{}` for a nested workflow or step lacks its keys).
    fn schema_refuses(validator: &jsonschema::Validator, text: &str, pointer: &str) -> bool {
        let src = SourceFile::new(FileId(0), "t.stratum.yaml", text);
        let root = crate::syntax::tree::load(&src).root.unwrap();
        let json = crate::sema::schema::to_json(&root).unwrap();
        validator.iter_errors(&json).any(|error| {
            let at = error.instance_path().as_str().to_owned();
            (at == pointer || at.starts_with(&format!("{pointer}/")))
                && !matches!(error.kind(), ValidationErrorKind::Required { .. })
        })
    }

    /// The tables' value types are what `read` enforces, and the schema says the same: for
    /// every key of every shape, values of its kind pass both, and values of another kind are
    /// refused by both.
    #[test]
    fn the_schema_and_the_compiler_agree_on_every_key() {
        let validator = jsonschema::draft202012::new(&spec_schema()).unwrap();
        let mut tried = 0;
        for shape in keys::SHAPES {
            let (template, pointer) = place(shape);
            for key in shape.keys.iter().filter(|key| key.name != "version") {
                let (good, bad) = samples(&key.value);
                // The other required keys, with their placeholders, so that the mapping is
                // whole and any complaint is about the sample (a field definition's errors
                // surface at the mapping, where its `anyOf` fails).
                let others: String = shape
                    .keys
                    .iter()
                    .filter(|other| other.required == Required::Always && other.name != key.name)
                    .map(|other| format!("{}: {}, ", other.name, other.placeholder))
                    .collect();
                let at = template.find("KV").unwrap() + others.len();
                for (value, valid) in good
                    .iter()
                    .map(|v| (v, true))
                    .chain(bad.iter().map(|v| (v, false)))
                {
                    let entry = format!("{}: {value}", key.name);
                    let text = template.replace("KV", &format!("{others}{entry}"));
                    let range = at..at + entry.len();
                    let what = format!("{}.{} = {value}", shape.name, key.name);
                    assert_eq!(
                        compiler_refuses(&text, &range, valid),
                        !valid,
                        "the compiler on {what}"
                    );
                    assert_eq!(
                        schema_refuses(&validator, &text, pointer),
                        !valid,
                        "the schema on {what}"
                    );
                    tried += 1;
                }
            }
        }
        assert!(tried > 200, "{tried}");
    }

    #[test]
    fn every_shape_is_reachable_from_the_root() {
        let schema = spec_schema();
        for shape in keys::SHAPES {
            assert!(schema["$defs"].get(shape.name).is_some(), "{}", shape.name);
        }
    }
}
