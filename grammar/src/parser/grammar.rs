//! The grammar, as chumsky parsers over the lexer's tokens.
//!
//! One layer per Python precedence level, each a left fold, so that long operator chains
//! build their tree in a loop rather than by recursion. Every sub-expression is parsed once:
//! no alternative re-parses what another has consumed, not even where the sub-expression
//! fails, which keeps nested brackets linear (an unclosed bracket fails every rule around it;
//! a rule that then tried another reading of the same tokens would double the work per
//! bracket). A bracketed construct that fails recovers by skipping its group, whose end
//! [`Groups`] found beforehand. `State::reads` counts the tokens read, for tests to bound.
//!
//! Problems of constructs outside the subset are emitted as custom errors carrying the
//! finished [`Problem`]; chumsky's own errors are turned into problems by `errors.rs`.

use chumsky::error::RichPattern;
use chumsky::input::{Checkpoint, Cursor, InputRef, ValueInput};
use chumsky::inspector::Inspector;
use chumsky::label::LabelError;
use chumsky::prelude::*;
use chumsky::recursive::Direct;
use chumsky::util::MaybeRef;

use super::build::{
    Clauses, Items, arguments, binary, bracketed, error_node, logical, node, parenthesised, prefix,
};
use super::groups::Groups;
use super::refs;
use crate::ast::{BinaryOp, CompareOp, Comparison, Expr, ExprKind, Ident, LogicalOp, UnaryOp};
use crate::lexer::Tok;
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;

pub(super) type Error<'t, 's> = Rich<'t, Tok<'s>, SimpleSpan, Problem>;
pub(super) type Extra<'t, 's> = extra::Full<Error<'t, 's>, State, ()>;

/// What the parser carries along: where each bracket's group ends, for recovery, and how many
/// tokens it has read, a token read again after backtracking counted again. Its work is
/// proportional to that count, so that tests can bound the work without timing it.
#[derive(Debug, Default)]
pub(super) struct State {
    pub groups: Groups,
    pub reads: usize,
}

impl<'t, I: Input<'t>> Inspector<'t, I> for State {
    type Checkpoint = ();
    fn on_token(&mut self, _: &I::Token) {
        self.reads += 1;
    }
    fn on_save<'p>(&self, _: &Cursor<'t, 'p, I>) {}
    fn on_rewind<'p>(&mut self, _: &Checkpoint<'t, 'p, I, ()>) {}
}

