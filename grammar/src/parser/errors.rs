//! chumsky's errors → [`Problem`]s that say what was expected, after what, and what was found.
//!
//! An error knows its position, the token found there and the labels of what could have
//! stood there. The token before it and the brackets still open at it come from the token
//! list, and make the message specific: "expected an expression after `and`, found `)`".

use chumsky::error::{RichPattern, RichReason};
use chumsky::span::SimpleSpan;

use super::grammar::{self, EXPRESSION, FIELD, OPERATOR, VARIABLE};
use crate::lexer::{Tok, is_python_keyword};
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;

/// The text and tokens that the errors point into.
pub(super) struct Source<'a, 's> {
    pub src: &'a str,
    pub tokens: &'a [(Tok<'s>, Span)],
}

/// What could have stood where the error is.
#[derive(Debug, PartialEq)]
enum Want {
    Expression,
    Operator,
    Field,
    Variable,
    End,
    Token(&'static str),
    Other,
}

/// The problem for one error, or `None` where it only repeats one that the lexer reported.
pub(super) fn problem(error: grammar::Error<'_, '_>, source: &Source) -> Option<Problem> {
    let at: SimpleSpan = *error.span();
    match error.into_reason() {
        RichReason::Custom(problem) => Some(problem),
        RichReason::ExpectedFound { expected, found } => {
            let wants: Vec<Want> = expected.iter().map(want).collect();
            source.expected_found(grammar::span(at), &wants, found.is_some())
        }
    }
}

fn want(pattern: &RichPattern<'_, Tok<'_>>) -> Want {
    match pattern {
        RichPattern::Label(label) => match label.as_ref() {
            EXPRESSION => Want::Expression,
            OPERATOR => Want::Operator,
            FIELD => Want::Field,
            VARIABLE => Want::Variable,
            _ => Want::End,
        },
        RichPattern::EndOfInput => Want::End,
        RichPattern::Token(tok) => match spelling(tok) {
            Some(text) => Want::Token(text),
            None => Want::Other,
        },
        _ => Want::Other,
    }
}

/// How a token that the grammar expects by itself is written.
fn spelling(tok: &Tok) -> Option<&'static str> {
    Some(match tok {
        Tok::RParen => ")",
        Tok::RBracket => "]",
        Tok::RBrace => "}",
        Tok::LParen => "(",
        Tok::LBracket => "[",
        Tok::Comma => ",",
        Tok::Colon => ":",
        Tok::Dot => ".",
        Tok::Else => "else",
        Tok::In => "in",
        Tok::For => "for",
        Tok::If => "if",
        Tok::Not => "not",
        _ => return None,
    })
}

fn closer_of(opener: &Tok) -> Option<&'static str> {
    match opener {
        Tok::LParen => Some(")"),
        Tok::LBracket => Some("]"),
        Tok::LBrace => Some("}"),
        _ => None,
    }
}

impl Source<'_, '_> {
    /// The help for a missing operand: what the token before it needs.
    fn operand_help(
        &self,
        problem: Problem,
        prev: Option<&(Tok, Span)>,
        found: Option<&(Tok, Span)>,
    ) -> Problem {
        let Some((tok, span)) = prev else {
            return problem;
        };
        let text = self.text(*span);
        match tok {
            Tok::Comma if found.is_some_and(|(tok, _)| matches!(tok, Tok::Comma)) => {
                problem.help("remove the extra `,`").replacement(*span, "")
            }
            Tok::Plus
            | Tok::Minus
            | Tok::Star
            | Tok::Slash
            | Tok::DoubleSlash
            | Tok::Percent
            | Tok::EqEq
            | Tok::NotEq
            | Tok::Lt
            | Tok::Le
            | Tok::Gt
            | Tok::Ge
            | Tok::In
            | Tok::Is
            | Tok::And
            | Tok::Or
            | Tok::Not
            | Tok::If
            | Tok::Else => problem.help(format!(
                "`{text}` needs an operand after it; complete the expression or remove `{text}`"
            )),
            _ => problem,
        }
    }

    fn text(&self, span: Span) -> &str {
        self.src.get(span.range()).unwrap_or_default()
    }

    /// A token's text as a message quotes it: whole unless it is long.
    fn quoted(&self, span: Span) -> String {
        let text = self.text(span);
        match text.char_indices().nth(24) {
            Some((cut, _)) => format!("`{}…`", text.get(..cut).unwrap_or_default()),
            None => format!("`{text}`"),
        }
    }

    /// The innermost bracket still open before token `index`.
    fn open_bracket(&self, index: usize) -> Option<(&Tok<'_>, Span)> {
        let mut open = Vec::new();
        for (tok, span) in self.tokens.iter().take(index) {
            match tok {
                Tok::LParen | Tok::LBracket | Tok::LBrace => open.push((tok, *span)),
                Tok::RParen | Tok::RBracket | Tok::RBrace => {
                    open.pop();
                }
                _ => {}
            }
        }
        open.pop()
    }

