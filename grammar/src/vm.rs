//! The stack VM: evaluates a [`Program`] over JSON values with Python semantics, within an
//! instruction budget and a value-size limit.
//!
//! The bindings are borrowed: values read from them stay borrowed while the expression works
//! on them, and only what the expression builds is allocated.

use std::borrow::Cow;
use std::mem::ManuallyDrop;
use std::rc::Rc;

use serde_json::{Map, Value};

use crate::ast::{BinaryOp, CompareOp, UnaryOp};
use crate::calls;
use crate::fast::{self, Fv};
use crate::program::{Builtin, Op, Program};
use crate::span::Span;
use crate::value::{self, Failure, Fault, Meter, Seq, Val, field_of, str_eq};

pub use crate::eval_error::{EvalError, EvalErrorKind};
pub use crate::limits::Limits;

/// What an evaluation reads: free names, `$.input` and step outputs, all borrowed. Binding a
/// name (or step) again replaces its value. Up to three names with `&'a str` keys are held
/// inline: building, reading and dropping such bindings allocates nothing and runs no drop
/// glue.
#[derive(Clone, Debug, Default)]
pub struct Bindings<'a> {
    inline: [Option<(&'a str, &'a Value)>; INLINE_NAMES],
    input: Option<&'a Value>,
    /// Names with owned keys or past the inline ones, and step outputs.
    extra: Spill<'a>,
}

/// The side table of [`Bindings`], when there is one. Dropping an empty one is one inline
/// test, not a call to drop glue.
#[derive(Clone, Debug, Default)]
struct Spill<'a>(ManuallyDrop<Option<Box<Extra<'a>>>>);

impl Drop for Spill<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.0.is_some() {
            drop_spill(std::mem::take(&mut *self.0));
        }
    }
}

#[inline(never)]
fn drop_spill(extra: Option<Box<Extra<'_>>>) {
    drop(extra);
}

/// How many names [`Bindings`] holds without allocating.
const INLINE_NAMES: usize = 3;

#[derive(Clone, Debug, Default)]
struct Extra<'a> {
    names: Vec<(Cow<'a, str>, &'a Value)>,
    steps: Vec<(Cow<'a, str>, &'a Value)>,
}

impl<'a> Extra<'a> {
    #[inline(never)]
    fn name(&self, name: &str) -> Option<&'a Value> {
        self.names
            .iter()
            .find(|(key, _)| str_eq(key, name))
            .map(|(_, value)| *value)
    }
}

impl<'a> Bindings<'a> {
    #[inline]
    pub fn new() -> Bindings<'a> {
        Bindings::default()
    }

    /// Binds a free name (`result`, `item`, `accumulator`, …).
    #[inline]
    pub fn name(mut self, name: impl Into<Cow<'a, str>>, value: &'a Value) -> Bindings<'a> {
        self.bind_name(name.into(), value);
        self
    }

    #[inline]
    fn bind_name(&mut self, name: Cow<'a, str>, value: &'a Value) {
        for (key, bound) in self.inline.iter_mut().flatten() {
            if str_eq(key, &name) {
                *bound = value;
                return;
            }
        }
        if let Some(extra) = &mut *self.extra.0
            && let Some((_, bound)) = extra.names.iter_mut().find(|(key, _)| str_eq(key, &name))
        {
            *bound = value;
            return;
        }
        if let Cow::Borrowed(key) = name
            && let Some(free) = self.inline.iter_mut().find(|slot| slot.is_none())
        {
            *free = Some((key, value));
            return;
        }
        let extra = self.extra.0.get_or_insert_with(Box::default);
        extra.names.push((name, value));
    }

    /// Binds `$.input`.
    #[inline]
    pub fn input(mut self, value: &'a Value) -> Bindings<'a> {
        self.input = Some(value);
        self
    }

    /// Binds `$.steps.<id>.output`.
    pub fn step(mut self, id: impl Into<Cow<'a, str>>, output: &'a Value) -> Bindings<'a> {
        let id = id.into();
        let steps = &mut self.extra.0.get_or_insert_with(Box::default).steps;
        match steps.iter_mut().find(|(key, _)| *key == id) {
            Some((_, slot)) => *slot = output,
            None => steps.push((id, output)),
        }
        self
    }

    /// The value bound to a free name.
    #[inline]
    pub fn get_name(&self, name: &str) -> Option<&'a Value> {
        for (key, value) in self.inline.iter().flatten() {
            if str_eq(key, name) {
                return Some(*value);
            }
        }
        self.extra.0.as_ref()?.name(name)
    }

    /// The first name bound, and its value.
    #[inline(always)]
    pub(crate) fn first_name(&self) -> Option<(&'a str, &'a Value)> {
        self.inline.first().copied().flatten()
    }

    #[inline]
    pub fn get_input(&self) -> Option<&'a Value> {
        self.input
    }

    pub fn get_step(&self, id: &str) -> Option<&'a Value> {
        self.extra
            .0
            .as_ref()?
            .steps
            .iter()
            .find(|(key, _)| key.as_ref() == id)
            .map(|(_, value)| *value)
    }
}

