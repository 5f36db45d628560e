//! Python semantics over JSON values: the run-time value of the VM, truthiness, equality,
//! ordering, arithmetic, `in`, `str()` and `repr()`.
//!
//! A [`Val`] borrows what it can: strings, lists and objects read from the bindings or from the
//! program's constants stay borrowed (`'a`), only values the expression builds are owned. Every
//! operation that walks a value charges the [`Meter`] per element, and every operation that
//! builds a string or a list checks its size against the limit *before* building it.

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::rc::Rc;

use serde_json::{Map, Number, Value};

use crate::eval_error::EvalErrorKind;

/// A run-time value: 16 bytes, a whole-word tag and a whole-word payload (the VM moves values
/// as two words; a byte tag with a byte payload beside it costs store-forwarding stalls).
#[derive(Clone, Debug, Default)]
#[repr(u64)]
pub(crate) enum Val<'a> {
    #[default]
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A string the expression built.
    Str(Rc<String>),
    /// A string borrowed from the bindings or the constants.
    BStr(&'a String),
    /// A JSON array or object borrowed from the bindings or the constants (never a scalar:
    /// scalars are converted on load).
    Json(&'a Value),
    List(Rc<Vec<Val<'a>>>),
    Tuple(Rc<Vec<Val<'a>>>),
    /// A generator argument, materialised (`min(x for x in …)`, `','.join(…)`).
    Gen(Rc<Vec<Val<'a>>>),
}

/// Why an operation failed: one pointer, so that `Result<Val, Fault>` is returned in
/// registers.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fault(pub(crate) Box<Failure>);

/// What failed; the VM adds the span and, for the last four, the expression text.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Failure {
    Msg(EvalErrorKind, String),
    /// A complete message with its own span (a prefix of a `$`-reference).
    At(EvalErrorKind, String, crate::span::Span),
    /// "division by zero in `{expr}`" (`/`, `//`).
    ZeroDivision,
    /// "modulo by zero in `{expr}`".
    ZeroModulo,
    /// "integer overflow in `{expr}`".
    Overflow,
    /// "`{expr}` is not a finite number".
    NotFinite,
    /// Several violations, each its own message (`plan_completion`).
    Violations(Vec<String>),
}

impl Fault {
    #[cold]
    pub(crate) fn msg(kind: EvalErrorKind, message: String) -> Fault {
        Fault(Box::new(Failure::Msg(kind, message)))
    }

    #[cold]
    pub(crate) fn at(kind: EvalErrorKind, message: String, span: crate::span::Span) -> Fault {
        Fault(Box::new(Failure::At(kind, message, span)))
    }

    #[cold]
    pub(crate) fn zero_division() -> Fault {
        Fault(Box::new(Failure::ZeroDivision))
    }

    #[cold]
    pub(crate) fn zero_modulo() -> Fault {
        Fault(Box::new(Failure::ZeroModulo))
    }

    #[cold]
    pub(crate) fn overflow() -> Fault {
        Fault(Box::new(Failure::Overflow))
    }

    #[cold]
    pub(crate) fn not_finite() -> Fault {
        Fault(Box::new(Failure::NotFinite))
    }

    #[cold]
    pub(crate) fn violations(violations: Vec<String>) -> Fault {
        Fault(Box::new(Failure::Violations(violations)))
    }

    #[cold]
    pub(crate) fn type_error(message: impl Into<String>) -> Fault {
        Fault::msg(EvalErrorKind::Type, message.into())
    }

    #[cold]
    pub(crate) fn value_error(message: impl Into<String>) -> Fault {
        Fault::msg(EvalErrorKind::Value, message.into())
    }
}

pub(crate) type Res<T> = Result<T, Fault>;

/// The instruction budget and the value-size limit of one evaluation.
#[derive(Clone, Debug)]
pub(crate) struct Meter {
    pub(crate) remaining: u64,
    pub(crate) budget: u64,
    pub(crate) max_bytes: usize,
}

impl Meter {
    pub(crate) fn new(budget: u64, max_bytes: usize) -> Meter {
        Meter {
            remaining: budget,
            budget,
            max_bytes,
        }
    }

    /// Spends `units` of the budget.
    #[inline]
    pub(crate) fn charge(&mut self, units: u64) -> Res<()> {
        if self.remaining < units {
            self.remaining = 0;
            return Err(self.exhausted());
        }
        self.remaining -= units;
        Ok(())
    }

    pub(crate) fn exhausted(&self) -> Fault {
        Fault::msg(
            EvalErrorKind::Budget,
            format!("instruction budget of {} exhausted", self.budget),
        )
    }

    /// Work proportional to `bytes` of string: one unit per 64 bytes.
    #[inline]
    pub(crate) fn charge_bytes(&mut self, bytes: usize) -> Res<()> {
        self.charge(1 + (bytes as u64) / 64)
    }

    /// Refuses a value of `bytes` (approximate) before it is built.
    pub(crate) fn check_size(&self, bytes: u128, what: &str) -> Res<()> {
        if bytes > self.max_bytes as u128 {
            return Err(Fault::msg(
                EvalErrorKind::ValueSize,
                format!(
                    "{what} would take {} bytes, over the limit of {} bytes",
                    bytes, self.max_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// A sequence view: borrowed JSON elements or run-time values.
#[derive(Clone, Copy)]
pub(crate) enum Seq<'s, 'a> {
    Json(&'a [Value]),
    Vals(&'s [Val<'a>]),
}

impl<'s, 'a> Seq<'s, 'a> {
    pub(crate) fn len(self) -> usize {
        match self {
            Seq::Json(items) => items.len(),
            Seq::Vals(items) => items.len(),
        }
    }

    pub(crate) fn get(self, index: usize) -> Option<Val<'a>> {
        match self {
            Seq::Json(items) => items.get(index).map(Val::from_json),
            Seq::Vals(items) => items.get(index).cloned(),
        }
    }

    pub(crate) fn iter(self) -> impl Iterator<Item = Val<'a>> + 's
    where
        'a: 's,
    {
        (0..self.len()).filter_map(move |i| self.get(i))
    }
}

/// The kind of a value for ordering and equality: lists and tuples never compare with each
/// other.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SeqKind {
    List,
    Tuple,
    Gen,
}

impl<'a> Val<'a> {
    /// A JSON value as a run-time value: scalars converted, strings, arrays and objects
    /// borrowed.
    #[inline(always)]
    pub(crate) fn from_json(value: &'a Value) -> Val<'a> {
        match value {
            Value::Null => Val::None,
            Value::Bool(b) => Val::Bool(*b),
            Value::Number(n) => number(n),
            Value::String(s) => Val::BStr(s),
            Value::Array(_) | Value::Object(_) => Val::Json(value),
        }
    }

    pub(crate) fn string(s: String) -> Val<'a> {
        Val::Str(Rc::new(s))
    }

    /// Python's name of the value's type, as messages show it.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Val::None => "None",
            Val::Bool(_) => "bool",
            Val::Int(_) => "int",
            Val::Float(_) => "float",
            Val::Str(_) | Val::BStr(_) => "str",
            Val::Json(Value::Object(_)) => "dict",
            Val::Json(_) | Val::List(_) => "list",
            Val::Tuple(_) => "tuple",
            Val::Gen(_) => "generator",
        }
    }

    #[inline]
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s.as_str()),
            Val::BStr(s) => Some(s.as_str()),
            _ => None,
        }
    }

    /// The elements of a list, tuple or generator, and which of those it is.
    #[inline]
    pub(crate) fn as_seq(&self) -> Option<(SeqKind, Seq<'_, 'a>)> {
        match self {
            Val::Json(Value::Array(items)) => Some((SeqKind::List, Seq::Json(items))),
            Val::List(items) => Some((SeqKind::List, Seq::Vals(items))),
            Val::Tuple(items) => Some((SeqKind::Tuple, Seq::Vals(items))),
            Val::Gen(items) => Some((SeqKind::Gen, Seq::Vals(items))),
            _ => None,
        }
    }

    #[inline]
    pub(crate) fn as_object(&self) -> Option<&'a Map<String, Value>> {
        match self {
            Val::Json(Value::Object(map)) => Some(map),
            _ => None,
        }
    }

    /// An integer view of a number: bools are ints.
    #[inline]
    fn as_int(&self) -> Option<i64> {
        match self {
            Val::Int(i) => Some(*i),
            Val::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    pub(crate) fn is_number(&self) -> bool {
        matches!(self, Val::Int(_) | Val::Float(_) | Val::Bool(_))
    }

    /// Python truthiness.
    #[inline(always)]
    pub(crate) fn truthy(&self) -> bool {
        match self {
            Val::None => false,
            Val::Bool(b) => *b,
            Val::Int(i) => *i != 0,
            Val::Float(f) => *f != 0.0,
            Val::Str(s) => !s.is_empty(),
            Val::BStr(s) => !s.is_empty(),
            Val::Json(Value::Array(items)) => !items.is_empty(),
            Val::Json(Value::Object(map)) => !map.is_empty(),
            Val::Json(other) => Val::from_json(other).truthy(),
            Val::List(items) | Val::Tuple(items) => !items.is_empty(),
            // A generator object is always true in Python.
            Val::Gen(_) => true,
        }
    }

    /// The value as JSON; tuples and generators become arrays.
    pub(crate) fn to_json(&self) -> Res<Value> {
        Ok(match self {
            Val::None => Value::Null,
            Val::Bool(b) => Value::Bool(*b),
            Val::Int(i) => Value::Number(Number::from(*i)),
            Val::Float(f) => Value::Number(Number::from_f64(*f).ok_or_else(Fault::not_finite)?),
            Val::Str(s) => Value::String(String::clone(s)),
            Val::BStr(s) => Value::String(String::clone(s)),
            Val::Json(value) => (*value).clone(),
            Val::List(items) | Val::Tuple(items) | Val::Gen(items) => Value::Array(
                items
                    .iter()
                    .map(Val::to_json)
                    .collect::<Res<Vec<Value>>>()?,
            ),
        })
    }

    /// An estimate of the bytes the value holds, for the size limit: strings by length,
    /// containers 16 bytes per element plus what their owned elements hold (borrowed JSON is
    /// counted shallowly: it is not copied).
    pub(crate) fn approx_bytes(&self) -> u128 {
        match self {
            Val::None | Val::Bool(_) | Val::Int(_) | Val::Float(_) => 8,
            Val::Str(s) => s.len() as u128,
            Val::BStr(s) => s.len() as u128,
            Val::Json(Value::Array(items)) => 16 * items.len() as u128,
            Val::Json(Value::Object(map)) => 16 * map.len() as u128,
            Val::Json(_) => 8,
            Val::List(items) | Val::Tuple(items) | Val::Gen(items) => {
                items.iter().map(|item| 16 + item.approx_bytes()).sum()
            }
        }
    }
}

#[inline]
fn number<'a>(n: &Number) -> Val<'a> {
    match n.as_i64() {
        Some(i) => Val::Int(i),
        None => Val::Float(n.as_f64().unwrap_or(f64::NAN)),
    }
}

/// String equality, inline: lengths first, then at most two overlapping word compares for
/// strings of up to 16 bytes (names and field names), instead of a call to `memcmp`.
#[inline(always)]
pub(crate) fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 8 {
        if n > 16 {
            return a == b;
        }
        word8(a, 0) == word8(b, 0) && word8(a, n - 8) == word8(b, n - 8)
    } else if n >= 4 {
        word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4)
    } else {
        // 0 to 3 bytes: the first, middle and last cover them all.
        a.first() == b.first() && a.get(n / 2) == b.get(n / 2) && a.last() == b.last()
    }
}

#[inline(always)]
fn word8(s: &[u8], at: usize) -> u64 {
    s.get(at..at + 8)
        .and_then(|w| <[u8; 8]>::try_from(w).ok())
        .map_or(0, u64::from_ne_bytes)
}

#[inline(always)]
fn word4(s: &[u8], at: usize) -> u32 {
    s.get(at..at + 4)
        .and_then(|w| <[u8; 4]>::try_from(w).ok())
        .map_or(0, u32::from_ne_bytes)
}

/// The field `key` of an object. Small objects are scanned with [`str_eq`] (one length compare
/// for most keys); larger ones use the map's search.
#[inline]
pub(crate) fn field_of<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    field_of_inline(map, key)
}

