//! The data of a contract field's type: [`FieldType`] (the grammar's [`Type`] plus what it
//! cannot hold: numeric ranges and string lengths), its [`Bounds`], and a resolved
//! [`ContractField`].
//!
//! A leaf: [`fields`](super::fields) builds these values, [`json_schema`](super::json_schema)
//! writes them as schemas and [`types`](super::types) resolves whole contracts from them; none
//! of that is imported here, so the three depend on this module and not on each other.

use std::collections::{HashMap, HashSet};

use stratum_grammar::types::{Record, Type};

pub use stratum_grammar::types::Literal;

/// The type of one contract field or input field, with its constraints.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldType {
    /// Unknown: not written (an input without `type`), or reported.
    Any,
    String(Bounds<u64>),
    Number(Bounds<f64>),
    Integer(Bounds<i64>),
    Boolean,
    /// One of fixed literal values (`values:` or a literal union).
    Enum(Vec<Literal>),
    /// A list; `None` when its items are untyped (`type: array` without `items`).
    Array(Option<Box<FieldType>>),
    /// Any mapping: an open record.
    Object,
    /// A nested contract, by name.
    Contract(String),
    Optional(Box<FieldType>),
}

/// Inclusive bounds; for strings, of the length in characters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Bounds<T> {
    pub minimum: Option<T>,
    pub maximum: Option<T>,
}

impl<T> Bounds<T> {
    pub fn is_empty(&self) -> bool {
        self.minimum.is_none() && self.maximum.is_none()
    }
}

/// One field of a contract, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct ContractField {
    pub name: String,
    pub ty: FieldType,
}

impl FieldType {
    /// `self?`, never nested: `any` and optional types are returned unchanged.
    pub fn optional(self) -> FieldType {
        match self {
            FieldType::Any | FieldType::Optional(_) => self,
            other => FieldType::Optional(Box::new(other)),
        }
    }

    /// Whether the field may be left out of an object (and so is not `required`).
    pub fn is_optional(&self) -> bool {
        matches!(self, FieldType::Optional(_))
    }

    /// The type without its `?`.
    pub fn required(&self) -> &FieldType {
        match self {
            FieldType::Optional(inner) => inner,
            other => other,
        }
    }

    /// How the type is written in messages: `string`, `integer[]`, `Address?`.
    pub fn describe(&self) -> String {
        match self {
            FieldType::Any => "any".to_owned(),
            FieldType::String(_) => "string".to_owned(),
            FieldType::Number(_) => "number".to_owned(),
            FieldType::Integer(_) => "integer".to_owned(),
            FieldType::Boolean => "boolean".to_owned(),
            FieldType::Enum(_) => "enum".to_owned(),
            FieldType::Array(None) => "array".to_owned(),
            FieldType::Array(Some(item)) => format!("{}[]", item.describe()),
            FieldType::Object => "object".to_owned(),
            FieldType::Contract(name) => name.clone(),
            FieldType::Optional(inner) => format!("{}?", inner.describe()),
        }
    }

    /// The expression language's view: ranges dropped, nested contracts looked up in
    /// `contracts` (`any` when absent).
    pub fn to_type(&self, contracts: &HashMap<String, Type>) -> Type {
        match self {
            FieldType::Any => Type::Any,
            FieldType::String(_) => Type::String,
            FieldType::Number(_) => Type::Float,
            FieldType::Integer(_) => Type::Int,
            FieldType::Boolean => Type::Bool,
            FieldType::Enum(values) => Type::enumeration(values.clone()),
            FieldType::Array(item) => Type::list(
                item.as_deref()
                    .map_or(Type::Any, |item| item.to_type(contracts)),
            ),
            FieldType::Object => Type::record(Record {
                fields: Vec::new(),
                open: true,
            }),
            FieldType::Contract(name) => contracts.get(name).cloned().unwrap_or(Type::Any),
            FieldType::Optional(inner) => inner.to_type(contracts).optional(),
        }
    }

    /// Replaces every reference to a contract in `names` by `any`.
    pub(crate) fn forget_contracts(&mut self, names: &HashSet<&str>) {
        match self {
            FieldType::Contract(name) if names.contains(name.as_str()) => *self = FieldType::Any,
            FieldType::Array(Some(item)) => item.forget_contracts(names),
            FieldType::Optional(inner) => {
                inner.forget_contracts(names);
                if **inner == FieldType::Any {
                    *self = FieldType::Any;
                }
            }
            _ => {}
        }
    }

    /// The contracts the type names, in order.
    pub(crate) fn contracts(&self) -> Vec<&str> {
        match self {
            FieldType::Contract(name) => vec![name.as_str()],
            FieldType::Array(Some(item)) => item.contracts(),
            FieldType::Optional(inner) => inner.contracts(),
            _ => Vec::new(),
        }
    }
}
