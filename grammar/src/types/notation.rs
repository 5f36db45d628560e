//! Reading the type notation that [`Type`]'s `Display` writes (the grammar is at the top of
//! [`crate::types`]).

use std::str::FromStr;

use super::{Literal, Record, RecordField, Type};

/// Why a text is not a type: the message and the byte offset it refers to.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} at offset {offset}")]
pub struct TypeParseError {
    pub message: String,
    pub offset: usize,
}

/// Types nest at most this deep: the parser recurses, and a hostile text must not exhaust the
/// stack.
const MAX_DEPTH: usize = 64;

impl FromStr for Type {
    type Err = TypeParseError;

    fn from_str(text: &str) -> Result<Type, TypeParseError> {
        let mut parser = Parser { text, pos: 0 };
        let ty = parser.ty(0)?;
        parser.skip_space();
        if parser.pos < text.len() {
            return Err(parser.error("unexpected text after the type"));
        }
        Ok(ty)
    }
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        self.text.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
    }

    /// Skips whitespace, then consumes `token` if it comes next.
    fn eat(&mut self, token: &str) -> bool {
        self.skip_space();
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &str) -> Result<(), TypeParseError> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.error(&format!("expected `{token}`")))
        }
    }

    fn error(&self, message: &str) -> TypeParseError {
        TypeParseError {
            message: message.to_owned(),
            offset: self.pos,
        }
    }

    fn ty(&mut self, depth: usize) -> Result<Type, TypeParseError> {
        if depth > MAX_DEPTH {
            return Err(self.error("the type nests too deeply"));
        }
        let start = self.pos;
        let first = self.postfix(depth)?;
        if !self.eat_bar() {
            return Ok(first);
        }
        let mut values = enum_values(first).ok_or_else(|| TypeParseError {
            message: "only enum values can be joined with `|`".to_owned(),
            offset: start,
        })?;
        loop {
            self.skip_space();
            let at = self.pos;
            let next = self.postfix(depth)?;
            let more = enum_values(next).ok_or_else(|| TypeParseError {
                message: "only enum values can be joined with `|` (an optional enum is \
                          written `('a' | 'b')?`)"
                    .to_owned(),
                offset: at,
            })?;
            values.extend(more);
            if !self.eat_bar() {
                return Ok(Type::enumeration(values));
            }
        }
    }

    fn eat_bar(&mut self) -> bool {
        self.eat("|")
    }

    fn postfix(&mut self, depth: usize) -> Result<Type, TypeParseError> {
        let mut ty = self.primary(depth)?;
        while self.eat("?") {
            ty = Type::Optional(Box::new(ty));
        }
        Ok(ty)
    }

    fn primary(&mut self, depth: usize) -> Result<Type, TypeParseError> {
        self.skip_space();
        match self.peek() {
            None => Err(self.error("expected a type")),
            Some('(') => {
                self.bump();
                let ty = self.ty(depth + 1)?;
                self.expect(")")?;
                Ok(ty)
            }
            Some('{') => {
                self.bump();
                self.record(depth + 1)
            }
            Some('\'' | '"') => Ok(Type::enumeration(vec![Literal::Str(self.string()?)])),
            Some(c) if c == '-' || c == '.' || c.is_ascii_digit() => {
                Ok(Type::enumeration(vec![self.number()?]))
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let start = self.pos;
                let word = self.word();
                match word {
                    "any" => Ok(Type::Any),
                    "null" | "None" => Ok(Type::Null),
                    "bool" => Ok(Type::Bool),
                    "int" => Ok(Type::Int),
                    "float" => Ok(Type::Float),
                    "string" => Ok(Type::String),
                    "never" => Ok(Type::enumeration(Vec::new())),
                    "True" | "true" => Ok(Type::enumeration(vec![Literal::Bool(true)])),
                    "False" | "false" => Ok(Type::enumeration(vec![Literal::Bool(false)])),
                    "inf" | "nan" | "NaN" => {
                        self.pos = start;
                        Ok(Type::enumeration(vec![self.number()?]))
                    }
                    "list" => {
                        self.expect("<")?;
                        let item = self.ty(depth + 1)?;
                        self.expect(">")?;
                        Ok(Type::list(item))
                    }
                    _ => Err(TypeParseError {
                        message: format!("unknown type `{word}`"),
                        offset: start,
                    }),
                }
            }
            Some(_) => Err(self.error("expected a type")),
        }
    }

    fn word(&mut self) -> &str {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.bump();
        }
        self.text.get(start..self.pos).unwrap_or("")
    }

    /// The fields of a record, after its `{`.
    fn record(&mut self, depth: usize) -> Result<Type, TypeParseError> {
        let mut record = Record::default();
        loop {
            if self.eat("}") {
                return Ok(Type::record(record));
            }
            if self.eat("...") {
                record.open = true;
                self.expect("}")?;
                return Ok(Type::record(record));
            }
            self.skip_space();
            let name = match self.peek() {
                Some('\'' | '"') => self.string()?,
                Some(c) if c.is_ascii_alphabetic() || c == '_' => self.word().to_owned(),
                _ => return Err(self.error("expected a field name, `...` or `}`")),
            };
            self.expect(":")?;
            let ty = self.ty(depth)?;
            record.fields.push(RecordField { name, ty });
            if !self.eat(",") {
                self.expect("}")?;
                return Ok(Type::record(record));
            }
        }
    }

    /// An integer or float literal, with an optional `-`.
    fn number(&mut self) -> Result<Literal, TypeParseError> {
        let start = self.pos;
        if self.peek() == Some('-') {
            self.bump();
        }
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_'))
            || (self.peek().is_some_and(|c| c == '+' || c == '-')
                && self
                    .text
                    .get(..self.pos)
                    .is_some_and(|before| before.ends_with(['e', 'E'])))
        {
            self.bump();
        }
        let lexeme = self.text.get(start..self.pos).unwrap_or("");
        let is_float = lexeme.contains(['.', 'e', 'E', 'i', 'n', 'N']);
        let parsed = if is_float {
            let normalized = match lexeme {
                "nan" | "NaN" | "-nan" | "-NaN" => "NaN",
                other => other,
            };
            normalized.parse::<f64>().ok().map(Literal::Float)
        } else {
            lexeme.parse::<i64>().ok().map(Literal::Int)
        };
        parsed.ok_or_else(|| TypeParseError {
            message: format!("`{lexeme}` is not a number"),
            offset: start,
        })
    }

    /// A quoted string with Python's (and Rust's `\u{…}`) escapes, at its opening quote.
    fn string(&mut self) -> Result<String, TypeParseError> {
        let start = self.pos;
        let unterminated = || TypeParseError {
            message: "unterminated string".to_owned(),
            offset: start,
        };
        let quote = self.bump().ok_or_else(unterminated)?;
        let mut value = String::new();
        loop {
            match self.bump().ok_or_else(unterminated)? {
                c if c == quote => return Ok(value),
                '\\' => {
                    let at = self.pos;
                    let escaped = self.bump().ok_or_else(unterminated)?;
                    let c = match escaped {
                        'n' => '\n',
                        'r' => '\r',
                        't' => '\t',
                        '0' => '\0',
                        'a' => '\u{7}',
                        'b' => '\u{8}',
                        'f' => '\u{c}',
                        'v' => '\u{b}',
                        'x' => self.hex(2, at)?,
                        'u' if self.peek() == Some('{') => {
                            self.bump();
                            let c = self.hex_until_brace(at)?;
                            self.expect("}")?;
                            c
                        }
                        'u' => self.hex(4, at)?,
                        'U' => self.hex(8, at)?,
                        other => other,
                    };
                    value.push(c);
                }
                c => value.push(c),
            }
        }
    }

    fn hex(&mut self, digits: usize, at: usize) -> Result<char, TypeParseError> {
        let start = self.pos;
        for _ in 0..digits {
            if !self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                return Err(bad_escape(at));
            }
            self.bump();
        }
        let code = self.text.get(start..self.pos).unwrap_or("");
        u32::from_str_radix(code, 16)
            .ok()
            .and_then(char::from_u32)
            .ok_or_else(|| bad_escape(at))
    }

    fn hex_until_brace(&mut self, at: usize) -> Result<char, TypeParseError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
            self.bump();
        }
        let code = self.text.get(start..self.pos).unwrap_or("");
        if code.is_empty() || code.len() > 6 {
            return Err(bad_escape(at));
        }
        u32::from_str_radix(code, 16)
            .ok()
            .and_then(char::from_u32)
            .ok_or_else(|| bad_escape(at))
    }
}

