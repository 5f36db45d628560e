//! `stratum-grammar`: the expression language of Stratum specs (`ensure`, `skip_if`,
//! `exit_criterion`, `score_expr`, `accumulate`, `accumulate_key`).
//!
//! A small CEL-like library, independent of YAML and of specs. The stages, in order:
//!
//! 1. [`parse()`]: text → spanned [`ast::Expr`] and syntax [`Problem`]s (several per expression:
//!    the parser recovers);
//! 2. [`check()`]: the AST against an [`Env`] of typed names → the expression's [`Type`] and type
//!    [`Problem`]s;
//! 3. [`compile()`]: the AST → a [`Program`] of stack bytecode, constants folded;
//! 4. [`Program::evaluate`]: the program over JSON values, within an instruction budget.
//!
//! [`print()`] writes an AST back as canonical source.

pub mod ast;
pub mod builtins;
mod calls;
pub mod check;
pub mod compile;
mod eval_error;
pub mod explain;
mod fast;
mod files;
pub mod lexer;
mod limits;
pub mod parser;
mod planning;
pub mod print;
pub mod problem;
mod program;
pub mod span;
pub mod suggest;
pub mod types;
mod value;
pub mod vm;
pub mod vocabulary;

pub use check::{Checked, check};
pub use compile::compile;
pub use eval_error::{EvalError, EvalErrorKind};
pub use explain::{Explanation, Operand};
pub use limits::Limits;
pub use parser::{Parsed, parse};
pub use print::print;
pub use problem::{Problem, ProblemKind, Replacement, Severity};
pub use program::Program;
pub use span::Span;
pub use types::{Env, Literal, Record, RecordField, Type};
pub use vm::Bindings;
pub use vocabulary::{Canonical, Vocabulary, VocabularyReader};