/// [`field_of`], always inlined (the evaluator's fast path).
#[inline(always)]
pub(crate) fn field_of_inline<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if map.len() <= SCAN_FIELDS {
        for (k, v) in map {
            if str_eq(k, key) {
                return Some(v);
            }
        }
        None
    } else {
        map.get(key)
    }
}

/// Objects up to this many fields (one B-tree leaf) are scanned rather than searched: the
/// scan wins even when every key has the target's length.
const SCAN_FIELDS: usize = 11;

/// Python's exact comparison of an int with a float (no rounding of the int).
fn cmp_int_float(i: i64, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    // 2^63 as a float; every float at or above it is greater than every i64.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if f >= TWO_63 {
        return Some(Ordering::Less);
    }
    if f < -TWO_63 {
        return Some(Ordering::Greater);
    }
    let whole = f.trunc();
    // In range: exact conversion.
    let whole_int = whole as i64;
    match i.cmp(&whole_int) {
        Ordering::Equal => 0.0f64.partial_cmp(&(f - whole)),
        other => Some(other),
    }
}

/// Numeric comparison of two numbers (bools are ints); `None` if either is not a number or
/// a NaN is involved.
fn cmp_numbers(a: &Val<'_>, b: &Val<'_>) -> Option<Ordering> {
    match (a, b) {
        (Val::Float(x), Val::Float(y)) => x.partial_cmp(y),
        (Val::Float(x), _) => cmp_int_float(b.as_int()?, *x).map(Ordering::reverse),
        (_, Val::Float(y)) => cmp_int_float(a.as_int()?, *y),
        _ => Some(a.as_int()?.cmp(&b.as_int()?)),
    }
}