impl Program {
    /// Evaluates the program over `bindings`.
    pub fn evaluate(&self, bindings: &Bindings<'_>, limits: &Limits) -> Result<Value, EvalError> {
        match fast::run(self, bindings, limits) {
            // The usual result, built in place.
            Some(Fv::Bool(b)) => return Ok(Value::Bool(b)),
            Some(value) => {
                if let Some(json) = value.to_json() {
                    return Ok(json);
                }
            }
            None => {}
        }
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
        if let Some(value) = fast::run(self, bindings, limits) {
            return Ok(value.truthy());
        }
        let (result, _) = run_from(self, 0, bindings, limits, &mut NoTrace);
        Ok(result?.truthy())
    }

    pub(crate) fn whole(&self) -> Span {
        Span::new(0, self.source.len())
    }

    pub(crate) fn render(&self, fault: Fault, span: Span) -> EvalError {
        let text = self.text(span);
        let (kind, message) = match *fault.0 {
            Failure::Msg(kind, message) => (kind, message),
            Failure::At(kind, message, at) => {
                return EvalError {
                    kind,
                    message,
                    span: at,
                    violations: Vec::new(),
                };
            }
            Failure::Violations(violations) => {
                return EvalError {
                    kind: EvalErrorKind::Violations,
                    message: violations.join("; "),
                    span,
                    violations,
                };
            }
            Failure::ZeroDivision => (
                EvalErrorKind::DivisionByZero,
                format!("division by zero in `{text}`"),
            ),
            Failure::ZeroModulo => (
                EvalErrorKind::DivisionByZero,
                format!("modulo by zero in `{text}`"),
            ),
            Failure::Overflow => (
                EvalErrorKind::Overflow,
                format!("integer overflow in `{text}`: the result does not fit in 64 bits"),
            ),
            Failure::NotFinite => (
                EvalErrorKind::NotFinite,
                format!("`{text}` is not a finite number"),
            ),
        };
        EvalError {
            kind,
            message,
            span,
            violations: Vec::new(),
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
    Fault::msg(
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

/// The value stack: inline (no allocation) up to [`INLINE`] values, then on the heap.
struct Stack<'a> {
    /// Slots at `len` and above hold `Val::None` (nothing to drop): the array itself is never
    /// dropped, only the values taken out of it.
    inline: std::mem::ManuallyDrop<[Val<'a>; INLINE]>,
    len: usize,
    spill: Option<Vec<Val<'a>>>,
}

const INLINE: usize = 8;

impl<'a> Stack<'a> {
    #[inline(always)]
    fn new() -> Stack<'a> {
        Stack {
            inline: std::mem::ManuallyDrop::new([const { Val::None }; INLINE]),
            len: 0,
            spill: None,
        }
    }

    #[inline(always)]
    fn push(&mut self, value: Val<'a>) {
        if let Some(spill) = &mut self.spill {
            spill.push(value);
        } else if let Some(slot) = self.inline.get_mut(self.len) {
            // The slot holds `None`: nothing to drop.
            std::mem::forget(std::mem::replace(slot, value));
            self.len += 1;
        } else {
            let mut spill = Vec::with_capacity(INLINE * 4);
            spill.extend(self.inline.iter_mut().map(std::mem::take));
            spill.push(value);
            self.spill = Some(spill);
        }
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<Val<'a>> {
        if let Some(spill) = &mut self.spill {
            return spill.pop();
        }
        let top = self.len.checked_sub(1)?;
        self.len = top;
        self.inline.get_mut(top).map(std::mem::take)
    }

    #[inline(always)]
    fn last(&self) -> Option<&Val<'a>> {
        match &self.spill {
            Some(spill) => spill.last(),
            None => self.inline.get(self.len.checked_sub(1)?),
        }
    }

    #[inline(always)]
    fn last_mut(&mut self) -> Option<&mut Val<'a>> {
        match &mut self.spill {
            Some(spill) => spill.last_mut(),
            None => self.inline.get_mut(self.len.checked_sub(1)?),
        }
    }

    #[inline(always)]
    fn len(&self) -> usize {
        match &self.spill {
            Some(spill) => spill.len(),
            None => self.len,
        }
    }

    /// The values from `base` to the top.
    #[inline(always)]
    fn from(&self, base: usize) -> Option<&[Val<'a>]> {
        match &self.spill {
            Some(spill) => spill.get(base..),
            None => self.inline.get(base..self.len),
        }
    }

    #[inline(always)]
    fn truncate(&mut self, base: usize) {
        while self.len() > base {
            self.drop_top();
        }
    }

    #[inline(always)]
    fn drop_top(&mut self) {
        if let Some(value) = self.pop() {
            discard(value);
        }
    }

    /// Pops the top `n` values, in stack order.
    #[inline(always)]
    fn pop_n(&mut self, n: usize) -> Option<Vec<Val<'a>>> {
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.pop()?);
        }
        items.reverse();
        Some(items)
    }
}

