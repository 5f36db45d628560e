//! Number and string literals: their extent, their value, and what is wrong with them.

use super::{Raw, Tok};
use crate::problem::{Problem, ProblemKind};
use crate::span::Span;

/// Extends a string token from its opening quote (and prefix) to the closing quote; a single
/// quoted string stops at the end of its line, as in Python. Returns [`Raw::OpenStr`] when the
/// closing quote is missing.
pub(super) fn scan_string(lex: &mut logos::Lexer<Raw>) -> Raw {
    let quote = lex.slice().bytes().last().unwrap_or(b'\'');
    let rest = lex.remainder().as_bytes();
    let triple = rest.first() == Some(&quote) && rest.get(1) == Some(&quote);
    let mut i = if triple { 2 } else { 0 };
    // Every position where this stops follows an ASCII byte or is the end, so it is a
    // character boundary and `bump` cannot panic.
    loop {
        match rest.get(i) {
            None => {
                lex.bump(rest.len());
                return Raw::OpenStr;
            }
            Some(b'\\') => {
                i += 1;
                if rest.get(i).is_some_and(u8::is_ascii) {
                    i += 1;
                }
            }
            Some(b'\n') if !triple => {
                lex.bump(i);
                return Raw::OpenStr;
            }
            Some(&b) if b == quote => {
                if !triple {
                    lex.bump(i + 1);
                    return Raw::Str;
                }
                if rest.get(i + 1) == Some(&quote) && rest.get(i + 2) == Some(&quote) {
                    lex.bump(i + 3);
                    return Raw::Str;
                }
                i += 1;
            }
            Some(_) => i += 1,
        }
    }
}

type Lexeme<'s> = (Tok<'s>, Option<Problem>);

pub(super) fn int(text: &str, span: Span) -> Lexeme<'static> {
    let digits: String = text.chars().filter(|&c| c != '_').collect();
    if digits.len() > 1 && digits.starts_with('0') && digits.bytes().any(|b| b != b'0') {
        let trimmed = digits.trim_start_matches('0');
        let problem = Problem::new(
            ProblemKind::Syntax,
            "leading zeros are not allowed in an integer literal",
            span,
            "leading zero",
        )
        .help(format!(
            "Python reads no octal this way; write `{trimmed}` (or `0o…` for octal, which is \
             not supported either)"
        ))
        .replacement(span, trimmed);
        return (Tok::Error, Some(problem));
    }
    match digits.parse::<i64>() {
        Ok(value) => (Tok::Int(value), None),
        Err(_) => (
            Tok::Error,
            Some(
                Problem::new(
                    ProblemKind::Syntax,
                    "integer literal is too large",
                    span,
                    "does not fit in 64 bits",
                )
                .help(format!(
                    "integers are at most {}; for a larger number, use a float such as `1e20`",
                    i64::MAX
                )),
            ),
        ),
    }
}

pub(super) fn float(text: &str, span: Span) -> Lexeme<'static> {
    let digits: String = text.chars().filter(|&c| c != '_').collect();
    match digits.parse::<f64>() {
        Ok(value) if value.is_finite() => (Tok::Float(value), None),
        _ => (
            Tok::Error,
            Some(
                Problem::new(
                    ProblemKind::Syntax,
                    "float literal is too large",
                    span,
                    "rounds to infinity",
                )
                .help("floats are at most about `1.8e308`"),
            ),
        ),
    }
}

/// `0x1f`, `0o17`, `0b101`: valid Python, but outside the subset; the fix is the decimal value.
pub(super) fn based_int(text: &str, span: Span) -> Lexeme<'static> {
    let (name, radix) = match text.as_bytes().get(1) {
        Some(b'x' | b'X') => ("hexadecimal", 16),
        Some(b'o' | b'O') => ("octal", 8),
        _ => ("binary", 2),
    };
    let problem = Problem::new(
        ProblemKind::Unsupported,
        format!("{name} integer literals are not supported"),
        span,
        format!("{name} literal"),
    );
    let digits: String = text.chars().skip(2).filter(|&c| c != '_').collect();
    let problem = match i64::from_str_radix(&digits, radix) {
        Ok(value) => problem
            .help(format!("write the decimal value `{value}`"))
            .replacement(span, value.to_string()),
        Err(_) => problem.help("write the value in decimal"),
    };
    (Tok::Error, Some(problem))
}

