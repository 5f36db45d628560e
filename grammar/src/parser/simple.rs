//! The shortcut past the grammar: a recursive-descent reading of the valid expressions specs
//! mostly write (`result.x > 0.7`, `$.steps.a.output.b == 'low'`, `len(result.items) > 0 and
//! not result.flagged`, `all(t.passed for t in result.tests)`), which builds exactly the tree
//! the chumsky grammar builds, spans included, without building that grammar.
//!
//! It follows the grammar's rules in the grammar's order and takes the first alternative the
//! grammar would take; wherever the grammar would report a problem, recover, or has a construct
//! this does not read (unpacking, keyword arguments, slices, `**`, dicts, the operators and
//! keywords the lexer reports), it gives up and the grammar parses the text from the start.
//! So it never decides what a problem is, and whatever it returns, the grammar returns too
//! (`shortcut_reads_as_the_grammar_reads` checks that on random token soups).
//!
//! Its recursion is bounded by [`MAX_RECURSION`]: deeper text goes to the grammar.

use crate::ast::{
    BinaryOp, CompareOp, Comparison, Expr, ExprKind, Generator, Ident, LogicalOp, UnaryOp,
};
use crate::lexer::Tok;
use crate::span::Span;

use super::refs;

/// How deeply the shortcut nests (brackets, prefix operators, conditionals) before leaving
/// the text to the grammar.
const MAX_RECURSION: usize = 48;

/// The tree of `tokens` if they are a valid expression the shortcut reads, else `None`.
/// `tokens` must come from a lexing that reported no problem.
pub(super) fn parse(tokens: &[(Tok, Span)]) -> Option<Expr> {
    // A statement keyword at the start is the grammar's to report.
    if matches!(tokens.first(), None | Some((Tok::If | Tok::For, _))) {
        return None;
    }
    let mut reader = Reader {
        tokens,
        pos: 0,
        depth: 0,
    };
    let expr = reader.expression()?;
    (reader.pos == tokens.len()).then_some(expr)
}

struct Reader<'a, 's> {
    tokens: &'a [(Tok<'s>, Span)],
    pos: usize,
    depth: usize,
}

/// What a comprehension's clauses hold before they meet their element.
struct Clauses {
    var: Ident,
    iter: Expr,
    conditions: Vec<Expr>,
}

/// The items between brackets, as the grammar's `items` collects them.
struct Items {
    first: Option<Expr>,
    clauses: Option<Clauses>,
    rest: Vec<Expr>,
    trailing_comma: bool,
}

