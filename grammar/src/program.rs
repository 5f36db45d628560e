//! The program representation: a [`Program`] (a flat `Vec<Op>` with one [`Span`] per op,
//! constants, interned identifiers and `$`-reference paths, and the expression's source) and
//! the [`Op`], [`Builtin`], [`Method`] and [`PathField`] it is made of, with their plain data
//! accessors. It is serde-serialisable: an execution plan embeds it.
//!
//! [`compile`](crate::compile) builds programs, [`vm`](crate::vm) runs them; this module
//! imports neither. It does import the fast path's [`FastOps`], which every program carries,
//! derived from its ops when it is built.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ast::{BinaryOp, CompareOp, UnaryOp};
use crate::fast::FastOps;
use crate::span::Span;

/// One VM instruction. Operand indices point into the [`Program`]'s tables; jump offsets are
/// relative to the jumping op's own index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Push `constants[i]`.
    Const(u32),
    /// Push `constants[i]` (an array) as a tuple.
    ConstTuple(u32),
    /// Push the free name `strings[i]` from the bindings.
    Name(u32),
    /// Push a generator variable.
    Local(u32),
    /// Pop into a generator variable.
    Store(u32),
    /// Push the free name `strings[name]` followed by the fields of `paths[path]`
    /// (`result.a.b`).
    Path {
        name: u32,
        path: u32,
    },
    /// Push a generator variable followed by the fields of `paths[path]` (`t.passed`).
    LocalPath {
        slot: u32,
        path: u32,
    },
    /// Pop `a`, push `a op constants[i]`.
    CompareConst(CompareOp, u32),
    /// `a op constant and …` / `… or …`: pop `a`; when `a op constants[constant]` is `when`,
    /// push it and jump (the `and` / `or` is decided), else go on with nothing pushed.
    CompareConstJump {
        op: CompareOp,
        constant: u32,
        when: bool,
        offset: i32,
    },
    /// Push `$.input` followed by the fields of `paths[i]`.
    Input(u32),
    /// Push `$.steps.<strings[step]>.output` followed by the fields of `paths[path]`.
    Step {
        step: u32,
        path: u32,
    },
    /// Pop an object, push its field `strings[i]`.
    Attr(u32),
    /// Pop an index and a container, push the element.
    Index,
    /// Pop `argc` arguments, push the built-in's result.
    Call(Builtin, u8),
    /// Pop `argc` arguments and the receiver, push the method's result.
    Method(Method, u8),
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CompareOp),
    /// In a comparison chain: pop `b`, `a`; push `b`, then `a op b`.
    CompareKeep(CompareOp),
    /// Pop the top, drop the value under it, push the top back.
    SwapPop,
    Jump(i32),
    /// If the top is falsy jump (keeping it), else pop it: `and`, comparison chains.
    JumpIfFalseOrPop(i32),
    /// If the top is truthy jump (keeping it), else pop it: `or`.
    JumpIfTrueOrPop(i32),
    /// Pop; jump if falsy: conditionals, generator conditions.
    PopJumpIfFalse(i32),
    /// Pop `n` values, push a list / tuple of them.
    BuildList(u32),
    BuildTuple(u32),
    /// Pop an iterable and start iterating over it (on the iterator stack).
    IterStart,
    /// Push the next element, or jump when the iteration is over (the iterator stays).
    IterNext(i32),
    /// Pop the iterator.
    IterEnd,
    /// Pop a value and append it to the list on top of the stack.
    ListAppend,
    /// Turn the list on top into a generator value (a generator argument of a call).
    MakeGen,
    /// `any(…)`: pop; if truthy, mark the iterator and jump to the end.
    AnyStep(i32),
    /// `all(…)`: pop; if falsy, mark the iterator and jump to the end.
    AllStep(i32),
    /// Pop the iterator, push whether `any` found a truthy element.
    AnyEnd,
    /// Pop the iterator, push whether `all` found no falsy element.
    AllEnd,
    /// Fail with the message `strings[i]` (a construct the checker rejects).
    Fail(u32),
}

