//! The stack VM: evaluates a [`Program`] over JSON values with Python semantics, within an
//! instruction budget and a value-size limit.
//!
//! The bindings are borrowed: values read from them stay borrowed while the expression works
//! on them, and only what the expression builds is allocated.

use std::borrow::Cow;
use std::path::PathBuf;
use std::rc::Rc;

use serde_json::{Map, Value};

use crate::ast::{BinaryOp, CompareOp, UnaryOp};
use crate::calls;
use crate::compile::{Op, Program};
use crate::span::Span;
use crate::value::{self, Fault, Meter, Seq, Val};

/// What an evaluation reads: free names, `$.input` and step outputs, all borrowed.
#[derive(Clone, Debug, Default)]
pub struct Bindings<'a> {
    names: Vec<(Cow<'a, str>, &'a Value)>,
    input: Option<&'a Value>,
    steps: Vec<(Cow<'a, str>, &'a Value)>,
}

impl<'a> Bindings<'a> {
    pub fn new() -> Bindings<'a> {
        Bindings::default()
    }

    /// Binds a free name (`result`, `item`, `accumulator`, …); a later binding of the same
    /// name wins.
    pub fn name(mut self, name: impl Into<Cow<'a, str>>, value: &'a Value) -> Bindings<'a> {
        self.names.insert(0, (name.into(), value));
        self
    }

    /// Binds `$.input`.
    pub fn input(mut self, value: &'a Value) -> Bindings<'a> {
        self.input = Some(value);
        self
    }

    /// Binds `$.steps.<id>.output`.
    pub fn step(mut self, id: impl Into<Cow<'a, str>>, output: &'a Value) -> Bindings<'a> {
        self.steps.insert(0, (id.into(), output));
        self
    }

    #[inline]
    pub fn get_name(&self, name: &str) -> Option<&'a Value> {
        self.names
            .iter()
            .find(|(n, _)| n.as_ref() == name)
            .map(|(_, v)| *v)
    }

    pub fn get_input(&self) -> Option<&'a Value> {
        self.input
    }

    pub fn get_step(&self, id: &str) -> Option<&'a Value> {
        self.steps
            .iter()
            .find(|(n, _)| n.as_ref() == id)
            .map(|(_, v)| *v)
    }
}

/// The bounds of one evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Instructions one evaluation may execute; built-ins charge per element (and per 64
    /// bytes of text) they walk.
    pub instructions: u64,
    /// The largest string or list (approximate bytes) an evaluation may build with `+`, `*`,
    /// `str`, `join`, `split`, `replace`, a comprehension, ….
    pub max_value_bytes: usize,
    /// The project root that `file_exists` / `file_contains` paths resolve against; without
    /// one they fail.
    pub root: Option<PathBuf>,
    /// `file_contains` is False for a file larger than this (the reference: 10 MiB).
    pub max_file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            instructions: 1_000_000,
            max_value_bytes: 10 * 1024 * 1024,
            root: None,
            max_file_bytes: 10 * 1024 * 1024,
        }
    }
}

impl Limits {
    pub fn with_root(mut self, root: impl Into<PathBuf>) -> Limits {
        self.root = Some(root.into());
        self
    }
}

/// Why an evaluation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum EvalErrorKind {
    /// A free name, `$.input` or a step output that the bindings do not hold.
    UnboundName,
    /// A field or key the object does not have.
    MissingField,
    /// A list or string index out of range.
    IndexOutOfRange,
    /// An operation on a value of the wrong type (Python's `TypeError`).
    Type,
    /// A value the operation refuses (Python's `ValueError`: `int('x')`, `max([])`, …).
    Value,
    DivisionByZero,
    /// Integer arithmetic beyond 64 bits.
    Overflow,
    /// A float result that is infinite or NaN (JSON has no such number).
    NotFinite,
    /// The instruction budget ran out.
    Budget,
    /// A string or list over the size limit.
    ValueSize,
    /// A file built-in without a root, or with a path outside it.
    File,
    /// What the checker rejects (an unknown function, a syntax error) or a malformed program.
    Invalid,
}

/// A run-time error: what failed, and the span of the sub-expression that failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{message}")]
pub struct EvalError {
    pub kind: EvalErrorKind,
    /// Lowercase, specific: "division by zero in `a / b`".
    pub message: String,
    /// The failing sub-expression, in the expression's text.
    pub span: Span,
}