/// The label of every parser that reads an operand, so that an error lists "an expression"
/// rather than every token that can start one.
pub(super) const EXPRESSION: &str = "an expression";
/// The label of every operator, for the same reason.
pub(super) const OPERATOR: &str = "an operator";
/// The label of a field name after `.`.
pub(super) const FIELD: &str = "a field name";
/// The label of a comprehension's variable.
pub(super) const VARIABLE: &str = "a variable name";
pub(super) fn span(s: SimpleSpan) -> Span {
    Span::new(s.start, s.end)
}
/// A problem, in the custom slot of chumsky's error.
pub(super) fn custom<'t, 's>(problem: Problem) -> Error<'t, 's> {
    let at = SimpleSpan::from(problem.span.range());
    Rich::custom(at, problem)
}
/// What follows a primary: `.name`, `.name(…)`, `[…]`, `(…)`.
#[derive(Clone)]
enum Postfix {
    Attr(Ident),
    Method(Ident, Vec<Expr>),
    Index(Expr),
    /// A slice or a several-value subscript, already reported.
    BadIndex,
    Call(Vec<Expr>),
}
pub(super) fn expression<'t, 's: 't, I>() -> impl Parser<'t, I, Expr, Extra<'t, 's>> + Clone
where
    I: ValueInput<'t, Token = Tok<'s>, Span = SimpleSpan>,
{
    // `recursive` hands each closure a weak handle to the parser it defines, so the finished
    // parser holds no reference cycle; `Recursive::declare` + `define` would leak the whole
    // parser (about 10 KB) on every parse.
    recursive(|expr: Handle<'t, 's, I>| {
        let or_test = recursive(|or_test: Handle<'t, 's, I>| {
            let ident = select! {
                Tok::Ident(name) = e => Ident { name: name.to_owned(), span: span(e.span()) },
            };
            let name = ident.labelled(VARIABLE);
            // JSON's `true` / `false` / `null` are valid field names; Python's keywords are not.
            let field = select! {
                Tok::Ident(name) = e => Ident { name: name.to_owned(), span: span(e.span()) },
                Tok::JsonBool(true) = e => Ident { name: "true".into(), span: span(e.span()) },
                Tok::JsonBool(false) = e => Ident { name: "false".into(), span: span(e.span()) },
                Tok::JsonNull = e => Ident { name: "null".into(), span: span(e.span()) },
            }
            .labelled(FIELD);

            let comp_clauses = comprehension_clauses(name, or_test.clone());

            // The first item between brackets may start a comprehension; later ones may not.
            let item = choice((
                select! { Tok::Star => "*", Tok::Pow => "**" }
                    .then(expr.clone())
                    .validate(|(star, _), e, emitter| {
                        emitter.emit(custom(
                            Problem::new(
                                ProblemKind::Unsupported,
                                format!("unpacking with `{star}` is not supported"),
                                span(e.span()),
                                "unpacking",
                            )
                            .help("write the items out, or pass the list itself"),
                        ));
                        error_node(e.span())
                    }),
                expr.clone(),
            ));
            let items = |item: Boxed<'t, 't, I, Expr, Extra<'t, 's>>| {
                item.clone()
                    .then(comp_clauses.clone().or_not())
                    .then(
                        just(Tok::Comma)
                            .ignore_then(item)
                            .repeated()
                            .collect::<Vec<_>>(),
                    )
                    .then(just(Tok::Comma).or_not())
                    .or_not()
                    .map(|found| match found {
                        Some((((first, clauses), rest), comma)) => Items {
                            first: Some(first),
                            clauses,
                            rest,
                            trailing_comma: comma.is_some(),
                        },
                        None => Items {
                            first: None,
                            clauses: None,
                            rest: Vec::new(),
                            trailing_comma: false,
                        },
                    })
            };
            let plain_items = items(item.clone().boxed());
            // `f(x=1)`: tried first, it costs one token of look-ahead when it is not there.
            // Once `x=` is read the argument is a keyword argument or nothing: were the plain
            // item tried after it, it would read the value again (as `x = …`, an assignment).
            let keyword = ident.labelled(EXPRESSION).then(just(Tok::Assign));
            let keyword_argument = keyword.clone().then(required(expr.clone())).validate(
                |((name, _), value), e, emitter| {
                    let fix = Span::new(name.span.start as usize, value.span.start as usize);
                    emitter.emit(custom(
                        Problem::new(
                            ProblemKind::Unsupported,
                            "keyword arguments are not supported",
                            span(e.span()),
                            "keyword argument",
                        )
                        .help("pass the argument by position")
                        .replacement(fix, ""),
                    ));
                    error_node(e.span())
                },
            );
            let argument_items = items(
                keyword_argument
                    .or(keyword.not().ignore_then(item.clone()))
                    .boxed(),
            );

            let paren = plain_items
                .clone()
                .delimited_by(just(Tok::LParen), just(Tok::RParen))
                .validate(|items, e, emitter| parenthesised(items, e.span(), emitter))
                .recover_with(via_parser(skip_group(Tok::LParen, error_node)));
            let list = plain_items
                .clone()
                .delimited_by(just(Tok::LBracket), just(Tok::RBracket))
                .validate(|items, e, emitter| bracketed(items, e.span(), emitter))
                .recover_with(via_parser(skip_group(Tok::LBracket, error_node)));
            let braces = nested_delimiters(
                Tok::LBrace,
                Tok::RBrace,
                [(Tok::LParen, Tok::RParen), (Tok::LBracket, Tok::RBracket)],
                |s| s,
            )
            .validate(|s: SimpleSpan, _, emitter| {
                emitter.emit(custom(
                    Problem::new(
                        ProblemKind::Unsupported,
                        "dict and set literals are not supported",
                        span(s),
                        "dict or set",
                    )
                    .help("to test membership, use a list: `x in ['a', 'b']`"),
                ));
                error_node(s)
            });

            let literal = select! {
                Tok::Int(value) => ExprKind::Int(value),
                Tok::Float(value) => ExprKind::Float(value),
                Tok::Bool(value) => ExprKind::Bool(value),
                Tok::JsonBool(value) => ExprKind::Bool(value),
                Tok::None => ExprKind::None,
                Tok::JsonNull => ExprKind::None,
                // Already reported by the lexer.
                Tok::Error => ExprKind::Error,
                Tok::Unterminated => ExprKind::Error,
            }
            .map_with(|kind, e| node(kind, e.span()));
            let strings = select! { Tok::Str(text) => text }
                .repeated()
                .at_least(1)
                .collect::<Vec<String>>()
                .map_with(|parts, e| node(ExprKind::Str(parts.concat()), e.span()));

            let reference = just(Tok::Dollar)
                .to_span()
                .then(field.or_not())
                .then(
                    just(Tok::Dot)
                        .ignore_then(field)
                        // A name followed by `(` is a method call on the reference, not a field.
                        .then_ignore(just(Tok::LParen).not())
                        .repeated()
                        .collect::<Vec<_>>(),
                )
                .validate(|((dollar, glued), fields), e, emitter| {
                    refs::reference(span(dollar), glued, fields, span(e.span()), |problem| {
                        emitter.emit(custom(problem))
                    })
                });

            // Reported by the lexer: parse enough to skip them as one operand. The body of a
            // lambda or a `yield` is a whole expression, which has tried every postfix and
            // operator that could follow it; where one follows all the same, the body failed
            // there. The rules around the operand would try the same tokens again, twice per
            // level of nesting, so the operand takes the rest of its item instead, reporting
            // the failure as a recovery does.
            let closers = [Tok::RParen, Tok::RBracket, Tok::RBrace, Tok::Comma];
            let body = expr
                .clone()
                .then_ignore(any().filter(continues_operand).not())
                .ignored();
            let lambda = just(Tok::Lambda)
                .then(
                    any()
                        .and_is(none_of([
                            Tok::Colon,
                            Tok::RParen,
                            Tok::RBracket,
                            Tok::RBrace,
                        ]))
                        .repeated(),
                )
                .then(
                    choice((
                        just(Tok::Colon).then(body.clone()).ignored(),
                        just(Tok::Colon).not(),
                    ))
                    .recover_with(via_parser(rest_of_item())),
                )
                .map_with(|_, e| error_node(e.span()));
            let yield_ = just(Tok::Yield)
                .then(
                    choice((body, any().filter(Tok::starts_operand).ignored().not()))
                        .recover_with(via_parser(rest_of_item())),
                )
                .map_with(|_, e| error_node(e.span()));
            let statement = just(Tok::Statement)
                .then(any().and_is(none_of(closers)).repeated())
                .map_with(|_, e| error_node(e.span()));

            let atom = choice((
                literal,
                strings,
                ident.map(|ident| {
                    let at = ident.span;
                    Expr::new(ExprKind::Name(ident), at)
                }),
                reference,
                paren,
                list,
                braces,
                lambda,
                yield_,
                statement,
            ))
            .labelled(EXPRESSION);

            let call_args = argument_items
                .delimited_by(just(Tok::LParen), just(Tok::RParen))
                .map(arguments)
                .recover_with(via_parser(skip_group(Tok::LParen, |s| vec![error_node(s)])));

            let subscript = subscript(expr.clone());
            // `.name(` is a method call, or nothing: were the arguments optional (`or_not`),
            // their failure would leave `.name` as a field and the `(` to the plain call
            // below, which would read the same arguments again: twice per unclosed `(`,
            // exponential in the number of them.
            let method_args = call_args
                .clone()
                .map(Some)
                .or(just(Tok::LParen).not().to(None));
            let postfix_op = choice((
                just(Tok::Dot).ignore_then(field).then(method_args).map(
                    |(name, args)| match args {
                        Some(args) => Postfix::Method(name, args),
                        None => Postfix::Attr(name),
                    },
                ),
                subscript,
                call_args.map(Postfix::Call),
            ))
            .labelled(OPERATOR);
            let postfix = atom.foldl_with(postfix_op.repeated(), |base, op, e| {
                let at = e.span();
                match op {
                    Postfix::Attr(name) => node(
                        ExprKind::Attr {
                            base: Box::new(base),
                            name,
                        },
                        at,
                    ),
                    Postfix::Method(name, args) => node(
                        ExprKind::Method {
                            receiver: Box::new(base),
                            name,
                            args,
                        },
                        at,
                    ),
                    Postfix::Index(index) => node(
                        ExprKind::Index {
                            base: Box::new(base),
                            index: Box::new(index),
                        },
                        at,
                    ),
                    Postfix::BadIndex => error_node(at),
                    Postfix::Call(args) => match base.kind {
                        ExprKind::Name(func) => node(ExprKind::Call { func, args }, at),
                        ExprKind::Error => error_node(at),
                        _ => {
                            e.emit(custom(
                        Problem::new(
                            ProblemKind::Unsupported,
                            "only functions and methods can be called",
                            base.span,
                            "not a function name",
                        )
                        .help(
                            "call a built-in function by its name, as in `len(x)`, or a method, \
                             as in `x.lower()`",
                        ),
                    ));
                            error_node(at)
                        }
                    },
                }
            });

            let unary = recursive(|unary: Handle<'t, 's, I>| {
                let power = postfix
                    .then(
                        just(Tok::Pow)
                            .to_span()
                            .then(required(unary.clone()))
                            .or_not(),
                    )
                    .validate(|(base, power), e, emitter| match power {
                        None => base,
                        Some((op, _)) => {
                            emitter.emit(custom(
                                Problem::new(
                                    ProblemKind::Unsupported,
                                    "the power operator `**` is not supported",
                                    span(op),
                                    "power",
                                )
                                .help("multiply instead, as in `x * x`"),
                            ));
                            error_node(e.span())
                        }
                    });

                let prefix_op = select! {
                    Tok::Minus => Some(UnaryOp::Neg),
                    Tok::Plus => Some(UnaryOp::Pos),
                    // `~`, reported by the lexer.
                    Tok::Tilde => None,
                };
                choice((
                    prefix_op
                        .then(required(unary.clone()))
                        .map_with(|(op, operand), e| prefix(op, operand, e.span())),
                    power,
                ))
                .labelled(EXPRESSION)
            });

            let mul_op = select! {
                Tok::Star => Some(BinaryOp::Mul),
                Tok::Slash => Some(BinaryOp::Div),
                Tok::DoubleSlash => Some(BinaryOp::FloorDiv),
                Tok::Percent => Some(BinaryOp::Mod),
                // `@`, reported by the lexer.
                Tok::At => None,
            }
            .labelled(OPERATOR);
            let term = unary.clone().foldl_with(
                mul_op.then(required(unary.clone())).repeated(),
                |lhs, (op, rhs), e| binary(op, lhs, rhs, e.span()),
            );
            let add_op = select! {
                Tok::Plus => Some(BinaryOp::Add),
                Tok::Minus => Some(BinaryOp::Sub),
            }
            .labelled(OPERATOR);
            let arith = term.clone().foldl_with(
                add_op.then(required(term.clone())).repeated(),
                |lhs, (op, rhs), e| binary(op, lhs, rhs, e.span()),
            );
            // Bitwise operators, reported by the lexer; they bind tighter than comparisons.
            let bitwise = arith.clone().foldl_with(
                select! { Tok::BitOp(_) => () }
                    .labelled(OPERATOR)
                    .then(required(arith.clone()))
                    .repeated(),
                |_, _, e| error_node(e.span()),
            );

            let compare_op = choice((
                select! {
                    Tok::EqEq => CompareOp::Eq,
                    Tok::NotEq => CompareOp::Ne,
                    Tok::Lt => CompareOp::Lt,
                    Tok::Le => CompareOp::Le,
                    Tok::Gt => CompareOp::Gt,
                    Tok::Ge => CompareOp::Ge,
                    Tok::In => CompareOp::In,
                    // `<>`, reported by the lexer.
                    Tok::LtGt => CompareOp::Ne,
                },
                just(Tok::Not).then(just(Tok::In)).to(CompareOp::NotIn),
                just(Tok::Is)
                    .ignore_then(just(Tok::Not).or_not())
                    .map(|not| match not {
                        Some(_) => CompareOp::IsNot,
                        None => CompareOp::Is,
                    }),
                just(Tok::Assign).validate(|_, e, emitter| {
                    let at = span(e.span());
                    emitter.emit(custom(
                        Problem::new(
                            ProblemKind::Unsupported,
                            "assignment (`=`) is not supported in an expression",
                            at,
                            "assignment",
                        )
                        .help("use `==` to compare")
                        .replacement(at, "=="),
                    ));
                    CompareOp::Eq
                }),
            ))
            .map_with(|op, e| (op, span(e.span())))
            .labelled(OPERATOR);
            let comparison = bitwise
                .clone()
                .then(
                    compare_op
                        .then(required(bitwise))
                        .map(|((op, op_span), rhs)| Comparison { op, op_span, rhs })
                        .repeated()
                        .collect::<Vec<_>>(),
                )
                .map_with(|(first, rest), e| {
                    if rest.is_empty() {
                        first
                    } else {
                        node(
                            ExprKind::Compare {
                                first: Box::new(first),
                                rest,
                            },
                            e.span(),
                        )
                    }
                });

            let not_op = just(Tok::Not).or(just(Tok::Bang));
            let not_test = recursive(|not_test: Handle<'t, 's, I>| {
                choice((
                    not_op
                        .then(required(not_test.clone()))
                        .map_with(|(_, operand), e| prefix(Some(UnaryOp::Not), operand, e.span())),
                    comparison,
                ))
                .labelled(EXPRESSION)
            });
            let and_op = just(Tok::And).or(just(Tok::AndAnd)).labelled(OPERATOR);
            let and_test = not_test.clone().foldl_with(
                and_op.then(required(not_test.clone())).repeated(),
                |lhs, (_, rhs), e| logical(LogicalOp::And, lhs, rhs, e.span()),
            );
            let or_op = just(Tok::Or).or(just(Tok::OrOr)).labelled(OPERATOR);
            and_test.clone().foldl_with(
                or_op.then(required(and_test)).repeated(),
                |lhs, (_, rhs), e| logical(LogicalOp::Or, lhs, rhs, e.span()),
            )
        });

        // The value after `else` is a conditional, not an expression with `:=`: that one would
        // try a `:=` that the outer expression tries again, at every level of nesting.
        let conditional = recursive(|conditional: Handle<'t, 's, I>| {
            or_test
                .clone()
                .then(
                    just(Tok::If)
                        .labelled(OPERATOR)
                        .ignore_then(required(or_test.clone()))
                        .then_ignore(just(Tok::Else))
                        .then(required(conditional))
                        .or_not(),
                )
                .map_with(|(then, rest), e| match rest {
                    None => then,
                    Some((condition, otherwise)) => node(
                        ExprKind::Conditional {
                            then: Box::new(then),
                            condition: Box::new(condition),
                            otherwise: Box::new(otherwise),
                        },
                        e.span(),
                    ),
                })
        });
        // `:=`, reported by the lexer.
        conditional
            .then(just(Tok::Walrus).then(required(expr.clone())).or_not())
            .map_with(|(value, walrus), e| match walrus {
                None => value,
                Some(_) => error_node(e.span()),
            })
            .labelled(EXPRESSION)
    })
}

