//! Text → tokens, with the problems that one token shows on its own.
//!
//! Lexing never stops: a character or literal that cannot be a token becomes [`Tok::Error`]
//! with its problem reported here, and the parser takes it as an operand, so one bad
//! character does not hide the rest of the expression. Operators and keywords that Python has
//! and the subset does not (`&&`, `~`, `lambda`, `import`, …) are reported here too, once, and
//! still given their own tokens so that the parser can give them a place in the tree.

mod literal;

use logos::Logos;

use crate::problem::{Problem, ProblemKind};
use crate::span::Span;

/// A token as the parser sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok<'s> {
    Int(i64),
    Float(f64),
    /// A string literal, decoded. Adjacent ones are concatenated by the parser.
    Str(String),
    Ident(&'s str),
    /// `True` / `False`.
    Bool(bool),
    /// `None`.
    None,
    /// `true` / `false`: the JSON spelling, which is also a valid field name.
    JsonBool(bool),
    /// `null`.
    JsonNull,
    And,
    Or,
    Not,
    In,
    Is,
    If,
    Else,
    For,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Dot,
    Colon,
    Dollar,
    Plus,
    Minus,
    Star,
    Slash,
    DoubleSlash,
    Percent,
    /// `**`: the power operator, or keyword-argument unpacking in a call.
    Pow,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    /// `=`: an assignment, or a keyword argument in a call.
    Assign,
    // Reported by the lexer; the parser only places them.
    /// `|`, `&`, `^`, `<<`, `>>`.
    BitOp(&'static str),
    Tilde,
    At,
    Walrus,
    Bang,
    AndAnd,
    OrOr,
    LtGt,
    Semi,
    Lambda,
    /// `yield` or `await`.
    Yield,
    /// A keyword that starts a statement: `import`, `return`, `def`, …
    Statement,
    /// Text that is no token, already reported.
    Error,
    /// An unterminated string, already reported: it runs to the end of its line, so whatever
    /// the parser misses after it (a closing bracket) is likely inside it.
    Unterminated,
}

impl Tok<'_> {
    /// Whether the lexer already reported a problem on this token, so that the parser should
    /// not report another where it stands.
    pub fn is_reported(&self) -> bool {
        matches!(
            self,
            Tok::BitOp(_)
                | Tok::Tilde
                | Tok::At
                | Tok::Walrus
                | Tok::Bang
                | Tok::AndAnd
                | Tok::OrOr
                | Tok::LtGt
                | Tok::Semi
                | Tok::Lambda
                | Tok::Yield
                | Tok::Statement
                | Tok::Error
                | Tok::Unterminated
        )
    }

    /// Whether the token can begin an operand; where an operand is missing, the parser uses
    /// this to decide between recovering in place and leaving the error to an outer rule.
    pub fn starts_operand(&self) -> bool {
        matches!(
            self,
            Tok::Int(_)
                | Tok::Float(_)
                | Tok::Str(_)
                | Tok::Ident(_)
                | Tok::Bool(_)
                | Tok::None
                | Tok::JsonBool(_)
                | Tok::JsonNull
                | Tok::Not
                | Tok::LParen
                | Tok::LBracket
                | Tok::LBrace
                | Tok::Dollar
                | Tok::Plus
                | Tok::Minus
                | Tok::Tilde
                | Tok::Bang
                | Tok::Lambda
                | Tok::Yield
                | Tok::Statement
                | Tok::Error
                | Tok::Unterminated
        )
    }
}

/// The tokens of an expression, in order, each with its span, and the problems found on the way.
#[derive(Clone, Debug, Default)]
pub struct Lexed<'s> {
    pub tokens: Vec<(Tok<'s>, Span)>,
    pub problems: Vec<Problem>,
}