/// Python `==`. Charges one unit per element compared.
pub(crate) fn equal(a: &Val<'_>, b: &Val<'_>, meter: &mut Meter) -> Res<bool> {
    meter.charge(1)?;
    if a.is_number() && b.is_number() {
        return Ok(cmp_numbers(a, b) == Some(Ordering::Equal));
    }
    if let (Some(x), Some(y)) = (a.as_str(), b.as_str()) {
        meter.charge_bytes(x.len().min(y.len()))?;
        return Ok(x == y);
    }
    if let (Some((ka, xs)), Some((kb, ys))) = (a.as_seq(), b.as_seq()) {
        if ka != kb || ka == SeqKind::Gen || xs.len() != ys.len() {
            return Ok(false);
        }
        for (x, y) in xs.iter().zip(ys.iter()) {
            if !equal(&x, &y, meter)? {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    match (a, b) {
        (Val::None, Val::None) => Ok(true),
        (Val::Json(Value::Object(x)), Val::Json(Value::Object(y))) => {
            if x.len() != y.len() {
                return Ok(false);
            }
            for (key, xv) in x.iter() {
                let Some(yv) = y.get(key) else {
                    return Ok(false);
                };
                if !equal(&Val::from_json(xv), &Val::from_json(yv), meter)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Python ordering for `<`, `<=`, `>`, `>=`, `min` and `max`: numbers, strings, and lists or
/// tuples (lexicographically). `None` for an unordered pair of numbers (NaN). `op` names the
/// operator in the message.
pub(crate) fn compare(
    a: &Val<'_>,
    b: &Val<'_>,
    op: &str,
    meter: &mut Meter,
) -> Res<Option<Ordering>> {
    meter.charge(1)?;
    if a.is_number() && b.is_number() {
        return Ok(cmp_numbers(a, b));
    }
    if let (Some(x), Some(y)) = (a.as_str(), b.as_str()) {
        meter.charge_bytes(x.len().min(y.len()))?;
        return Ok(Some(x.cmp(y)));
    }
    if let (Some((ka, xs)), Some((kb, ys))) = (a.as_seq(), b.as_seq())
        && ka == kb
        && ka != SeqKind::Gen
    {
        for (x, y) in xs.iter().zip(ys.iter()) {
            if !equal(&x, &y, meter)? {
                return compare(&x, &y, op, meter);
            }
        }
        return Ok(Some(xs.len().cmp(&ys.len())));
    }
    Err(Fault::type_error(format!(
        "cannot compare `{}` with `{}` using `{op}`",
        a.type_name(),
        b.type_name()
    )))
}

/// `needle in haystack`.
pub(crate) fn contains(needle: &Val<'_>, haystack: &Val<'_>, meter: &mut Meter) -> Res<bool> {
    if let Some(text) = haystack.as_str() {
        let Some(sub) = needle.as_str() else {
            return Err(Fault::type_error(format!(
                "`in <str>` needs a `str` on the left, not `{}`",
                needle.type_name()
            )));
        };
        meter.charge_bytes(text.len())?;
        return Ok(text.contains(sub));
    }
    if let Some((_, items)) = haystack.as_seq() {
        for item in items.iter() {
            if equal(needle, &item, meter)? {
                return Ok(true);
            }
        }
        return Ok(false);
    }
    if let Some(map) = haystack.as_object() {
        meter.charge(1)?;
        return match needle {
            Val::List(_) | Val::Json(_) | Val::Gen(_) => Err(Fault::type_error(format!(
                "a `{}` cannot be a key of a `dict`",
                needle.type_name()
            ))),
            _ => Ok(needle.as_str().is_some_and(|key| map.contains_key(key))),
        };
    }
    Err(Fault::type_error(format!(
        "`in` needs a `str`, `list`, `tuple` or `dict` on the right, not `{}`",
        haystack.type_name()
    )))
}

/// The keys of an object, as values.
pub(crate) fn keys<'a>(
    map: &'a Map<String, Value>,
    meter: &mut Meter,
) -> Result<Vec<Val<'a>>, Fault> {
    meter.charge(map.len() as u64)?;
    Ok(map.keys().map(Val::BStr).collect())
}

/// The elements of an iterable: a list, tuple, generator, string (its characters) or object
/// (its keys). Charges one unit per element.
pub(crate) fn elements<'a>(value: &Val<'a>, what: &str, meter: &mut Meter) -> Res<Vec<Val<'a>>> {
    if let Some((_, items)) = value.as_seq() {
        meter.charge(items.len() as u64)?;
        return Ok(items.iter().collect());
    }
    if let Some(text) = value.as_str() {
        meter.charge(text.len() as u64)?;
        return Ok(text.chars().map(|c| Val::string(c.to_string())).collect());
    }
    if let Some(map) = value.as_object() {
        return keys(map, meter);
    }
    Err(Fault::type_error(format!(
        "`{what}` needs an iterable (a list, tuple, string or object), not `{}`",
        value.type_name()
    )))
}

fn finite(f: f64) -> Res<Val<'static>> {
    if f.is_finite() {
        Ok(Val::Float(f))
    } else {
        Err(Fault::not_finite())
    }
}

/// Both operands as floats when at least one is a float and both are numbers.
fn float_pair(a: &Val<'_>, b: &Val<'_>) -> Option<(f64, f64)> {
    let as_float = |v: &Val<'_>| match v {
        Val::Float(f) => Some(*f),
        other => other.as_int().map(|i| i as f64),
    };
    Some((as_float(a)?, as_float(b)?))
}

fn unsupported(op: &str, a: &Val<'_>, b: &Val<'_>) -> Fault {
    Fault::type_error(format!(
        "unsupported operand types for `{op}`: `{}` and `{}`",
        a.type_name(),
        b.type_name()
    ))
}

/// Python float floor division and modulo (`float_divmod` in CPython).
fn float_divmod(x: f64, y: f64) -> (f64, f64) {
    let mut modulo = x % y;
    let mut div = (x - modulo) / y;
    if modulo != 0.0 {
        if (y < 0.0) != (modulo < 0.0) {
            modulo += y;
            div -= 1.0;
        }
    } else {
        modulo = 0.0f64.copysign(y);
    }
    let floordiv = if div != 0.0 {
        let mut floordiv = div.floor();
        if div - floordiv > 0.5 {
            floordiv += 1.0;
        }
        floordiv
    } else {
        0.0f64.copysign(x / y)
    };
    (floordiv, modulo)
}

fn int_floordiv(a: i64, b: i64) -> Res<i64> {
    if b == 0 {
        return Err(Fault::zero_division());
    }
    let q = a.checked_div(b).ok_or_else(Fault::overflow)?;
    let r = a.checked_rem(b).ok_or_else(Fault::overflow)?;
    if r != 0 && ((r < 0) != (b < 0)) {
        q.checked_sub(1).ok_or_else(Fault::overflow)
    } else {
        Ok(q)
    }
}

fn int_mod(a: i64, b: i64) -> Res<i64> {
    if b == 0 {
        return Err(Fault::zero_modulo());
    }
    // i64::MIN % -1 is 0 in Python; checked_rem refuses it.
    let r = a.checked_rem(b).unwrap_or(0);
    if r != 0 && ((r < 0) != (b < 0)) {
        r.checked_add(b).ok_or_else(Fault::overflow)
    } else {
        Ok(r)
    }
}

/// `a + b`.
pub(crate) fn add<'a>(a: &Val<'a>, b: &Val<'a>, meter: &mut Meter) -> Res<Val<'a>> {
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        return x.checked_add(y).map(Val::Int).ok_or_else(Fault::overflow);
    }
    if let Some((x, y)) = float_pair(a, b) {
        return finite(x + y);
    }
    if let (Some(x), Some(y)) = (a.as_str(), b.as_str()) {
        let len = x.len() + y.len();
        meter.check_size(len as u128, "the string")?;
        meter.charge_bytes(len)?;
        let mut joined = String::with_capacity(len);
        joined.push_str(x);
        joined.push_str(y);
        return Ok(Val::string(joined));
    }
    if let (Some((ka, xs)), Some((kb, ys))) = (a.as_seq(), b.as_seq())
        && ka == kb
        && ka != SeqKind::Gen
    {
        meter.check_size(a.approx_bytes() + b.approx_bytes(), "the list")?;
        meter.charge((xs.len() + ys.len()) as u64)?;
        let items: Vec<Val<'a>> = xs.iter().chain(ys.iter()).collect();
        return Ok(match ka {
            SeqKind::Tuple => Val::Tuple(Rc::new(items)),
            _ => Val::List(Rc::new(items)),
        });
    }
    Err(unsupported("+", a, b))
}

