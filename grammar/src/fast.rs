//! The fast path of evaluation: programs that only read and compare.
//!
//! Most `ensure`, `skip_if` and `exit_criterion` expressions read a few fields and compare them
//! with constants or with each other (`result.confidence > 0.7 and len(result.items) > 0`).
//! [`run`] evaluates such programs over values that are `Copy` — scalars, and strings, lists
//! and objects borrowed from the bindings or the constants — on a small inline stack: no
//! allocation, no reference counting, no drop glue.
//!
//! It runs the program's [`FastOps`], derived from its ops once when the program is built:
//! each load (a name, `name.field`, a `$`-reference) is fused with the `len(…)` and the
//! comparison with a constant that consume it into one step, scalar constants are converted,
//! jumps aim at steps. A program that is only such comparisons joined by `and` / `or` is run
//! without a stack at all. A program with an op this path never runs (a generator, a tuple or
//! list display, a method or `str(…)` that builds a string, a file built-in) has no fast ops
//! and goes straight to the general VM.
//!
//! It computes only what it can without building a value, and only successful evaluations.
//! For anything else — a string or list that an operation builds, any error, the budget
//! running out, a stack deeper than [`DEPTH`] — it returns `None`, and the caller evaluates
//! the program again with the general VM ([`crate::vm`]) from the start. Evaluation has no
//! effects, so starting again is safe; only the work done here is lost.
//!
//! The general VM is the reference. Where this returns a value, the general VM returns the
//! same value, having charged the budget the same amounts: each step charges the ops it
//! stands for, and every other charge is left to the same functions of [`crate::value`],
//! [`crate::calls`] and [`crate::vm`] that the general VM calls (tests compare the two on the
//! conformance table, at every small budget, and on random programs and values).

use serde_json::{Number, Value};

use crate::ast::{CompareOp, UnaryOp};
use crate::calls;
use crate::limits::Limits;
use crate::program::{Builtin, Method, Op, Program};
use crate::value::{self, Meter, Val, field_of_inline};
use crate::vm::{self, Bindings, discard};

/// The deepest stack this path evaluates; deeper programs go to the general VM.
pub(crate) const DEPTH: usize = 8;

/// A run-time value that is `Copy`: what the general VM's [`Val`] is when it owns nothing.
/// A whole-word tag and a whole-word payload, as [`Val`]: moved as two words.
#[derive(Clone, Copy, Debug)]
#[repr(u64)]
pub(crate) enum Fv<'a> {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a String),
    /// A JSON array or object.
    Json(&'a Value),
}

