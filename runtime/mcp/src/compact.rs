//! The `outputSchema` a tool serves: its full documented schema (an `anyOf` of answer shapes
//! with their `$defs`, published in `runtime/cli/schemas/tools/`) folded into one flat object
//! schema that clients can check cheaply.
//!
//! Why: the official Python MCP SDK runs `jsonschema.validate` on every tool result, and that
//! checks the schema itself against the 2020-12 meta-schema first, on every call. The cost
//! grows with the number of subschemas (about 0.3 ms each on a busy two-core machine), not
//! with the answer: the full `stratum_plan` schema (over 300 subschemas) cost 100+ ms a call.
//!
//! The folded schema keeps what an agent branches on and reads first: `status` as an enum of
//! every value the tool answers with, and each field that some shape always carries, typed
//! with the union of its types across the shapes that declare it. Fields of one type share one
//! subschema, under `patternProperties` with a pattern that names them exactly
//! (`^(flow_id|step_id)$`): one subschema per type instead of one per field, which keeps the
//! check at a few milliseconds under load. It drops per-field prose, nested shapes and
//! optional fields (a client reads those from the full schema). It accepts every answer the
//! full schema accepts: a field's type is widened over every shape that declares it, a field is
//! required only when every shape requires it, and the schema stays open to other fields.

use serde_json::{Map, Value, json};

/// The JSON types a folded property may take; `None` when some shape leaves it untyped.
type Types = Option<Vec<&'static str>>;

/// `full` folded into a flat object schema; `description` becomes its only prose.
pub fn compact(full: &Value, description: &str) -> Value {
    let definitions = full.get("$defs").and_then(Value::as_object);
    let shapes: Vec<&Map<String, Value>> = full
        .get("anyOf")
        .and_then(Value::as_array)
        .map(|shapes| {
            shapes
                .iter()
                .filter_map(|shape| resolve(shape, definitions).as_object())
                .collect()
        })
        .unwrap_or_default();
    let mut properties = Map::new();
    // Each type's schema with the fields of that type, in the order the fields come.
    let mut by_type: Vec<(Value, Vec<String>)> = Vec::new();
    for name in carried_fields(&shapes) {
        if name == "status" {
            if let Some(schema) = status_schema(&shapes, definitions) {
                properties.insert(name, schema);
            }
            continue;
        }
        let Some(schema) = declared_types(&shapes, &name, definitions).map(types_schema) else {
            continue;
        };
        match by_type.iter_mut().find(|(known, _)| *known == schema) {
            Some((_, names)) => names.push(name),
            None => by_type.push((schema, vec![name])),
        }
    }
    let patterns: Map<String, Value> = by_type
        .into_iter()
        .map(|(schema, names)| (exactly(&names), schema))
        .collect();
    let mut folded = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "description": description,
        "type": "object",
        "required": required_by_all(&shapes),
        "properties": properties,
    });
    if let (false, Value::Object(root)) = (patterns.is_empty(), &mut folded) {
        root.insert("patternProperties".to_owned(), Value::Object(patterns));
    }
    folded
}

/// A regular expression that matches exactly these names (any character but a letter, digit
/// or `_` escaped, so a name is never read as a pattern).
fn exactly(names: &[String]) -> String {
    let escaped: Vec<String> = names
        .iter()
        .map(|name| {
            name.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        c.to_string()
                    } else {
                        format!("\\{c}")
                    }
                })
                .collect()
        })
        .collect();
    format!("^({})$", escaped.join("|"))
}

