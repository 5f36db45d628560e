//! The expression AST. Every node carries the [`Span`] of the text it was parsed from.
//!
//! The tree is the Python expression subset that specs use, nothing more: a construct that is
//! not here is rejected by the parser with a message that names it. Literals are already
//! decoded (`'a\n'` holds a newline), and the two spellings of the constants (`True` / `true`,
//! `None` / `null`) give the same node, so the printer writes one canonical form.

use crate::span::Span;

/// An expression with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

/// A name as written, with its span: a variable, an attribute, a function or a method name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// `None` or `null`.
    None,
    /// `True` / `False` or `true` / `false`.
    Bool(bool),
    /// A decimal integer literal that fits in an `i64`.
    Int(i64),
    /// A float literal (`0.7`, `1e3`, `.5`). Always finite.
    Float(f64),
    /// A string literal, escapes decoded.
    Str(String),
    /// `[a, b]`.
    List(Vec<Expr>),
    /// `(a, b)`, `(a,)` and `()`. A parenthesised single expression is not a tuple.
    Tuple(Vec<Expr>),
    /// A free name: `result`, `item`, `accumulator`, a generator's variable.
    Name(Ident),
    /// `$.input.<field>` or `$.steps.<id>.output[.<field>…]`.
    Ref(Reference),
    /// `base.name`.
    Attr { base: Box<Expr>, name: Ident },
    /// `base[index]`.
    Index { base: Box<Expr>, index: Box<Expr> },
    /// A call of a built-in function: `len(x)`, `all(t.passed for t in result.tests)`.
    Call { func: Ident, args: Vec<Expr> },
    /// A method call on a value: `result.label.lower()`.
    Method {
        receiver: Box<Expr>,
        name: Ident,
        args: Vec<Expr>,
    },
    /// `element for var in iter [if condition]…`; only valid as the sole argument of a call
    /// or method call (the parser enforces it), as in Python.
    Generator(Box<Generator>),
    /// `[element for var in iter [if condition]…]`: the same clauses, collected into a list.
    ListComp(Box<Generator>),
    /// `not x`, `-x`, `+x`.
    Unary { op: UnaryOp, operand: Box<Expr> },
    /// `a + b`, `a // b`, …
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `a and b`, `a or b`: short-circuit, and the value is the deciding operand, as in Python.
    Logical {
        op: LogicalOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// A comparison chain: `0 <= x <= 1` is `first = 0`, `rest = [(<=, x), (<=, 1)]`.
    Compare {
        first: Box<Expr>,
        rest: Vec<Comparison>,
    },
    /// `then if condition else otherwise`.
    Conditional {
        then: Box<Expr>,
        condition: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// What the parser put where it recovered from a syntax error. Never reaches the checker
    /// without an error reported for it.
    Error,
}

/// The root of a `$`-reference and the field path after it.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    pub root: RefRoot,
    /// The fields after `$.input` or `$.steps.<id>.output`, in order; may be empty.
    pub path: Vec<Ident>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum RefRoot {
    /// `$.input`
    Input,
    /// `$.steps.<step>.output`
    StepOutput { step: Ident },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Generator {
    pub element: Expr,
    pub var: Ident,
    pub iter: Expr,
    /// Every `if` clause, all of which must hold.
    pub conditions: Vec<Expr>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub op: CompareOp,
    /// The operator's own span (`not in` covers both words).
    pub op_span: Span,
    pub rhs: Expr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum UnaryOp {
    Not,
    Neg,
    Pos,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum LogicalOp {
    And,
    Or,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    Is,
    IsNot,
}

impl CompareOp {
    /// `x op y` for the six ordering operators on one type; `None` for `in`, `not in`, `is`
    /// and `is not`, which the caller decides on its own.
    #[inline(always)]
    pub fn order<T: PartialOrd>(self, x: T, y: T) -> Option<bool> {
        Some(match self {
            CompareOp::Eq => x == y,
            CompareOp::Ne => x != y,
            CompareOp::Lt => x < y,
            CompareOp::Le => x <= y,
            CompareOp::Gt => x > y,
            CompareOp::Ge => x >= y,
            CompareOp::In | CompareOp::NotIn | CompareOp::Is | CompareOp::IsNot => return None,
        })
    }
}

impl UnaryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            UnaryOp::Not => "not",
            UnaryOp::Neg => "-",
            UnaryOp::Pos => "+",
        }
    }
}

impl BinaryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::FloorDiv => "//",
            BinaryOp::Mod => "%",
        }
    }
}

