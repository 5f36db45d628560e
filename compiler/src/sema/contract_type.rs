//! The text of a contract field's `type:`, parsed.
//!
//! Takes the decoded string (`string`, `float[0.0..1.0]`, `Address[]`, `string?[]`,
//! `"low" | "medium" | "high"`, `('a' | 'b')?`) and returns a [`TypeText`] tree whose every
//! name, literal and range carries its byte range inside the string, or the first
//! [`SyntaxError`]. Names are not resolved here (`banana` parses; the caller decides whether it
//! names a built-in type or a contract), so this module knows nothing of the spec.
//!
//! The notation (whitespace is free between tokens):
//!
//! ```text
//! type     := union
//! union    := postfix ('|' postfix)*      more than one alternative: every one a literal
//! postfix  := primary ('?' | '[' ']')*
//! primary  := name [range] | literal | '(' type ')'
//! range    := '[' [number] '..' [number] ']'
//! literal  := string | number            strings in single or double quotes
//! ```
//!
//! Invariant: parsing is linear in the text, and the tree it returns nests at most
//! [`MAX_NESTING`] levels of parentheses, `?` and `[]` (so neither the parser nor what walks
//! the tree recurses deeper).

use std::ops::Range;

/// Deepest nesting of parentheses, `?` and `[]` accepted together; deeper is a syntax error,
/// not a stack overflow in the stages that walk the type.
pub const MAX_NESTING: usize = 16;

/// A parsed `type:` text.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeText {
    /// A type name (`string`, `int`, `Address`, …), with the range that may follow it.
    Named {
        name: String,
        span: Range<usize>,
        range: Option<RangeText>,
    },
    /// One literal or a union of them: `"low" | "medium" | "high"`.
    Literals(Vec<(LiteralText, Range<usize>)>),
    /// `T[]`; the span covers the whole `T[]`.
    List(Box<TypeText>, Range<usize>),
    /// `T?`; the span covers the whole `T?`.
    Optional(Box<TypeText>, Range<usize>),
}

/// `[low..high]` after a type name; either bound may be left out.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeText {
    pub low: Option<Number>,
    pub high: Option<Number>,
    /// From `[` to `]`, both included.
    pub span: Range<usize>,
    pub low_span: Option<Range<usize>>,
    pub high_span: Option<Range<usize>>,
}

/// A number as written: whole numbers stay whole, so `int[1..100]` keeps integer bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            // Bounds beyond 2^53 lose precision as they would in Python's float().
            #[allow(clippy::cast_precision_loss)]
            Number::Int(value) => value as f64,
            Number::Float(value) => value,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum LiteralText {
    Str(String),
    Number(Number),
}

/// Why a `type:` text does not parse, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntaxError {
    pub message: String,
    pub span: Range<usize>,
    /// A few words for the label.
    pub label: &'static str,
}

impl TypeText {
    /// The byte range of the whole type.
    pub fn span(&self) -> Range<usize> {
        match self {
            TypeText::Named { span, range, .. } => match range {
                Some(range) => span.start..range.span.end,
                None => span.clone(),
            },
            TypeText::Literals(literals) => {
                let start = literals.first().map_or(0, |(_, span)| span.start);
                let end = literals.last().map_or(0, |(_, span)| span.end);
                start..end
            }
            TypeText::List(_, span) | TypeText::Optional(_, span) => span.clone(),
        }
    }
}