impl Program {
    /// Evaluates the program over `bindings`.
    pub fn evaluate(&self, bindings: &Bindings<'_>, limits: &Limits) -> Result<Value, EvalError> {
        let (result, _) = run_from(self, 0, bindings, limits, &mut NoTrace);
        let value = result?;
        value
            .to_json()
            .map_err(|fault| self.render(fault, self.whole()))
    }

    /// Evaluates the program and returns Python's truthiness of the result (`ensure`,
    /// `skip_if`, `exit_criterion`).
    pub fn evaluate_bool(
        &self,
        bindings: &Bindings<'_>,
        limits: &Limits,
    ) -> Result<bool, EvalError> {
        let (result, _) = run_from(self, 0, bindings, limits, &mut NoTrace);
        Ok(result?.truthy())
    }

    pub(crate) fn whole(&self) -> Span {
        Span::new(0, self.source.len())
    }

    pub(crate) fn render(&self, fault: Fault, span: Span) -> EvalError {
        let text = self.text(span);
        let (kind, message) = match fault {
            Fault::Msg(kind, message) => (kind, message),
            Fault::At(kind, message, at) => {
                return EvalError {
                    kind,
                    message,
                    span: at,
                };
            }
            Fault::ZeroDivision => (
                EvalErrorKind::DivisionByZero,
                format!("division by zero in `{text}`"),
            ),
            Fault::ZeroModulo => (
                EvalErrorKind::DivisionByZero,
                format!("modulo by zero in `{text}`"),
            ),
            Fault::Overflow => (
                EvalErrorKind::Overflow,
                format!("integer overflow in `{text}`: the result does not fit in 64 bits"),
            ),
            Fault::NotFinite => (
                EvalErrorKind::NotFinite,
                format!("`{text}` is not a finite number"),
            ),
        };
        EvalError {
            kind,
            message,
            span,
        }
    }

    fn base_span(&self, at: usize) -> Span {
        let at = u32::try_from(at).unwrap_or(u32::MAX);
        match self.bases.binary_search_by_key(&at, |(op, _)| *op) {
            Ok(i) => self.bases.get(i).map(|(_, span)| *span).unwrap_or_default(),
            Err(_) => Span::default(),
        }
    }
}

/// Observes the VM: after each op, the value on top of the stack.
pub(crate) trait Tracer<'a> {
    const ON: bool;
    fn after(&mut self, pc: usize, top: Option<&Val<'a>>);
}

/// No tracing: the normal evaluation.
pub(crate) struct NoTrace;

impl<'a> Tracer<'a> for NoTrace {
    const ON: bool = false;
    #[inline(always)]
    fn after(&mut self, _pc: usize, _top: Option<&Val<'a>>) {}
}

/// An iteration in progress.
struct Frame<'a> {
    source: IterSource<'a>,
    pos: usize,
    /// `any` found a truthy element / `all` found a falsy one.
    decided: bool,
    /// The bytes appended so far by a comprehension.
    bytes: u128,
}