    fn expected_found(&self, at: Span, wants: &[Want], found: bool) -> Option<Problem> {
        let index = self
            .tokens
            .partition_point(|(_, span)| span.start < at.start);
        let found = if found { self.tokens.get(index) } else { None };
        let prev = index.checked_sub(1).and_then(|i| self.tokens.get(i));
        if let Some((tok, _)) = found
            && tok.is_reported()
        {
            return None;
        }
        if found.is_none() && prev.is_some_and(|(tok, _)| *tok == Tok::Unterminated) {
            return None;
        }
        let at = found.map_or(at, |(_, span)| *span);
        let after = prev.map_or(String::new(), |(_, span)| {
            format!(" after {}", self.quoted(*span))
        });
        let found_text = found.map(|(_, span)| self.quoted(*span));
        let syntax =
            |message: String, label: &str| Problem::new(ProblemKind::Syntax, message, at, label);
        let wants_token = |text: &'static str| wants.contains(&Want::Token(text));

        let open = self.open_bracket(index);
        let closes_open = |open: Option<(&Tok, Span)>| {
            open.and_then(|(opener, _)| closer_of(opener))
                .is_some_and(|close| wants.contains(&Want::Token(close)))
        };
        // At the end, `f(` lacks its `)` more than an argument.
        if wants.contains(&Want::Expression) && !(found.is_none() && closes_open(open)) {
            let problem = match (&found_text, prev) {
                (None, None) => syntax("the expression is empty".into(), "expected an expression")
                    .help("write an expression, such as `result.score > 0.5`"),
                (None, Some(_)) => syntax(
                    format!("unexpected end of expression: expected an expression{after}"),
                    "the expression ends here",
                ),
                (Some(found), _) => syntax(
                    format!("expected an expression{after}, found {found}"),
                    "expected an expression before this",
                ),
            };
            return Some(self.operand_help(problem, prev, found));
        }
        if wants.contains(&Want::Field) || wants.contains(&Want::Variable) {
            let (what, label) = if wants.contains(&Want::Field) {
                ("a field name", "expected a field name")
            } else {
                ("a variable name", "expected a variable name")
            };
            return Some(match (found, &found_text) {
                (Some((_, span)), Some(found)) => {
                    let problem = syntax(format!("expected {what}{after}, found {found}"), label);
                    let word = self.text(*span);
                    if is_python_keyword(word) {
                        problem.help(format!(
                            "`{word}` is a Python keyword, so it cannot be used as a name"
                        ))
                    } else {
                        problem
                    }
                }
                _ => syntax(
                    format!("unexpected end of expression: expected {what}{after}"),
                    "the expression ends here",
                ),
            });
        }

        let found_closer = found.and_then(|(tok, _)| match tok {
            Tok::RParen | Tok::RBracket | Tok::RBrace => Some(*tok == Tok::RParen),
            _ => None,
        });
        if found_closer.is_some()
            && let Some((_, span)) = found
            && open.is_none()
        {
            let text = self.text(*span);
            let opener = match text {
                ")" => "(",
                "]" => "[",
                _ => "{",
            };
            return Some(
                syntax(
                    format!("unmatched `{text}`"),
                    &format!("no `{opener}` before this"),
                )
                .help("remove it")
                .replacement(*span, ""),
            );
        }
        if let Some((opener, opened)) = open
            && let Some(close) = closer_of(opener)
            && (found.is_none() || found_closer.is_some())
        {
            let open_text = self.text(opened);
            let problem = match &found_text {
                None => syntax(
                    format!("expected `{close}` to close the `{open_text}` opened here"),
                    &format!("expected `{close}`"),
                )
                .help(format!("add `{close}` at the end"))
                .replacement(at, close),
                Some(found) => syntax(
                    format!(
                        "expected `{close}` to close the `{open_text}` opened here, found {found}"
                    ),
                    &format!("expected `{close}`"),
                ),
            };
            return Some(problem.secondary(opened, format!("`{open_text}` opened here")));
        }
        if wants_token("else") {
            return Some(
                match &found_text {
                    None => syntax(
                        "unexpected end of expression: expected `else` and the value for when \
                         the condition is false"
                            .into(),
                        "expected `else`",
                    ),
                    Some(found) => syntax(
                        format!("expected `else` after the condition, found {found}"),
                        "expected `else`",
                    ),
                }
                .help("a conditional expression is `a if condition else b`"),
            );
        }
        if wants_token("in") {
            let problem = match &found_text {
                None => syntax(
                    format!("unexpected end of expression: expected `in`{after}"),
                    "expected `in`",
                ),
                Some(found) => syntax(
                    format!("expected `in`{after}, found {found}"),
                    "expected `in`",
                ),
            };
            return Some(if prev.is_some_and(|(tok, _)| *tok == Tok::Not) {
                problem.help(
                    "`not in` tests membership (`x not in items`); to negate a condition, put \
                     `not` before all of it",
                )
            } else {
                problem.help("a comprehension reads `x for x in items`")
            });
        }
        let found_text = found_text.unwrap_or_else(|| "the end of the expression".into());
        if let Some((opener, opened)) = open
            && let Some(close) = closer_of(opener)
        {
            let open_text = self.text(opened);
            return Some(
                syntax(
                    format!("expected `,` or `{close}`, found {found_text}"),
                    &format!("expected `,` or `{close}` before this"),
                )
                .help("separate the items with `,`, or join them with an operator")
                .secondary(opened, format!("inside this `{open_text}`")),
            );
        }
        let found_tok = found.map(|(tok, _)| tok);
        if let Some((Tok::Float(_), span)) = found
            && let Some(digits) = self.text(*span).strip_prefix('.')
        {
            return Some(
                syntax(
                    format!("expected a field name after `.`, found `{digits}`"),
                    "a field name cannot start with a digit",
                )
                .help(format!("to index a list, write `[{digits}]`")),
            );
        }
        let problem = syntax(
            format!("expected an operator, found {found_text}"),
            "expected an operator before this",
        );
        Some(match found_tok {
            Some(Tok::Colon) => problem.help(
                "`:` belongs to statements, slices and dicts, which expressions do not have; \
                 for a choice, write `a if condition else b`",
            ),
            Some(Tok::Else) => problem.help("a conditional expression is `a if condition else b`"),
            _ => problem.help(
                "two operands need an operator between them, such as `and`, `or`, `==` or `+`",
            ),
        })
    }
}
