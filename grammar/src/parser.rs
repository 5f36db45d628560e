//! Text → spanned [`Expr`] and syntax [`Problem`]s.
//!
//! The stages: [`crate::lexer::lex`] (every token, with the problems one token shows on
//! its own), the limits that keep hostile input cheap, the grammar (chumsky, recovering at
//! missing operands and at brackets, so that one expression can report several problems), and
//! a walk over the tree for its depth and for what needs a node's parent.
//!
//! Where the language differs from Python on purpose:
//! - newlines and `#` comments may stand between any two tokens (YAML block scalars);
//! - `true` / `false` / `null` are the constants, also usable as field names after `.`;
//! - `$.input…` and `$.steps.<id>.output…` are references; a step id is a name;
//! - names are ASCII; hexadecimal, octal and binary integers, complex numbers, `\N{…}`
//!   escapes, lone surrogate escapes and float literals that overflow are rejected;
//! - integers are `i64`: a literal above `i64::MAX` is rejected;
//! - `__` is rejected anywhere in the text, comments included, as the reference runtime does.

mod build;
mod errors;
mod grammar;
mod limits;
mod refs;
mod simple;

use chumsky::Parser as _;
use chumsky::input::Input as _;
use chumsky::span::SimpleSpan;

use crate::ast::Expr;
use crate::lexer::lex;
use crate::problem::{Problem, ProblemKind};

pub use limits::{MAX_BYTES, MAX_DEPTH, MAX_NESTING, MAX_TOKENS};

/// The result of [`parse`].
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    /// The tree, whenever one could be built; where the parser recovered from an error it holds
    /// an [`ExprKind::Error`](crate::ast::ExprKind::Error) node, and a problem is reported for it.
    pub expr: Option<Expr>,
    /// Empty exactly when the text is a valid expression of the subset; sorted by position.
    pub problems: Vec<Problem>,
}

/// Parses one expression.
pub fn parse(src: &str) -> Parsed {
    parse_with(src, true)
}

/// Parses one expression; with `shortcut`, a valid one that [`simple`] reads skips the grammar.
fn parse_with(src: &str, shortcut: bool) -> Parsed {
    if let Some(problem) = limits::too_long(src) {
        return Parsed {
            expr: None,
            problems: vec![problem],
        };
    }
    let lexed = lex(src);
    let mut problems = lexed.problems;
    if let Some(problem) = limits::token_limits(&lexed.tokens) {
        problems.push(problem);
        return finish(None, problems);
    }

    // Most expressions are valid and simple: those are read without building the grammar.
    let read = match shortcut && problems.is_empty() {
        true => simple::parse(&lexed.tokens),
        false => None,
    };
    if let Some(expr) = read {
        return walked(expr, src, problems);
    }

    let tokens: Vec<_> = lexed
        .tokens
        .iter()
        .map(|(tok, span)| (tok.clone(), SimpleSpan::from(span.range())))
        .collect();
    let eoi = SimpleSpan::from(src.len()..src.len());
    let (expr, errors) = grammar::top()
        .parse(tokens.as_slice().split_token_span(eoi))
        .into_output_errors();
    let source = errors::Source {
        src,
        tokens: &lexed.tokens,
    };
    // Where recovery leaves the parser stuck at a token, a second rule may fail there too: one
    // problem per position is enough.
    let mut reported_at = Vec::new();
    for error in errors {
        if let Some(problem) = errors::problem(error, &source)
            && !reported_at.contains(&problem.span.start)
        {
            reported_at.push(problem.span.start);
            problems.push(problem);
        }
    }

    let Some(expr) = expr else {
        return finish(None, problems);
    };
    walked(expr, src, problems)
}

/// The tree's depth and misplaced generators checked, then the result.
fn walked(expr: Expr, src: &str, mut problems: Vec<Problem>) -> Parsed {
    let walk = limits::walk(&expr, src);
    if let Some(problem) = walk.too_deep {
        problems.push(problem);
        return finish(None, problems);
    }
    problems.extend(walk.misplaced);
    if walk.has_error && problems.is_empty() {
        // Every recovery reports its error; this only keeps the promise if one ever does not.
        problems.push(Problem::new(
            ProblemKind::Syntax,
            "invalid syntax",
            expr.span,
            "invalid syntax",
        ));
    }
    finish(Some(expr), problems)
}

fn finish(expr: Option<Expr>, mut problems: Vec<Problem>) -> Parsed {
    problems.sort_by_key(|problem| (problem.span.start, problem.span.end));
    problems.dedup_by(|a, b| a.span == b.span && a.message == b.message);
    if expr.is_none() && problems.is_empty() {
        problems.push(Problem::new(
            ProblemKind::Syntax,
            "invalid syntax",
            crate::span::Span::default(),
            "invalid syntax",
        ));
    }
    Parsed { expr, problems }
}

impl Parsed {
    /// Whether the text is a valid expression of the subset.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty() && self.expr.is_some()
    }
}