enum IterSource<'a> {
    Json(&'a [Value]),
    Vals(Rc<Vec<Val<'a>>>),
    /// A string, iterated by code point (`pos` is a byte offset).
    Chars(Val<'a>),
}

fn malformed() -> Fault {
    Fault::Msg(
        EvalErrorKind::Invalid,
        "malformed program: the bytecode does not fit its tables".to_owned(),
    )
}

fn jump(pc: usize, offset: i32) -> usize {
    let target = pc as i64 + i64::from(offset);
    // An out-of-range target ends the loop (`ops.get` fails) and reads as malformed.
    usize::try_from(target).unwrap_or(usize::MAX)
}

/// Runs the program from op `start` to its end. Returns the value and the instructions used.
pub(crate) fn run_from<'a, T: Tracer<'a>>(
    program: &'a Program,
    start: usize,
    bindings: &Bindings<'a>,
    limits: &Limits,
    tracer: &mut T,
) -> (Result<Val<'a>, EvalError>, u64) {
    let mut meter = Meter::new(limits.instructions, limits.max_value_bytes);
    let mut pc = start;
    let result = execute(program, &mut pc, bindings, limits, &mut meter, tracer);
    let used = meter.budget - meter.remaining;
    let result = result.map_err(|fault| {
        let span = program
            .spans
            .get(pc)
            .copied()
            .unwrap_or_else(|| program.whole());
        program.render(fault, span)
    });
    (result, used)
}

macro_rules! pop {
    ($stack:expr) => {
        $stack.pop().ok_or_else(malformed)?
    };
}

fn execute<'a, T: Tracer<'a>>(
    program: &'a Program,
    pc_out: &mut usize,
    bindings: &Bindings<'a>,
    limits: &Limits,
    meter: &mut Meter,
    tracer: &mut T,
) -> Result<Val<'a>, Fault> {
    let ops = program.ops.as_slice();
    let mut stack: Vec<Val<'a>> = Vec::with_capacity(8);
    let mut frames: Vec<Frame<'a>> = Vec::new();
    let mut locals: Vec<Val<'a>> = vec![Val::None; program.locals as usize];
    let mut pc = *pc_out;
    while let Some(op) = ops.get(pc) {
        *pc_out = pc;
        meter.charge(1)?;
        let mut next = pc + 1;
        match *op {
            Op::Const(i) => {
                let value = program.constants.get(i as usize).ok_or_else(malformed)?;
                stack.push(Val::from_json(value));
            }
            Op::ConstTuple(i) => {
                let value = program.constants.get(i as usize).ok_or_else(malformed)?;
                let Value::Array(items) = value else {
                    return Err(malformed());
                };
                stack.push(Val::Tuple(Rc::new(
                    items.iter().map(Val::from_json).collect(),
                )));
            }
            Op::Name(i) => {
                let name = program.strings.get(i as usize).ok_or_else(malformed)?;
                match bindings.get_name(name) {
                    Some(value) => stack.push(Val::from_json(value)),
                    None => {
                        return Err(Fault::Msg(
                            EvalErrorKind::UnboundName,
                            format!("`{name}` is not bound: the evaluation has no value for it"),
                        ));
                    }
                }
            }
            Op::Local(slot) => {
                stack.push(locals.get(slot as usize).ok_or_else(malformed)?.clone());
            }
            Op::Store(slot) => {
                let value = pop!(stack);
                *locals.get_mut(slot as usize).ok_or_else(malformed)? = value;
            }
            Op::Input(path) => {
                let root = bindings.get_input().ok_or_else(|| {
                    Fault::Msg(
                        EvalErrorKind::UnboundName,
                        "`$.input` is not bound here".to_owned(),
                    )
                })?;
                stack.push(walk_path(program, pc, root, path)?);
            }
            Op::Step { step, path } => {
                let id = program.strings.get(step as usize).ok_or_else(malformed)?;
                let root = bindings.get_step(id).ok_or_else(|| {
                    Fault::Msg(
                        EvalErrorKind::UnboundName,
                        format!(
                            "`$.steps.{id}.output` is not bound: step `{id}` has no output here"
                        ),
                    )
                })?;
                stack.push(walk_path(program, pc, root, path)?);
            }
            Op::Attr(i) => {
                let name = program.strings.get(i as usize).ok_or_else(malformed)?;
                let base = pop!(stack);
                stack.push(field(program, pc, &base, name)?);
            }
            Op::Index => {
                let index = pop!(stack);
                let base = pop!(stack);
                stack.push(subscript(program, pc, &base, &index, meter)?);
            }
            Op::Call(builtin, argc) => {
                let base = stack
                    .len()
                    .checked_sub(argc as usize)
                    .ok_or_else(malformed)?;
                let args = stack.get(base..).ok_or_else(malformed)?;
                let result = calls::call(builtin, args, meter, limits)?;
                stack.truncate(base);
                stack.push(result);
            }
            Op::Method(method, argc) => {
                let base = stack
                    .len()
                    .checked_sub(argc as usize + 1)
                    .ok_or_else(malformed)?;
                let (receiver, args) = stack
                    .get(base..)
                    .and_then(|s| s.split_first())
                    .ok_or_else(malformed)?;
                let result = calls::method(method, receiver, args, meter)?;
                stack.truncate(base);
                stack.push(result);
            }
            Op::Unary(op) => {
                let value = pop!(stack);
                stack.push(match op {
                    UnaryOp::Not => Val::Bool(!value.truthy()),
                    UnaryOp::Neg => value::neg(&value)?,
                    UnaryOp::Pos => value::pos(&value)?,
                });
            }
            Op::Binary(op) => {
                let b = pop!(stack);
                let a = pop!(stack);
                stack.push(binary(op, &a, &b, meter)?);
            }
            Op::Compare(op) => {
                let b = pop!(stack);
                let a = pop!(stack);
                stack.push(Val::Bool(compare_op(op, &a, &b, meter)?));
            }
            Op::CompareKeep(op) => {
                let b = pop!(stack);
                let a = pop!(stack);
                let result = compare_op(op, &a, &b, meter)?;
                stack.push(b);
                stack.push(Val::Bool(result));
            }
            Op::SwapPop => {
                let top = pop!(stack);
                pop!(stack);
                stack.push(top);
            }
            Op::Jump(offset) => next = jump(pc, offset),
            Op::JumpIfFalseOrPop(offset) => {
                if stack.last().ok_or_else(malformed)?.truthy() {
                    stack.pop();
                } else {
                    next = jump(pc, offset);
                }
            }
            Op::JumpIfTrueOrPop(offset) => {
                if stack.last().ok_or_else(malformed)?.truthy() {
                    next = jump(pc, offset);
                } else {
                    stack.pop();
                }
            }
            Op::PopJumpIfFalse(offset) => {
                if !pop!(stack).truthy() {
                    next = jump(pc, offset);
                }
            }
            Op::BuildList(n) | Op::BuildTuple(n) => {
                let base = stack.len().checked_sub(n as usize).ok_or_else(malformed)?;
                let items: Vec<Val<'a>> = stack.drain(base..).collect();
                meter.charge(items.len() as u64)?;
                stack.push(if matches!(op, Op::BuildList(_)) {
                    Val::List(Rc::new(items))
                } else {
                    Val::Tuple(Rc::new(items))
                });
            }
            Op::IterStart => {
                let iterable = pop!(stack);
                frames.push(Frame {
                    source: iter_source(iterable, meter)?,
                    pos: 0,
                    decided: false,
                    bytes: 0,
                });
            }
            Op::IterNext(offset) => {
                let frame = frames.last_mut().ok_or_else(malformed)?;
                match next_item(frame) {
                    Some(item) => stack.push(item),
                    None => next = jump(pc, offset),
                }
            }
            Op::IterEnd => {
                frames.pop().ok_or_else(malformed)?;
            }
            Op::ListAppend => {
                let item = pop!(stack);
                let frame = frames.last_mut().ok_or_else(malformed)?;
                frame.bytes += 16 + item.approx_bytes();
                meter.check_size(frame.bytes, "the list")?;
                match stack.last_mut() {
                    Some(Val::List(items)) => Rc::make_mut(items).push(item),
                    _ => return Err(malformed()),
                }
            }
            Op::MakeGen => match pop!(stack) {
                Val::List(items) => stack.push(Val::Gen(items)),
                _ => return Err(malformed()),
            },
            Op::AnyStep(offset) | Op::AllStep(offset) => {
                let truthy = pop!(stack).truthy();
                if truthy == matches!(op, Op::AnyStep(_)) {
                    frames.last_mut().ok_or_else(malformed)?.decided = true;
                    next = jump(pc, offset);
                }
            }
            Op::AnyEnd => {
                let frame = frames.pop().ok_or_else(malformed)?;
                stack.push(Val::Bool(frame.decided));
            }
            Op::AllEnd => {
                let frame = frames.pop().ok_or_else(malformed)?;
                stack.push(Val::Bool(!frame.decided));
            }
            Op::Fail(i) => {
                let message = program.strings.get(i as usize).ok_or_else(malformed)?;
                return Err(Fault::Msg(EvalErrorKind::Invalid, message.clone()));
            }
        }
        if T::ON {
            tracer.after(pc, stack.last());
        }
        pc = next;
    }
    *pc_out = pc;
    if pc != ops.len() || stack.len() != 1 {
        return Err(malformed());
    }
    stack.pop().ok_or_else(malformed)
}

fn binary<'a>(op: BinaryOp, a: &Val<'a>, b: &Val<'a>, meter: &mut Meter) -> Result<Val<'a>, Fault> {
    match op {
        BinaryOp::Add => value::add(a, b, meter),
        BinaryOp::Sub => value::sub(a, b),
        BinaryOp::Mul => value::mul(a, b, meter),
        BinaryOp::Div => value::div(a, b),
        BinaryOp::FloorDiv => value::floordiv(a, b),
        BinaryOp::Mod => value::modulo(a, b),
    }
}

fn compare_op(op: CompareOp, a: &Val<'_>, b: &Val<'_>, meter: &mut Meter) -> Result<bool, Fault> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    Ok(match op {
        CompareOp::Eq => value::equal(a, b, meter)?,
        CompareOp::Ne => !value::equal(a, b, meter)?,
        CompareOp::Lt => value::compare(a, b, "<", meter)? == Some(Less),
        CompareOp::Le => matches!(value::compare(a, b, "<=", meter)?, Some(Less | Equal)),
        CompareOp::Gt => value::compare(a, b, ">", meter)? == Some(Greater),
        CompareOp::Ge => matches!(value::compare(a, b, ">=", meter)?, Some(Greater | Equal)),
        CompareOp::In => value::contains(a, b, meter)?,
        CompareOp::NotIn => !value::contains(a, b, meter)?,
        CompareOp::Is => identical(a, b, "is")?,
        CompareOp::IsNot => !identical(a, b, "is not")?,
    })
}

