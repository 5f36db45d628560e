//! The bytecode compiler: an [`Expr`] → a [`Program`] for the stack VM ([`crate::vm`]).
//!
//! A program is a flat `Vec<Op>` with one [`Span`] per op (the sub-expression the op belongs
//! to), a table of constants (JSON values), interned identifiers and `$`-reference paths, and
//! the expression's source, so that run-time errors can quote the failing sub-expression. It is
//! serde-serialisable: an execution plan embeds it. Jumps are relative to the jumping op.
//! The representation (`Program`, `Op`, `Builtin`, `Method`, `PathField`) lives in the
//! crate's `program` module, which the VM reads without depending on this compiler; it is
//! re-exported here.
//!
//! **Constant folding.** Every sub-expression that reads no free name or `$`-reference and calls
//! no file built-in is evaluated at compile time, by running the VM on its code, and replaced by
//! one constant. If that evaluation fails (`1 / 0`, `'a' * 10**9`), the code stays and the error
//! happens at run time, with its span. Folding is bounded: at most [`FOLD_BUDGET`] instructions
//! over the whole compilation, and a folded constant may hold at most [`FOLD_MAX_BYTES`].

use serde_json::Value;

use crate::ast::{CompareOp, Expr, ExprKind, Generator, Ident, RefRoot};
use crate::fast::FastOps;
use crate::limits::Limits;
use crate::span::Span;
use crate::value::{SeqKind, Val};
use crate::vm::{self, Bindings, NoTrace};

pub use crate::program::{Builtin, Method, Op, PathField, Program};

/// Instructions that constant folding may spend over one compilation.
pub const FOLD_BUDGET: u64 = 200_000;
/// The largest value (approximate bytes) that folding turns into a constant.
pub const FOLD_MAX_BYTES: usize = 4096;

/// Compiles `expr`, parsed from `source`, to a program, folding constant sub-expressions.
pub fn compile(expr: &Expr, source: &str) -> Program {
    compile_with(expr, source, true)
}

/// Compiles without constant folding (tests compare folded and unfolded evaluation).
pub fn compile_unfolded(expr: &Expr, source: &str) -> Program {
    compile_with(expr, source, false)
}

fn compile_with(expr: &Expr, source: &str, fold: bool) -> Program {
    let mut compiler = Compiler {
        program: Program {
            source: source.to_owned(),
            ops: Vec::new(),
            spans: Vec::new(),
            constants: Vec::new(),
            strings: Vec::new(),
            paths: Vec::new(),
            bases: Vec::new(),
            leaves: Vec::new(),
            locals: 0,
            fast: FastOps::default(),
        },
        scopes: Vec::new(),
        fold_budget: if fold { FOLD_BUDGET } else { 0 },
        fold,
    };
    compiler.expr(expr, Place::Root);
    compiler.program.planned()
}

/// Where a sub-expression stands, for choosing the leaves an explanation reports.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The whole expression: never reported.
    Root,
    /// The base of an attribute, index or method: the chain it belongs to is reported.
    ChainBase,
    /// Inside a generator's element or conditions: values change per element, not reported.
    Body,
    Operand,
}

/// What a compiled sub-expression depends on.
#[derive(Default)]
struct Info {
    /// Reads a free name or a `$`-reference, calls a file built-in, or fails.
    impure: bool,
    /// The generator-variable slots it reads.
    locals: Vec<u32>,
}

impl Info {
    fn join(&mut self, other: Info) {
        self.impure |= other.impure;
        for slot in other.locals {
            if !self.locals.contains(&slot) {
                self.locals.push(slot);
            }
        }
    }

    fn impure() -> Info {
        Info {
            impure: true,
            locals: Vec::new(),
        }
    }
}

struct Compiler {
    program: Program,
    /// Generator variables in scope, innermost last.
    scopes: Vec<(String, u32)>,
    fold_budget: u64,
    fold: bool,
}

#[derive(Clone, Copy)]
enum LoopKind {
    List,
    Gen,
    Any,
    All,
}