/// The recovery of a bracketed construct: its whole group, from the opening bracket to its
/// closing one, skipped unread (an [`ExprKind::Error`] for the caller to report), as chumsky's
/// `nested_delimiters` skips it, but in one step per token, and failing at once where the
/// bracket never closes. Where [`Groups`] says the group ends comes from one pass over the
/// tokens; a search at every failing bracket would scan the rest of the text again for each
/// bracket open around the failure.
fn skip_group<'t, 's: 't, I, O>(
    opener: Tok<'s>,
    fallback: impl Fn(SimpleSpan) -> O + Clone,
) -> impl Parser<'t, I, O, Extra<'t, 's>> + Clone
where
    I: ValueInput<'t, Token = Tok<'s>, Span = SimpleSpan>,
{
    chumsky::primitive::custom(move |inp: &mut InputRef<'t, '_, I, Extra<'t, 's>>| {
        let before = inp.cursor();
        let found = inp.next();
        let at: SimpleSpan = inp.span_since(&before);
        let end = match found {
            Some(tok) if tok == opener => inp.state().groups.end(at.start as u32),
            _ => None,
        };
        let Some(end) = end else {
            // `via_parser` drops this error for the one it was recovering from.
            let expected = [RichPattern::Token(MaybeRef::Val(opener.clone()))];
            return Err(<Error as LabelError<'t, I, _>>::expected_found(
                expected, None, at,
            ));
        };
        while inp.span_since(&before).end < end as usize && inp.next().is_some() {}
        Ok(fallback(inp.span_since(&before)))
    })
}