/// `is`: identity of the singletons `None`, `True` and `False`; anything else is refused
/// (Python's answer for other values depends on object identity).
fn identical(a: &Val<'_>, b: &Val<'_>, op: &str) -> Result<bool, Fault> {
    match (a, b) {
        (Val::None, Val::None) => Ok(true),
        (Val::Bool(x), Val::Bool(y)) => Ok(x == y),
        (Val::None | Val::Bool(_), _) | (_, Val::None | Val::Bool(_)) => Ok(false),
        _ => Err(Fault::type_error(format!(
            "`{op}` compares only with `None`, `True` or `False`, not `{}` with `{}`: use `==`",
            a.type_name(),
            b.type_name()
        ))),
    }
}

fn iter_source<'a>(iterable: Val<'a>, meter: &mut Meter) -> Result<IterSource<'a>, Fault> {
    Ok(match iterable {
        Val::Json(Value::Array(items)) => IterSource::Json(items),
        Val::Json(Value::Object(map)) => IterSource::Vals(Rc::new(keys(map, meter)?)),
        Val::List(items) | Val::Tuple(items) | Val::Gen(items) => IterSource::Vals(items),
        Val::Str(_) | Val::BStr(_) => IterSource::Chars(iterable),
        other => {
            return Err(Fault::type_error(format!(
                "cannot iterate over `{}`",
                other.type_name()
            )));
        }
    })
}

