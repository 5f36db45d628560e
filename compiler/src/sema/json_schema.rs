//! Contract types → JSON Schema (draft 2020-12), canonical JSON and content hashes.
//!
//! Takes a contract's resolved fields (and the schemas of the contracts it nests, which the
//! caller builds first); returns its schema per the table of the type system (`string` →
//! `{"type":"string"}` with `minLength`/`maxLength`, `number` → `{"type":"number"}` with float
//! `minimum`/`maximum`, `integer` with integer bounds, `boolean`, enums → `{"enum":[…]}`, `T?`
//! → `{"anyOf":[T,{"type":"null"}]}`, lists → `{"type":"array","items":T}`, `object`, nested
//! contracts inlined as `{"type":"object","properties":{…},"required":[…]}`). Descriptions are
//! not part of the schema, so rewording one does not change the hash.
//!
//! The hash is the reference's `hashlib.sha256(json.dumps(schema, sort_keys=True,
//! separators=(',', ':')).encode()).hexdigest()[:12]`. [`canonical`] writes exactly what that
//! `json.dumps` writes: keys sorted by code point, no whitespace, non-ASCII as `\uXXXX`
//! (surrogate pairs above U+FFFF) and floats as Python's `repr` (`0.0`, `1e-05`, `1e+16`). It
//! does not depend on `serde_json`'s map order. Invariant: the same fields give the same bytes.

use std::collections::HashMap;
use std::fmt::Write;

use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

use crate::sema::field_type::{Bounds, ContractField, FieldType, Literal};

/// The schema of a contract with these fields; `schemas` holds those of the contracts it nests
/// (a nested contract missing from it is `{}`: it was reported).
pub fn contract(fields: &[ContractField], schemas: &HashMap<String, Value>) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for field in fields {
        properties.insert(field.name.clone(), field_type(&field.ty, schemas));
        if !field.ty.is_optional() {
            required.push(Value::String(field.name.clone()));
        }
    }
    let mut schema = Map::new();
    schema.insert("type".to_owned(), "object".into());
    schema.insert("properties".to_owned(), Value::Object(properties));
    schema.insert("required".to_owned(), Value::Array(required));
    Value::Object(schema)
}

/// The schema of one field type.
pub fn field_type(ty: &FieldType, schemas: &HashMap<String, Value>) -> Value {
    let mut schema = Map::new();
    match ty {
        FieldType::Any => {}
        FieldType::String(bounds) => {
            schema.insert("type".to_owned(), "string".into());
            insert_bounds(&mut schema, *bounds, "minLength", "maxLength", Value::from);
        }
        FieldType::Number(bounds) => {
            schema.insert("type".to_owned(), "number".into());
            // Bounds are finite (checked when resolved); a non-finite one would be left out.
            insert_bounds(&mut schema, *bounds, "minimum", "maximum", |bound| {
                Number::from_f64(bound).map_or(Value::Null, Value::Number)
            });
        }
        FieldType::Integer(bounds) => {
            schema.insert("type".to_owned(), "integer".into());
            insert_bounds(&mut schema, *bounds, "minimum", "maximum", Value::from);
        }
        FieldType::Boolean => {
            schema.insert("type".to_owned(), "boolean".into());
        }
        FieldType::Enum(values) => {
            let values = values.iter().map(literal).collect();
            schema.insert("enum".to_owned(), Value::Array(values));
        }
        FieldType::Array(item) => {
            schema.insert("type".to_owned(), "array".into());
            if let Some(item) = item {
                schema.insert("items".to_owned(), field_type(item, schemas));
            }
        }
        FieldType::Object => {
            schema.insert("type".to_owned(), "object".into());
        }
        FieldType::Contract(name) => {
            return schemas
                .get(name)
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new()));
        }
        FieldType::Optional(inner) => {
            let mut null = Map::new();
            null.insert("type".to_owned(), "null".into());
            schema.insert(
                "anyOf".to_owned(),
                Value::Array(vec![field_type(inner, schemas), Value::Object(null)]),
            );
        }
    }
    Value::Object(schema)
}

fn insert_bounds<T: Copy>(
    schema: &mut Map<String, Value>,
    bounds: Bounds<T>,
    min_key: &str,
    max_key: &str,
    value: impl Fn(T) -> Value,
) {
    for (key, bound) in [(min_key, bounds.minimum), (max_key, bounds.maximum)] {
        if let Some(bound) = bound.map(&value).filter(|v| !v.is_null()) {
            schema.insert(key.to_owned(), bound);
        }
    }
}

fn literal(literal: &Literal) -> Value {
    match literal {
        Literal::Str(value) => Value::String(value.clone()),
        Literal::Int(value) => Value::from(*value),
        Literal::Float(value) => Number::from_f64(*value).map_or(Value::Null, Value::Number),
        Literal::Bool(value) => Value::Bool(*value),
    }
}

/// How many JSON values `value` holds, itself included (keys are not values).
pub fn count_values(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(count_values).sum::<usize>(),
        Value::Object(map) => 1 + map.values().map(count_values).sum::<usize>(),
        _ => 1,
    }
}