impl Drop for Stack<'_> {
    fn drop(&mut self) {
        for slot in self.inline.iter_mut().take(self.len) {
            discard(std::mem::take(slot));
        }
    }
}

/// Drops a value, without a call to its drop glue when it owns nothing.
#[inline(always)]
pub(crate) fn discard(value: Val<'_>) {
    match value {
        Val::Str(_) | Val::List(_) | Val::Tuple(_) | Val::Gen(_) => drop(value),
        other => std::mem::forget(other),
    }
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
    let mut stack = Stack::new();
    let mut frames: Vec<Frame<'a>> = Vec::new();
    let mut locals: Vec<Val<'a>> = if program.locals == 0 {
        Vec::new()
    } else {
        vec![Val::None; program.locals as usize]
    };
    // The last free name read, resolved: names are read by string compare once, not per op.
    let mut resolved: Option<(u32, &'a Value)> = None;
    let mut pc = *pc_out;
    while let Some(op) = ops.get(pc) {
        *pc_out = pc;
        if meter.remaining == 0 {
            return Err(meter.exhausted());
        }
        meter.remaining -= 1;
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
                let value = resolve(program, bindings, &mut resolved, i)?;
                next = push_then::<T>(
                    ops,
                    pc,
                    Val::from_json(value),
                    &mut stack,
                    program,
                    meter,
                    pc_out,
                )?;
            }
            Op::Local(slot) => {
                let value = locals.get(slot as usize).ok_or_else(malformed)?.clone();
                next = push_then::<T>(ops, pc, value, &mut stack, program, meter, pc_out)?;
            }
            Op::Store(slot) => {
                let value = pop!(stack);
                *locals.get_mut(slot as usize).ok_or_else(malformed)? = value;
            }
            Op::Path { name, path } => {
                let root = resolve(program, bindings, &mut resolved, name)?;
                let value = walk_path(program, pc, root, path)?;
                next = push_then::<T>(ops, pc, value, &mut stack, program, meter, pc_out)?;
            }
            Op::LocalPath { slot, path } => {
                let value = match locals.get(slot as usize).ok_or_else(malformed)? {
                    Val::Json(root) => walk_path(program, pc, root, path)?,
                    other => {
                        // Not an object (objects are only ever borrowed JSON).
                        let other = other.clone();
                        walk_val(program, pc, other, path)?
                    }
                };
                next = push_then::<T>(ops, pc, value, &mut stack, program, meter, pc_out)?;
            }
            Op::CompareConst(op, i) => {
                let a = pop!(stack);
                let result = compare_const(program, op, i, a, meter)?;
                stack.push(Val::Bool(result));
            }
            Op::CompareConstJump {
                op,
                constant,
                when,
                offset,
            } => {
                let a = pop!(stack);
                let result = compare_const(program, op, constant, a, meter)?;
                if result == when {
                    stack.push(Val::Bool(result));
                    next = jump(pc, offset);
                }
            }
            Op::Input(path) => {
                let root = bindings.get_input().ok_or_else(|| {
                    Fault::msg(
                        EvalErrorKind::UnboundName,
                        "`$.input` is not bound here".to_owned(),
                    )
                })?;
                let value = walk_path(program, pc, root, path)?;
                next = push_then::<T>(ops, pc, value, &mut stack, program, meter, pc_out)?;
            }
            Op::Step { step, path } => {
                let id = program.strings.get(step as usize).ok_or_else(malformed)?;
                let root = bindings.get_step(id).ok_or_else(|| {
                    Fault::msg(
                        EvalErrorKind::UnboundName,
                        format!(
                            "`$.steps.{id}.output` is not bound: step `{id}` has no output here"
                        ),
                    )
                })?;
                // A skipped step's output is None, and so is every field of it (the reference
                // resolves `$.steps.<id>.output.<field>` of a skipped step to None); a field
                // missing from an output that exists is still an error.
                let value = if root.is_null() {
                    Val::from_json(root)
                } else {
                    walk_path(program, pc, root, path)?
                };
                next = push_then::<T>(ops, pc, value, &mut stack, program, meter, pc_out)?;
            }
            Op::Attr(i) => {
                let name = program.strings.get(i as usize).ok_or_else(malformed)?;
                let base = pop!(stack);
                if let Val::Json(Value::Object(map)) = base
                    && let Some(value) = field_of(map, name)
                {
                    stack.push(Val::from_json(value));
                } else {
                    let value = field(program, pc, &base, name)?;
                    discard(base);
                    stack.push(value);
                }
            }
            Op::Index => {
                let index = pop!(stack);
                let base = pop!(stack);
                stack.push(subscript(program, pc, &base, &index, meter)?);
            }
            Op::Call(Builtin::Len, 1) if matches!(stack.last(), Some(Val::Json(_))) => {
                let n = match pop!(stack) {
                    Val::Json(Value::Array(items)) => items.len(),
                    Val::Json(Value::Object(map)) => map.len(),
                    Val::Json(Value::String(s)) => s.chars().count(),
                    _ => return Err(malformed()),
                };
                stack.push(Val::Int(i64::try_from(n).unwrap_or(i64::MAX)));
            }
            Op::Call(builtin, argc) => {
                let base = stack
                    .len()
                    .checked_sub(argc as usize)
                    .ok_or_else(malformed)?;
                let args = stack.from(base).ok_or_else(malformed)?;
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
                    .from(base)
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
                let result = match fast_compare(op, &a, &b) {
                    Some(result) => result,
                    None => compare_op(op, &a, &b, meter)?,
                };
                discard(a);
                discard(b);
                stack.push(Val::Bool(result));
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
                discard(pop!(stack));
                stack.push(top);
            }
            Op::Jump(offset) => next = jump(pc, offset),
            Op::JumpIfFalseOrPop(offset) => {
                if stack.last().ok_or_else(malformed)?.truthy() {
                    stack.drop_top();
                } else {
                    next = jump(pc, offset);
                }
            }
            Op::JumpIfTrueOrPop(offset) => {
                if stack.last().ok_or_else(malformed)?.truthy() {
                    next = jump(pc, offset);
                } else {
                    stack.drop_top();
                }
            }
            Op::PopJumpIfFalse(offset) => {
                if !pop!(stack).truthy() {
                    next = jump(pc, offset);
                }
            }
            Op::BuildList(n) | Op::BuildTuple(n) => {
                let items = stack.pop_n(n as usize).ok_or_else(malformed)?;
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
                return Err(Fault::msg(EvalErrorKind::Invalid, message.clone()));
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

/// The free name `strings[name]`, through the one-entry cache `resolved`.
#[inline(always)]
fn resolve<'a>(
    program: &Program,
    bindings: &Bindings<'a>,
    resolved: &mut Option<(u32, &'a Value)>,
    name: u32,
) -> Result<&'a Value, Fault> {
    if let Some((cached, value)) = *resolved
        && cached == name
    {
        return Ok(value);
    }
    let text = program.strings.get(name as usize).ok_or_else(malformed)?;
    let value = bindings.get_name(text).ok_or_else(|| unbound(text))?;
    *resolved = Some((name, value));
    Ok(value)
}

/// Pushes `value`, produced by the op at `pc`, and returns the next op's index; without a
/// tracer, first runs the ops that follow and consume it directly, as one step: `len(…)`
/// (of borrowed JSON) and a comparison with a constant, alone or deciding an `and` / `or`.
/// Each op fused this way is charged to the budget as if run alone (none is fused past the
/// budget), and a failing one reports its own index in `pc_out`.
#[inline(always)]
fn push_then<'a, T: Tracer<'a>>(
    ops: &[Op],
    pc: usize,
    value: Val<'a>,
    stack: &mut Stack<'a>,
    program: &'a Program,
    meter: &mut Meter,
    pc_out: &mut usize,
) -> Result<usize, Fault> {
    if T::ON {
        stack.push(value);
        return Ok(pc + 1);
    }
    let mut pc = pc;
    let mut value = value;
    if let (Some(Op::Call(Builtin::Len, 1)), Val::Json(json)) = (ops.get(pc + 1), &value)
        && meter.remaining > 0
    {
        let n = match json {
            Value::Array(items) => items.len(),
            Value::Object(map) => map.len(),
            _ => return Err(malformed()),
        };
        meter.remaining -= 1;
        pc += 1;
        value = Val::Int(i64::try_from(n).unwrap_or(i64::MAX));
    }
    match ops.get(pc + 1) {
        Some(&Op::CompareConst(op, constant)) if meter.remaining > 0 => {
            meter.remaining -= 1;
            pc += 1;
            *pc_out = pc;
            let result = compare_const(program, op, constant, value, meter)?;
            stack.push(Val::Bool(result));
            Ok(pc + 1)
        }
        Some(&Op::CompareConstJump {
            op,
            constant,
            when,
            offset,
        }) if meter.remaining > 0 => {
            meter.remaining -= 1;
            pc += 1;
            *pc_out = pc;
            let result = compare_const(program, op, constant, value, meter)?;
            if result == when {
                stack.push(Val::Bool(result));
                Ok(jump(pc, offset))
            } else {
                Ok(pc + 1)
            }
        }
        _ => {
            stack.push(value);
            Ok(pc + 1)
        }
    }
}

/// `a op constants[constant]`.
#[inline(always)]
fn compare_const<'a>(
    program: &'a Program,
    op: CompareOp,
    constant: u32,
    a: Val<'a>,
    meter: &mut Meter,
) -> Result<bool, Fault> {
    let b = Val::from_json(
        program
            .constants
            .get(constant as usize)
            .ok_or_else(malformed)?,
    );
    let result = match fast_compare(op, &a, &b) {
        Some(result) => result,
        None => compare_op(op, &a, &b, meter)?,
    };
    discard(a);
    Ok(result)
}

