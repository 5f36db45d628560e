//! The fast path of evaluation: programs that only read and compare.
//!
//! Most `ensure`, `skip_if` and `exit_criterion` expressions read a few fields and compare them
//! with constants or with each other (`result.confidence > 0.7 and len(result.items) > 0`).
//! [`run`] evaluates such programs over values that are `Copy` — scalars, and strings, lists
//! and objects borrowed from the bindings or the constants — on a small inline stack: no
//! allocation, no reference counting, no drop glue.
//!
//! It computes only what it can without building a value, and only successful evaluations.
//! For anything else — a generator, a tuple, a string or list that an operation builds, a
//! file built-in, any error, the budget running out, a stack deeper than [`DEPTH`] — it
//! returns `None`, and the caller evaluates the program again with the general VM
//! ([`crate::vm`]) from the start. Evaluation has no effects, so starting again is safe; the
//! work done here is lost, which is why the unsupported ops are rare in the expressions that
//! take this path.
//!
//! The general VM is the reference. Where this returns a value, the general VM returns the
//! same value, having charged the budget the same amounts: this path charges one unit per op
//! and leaves every other charge to the same functions of [`crate::value`], [`crate::calls`]
//! and [`crate::vm`] that the general VM calls (tests compare the two on the conformance
//! table and on random programs).

use serde_json::{Number, Value};

use crate::ast::{CompareOp, UnaryOp};
use crate::calls;
use crate::compile::{Builtin, Op, Program};
use crate::value::{self, Meter, Val, field_of_inline};
use crate::vm::{self, Bindings, Limits, discard};

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

/// Evaluates `program` if it only reads and compares and succeeds; `None` means "ask the
/// general VM".
#[inline(always)]
pub(crate) fn run<'a>(
    program: &'a Program,
    bindings: &Bindings<'a>,
    limits: &Limits,
) -> Option<Fv<'a>> {
    let ops = program.ops.as_slice();
    // The instruction budget left; one unit per op, as the general VM charges.
    let mut fuel = limits.instructions;
    let mut stack = Stack {
        items: [Fv::None; DEPTH],
        len: 0,
    };
    // The last free name read, resolved.
    let mut resolved: Option<(u32, &'a Value)> = None;
    let mut pc = 0usize;
    while let Some(op) = ops.get(pc) {
        fuel = fuel.checked_sub(1)?;
        let mut next = pc + 1;
        // A load's value, which the ops after it may consume directly (below); other ops
        // work on the stack.
        let loaded = match *op {
            Op::Name(i) => Fv::from_json(resolve(program, bindings, &mut resolved, i)?),
            Op::Path { name, path } => {
                let root = resolve(program, bindings, &mut resolved, name)?;
                walk(program, root, path)?
            }
            Op::Attr(i) => {
                let Fv::Json(Value::Object(map)) = stack.pop()? else {
                    return None;
                };
                let name = program.strings.get(i as usize)?;
                Fv::from_json(field_of_inline(map, name)?)
            }
            Op::Const(i) => {
                stack.push(Fv::from_json(program.constants.get(i as usize)?))?;
                pc = next;
                continue;
            }
            Op::CompareConst(op, i) => {
                let a = stack.pop()?;
                let b = Fv::from_json(program.constants.get(i as usize)?);
                let result;
                (result, fuel) = compare(op, a, b, fuel, limits)?;
                stack.push(Fv::Bool(result))?;
                pc = next;
                continue;
            }
            Op::CompareConstJump {
                op,
                constant,
                when,
                offset,
            } => {
                let a = stack.pop()?;
                let b = Fv::from_json(program.constants.get(constant as usize)?);
                let result;
                (result, fuel) = compare(op, a, b, fuel, limits)?;
                if result == when {
                    stack.push(Fv::Bool(result))?;
                    next = jump(pc, offset)?;
                }
                pc = next;
                continue;
            }
            Op::Compare(op) => {
                let b = stack.pop()?;
                let a = stack.pop()?;
                let result;
                (result, fuel) = compare(op, a, b, fuel, limits)?;
                stack.push(Fv::Bool(result))?;
                pc = next;
                continue;
            }
            Op::Jump(offset) => {
                pc = jump(pc, offset)?;
                continue;
            }
            Op::JumpIfFalseOrPop(offset) => {
                if stack.last()?.truthy() {
                    stack.pop()?;
                } else {
                    next = jump(pc, offset)?;
                }
                pc = next;
                continue;
            }
            Op::JumpIfTrueOrPop(offset) => {
                if stack.last()?.truthy() {
                    next = jump(pc, offset)?;
                } else {
                    stack.pop()?;
                }
                pc = next;
                continue;
            }
            Op::PopJumpIfFalse(offset) => {
                if !stack.pop()?.truthy() {
                    next = jump(pc, offset)?;
                }
                pc = next;
                continue;
            }
            Op::Unary(UnaryOp::Not) => {
                let value = stack.pop()?;
                stack.push(Fv::Bool(!value.truthy()))?;
                pc = next;
                continue;
            }
            other => {
                (pc, fuel) = rare(program, bindings, limits, other, pc, &mut stack, fuel)?;
                continue;
            }
        };
        // `len(…)` of borrowed JSON, then a comparison with a constant, run as one step with
        // the load: each op charged as if run alone, none past the budget.
        let mut value = loaded;
        if let (Some(Op::Call(Builtin::Len, 1)), Fv::Json(json)) = (ops.get(next), value)
            && fuel > 0
        {
            let n = match json {
                Value::Array(items) => items.len(),
                Value::Object(map) => map.len(),
                _ => return None,
            };
            fuel -= 1;
            next += 1;
            value = Fv::Int(i64::try_from(n).ok()?);
        }
        match ops.get(next) {
            Some(&Op::CompareConst(op, constant)) if fuel > 0 => {
                let b = Fv::from_json(program.constants.get(constant as usize)?);
                let result;
                (result, fuel) = compare(op, value, b, fuel - 1, limits)?;
                stack.push(Fv::Bool(result))?;
                next += 1;
            }
            Some(&Op::CompareConstJump {
                op,
                constant,
                when,
                offset,
            }) if fuel > 0 => {
                let b = Fv::from_json(program.constants.get(constant as usize)?);
                let result;
                (result, fuel) = compare(op, value, b, fuel - 1, limits)?;
                if result == when {
                    stack.push(Fv::Bool(result))?;
                    next = jump(next, offset)?;
                } else {
                    next += 1;
                }
            }
            _ => stack.push(value)?,
        }
        pc = next;
    }
    if pc != ops.len() || stack.len != 1 {
        return None;
    }
    stack.pop()
}