impl<'s> Reader<'_, 's> {
    fn peek(&self) -> Option<&Tok<'s>> {
        self.peek_at(0)
    }

    fn peek_at(&self, ahead: usize) -> Option<&Tok<'s>> {
        self.tokens.get(self.pos + ahead).map(|(tok, _)| tok)
    }

    fn at(&self, tok: &Tok) -> bool {
        self.peek() == Some(tok)
    }

    /// Takes the next token if it is `tok`.
    fn eat(&mut self, tok: &Tok) -> bool {
        let found = self.at(tok);
        if found {
            self.pos += 1;
        }
        found
    }

    fn expect(&mut self, tok: &Tok) -> Option<()> {
        self.eat(tok).then_some(())
    }

    /// Where the next token starts (a rule that begins here starts there).
    fn start(&self) -> u32 {
        self.tokens.get(self.pos).map_or(0, |(_, span)| span.start)
    }

    /// The span from `start` to the end of the last token taken, as chumsky gives a rule that
    /// took tokens.
    fn since(&self, start: u32) -> Span {
        let end = self
            .pos
            .checked_sub(1)
            .and_then(|last| self.tokens.get(last))
            .map_or(start, |(_, span)| span.end);
        Span { start, end }
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_RECURSION).then_some(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// The grammar's `expression`: a conditional (`then if condition else otherwise`).
    fn expression(&mut self) -> Option<Expr> {
        self.enter()?;
        let start = self.start();
        let then = self.or_test()?;
        let expr = if self.eat(&Tok::If) {
            let condition = self.or_test()?;
            self.expect(&Tok::Else)?;
            let otherwise = self.expression()?;
            Expr::new(
                ExprKind::Conditional {
                    then: Box::new(then),
                    condition: Box::new(condition),
                    otherwise: Box::new(otherwise),
                },
                self.since(start),
            )
        } else {
            then
        };
        self.leave();
        Some(expr)
    }

    fn or_test(&mut self) -> Option<Expr> {
        let start = self.start();
        let mut lhs = self.and_test()?;
        while self.eat(&Tok::Or) {
            let rhs = self.and_test()?;
            lhs = logical(LogicalOp::Or, lhs, rhs, self.since(start));
        }
        Some(lhs)
    }

    fn and_test(&mut self) -> Option<Expr> {
        let start = self.start();
        let mut lhs = self.not_test()?;
        while self.eat(&Tok::And) {
            let rhs = self.not_test()?;
            lhs = logical(LogicalOp::And, lhs, rhs, self.since(start));
        }
        Some(lhs)
    }

    fn not_test(&mut self) -> Option<Expr> {
        let start = self.start();
        if self.eat(&Tok::Not) {
            self.enter()?;
            let operand = self.not_test()?;
            self.leave();
            return Some(unary(UnaryOp::Not, operand, self.since(start)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Option<Expr> {
        let start = self.start();
        let first = self.arith()?;
        let mut rest = Vec::new();
        while let Some(op) = self.compare_op() {
            let rhs = self.arith()?;
            rest.push(Comparison {
                op: op.0,
                op_span: op.1,
                rhs,
            });
        }
        if rest.is_empty() {
            return Some(first);
        }
        Some(Expr::new(
            ExprKind::Compare {
                first: Box::new(first),
                rest,
            },
            self.since(start),
        ))
    }

    /// A comparison operator, taken; `None` (nothing taken) where none stands.
    fn compare_op(&mut self) -> Option<(CompareOp, Span)> {
        let start = self.start();
        let op = match self.peek()? {
            Tok::EqEq => CompareOp::Eq,
            Tok::NotEq => CompareOp::Ne,
            Tok::Lt => CompareOp::Lt,
            Tok::Le => CompareOp::Le,
            Tok::Gt => CompareOp::Gt,
            Tok::Ge => CompareOp::Ge,
            Tok::In => CompareOp::In,
            Tok::Not if self.peek_at(1) == Some(&Tok::In) => {
                self.pos += 1;
                CompareOp::NotIn
            }
            Tok::Is if self.peek_at(1) == Some(&Tok::Not) => {
                self.pos += 1;
                CompareOp::IsNot
            }
            Tok::Is => CompareOp::Is,
            _ => return None,
        };
        self.pos += 1;
        Some((op, self.since(start)))
    }

    fn arith(&mut self) -> Option<Expr> {
        let start = self.start();
        let mut lhs = self.term()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Plus) => BinaryOp::Add,
                Some(Tok::Minus) => BinaryOp::Sub,
                _ => return Some(lhs),
            };
            self.pos += 1;
            let rhs = self.term()?;
            lhs = binary(op, lhs, rhs, self.since(start));
        }
    }

    fn term(&mut self) -> Option<Expr> {
        let start = self.start();
        let mut lhs = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Star) => BinaryOp::Mul,
                Some(Tok::Slash) => BinaryOp::Div,
                Some(Tok::DoubleSlash) => BinaryOp::FloorDiv,
                Some(Tok::Percent) => BinaryOp::Mod,
                _ => return Some(lhs),
            };
            self.pos += 1;
            let rhs = self.unary()?;
            lhs = binary(op, lhs, rhs, self.since(start));
        }
    }

    fn unary(&mut self) -> Option<Expr> {
        let start = self.start();
        let op = match self.peek() {
            Some(Tok::Minus) => UnaryOp::Neg,
            Some(Tok::Plus) => UnaryOp::Pos,
            _ => {
                let expr = self.postfix()?;
                // `**` is reported by the grammar.
                return (!self.at(&Tok::Pow)).then_some(expr);
            }
        };
        self.pos += 1;
        self.enter()?;
        let operand = self.unary()?;
        self.leave();
        Some(unary(op, operand, self.since(start)))
    }

    fn postfix(&mut self) -> Option<Expr> {
        let start = self.start();
        let mut base = self.atom()?;
        loop {
            base = match self.peek() {
                Some(Tok::Dot) => {
                    self.pos += 1;
                    let name = self.field()?;
                    if self.at(&Tok::LParen) {
                        let args = self.call_args()?;
                        Expr::new(
                            ExprKind::Method {
                                receiver: Box::new(base),
                                name,
                                args,
                            },
                            self.since(start),
                        )
                    } else {
                        Expr::new(
                            ExprKind::Attr {
                                base: Box::new(base),
                                name,
                            },
                            self.since(start),
                        )
                    }
                }
                Some(Tok::LBracket) => {
                    self.pos += 1;
                    self.enter()?;
                    let index = self.expression()?;
                    self.leave();
                    self.expect(&Tok::RBracket)?;
                    Expr::new(
                        ExprKind::Index {
                            base: Box::new(base),
                            index: Box::new(index),
                        },
                        self.since(start),
                    )
                }
                Some(Tok::LParen) => {
                    // Only a name can be called; anything else is the grammar's to report.
                    let ExprKind::Name(func) = base.kind else {
                        return None;
                    };
                    let args = self.call_args()?;
                    Expr::new(ExprKind::Call { func, args }, self.since(start))
                }
                _ => return Some(base),
            };
        }
    }

    fn atom(&mut self) -> Option<Expr> {
        let start = self.start();
        let (tok, span) = self.tokens.get(self.pos)?;
        let kind = match tok {
            Tok::Int(value) => ExprKind::Int(*value),
            Tok::Float(value) => ExprKind::Float(*value),
            Tok::Bool(value) | Tok::JsonBool(value) => ExprKind::Bool(*value),
            Tok::None | Tok::JsonNull => ExprKind::None,
            Tok::Ident(name) => ExprKind::Name(Ident {
                name: (*name).to_owned(),
                span: *span,
            }),
            Tok::Str(first) => {
                let mut text = first.clone();
                self.pos += 1;
                while let Some(Tok::Str(more)) = self.peek() {
                    text.push_str(more);
                    self.pos += 1;
                }
                return Some(Expr::new(ExprKind::Str(text), self.since(start)));
            }
            Tok::Dollar => return self.reference(),
            Tok::LParen => {
                self.pos += 1;
                self.enter()?;
                let items = self.items(&Tok::RParen)?;
                self.leave();
                return parenthesised(items, self.since(start));
            }
            Tok::LBracket => {
                self.pos += 1;
                self.enter()?;
                let items = self.items(&Tok::RBracket)?;
                self.leave();
                return bracketed(items, self.since(start));
            }
            _ => return None,
        };
        self.pos += 1;
        Some(Expr::new(kind, *span))
    }

    /// A field name after `.`: a name, or JSON's `true` / `false` / `null`.
    fn field(&mut self) -> Option<Ident> {
        let (tok, span) = self.tokens.get(self.pos)?;
        let name = match tok {
            Tok::Ident(name) => (*name).to_owned(),
            Tok::JsonBool(true) => "true".to_owned(),
            Tok::JsonBool(false) => "false".to_owned(),
            Tok::JsonNull => "null".to_owned(),
            _ => return None,
        };
        self.pos += 1;
        Some(Ident { name, span: *span })
    }

    /// `$.input…` or `$.steps.<id>.output…`, checked by the grammar's own `refs::reference`.
    fn reference(&mut self) -> Option<Expr> {
        let start = self.start();
        let dollar = self.tokens.get(self.pos)?.1;
        self.pos += 1;
        // A name glued to `$` (`$input`) is the grammar's to report.
        if matches!(
            self.peek(),
            Some(Tok::Ident(_) | Tok::JsonBool(_) | Tok::JsonNull)
        ) {
            return None;
        }
        let mut fields = Vec::new();
        // `.name`, except one followed by `(`: a method call on the reference.
        while self.at(&Tok::Dot)
            && matches!(
                self.peek_at(1),
                Some(Tok::Ident(_) | Tok::JsonBool(_) | Tok::JsonNull)
            )
            && self.peek_at(2) != Some(&Tok::LParen)
        {
            self.pos += 1;
            fields.push(self.field()?);
        }
        let mut reported = false;
        let expr = refs::reference(dollar, None, fields, self.since(start), |_| reported = true);
        (!reported).then_some(expr)
    }

    /// The items up to `close`, which is taken: the grammar's `items` without its unpacking
    /// and keyword arguments, which it reports.
    fn items(&mut self, close: &Tok) -> Option<Items> {
        let mut items = Items {
            first: None,
            clauses: None,
            rest: Vec::new(),
            trailing_comma: false,
        };
        if self.eat(close) {
            return Some(items);
        }
        items.first = Some(self.item()?);
        if self.at(&Tok::For) {
            items.clauses = Some(self.clauses()?);
        }
        while self.eat(&Tok::Comma) {
            if self.eat(close) {
                items.trailing_comma = true;
                return Some(items);
            }
            items.rest.push(self.item()?);
        }
        self.expect(close)?;
        Some(items)
    }

    fn item(&mut self) -> Option<Expr> {
        // `*x`, `**x` and `name=value` are reported by the grammar.
        if matches!(self.peek(), Some(Tok::Star | Tok::Pow))
            || (matches!(self.peek(), Some(Tok::Ident(_))) && self.peek_at(1) == Some(&Tok::Assign))
        {
            return None;
        }
        self.expression()
    }

    /// `for var in iter [if condition]…`: one clause, over one variable.
    fn clauses(&mut self) -> Option<Clauses> {
        self.expect(&Tok::For)?;
        let var = match self.tokens.get(self.pos)? {
            (Tok::Ident(name), span) => Ident {
                name: (*name).to_owned(),
                span: *span,
            },
            _ => return None,
        };
        self.pos += 1;
        self.expect(&Tok::In)?;
        let iter = self.or_test()?;
        let mut conditions = Vec::new();
        while self.eat(&Tok::If) {
            conditions.push(self.or_test()?);
        }
        // A second `for` is reported by the grammar.
        if self.at(&Tok::For) {
            return None;
        }
        Some(Clauses {
            var,
            iter,
            conditions,
        })
    }

    /// `(…)` after a callee: the arguments, a generator first as the grammar's `arguments`
    /// builds it.
    fn call_args(&mut self) -> Option<Vec<Expr>> {
        self.expect(&Tok::LParen)?;
        self.enter()?;
        let Items {
            first,
            clauses,
            rest,
            trailing_comma: _,
        } = self.items(&Tok::RParen)?;
        self.leave();
        let Some(first) = first else {
            return Some(Vec::new());
        };
        let first = match clauses {
            Some(clauses) => {
                let start = first.span.start;
                let end = clauses.conditions.last().unwrap_or(&clauses.iter).span.end;
                comprehension(first, clauses, Span { start, end }, ExprKind::Generator)
            }
            None => first,
        };
        let mut all = vec![first];
        all.extend(rest);
        Some(all)
    }
}