/// The content hash: the first 12 hex digits of the SHA-256 of [`canonical`]`(schema)`.
pub fn hash(schema: &Value) -> String {
    let digest = Sha256::digest(canonical(schema).as_bytes());
    let mut hex = String::with_capacity(12);
    for byte in digest.iter().take(6) {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// `json.dumps(value, sort_keys=True, separators=(',', ':'))` as Python writes it.
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

// Schemas are depth-bounded by the caller (`MAX_SCHEMA_DEPTH`), so recursion is safe here.
fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => {
            if let Some(value) = number.as_i64() {
                let _ = write!(out, "{value}");
            } else if let Some(value) = number.as_u64() {
                let _ = write!(out, "{value}");
            } else if let Some(value) = number.as_f64() {
                out.push_str(&python_float(value));
            }
        }
        Value::String(text) => write_string(out, text),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Python sorts `str` keys by code point; Rust's `str` order (UTF-8 bytes) is the
            // same order.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

/// A JSON string as `json.dumps` writes it with `ensure_ascii=True`: printable ASCII as is,
/// `"` and `\` escaped, the five short escapes, everything else `\u` + four lowercase hex
/// digits, as a surrogate pair above U+FFFF.
fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// A float as Python's `repr` writes it: the shortest digits that read back the same value,
/// positional when the decimal exponent is in -5..16 (`0.0001`, `1.0`,
/// `1000000000000000.0`), scientific otherwise (`1e-05`, `1e+16`, `1.5e+300`).
pub fn python_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() {
            "-0.0"
        } else {
            "0.0"
        }
        .to_owned();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: `1.5e16`, `-1e-5`.
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let n_digits = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    // The position of the decimal point relative to the digits, as CPython's dtoa reports it.
    let point = exponent + 1;
    let mut out = String::from(sign);
    if -4 < point && point <= 16 {
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', point.unsigned_abs() as usize));
            out.push_str(&digits);
        } else if point >= n_digits {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', (point - n_digits) as usize));
            out.push_str(".0");
        } else {
            let (whole, fraction) = digits.split_at(point as usize);
            out.push_str(whole);
            out.push('.');
            out.push_str(fraction);
        }
    } else {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let _ = write!(
            out,
            "e{}{:02}",
            if exponent < 0 { '-' } else { '+' },
            exponent.unsigned_abs()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)] // tests unwrap what they built

    use super::*;
    use serde_json::json;

    fn schema(ty: FieldType) -> Value {
        field_type(&ty, &HashMap::new())
    }

    fn bounds<T>(minimum: Option<T>, maximum: Option<T>) -> Bounds<T> {
        Bounds { minimum, maximum }
    }

    #[test]
    fn each_row_of_the_table() {
        assert_eq!(
            schema(FieldType::String(Bounds::default())),
            json!({"type": "string"})
        );
        assert_eq!(
            schema(FieldType::String(bounds(Some(1), Some(500)))),
            json!({"type": "string", "minLength": 1, "maxLength": 500})
        );
        assert_eq!(
            schema(FieldType::Number(Bounds::default())),
            json!({"type": "number"})
        );
        assert_eq!(
            schema(FieldType::Number(bounds(Some(0.0), Some(1.0)))),
            json!({"type": "number", "minimum": 0.0, "maximum": 1.0})
        );
        assert_eq!(
            schema(FieldType::Integer(bounds(Some(1), None))),
            json!({"type": "integer", "minimum": 1})
        );
        assert_eq!(schema(FieldType::Boolean), json!({"type": "boolean"}));
        assert_eq!(
            schema(FieldType::Enum(vec![
                Literal::Str("a".into()),
                Literal::Str("b".into())
            ])),
            json!({"enum": ["a", "b"]})
        );
        assert_eq!(
            schema(FieldType::Optional(Box::new(FieldType::String(
                Bounds::default()
            )))),
            json!({"anyOf": [{"type": "string"}, {"type": "null"}]})
        );
        assert_eq!(
            schema(FieldType::Array(Some(Box::new(FieldType::Boolean)))),
            json!({"type": "array", "items": {"type": "boolean"}})
        );
        assert_eq!(schema(FieldType::Array(None)), json!({"type": "array"}));
        assert_eq!(schema(FieldType::Object), json!({"type": "object"}));
        assert_eq!(schema(FieldType::Any), json!({}));
    }

    #[test]
    fn contracts_list_required_fields_in_order_and_inline_nested_ones() {
        let address = contract(
            &[ContractField {
                name: "city".into(),
                ty: FieldType::String(Bounds::default()),
            }],
            &HashMap::new(),
        );
        let schemas = HashMap::from([("Address".to_owned(), address)]);
        let profile = contract(
            &[
                ContractField {
                    name: "name".into(),
                    ty: FieldType::String(Bounds::default()),
                },
                ContractField {
                    name: "nickname".into(),
                    ty: FieldType::String(Bounds::default()).optional(),
                },
                ContractField {
                    name: "address".into(),
                    ty: FieldType::Contract("Address".into()),
                },
            ],
            &schemas,
        );
        assert_eq!(
            profile,
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "address": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"]
                    }
                },
                "required": ["name", "address"]
            })
        );
    }

    #[test]
    fn floats_print_as_python_repr() {
        for (value, python) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.5, "0.5"),
            (-2.5, "-2.5"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789.125, "123456789.125"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (0.1, "0.1"),
            (1.0 / 3.0, "0.3333333333333333"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
        ] {
            assert_eq!(python_float(value), python, "{value:e}");
        }
    }

    #[test]
    fn canonical_json_sorts_keys_and_escapes_like_python() {
        let value = json!({"b": [1, 2.0, null, true], "a": "é\u{1F600}\"\\\n\u{7f}\u{1}", "A": {}});
        assert_eq!(
            canonical(&value),
            r#"{"A":{},"a":"\u00e9\ud83d\ude00\"\\\n\u007f\u0001","b":[1,2.0,null,true]}"#
        );
    }
}
