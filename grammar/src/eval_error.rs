//! [`EvalError`]: why an evaluation failed ([`EvalErrorKind`]), in which words, at which span.
//!
//! Plain data, built by the VM from its faults and read by the host; it imports none of the
//! evaluator.

use crate::span::Span;

/// Why an evaluation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum EvalErrorKind {
    /// A free name, `$.input` or a step output that the bindings do not hold.
    UnboundName,
    /// A field or key the object does not have.
    MissingField,
    /// A list or string index out of range.
    IndexOutOfRange,
    /// An operation on a value of the wrong type (Python's `TypeError`).
    Type,
    /// A value the operation refuses (Python's `ValueError`: `int('x')`, `max([])`, …).
    Value,
    DivisionByZero,
    /// Integer arithmetic beyond 64 bits.
    Overflow,
    /// A float result that is infinite or NaN (JSON has no such number).
    NotFinite,
    /// The instruction budget ran out.
    Budget,
    /// A string or list over the size limit.
    ValueSize,
    /// A file built-in without a root, or with a path outside it.
    File,
    /// What the checker rejects (an unknown function, a syntax error) or a malformed program.
    Invalid,
    /// A built-in found several violations, each its own message (`plan_completion`, as the
    /// reference's `ValueError` of a list of strings): they are in [`EvalError::violations`].
    Violations,
}

/// A run-time error: what failed, and the span of the sub-expression that failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{message}")]
pub struct EvalError {
    pub kind: EvalErrorKind,
    /// Lowercase, specific: "division by zero in `a / b`".
    pub message: String,
    /// The failing sub-expression, in the expression's text.
    pub span: Span,
    /// With [`EvalErrorKind::Violations`], each violation the built-in found, as it words it
    /// (the `message` joins them); empty otherwise. The runtime reports each as a violation
    /// of its own, as the reference does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
}
