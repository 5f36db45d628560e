//! A stand-in parser for the VM's tests until the real one lands (a small recursive descent
//! over the expression subset, spans included). Replaced by `stratum_grammar::parser::parse`.

#![allow(dead_code, clippy::unwrap_used, clippy::indexing_slicing)]

use stratum_grammar::Span;
use stratum_grammar::ast::*;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Int(i64),
    Float(f64),
    Str(String),
    Name(String),
    Op(&'static str),
    Dollar,
}

const OPS: [&str; 22] = [
    "//", "==", "!=", "<=", ">=", "(", ")", "[", "]", ",", ".", "+", "-", "*", "/", "%", "<", ">",
    ":", "{", "}", "=",
];

fn lex(src: &str) -> Result<Vec<(Tok, usize, usize)>, String> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_digit() || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let mut float = false;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
                i += 1;
            }
            if i < bytes.len() && bytes[i] == b'.' {
                float = true;
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
                float = true;
                i += 1;
                if i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
                    i += 1;
                }
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            let text: String = src[start..i].chars().filter(|c| *c != '_').collect();
            let tok = if float {
                Tok::Float(text.parse().map_err(|e| format!("{e}"))?)
            } else {
                Tok::Int(text.parse().map_err(|e| format!("{e}"))?)
            };
            out.push((tok, start, i));
            continue;
        }
        if c == b'\'' || c == b'"' {
            i += 1;
            let mut s = String::new();
            loop {
                let rest = &src[i..];
                let ch = rest.chars().next().ok_or("unterminated string")?;
                i += ch.len_utf8();
                if ch as u32 == c as u32 {
                    break;
                }
                if ch == '\\' {
                    let e = src[i..].chars().next().ok_or("bad escape")?;
                    i += e.len_utf8();
                    s.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        '0' => '\0',
                        other => other,
                    });
                } else {
                    s.push(ch);
                }
            }
            out.push((Tok::Str(s), start, i));
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Name(src[start..i].to_owned()), start, i));
            continue;
        }
        if c == b'$' {
            out.push((Tok::Dollar, i, i + 1));
            i += 1;
            continue;
        }
        let op = OPS
            .iter()
            .find(|op| src[i..].starts_with(**op))
            .ok_or_else(|| format!("unexpected `{}`", &src[i..]))?;
        i += op.len();
        out.push((Tok::Op(op), start, i));
    }
    Ok(out)
}

struct P<'s> {
    src: &'s str,
    toks: Vec<(Tok, usize, usize)>,
    pos: usize,
}

type R<T> = Result<T, String>;

fn ex(kind: ExprKind, start: usize, end: usize) -> Expr {
    Expr::new(kind, Span::new(start, end))
}