/// `(…)`, as the grammar's `parenthesised` builds it; `None` where it reports a problem.
fn parenthesised(items: Items, at: Span) -> Option<Expr> {
    let Items {
        first,
        clauses,
        rest,
        trailing_comma,
    } = items;
    let Some(first) = first else {
        return Some(Expr::new(ExprKind::Tuple(Vec::new()), at));
    };
    let sole = rest.is_empty() && !trailing_comma;
    if let Some(clauses) = clauses {
        return sole.then(|| comprehension(first, clauses, at, ExprKind::Generator));
    }
    if sole {
        return Some(first);
    }
    let mut all = vec![first];
    all.extend(rest);
    Some(Expr::new(ExprKind::Tuple(all), at))
}

/// `[…]`, as the grammar's `bracketed` builds it; `None` where it reports a problem.
fn bracketed(items: Items, at: Span) -> Option<Expr> {
    let Items {
        first,
        clauses,
        rest,
        trailing_comma,
    } = items;
    let Some(first) = first else {
        return Some(Expr::new(ExprKind::List(Vec::new()), at));
    };
    if let Some(clauses) = clauses {
        let sole = rest.is_empty() && !trailing_comma;
        return sole.then(|| comprehension(first, clauses, at, ExprKind::ListComp));
    }
    let mut all = vec![first];
    all.extend(rest);
    Some(Expr::new(ExprKind::List(all), at))
}