impl Compiler {
    fn emit(&mut self, op: Op, span: Span) -> usize {
        self.program.ops.push(op);
        self.program.spans.push(span);
        self.program.ops.len() - 1
    }

    fn here(&self) -> usize {
        self.program.ops.len()
    }

    /// Points the jump at `at` to `target`.
    fn patch(&mut self, at: usize, target: usize) {
        let offset = i32::try_from(target as i64 - at as i64).unwrap_or(i32::MAX);
        if let Some(op) = self.program.ops.get_mut(at) {
            *op = match *op {
                Op::Jump(_) => Op::Jump(offset),
                Op::JumpIfFalseOrPop(_) => Op::JumpIfFalseOrPop(offset),
                Op::JumpIfTrueOrPop(_) => Op::JumpIfTrueOrPop(offset),
                Op::PopJumpIfFalse(_) => Op::PopJumpIfFalse(offset),
                Op::IterNext(_) => Op::IterNext(offset),
                Op::AnyStep(_) => Op::AnyStep(offset),
                Op::AllStep(_) => Op::AllStep(offset),
                Op::CompareConstJump {
                    op, constant, when, ..
                } => Op::CompareConstJump {
                    op,
                    constant,
                    when,
                    offset,
                },
                other => other,
            };
        }
    }

    fn emit_jump_back(&mut self, make: fn(i32) -> Op, target: usize, span: Span) {
        let at = self.emit(make(0), span);
        self.patch(at, target);
    }

    fn intern(&mut self, s: &str) -> u32 {
        let strings = &mut self.program.strings;
        let index = match strings.iter().position(|x| x == s) {
            Some(index) => index,
            None => {
                strings.push(s.to_owned());
                strings.len() - 1
            }
        };
        u32::try_from(index).unwrap_or(u32::MAX)
    }

    fn constant(&mut self, value: Value) -> u32 {
        let constants = &mut self.program.constants;
        let index = match constants.iter().position(|x| same_constant(x, &value)) {
            Some(index) => index,
            None => {
                constants.push(value);
                constants.len() - 1
            }
        };
        u32::try_from(index).unwrap_or(u32::MAX)
    }

    fn fail(&mut self, message: &str, span: Span) -> Info {
        let index = self.intern(message);
        self.emit(Op::Fail(index), span);
        Info::impure()
    }