/// The built-in functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Builtin {
    Len,
    Bool,
    Int,
    Str,
    Any,
    All,
    Min,
    Max,
    FileExists,
    FileContains,
    NoFileConflicts,
    PlanCompletion,
    VocabularyCompliance,
}

/// The methods of strings, lists and objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Method {
    Lower,
    Upper,
    Strip,
    Lstrip,
    Rstrip,
    Startswith,
    Endswith,
    Split,
    Count,
    Find,
    Replace,
    Join,
    Isdigit,
    Isalpha,
    Isspace,
    Isupper,
    Islower,
    Index,
    Get,
    Keys,
    Values,
}

impl Builtin {
    pub const ALL: [Builtin; 13] = [
        Builtin::Len,
        Builtin::Bool,
        Builtin::Int,
        Builtin::Str,
        Builtin::Any,
        Builtin::All,
        Builtin::Min,
        Builtin::Max,
        Builtin::FileExists,
        Builtin::FileContains,
        Builtin::NoFileConflicts,
        Builtin::PlanCompletion,
        Builtin::VocabularyCompliance,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Builtin::Len => "len",
            Builtin::Bool => "bool",
            Builtin::Int => "int",
            Builtin::Str => "str",
            Builtin::Any => "any",
            Builtin::All => "all",
            Builtin::Min => "min",
            Builtin::Max => "max",
            Builtin::FileExists => "file_exists",
            Builtin::FileContains => "file_contains",
            Builtin::NoFileConflicts => "no_file_conflicts",
            Builtin::PlanCompletion => "plan_completion",
            Builtin::VocabularyCompliance => "vocabulary_compliance",
        }
    }

    pub fn from_name(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Whether the built-in reads the file system (never folded).
    pub fn reads_files(self) -> bool {
        matches!(
            self,
            Builtin::FileExists | Builtin::FileContains | Builtin::VocabularyCompliance
        )
    }
}

impl Method {
    pub const ALL: [Method; 21] = [
        Method::Lower,
        Method::Upper,
        Method::Strip,
        Method::Lstrip,
        Method::Rstrip,
        Method::Startswith,
        Method::Endswith,
        Method::Split,
        Method::Count,
        Method::Find,
        Method::Replace,
        Method::Join,
        Method::Isdigit,
        Method::Isalpha,
        Method::Isspace,
        Method::Isupper,
        Method::Islower,
        Method::Index,
        Method::Get,
        Method::Keys,
        Method::Values,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Method::Lower => "lower",
            Method::Upper => "upper",
            Method::Strip => "strip",
            Method::Lstrip => "lstrip",
            Method::Rstrip => "rstrip",
            Method::Startswith => "startswith",
            Method::Endswith => "endswith",
            Method::Split => "split",
            Method::Count => "count",
            Method::Find => "find",
            Method::Replace => "replace",
            Method::Join => "join",
            Method::Isdigit => "isdigit",
            Method::Isalpha => "isalpha",
            Method::Isspace => "isspace",
            Method::Isupper => "isupper",
            Method::Islower => "islower",
            Method::Index => "index",
            Method::Get => "get",
            Method::Keys => "keys",
            Method::Values => "values",
        }
    }

    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// One field of a `$`-reference path: the interned name and the byte offset where the
/// reference text up to and including this field ends (for messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathField {
    pub name: u32,
    pub end: u32,
    /// Where the text before this field (its base) ends.
    pub base_end: u32,
}

