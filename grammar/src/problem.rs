//! What the parser and the checker report: a [`Problem`] is a diagnostic without a file.
//!
//! The grammar crate knows nothing of YAML or of the compiler's diagnostic codes. The compiler
//! maps each [`ProblemKind`] to its code, and each [`Span`] into the spec file through the
//! scalar's offset map, then renders them like every other diagnostic.

use crate::span::Span;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Error,
    Warning,
}

/// Every kind of problem, one per diagnostic code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProblemKind {
    /// A token or character that cannot stand where it is; an unterminated string; a missing
    /// operand or closing bracket.
    Syntax,
    /// Valid Python that is outside the subset: lambda, assignment, walrus, slices,
    /// comprehensions other than a generator in a call, f-strings, `**`, bitwise operators, …
    Unsupported,
    /// `__` in a name or anywhere else in the text.
    Dunder,
    /// A name the environment does not declare (or a `$`-reference it cannot resolve).
    UnknownName,
    /// A field that the record type does not have.
    UnknownField,
    /// An operator applied to operands of types it does not accept.
    OperandTypes,
    /// A call of a function that is not a built-in.
    UnknownFunction,
    /// A built-in of the reference runtime that is not supported here
    /// ([`NOT_SUPPORTED`](crate::builtins::NOT_SUPPORTED)).
    UnsupportedBuiltin,
    /// A built-in called with the wrong number or types of arguments.
    CallArguments,
    /// A method that the receiver's type does not have, or called with wrong arguments.
    UnknownMethod,
    /// `==` / `in` against a literal that is not among an enum's values (an error: the test
    /// is decided before it runs, and the literal is almost always a misspelt value).
    EnumLiteral,
    /// `$.input` with no field after it: the reference resolves only `$.input.<field>`.
    InputWithoutField,
    /// Warning: `== None` / `is None` on a value that cannot be `None`.
    NoneComparison,
    /// Warning: the expression's value does not depend on its inputs.
    ConstantExpression,
}

impl ProblemKind {
    pub fn severity(self) -> Severity {
        match self {
            ProblemKind::NoneComparison | ProblemKind::ConstantExpression => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

/// A suggested replacement of the text under `span` (in the expression's text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replacement {
    pub span: Span,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub kind: ProblemKind,
    /// Lowercase, specific: "unknown field `confidense` on `result`".
    pub message: String,
    /// The exact span, and the short text drawn under it.
    pub span: Span,
    pub label: String,
    /// Further spans with their labels (where a name is declared, the other operand, …).
    pub secondary: Vec<(Span, String)>,
    /// The concrete fix, in words.
    pub help: Option<String>,
    /// A machine-applicable fix, when there is exactly one (a did-you-mean rename).
    pub replacement: Option<Replacement>,
}

impl Problem {
    pub fn new(
        kind: ProblemKind,
        message: impl Into<String>,
        span: Span,
        label: impl Into<String>,
    ) -> Problem {
        Problem {
            kind,
            message: message.into(),
            span,
            label: label.into(),
            secondary: Vec::new(),
            help: None,
            replacement: None,
        }
    }

    pub fn secondary(mut self, span: Span, label: impl Into<String>) -> Problem {
        self.secondary.push((span, label.into()));
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Problem {
        self.help = Some(help.into());
        self
    }

    pub fn replacement(mut self, span: Span, text: impl Into<String>) -> Problem {
        self.replacement = Some(Replacement {
            span,
            text: text.into(),
        });
        self
    }

    pub fn severity(&self) -> Severity {
        self.kind.severity()
    }

    pub fn is_error(&self) -> bool {
        self.severity() == Severity::Error
    }
}