fn bad_escape(offset: usize) -> TypeParseError {
    TypeParseError {
        message: "invalid escape in a string".to_owned(),
        offset,
    }
}

/// The values of an enum written without `?` (the operand of `|`).
fn enum_values(ty: Type) -> Option<Vec<Literal>> {
    match ty {
        Type::Enum(values) => Some(values.to_vec()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Type {
        match text.parse::<Type>() {
            Ok(ty) => ty,
            Err(error) => panic!("{text:?}: {error}"),
        }
    }

    #[test]
    fn reads_every_form() {
        assert_eq!(parse(" int "), Type::Int);
        assert_eq!(
            parse("list<list<string>>"),
            Type::list(Type::list(Type::String))
        );
        assert_eq!(parse("float?"), Type::Float.optional());
        assert_eq!(
            parse("('a' | \"b\")?"),
            Type::enumeration(vec![Literal::Str("a".into()), Literal::Str("b".into())]).optional()
        );
        assert_eq!(
            parse("-1 | 2.5 | True"),
            Type::enumeration(vec![
                Literal::Int(-1),
                Literal::Float(2.5),
                Literal::Bool(true)
            ])
        );
        assert_eq!(
            parse("{a: int, 'b-c': list<any>, ...}"),
            Type::record(Record {
                fields: vec![
                    RecordField {
                        name: "a".into(),
                        ty: Type::Int
                    },
                    RecordField {
                        name: "b-c".into(),
                        ty: Type::list(Type::Any)
                    },
                ],
                open: true,
            })
        );
        assert_eq!(
            parse("{...}"),
            Type::record(Record {
                fields: vec![],
                open: true
            })
        );
        assert_eq!(parse("{}"), Type::record(Record::default()));
        assert_eq!(parse("never"), Type::enumeration(vec![]));
        assert_eq!(
            parse("1e+16"),
            Type::enumeration(vec![Literal::Float(1e16)])
        );
        assert_eq!(
            parse("'\\n\\x41\\u00e9\\u{1F600}'"),
            Type::enumeration(vec![Literal::Str("\nAé😀".into())])
        );
    }

    #[test]
    fn rejects_malformed_text() {
        for text in [
            "",
            "lst<int>",
            "list<int",
            "{a int}",
            "'a' | int",
            "'a' | 'b'?",
            "int int",
            "'open",
            "{a: int,",
            "1x",
            "(int",
            "'\\xZZ'",
        ] {
            assert!(text.parse::<Type>().is_err(), "{text:?} parsed");
        }
        let deep = format!("{}int{}", "list<".repeat(1000), ">".repeat(1000));
        assert!(deep.parse::<Type>().is_err());
    }
}