    fn count(n: usize) -> u32 {
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    fn expr(&mut self, expr: &Expr, place: Place) -> Info {
        let start = self.here();
        let constants_before = self.program.constants.len();
        let span = expr.span;
        let operand = if place == Place::Body {
            Place::Body
        } else {
            Place::Operand
        };
        let chain_base = if place == Place::Body {
            Place::Body
        } else {
            Place::ChainBase
        };
        let literal = matches!(
            expr.kind,
            ExprKind::None
                | ExprKind::Bool(_)
                | ExprKind::Int(_)
                | ExprKind::Float(_)
                | ExprKind::Str(_)
        );
        let mut leaf = false;
        let info = match &expr.kind {
            ExprKind::None => self.push_constant(Value::Null, span),
            ExprKind::Bool(b) => self.push_constant(Value::Bool(*b), span),
            ExprKind::Int(i) => self.push_constant(Value::from(*i), span),
            ExprKind::Float(f) => match serde_json::Number::from_f64(*f) {
                Some(n) => self.push_constant(Value::Number(n), span),
                None => self.fail("the float literal is not finite", span),
            },
            ExprKind::Str(s) => self.push_constant(Value::String(s.clone()), span),
            ExprKind::List(items) | ExprKind::Tuple(items) => {
                let mut info = Info::default();
                for item in items {
                    info.join(self.expr(item, operand));
                }
                let n = Self::count(items.len());
                let op = if matches!(expr.kind, ExprKind::List(_)) {
                    Op::BuildList(n)
                } else {
                    Op::BuildTuple(n)
                };
                self.emit(op, span);
                info
            }
            ExprKind::Name(ident) => {
                leaf = true;
                self.name(ident)
            }
            ExprKind::Ref(reference) => {
                leaf = true;
                let fields: Vec<&Ident> = reference.path.iter().collect();
                let path = self.path(&fields);
                match &reference.root {
                    RefRoot::Input => self.emit(Op::Input(path), span),
                    RefRoot::StepOutput { step } => {
                        let step = self.intern(&step.name);
                        self.emit(Op::Step { step, path }, span)
                    }
                };
                Info::impure()
            }
            ExprKind::Attr { base, name } if self.chain_root(base).is_some() => {
                leaf = true;
                let mut fields = vec![name];
                let mut root = base.as_ref();
                while let ExprKind::Attr { base, name } = &root.kind {
                    fields.push(name);
                    root = base;
                }
                fields.reverse();
                let path = self.path(&fields);
                match self.chain_root(base) {
                    Some(Ok(slot)) => {
                        self.emit(Op::LocalPath { slot, path }, span);
                        Info {
                            impure: false,
                            locals: vec![slot],
                        }
                    }
                    Some(Err(name)) => {
                        self.emit(Op::Path { name, path }, span);
                        Info::impure()
                    }
                    None => self.fail("malformed attribute chain", span),
                }
            }
            ExprKind::Attr { base, name } => {
                leaf = true;
                let info = self.expr(base, chain_base);
                let name = self.intern(&name.name);
                let at = self.emit(Op::Attr(name), span);
                self.base(at, base.span);
                info
            }
            ExprKind::Index { base, index } => {
                leaf = true;
                let mut info = self.expr(base, chain_base);
                info.join(self.expr(index, operand));
                let at = self.emit(Op::Index, span);
                self.base(at, base.span);
                info
            }
            ExprKind::Call { func, args } => {
                leaf = true;
                self.call(func, args, span, operand)
            }
            ExprKind::Method {
                receiver,
                name,
                args,
            } => {
                leaf = true;
                // The receiver is an operand of its own: in `result.name.endswith('.gz')` the
                // name is what decided, and the call may be the whole expression.
                let mut info = self.expr(receiver, operand);
                match Method::from_name(&name.name) {
                    Some(method) => {
                        for arg in args {
                            info.join(self.arg(arg, operand));
                        }
                        let at = self.emit(Op::Method(method, argc(args.len())), span);
                        self.base(at, receiver.span);
                        info
                    }
                    None => {
                        let message = format!("`{}` is not a method of any value", name.name);
                        info.join(self.fail(&message, name.span));
                        info
                    }
                }
            }
            ExprKind::Generator(generator) => self.generator(generator, LoopKind::Gen, span),
            ExprKind::ListComp(generator) => self.generator(generator, LoopKind::List, span),
            ExprKind::Unary { op, operand: value } => {
                let info = self.expr(value, operand);
                self.emit(Op::Unary(*op), span);
                info
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let mut info = self.expr(lhs, operand);
                info.join(self.expr(rhs, operand));
                self.emit(Op::Binary(*op), span);
                info
            }
            ExprKind::Logical { op, lhs, rhs } => {
                let lhs_start = self.here();
                let mut info = self.expr(lhs, operand);
                let when = matches!(op, crate::ast::LogicalOp::Or);
                let lhs_end = self.here();
                // The jumps out of the left side to its end: those that decide this `and` /
                // `or` too (`a and b` in `a and b and c`: a falsy `a` is the result) go
                // straight to its end; with any other, the left side's value is not only its
                // last op's.
                let mut exits = Vec::new();
                let mut others = false;
                for at in lhs_start..lhs_end {
                    let Some(&op) = self.program.ops.get(at) else {
                        continue;
                    };
                    if jump_target(at, op) != Some(lhs_end) {
                        continue;
                    }
                    match op {
                        Op::CompareConstJump { when: on, .. } if on == when => exits.push(at),
                        Op::JumpIfFalseOrPop(_) if !when => exits.push(at),
                        Op::JumpIfTrueOrPop(_) if when => exits.push(at),
                        _ => others = true,
                    }
                }
                let jump = match (others, self.program.ops.last_mut()) {
                    // `x > 0.7 and …`: the comparison decides or falls through.
                    (false, Some(last @ Op::CompareConst(..))) => {
                        if let Op::CompareConst(op, constant) = *last {
                            *last = Op::CompareConstJump {
                                op,
                                constant,
                                when,
                                offset: 0,
                            };
                        }
                        self.here() - 1
                    }
                    _ => self.emit(
                        if when {
                            Op::JumpIfTrueOrPop(0)
                        } else {
                            Op::JumpIfFalseOrPop(0)
                        },
                        span,
                    ),
                };
                info.join(self.expr(rhs, operand));
                let end = self.here();
                self.patch(jump, end);
                for at in exits {
                    self.patch(at, end);
                }
                info
            }
            ExprKind::Compare { first, rest } => {
                let mut info = self.expr(first, operand);
                let mut lhs_span = first.span;
                let mut cleanups = Vec::new();
                for (i, comparison) in rest.iter().enumerate() {
                    let rhs_start = self.here();
                    info.join(self.expr(&comparison.rhs, operand));
                    let pair = lhs_span.to(comparison.rhs.span);
                    if i + 1 < rest.len() {
                        self.emit(Op::CompareKeep(comparison.op), pair);
                        cleanups.push(self.emit(Op::JumpIfFalseOrPop(0), pair));
                    } else if let (Some(Op::Const(c)), true) = (
                        self.program.ops.last().copied(),
                        self.here() == rhs_start + 1,
                    ) {
                        // `x > 0.7`: one op for the constant and the comparison.
                        self.program.ops.pop();
                        self.program.spans.pop();
                        self.emit(Op::CompareConst(comparison.op, c), pair);
                    } else if let (
                        Some(Op::ConstTuple(c)),
                        true,
                        CompareOp::In | CompareOp::NotIn,
                    ) = (
                        self.program.ops.last().copied(),
                        self.here() == rhs_start + 1,
                        comparison.op,
                    ) {
                        // `x in ('a', 'b')`: membership is the same in a tuple and in the list
                        // that `CompareConst` pushes, without building the tuple.
                        self.program.ops.pop();
                        self.program.spans.pop();
                        self.emit(Op::CompareConst(comparison.op, c), pair);
                    } else {
                        self.emit(Op::Compare(comparison.op), pair);
                    }
                    lhs_span = comparison.rhs.span;
                }
                if !cleanups.is_empty() {
                    let jump = self.emit(Op::Jump(0), span);
                    let cleanup = self.here();
                    for at in cleanups {
                        self.patch(at, cleanup);
                    }
                    self.emit(Op::SwapPop, span);
                    let end = self.here();
                    self.patch(jump, end);
                }
                info
            }
            ExprKind::Conditional {
                then,
                condition,
                otherwise,
            } => {
                let mut info = self.expr(condition, operand);
                let to_else = self.emit(Op::PopJumpIfFalse(0), span);
                info.join(self.expr(then, operand));
                let to_end = self.emit(Op::Jump(0), span);
                let otherwise_at = self.here();
                self.patch(to_else, otherwise_at);
                info.join(self.expr(otherwise, operand));
                let end = self.here();
                self.patch(to_end, end);
                info
            }
            ExprKind::Error => self.fail("the expression has a syntax error", span),
        };
        if !info.impure && info.locals.is_empty() && !literal && self.fold {
            self.try_fold(start, constants_before, span);
        }
        if leaf && info.impure && matches!(place, Place::Operand) {
            let last = self.here().saturating_sub(1);
            self.program.leaves.push((Self::count(last), span));
        }
        info
    }

    /// The root of an attribute chain `name.a.b` when it is a name: `Ok(slot)` for a
    /// generator variable, `Err(interned name)` for a free name.
    fn chain_root(&mut self, base: &Expr) -> Option<Result<u32, u32>> {
        let mut root = base;
        while let ExprKind::Attr { base, .. } = &root.kind {
            root = base;
        }
        let ExprKind::Name(ident) = &root.kind else {
            return None;
        };
        match self.scopes.iter().rev().find(|(n, _)| *n == ident.name) {
            Some((_, slot)) => Some(Ok(*slot)),
            None => Some(Err(self.intern(&ident.name))),
        }
    }

    /// Interns a field path, with where each field's base text ends.
    fn path(&mut self, fields: &[&Ident]) -> u32 {
        let path = fields
            .iter()
            .map(|field| {
                let before = self
                    .program
                    .source
                    .get(..field.span.start as usize)
                    .unwrap_or("")
                    .trim_end();
                let before = before.strip_suffix('.').unwrap_or(before).trim_end();
                let base_end = u32::try_from(before.len()).unwrap_or(0);
                PathField {
                    name: self.intern(&field.name),
                    end: field.span.end,
                    base_end,
                }
            })
            .collect();
        self.program.paths.push(path);
        Self::count(self.program.paths.len() - 1)
    }

    fn push_constant(&mut self, value: Value, span: Span) -> Info {
        let index = self.constant(value);
        self.emit(Op::Const(index), span);
        Info::default()
    }

    fn base(&mut self, at: usize, span: Span) {
        self.program.bases.push((Self::count(at), span));
    }

    fn name(&mut self, ident: &Ident) -> Info {
        if let Some((_, slot)) = self.scopes.iter().rev().find(|(n, _)| *n == ident.name) {
            let slot = *slot;
            self.emit(Op::Local(slot), ident.span);
            return Info {
                impure: false,
                locals: vec![slot],
            };
        }
        let index = self.intern(&ident.name);
        self.emit(Op::Name(index), ident.span);
        Info::impure()
    }

    /// An argument of a call: a generator is materialised into a generator value.
    fn arg(&mut self, arg: &Expr, place: Place) -> Info {
        self.expr(arg, place)
    }

    fn call(&mut self, func: &Ident, args: &[Expr], span: Span, place: Place) -> Info {
        let Some(builtin) = Builtin::from_name(&func.name) else {
            let message = format!("`{}` is not a built-in function", func.name);
            return self.fail(&message, func.span);
        };
        if let (Builtin::Any | Builtin::All, [arg]) = (builtin, args)
            && let ExprKind::Generator(generator) = &arg.kind
        {
            let kind = if builtin == Builtin::Any {
                LoopKind::Any
            } else {
                LoopKind::All
            };
            return self.generator(generator, kind, span);
        }
        let mut info = Info::default();
        for arg in args {
            info.join(self.arg(arg, place));
        }
        self.emit(Op::Call(builtin, argc(args.len())), span);
        if builtin.reads_files() {
            info.impure = true;
        }
        info
    }

    fn generator(&mut self, generator: &Generator, kind: LoopKind, span: Span) -> Info {
        // The iterable is evaluated in the enclosing scope, as in Python.
        let place = if self.scopes.is_empty() {
            Place::Operand
        } else {
            Place::Body
        };
        let mut info = self.expr(&generator.iter, place);
        self.emit(Op::IterStart, span);
        if matches!(kind, LoopKind::List | LoopKind::Gen) {
            self.emit(Op::BuildList(0), span);
        }
        let slot = self.program.locals;
        self.program.locals = self.program.locals.saturating_add(1);
        self.scopes.push((generator.var.name.clone(), slot));
        let top = self.emit(Op::IterNext(0), span);
        self.emit(Op::Store(slot), generator.var.span);
        let mut body = Info::default();
        for condition in &generator.conditions {
            body.join(self.expr(condition, Place::Body));
            self.emit_jump_back(Op::PopJumpIfFalse, top, condition.span);
        }
        body.join(self.expr(&generator.element, Place::Body));
        let step = match kind {
            LoopKind::List | LoopKind::Gen => {
                self.emit(Op::ListAppend, generator.element.span);
                None
            }
            LoopKind::Any => Some(self.emit(Op::AnyStep(0), generator.element.span)),
            LoopKind::All => Some(self.emit(Op::AllStep(0), generator.element.span)),
        };
        self.emit_jump_back(Op::Jump, top, span);
        let end = self.here();
        self.patch(top, end);
        if let Some(step) = step {
            self.patch(step, end);
        }
        self.emit(
            match kind {
                LoopKind::List | LoopKind::Gen => Op::IterEnd,
                LoopKind::Any => Op::AnyEnd,
                LoopKind::All => Op::AllEnd,
            },
            span,
        );
        if matches!(kind, LoopKind::Gen) {
            self.emit(Op::MakeGen, span);
        }
        self.scopes.pop();
        body.locals.retain(|s| *s != slot);
        info.join(body);
        info
    }

    /// Replaces the code from `start` (a pure sub-expression) by its value, when evaluating
    /// it succeeds within the folding limits.
    fn try_fold(&mut self, start: usize, constants_before: usize, span: Span) {
        if self.fold_budget == 0 {
            return;
        }
        let limits = Limits {
            instructions: self.fold_budget.min(100_000),
            max_value_bytes: FOLD_MAX_BYTES,
            root: None,
            max_file_bytes: 0,
            vocabulary: None,
        };
        let bindings = Bindings::new();
        let (result, used) = vm::run_from(&self.program, start, &bindings, &limits, &mut NoTrace);
        self.fold_budget = self.fold_budget.saturating_sub(used);
        let Ok(value) = result else {
            return;
        };
        let tuple = matches!(value, Val::Tuple(_));
        if !foldable(&value, true) || value.approx_bytes() > FOLD_MAX_BYTES as u128 {
            return;
        }
        let Ok(json) = value.to_json() else {
            return;
        };
        let program = &mut self.program;
        program.ops.truncate(start);
        program.spans.truncate(start);
        program.constants.truncate(constants_before);
        let start32 = Self::count(start);
        program.bases.retain(|(at, _)| *at < start32);
        program.leaves.retain(|(at, _)| *at < start32);
        let index = self.constant(json);
        self.emit(
            if tuple {
                Op::ConstTuple(index)
            } else {
                Op::Const(index)
            },
            span,
        );
    }
}

/// Where the jump at `at` goes, if `op` jumps.
fn jump_target(at: usize, op: Op) -> Option<usize> {
    let offset = match op {
        Op::Jump(offset)
        | Op::JumpIfFalseOrPop(offset)
        | Op::JumpIfTrueOrPop(offset)
        | Op::PopJumpIfFalse(offset)
        | Op::IterNext(offset)
        | Op::AnyStep(offset)
        | Op::AllStep(offset)
        | Op::CompareConstJump { offset, .. } => offset,
        _ => return None,
    };
    usize::try_from(at as i64 + i64::from(offset)).ok()
}

fn argc(n: usize) -> u8 {
    u8::try_from(n).unwrap_or(u8::MAX)
}

/// Whether a value survives the round trip through a JSON constant: tuples only at the top
/// (`ConstTuple`), no generators.
fn foldable(value: &Val<'_>, top: bool) -> bool {
    match value.as_seq() {
        Some((SeqKind::Gen, _)) => false,
        Some((SeqKind::Tuple, items)) => top && items.iter().all(|item| foldable(&item, false)),
        Some((SeqKind::List, items)) => items.iter().all(|item| foldable(&item, false)),
        None => true,
    }
}

/// Constants are shared only when they are the same JSON, with ints and floats kept apart
/// (`1` and `1.0` are different constants).
fn same_constant(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x.is_f64() == y.is_f64() && x == y && x.to_string() == y.to_string()
        }
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same_constant(x, y))
        }
        _ => a == b,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