/// The rest of the item the parser is in: every token up to a `,` or a closing bracket
/// outside brackets, or to the end; a bracket's group is skipped whole where it closes.
fn rest_of_item<'t, 's: 't, I>() -> impl Parser<'t, I, (), Extra<'t, 's>> + Clone
where
    I: ValueInput<'t, Token = Tok<'s>, Span = SimpleSpan>,
{
    chumsky::primitive::custom(|inp: &mut InputRef<'t, '_, I, Extra<'t, 's>>| {
        loop {
            let before = inp.cursor();
            let opens = match inp.peek() {
                None | Some(Tok::RParen | Tok::RBracket | Tok::RBrace | Tok::Comma) => break,
                Some(tok) => matches!(tok, Tok::LParen | Tok::LBracket | Tok::LBrace),
            };
            inp.skip();
            let at: SimpleSpan = inp.span_since(&before);
            if let Some(end) = opens
                .then(|| inp.state().groups.end(at.start as u32))
                .flatten()
            {
                while inp.span_since(&before).end < end as usize && inp.next().is_some() {}
            }
        }
        Ok(())
    })
}

/// Whether a token can follow an operand within the expression that holds it: a postfix, a
/// binary operator, `if` of a conditional, `:=`.
fn continues_operand(tok: &Tok) -> bool {
    matches!(
        tok,
        Tok::Dot
            | Tok::LParen
            | Tok::LBracket
            | Tok::Pow
            | Tok::Star
            | Tok::Slash
            | Tok::DoubleSlash
            | Tok::Percent
            | Tok::At
            | Tok::Plus
            | Tok::Minus
            | Tok::BitOp(_)
            | Tok::EqEq
            | Tok::NotEq
            | Tok::Lt
            | Tok::Le
            | Tok::Gt
            | Tok::Ge
            | Tok::LtGt
            | Tok::In
            | Tok::Not
            | Tok::Is
            | Tok::Assign
            | Tok::And
            | Tok::AndAnd
            | Tok::Or
            | Tok::OrOr
            | Tok::If
            | Tok::Walrus
    )
}