/// A compiled expression.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "ProgramData")]
pub struct Program {
    /// The expression's text; spans index into it.
    pub(crate) source: String,
    pub(crate) ops: Vec<Op>,
    /// One span per op.
    pub(crate) spans: Vec<Span>,
    pub(crate) constants: Vec<Value>,
    /// Interned identifiers: names, fields, step ids, messages of `Fail`.
    pub(crate) strings: Vec<String>,
    pub(crate) paths: Vec<Vec<PathField>>,
    /// For `Attr`, `Index` and `Method` ops: the span of the base / receiver, for messages.
    /// Sorted by op index.
    pub(crate) bases: Vec<(u32, Span)>,
    /// The sub-expressions an explanation reports: the index of the op that completes each,
    /// and its span. Sorted by op index.
    pub(crate) leaves: Vec<(u32, Span)>,
    /// The number of generator-variable slots.
    pub(crate) locals: u32,
    /// The ops as the evaluator's fast path runs them ([`FastOps`]): derived from the fields
    /// above once the program is complete (by [`compile`](crate::compile::compile),
    /// [`compile_unfolded`](crate::compile::compile_unfolded) and when
    /// deserialising), never serialised. Whatever changes the ops must derive it again.
    #[serde(skip)]
    pub(crate) fast: FastOps,
}

/// What a serialised [`Program`] holds: all but its [`FastOps`], which are derived again.
#[derive(Deserialize)]
struct ProgramData {
    source: String,
    ops: Vec<Op>,
    spans: Vec<Span>,
    constants: Vec<Value>,
    strings: Vec<String>,
    paths: Vec<Vec<PathField>>,
    bases: Vec<(u32, Span)>,
    leaves: Vec<(u32, Span)>,
    locals: u32,
}

impl From<ProgramData> for Program {
    fn from(data: ProgramData) -> Program {
        Program {
            source: data.source,
            ops: data.ops,
            spans: data.spans,
            constants: data.constants,
            strings: data.strings,
            paths: data.paths,
            bases: data.bases,
            leaves: data.leaves,
            locals: data.locals,
            fast: FastOps::default(),
        }
        .planned()
    }
}

impl Program {
    /// The program with its [`FastOps`] derived from its ops: the last step of building one.
    pub(crate) fn planned(mut self) -> Program {
        self.fast = FastOps::new(&self);
        self
    }

    /// The expression's source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The text of `span` in the source (empty if the span is not in it).
    pub fn text(&self, span: Span) -> &str {
        self.source.get(span.range()).unwrap_or("")
    }

    /// The instructions.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The constant table.
    pub fn constants(&self) -> &[Value] {
        &self.constants
    }

    /// The value of the whole expression when it was folded to a constant.
    pub fn is_constant(&self) -> Option<&Value> {
        match self.ops.as_slice() {
            [Op::Const(i)] | [Op::ConstTuple(i)] => self.constants.get(*i as usize),
            _ => None,
        }
    }

    /// The free names the expression reads (what the caller must bind), sorted, without
    /// duplicates.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::Name(i) | Op::Path { name: i, .. } => {
                    self.strings.get(*i as usize).map(String::as_str)
                }
                _ => None,
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Whether the expression reads `$.input`.
    pub fn reads_input(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, Op::Input(_)))
    }

    /// The step ids whose output the expression reads, sorted, without duplicates.
    pub fn steps(&self) -> Vec<&str> {
        let mut steps: Vec<&str> = self
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::Step { step, .. } => self.strings.get(*step as usize).map(String::as_str),
                _ => None,
            })
            .collect();
        steps.sort_unstable();
        steps.dedup();
        steps
    }

    /// A readable listing of the ops, one per line, with the text each belongs to.
    pub fn disassemble(&self) -> String {
        let mut out = String::new();
        for (i, op) in self.ops.iter().enumerate() {
            let span = self.spans.get(i).copied().unwrap_or_default();
            let detail = match op {
                Op::Const(c) | Op::ConstTuple(c) => self
                    .constants
                    .get(*c as usize)
                    .map(|v| format!(" = {v}"))
                    .unwrap_or_default(),
                Op::Name(s) | Op::Attr(s) | Op::Fail(s) => self
                    .strings
                    .get(*s as usize)
                    .map(|v| format!(" = {v}"))
                    .unwrap_or_default(),
                _ => String::new(),
            };
            out.push_str(&format!("{i:3} {op:?}{detail}    ; {}\n", self.text(span)));
        }
        out
    }
}