pub(crate) mod tests {
    //! Programs built from hand-made ASTs (the parser lives elsewhere).

    use serde_json::json;

    use super::*;
    use crate::ast::{BinaryOp, Comparison, LogicalOp};
    use crate::eval_error::EvalErrorKind;

    /// The span of the `nth` occurrence of `needle` in `src`.
    fn at(src: &str, needle: &str, nth: usize) -> Span {
        let start = src.match_indices(needle).nth(nth).unwrap().0;
        Span::new(start, start + needle.len())
    }

    fn ex(kind: ExprKind, span: Span) -> Expr {
        Expr::new(kind, span)
    }

    fn ident(src: &str, name: &str, nth: usize) -> Ident {
        Ident {
            name: name.to_owned(),
            span: at(src, name, nth),
        }
    }

    fn name(src: &str, n: &str, nth: usize) -> Expr {
        ex(ExprKind::Name(ident(src, n, nth)), at(src, n, nth))
    }

    fn attr(src: &str, base: Expr, field: &str, text: &str) -> Expr {
        let span = at(src, text, 0);
        let name_span = Span::new(span.end as usize - field.len(), span.end as usize);
        ex(
            ExprKind::Attr {
                base: Box::new(base),
                name: Ident {
                    name: field.to_owned(),
                    span: name_span,
                },
            },
            span,
        )
    }