/// `a - b`.
pub(crate) fn sub<'a>(a: &Val<'a>, b: &Val<'a>) -> Res<Val<'a>> {
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        return x.checked_sub(y).map(Val::Int).ok_or_else(Fault::overflow);
    }
    if let Some((x, y)) = float_pair(a, b) {
        return finite(x - y);
    }
    Err(unsupported("-", a, b))
}

/// `a * b`.
pub(crate) fn mul<'a>(a: &Val<'a>, b: &Val<'a>, meter: &mut Meter) -> Res<Val<'a>> {
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        return x.checked_mul(y).map(Val::Int).ok_or_else(Fault::overflow);
    }
    if let Some((x, y)) = float_pair(a, b) {
        return finite(x * y);
    }
    let (seq, times) = match (a.as_int(), b.as_int()) {
        (_, Some(n)) if !a.is_number() => (a, n),
        (Some(n), _) if !b.is_number() => (b, n),
        _ => return Err(unsupported("*", a, b)),
    };
    let times = usize::try_from(times.max(0)).unwrap_or(usize::MAX);
    if let Some(text) = seq.as_str() {
        let len = (text.len() as u128) * (times as u128);
        meter.check_size(len, "the string")?;
        meter.charge_bytes(usize::try_from(len).unwrap_or(usize::MAX))?;
        return Ok(Val::string(text.repeat(times)));
    }
    if let Some((kind, items)) = seq.as_seq()
        && kind != SeqKind::Gen
    {
        meter.check_size(seq.approx_bytes() * (times as u128), "the list")?;
        let count = (items.len() as u128) * (times as u128);
        meter.charge(u64::try_from(count).unwrap_or(u64::MAX))?;
        if count == 0 {
            return Ok(match kind {
                SeqKind::Tuple => Val::Tuple(Rc::new(Vec::new())),
                _ => Val::List(Rc::new(Vec::new())),
            });
        }
        let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
        for _ in 0..times {
            out.extend(items.iter());
        }
        return Ok(match kind {
            SeqKind::Tuple => Val::Tuple(Rc::new(out)),
            _ => Val::List(Rc::new(out)),
        });
    }
    Err(unsupported("*", a, b))
}