pub fn lex(src: &str) -> Lexed<'_> {
    let mut lexed = Lexed::default();
    let mut raw = Raw::lexer(src).spanned().peekable();
    while let Some((result, range)) = raw.next() {
        let span = Span::from(range.clone());
        let text = src.get(range.clone()).unwrap_or_default();
        let next_start = raw.peek().map_or(src.len(), |(_, next)| next.start);
        let around = Around {
            next_start,
            glued_before: src
                .get(..range.start)
                .and_then(|before| before.chars().next_back())
                .is_some_and(|c| c.is_alphanumeric() || "_)]'\"".contains(c)),
            glued_after: next_start == range.end && next_start < src.len(),
        };
        if text.contains("__") {
            lexed.problems.push(dunder(result, text, span));
        }
        let tok = match result {
            Ok(raw) => token(raw, text, span, around, &mut lexed.problems),
            Err(()) => {
                lexed.problems.push(unexpected_character(text, span));
                Some(Tok::Error)
            }
        };
        if let Some(tok) = tok {
            lexed.tokens.push((tok, span));
        }
    }
    lexed
}

/// What is next to a lexeme, for fixes that replace it with a word or remove it.
#[derive(Clone, Copy)]
struct Around {
    /// Where the next lexeme begins, so that a fix can remove a keyword with the blank after it.
    next_start: usize,
    /// The lexeme follows the end of an operand without a blank.
    glued_before: bool,
    /// The next lexeme follows without a blank.
    glued_after: bool,
}