    fn cmp(src: &str, first: Expr, op: CompareOp, rhs: Expr) -> Expr {
        let span = first.span.to(rhs.span);
        let op_span = at(src, op.as_str(), 0);
        ex(
            ExprKind::Compare {
                first: Box::new(first),
                rest: vec![Comparison { op, op_span, rhs }],
            },
            span,
        )
    }

    fn lit(kind: ExprKind, src: &str, text: &str) -> Expr {
        ex(kind, at(src, text, 0))
    }

    /// `result.confidence > 0.7 and len(result.items) > 0`
    pub(crate) fn confidence(src: &str) -> Expr {
        let conf = attr(
            src,
            name(src, "result", 0),
            "confidence",
            "result.confidence",
        );
        let lhs = cmp(
            src,
            conf,
            CompareOp::Gt,
            lit(ExprKind::Float(0.7), src, "0.7"),
        );
        let items = attr(src, name(src, "result", 1), "items", "result.items");
        let call = ex(
            ExprKind::Call {
                func: ident(src, "len", 0),
                args: vec![items],
            },
            at(src, "len(result.items)", 0),
        );
        let rhs = ex(
            ExprKind::Compare {
                first: Box::new(call),
                rest: vec![Comparison {
                    op: CompareOp::Gt,
                    op_span: at(src, ">", 1),
                    rhs: lit(ExprKind::Int(0), src, "0"),
                }],
            },
            at(src, "len(result.items) > 0", 0),
        );
        ex(
            ExprKind::Logical {
                op: LogicalOp::And,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            },
            Span::new(0, src.len()),
        )
    }