impl<'a> Fv<'a> {
    /// As [`Val::from_json`].
    #[inline(always)]
    fn from_json(value: &'a Value) -> Fv<'a> {
        match value {
            Value::Null => Fv::None,
            Value::Bool(b) => Fv::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Fv::Int(i),
                None => Fv::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Fv::Str(s),
            Value::Array(_) | Value::Object(_) => Fv::Json(value),
        }
    }

    /// A general value as a `Copy` one, unless it owns something.
    #[inline]
    fn from_val(value: &Val<'a>) -> Option<Fv<'a>> {
        Some(match *value {
            Val::None => Fv::None,
            Val::Bool(b) => Fv::Bool(b),
            Val::Int(i) => Fv::Int(i),
            Val::Float(f) => Fv::Float(f),
            Val::BStr(s) => Fv::Str(s),
            Val::Json(json) => Fv::Json(json),
            Val::Str(_) | Val::List(_) | Val::Tuple(_) | Val::Gen(_) => return None,
        })
    }

    /// The same value as a general one (which owns nothing).
    #[inline]
    fn val(self) -> Val<'a> {
        match self {
            Fv::None => Val::None,
            Fv::Bool(b) => Val::Bool(b),
            Fv::Int(i) => Val::Int(i),
            Fv::Float(f) => Val::Float(f),
            Fv::Str(s) => Val::BStr(s),
            Fv::Json(json) => Val::Json(json),
        }
    }

    /// Python truthiness, as [`Val::truthy`].
    #[inline(always)]
    pub(crate) fn truthy(self) -> bool {
        match self {
            Fv::None => false,
            Fv::Bool(b) => b,
            Fv::Int(i) => i != 0,
            Fv::Float(f) => f != 0.0,
            Fv::Str(s) => !s.is_empty(),
            Fv::Json(Value::Array(items)) => !items.is_empty(),
            Fv::Json(Value::Object(map)) => !map.is_empty(),
            // Not built: scalars are converted on load.
            Fv::Json(Value::Null | Value::Bool(false)) => false,
            Fv::Json(Value::Bool(true)) => true,
            Fv::Json(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
            Fv::Json(Value::String(s)) => !s.is_empty(),
        }
    }

    /// The value as JSON, as [`Val::to_json`]; `None` for a float JSON cannot hold.
    #[inline]
    pub(crate) fn to_json(self) -> Option<Value> {
        Some(match self {
            Fv::None => Value::Null,
            Fv::Bool(b) => Value::Bool(b),
            Fv::Int(i) => Value::Number(Number::from(i)),
            Fv::Float(f) => Value::Number(Number::from_f64(f)?),
            Fv::Str(s) => Value::String(s.clone()),
            Fv::Json(json) => json.clone(),
        })
    }
}

/// The operand stack: at most [`DEPTH`] values, inline.
struct Stack<'a> {
    items: [Fv<'a>; DEPTH],
    len: usize,
}

impl<'a> Stack<'a> {
    #[inline(always)]
    fn push(&mut self, value: Fv<'a>) -> Option<()> {
        *self.items.get_mut(self.len)? = value;
        self.len += 1;
        Some(())
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<Fv<'a>> {
        self.len = self.len.checked_sub(1)?;
        self.items.get(self.len).copied()
    }

    #[inline(always)]
    fn last(&self) -> Option<Fv<'a>> {
        self.items.get(self.len.checked_sub(1)?).copied()
    }
}

/// Runs `f` with a [`Meter`] holding the `fuel` left; returns its result and the fuel it
/// leaves.
#[inline(always)]
fn metered<T>(fuel: u64, limits: &Limits, f: impl FnOnce(&mut Meter) -> T) -> (T, u64) {
    let mut meter = Meter {
        remaining: fuel,
        budget: limits.instructions,
        max_bytes: limits.max_value_bytes,
    };
    let result = f(&mut meter);
    (result, meter.remaining)
}

/// A program's ops as the fast path runs them: every load fused with the `len(…)` and the
/// comparison with a constant (alone or deciding an `and` / `or`) that consume it, scalar
/// constants converted, jumps aimed at steps. Derived from the ops once, when the program is
/// built; empty when the program has an op the fast path never runs (a generator, a tuple or
/// list display, a method or `str(…)` that builds a string, a file built-in, `Fail`), or is
/// malformed: then evaluation goes straight to the general VM.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct FastOps {
    steps: Vec<Step>,
    /// Every step is a test, and every jump goes to the end: the program is comparisons and
    /// values joined by `and` / `or` (`a > 0.7 and len(b) > 0`), run without a stack.
    chain: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    /// A load, maybe its `len`, maybe compared with a constant (giving a bool); then maybe
    /// jumping, with that value, when its truthiness is `when`, and else going on without it
    /// (the and / or it decides).
    Test {
        load: Load,
        len: bool,
        compare: Option<(CompareOp, Scalar)>,
        jump: Option<(bool, u32)>,
        /// The ops it stands for (what it charges).
        ops: u8,
    },
    /// A comparison with a constant that decides an `and` / `or`, of a computed value.
    CompareJump {
        op: CompareOp,
        rhs: Scalar,
        when: bool,
        to: u32,
    },
    Jump(u32),
    JumpIfFalseOrPop(u32),
    JumpIfTrueOrPop(u32),
    PopJumpIfFalse(u32),
    /// Any other op this path runs (none of them jumps).
    Op(Op),
}