pub(crate) fn binary<'a>(
    op: BinaryOp,
    a: &Val<'a>,
    b: &Val<'a>,
    meter: &mut Meter,
) -> Result<Val<'a>, Fault> {
    match op {
        BinaryOp::Add => value::add(a, b, meter),
        BinaryOp::Sub => value::sub(a, b),
        BinaryOp::Mul => value::mul(a, b, meter),
        BinaryOp::Div => value::div(a, b),
        BinaryOp::FloorDiv => value::floordiv(a, b),
        BinaryOp::Mod => value::modulo(a, b),
    }
}

/// `op` between two ints or two floats, inline.
#[inline(always)]
fn fast_compare(op: CompareOp, a: &Val<'_>, b: &Val<'_>) -> Option<bool> {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => op.order(x, y),
        (Val::Float(x), Val::Float(y)) => op.order(x, y),
        _ => None,
    }
}

pub(crate) fn compare_op(
    op: CompareOp,
    a: &Val<'_>,
    b: &Val<'_>,
    meter: &mut Meter,
) -> Result<bool, Fault> {
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
        Val::Json(Value::Object(map)) => IterSource::Vals(Rc::new(value::keys(map, meter)?)),
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
    let mut current = root;
    for field in fields {
        let name = program
            .strings
            .get(field.name as usize)
            .ok_or_else(malformed)?;
        current = match current {
            Value::Object(map) => match field_of(map, name) {
                Some(value) => value,
                None => return Err(path_fault(program, pc, field, name, current)),
            },
            _ => return Err(path_fault(program, pc, field, name, current)),
        };
    }
    Ok(Val::from_json(current))
}