/// A string token, with or without its closing quote (`closed`).
pub(super) fn string(text: &str, span: Span, closed: bool) -> Lexeme<'static> {
    let prefix_len = text.find(['\'', '"']).unwrap_or(0);
    let prefix = text
        .get(..prefix_len)
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !closed {
        let problem = Problem::new(
            ProblemKind::Syntax,
            "unterminated string literal",
            span,
            "this string has no closing quote",
        );
        let quote = text
            .get(prefix_len..)
            .and_then(|t| t.chars().next())
            .unwrap_or('\'');
        let problem = if text
            .get(prefix_len..)
            .is_some_and(|t| t.starts_with("'''") || t.starts_with("\"\"\""))
        {
            problem.help(format!("close the string with {quote}{quote}{quote}"))
        } else {
            problem.help(format!(
                "close the string with {quote} on the same line; to continue it on the next \
                 line, end the line with `\\`"
            ))
        };
        return (Tok::Unterminated, Some(problem));
    }
    if prefix.contains('f') {
        let problem = Problem::new(
            ProblemKind::Unsupported,
            "f-strings are not supported",
            span,
            "f-string",
        )
        .help("build the text with `+` and `str(…)`: `'score: ' + str(result.score)`");
        return (Tok::Error, Some(problem));
    }
    if prefix.contains('b') {
        let body_start = prefix_len;
        let without_prefix = text.get(body_start..).unwrap_or_default();
        let problem = Problem::new(
            ProblemKind::Unsupported,
            "bytes literals are not supported",
            span,
            "bytes literal",
        )
        .help("use a string literal");
        let problem = if prefix.contains('r') {
            problem
        } else {
            problem.replacement(span, without_prefix)
        };
        return (Tok::Error, Some(problem));
    }
    let rest = text.get(prefix_len..).unwrap_or_default();
    let quote_len = if rest.starts_with("'''") || rest.starts_with("\"\"\"") {
        3
    } else {
        1
    };
    let body_start = prefix_len + quote_len;
    let body = text
        .get(body_start..text.len().saturating_sub(quote_len))
        .unwrap_or_default();
    if prefix.contains('r') {
        return (Tok::Str(body.to_owned()), None);
    }
    match unescape(body, span.start as usize + body_start) {
        Ok(value) => (Tok::Str(value), None),
        Err(problem) => (Tok::Error, Some(*problem)),
    }
}

/// Decodes Python's escapes in a string body that starts at byte `offset` of the expression.
fn unescape(body: &str, offset: usize) -> Result<String, Box<Problem>> {
    let mut value = String::with_capacity(body.len());
    let mut chars = body.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '\\' {
            value.push(c);
            continue;
        }
        let Some((_, escape)) = chars.next() else {
            value.push('\\');
            break;
        };
        let simple = match escape {
            '\n' => Some(None),
            '\r' => {
                if chars.peek().is_some_and(|&(_, c)| c == '\n') {
                    chars.next();
                }
                Some(None)
            }
            '\\' | '\'' | '"' => Some(Some(escape)),
            'a' => Some(Some('\x07')),
            'b' => Some(Some('\x08')),
            'f' => Some(Some('\x0c')),
            'n' => Some(Some('\n')),
            'r' => Some(Some('\r')),
            't' => Some(Some('\t')),
            'v' => Some(Some('\x0b')),
            _ => None,
        };
        if let Some(decoded) = simple {
            value.extend(decoded);
            continue;
        }
        match escape {
            '0'..='7' => {
                let mut code = escape.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|&(_, c)| c.to_digit(8)) {
                        Some(digit) => {
                            code = code * 8 + digit;
                            chars.next();
                        }
                        None => break,
                    }
                }
                // At most 0o777, always a character.
                value.extend(char::from_u32(code));
            }
            'x' | 'u' | 'U' => {
                let width = match escape {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut code = 0u32;
                let mut end = at + 2;
                for _ in 0..width {
                    let Some(digit) = chars.peek().and_then(|&(_, c)| c.to_digit(16)) else {
                        let span = Span::new(offset + at, offset + end);
                        return Err(Box::new(
                            Problem::new(
                                ProblemKind::Syntax,
                                format!(
                                    "truncated `\\{escape}` escape: expected {width} hex digits"
                                ),
                                span,
                                "incomplete escape",
                            )
                            .help(format!(
                                "write exactly {width} hex digits, or `\\\\` for a backslash"
                            )),
                        ));
                    };
                    code = code * 16 + digit;
                    chars.next();
                    end += 1;
                }
                let span = Span::new(offset + at, offset + end);
                match char::from_u32(code) {
                    Some(c) => value.push(c),
                    None => {
                        return Err(Box::new(
                            Problem::new(
                                ProblemKind::Syntax,
                                format!(
                                    "the escape encodes U+{code:04X}, which is not a character"
                                ),
                                span,
                                "invalid character",
                            )
                            .help("surrogates and values above U+10FFFF cannot be in a string"),
                        ));
                    }
                }
            }
            'N' => {
                let end = body
                    .get(at..)
                    .and_then(|rest| rest.find('}'))
                    .map_or(at + 2, |close| at + close + 1);
                return Err(Box::new(
                    Problem::new(
                        ProblemKind::Unsupported,
                        "named escapes (`\\N{…}`) are not supported",
                        Span::new(offset + at, offset + end),
                        "named escape",
                    )
                    .help("write the character itself, or its code as `\\uXXXX`"),
                ));
            }
            // Python keeps an unknown escape as written, backslash included.
            other => {
                value.push('\\');
                value.push(other);
            }
        }
    }
    Ok(value)
}