/// The token for one lexeme; `None` for a comment.
fn token<'s>(
    raw: Raw,
    text: &'s str,
    span: Span,
    around: Around,
    problems: &mut Vec<Problem>,
) -> Option<Tok<'s>> {
    let unsupported =
        |message: &str, label: &str| Problem::new(ProblemKind::Unsupported, message, span, label);
    let (tok, problem) = match raw {
        Raw::Comment => return None,
        Raw::Word => return Some(word(text, span, around.next_start, problems)),
        Raw::Int => literal::int(text, span),
        Raw::Float => literal::float(text, span),
        Raw::Based => literal::based_int(text, span),
        Raw::Imaginary => (
            Tok::Error,
            Some(
                unsupported("complex numbers are not supported", "imaginary literal")
                    .help("expressions compute with integers and floats only"),
            ),
        ),
        Raw::Str | Raw::OpenStr => literal::string(text, span, raw == Raw::Str),
        Raw::LParen => (Tok::LParen, None),
        Raw::RParen => (Tok::RParen, None),
        Raw::LBracket => (Tok::LBracket, None),
        Raw::RBracket => (Tok::RBracket, None),
        Raw::LBrace => (Tok::LBrace, None),
        Raw::RBrace => (Tok::RBrace, None),
        Raw::Comma => (Tok::Comma, None),
        Raw::Dot => (Tok::Dot, None),
        Raw::Colon => (Tok::Colon, None),
        Raw::Dollar => (Tok::Dollar, None),
        Raw::Plus => (Tok::Plus, None),
        Raw::Minus => (Tok::Minus, None),
        Raw::Star => (Tok::Star, None),
        Raw::Slash => (Tok::Slash, None),
        Raw::DoubleSlash => (Tok::DoubleSlash, None),
        Raw::Percent => (Tok::Percent, None),
        Raw::Pow => (Tok::Pow, None),
        Raw::EqEq => (Tok::EqEq, None),
        Raw::NotEq => (Tok::NotEq, None),
        Raw::Lt => (Tok::Lt, None),
        Raw::Le => (Tok::Le, None),
        Raw::Gt => (Tok::Gt, None),
        Raw::Ge => (Tok::Ge, None),
        Raw::Assign => (Tok::Assign, None),
        Raw::Pipe | Raw::Amp | Raw::Caret | Raw::Shl | Raw::Shr => {
            let (op, tok) = match raw {
                Raw::Pipe => ("|", Tok::BitOp("|")),
                Raw::Amp => ("&", Tok::BitOp("&")),
                Raw::Caret => ("^", Tok::BitOp("^")),
                Raw::Shl => ("<<", Tok::BitOp("<<")),
                _ => (">>", Tok::BitOp(">>")),
            };
            let problem = unsupported(
                &format!("the bitwise operator `{op}` is not supported"),
                "bitwise operator",
            );
            let problem = match op {
                "|" => problem.help("to combine conditions, use `or`"),
                "&" => problem.help("to combine conditions, use `and`"),
                _ => problem.help("expressions have no bitwise operators"),
            };
            (tok, Some(problem))
        }
        Raw::Tilde => (
            Tok::Tilde,
            Some(
                unsupported(
                    "the bitwise operator `~` is not supported",
                    "bitwise operator",
                )
                .help("to negate a condition, use `not`"),
            ),
        ),
        Raw::At => (
            Tok::At,
            Some(unsupported(
                "the matrix multiplication operator `@` is not supported",
                "matrix multiplication",
            )),
        ),
        Raw::Walrus => (
            Tok::Walrus,
            Some(
                unsupported(
                    "assignment expressions (`:=`) are not supported",
                    "assignment",
                )
                .help("an expression cannot define variables; repeat the sub-expression instead"),
            ),
        ),
        // `!` is a prefix: the blank after `not` is needed whatever follows.
        Raw::Bang => (
            Tok::Bang,
            Some(spelled(
                span,
                "!",
                "not",
                Around {
                    glued_after: true,
                    ..around
                },
            )),
        ),
        Raw::AndAnd => (Tok::AndAnd, Some(spelled(span, "&&", "and", around))),
        Raw::OrOr => (Tok::OrOr, Some(spelled(span, "||", "or", around))),
        Raw::LtGt => (
            Tok::LtGt,
            Some(
                unsupported("the operator `<>` is not supported", "not Python 3")
                    .help("use `!=`")
                    .replacement(span, "!="),
            ),
        ),
        // Parsed as the operator meant, so that the tree keeps its shape.
        Raw::EqGt | Raw::EqLt => {
            let (tok, meant) = if raw == Raw::EqGt {
                (Tok::Ge, ">=")
            } else {
                (Tok::Le, "<=")
            };
            let problem = Problem::new(
                ProblemKind::Syntax,
                format!("`{text}` is not an operator: write `{meant}`"),
                span,
                format!("use `{meant}`"),
            )
            .help(format!(
                "the comparison is spelled `{meant}`, with `=` last"
            ))
            .replacement(span, meant);
            (tok, Some(problem))
        }
        Raw::Semi => (
            Tok::Semi,
            Some(
                unsupported(
                    "`;` is not supported: an expression is a single expression, not statements",
                    "statement separator",
                )
                .help("to require several conditions at once, join them with `and`"),
            ),
        ),
        Raw::AugAssign => (
            Tok::Error,
            Some(
                unsupported(
                    &format!("assignment (`{text}`) is not supported in an expression"),
                    "assignment",
                )
                .help("an expression computes a value; it cannot change a variable"),
            ),
        ),
        Raw::Arrow => (
            Tok::Error,
            Some(unsupported(
                "`->` is not supported: an expression cannot define a function",
                "function annotation",
            )),
        ),
        Raw::Ellipsis => (
            Tok::Error,
            Some(unsupported("`...` (Ellipsis) is not supported", "Ellipsis")),
        ),
    };
    problems.extend(problem);
    Some(tok)
}

/// `!`, `&&`, `||`: the C spelling of an operator that Python spells as a word.
fn spelled(span: Span, written: &str, word: &str, around: Around) -> Problem {
    let before = if around.glued_before { " " } else { "" };
    let after = if around.glued_after { " " } else { "" };
    Problem::new(
        ProblemKind::Unsupported,
        format!("`{written}` is not an operator here: write `{word}`"),
        span,
        format!("use `{word}`"),
    )
    .help(format!("Python spells this operator `{word}`"))
    .replacement(span, format!("{before}{word}{after}"))
}