/// Why reading `field` of `current` failed, with the span of the path up to the field.
#[cold]
fn path_fault(
    program: &Program,
    pc: usize,
    field: &crate::program::PathField,
    name: &str,
    current: &Value,
) -> Fault {
    let span = program.spans.get(pc).copied().unwrap_or_default();
    let full_text = program.text(Span {
        start: span.start,
        end: field.end,
    });
    let fault = match current {
        Value::Object(map) => missing_field(full_text, name, map),
        other => {
            let base_text = program.text(Span {
                start: span.start,
                end: field.base_end,
            });
            not_an_object(full_text, base_text, &Val::from_json(other))
        }
    };
    at(fault, span.start, field.end)
}

#[cold]
fn unbound(name: &str) -> Fault {
    Fault::msg(
        EvalErrorKind::UnboundName,
        format!("`{name}` is not bound: the evaluation has no value for it"),
    )
}

/// A path over a value that is not borrowed JSON: no fields to read.
fn walk_val<'a>(
    program: &'a Program,
    pc: usize,
    value: Val<'a>,
    path: u32,
) -> Result<Val<'a>, Fault> {
    let fields = program.paths.get(path as usize).ok_or_else(malformed)?;
    let Some(field) = fields.first() else {
        return Ok(value);
    };
    let span = program.spans.get(pc).copied().unwrap_or_default();
    let full_text = program.text(Span {
        start: span.start,
        end: field.end,
    });
    let base_text = program.text(Span {
        start: span.start,
        end: field.base_end,
    });
    Err(at(
        not_an_object(full_text, base_text, &value),
        span.start,
        field.end,
    ))
}