impl Step {
    /// Where the step jumps: an op index while the steps are built, then a step index.
    fn target_mut(&mut self) -> Option<&mut u32> {
        match self {
            Step::Test {
                jump: Some((_, to)),
                ..
            }
            | Step::CompareJump { to, .. }
            | Step::Jump(to)
            | Step::JumpIfFalseOrPop(to)
            | Step::JumpIfTrueOrPop(to)
            | Step::PopJumpIfFalse(to) => Some(to),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Load {
    Name(u32),
    /// `name.field`, the usual path: `strings[field]` without the `paths` table.
    Field {
        name: u32,
        field: u32,
    },
    Path {
        name: u32,
        path: u32,
    },
    Input(u32),
    Step {
        step: u32,
        path: u32,
    },
}

/// A constant: a scalar converted once, or a string, list or object borrowed at run time.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scalar {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Const(u32),
}

impl Scalar {
    fn new(program: &Program, index: u32) -> Option<Scalar> {
        Some(
            match Fv::from_json(program.constants.get(index as usize)?) {
                Fv::None => Scalar::None,
                Fv::Bool(b) => Scalar::Bool(b),
                Fv::Int(i) => Scalar::Int(i),
                Fv::Float(f) => Scalar::Float(f),
                Fv::Str(_) | Fv::Json(_) => Scalar::Const(index),
            },
        )
    }

    #[inline(always)]
    fn fv(self, program: &Program) -> Option<Fv<'_>> {
        Some(match self {
            Scalar::None => Fv::None,
            Scalar::Bool(b) => Fv::Bool(b),
            Scalar::Int(i) => Fv::Int(i),
            Scalar::Float(f) => Fv::Float(f),
            Scalar::Const(i) => Fv::from_json(program.constants.get(i as usize)?),
        })
    }
}

impl FastOps {
    /// The fast path's form of `program`'s ops (empty if it cannot run them).
    pub(crate) fn new(program: &Program) -> FastOps {
        FastOps::build(program).unwrap_or_default()
    }

