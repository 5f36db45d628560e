//! The types the checker works with, and the environment of typed names it checks against.
//!
//! Types are written (in messages, and parsed back by [`Type::from_str`](std::str::FromStr)) as:
//! `any`, `null`, `bool`, `int`, `float`, `string`, `list<T>`, `{name: T, other: T}` (a record;
//! `{name: T, ...}` is open: fields it does not list are `any`), an enum of literals
//! `'low' | 'high'`, and `T?` for optional (`('a' | 'b')?` when the inner type is an enum).
//! `float` is a number: an `int` is accepted wherever a `float` is.

use std::collections::BTreeMap;
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    /// Unknown: every operation is allowed and checked only at run time.
    Any,
    Null,
    Bool,
    Int,
    /// A number; an `int` is accepted wherever a `float` is.
    Float,
    String,
    List(Box<Type>),
    Record(Record),
    /// One of a fixed set of literal values (a contract field with `values:`).
    Enum(Vec<Literal>),
    /// The inner type or `None`.
    Optional(Box<Type>),
}

/// A record: named fields in declaration order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    pub fields: Vec<RecordField>,
    /// Open records allow fields they do not list (typed `any`).
    pub open: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RecordField {
    pub name: String,
    pub ty: Type,
}

/// A literal value of an enum type.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Record {
    pub fn field(&self, name: &str) -> Option<&Type> {
        self.fields
            .iter()
            .find(|field| field.name == name)
            .map(|field| &field.ty)
    }
}

/// The names an expression may use, with their types: what the caller (the compiler, the
/// runtime, `stratumc eval`) knows about the place the expression stands.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Env {
    /// Free names: `result`, `item`, `accumulator`, … Built-in functions are not listed here.
    pub names: BTreeMap<String, Type>,
    /// The type of `$.input`; `None` when `$.input` may not be used here.
    pub input: Option<Type>,
    /// The output type of every step `$.steps.<id>.output` may name here.
    pub steps: BTreeMap<String, Type>,
}

impl Env {
    pub fn new() -> Env {
        Env::default()
    }

    /// Declares a free name.
    pub fn with(mut self, name: impl Into<String>, ty: Type) -> Env {
        self.names.insert(name.into(), ty);
        self
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Str(value) => write!(f, "{}", crate::print::string_literal(value)),
            Literal::Int(value) => write!(f, "{value}"),
            Literal::Float(value) => write!(f, "{}", crate::print::float_literal(*value)),
            Literal::Bool(true) => f.write_str("True"),
            Literal::Bool(false) => f.write_str("False"),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Any => f.write_str("any"),
            Type::Null => f.write_str("null"),
            Type::Bool => f.write_str("bool"),
            Type::Int => f.write_str("int"),
            Type::Float => f.write_str("float"),
            Type::String => f.write_str("string"),
            Type::List(item) => write!(f, "list<{item}>"),
            Type::Record(record) => {
                f.write_str("{")?;
                for (i, field) in record.fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}: {}", field.name, field.ty)?;
                }
                if record.open {
                    f.write_str(if record.fields.is_empty() {
                        "..."
                    } else {
                        ", ..."
                    })?;
                }
                f.write_str("}")
            }
            Type::Enum(values) => {
                for (i, value) in values.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" | ")?;
                    }
                    write!(f, "{value}")?;
                }
                Ok(())
            }
            Type::Optional(inner) => match inner.as_ref() {
                Type::Enum(_) => write!(f, "({inner})?"),
                _ => write!(f, "{inner}?"),
            },
        }
    }
}