/// `a / b`: always a float.
pub(crate) fn div<'a>(a: &Val<'a>, b: &Val<'a>) -> Res<Val<'a>> {
    let Some((x, y)) = float_pair(a, b) else {
        return Err(unsupported("/", a, b));
    };
    if y == 0.0 {
        return Err(Fault::zero_division());
    }
    finite(x / y)
}

/// `a // b`: floors toward negative infinity.
pub(crate) fn floordiv<'a>(a: &Val<'a>, b: &Val<'a>) -> Res<Val<'a>> {
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        return int_floordiv(x, y).map(Val::Int);
    }
    let Some((x, y)) = float_pair(a, b) else {
        return Err(unsupported("//", a, b));
    };
    if y == 0.0 {
        return Err(Fault::zero_division());
    }
    finite(float_divmod(x, y).0)
}

/// `a % b`: the result takes the divisor's sign.
pub(crate) fn modulo<'a>(a: &Val<'a>, b: &Val<'a>) -> Res<Val<'a>> {
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        return int_mod(x, y).map(Val::Int);
    }
    let Some((x, y)) = float_pair(a, b) else {
        if a.as_str().is_some() {
            return Err(Fault::type_error(
                "`%` string formatting is not supported: build the string with `+` and `str()`",
            ));
        }
        return Err(unsupported("%", a, b));
    };
    if y == 0.0 {
        return Err(Fault::zero_modulo());
    }
    finite(float_divmod(x, y).1)
}