/// A keyword, a constant or a name.
fn word<'s>(text: &'s str, span: Span, next_start: usize, problems: &mut Vec<Problem>) -> Tok<'s> {
    let unsupported = |message: String, label: &str, help: &str| {
        Problem::new(ProblemKind::Unsupported, message, span, label).help(help)
    };
    match text {
        "and" => Tok::And,
        "or" => Tok::Or,
        "not" => Tok::Not,
        "in" => Tok::In,
        "is" => Tok::Is,
        "if" => Tok::If,
        "else" => Tok::Else,
        "for" => Tok::For,
        "True" => Tok::Bool(true),
        "False" => Tok::Bool(false),
        "None" => Tok::None,
        "true" => Tok::JsonBool(true),
        "false" => Tok::JsonBool(false),
        "null" => Tok::JsonNull,
        "lambda" => {
            problems.push(unsupported(
                "`lambda` is not supported".into(),
                "function definition",
                "an expression cannot define functions; to test every item, use a generator \
                 in a call: `all(t.passed for t in result.tests)`",
            ));
            Tok::Lambda
        }
        "yield" | "await" => {
            problems.push(unsupported(
                format!("`{text}` is not supported"),
                "not in an expression",
                "an expression is evaluated once to a value, outside any generator or coroutine",
            ));
            Tok::Yield
        }
        "return" | "assert" => {
            let whole = Span::new(span.start as usize, next_start.max(span.end as usize));
            problems.push(
                unsupported(
                    format!("statements are not supported: `{text}`"),
                    "statement",
                    &format!("write the expression alone, without `{text}`"),
                )
                .replacement(whole, ""),
            );
            Tok::Statement
        }
        _ if is_statement_keyword(text) => {
            problems.push(unsupported(
                format!("statements are not supported: `{text}`"),
                "statement",
                "a Stratum expression is a single Python expression, such as \
                 `result.score > 0.5`",
            ));
            Tok::Statement
        }
        _ => Tok::Ident(text),
    }
}

/// Python keywords that only begin or belong to statements.
fn is_statement_keyword(word: &str) -> bool {
    matches!(
        word,
        "as" | "async"
            | "break"
            | "class"
            | "continue"
            | "def"
            | "del"
            | "elif"
            | "except"
            | "finally"
            | "from"
            | "global"
            | "import"
            | "nonlocal"
            | "pass"
            | "raise"
            | "try"
            | "while"
            | "with"
    )
}

/// Whether `word` is a Python keyword: such a word cannot be a name nor a field after `.`.
pub fn is_python_keyword(word: &str) -> bool {
    is_statement_keyword(word)
        || matches!(
            word,
            "and"
                | "or"
                | "not"
                | "in"
                | "is"
                | "if"
                | "else"
                | "for"
                | "lambda"
                | "yield"
                | "await"
                | "return"
                | "assert"
                | "True"
                | "False"
                | "None"
        )
}

fn dunder(raw: Result<Raw, ()>, text: &str, span: Span) -> Problem {
    match raw {
        Ok(Raw::Word) => Problem::new(
            ProblemKind::Dunder,
            format!("dunder names are not allowed: `{text}`"),
            span,
            "name contains `__`",
        )
        .help(
            "names with `__` reach Python internals, so they are rejected everywhere to keep \
             specs portable to the reference runtime",
        ),
        Ok(Raw::Comment) => Problem::new(
            ProblemKind::Dunder,
            "`__` is not allowed anywhere in an expression, even inside a comment",
            span,
            "comment contains `__`",
        )
        .help("the reference runtime rejects any expression whose text contains `__`"),
        _ => Problem::new(
            ProblemKind::Dunder,
            "`__` is not allowed anywhere in an expression, even inside a string",
            span,
            "contains `__`",
        )
        .help(
            "the reference runtime rejects any expression whose text contains `__`; build the \
             text another way, e.g. `'_' + '_'`",
        ),
    }
}