    fn build(program: &Program) -> Option<FastOps> {
        let ops = program.ops.as_slice();
        // Where jumps land: a fused group must not be entered in its middle.
        let mut target = vec![false; ops.len() + 1];
        for (pc, op) in ops.iter().enumerate() {
            if !runs(op) {
                return None;
            }
            if let Some(offset) = jump_offset(op) {
                *target.get_mut(jump(pc, offset)?)? = true;
            }
        }
        let lands = |pc: usize| target.get(pc).copied().unwrap_or(true);
        let mut steps: Vec<Step> = Vec::with_capacity(ops.len());
        // The step each op index starts (for the ops that start one, and the end).
        let mut step_at = vec![u32::MAX; ops.len() + 1];
        let mut pc = 0;
        while let Some(op) = ops.get(pc) {
            *step_at.get_mut(pc)? = u32::try_from(steps.len()).ok()?;
            let load = match *op {
                Op::Name(i) => Some(Load::Name(i)),
                Op::Path { name, path } => {
                    Some(match program.paths.get(path as usize)?.as_slice() {
                        [field] => Load::Field {
                            name,
                            field: field.name,
                        },
                        _ => Load::Path { name, path },
                    })
                }
                Op::Input(path) => Some(Load::Input(path)),
                Op::Step { step, path } => Some(Load::Step { step, path }),
                _ => None,
            };
            let Some(load) = load else {
                // Jumps aim at op indices for now.
                let to = match jump_offset(op) {
                    Some(offset) => u32::try_from(jump(pc, offset)?).ok()?,
                    None => 0,
                };
                steps.push(match *op {
                    Op::CompareConstJump {
                        op, constant, when, ..
                    } => Step::CompareJump {
                        op,
                        rhs: Scalar::new(program, constant)?,
                        when,
                        to,
                    },
                    Op::Jump(_) => Step::Jump(to),
                    Op::JumpIfFalseOrPop(_) => Step::JumpIfFalseOrPop(to),
                    Op::JumpIfTrueOrPop(_) => Step::JumpIfTrueOrPop(to),
                    Op::PopJumpIfFalse(_) => Step::PopJumpIfFalse(to),
                    other => Step::Op(other),
                });
                pc += 1;
                continue;
            };
            let mut end = pc + 1;
            let mut len = false;
            if let Some(Op::Call(Builtin::Len, 1)) = ops.get(end)
                && !lands(end)
            {
                len = true;
                end += 1;
            }
            let mut compare = None;
            let mut to = None;
            let mut when = false;
            if !lands(end) {
                match ops.get(end) {
                    Some(&Op::CompareConst(op, constant)) => {
                        compare = Some((op, Scalar::new(program, constant)?));
                        end += 1;
                    }
                    Some(&Op::CompareConstJump {
                        op,
                        constant,
                        when: on,
                        offset,
                    }) => {
                        compare = Some((op, Scalar::new(program, constant)?));
                        to = Some(jump(end, offset)?);
                        when = on;
                        end += 1;
                    }
                    _ => {}
                }
            }
            // `result.flag and …`, `len(…) > 0 and … or …`: the and / or after the value
            // decides on its truthiness (for a comparison, on the comparison).
            if to.is_none() && !lands(end) {
                match ops.get(end) {
                    Some(&Op::JumpIfFalseOrPop(offset)) | Some(&Op::JumpIfTrueOrPop(offset)) => {
                        when = matches!(ops.get(end), Some(Op::JumpIfTrueOrPop(_)));
                        to = Some(jump(end, offset)?);
                        end += 1;
                    }
                    _ => {}
                }
            }
            let jump = match to {
                Some(to) => Some((when, u32::try_from(to).ok()?)),
                None => None,
            };
            steps.push(Step::Test {
                load,
                len,
                compare,
                jump,
                ops: u8::try_from(end - pc).ok()?,
            });
            pc = end;
        }
        *step_at.get_mut(ops.len())? = u32::try_from(steps.len()).ok()?;
        // Aim the jumps at steps.
        for step in &mut steps {
            if let Some(to) = step.target_mut() {
                *to = *step_at.get(*to as usize)?;
                if *to == u32::MAX {
                    return None;
                }
            }
        }
        let end = steps.len();
        let chain = steps.iter().enumerate().all(|(i, step)| match step {
            Step::Test { jump, .. } => match jump {
                Some((_, to)) => *to as usize == end,
                None => i + 1 == end,
            },
            _ => false,
        });
        Some(FastOps { steps, chain })
    }
}

/// Whether the fast path runs `op` (given values it can hold).
fn runs(op: &Op) -> bool {
    match op {
        Op::Const(_)
        | Op::Name(_)
        | Op::Path { .. }
        | Op::Input(_)
        | Op::Step { .. }
        | Op::Attr(_)
        | Op::Index
        | Op::CompareConst(..)
        | Op::CompareConstJump { .. }
        | Op::Compare(_)
        | Op::CompareKeep(_)
        | Op::SwapPop
        | Op::Jump(_)
        | Op::JumpIfFalseOrPop(_)
        | Op::JumpIfTrueOrPop(_)
        | Op::PopJumpIfFalse(_)
        | Op::Unary(_)
        | Op::Binary(_) => true,
        // Not `str(…)`, which always builds a string (the work would be lost), nor the file
        // built-ins, nor the planning built-ins, whose failures are their point (the general
        // VM would do the work again to report them).
        Op::Call(builtin, argc) => {
            !matches!(
                builtin,
                Builtin::Str
                    | Builtin::FileExists
                    | Builtin::FileContains
                    | Builtin::NoFileConflicts
                    | Builtin::PlanCompletion
                    | Builtin::VocabularyCompliance
            ) && (1..=2).contains(argc)
        }
        // The methods whose result is a number, a bool or borrowed; not those that build a
        // string or a list.
        Op::Method(method, argc) => {
            *argc <= 1
                && matches!(
                    method,
                    Method::Startswith
                        | Method::Endswith
                        | Method::Count
                        | Method::Find
                        | Method::Index
                        | Method::Isdigit
                        | Method::Isalpha
                        | Method::Isspace
                        | Method::Isupper
                        | Method::Islower
                        | Method::Get
                )
        }
        Op::ConstTuple(_)
        | Op::Local(_)
        | Op::Store(_)
        | Op::LocalPath { .. }
        | Op::BuildList(_)
        | Op::BuildTuple(_)
        | Op::IterStart
        | Op::IterNext(_)
        | Op::IterEnd
        | Op::ListAppend
        | Op::MakeGen
        | Op::AnyStep(_)
        | Op::AllStep(_)
        | Op::AnyEnd
        | Op::AllEnd
        | Op::Fail(_) => false,
    }
}

/// The offset of a jumping op.
fn jump_offset(op: &Op) -> Option<i32> {
    match *op {
        Op::Jump(offset)
        | Op::JumpIfFalseOrPop(offset)
        | Op::JumpIfTrueOrPop(offset)
        | Op::PopJumpIfFalse(offset)
        | Op::IterNext(offset)
        | Op::AnyStep(offset)
        | Op::AllStep(offset)
        | Op::CompareConstJump { offset, .. } => Some(offset),
        _ => None,
    }
}

/// `pc + offset`.
fn jump(pc: usize, offset: i32) -> Option<usize> {
    usize::try_from(pc as i64 + i64::from(offset)).ok()
}

/// Evaluates `program` if it only reads and compares and succeeds; `None` means "ask the
/// general VM".
#[inline(always)]
pub(crate) fn run<'a>(
    program: &'a Program,
    bindings: &Bindings<'a>,
    limits: &Limits,
) -> Option<Fv<'a>> {
    let steps = program.fast.steps.as_slice();
    if program.fast.chain {
        return run_chain(program, bindings, limits, steps);
    }
    if steps.is_empty() {
        return None;
    }
    // The instruction budget left: each step charges the ops it stands for, as the general
    // VM charges them.
    let mut fuel = limits.instructions;
    let mut stack = Stack {
        items: [Fv::None; DEPTH],
        len: 0,
    };
    // The last free name read, resolved.
    let mut resolved: Option<(u32, &'a Value)> = None;
    let mut at = 0usize;
    while let Some(step) = steps.get(at) {
        at += 1;
        // Matched by reference: each field is read where it is used, not copied first.
        match step {
            Step::Test {
                load,
                len,
                compare,
                jump,
                ops,
            } => {
                fuel = fuel.checked_sub(u64::from(*ops))?;
                let mut value = Fv::from_json(load_value(program, bindings, &mut resolved, *load)?);
                if *len {
                    let n;
                    (n, fuel) = length(value, fuel, limits)?;
                    value = Fv::Int(n);
                }
                if let Some((op, rhs)) = *compare {
                    let result;
                    (result, fuel) = compare_scalar(op, value, rhs, program, fuel, limits)?;
                    value = Fv::Bool(result);
                }
                match *jump {
                    Some((when, to)) => {
                        if value.truthy() == when {
                            stack.push(value)?;
                            at = to as usize;
                        }
                    }
                    None => stack.push(value)?,
                }
            }
            &Step::CompareJump { op, rhs, when, to } => {
                fuel = fuel.checked_sub(1)?;
                let a = stack.pop()?;
                let result;
                (result, fuel) = compare_scalar(op, a, rhs, program, fuel, limits)?;
                if result == when {
                    stack.push(Fv::Bool(result))?;
                    at = to as usize;
                }
            }
            &Step::Jump(to) => {
                fuel = fuel.checked_sub(1)?;
                at = to as usize;
            }
            &Step::JumpIfFalseOrPop(to) => {
                fuel = fuel.checked_sub(1)?;
                if stack.last()?.truthy() {
                    stack.pop()?;
                } else {
                    at = to as usize;
                }
            }
            &Step::JumpIfTrueOrPop(to) => {
                fuel = fuel.checked_sub(1)?;
                if stack.last()?.truthy() {
                    at = to as usize;
                } else {
                    stack.pop()?;
                }
            }
            &Step::PopJumpIfFalse(to) => {
                fuel = fuel.checked_sub(1)?;
                if !stack.pop()?.truthy() {
                    at = to as usize;
                }
            }
            &Step::Op(op) => {
                fuel = fuel.checked_sub(1)?;
                fuel = other(program, limits, op, &mut stack, fuel)?;
            }
        }
    }
    if at != steps.len() || stack.len != 1 {
        return None;
    }
    stack.pop()
}

