//! Bounds that keep hostile input from exhausting the stack, here or in any later stage that
//! walks the tree by recursion, and the one check that needs a node's parent.
//!
//! Before parsing, the text's length, its number of tokens, its bracket nesting and its runs
//! of prefix operators are capped; after, the tree's depth is measured with an explicit stack.
//! The token cap bounds the depth of what the parser can build at all (`1+1+…` nests one level
//! per operator), so that even a tree rejected as too deep is dropped without trouble.

use crate::ast::{Expr, ExprKind};
use crate::lexer::Tok;
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;

pub const MAX_BYTES: usize = 65_536;
pub const MAX_TOKENS: usize = 4_096;
pub const MAX_NESTING: usize = 64;
pub const MAX_DEPTH: usize = 200;

pub(super) fn too_long(src: &str) -> Option<Problem> {
    (src.len() > MAX_BYTES).then(|| {
        Problem::new(
            ProblemKind::Syntax,
            format!(
                "expression is too long ({} bytes; at most {MAX_BYTES})",
                src.len()
            ),
            Span::new(MAX_BYTES, src.len()),
            "beyond the limit",
        )
        .help("split the check into several shorter expressions")
    })
}

/// The first of the token-level limits that `tokens` exceed.
pub(super) fn token_limits(tokens: &[(Tok, Span)]) -> Option<Problem> {
    if let Some((_, span)) = tokens.get(MAX_TOKENS) {
        let whole = Span::new(0, tokens.last().map_or(span.end, |(_, s)| s.end) as usize);
        return Some(
            Problem::new(
                ProblemKind::Syntax,
                format!(
                    "expression is too long ({} tokens; at most {MAX_TOKENS})",
                    tokens.len()
                ),
                whole,
                "too many tokens",
            )
            .help("split the check into several shorter expressions"),
        );
    }
    let mut depth = 0usize;
    let mut prefix_run = 0usize;
    for (tok, span) in tokens {
        match tok {
            Tok::LParen | Tok::LBracket | Tok::LBrace => depth += 1,
            Tok::RParen | Tok::RBracket | Tok::RBrace => depth = depth.saturating_sub(1),
            _ => {}
        }
        if matches!(
            tok,
            Tok::Minus | Tok::Plus | Tok::Tilde | Tok::Not | Tok::Bang
        ) {
            prefix_run += 1;
        } else {
            prefix_run = 0;
        }
        if depth > MAX_NESTING || prefix_run > MAX_NESTING {
            let what = if depth > MAX_NESTING {
                "brackets"
            } else {
                "prefix operators"
            };
            return Some(
                Problem::new(
                    ProblemKind::Syntax,
                    format!("expression is nested too deeply (more than {MAX_NESTING} {what})"),
                    *span,
                    "too deep",
                )
                .help("simplify the expression"),
            );
        }
    }
    None
}

/// What the walk after parsing found.
pub(super) struct Walk {
    /// The tree is deeper than [`MAX_DEPTH`].
    pub too_deep: Option<Problem>,
    /// Generators that are not the sole argument of a call.
    pub misplaced: Vec<Problem>,
    pub has_error: bool,
}

/// Walks the tree with an explicit stack: its depth may be beyond what recursion can take.
pub(super) fn walk<'a>(root: &'a Expr, src: &str) -> Walk {
    let mut result = Walk {
        too_deep: None,
        misplaced: Vec::new(),
        has_error: false,
    };
    // Each node with its depth and whether a generator may stand there.
    let mut stack: Vec<(&'a Expr, usize, Placement)> = vec![(root, 1, Placement::Elsewhere)];
    while let Some((expr, depth, placement)) = stack.pop() {
        if depth > MAX_DEPTH {
            result.too_deep = Some(
                Problem::new(
                    ProblemKind::Syntax,
                    "expression is nested too deeply",
                    root.span,
                    "too deep",
                )
                .help(format!(
                    "the tree of an expression may be at most {MAX_DEPTH} levels deep; split \
                     long chains of operators into several expressions"
                )),
            );
            return result;
        }
        let mut push =
            |child: &'a Expr, placement: Placement| stack.push((child, depth + 1, placement));
        match &expr.kind {
            ExprKind::None
            | ExprKind::Bool(_)
            | ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Name(_)
            | ExprKind::Ref(_) => {}
            ExprKind::Error => result.has_error = true,
            ExprKind::List(items) | ExprKind::Tuple(items) => {
                items
                    .iter()
                    .for_each(|item| push(item, Placement::Elsewhere));
            }
            ExprKind::Attr { base, .. } => push(base, Placement::Elsewhere),
            ExprKind::Index { base, index } => {
                push(base, Placement::Elsewhere);
                push(index, Placement::Elsewhere);
            }
            ExprKind::Call { args, .. } => push_args(args, &mut push),
            ExprKind::Method { receiver, args, .. } => {
                push(receiver, Placement::Elsewhere);
                push_args(args, &mut push);
            }
            ExprKind::Generator(generator) | ExprKind::ListComp(generator) => {
                if let (ExprKind::Generator(_), Some(problem)) =
                    (&expr.kind, misplaced(expr, placement, src))
                {
                    result.misplaced.push(problem);
                }
                push(&generator.element, Placement::Elsewhere);
                push(&generator.iter, Placement::Elsewhere);
                for condition in &generator.conditions {
                    push(condition, Placement::Elsewhere);
                }
            }
            ExprKind::Unary { operand, .. } => push(operand, Placement::Elsewhere),
            ExprKind::Binary { lhs, rhs, .. } | ExprKind::Logical { lhs, rhs, .. } => {
                push(lhs, Placement::Elsewhere);
                push(rhs, Placement::Elsewhere);
            }
            ExprKind::Compare { first, rest } => {
                push(first, Placement::Elsewhere);
                for comparison in rest {
                    push(&comparison.rhs, Placement::Elsewhere);
                }
            }
            ExprKind::Conditional {
                then,
                condition,
                otherwise,
            } => {
                push(then, Placement::Elsewhere);
                push(condition, Placement::Elsewhere);
                push(otherwise, Placement::Elsewhere);
            }
        }
    }
    result
}

#[derive(Clone, Copy, PartialEq)]
enum Placement {
    SoleArgument,
    AmongArguments,
    Elsewhere,
}

fn push_args<'e>(args: &'e [Expr], push: &mut impl FnMut(&'e Expr, Placement)) {
    let placement = if args.len() == 1 {
        Placement::SoleArgument
    } else {
        Placement::AmongArguments
    };
    args.iter().for_each(|arg| push(arg, placement));
}

fn misplaced(generator: &Expr, placement: Placement, src: &str) -> Option<Problem> {
    let problem = |label: &str| {
        Problem::new(
            ProblemKind::Syntax,
            "a generator expression must be the sole argument of a call",
            generator.span,
            label,
        )
    };
    match placement {
        Placement::SoleArgument => None,
        Placement::AmongArguments => Some(
            problem("not the only argument")
                .help("built-ins that take a generator, like `all` and `any`, take only it"),
        ),
        Placement::Elsewhere => {
            let problem = problem("generator outside a call")
                .help("to build a list, use a list comprehension: `[x for x in items]`");
            // A parenthesised generator becomes a list comprehension by changing the brackets.
            let text = src.get(generator.span.range()).unwrap_or_default();
            Some(
                match text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
                    Some(inner) => problem.replacement(generator.span, format!("[{inner}]")),
                    None => problem,
                },
            )
        }
    }
}