fn unexpected_character(text: &str, span: Span) -> Problem {
    let Some(c) = text.chars().next() else {
        return Problem::new(
            ProblemKind::Syntax,
            "unexpected character",
            span,
            "unexpected",
        );
    };
    let shown = if c.is_whitespace() || c.is_control() {
        format!("U+{:04X}", u32::from(c))
    } else {
        format!("`{c}`")
    };
    let problem = Problem::new(
        ProblemKind::Syntax,
        format!("unexpected character {shown}"),
        span,
        "not part of any token",
    );
    match c {
        '\\' => problem.help("a backslash is only allowed inside a string literal"),
        '`' | '’' | '‘' | '“' | '”' => {
            problem.help("strings are written between straight quotes: `'text'` or `\"text\"`")
        }
        '?' => problem.help("for a conditional, write `a if condition else b`"),
        _ if c.is_whitespace() => problem
            .help("this is not an ordinary space; replace it with one")
            .replacement(span, " "),
        _ if c.is_alphabetic() => {
            problem.help("names may contain only ASCII letters, digits and `_`")
        }
        _ => problem,
    }
}

#[derive(Logos, Clone, Copy, Debug, PartialEq, Eq)]
#[logos(skip r"[ \t\r\n\f]+")]
#[logos(skip r"\\\r?\n")]
enum Raw {
    #[regex(r"#[^\n]*", allow_greedy = true)]
    Comment,
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*")]
    Word,
    #[regex(r"[0-9](_?[0-9])*")]
    Int,
    #[regex(r"([0-9](_?[0-9])*)?\.[0-9](_?[0-9])*([eE][+-]?[0-9](_?[0-9])*)?")]
    #[regex(r"[0-9](_?[0-9])*\.([eE][+-]?[0-9](_?[0-9])*)?")]
    #[regex(r"[0-9](_?[0-9])*[eE][+-]?[0-9](_?[0-9])*")]
    Float,
    #[regex(r"0[xXoObB][0-9A-Za-z_]*")]
    Based,
    #[regex(
        r"(([0-9](_?[0-9])*)?\.?[0-9](_?[0-9])*([eE][+-]?[0-9](_?[0-9])*)?|[0-9](_?[0-9])*\.)[jJ]"
    )]
    Imaginary,
    #[regex(r#"([rRuUbBfF]|[rR][bBfF]|[bBfF][rR])?['"]"#, literal::scan_string)]
    Str,
    /// An unterminated string (the scanner returns it instead of `Str`).
    OpenStr,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token(",")]
    Comma,
    #[token(".")]
    Dot,
    #[token("...")]
    Ellipsis,
    #[token(":")]
    Colon,
    #[token(";")]
    Semi,
    #[token("$")]
    Dollar,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    #[token("//")]
    DoubleSlash,
    #[token("%")]
    Percent,
    #[token("**")]
    Pow,
    #[token("==")]
    EqEq,
    #[token("!=")]
    NotEq,
    #[token("<")]
    Lt,
    #[token("<=")]
    Le,
    #[token(">")]
    Gt,
    #[token(">=")]
    Ge,
    #[token("=")]
    Assign,
    #[token("|")]
    Pipe,
    #[token("&")]
    Amp,
    #[token("^")]
    Caret,
    #[token("<<")]
    Shl,
    #[token(">>")]
    Shr,
    #[token("~")]
    Tilde,
    #[token("@")]
    At,
    #[token(":=")]
    Walrus,
    #[token("!")]
    Bang,
    #[token("&&")]
    AndAnd,
    #[token("||")]
    OrOr,
    #[token("<>")]
    LtGt,
    #[token("->")]
    Arrow,
    #[token("=>")]
    EqGt,
    #[token("=<")]
    EqLt,
    #[regex(r"(\+|-|\*|/|//|%|\*\*|\||&|\^|<<|>>|@)=")]
    AugAssign,
}
