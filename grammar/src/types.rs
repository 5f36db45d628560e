//! The types the checker works with, and the environment of typed names it checks against.
//!
//! Types are written (in messages, and parsed back by [`Type::from_str`](std::str::FromStr)) as:
//! `any`, `null`, `bool`, `int`, `float`, `string`, `list<T>`, `{name: T, other: T}` (a record;
//! `{name: T, ...}` is open: fields it does not list are `any`), an enum of literals
//! `'low' | 'high'`, and `T?` for optional (`('a' | 'b')?` when the inner type is an enum).
//! `float` is a number: an `int` is accepted wherever a `float` is.
//!
//! The notation in full (whitespace is free between tokens):
//!
//! ```text
//! type     := union
//! union    := postfix ('|' postfix)*        every alternative an enum: the values are merged
//! postfix  := primary '?'*
//! primary  := 'any' | 'null' | 'bool' | 'int' | 'float' | 'string' | 'never'
//!           | 'list' '<' type '>'
//!           | '{' [field (',' field)*] [',' '...'] '}'  |  '{' '...' '}'
//!           | literal                       an enum of one value
//!           | '(' type ')'
//! field    := (identifier | string) ':' type
//! literal  := string | integer | float | 'True' | 'False'
//! ```
//!
//! Strings take single or double quotes and Python's escapes; a field name that is not an
//! identifier is written quoted (`{'my-field': int}`); `never` is the enum of no values.
//! [`Display`](fmt::Display) writes this notation and [`FromStr`](std::str::FromStr) reads
//! back what it writes.

mod notation;

pub use notation::TypeParseError;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

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
    /// Shared: a contract's record type is copied into every place that holds it (each step
    /// producing it, each expression reading it), so a copy must not copy its fields.
    Record(Arc<Record>),
    /// One of a fixed set of literal values (a contract field with `values:`). Shared, as a
    /// record is: an enum may have thousands of values.
    Enum(Arc<[Literal]>),
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
#[derive(Clone, Debug, PartialEq)]
pub struct Env {
    /// Free names: `result`, `item`, `accumulator`, … Built-in functions are not listed here.
    pub names: BTreeMap<String, Type>,
    /// The type of `$.input`; `None` when `$.input` may not be used here.
    pub input: Option<Type>,
    /// The output type of every step `$.steps.<id>.output` may name here.
    pub steps: BTreeMap<String, Type>,
    /// Whether an unknown step, name or field gets a did-you-mean (on by default). Each costs
    /// a comparison with every candidate, so a caller that checks many expressions against
    /// thousands of steps turns it off once it has made enough, and a spec full of typos stays
    /// linear.
    pub suggest: bool,
}