/// [`run`] for a chain of comparisons joined by `and` / `or`: each decides the result or
/// lets the next one decide it.
#[inline(always)]
fn run_chain<'a>(
    program: &'a Program,
    bindings: &Bindings<'a>,
    limits: &Limits,
    steps: &[Step],
) -> Option<Fv<'a>> {
    let mut fuel = limits.instructions;
    let mut resolved: Option<(u32, &'a Value)> = None;
    for step in steps {
        let Step::Test {
            load,
            len,
            compare,
            jump,
            ops,
        } = step
        else {
            return None;
        };
        fuel = fuel.checked_sub(u64::from(*ops))?;
        let mut value = Fv::from_json(load_value(program, bindings, &mut resolved, *load)?);
        if *len {
            let n;
            (n, fuel) = length(value, fuel, limits)?;
            value = Fv::Int(n);
        }
        if let Some((op, rhs)) = *compare {
            let result;
            (result, fuel) = compare_scalar(op, value, rhs, program, fuel, limits)?;
            match *jump {
                Some((when, _)) if result != when => continue,
                _ => return Some(Fv::Bool(result)),
            }
        }
        match *jump {
            Some((when, _)) if value.truthy() != when => {}
            _ => return Some(value),
        }
    }
    None
}

/// The value a [`Load`] reads.
#[inline(always)]
fn load_value<'a>(
    program: &'a Program,
    bindings: &Bindings<'a>,
    resolved: &mut Option<(u32, &'a Value)>,
    load: Load,
) -> Option<&'a Value> {
    match load {
        Load::Field { name, field } => {
            let Value::Object(map) = resolve(program, bindings, resolved, name)? else {
                return None;
            };
            field_of_inline(map, program.strings.get(field as usize)?)
        }
        Load::Path { name, path } => {
            walk(program, resolve(program, bindings, resolved, name)?, path)
        }
        Load::Name(name) => resolve(program, bindings, resolved, name),
        Load::Input(path) => walk(program, bindings.get_input()?, path),
        Load::Step { step, path } => {
            let id = program.strings.get(step as usize)?;
            walk(program, bindings.get_step(id)?, path)
        }
    }
}