/// The weak handle a `recursive` closure receives.
type Handle<'t, 's, I> = Recursive<Direct<'t, 't, I, Expr, Extra<'t, 's>>>;

/// A statement keyword at the start (`if x: …`, `for x in y: …`), reported as one problem
/// for the whole text; otherwise the expression.
pub(super) fn top<'t, 's: 't, I>() -> impl Parser<'t, I, Expr, Extra<'t, 's>>
where
    I: ValueInput<'t, Token = Tok<'s>, Span = SimpleSpan>,
{
    let statement = select! { Tok::If => "if", Tok::For => "for" }
        .map_with(|keyword, e| (keyword, e.span()))
        .then_ignore(any().repeated())
        .validate(|(keyword, at), e, emitter| {
            let problem = Problem::new(
                ProblemKind::Unsupported,
                format!("`{keyword}` statements are not supported"),
                span(at),
                "statement",
            );
            let problem = if keyword == "if" {
                problem.help(
                    "write the condition alone (`result.score > 0.5`), or a conditional \
                     expression (`a if condition else b`)",
                )
            } else {
                problem.help(
                    "to test every item, use a generator in a call: \
                     `all(t.passed for t in result.tests)`",
                )
            };
            emitter.emit(custom(problem));
            error_node(e.span())
        });
    choice((statement, expression())).then_ignore(
        end()
            .labelled("end of expression")
            .recover_with(via_parser(any().repeated().at_least(1))),
    )
}