impl P<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }
    fn peek_at(&self, k: usize) -> Option<&Tok> {
        self.toks.get(self.pos + k).map(|t| &t.0)
    }
    fn start(&self) -> usize {
        self.toks.get(self.pos).map_or(self.src.len(), |t| t.1)
    }
    fn last_end(&self) -> usize {
        self.toks.get(self.pos.wrapping_sub(1)).map_or(0, |t| t.2)
    }
    fn is_op(&self, op: &str) -> bool {
        matches!(self.peek(), Some(Tok::Op(o)) if *o == op)
    }
    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Some(Tok::Name(n)) if n == kw)
    }
    fn expect_op(&mut self, op: &str) -> R<()> {
        if self.is_op(op) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected `{op}` at {}", self.start()))
        }
    }
    fn expect_kw(&mut self, kw: &str) -> R<()> {
        if self.is_kw(kw) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected `{kw}`"))
        }
    }
    fn ident(&mut self) -> R<Ident> {
        match self.toks.get(self.pos) {
            Some((Tok::Name(n), s, e)) => {
                let ident = Ident {
                    name: n.clone(),
                    span: Span::new(*s, *e),
                };
                self.pos += 1;
                Ok(ident)
            }
            _ => Err("expected a name".into()),
        }
    }

    fn expr(&mut self) -> R<Expr> {
        let then = self.or()?;
        if self.is_kw("if") {
            self.pos += 1;
            let condition = self.or()?;
            self.expect_kw("else")?;
            let otherwise = self.expr()?;
            let (s, e) = (then.span.start as usize, otherwise.span.end as usize);
            return Ok(ex(
                ExprKind::Conditional {
                    then: Box::new(then),
                    condition: Box::new(condition),
                    otherwise: Box::new(otherwise),
                },
                s,
                e,
            ));
        }
        Ok(then)
    }

    fn logical(&mut self, kw: &str, op: LogicalOp, next: fn(&mut Self) -> R<Expr>) -> R<Expr> {
        let mut lhs = next(self)?;
        while self.is_kw(kw) {
            self.pos += 1;
            let rhs = next(self)?;
            let (s, e) = (lhs.span.start as usize, rhs.span.end as usize);
            lhs = ex(
                ExprKind::Logical {
                    op,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                },
                s,
                e,
            );
        }
        Ok(lhs)
    }

    fn or(&mut self) -> R<Expr> {
        self.logical("or", LogicalOp::Or, Self::and)
    }
    fn and(&mut self) -> R<Expr> {
        self.logical("and", LogicalOp::And, Self::not)
    }
    fn not(&mut self) -> R<Expr> {
        if self.is_kw("not") {
            let s = self.start();
            self.pos += 1;
            let operand = self.not()?;
            let e = operand.span.end as usize;
            return Ok(ex(
                ExprKind::Unary {
                    op: UnaryOp::Not,
                    operand: Box::new(operand),
                },
                s,
                e,
            ));
        }
        self.comparison()
    }

    fn comp_op(&mut self) -> Option<(CompareOp, Span)> {
        let s = self.start();
        let op = match self.peek()? {
            Tok::Op("==") => CompareOp::Eq,
            Tok::Op("!=") => CompareOp::Ne,
            Tok::Op("<") => CompareOp::Lt,
            Tok::Op("<=") => CompareOp::Le,
            Tok::Op(">") => CompareOp::Gt,
            Tok::Op(">=") => CompareOp::Ge,
            Tok::Name(n) if n == "in" => CompareOp::In,
            Tok::Name(n) if n == "not" && self.peek_at(1) == Some(&Tok::Name("in".into())) => {
                self.pos += 1;
                CompareOp::NotIn
            }
            Tok::Name(n) if n == "is" => {
                if self.peek_at(1) == Some(&Tok::Name("not".into())) {
                    self.pos += 1;
                    CompareOp::IsNot
                } else {
                    CompareOp::Is
                }
            }
            _ => return None,
        };
        self.pos += 1;
        Some((op, Span::new(s, self.last_end())))
    }

    fn comparison(&mut self) -> R<Expr> {
        let first = self.arith()?;
        let mut rest = Vec::new();
        while let Some((op, op_span)) = self.comp_op() {
            let rhs = self.arith()?;
            rest.push(Comparison { op, op_span, rhs });
        }
        if rest.is_empty() {
            return Ok(first);
        }
        let s = first.span.start as usize;
        let e = rest.last().unwrap().rhs.span.end as usize;
        Ok(ex(
            ExprKind::Compare {
                first: Box::new(first),
                rest,
            },
            s,
            e,
        ))
    }

    fn binary(&mut self, ops: &[(&str, BinaryOp)], next: fn(&mut Self) -> R<Expr>) -> R<Expr> {
        let mut lhs = next(self)?;
        'outer: loop {
            for (text, op) in ops {
                if self.is_op(text) {
                    self.pos += 1;
                    let rhs = next(self)?;
                    let (s, e) = (lhs.span.start as usize, rhs.span.end as usize);
                    lhs = ex(
                        ExprKind::Binary {
                            op: *op,
                            lhs: Box::new(lhs),
                            rhs: Box::new(rhs),
                        },
                        s,
                        e,
                    );
                    continue 'outer;
                }
            }
            return Ok(lhs);
        }
    }

    fn arith(&mut self) -> R<Expr> {
        self.binary(&[("+", BinaryOp::Add), ("-", BinaryOp::Sub)], Self::term)
    }
    fn term(&mut self) -> R<Expr> {
        self.binary(
            &[
                ("*", BinaryOp::Mul),
                ("//", BinaryOp::FloorDiv),
                ("/", BinaryOp::Div),
                ("%", BinaryOp::Mod),
            ],
            Self::factor,
        )
    }
    fn factor(&mut self) -> R<Expr> {
        for (text, op) in [("-", UnaryOp::Neg), ("+", UnaryOp::Pos)] {
            if self.is_op(text) {
                let s = self.start();
                self.pos += 1;
                let operand = self.factor()?;
                let e = operand.span.end as usize;
                return Ok(ex(
                    ExprKind::Unary {
                        op,
                        operand: Box::new(operand),
                    },
                    s,
                    e,
                ));
            }
        }
        self.postfix()
    }

    fn postfix(&mut self) -> R<Expr> {
        let mut e = self.atom()?;
        loop {
            let s = e.span.start as usize;
            if self.is_op(".") {
                self.pos += 1;
                let name = self.ident()?;
                if self.is_op("(") {
                    let args = self.args()?;
                    e = ex(
                        ExprKind::Method {
                            receiver: Box::new(e),
                            name,
                            args,
                        },
                        s,
                        self.last_end(),
                    );
                } else {
                    e = ex(
                        ExprKind::Attr {
                            base: Box::new(e),
                            name,
                        },
                        s,
                        self.last_end(),
                    );
                }
            } else if self.is_op("[") {
                self.pos += 1;
                let index = self.expr()?;
                self.expect_op("]")?;
                e = ex(
                    ExprKind::Index {
                        base: Box::new(e),
                        index: Box::new(index),
                    },
                    s,
                    self.last_end(),
                );
            } else {
                return Ok(e);
            }
        }
    }

    fn comp_tail(&mut self, element: Expr) -> R<Generator> {
        self.expect_kw("for")?;
        let var = self.ident()?;
        self.expect_kw("in")?;
        let iter = self.or()?;
        let mut conditions = Vec::new();
        while self.is_kw("if") {
            self.pos += 1;
            conditions.push(self.or()?);
        }
        Ok(Generator {
            element,
            var,
            iter,
            conditions,
        })
    }

    /// `(` args `)`, the `(` not consumed yet.
    fn args(&mut self) -> R<Vec<Expr>> {
        self.expect_op("(")?;
        let mut args = Vec::new();
        if self.is_op(")") {
            self.pos += 1;
            return Ok(args);
        }
        let first = self.expr()?;
        if self.is_kw("for") {
            let s = first.span.start as usize;
            let generator = self.comp_tail(first)?;
            let e = self.last_end();
            self.expect_op(")")?;
            return Ok(vec![ex(ExprKind::Generator(Box::new(generator)), s, e)]);
        }
        args.push(first);
        while self.is_op(",") {
            self.pos += 1;
            if self.is_op(")") {
                break;
            }
            args.push(self.expr()?);
        }
        self.expect_op(")")?;
        Ok(args)
    }

    fn atom(&mut self) -> R<Expr> {
        let (tok, s, e) = self.toks.get(self.pos).cloned().ok_or("unexpected end")?;
        self.pos += 1;
        Ok(match tok {
            Tok::Int(i) => ex(ExprKind::Int(i), s, e),
            Tok::Float(f) => ex(ExprKind::Float(f), s, e),
            Tok::Str(v) => ex(ExprKind::Str(v), s, e),
            Tok::Name(n) => match n.as_str() {
                "True" | "true" => ex(ExprKind::Bool(true), s, e),
                "False" | "false" => ex(ExprKind::Bool(false), s, e),
                "None" | "null" => ex(ExprKind::None, s, e),
                _ => {
                    let ident = Ident {
                        name: n,
                        span: Span::new(s, e),
                    };
                    if self.is_op("(") {
                        let args = self.args()?;
                        ex(ExprKind::Call { func: ident, args }, s, self.last_end())
                    } else {
                        ex(ExprKind::Name(ident), s, e)
                    }
                }
            },
            Tok::Dollar => {
                self.expect_op(".")?;
                let head = self.ident()?;
                let root = match head.name.as_str() {
                    "input" => RefRoot::Input,
                    "steps" => {
                        self.expect_op(".")?;
                        let step = self.ident()?;
                        self.expect_op(".")?;
                        self.expect_kw("output")?;
                        RefRoot::StepOutput { step }
                    }
                    other => return Err(format!("bad ref root {other}")),
                };
                let mut path = Vec::new();
                while self.is_op(".")
                    && matches!(self.peek_at(1), Some(Tok::Name(_)))
                    && !matches!(self.peek_at(2), Some(Tok::Op("(")))
                {
                    self.pos += 1;
                    path.push(self.ident()?);
                }
                ex(ExprKind::Ref(Reference { root, path }), s, self.last_end())
            }
            Tok::Op("(") => {
                if self.is_op(")") {
                    self.pos += 1;
                    return Ok(ex(ExprKind::Tuple(vec![]), s, self.last_end()));
                }
                let first = self.expr()?;
                if self.is_op(")") {
                    self.pos += 1;
                    return Ok(first);
                }
                let mut items = vec![first];
                while self.is_op(",") {
                    self.pos += 1;
                    if self.is_op(")") {
                        break;
                    }
                    items.push(self.expr()?);
                }
                self.expect_op(")")?;
                ex(ExprKind::Tuple(items), s, self.last_end())
            }
            Tok::Op("[") => {
                if self.is_op("]") {
                    self.pos += 1;
                    return Ok(ex(ExprKind::List(vec![]), s, self.last_end()));
                }
                let first = self.expr()?;
                if self.is_kw("for") {
                    let generator = self.comp_tail(first)?;
                    self.expect_op("]")?;
                    return Ok(ex(
                        ExprKind::ListComp(Box::new(generator)),
                        s,
                        self.last_end(),
                    ));
                }
                let mut items = vec![first];
                while self.is_op(",") {
                    self.pos += 1;
                    if self.is_op("]") {
                        break;
                    }
                    items.push(self.expr()?);
                }
                self.expect_op("]")?;
                ex(ExprKind::List(items), s, self.last_end())
            }
            other => return Err(format!("unexpected {other:?} at {s}")),
        })
    }
}

/// Parses `src` into an expression, or panics (test inputs are valid).
pub fn parse(src: &str) -> Expr {
    let toks = lex(src).unwrap_or_else(|e| panic!("`{src}`: {e}"));
    let mut p = P { src, toks, pos: 0 };
    let expr = p.expr().unwrap_or_else(|e| panic!("`{src}`: {e}"));
    assert!(p.pos == p.toks.len(), "`{src}`: trailing tokens");
    expr
}