/// `len(value)`, as the general VM computes it (borrowed JSON inline, a string by
/// `calls::call`'s rule: charged per 64 bytes), and the fuel left.
#[inline(always)]
fn length(value: Fv<'_>, fuel: u64, limits: &Limits) -> Option<(i64, u64)> {
    let (n, fuel) = match value {
        Fv::Json(Value::Array(items)) => (items.len(), fuel),
        Fv::Json(Value::Object(map)) => (map.len(), fuel),
        Fv::Str(text) => {
            let (charged, fuel) = metered(fuel, limits, |meter| meter.charge_bytes(text.len()));
            charged.ok()?;
            (text.chars().count(), fuel)
        }
        _ => return None,
    };
    Some((i64::try_from(n).ok()?, fuel))
}

/// The ops other than loads, comparisons with a constant and jumps, out of the loop: runs
/// `op` and returns the fuel left.
#[inline(never)]
fn other<'a>(
    program: &'a Program,
    limits: &Limits,
    op: Op,
    stack: &mut Stack<'a>,
    fuel: u64,
) -> Option<u64> {
    let mut fuel = fuel;
    match op {
        Op::Const(i) => stack.push(Fv::from_json(program.constants.get(i as usize)?))?,
        Op::Attr(i) => {
            let Fv::Json(Value::Object(map)) = stack.pop()? else {
                return None;
            };
            let name = program.strings.get(i as usize)?;
            stack.push(Fv::from_json(field_of_inline(map, name)?))?;
        }
        Op::Index => {
            let index = stack.pop()?.val();
            let base = stack.pop()?.val();
            let result;
            // The pc is only for error messages, and an error leaves this path.
            (result, fuel) = metered(fuel, limits, |meter| {
                vm::subscript(program, 0, &base, &index, meter)
            });
            discard(base);
            discard(index);
            stack.push(owned_nothing(result.ok()?)?)?;
        }
        Op::CompareConst(op, i) => {
            let a = stack.pop()?;
            let b = Fv::from_json(program.constants.get(i as usize)?);
            let result;
            (result, fuel) = compare_values(op, a, b, fuel, limits)?;
            stack.push(Fv::Bool(result))?;
        }
        Op::Compare(op) => {
            let b = stack.pop()?;
            let a = stack.pop()?;
            let result;
            (result, fuel) = compare_values(op, a, b, fuel, limits)?;
            stack.push(Fv::Bool(result))?;
        }
        Op::CompareKeep(op) => {
            let b = stack.pop()?;
            let a = stack.pop()?;
            let result;
            // As the general VM: no inline case (which would charge less).
            (result, fuel) = compare_general(op, a, b, fuel, limits)?;
            stack.push(b)?;
            stack.push(Fv::Bool(result))?;
        }
        Op::SwapPop => {
            let top = stack.pop()?;
            stack.pop()?;
            stack.push(top)?;
        }
        Op::Call(Builtin::Len, 1) if matches!(stack.last()?, Fv::Json(_) | Fv::Str(_)) => {
            let n;
            (n, fuel) = length(stack.pop()?, fuel, limits)?;
            stack.push(Fv::Int(n))?;
        }
        Op::Call(builtin, argc) if !builtin.reads_files() => {
            let value;
            (value, fuel) = metered(fuel, limits, |meter| {
                call(stack, argc, |args| {
                    calls::call(builtin, args, meter, limits).ok()
                })
            });
            stack.push(value?)?;
        }
        Op::Method(method, argc) => {
            let value;
            (value, fuel) = metered(fuel, limits, |meter| {
                call(stack, argc.checked_add(1)?, |args| {
                    let (receiver, args) = args.split_first()?;
                    calls::method(method, receiver, args, meter).ok()
                })
            });
            stack.push(value?)?;
        }
        Op::Unary(UnaryOp::Not) => {
            let value = stack.pop()?;
            stack.push(Fv::Bool(!value.truthy()))?;
        }
        Op::Unary(op) => {
            let value = stack.pop()?.val();
            let result = if op == UnaryOp::Neg {
                value::neg(&value)
            } else {
                value::pos(&value)
            };
            discard(value);
            stack.push(owned_nothing(result.ok()?)?)?;
        }
        Op::Binary(op) => {
            let b = stack.pop()?.val();
            let a = stack.pop()?.val();
            let result;
            (result, fuel) = metered(fuel, limits, |meter| vm::binary(op, &a, &b, meter));
            discard(a);
            discard(b);
            stack.push(owned_nothing(result.ok()?)?)?;
        }
        _ => return None,
    }
    Some(fuel)
}