    const CONFIDENCE: &str = "result.confidence > 0.7 and len(result.items) > 0";

    #[test]
    fn evaluates_the_typical_ensure() {
        let program = compile(&confidence(CONFIDENCE), CONFIDENCE);
        assert_eq!(program.names(), vec!["result"]);
        let good = json!({"confidence": 0.92, "items": ["a"]});
        let bindings = Bindings::new().name("result", &good);
        assert_eq!(
            program.evaluate(&bindings, &Limits::default()),
            Ok(json!(true))
        );
        let low = json!({"confidence": 0.42, "items": []});
        let bindings = Bindings::new().name("result", &low);
        assert_eq!(
            program.evaluate(&bindings, &Limits::default()),
            Ok(json!(false))
        );
        let explanation = program.explain(&bindings, &Limits::default());
        assert_eq!(
            explanation.to_string(),
            "ensure `result.confidence > 0.7 and len(result.items) > 0` failed: \
             `result.confidence` was 0.42"
        );
        let empty = json!({"confidence": 0.9, "items": []});
        let bindings = Bindings::new().name("result", &empty);
        assert_eq!(
            program.explain(&bindings, &Limits::default()).to_string(),
            "ensure `result.confidence > 0.7 and len(result.items) > 0` failed: \
             `result.confidence` was 0.9, `len(result.items)` was 0, `result.items` was []"
        );
    }