/// An operand that must be there: where it is missing, an empty [`ExprKind::Error`] stands
/// in for it and parsing goes on.
fn required<'t, 's: 't, I, P>(operand: P) -> impl Parser<'t, I, Expr, Extra<'t, 's>> + Clone
where
    I: ValueInput<'t, Token = Tok<'s>, Span = SimpleSpan>,
    P: Parser<'t, I, Expr, Extra<'t, 's>> + Clone,
{
    operand
        .labelled(EXPRESSION)
        .recover_with(via_parser(missing_operand()))
}

/// An empty operand, where one is missing before a token that cannot start one (an operator,
/// a closing bracket, the end); before a token that can, the error is left to the enclosing
/// brackets, whose recovery skips the whole group.
fn missing_operand<'t, 's: 't, I>() -> impl Parser<'t, I, Expr, Extra<'t, 's>> + Clone
where
    I: ValueInput<'t, Token = Tok<'s>, Span = SimpleSpan>,
{
    any()
        .filter(|tok: &Tok| !tok.starts_operand())
        .ignored()
        .or(end())
        .rewind()
        .map_with(|_, e| {
            let at: SimpleSpan = e.span();
            error_node(SimpleSpan::from(at.start..at.start))
        })
}

fn comprehension_clauses<'t, 's: 't, I, N, O>(
    name: N,
    or_test: O,
) -> impl Parser<'t, I, Clauses, Extra<'t, 's>> + Clone
where
    I: ValueInput<'t, Token = Tok<'s>, Span = SimpleSpan>,
    N: Parser<'t, I, Ident, Extra<'t, 's>> + Clone,
    O: Parser<'t, I, Expr, Extra<'t, 's>> + Clone,
{
    let required = required(or_test);
    // A target of several names is parsed whole, to report it as one.
    let target = name
        .clone()
        .then(
            just(Tok::Comma)
                .ignore_then(name.clone())
                .repeated()
                .collect::<Vec<_>>(),
        )
        .map_with(|(first, more), e| (first, more.is_empty(), e.span()))
        .or(name
            .separated_by(just(Tok::Comma))
            .allow_trailing()
            .delimited_by(just(Tok::LParen), just(Tok::RParen))
            .to_span()
            .map(|at| {
                let dummy = Ident {
                    name: String::new(),
                    span: span(at),
                };
                (dummy, false, at)
            }))
        .validate(|(var, single, at), _, emitter| {
            if !single {
                emitter.emit(custom(
                    Problem::new(
                        ProblemKind::Unsupported,
                        "a comprehension can bind only one variable",
                        span(at),
                        "several variables",
                    )
                    .help("iterate over the items and index each one, as in `p[0] for p in pairs`"),
                ));
            }
            var
        });
    let clause = just(Tok::For)
        .ignore_then(target)
        .then_ignore(just(Tok::In))
        .then(required.clone())
        .then(
            just(Tok::If)
                .ignore_then(required)
                .repeated()
                .collect::<Vec<_>>(),
        );
    clause
        .clone()
        .then(clause.to_span().repeated().collect::<Vec<_>>())
        .validate(|(((var, iter), conditions), extra), _, emitter| {
            for at in extra {
                emitter.emit(custom(
                    Problem::new(
                        ProblemKind::Unsupported,
                        "only one `for` clause is allowed in a comprehension",
                        span(at),
                        "second `for`",
                    )
                    .help("nest a generator in a call instead, or flatten the list beforehand"),
                ));
            }
            Clauses {
                var,
                iter,
                conditions,
            }
        })
}