/// The ops that are rarer in the expressions this path serves, out of its loop: runs the op
/// at `pc` and returns the next op's index and the fuel left.
#[inline(never)]
fn rare<'a>(
    program: &'a Program,
    bindings: &Bindings<'a>,
    limits: &Limits,
    op: Op,
    pc: usize,
    stack: &mut Stack<'a>,
    fuel: u64,
) -> Option<(usize, u64)> {
    let mut fuel = fuel;
    match op {
        Op::Input(path) => stack.push(walk(program, bindings.get_input()?, path)?)?,
        Op::Step { step, path } => {
            let id = program.strings.get(step as usize)?;
            stack.push(walk(program, bindings.get_step(id)?, path)?)?;
        }
        Op::Index => {
            let index = stack.pop()?.val();
            let base = stack.pop()?.val();
            let result;
            (result, fuel) = metered(fuel, limits, |meter| {
                vm::subscript(program, pc, &base, &index, meter)
            });
            discard(base);
            discard(index);
            stack.push(owned_nothing(result.ok()?)?)?;
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
        Op::Call(Builtin::Len, 1) => {
            let n = match stack.pop()? {
                Fv::Json(Value::Array(items)) => items.len(),
                Fv::Json(Value::Object(map)) => map.len(),
                Fv::Str(text) => {
                    let charged;
                    (charged, fuel) = metered(fuel, limits, |meter| meter.charge_bytes(text.len()));
                    charged.ok()?;
                    text.chars().count()
                }
                _ => return None,
            };
            stack.push(Fv::Int(i64::try_from(n).ok()?))?;
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
        Op::Unary(op @ (UnaryOp::Neg | UnaryOp::Pos)) => {
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
        // Values this path cannot hold (tuples, lists, generators), generator variables,
        // file built-ins, `Fail`.
        _ => return None,
    }
    Some((pc + 1, fuel))
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

/// Out of line: the loop stays small (once per name and evaluation).
#[inline(never)]
fn lookup<'a>(program: &Program, bindings: &Bindings<'a>, name: u32) -> Option<&'a Value> {
    bindings.get_name(program.strings.get(name as usize)?)
}

/// Reads the fields of `paths[path]` from `root`.
#[inline(always)]
fn walk<'a>(program: &'a Program, root: &'a Value, path: u32) -> Option<Fv<'a>> {
    let mut current = root;
    for field in program.paths.get(path as usize)? {
        let Value::Object(map) = current else {
            return None;
        };
        current = field_of_inline(map, program.strings.get(field.name as usize)?)?;
    }
    Some(Fv::from_json(current))
}

/// `pc + offset`, if it is an op or the end.
#[inline(always)]
fn jump(pc: usize, offset: i32) -> Option<usize> {
    usize::try_from(pc as i64 + i64::from(offset)).ok()
}

/// `a op b`, as the general VM computes it (ints with ints and floats with floats inline,
/// everything else by [`vm::compare_op`], which charges the budget), and the fuel left.
#[inline(always)]
fn compare<'a>(
    op: CompareOp,
    a: Fv<'a>,
    b: Fv<'a>,
    fuel: u64,
    limits: &Limits,
) -> Option<(bool, u64)> {
    let result = match (a, b) {
        (Fv::Int(x), Fv::Int(y)) => match op {
            CompareOp::Eq => x == y,
            CompareOp::Ne => x != y,
            CompareOp::Lt => x < y,
            CompareOp::Le => x <= y,
            CompareOp::Gt => x > y,
            CompareOp::Ge => x >= y,
            _ => return compare_general(op, a, b, fuel, limits),
        },
        (Fv::Float(x), Fv::Float(y)) => match op {
            CompareOp::Eq => x == y,
            CompareOp::Ne => x != y,
            CompareOp::Lt => x < y,
            CompareOp::Le => x <= y,
            CompareOp::Gt => x > y,
            CompareOp::Ge => x >= y,
            _ => return compare_general(op, a, b, fuel, limits),
        },
        _ => return compare_general(op, a, b, fuel, limits),
    };
    Some((result, fuel))
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