/// Every field some shape requires, in the order the shapes list them.
fn carried_fields(shapes: &[&Map<String, Value>]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in shapes.iter().flat_map(|shape| required(shape)) {
        if !names.iter().any(|known| known == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// The fields every shape requires (none when there are no shapes).
fn required_by_all(shapes: &[&Map<String, Value>]) -> Vec<String> {
    let Some((first, rest)) = shapes.split_first() else {
        return Vec::new();
    };
    required(first)
        .filter(|name| rest.iter().all(|shape| required(shape).any(|n| n == *name)))
        .map(str::to_owned)
        .collect()
}

fn required(shape: &Map<String, Value>) -> impl Iterator<Item = &str> {
    shape
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// `{"enum": [...]}` with every `status` value the shapes declare (`const` or `enum`), or
/// the union of its types when some shape does not list its values.
fn status_schema(
    shapes: &[&Map<String, Value>],
    definitions: Option<&Map<String, Value>>,
) -> Option<Value> {
    let mut values: Vec<Value> = Vec::new();
    for shape in shapes {
        let Some(status) = property(shape, "status", definitions) else {
            continue;
        };
        let listed: Vec<&Value> = match (status.get("const"), status.get("enum")) {
            (Some(value), _) => vec![value],
            (None, Some(Value::Array(listed))) => listed.iter().collect(),
            _ => return declared_types(shapes, "status", definitions).map(types_schema),
        };
        for value in listed {
            if !values.contains(value) {
                values.push(value.clone());
            }
        }
    }
    Some(json!({ "enum": values }))
}

/// The union of `name`'s JSON types over every shape that declares it.
fn declared_types(
    shapes: &[&Map<String, Value>],
    name: &str,
    definitions: Option<&Map<String, Value>>,
) -> Types {
    let mut union: Vec<&'static str> = Vec::new();
    for shape in shapes {
        if let Some(schema) = property(shape, name, definitions) {
            for ty in types_of(schema, definitions)? {
                if !union.contains(&ty) {
                    union.push(ty);
                }
            }
        }
    }
    // An integer is a number: `number` alone says the same, with one fewer type to check.
    if union.contains(&"number") {
        union.retain(|ty| *ty != "integer");
    }
    Some(union)
}

fn types_schema(types: Vec<&'static str>) -> Value {
    match types.as_slice() {
        [one] => json!({ "type": one }),
        _ => json!({ "type": types }),
    }
}

/// The JSON types a schema admits, read from `type`, `const`, `enum`, or the shapes of an
/// `anyOf` / `oneOf`; `None` when it admits any value.
fn types_of(schema: &Value, definitions: Option<&Map<String, Value>>) -> Types {
    let schema = resolve(schema, definitions);
    if let Some(ty) = schema.get("type") {
        return match ty {
            Value::String(name) => json_type(name).map(|ty| vec![ty]),
            Value::Array(names) => names
                .iter()
                .map(|name| name.as_str().and_then(json_type))
                .collect(),
            _ => None,
        };
    }
    if let Some(value) = schema.get("const") {
        return Some(vec![type_of_value(value)]);
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        let mut types: Vec<&'static str> = values.iter().map(type_of_value).collect();
        types.dedup();
        return Some(types);
    }
    let branches = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array)?;
    let mut types: Vec<&'static str> = Vec::new();
    for branch in branches {
        for ty in types_of(branch, definitions)? {
            if !types.contains(&ty) {
                types.push(ty);
            }
        }
    }
    Some(types)
}

/// The schema `properties.name` of a shape, through `$ref`s.
fn property<'a>(
    shape: &'a Map<String, Value>,
    name: &str,
    definitions: Option<&'a Map<String, Value>>,
) -> Option<&'a Value> {
    shape
        .get("properties")
        .and_then(|properties| properties.get(name))
        .map(|schema| resolve(schema, definitions))
}

/// A local `#/$defs/NAME` reference followed (a few levels, so a cycle cannot loop); any
/// other schema as it is.
fn resolve<'a>(mut schema: &'a Value, definitions: Option<&'a Map<String, Value>>) -> &'a Value {
    for _ in 0..8 {
        let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|reference| reference.strip_prefix("#/$defs/"))
            .and_then(|name| definitions?.get(name))
        else {
            break;
        };
        schema = target;
    }
    schema
}

fn json_type(name: &str) -> Option<&'static str> {
    [
        "null", "boolean", "integer", "number", "string", "array", "object",
    ]
    .into_iter()
    .find(|ty| *ty == name)
}

fn type_of_value(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_union_folds_into_one_open_object_with_a_status_enum() {
        let full = json!({
            "anyOf": [{"$ref": "#/$defs/Done"}, {"$ref": "#/$defs/Failed"}],
            "$defs": {
                "Done": {"type": "object", "required": ["status", "count"], "properties": {
                    "status": {"type": "string", "const": "done"},
                    "count": {"type": "integer", "description": "how many"},
                    "note": {"type": ["string", "null"]}}},
                "Failed": {"type": "object", "required": ["status", "message", "name"], "properties": {
                    "status": {"type": "string", "enum": ["error", "killed"]},
                    "message": {"type": "string"},
                    "name": {"type": "string"},
                    "count": {"type": "number"}}}
            }
        });
        assert_eq!(
            compact(&full, "d"),
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "description": "d",
                "type": "object",
                "required": ["status"],
                "properties": {"status": {"enum": ["done", "error", "killed"]}},
                "patternProperties": {
                    "^(count)$": {"type": "number"},
                    "^(message|name)$": {"type": "string"}
                }
            })
        );
    }

    #[test]
    fn a_field_some_shape_leaves_untyped_is_left_out() {
        let full = json!({"anyOf": [
            {"type": "object", "required": ["output"], "properties": {"output": {"type": "object"}}},
            {"type": "object", "required": ["output"], "properties": {"output": true}}
        ]});
        let folded = compact(&full, "d");
        assert_eq!(folded.get("properties"), Some(&json!({})));
        assert_eq!(folded.get("patternProperties"), None);
        assert_eq!(folded.get("required"), Some(&json!(["output"])));
    }

    #[test]
    fn a_name_is_matched_exactly_never_as_a_pattern() {
        assert_eq!(
            exactly(&["a.b".to_owned(), "c_d".to_owned()]),
            "^(a\\.b|c_d)$"
        );
    }
}