    #[test]
    fn missing_field_names_the_fields() {
        let program = compile(&confidence(CONFIDENCE), CONFIDENCE);
        let result = json!({"score": 1, "label": "x"});
        let error = program
            .evaluate(&Bindings::new().name("result", &result), &Limits::default())
            .unwrap_err();
        assert_eq!(error.kind, EvalErrorKind::MissingField);
        assert_eq!(
            error.message,
            "`result.confidence` is missing: the object has no field `confidence` \
             (its fields: `label`, `score`)"
        );
        assert_eq!(program.text(error.span), "result.confidence");
    }

    #[test]
    fn folds_constants_and_keeps_failing_ones() {
        let src = "1 + 2 * 3";
        let two_times_three = ex(
            ExprKind::Binary {
                op: BinaryOp::Mul,
                lhs: Box::new(lit(ExprKind::Int(2), src, "2")),
                rhs: Box::new(lit(ExprKind::Int(3), src, "3")),
            },
            at(src, "2 * 3", 0),
        );
        let sum = ex(
            ExprKind::Binary {
                op: BinaryOp::Add,
                lhs: Box::new(lit(ExprKind::Int(1), src, "1")),
                rhs: Box::new(two_times_three),
            },
            Span::new(0, src.len()),
        );
        let program = compile(&sum, src);
        assert_eq!(program.is_constant(), Some(&json!(7)));
        assert_eq!(program.ops().len(), 1);

        let src = "1 / 0";
        let div = ex(
            ExprKind::Binary {
                op: BinaryOp::Div,
                lhs: Box::new(lit(ExprKind::Int(1), src, "1")),
                rhs: Box::new(lit(ExprKind::Int(0), src, "0")),
            },
            Span::new(0, src.len()),
        );
        let program = compile(&div, src);
        assert_eq!(program.is_constant(), None);
        let error = program
            .evaluate(&Bindings::new(), &Limits::default())
            .unwrap_err();
        assert_eq!(error.message, "division by zero in `1 / 0`");
        assert_eq!(error.kind, EvalErrorKind::DivisionByZero);
    }