/// Parses a `type:` text.
pub fn parse(text: &str) -> Result<TypeText, SyntaxError> {
    let tokens = lex(text)?;
    let mut parser = Parser {
        tokens,
        at: 0,
        end: text.len(),
        depth: 0,
    };
    let ty = parser.union()?;
    match parser.peek() {
        None => Ok(ty),
        Some((token, span)) => Err(SyntaxError {
            message: format!("unexpected {} after the type", token.describe()),
            span: span.clone(),
            label: "unexpected here",
        }),
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Name(String),
    Str(String),
    Number(Number),
    Question,
    Open,
    Close,
    OpenBracket,
    CloseBracket,
    Bar,
    DotDot,
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Name(name) => format!("`{name}`"),
            Token::Str(_) => "a string".to_owned(),
            Token::Number(_) => "a number".to_owned(),
            Token::Question => "`?`".to_owned(),
            Token::Open => "`(`".to_owned(),
            Token::Close => "`)`".to_owned(),
            Token::OpenBracket => "`[`".to_owned(),
            Token::CloseBracket => "`]`".to_owned(),
            Token::Bar => "`|`".to_owned(),
            Token::DotDot => "`..`".to_owned(),
        }
    }
}

fn lex(text: &str) -> Result<Vec<(Token, Range<usize>)>, SyntaxError> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let single = match c {
            '?' => Some(Token::Question),
            '(' => Some(Token::Open),
            ')' => Some(Token::Close),
            '[' => Some(Token::OpenBracket),
            ']' => Some(Token::CloseBracket),
            '|' => Some(Token::Bar),
            _ => None,
        };
        if let Some(token) = single {
            chars.next();
            tokens.push((token, start..start + 1));
            continue;
        }
        if c == '.' {
            chars.next();
            if chars.next_if(|&(_, c)| c == '.').is_some() {
                tokens.push((Token::DotDot, start..start + 2));
                continue;
            }
            return Err(SyntaxError {
                message: "a single `.` in a type; a range is written `[low..high]`".to_owned(),
                span: start..start + 1,
                label: "expected `..`",
            });
        }
        if c.is_alphabetic() || c == '_' {
            let mut end = start;
            while let Some((at, c)) = chars.next_if(|&(_, c)| c.is_alphanumeric() || c == '_') {
                end = at + c.len_utf8();
            }
            let name = text.get(start..end).unwrap_or_default().to_owned();
            tokens.push((Token::Name(name), start..end));
            continue;
        }
        if c.is_ascii_digit() || c == '-' || c == '+' {
            let (number, end) = number(text, start)?;
            while chars.next_if(|&(at, _)| at < end).is_some() {}
            tokens.push((Token::Number(number), start..end));
            continue;
        }
        if c == '"' || c == '\'' {
            chars.next();
            let mut value = String::new();
            let mut closed = None;
            while let Some((at, next)) = chars.next() {
                if next == c {
                    closed = Some(at + 1);
                    break;
                }
                if next == '\\' {
                    match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, 't')) => value.push('\t'),
                        Some((_, escaped)) => value.push(escaped),
                        None => break,
                    }
                } else {
                    value.push(next);
                }
            }
            let Some(end) = closed else {
                return Err(SyntaxError {
                    message: "a string in the type is not closed".to_owned(),
                    span: start..text.len(),
                    label: "unterminated string",
                });
            };
            tokens.push((Token::Str(value), start..end));
            continue;
        }
        return Err(SyntaxError {
            message: format!("`{c}` cannot appear in a type"),
            span: start..start + c.len_utf8(),
            label: "unexpected character",
        });
    }
    Ok(tokens)
}

/// A number starting at `start`: an optional sign, digits, an optional fraction (a `.` followed
/// by a digit, so that `1..100` lexes as `1`, `..`, `100`) and an optional exponent.
fn number(text: &str, start: usize) -> Result<(Number, usize), SyntaxError> {
    let bytes = text.as_bytes();
    let digit_at = |at: usize| bytes.get(at).is_some_and(u8::is_ascii_digit);
    let mut end = start;
    if matches!(bytes.get(end), Some(b'-' | b'+')) {
        end += 1;
    }
    let digits_start = end;
    while digit_at(end) {
        end += 1;
    }
    let mut is_float = false;
    if end == digits_start {
        return Err(SyntaxError {
            message: "a sign must be followed by digits".to_owned(),
            span: start..end,
            label: "expected a number",
        });
    }
    if bytes.get(end) == Some(&b'.') && digit_at(end + 1) {
        is_float = true;
        end += 1;
        while digit_at(end) {
            end += 1;
        }
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let mut exponent = end + 1;
        if matches!(bytes.get(exponent), Some(b'-' | b'+')) {
            exponent += 1;
        }
        if digit_at(exponent) {
            is_float = true;
            end = exponent;
            while digit_at(end) {
                end += 1;
            }
        }
    }
    let written = text.get(start..end).unwrap_or_default();
    let parsed = if is_float {
        written.parse::<f64>().ok().map(Number::Float)
    } else {
        written.parse::<i64>().ok().map(Number::Int)
    };
    match parsed {
        Some(number) => Ok((number, end)),
        None => Err(SyntaxError {
            message: format!("`{written}` is too large a number"),
            span: start..end,
            label: "out of range",
        }),
    }
}