impl LogicalOp {
    pub fn as_str(self) -> &'static str {
        match self {
            LogicalOp::And => "and",
            LogicalOp::Or => "or",
        }
    }
}

impl CompareOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
            CompareOp::In => "in",
            CompareOp::NotIn => "not in",
            CompareOp::Is => "is",
            CompareOp::IsNot => "is not",
        }
    }
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        Expr { kind, span }
    }

    /// The expressions directly inside this one, in source order: what a walk over the tree
    /// visits next (walk with a stack of pending nodes, not recursion: nesting is bounded by
    /// the parser, but a stack costs nothing).
    pub fn children(&self) -> Vec<&Expr> {
        match &self.kind {
            ExprKind::None
            | ExprKind::Bool(_)
            | ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Name(_)
            | ExprKind::Ref(_)
            | ExprKind::Error => Vec::new(),
            ExprKind::List(items) | ExprKind::Tuple(items) => items.iter().collect(),
            ExprKind::Attr { base, .. } => vec![base],
            ExprKind::Index { base, index } => vec![base, index],
            ExprKind::Call { args, .. } => args.iter().collect(),
            ExprKind::Method { receiver, args, .. } => {
                std::iter::once(&**receiver).chain(args).collect()
            }
            ExprKind::Generator(generator) | ExprKind::ListComp(generator) => {
                [&generator.element, &generator.iter]
                    .into_iter()
                    .chain(&generator.conditions)
                    .collect()
            }
            ExprKind::Unary { operand, .. } => vec![operand],
            ExprKind::Binary { lhs, rhs, .. } | ExprKind::Logical { lhs, rhs, .. } => {
                vec![lhs, rhs]
            }
            ExprKind::Compare { first, rest } => std::iter::once(&**first)
                .chain(rest.iter().map(|comparison| &comparison.rhs))
                .collect(),
            ExprKind::Conditional {
                then,
                condition,
                otherwise,
            } => vec![then, condition, otherwise],
        }
    }

    /// The same tree with every span set to `0..0`: two parses of equivalent text compare
    /// equal after this (the printer's round-trip property).
    pub fn without_spans(&self) -> Expr {
        let mut copy = self.clone();
        copy.clear_spans();
        copy
    }

    fn clear_spans(&mut self) {
        self.span = Span::default();
        let clear = |ident: &mut Ident| ident.span = Span::default();
        match &mut self.kind {
            ExprKind::None
            | ExprKind::Bool(_)
            | ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Error => {}
            ExprKind::List(items) | ExprKind::Tuple(items) => {
                items.iter_mut().for_each(Expr::clear_spans)
            }
            ExprKind::Name(ident) => clear(ident),
            ExprKind::Ref(reference) => {
                if let RefRoot::StepOutput { step } = &mut reference.root {
                    clear(step);
                }
                reference.path.iter_mut().for_each(clear);
            }
            ExprKind::Attr { base, name } => {
                base.clear_spans();
                clear(name);
            }
            ExprKind::Index { base, index } => {
                base.clear_spans();
                index.clear_spans();
            }
            ExprKind::Call { func, args } => {
                clear(func);
                args.iter_mut().for_each(Expr::clear_spans);
            }
            ExprKind::Method {
                receiver,
                name,
                args,
            } => {
                receiver.clear_spans();
                clear(name);
                args.iter_mut().for_each(Expr::clear_spans);
            }
            ExprKind::Generator(generator) | ExprKind::ListComp(generator) => {
                generator.element.clear_spans();
                clear(&mut generator.var);
                generator.iter.clear_spans();
                generator.conditions.iter_mut().for_each(Expr::clear_spans);
            }
            ExprKind::Unary { operand, .. } => operand.clear_spans(),
            ExprKind::Binary { lhs, rhs, .. } | ExprKind::Logical { lhs, rhs, .. } => {
                lhs.clear_spans();
                rhs.clear_spans();
            }
            ExprKind::Compare { first, rest } => {
                first.clear_spans();
                for comparison in rest {
                    comparison.op_span = Span::default();
                    comparison.rhs.clear_spans();
                }
            }
            ExprKind::Conditional {
                then,
                condition,
                otherwise,
            } => {
                then.clear_spans();
                condition.clear_spans();
                otherwise.clear_spans();
            }
        }
    }
}