    #[test]
    fn any_over_a_generator_short_circuits() {
        // any(x > 1 for x in xs)
        let src = "any(x > 1 for x in xs)";
        let element = cmp(
            src,
            name(src, "x", 0),
            CompareOp::Gt,
            lit(ExprKind::Int(1), src, "1"),
        );
        let generator = Generator {
            element,
            var: ident(src, "x", 1),
            iter: name(src, "xs", 0),
            conditions: vec![],
        };
        let call = ex(
            ExprKind::Call {
                func: ident(src, "any", 0),
                args: vec![ex(
                    ExprKind::Generator(Box::new(generator)),
                    at(src, "x > 1 for x in xs", 0),
                )],
            },
            Span::new(0, src.len()),
        );
        let program = compile(&call, src);
        assert_eq!(program.names(), vec!["xs"]);
        // Stops at 2: the string after it would fail the comparison.
        let xs = json!([0, 2, "a"]);
        let bindings = Bindings::new().name("xs", &xs);
        assert_eq!(
            program.evaluate(&bindings, &Limits::default()),
            Ok(json!(true))
        );
        let xs = json!([0, 1]);
        let bindings = Bindings::new().name("xs", &xs);
        assert_eq!(
            program.evaluate(&bindings, &Limits::default()),
            Ok(json!(false))
        );
        let xs = json!([0, "a"]);
        let bindings = Bindings::new().name("xs", &xs);
        let error = program.evaluate(&bindings, &Limits::default()).unwrap_err();
        assert_eq!(error.message, "cannot compare `str` with `int` using `>`");
        assert_eq!(program.text(error.span), "x > 1");
        // The program round-trips through JSON.
        let text = serde_json::to_string(&program).unwrap();
        let back: Program = serde_json::from_str(&text).unwrap();
        assert_eq!(back, program);
    }
}