/// `-a`.
pub(crate) fn neg<'a>(a: &Val<'a>) -> Res<Val<'a>> {
    match a {
        Val::Float(f) => Ok(Val::Float(-f)),
        other => match other.as_int() {
            Some(i) => i.checked_neg().map(Val::Int).ok_or_else(Fault::overflow),
            None => Err(Fault::type_error(format!(
                "unary `-` of `{}` is not defined",
                a.type_name()
            ))),
        },
    }
}

/// `+a`.
pub(crate) fn pos<'a>(a: &Val<'a>) -> Res<Val<'a>> {
    match a {
        Val::Float(f) => Ok(Val::Float(*f)),
        other => match other.as_int() {
            Some(i) => Ok(Val::Int(i)),
            None => Err(Fault::type_error(format!(
                "unary `+` of `{}` is not defined",
                a.type_name()
            ))),
        },
    }
}

/// A writer of `str()` / `repr()` text that refuses to grow past a limit.
pub(crate) struct Repr {
    pub(crate) out: String,
    limit: usize,
    /// Set when the text was cut at the limit.
    pub(crate) truncated: bool,
}

impl Repr {
    pub(crate) fn new(limit: usize) -> Repr {
        Repr {
            out: String::new(),
            limit,
            truncated: false,
        }
    }