struct Parser {
    tokens: Vec<(Token, Range<usize>)>,
    at: usize,
    /// The text's length: where "expected …" points at the end.
    end: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&(Token, Range<usize>)> {
        self.tokens.get(self.at)
    }

    fn next_if(&mut self, token: &Token) -> Option<Range<usize>> {
        match self.tokens.get(self.at) {
            Some((next, span)) if next == token => {
                self.at += 1;
                Some(span.clone())
            }
            _ => None,
        }
    }

    /// The next token's span; at the end, the last token's (an empty span at the end of the
    /// text would underline nothing).
    fn here(&self) -> Range<usize> {
        self.peek()
            .or_else(|| self.tokens.last())
            .map_or(self.end..self.end, |(_, span)| span.clone())
    }

    fn expected(&self, what: &str) -> SyntaxError {
        let message = match self.peek() {
            Some((token, _)) => format!("expected {what}, found {}", token.describe()),
            None if self.end == 0 => "the type is empty".to_owned(),
            None => format!("expected {what} at the end of the type"),
        };
        SyntaxError {
            message,
            span: self.here(),
            label: "expected a type here",
        }
    }

    fn union(&mut self) -> Result<TypeText, SyntaxError> {
        let first = self.postfix()?;
        if self.peek().is_none_or(|(token, _)| *token != Token::Bar) {
            return Ok(first);
        }
        let mut literals = Vec::new();
        let mut alternative = first;
        loop {
            match alternative {
                TypeText::Literals(values) => literals.extend(values),
                other => {
                    return Err(SyntaxError {
                        message: "only literals can be joined with `|`; a union of types is \
                                  not a contract field type"
                            .to_owned(),
                        span: other.span(),
                        label: "not a literal",
                    });
                }
            }
            if self.next_if(&Token::Bar).is_none() {
                return Ok(TypeText::Literals(literals));
            }
            alternative = self.postfix()?;
        }
    }

    fn postfix(&mut self) -> Result<TypeText, SyntaxError> {
        let mut ty = self.primary()?;
        let mut suffixes = 0;
        loop {
            let start = ty.span().start;
            if self.depth + suffixes >= MAX_NESTING
                && self
                    .peek()
                    .is_some_and(|(t, _)| matches!(t, Token::Question | Token::OpenBracket))
            {
                return Err(SyntaxError {
                    message: format!("the type nests deeper than {MAX_NESTING} levels"),
                    span: self.here(),
                    label: "too deep",
                });
            }
            suffixes += 1;
            if let Some(question) = self.next_if(&Token::Question) {
                ty = TypeText::Optional(Box::new(ty), start..question.end);
            } else if self.peek().is_some_and(|(t, _)| *t == Token::OpenBracket) {
                self.at += 1;
                let Some(close) = self.next_if(&Token::CloseBracket) else {
                    return Err(SyntaxError {
                        message: "a range is written right after a type name; `[]` makes a list"
                            .to_owned(),
                        span: self.here(),
                        label: "expected `]`",
                    });
                };
                ty = TypeText::List(Box::new(ty), start..close.end);
            } else {
                return Ok(ty);
            }
        }
    }