fn comprehension(
    element: Expr,
    clauses: Clauses,
    at: Span,
    kind: fn(Box<Generator>) -> ExprKind,
) -> Expr {
    let Clauses {
        var,
        iter,
        conditions,
    } = clauses;
    Expr::new(
        kind(Box::new(Generator {
            element,
            var,
            iter,
            conditions,
        })),
        at,
    )
}

fn unary(op: UnaryOp, operand: Expr, at: Span) -> Expr {
    Expr::new(
        ExprKind::Unary {
            op,
            operand: Box::new(operand),
        },
        at,
    )
}

fn binary(op: BinaryOp, lhs: Expr, rhs: Expr, at: Span) -> Expr {
    Expr::new(
        ExprKind::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        },
        at,
    )
}

fn logical(op: LogicalOp, lhs: Expr, rhs: Expr, at: Span) -> Expr {
    Expr::new(
        ExprKind::Logical {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        },
        at,
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::parse_with;
    use crate::lexer::lex;

    /// The shortcut's result, and whether it read the text at all.
    fn both(src: &str) -> (String, String, bool) {
        let lexed = lex(src);
        let read = lexed.problems.is_empty() && super::parse(&lexed.tokens).is_some();
        let with = format!("{:#?}", parse_with(src, true));
        let without = format!("{:#?}", parse_with(src, false));
        (with, without, read)
    }

    /// The forms specs write most are read by the shortcut, exactly as the grammar reads them.
    #[test]
    fn common_forms_take_the_shortcut() {
        for src in [
            "result.confidence > 0.7",
            "result.confidence >= 0.5",
            "len(result.items) < 100",
            "$.steps.step_1.output.severity == 'low'",
            "result.severity != 'high' or result.confidence > 0.9",
            "$.input.text",
            "$.steps.a.output",
            "not result.flagged and 0 <= result.score <= 1",
            "result.label.lower() in ['a', \"b\",]",
            "all(t.passed for t in result.tests if t.name != 'x')",
            "[x * 2 for x in result.items]",
            "(a, b) == (1,) or () == ()",
            "(result.a + 2) * -3 // 4 % 5 - +6",
            "result.x if result.y is not None else $.input.z",
            "result['key'][0].value not in 'abc' 'def'",
            "$.input.items.count(1) == 0",
            "  result\n  .x  # a comment\n  > 1 ",
            "max(1, 2.5, 1e3, .5,) is None",
            "true == True and null is None and result.true.null",
        ] {
            let (with, without, read) = both(src);
            assert!(read, "not read by the shortcut: {src:?}");
            assert_eq!(with, without, "{src:?}");
        }
    }

    /// Text the shortcut leaves to the grammar, which reports a problem or reads a construct
    /// the shortcut does not.
    #[test]
    fn the_grammar_keeps_the_rest() {
        for src in [
            "",
            "if x: y",
            "for x in y",
            "x ** 2",
            "f(x=1)",
            "f(*x)",
            "[*x]",
            "x[1:2]",
            "x[1, 2]",
            "{'a': 1}",
            "$input.x",
            "$.inputs.x",
            "$.steps.a",
            "$.steps.a.result",
            "(x for x in y, 1)",
            "[x for x in y for z in x]",
            "[x for a, b in y]",
            "result.x.y(",
            "(1)(2)",
            "a b",
            "a if b",
            "x := 1",
        ] {
            let (with, without, read) = both(src);
            assert!(!read, "read by the shortcut: {src:?}");
            assert_eq!(with, without, "{src:?}");
        }
    }

    fn expression() -> impl Strategy<Value = String> {
        let leaf = prop::sample::select(vec![
            "result",
            "x",
            "item",
            "result.confidence",
            "result.true",
            "0",
            "7",
            "0.7",
            "1e3",
            ".5",
            "'low'",
            "\"a\"",
            "'a' 'b'",
            "True",
            "None",
            "null",
            "true",
            "$.input.text",
            "$.steps.s_1.output.sev",
            "$.steps.a.output",
            "$ . input",
            "$.input.x.lower()",
            "()",
            "[]",
            // Outside the shortcut, so that it has to give up part-way.
            "x ** 2",
            "f(k=1)",
            "*x",
            "x[:1]",
            "$.steps.a",
            "{}",
        ])
        .prop_map(str::to_owned);
        let space = || prop::sample::select(vec!["", " ", "  ", "\n", " # c\n"]);
        leaf.prop_recursive(6, 48, 3, move |inner| {
            let binary = prop::sample::select(vec![
                "and", "or", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "is", "is not", "+",
                "-", "*", "/", "//", "%", "not", ",", "for", "if",
            ]);
            prop_oneof![
                (inner.clone(), space(), binary, space(), inner.clone())
                    .prop_map(|(a, s, op, t, b)| format!("{a}{s}{op}{t}{b}")),
                (
                    prop::sample::select(vec!["not ", "-", "+ ", "- -"]),
                    inner.clone()
                )
                    .prop_map(|(op, a)| format!("{op}{a}")),
                (
                    prop::sample::select(vec![
                        "{a}.field",
                        "{a}.lower()",
                        "{a} . null",
                        "{a}[{b}]",
                        "len({a})",
                        "max({a}, {b})",
                        "f({a},)",
                        "({a})",
                        "({a},)",
                        "({a}, {b})",
                        "[{a}, {b}]",
                        "[{a},]",
                        "[{a}]",
                        "{a} if {b} else {c}",
                        "{a} if {b}",
                        "all({a} for x in {b})",
                        "any({a} for x in {b} if {c} if {a})",
                        "[{a} for x in {b}]",
                        "({a} for x in {b})",
                        "f({a} for x in {b}, {c})",
                        "{a} {b}",
                    ]),
                    inner.clone(),
                    inner.clone(),
                    inner,
                )
                    .prop_map(|(form, a, b, c)| {
                        form.replace("{a}", &a)
                            .replace("{b}", &b)
                            .replace("{c}", &c)
                    }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// Whatever the shortcut reads, it reads as the grammar does: the same tree, the same
        /// spans, the same problems (of the walk after parsing).
        #[test]
        fn shortcut_reads_as_the_grammar_reads(src in expression()) {
            let (with, without, _) = both(&src);
            prop_assert_eq!(with, without, "{:?}", src);
        }

        #[test]
        fn shortcut_reads_token_soup_as_the_grammar_reads(
            words in prop::collection::vec(prop::sample::select(vec![
                "result", "x", ".", "field", "(", ")", "[", "]", ",", "1", "0.5", "'s'", "$",
                "input", "steps", "output", "and", "or", "not", "in", "is", "if", "else",
                "for", "==", "<", "+", "-", "*", "None", "true", "null", "len", "=", ":",
            ]), 0..24),
            glue in prop::sample::select(vec!["", " ", "\n"]),
        ) {
            let src = words.join(glue);
            let (with, without, _) = both(&src);
            prop_assert_eq!(with, without, "{:?}", src);
        }
    }
}