    fn push(&mut self, text: &str) -> bool {
        if self.truncated {
            return false;
        }
        if self.out.len() + text.len() > self.limit {
            let room = self.limit.saturating_sub(self.out.len());
            let mut cut = room.min(text.len());
            while cut > 0 && !text.is_char_boundary(cut) {
                cut -= 1;
            }
            self.out.push_str(text.get(..cut).unwrap_or(""));
            self.truncated = true;
            return false;
        }
        self.out.push_str(text);
        true
    }

    /// Writes `value` as Python's `repr()` (`str()` when `top` and the value is a string).
    /// Returns false once the limit is reached.
    pub(crate) fn write(&mut self, value: &Val<'_>, top: bool, meter: &mut Meter) -> Res<bool> {
        meter.charge(1)?;
        if let Some(text) = value.as_str() {
            meter.charge_bytes(text.len())?;
            return Ok(if top {
                self.push(text)
            } else {
                self.push(&crate::print::string_literal(text))
            });
        }
        if let Some((kind, items)) = value.as_seq() {
            if kind == SeqKind::Gen {
                return Err(Fault::type_error(
                    "a generator has no text: use a list comprehension `[…]`",
                ));
            }
            let (open, close) = if kind == SeqKind::Tuple {
                ("(", ")")
            } else {
                ("[", "]")
            };
            if !self.push(open) {
                return Ok(false);
            }
            for (i, item) in items.iter().enumerate() {
                if i > 0 && !self.push(", ") {
                    return Ok(false);
                }
                if !self.write(&item, false, meter)? {
                    return Ok(false);
                }
            }
            if kind == SeqKind::Tuple && items.len() == 1 && !self.push(",") {
                return Ok(false);
            }
            return Ok(self.push(close));
        }
        if let Some(map) = value.as_object() {
            if !self.push("{") {
                return Ok(false);
            }
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 && !self.push(", ") {
                    return Ok(false);
                }
                meter.charge_bytes(key.len())?;
                if !self.push(&crate::print::string_literal(key)) || !self.push(": ") {
                    return Ok(false);
                }
                if !self.write(&Val::from_json(item), false, meter)? {
                    return Ok(false);
                }
            }
            return Ok(self.push("}"));
        }
        let mut scalar = String::new();
        match value {
            Val::None => scalar.push_str("None"),
            Val::Bool(true) => scalar.push_str("True"),
            Val::Bool(false) => scalar.push_str("False"),
            Val::Int(i) => {
                let _ = write!(scalar, "{i}");
            }
            Val::Float(f) => scalar.push_str(&crate::print::float_literal(*f)),
            _ => {}
        }
        Ok(self.push(&scalar))
    }
}