/// The fault with the span `start..end` (a prefix of a `$`-reference).
fn at(fault: Fault, start: u32, end: u32) -> Fault {
    match *fault.0 {
        Failure::Msg(kind, message) => Fault::at(kind, message, Span { start, end }),
        other => Fault(Box::new(other)),
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
    Fault::msg(
        EvalErrorKind::MissingField,
        format!("`{text}` is missing: the object has no field `{name}` ({fields})"),
    )
}

fn not_an_object(text: &str, base: &str, value: &Val<'_>) -> Fault {
    let what = match value {
        Val::None => "None".to_owned(),
        other => format!("a `{}`", other.type_name()),
    };
    Fault::msg(
        EvalErrorKind::Type,
        format!("`{text}` cannot be read: `{base}` is {what}, not an object"),
    )
}

/// `base.name`.
fn field<'a>(program: &Program, pc: usize, base: &Val<'a>, name: &str) -> Result<Val<'a>, Fault> {
    match base.as_object() {
        Some(map) => match field_of(map, name) {
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
pub(crate) fn subscript<'a>(
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
            Some(key) => match field_of(map, key) {
                Some(value) => Ok(Val::from_json(value)),
                None => Err(missing_field(text, key, map)),
            },
            None => {
                let mut shown = value::Repr::new(60);
                shown.write(index, false, meter)?;
                Err(Fault::msg(
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
            _ => Err(Fault::msg(
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
        let bindings = Bindings::new()
            .name(String::from("x"), &a)
            .name("x", &b)
            .name("a", &a)
            .name("b", &a)
            .name("c", &a)
            .name("d", &a)
            .name("e", &b);
        assert_eq!(bindings.get_name("x"), Some(&b));
        assert_eq!(bindings.get_name("e"), Some(&b));
        assert_eq!(bindings.get_name("d"), Some(&a));
        // Inline names, names past them, owned names and steps, in any order.
        let c = json!(3);
        let bindings = Bindings::new()
            .step("s", &a)
            .name("p", &a)
            .name(String::from("q"), &a)
            .name("r", &a)
            .name("s", &b)
            .name("t", &b)
            .name("q", &c)
            .name("p", &c)
            .step("s", &c);
        for (name, value) in [("p", &c), ("q", &c), ("r", &a), ("s", &b), ("t", &b)] {
            assert_eq!(bindings.get_name(name), Some(value), "{name}");
        }
        assert_eq!(bindings.get_name("u"), None);
        assert_eq!(bindings.get_step("s"), Some(&c));
        assert_eq!(bindings.get_step("p"), None);
        assert_eq!(bindings.clone().get_name("t"), Some(&b));
        assert_eq!(std::mem::size_of::<Val<'static>>(), 16);
    }
}
