//! Text → spanned [`Expr`] and syntax [`Problem`]s.
//!
//! The stages: [`crate::lexer::lex`] (every token, with the problems one token shows on
//! its own), the limits that keep hostile input cheap, the grammar (chumsky, recovering at
//! missing operands and at brackets, so that one expression can report several problems; it
//! reads each token a bounded number of times, however the brackets nest or fail to close),
//! and a walk over the tree for its depth and for what needs a node's parent.
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
mod groups;
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
    parse_counting(src, shortcut, &mut 0)
}

/// [`parse_with`], adding to `reads` the tokens that the grammar read (see [`grammar::State`]).
fn parse_counting(src: &str, shortcut: bool, reads: &mut usize) -> Parsed {
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
    let mut state = grammar::State {
        groups: groups::Groups::find(&lexed.tokens),
        reads: 0,
    };
    let (expr, errors) = grammar::top()
        .parse_with_state(tokens.as_slice().split_token_span(eoi), &mut state)
        .into_output_errors();
    *reads += state.reads;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// How many tokens `src` has, and how many times the grammar read one.
    fn work(src: &str) -> (usize, usize) {
        let mut reads = 0;
        let parsed = parse_counting(src, false, &mut reads);
        assert!(
            !parsed.problems.is_empty(),
            "{src:?} parsed without problems"
        );
        (lex(src).tokens.len(), reads)
    }

    /// The most reads the grammar may take for `tokens` tokens: a constant number per token to
    /// parse them, and one more per bracket open around a failure (at most [`MAX_NESTING`]),
    /// for each such bracket's recovery to skip its group. Exponential work, or a search for a
    /// group's end that costs more than one read per token, exceeds it.
    fn budget(tokens: usize) -> usize {
        (32 + MAX_NESTING) * tokens
    }

    /// Shapes of unclosed brackets, each once exponential in how many of them are open: an
    /// unclosed bracket made the rules around it read its contents twice (`.name(` as a method
    /// call, then as a field and a call; `x=(` as a keyword argument, then as an assignment; a
    /// lambda's body, then what follows the lambda), and recovery searched for its end once
    /// per bracket open around it.
    const UNCLOSED: &[&str] = &[
        "a.b(",
        "a(",
        "a[b[",
        "(",
        "[",
        "{",
        "all(x for x in (",
        "[x for x in y.z(",
        "a if (",
        "a if b else (",
        "a if b else c := (",
        "not (",
        "-(",
        "x ** (",
        "a and (",
        "x not in (",
        "a.b[c.d(",
        "x.y(1 + ",
        "f(x, [y, (",
        "$.steps.a.output.f(",
        "a.b(c).d[e](f) + g.h(",
        "a.b(1, ",
        "f(x=(",
        "f(**(",
        "a[1:",
        "a[1, ",
        "lambda x: a.b(",
        "lambda: a + (",
        "lambda: x if (",
        "yield a.b(",
        "a if lambda: b else (",
    ];

    #[test]
    fn unclosed_brackets_cost_a_bounded_number_of_reads() {
        // Twelve levels first: were the work exponential again, this fails at once rather than
        // run for hours at sixty-four.
        for depth in [12, MAX_NESTING] {
            for unit in UNCLOSED {
                let brackets = unit.matches(['(', '[', '{']).count();
                let src = unit.repeat(depth / brackets) + "z";
                let (tokens, reads) = work(&src);
                assert!(
                    reads <= budget(tokens),
                    "{src:?}: {reads} reads of {tokens} tokens"
                );
            }
        }
    }

    #[test]
    fn sixty_four_open_brackets_in_four_thousand_tokens_cost_a_bounded_number_of_reads() {
        let names = |n: usize| vec!["x.y"; n].join(" + ");
        let open = "a.b(c[".repeat(MAX_NESTING / 2) + &names(950);
        // Each level fails after its inner one recovered, and skips its group again.
        let closed = "(".repeat(MAX_NESTING) + &names(900) + " b" + &") z".repeat(MAX_NESTING);
        let spread = (names(14) + " + a.b(").repeat(MAX_NESTING) + "z";
        let lambdas = "lambda: x if (".repeat(MAX_NESTING) + &names(900);
        for src in [open, closed, spread, lambdas] {
            let (tokens, reads) = work(&src);
            assert!(tokens > 3_500 && tokens <= MAX_TOKENS, "{tokens} tokens");
            assert!(reads <= budget(tokens), "{reads} reads of {tokens} tokens");
        }
    }
}