/// The keys of an object, as values.
pub(crate) fn keys<'a>(
    map: &'a Map<String, Value>,
    meter: &mut Meter,
) -> Result<Vec<Val<'a>>, Fault> {
    meter.charge(map.len() as u64)?;
    Ok(map.keys().map(|k| Val::BStr(k.as_str())).collect())
}

fn next_item<'a>(frame: &mut Frame<'a>) -> Option<Val<'a>> {
    let pos = frame.pos;
    match &frame.source {
        IterSource::Json(items) => {
            frame.pos += 1;
            items.get(pos).map(Val::from_json)
        }
        IterSource::Vals(items) => {
            frame.pos += 1;
            items.get(pos).cloned()
        }
        IterSource::Chars(text) => {
            let c = text.as_str()?.get(pos..)?.chars().next()?;
            frame.pos += c.len_utf8();
            Some(Val::string(c.to_string()))
        }
    }
}

/// Reads the fields of a `$`-reference path.
fn walk_path<'a>(
    program: &'a Program,
    pc: usize,
    root: &'a Value,
    path: u32,
) -> Result<Val<'a>, Fault> {
    let fields = program.paths.get(path as usize).ok_or_else(malformed)?;
    let span = program.spans.get(pc).copied().unwrap_or_default();
    let mut current = root;
    let mut prefix_end = fields.first().map_or(span.end, |f| {
        // The text before the first field ends at its dot.
        let name_len = program.strings.get(f.name as usize).map_or(0, String::len) as u32;
        f.end.saturating_sub(name_len + 1)
    });
    for field in fields {
        let name = program
            .strings
            .get(field.name as usize)
            .ok_or_else(malformed)?;
        let base_text = program.text(Span {
            start: span.start,
            end: prefix_end,
        });
        let full_text = program.text(Span {
            start: span.start,
            end: field.end,
        });
        current = match current {
            Value::Object(map) => match map.get(name.as_str()) {
                Some(value) => value,
                None => {
                    return Err(at(
                        missing_field(full_text, name, map),
                        span.start,
                        field.end,
                    ));
                }
            },
            other => {
                let fault = not_an_object(full_text, base_text, &Val::from_json(other));
                return Err(at(fault, span.start, field.end));
            }
        };
        prefix_end = field.end;
    }
    Ok(Val::from_json(current))
}