/// The free name `strings[name]`, through the one-entry cache `resolved`.
#[inline(always)]
fn resolve<'a>(
    program: &Program,
    bindings: &Bindings<'a>,
    resolved: &mut Option<(u32, &'a Value)>,
    name: u32,
) -> Option<&'a Value> {
    if let Some((cached, value)) = *resolved
        && cached == name
    {
        return Some(value);
    }
    let value = lookup(program, bindings, name)?;
    *resolved = Some((name, value));
    Some(value)
}

/// The value bound to `strings[name]`: the first name bound inline (the usual `result`),
/// the others out of line, which keeps the loop small (this runs once per name and
/// evaluation).
#[inline(always)]
fn lookup<'a>(program: &Program, bindings: &Bindings<'a>, name: u32) -> Option<&'a Value> {
    let text = program.strings.get(name as usize)?;
    if let Some((key, value)) = bindings.first_name()
        && value::str_eq(key, text)
    {
        return Some(value);
    }
    lookup_rest(bindings, text)
}

#[inline(never)]
fn lookup_rest<'a>(bindings: &Bindings<'a>, name: &str) -> Option<&'a Value> {
    bindings.get_name(name)
}

/// Reads the fields of `paths[path]` from `root`.
#[inline(always)]
fn walk<'a>(program: &'a Program, root: &'a Value, path: u32) -> Option<&'a Value> {
    let mut current = root;
    for field in program.paths.get(path as usize)? {
        let Value::Object(map) = current else {
            return None;
        };
        current = field_of_inline(map, program.strings.get(field.name as usize)?)?;
    }
    Some(current)
}

/// `a op b`, as the general VM computes it (ints with ints and floats with floats inline,
/// everything else by [`vm::compare_op`], which charges the budget), and the fuel left.
#[inline(always)]
fn compare_values<'a>(
    op: CompareOp,
    a: Fv<'a>,
    b: Fv<'a>,
    fuel: u64,
    limits: &Limits,
) -> Option<(bool, u64)> {
    let ordered = match (a, b) {
        (Fv::Int(x), Fv::Int(y)) => op.order(x, y),
        (Fv::Float(x), Fv::Float(y)) => op.order(x, y),
        _ => None,
    };
    match ordered {
        Some(result) => Some((result, fuel)),
        None => compare_general(op, a, b, fuel, limits),
    }
}

/// `a op rhs`, as [`compare_values`], with the usual pairs (an int with an int constant, a
/// float with a float constant) decided without converting the constant.
#[inline(always)]
fn compare_scalar<'a>(
    op: CompareOp,
    a: Fv<'a>,
    rhs: Scalar,
    program: &'a Program,
    fuel: u64,
    limits: &Limits,
) -> Option<(bool, u64)> {
    let ordered = match (a, rhs) {
        (Fv::Int(x), Scalar::Int(y)) => op.order(x, y),
        (Fv::Float(x), Scalar::Float(y)) => op.order(x, y),
        _ => None,
    };
    match ordered {
        Some(result) => Some((result, fuel)),
        None => compare_values(op, a, rhs.fv(program)?, fuel, limits),
    }
}