    fn primary(&mut self) -> Result<TypeText, SyntaxError> {
        let Some((token, span)) = self.peek().cloned() else {
            return Err(self.expected("a type"));
        };
        match token {
            Token::Name(name) => {
                self.at += 1;
                let range = self.range()?;
                Ok(TypeText::Named { name, span, range })
            }
            Token::Str(value) => {
                self.at += 1;
                Ok(TypeText::Literals(vec![(LiteralText::Str(value), span)]))
            }
            Token::Number(number) => {
                self.at += 1;
                Ok(TypeText::Literals(vec![(
                    LiteralText::Number(number),
                    span,
                )]))
            }
            Token::Open => {
                if self.depth >= MAX_NESTING {
                    return Err(SyntaxError {
                        message: format!("the type nests deeper than {MAX_NESTING} levels"),
                        span,
                        label: "too deep",
                    });
                }
                self.at += 1;
                self.depth += 1;
                let inner = self.union()?;
                self.depth -= 1;
                if self.next_if(&Token::Close).is_none() {
                    return Err(SyntaxError {
                        message: "`(` is not closed".to_owned(),
                        span: self.here(),
                        label: "expected `)`",
                    });
                }
                Ok(inner)
            }
            _ => Err(self.expected("a type")),
        }
    }

    /// `[low..high]` right after a name; `[]` (a list) is left to `postfix`.
    fn range(&mut self) -> Result<Option<RangeText>, SyntaxError> {
        let is_range = matches!(
            (self.tokens.get(self.at), self.tokens.get(self.at + 1)),
            (Some((Token::OpenBracket, _)), Some((next, _))) if *next != Token::CloseBracket
        );
        if !is_range {
            return Ok(None);
        }
        let open = self.here();
        self.at += 1;
        let (low, low_span) = self.bound();
        if self.next_if(&Token::DotDot).is_none() {
            return Err(SyntaxError {
                message: "a range is written `[low..high]`".to_owned(),
                span: self.here(),
                label: "expected `..`",
            });
        }
        let (high, high_span) = self.bound();
        let Some(close) = self.next_if(&Token::CloseBracket) else {
            return Err(SyntaxError {
                message: "a range is written `[low..high]`".to_owned(),
                span: self.here(),
                label: "expected `]`",
            });
        };
        Ok(Some(RangeText {
            low,
            high,
            span: open.start..close.end,
            low_span,
            high_span,
        }))
    }