/// The fault with the span `start..end` (a prefix of a `$`-reference).
fn at(fault: Fault, start: u32, end: u32) -> Fault {
    match fault {
        Fault::Msg(kind, message) => Fault::At(kind, message, Span { start, end }),
        other => other,
    }
}

fn missing_field(text: &str, name: &str, map: &Map<String, Value>) -> Fault {
    const SHOWN: usize = 12;
    let fields = if map.is_empty() {
        "it has no fields".to_owned()
    } else {
        let mut list: Vec<String> = map.keys().take(SHOWN).map(|k| format!("`{k}`")).collect();
        if map.len() > SHOWN {
            list.push(format!("… {} more", map.len() - SHOWN));
        }
        format!("its fields: {}", list.join(", "))
    };
    Fault::Msg(
        EvalErrorKind::MissingField,
        format!("`{text}` is missing: the object has no field `{name}` ({fields})"),
    )
}

fn not_an_object(text: &str, base: &str, value: &Val<'_>) -> Fault {
    let what = match value {
        Val::None => "None".to_owned(),
        other => format!("a `{}`", other.type_name()),
    };
    Fault::Msg(
        EvalErrorKind::Type,
        format!("`{text}` cannot be read: `{base}` is {what}, not an object"),
    )
}

/// `base.name`.
fn field<'a>(program: &Program, pc: usize, base: &Val<'a>, name: &str) -> Result<Val<'a>, Fault> {
    match base.as_object() {
        Some(map) => match map.get(name) {
            Some(value) => Ok(Val::from_json(value)),
            None => {
                let span = program.spans.get(pc).copied().unwrap_or_default();
                Err(missing_field(program.text(span), name, map))
            }
        },
        None => {
            let span = program.spans.get(pc).copied().unwrap_or_default();
            Err(not_an_object(
                program.text(span),
                program.text(program.base_span(pc)),
                base,
            ))
        }
    }
}

/// `base[index]`.
fn subscript<'a>(
    program: &Program,
    pc: usize,
    base: &Val<'a>,
    index: &Val<'a>,
    meter: &mut Meter,
) -> Result<Val<'a>, Fault> {
    let span = program.spans.get(pc).copied().unwrap_or_default();
    let text = program.text(span);
    if let Some(map) = base.as_object() {
        return match index.as_str() {
            Some(key) => match map.get(key) {
                Some(value) => Ok(Val::from_json(value)),
                None => Err(missing_field(text, key, map)),
            },
            None => {
                let mut shown = value::Repr::new(60);
                shown.write(index, false, meter)?;
                Err(Fault::Msg(
                    EvalErrorKind::MissingField,
                    format!(
                        "`{text}` is missing: an object's keys are strings, not `{}` ({})",
                        index.type_name(),
                        shown.out
                    ),
                ))
            }
        };
    }
    let position = |len: usize| -> Result<usize, Fault> {
        let i = match index {
            Val::Int(i) => *i,
            Val::Bool(b) => i64::from(*b),
            other => {
                return Err(Fault::type_error(format!(
                    "`{text}`: a `{}` index must be an `int`, not `{}`",
                    base.type_name(),
                    other.type_name()
                )));
            }
        };
        let len_i = i64::try_from(len).unwrap_or(i64::MAX);
        let resolved = if i < 0 { i.checked_add(len_i) } else { Some(i) };
        match resolved {
            Some(r) if (0..len_i).contains(&r) => Ok(usize::try_from(r).unwrap_or(usize::MAX)),
            _ => Err(Fault::Msg(
                EvalErrorKind::IndexOutOfRange,
                format!(
                    "`{text}`: index {i} is out of range for a `{}` of length {len}",
                    base.type_name()
                ),
            )),
        }
    };
    if let Some((kind, items)) = base.as_seq()
        && kind != value::SeqKind::Gen
    {
        let at = position(items.len())?;
        return Seq::get(items, at).ok_or_else(malformed);
    }
    if let Some(s) = base.as_str() {
        meter.charge_bytes(s.len())?;
        let at = position(s.chars().count())?;
        let c = s.chars().nth(at).ok_or_else(malformed)?;
        return Ok(Val::string(c.to_string()));
    }
    Err(Fault::type_error(format!(
        "`{text}`: a `{}` cannot be indexed",
        base.type_name()
    )))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bindings_later_wins() {
        let a = json!(1);
        let b = json!(2);
        let bindings = Bindings::new().name("x", &a).name("x", &b);
        assert_eq!(bindings.get_name("x"), Some(&b));
        assert_eq!(bindings.get_name("y"), None);
    }
}