impl Default for Env {
    fn default() -> Env {
        Env {
            names: BTreeMap::new(),
            input: None,
            steps: BTreeMap::new(),
            suggest: true,
        }
    }
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
                    write_field_name(f, &field.name)?;
                    write!(f, ": {}", field.ty)?;
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
            Type::Enum(values) if values.is_empty() => f.write_str("never"),
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

/// Writes a record field name: bare when it is an identifier, quoted otherwise.
fn write_field_name(f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
    if is_identifier(name) {
        f.write_str(name)
    } else {
        f.write_str(&crate::print::string_literal(name))
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Literal {
    /// Whether the two literals are equal as Python compares them: numbers by value (`1 ==
    /// 1.0`, `True == 1`), strings by content, a string never equal to a number.
    pub fn same_value(&self, other: &Literal) -> bool {
        match (self, other) {
            (Literal::Str(a), Literal::Str(b)) => a == b,
            (Literal::Str(_), _) | (_, Literal::Str(_)) => false,
            (a, b) => match (a.as_int(), b.as_int()) {
                (Some(a), Some(b)) => a == b,
                _ => a.as_f64() == b.as_f64(),
            },
        }
    }

    /// The type of the literal: `string`, `int`, `float` or `bool`.
    pub fn ty(&self) -> Type {
        match self {
            Literal::Str(_) => Type::String,
            Literal::Int(_) => Type::Int,
            Literal::Float(_) => Type::Float,
            Literal::Bool(_) => Type::Bool,
        }
    }

    fn as_int(&self) -> Option<i64> {
        match self {
            Literal::Int(value) => Some(*value),
            Literal::Bool(value) => Some(i64::from(*value)),
            Literal::Str(_) | Literal::Float(_) => None,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            // The precision lost above 2^53 only matters against a float, as in Python.
            #[allow(clippy::cast_precision_loss)]
            Literal::Int(value) => Some(*value as f64),
            Literal::Float(value) => Some(*value),
            Literal::Bool(value) => Some(f64::from(u8::from(*value))),
            Literal::Str(_) => None,
        }
    }
}

impl Type {
    /// An enum of `values`.
    pub fn enumeration(values: Vec<Literal>) -> Type {
        Type::Enum(values.into())
    }

    /// A record type.
    pub fn record(record: Record) -> Type {
        Type::Record(Arc::new(record))
    }

    /// `list<item>`.
    pub fn list(item: Type) -> Type {
        Type::List(Box::new(item))
    }

    /// `self?`: the type or `None`. `any`, `null` and optional types are returned unchanged,
    /// so optionals never nest by accident.
    pub fn optional(self) -> Type {
        match self {
            Type::Any | Type::Null | Type::Optional(_) => self,
            other => Type::Optional(Box::new(other)),
        }
    }

    /// Whether the type is `T?`.
    pub fn is_optional(&self) -> bool {
        matches!(self, Type::Optional(_))
    }

    /// Whether a value of this type may be `None`: `any`, `null` and `T?`.
    pub fn can_be_none(&self) -> bool {
        matches!(self, Type::Any | Type::Null | Type::Optional(_))
    }

    /// The type without its optional wrappers: `T` for `T?` (and `T??`), the type itself
    /// otherwise.
    pub fn non_optional(&self) -> &Type {
        let mut ty = self;
        while let Type::Optional(inner) = ty {
            ty = inner;
        }
        ty
    }

    /// The values of an enum type (looking through `?`), `None` for other types.
    pub fn enum_values(&self) -> Option<&[Literal]> {
        match self.non_optional() {
            Type::Enum(values) => Some(values),
            _ => None,
        }
    }

    /// The plain type an enum's values share: `string`, `int`, `bool`, `float` for numbers
    /// of several kinds, `any` for values of mixed kinds or no values. Other types (and
    /// optionals) are returned unchanged.
    pub fn widened(&self) -> Type {
        match self {
            Type::Enum(values) => {
                let mut types = values.iter().map(Literal::ty);
                let Some(first) = types.next() else {
                    return Type::Any;
                };
                types.fold(first, |joined, ty| match (joined, ty) {
                    (a, b) if a == b => a,
                    (
                        Type::Int | Type::Float | Type::Bool,
                        Type::Int | Type::Float | Type::Bool,
                    ) => Type::Float,
                    _ => Type::Any,
                })
            }
            other => other.clone(),
        }
    }

    /// What iterating over a value of this type gives: the items of a list, the characters
    /// (`string`) of a string, the keys (`string`) of a record, `any` for `any`. An optional
    /// type gives its inner type's items (that the value is not `None` is checked at run
    /// time). `None` when the type cannot be iterated.
    pub fn element_type(&self) -> Option<Type> {
        match self.non_optional() {
            Type::Any => Some(Type::Any),
            Type::List(item) => Some(item.as_ref().clone()),
            Type::String | Type::Record(_) => Some(Type::String),
            ty @ Type::Enum(_) => match ty.widened() {
                Type::String => Some(Type::String),
                Type::Any => Some(Type::Any),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether a value of type `value` may stand where this type is expected. `any` accepts
    /// and is accepted by everything; `float` accepts `int`; a plain type accepts an enum of
    /// its values; an enum accepts an enum of a subset of its values; `T?` accepts `T` and
    /// `null`; lists compare their items; a record accepts a record that has each of its
    /// fields (or may have it: an open record, or an optional field). Strict about `None`:
    /// `int` does not accept `int?`.
    pub fn accepts(&self, value: &Type) -> bool {
        match (self, value) {
            (Type::Any, _) | (_, Type::Any) => true,
            (Type::Optional(_), Type::Null) => true,
            (Type::Optional(expected), Type::Optional(value)) => expected.accepts(value),
            (Type::Optional(expected), value) => expected.accepts(value),
            (Type::Float, Type::Int) => true,
            (Type::Enum(expected), Type::Enum(values)) => values
                .iter()
                .all(|value| expected.iter().any(|allowed| allowed.same_value(value))),
            (expected, Type::Enum(values)) => {
                values.iter().all(|value| expected.accepts(&value.ty()))
            }
            (Type::List(expected), Type::List(value)) => expected.accepts(value),
            (Type::Record(expected), Type::Record(value)) => {
                expected
                    .fields
                    .iter()
                    .all(|field| match value.field(&field.name) {
                        Some(ty) => field.ty.accepts(ty),
                        None => value.open || field.ty.can_be_none(),
                    })
            }
            (expected, value) => expected == value,
        }
    }

    /// The type of a value that is one of the two: the same type gives itself, `int` and
    /// `float` give `float`, `T` and `None` give `T?`, two enums give the enum of both
    /// values, an enum and a type that accepts it give that type, lists join their items;
    /// anything else gives `any`.
    pub fn join(&self, other: &Type) -> Type {
        if self == other {
            return self.clone();
        }
        match (self, other) {
            (Type::Any, _) | (_, Type::Any) => Type::Any,
            (Type::Null, ty) | (ty, Type::Null) => ty.clone().optional(),
            (Type::Optional(inner), ty) | (ty, Type::Optional(inner)) => inner.join(ty).optional(),
            (Type::Int, Type::Float) | (Type::Float, Type::Int) => Type::Float,
            (Type::Enum(a), Type::Enum(b)) => {
                let mut values = a.to_vec();
                for value in b.iter() {
                    if !values.iter().any(|known| known.same_value(value)) {
                        values.push(value.clone());
                    }
                }
                Type::enumeration(values)
            }
            (Type::Enum(_), ty) | (ty, Type::Enum(_)) => {
                let enumeration = if matches!(self, Type::Enum(_)) {
                    self
                } else {
                    other
                };
                if ty.accepts(enumeration) {
                    ty.clone()
                } else {
                    enumeration.widened().join(ty)
                }
            }
            (Type::List(a), Type::List(b)) => Type::list(a.join(b)),
            _ => Type::Any,
        }
    }
}