/// Python's `str(value)`, refused past the size limit.
pub(crate) fn to_str<'a>(value: &Val<'a>, meter: &mut Meter) -> Res<Val<'a>> {
    if let Val::Str(_) | Val::BStr(_) = value {
        return Ok(value.clone());
    }
    let mut repr = Repr::new(meter.max_bytes);
    repr.write(value, true, meter)?;
    if repr.truncated {
        return Err(Fault::msg(
            EvalErrorKind::ValueSize,
            format!(
                "the text of `{}` would be over the limit of {} bytes",
                value.type_name(),
                meter.max_bytes
            ),
        ));
    }
    Ok(Val::string(repr.out))
}

/// Python-style `repr()` of a value for explanations, cut at about `limit` characters.
pub(crate) fn short_repr(value: &Val<'_>, limit: usize) -> String {
    let mut meter = Meter::new(100_000, usize::MAX);
    let mut repr = Repr::new(limit.saturating_mul(4));
    let complete = repr.write(value, false, &mut meter).unwrap_or(false);
    let text = repr.out;
    if complete && text.chars().count() <= limit {
        return text;
    }
    let mut cut: String = text.chars().take(limit.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Python's whitespace (`str.isspace`, `str.split()`, `str.strip()`).
pub(crate) fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn meter() -> Meter {
        Meter::new(1_000_000, 1 << 20)
    }

    #[test]
    fn str_eq_sees_every_byte() {
        for len in 0..40 {
            let a: String = (0..len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            assert!(str_eq(&a, &a.clone()), "{len}");
            for at in 0..len {
                let mut b = a.clone().into_bytes();
                if let Some(byte) = b.get_mut(at) {
                    *byte = b'Z';
                }
                let b = String::from_utf8(b).unwrap();
                assert!(!str_eq(&a, &b), "{len} {at}");
            }
            assert!(!str_eq(&a, &format!("{a}a")), "{len}");
        }
        assert!(str_eq("é", "é") && !str_eq("é", "e"));
    }

    #[test]
    fn int_float_comparison_is_exact() {
        assert_eq!(cmp_int_float(1, 1.0), Some(Ordering::Equal));
        assert_eq!(cmp_int_float(1, 1.5), Some(Ordering::Less));
        assert_eq!(cmp_int_float(-1, -1.5), Some(Ordering::Greater));
        assert_eq!(
            cmp_int_float(i64::MAX, 9_223_372_036_854_775_808.0),
            Some(Ordering::Less)
        );
        assert_eq!(
            cmp_int_float((1 << 53) + 1, (1u64 << 53) as f64),
            Some(Ordering::Greater)
        );
        assert_eq!(cmp_int_float(0, f64::NAN), None);
    }

    #[test]
    fn floor_division_and_modulo_follow_python() {
        assert_eq!(int_floordiv(-7, 2).unwrap(), -4);
        assert_eq!(int_floordiv(7, -2).unwrap(), -4);
        assert_eq!(int_mod(-7, 2).unwrap(), 1);
        assert_eq!(int_mod(7, -2).unwrap(), -1);
        assert_eq!(int_mod(i64::MIN, -1).unwrap(), 0);
        assert_eq!(int_floordiv(i64::MIN, -1), Err(Fault::overflow()));
        assert_eq!(float_divmod(-7.5, 2.0), (-4.0, 0.5));
        assert_eq!(float_divmod(7.5, -2.0), (-4.0, -0.5));
    }

    #[test]
    fn equality_across_kinds() {
        let mut m = meter();
        assert!(equal(&Val::Int(1), &Val::Float(1.0), &mut m).unwrap());
        assert!(equal(&Val::Bool(true), &Val::Int(1), &mut m).unwrap());
        assert!(!equal(&Val::Int(1), &Val::string("1".into()), &mut m).unwrap());
        let list = Val::List(Rc::new(vec![Val::Int(1)]));
        let tuple = Val::Tuple(Rc::new(vec![Val::Int(1)]));
        assert!(!equal(&list, &tuple, &mut m).unwrap());
    }

    #[test]
    fn size_limit_refuses_before_building() {
        let mut m = Meter::new(1_000_000, 1000);
        let err = mul(
            &Val::string("ab".into()),
            &Val::Int(1_000_000_000_000),
            &mut m,
        )
        .unwrap_err();
        assert!(matches!(*err.0, Failure::Msg(EvalErrorKind::ValueSize, _)));
    }
}