    fn bound(&mut self) -> (Option<Number>, Option<Range<usize>>) {
        match self.tokens.get(self.at) {
            Some((Token::Number(number), span)) => {
                let bound = (Some(*number), Some(span.clone()));
                self.at += 1;
                bound
            }
            _ => (None, None),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests unwrap what they built

    use super::*;

    fn named(name: &str, span: Range<usize>) -> TypeText {
        TypeText::Named {
            name: name.to_owned(),
            span,
            range: None,
        }
    }

    fn error(text: &str) -> String {
        parse(text).unwrap_err().message
    }

    #[test]
    fn names() {
        assert_eq!(parse("string"), Ok(named("string", 0..6)));
        assert_eq!(parse("  Address "), Ok(named("Address", 2..9)));
    }

    #[test]
    fn optional_and_list_suffixes() {
        assert_eq!(
            parse("string?"),
            Ok(TypeText::Optional(Box::new(named("string", 0..6)), 0..7))
        );
        assert_eq!(
            parse("Address[]"),
            Ok(TypeText::List(Box::new(named("Address", 0..7)), 0..9))
        );
        assert_eq!(
            parse("string?[]"),
            Ok(TypeText::List(
                Box::new(TypeText::Optional(Box::new(named("string", 0..6)), 0..7)),
                0..9
            ))
        );
        assert_eq!(
            parse("string[]?"),
            Ok(TypeText::Optional(
                Box::new(TypeText::List(Box::new(named("string", 0..6)), 0..8)),
                0..9
            ))
        );
    }

    #[test]
    fn ranges() {
        let TypeText::Named { range, .. } = parse("float[0.0..1.0]").unwrap() else {
            panic!("a name")
        };
        let range = range.unwrap();
        assert_eq!(range.low, Some(Number::Float(0.0)));
        assert_eq!(range.high, Some(Number::Float(1.0)));
        assert_eq!(range.span, 5..15);
        assert_eq!(range.low_span, Some(6..9));
        assert_eq!(range.high_span, Some(11..14));
        let TypeText::Named { range, .. } = parse("int[1..100]").unwrap() else {
            panic!("a name")
        };
        let range = range.unwrap();
        assert_eq!(
            (range.low, range.high),
            (Some(Number::Int(1)), Some(Number::Int(100)))
        );
        let TypeText::Named { range, .. } = parse("int[-5..]").unwrap() else {
            panic!("a name")
        };
        let range = range.unwrap();
        assert_eq!((range.low, range.high), (Some(Number::Int(-5)), None));
        let TypeText::Named { range, .. } = parse("float[..1e-5]").unwrap() else {
            panic!("a name")
        };
        assert_eq!(range.unwrap().high, Some(Number::Float(1e-5)));
        // A ranged element type in a list.
        assert!(matches!(parse("string[1..500][]"), Ok(TypeText::List(..))));
    }

    #[test]
    fn literal_unions() {
        assert_eq!(
            parse(r#""low" | "medium" | "high""#),
            Ok(TypeText::Literals(vec![
                (LiteralText::Str("low".into()), 0..5),
                (LiteralText::Str("medium".into()), 8..16),
                (LiteralText::Str("high".into()), 19..25),
            ]))
        );
        assert_eq!(
            parse("'a' | 'b'"),
            Ok(TypeText::Literals(vec![
                (LiteralText::Str("a".into()), 0..3),
                (LiteralText::Str("b".into()), 6..9),
            ]))
        );
        assert_eq!(
            parse("1 | 2.5"),
            Ok(TypeText::Literals(vec![
                (LiteralText::Number(Number::Int(1)), 0..1),
                (LiteralText::Number(Number::Float(2.5)), 4..7),
            ]))
        );
        assert!(matches!(
            parse("('a' | 'b')?"),
            Ok(TypeText::Optional(inner, _)) if matches!(*inner, TypeText::Literals(_))
        ));
        assert_eq!(
            parse(r"'it\'s'"),
            Ok(TypeText::Literals(vec![(
                LiteralText::Str("it's".into()),
                0..7
            )]))
        );
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(error(""), "the type is empty");
        assert_eq!(error("'a' |"), "expected a type at the end of the type");
        assert_eq!(parse("'a' |").unwrap_err().span, 4..5);
        assert!(error("string | int").starts_with("only literals can be joined"));
        assert_eq!(error("string[1..5"), "a range is written `[low..high]`");
        assert_eq!(error("string[1 5]"), "a range is written `[low..high]`");
        assert_eq!(error("'open"), "a string in the type is not closed");
        assert_eq!(error("string!"), "`!` cannot appear in a type");
        assert_eq!(error("(string"), "`(` is not closed");
        assert_eq!(error("string string"), "unexpected `string` after the type");
        assert_eq!(
            error("a.b"),
            "a single `.` in a type; a range is written `[low..high]`"
        );
        assert_eq!(error("int[- ..1]"), "a sign must be followed by digits");
        assert_eq!(
            error("int[99999999999999999999..]"),
            "`99999999999999999999` is too large a number"
        );
        let too_deep = format!("the type nests deeper than {MAX_NESTING} levels");
        let deep = format!("{}string{}", "(".repeat(40), ")".repeat(40));
        assert_eq!(error(&deep), too_deep);
        assert_eq!(error(&format!("string{}", "?".repeat(100_000))), too_deep);
        assert_eq!(error(&format!("string{}", "[]".repeat(100_000))), too_deep);
        assert!(parse(&format!("string{}", "[]?".repeat(5))).is_ok());
        assert_eq!(parse("string!").unwrap_err().span, 6..7);
    }
}