/// `[i]`, with slices and several-value subscripts reported.
fn subscript<'t, 's: 't, I, E>(expr: E) -> impl Parser<'t, I, Postfix, Extra<'t, 's>> + Clone
where
    I: ValueInput<'t, Token = Tok<'s>, Span = SimpleSpan>,
    E: Parser<'t, I, Expr, Extra<'t, 's>> + Clone,
{
    let slice_part = just(Tok::Colon).ignore_then(expr.clone().or_not());
    let slice = slice_part.clone().repeated().at_least(1);
    let body = choice((
        expr.clone()
            .then(
                slice
                    .clone()
                    .to(true)
                    .or(just(Tok::Comma)
                        .then(expr.clone().or_not())
                        .repeated()
                        .at_least(1)
                        .to(false))
                    .or_not(),
            )
            .map(|(index, tail)| (Some(index), tail)),
        slice.to(Some(true)).map(|tail| (None, tail)),
    ));
    body.delimited_by(just(Tok::LBracket), just(Tok::RBracket))
        .validate(|(index, tail), e, emitter| match (index, tail) {
            (Some(index), None) => Postfix::Index(index),
            (_, Some(is_slice)) => {
                let problem = if is_slice {
                    Problem::new(
                        ProblemKind::Unsupported,
                        "slices are not supported",
                        span(e.span()),
                        "slice",
                    )
                    .help("index one element at a time, as in `x[0]`")
                } else {
                    Problem::new(
                        ProblemKind::Unsupported,
                        "a subscript takes one index",
                        span(e.span()),
                        "several indexes",
                    )
                    .help("index one level at a time, as in `x[i][j]`")
                };
                emitter.emit(custom(problem));
                Postfix::BadIndex
            }
            (None, None) => Postfix::BadIndex,
        })
        .recover_with(via_parser(skip_group(Tok::LBracket, |_| Postfix::BadIndex)))
}