#[inline(never)]
fn compare_general<'a>(
    op: CompareOp,
    a: Fv<'a>,
    b: Fv<'a>,
    fuel: u64,
    limits: &Limits,
) -> Option<(bool, u64)> {
    let (a, b) = (a.val(), b.val());
    let (result, fuel) = metered(fuel, limits, |meter| vm::compare_op(op, &a, &b, meter));
    discard(a);
    discard(b);
    Some((result.ok()?, fuel))
}

/// Pops `argc` values (one or two), calls `f` on them as general values, and returns its
/// result if it owns nothing.
#[inline(never)]
fn call<'a>(
    stack: &mut Stack<'a>,
    argc: u8,
    f: impl FnOnce(&[Val<'a>]) -> Option<Val<'a>>,
) -> Option<Fv<'a>> {
    let result = match argc {
        1 => {
            let args = [stack.pop()?.val()];
            let result = f(&args);
            args.into_iter().for_each(discard);
            result
        }
        2 => {
            let b = stack.pop()?.val();
            let args = [stack.pop()?.val(), b];
            let result = f(&args);
            args.into_iter().for_each(discard);
            result
        }
        _ => None,
    }?;
    owned_nothing(result)
}

/// The `Copy` form of a result, unless it owns something (then it is dropped).
#[inline]
fn owned_nothing(value: Val<'_>) -> Option<Fv<'_>> {
    let fv = Fv::from_val(&value);
    discard(value);
    fv
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn program(source: &str) -> Program {
        crate::compile(&crate::parse(source).expr.unwrap(), source)
    }

    /// The shapes this path is for stay on it; the rest go to the general VM. (That both
    /// give the same results is tested on the conformance table and on random programs.)
    #[test]
    fn typical_ensures_take_this_path() {
        let result = json!({
            "confidence": 0.92,
            "items": ["a", "b", "c"],
            "label": "positive",
            "score": 7,
            "flag": true,
            "nested": {"a": {"b": 3}},
        });
        let bindings = Bindings::new().name("result", &result);
        let limits = Limits::default();
        for source in [
            "result.confidence > 0.7 and len(result.items) > 0",
            "result.label == 'positive'",
            "result.label in ['positive', 'negative']",
            "not result.flag or result.score >= 3",
            "0 < result.score < 10",
            "result.items[0] == 'a' and result.nested.a.b == 3",
            "result['label'] != 'x'",
            "len(result.label) < 200",
            "result.score + 1 > 2 and -result.score < 0",
            "result.label.startswith('pos')",
            "min(result.score, 3) == 3",
            "result.flag is True",
            "'pos' in result.label if result.flag else False",
        ] {
            assert!(
                run(&program(source), &bindings, &limits).is_some(),
                "`{source}` left the fast path"
            );
        }
        for source in [
            "all(x != '' for x in result.items)",
            "result.label.upper() == 'POSITIVE'",
            "str(result.score) == '7'",
            "result.missing > 1",
            "result.label > 1",
            "(result.score, 1)",
            "file_exists('x')",
        ] {
            assert!(
                run(&program(source), &bindings, &limits).is_none(),
                "`{source}` took the fast path"
            );
        }
        // Comparisons joined by and / or run without a stack; other shapes with one.
        for (source, chain) in [
            ("result.confidence > 0.7 and len(result.items) > 0", true),
            (
                "result.score >= 3 or result.flag == False or len(result.label) < 3",
                true,
            ),
            (
                "result.score > 1 and (result.flag == True or result.label == 'x')",
                true,
            ),
            (
                "(result.score > 1 and result.flag == True) or result.label == 'x'",
                false,
            ),
            ("result.flag", true),
            ("result.flag and result.score > 3", true),
            (
                "not result.flag or len(result.items) and result.label",
                false,
            ),
            ("result.items and result.label or result.score", false),
            ("result.score == result.confidence", false),
        ] {
            let program = program(source);
            assert_eq!(program.fast.chain, chain, "{source}");
            assert!(run(&program, &bindings, &limits).is_some(), "{source}");
        }
        // The budget: one unit per op, and none is run past it.
        let program = program("result.confidence > 0.7 and len(result.items) > 0");
        for budget in 0..5 {
            let limits = Limits {
                instructions: budget,
                ..Limits::default()
            };
            assert!(run(&program, &bindings, &limits).is_none(), "{budget}");
        }
        let limits = Limits {
            instructions: 5,
            ..Limits::default()
        };
        assert!(matches!(
            run(&program, &bindings, &limits),
            Some(Fv::Bool(true))
        ));
    }
}
