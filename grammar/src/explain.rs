//! Why an `ensure` failed: the values of the operands it read.
//!
//! [`Program::explain`] evaluates the program again with tracing and reports every *leaf*
//! sub-expression it evaluated: names, attribute / index chains (the whole chain, not its
//! prefixes), `$`-references, built-in and method calls; not literals, not the whole
//! expression, not the insides of a generator (their value changes per element; the iterable
//! is reported). Leaves that short-circuiting skipped are not reported: they did not decide
//! the outcome.

use std::fmt;

use serde_json::Value;

use crate::eval_error::EvalError;
use crate::limits::Limits;
use crate::program::Program;
use crate::span::Span;
use crate::value::{Val, short_repr};
use crate::vm::{self, Bindings, Tracer};

/// How many characters of a value an explanation shows.
pub const SHOWN_CHARS: usize = 80;

/// The outcome of an evaluation and the operand values that led to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// The expression's source text.
    pub source: String,
    pub outcome: Result<Value, EvalError>,
    /// The operands evaluated, in source order, each once.
    pub operands: Vec<Operand>,
}

/// One evaluated sub-expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    /// Its source text.
    pub text: String,
    pub span: Span,
    /// Its value (tuples as arrays); `None` if it has no JSON form (a non-finite float).
    pub value: Option<Value>,
    /// The value as Python's `repr()`, cut at about [`SHOWN_CHARS`] characters.
    pub repr: String,
}

impl Explanation {
    /// Whether the expression held (evaluated to a truthy value).
    pub fn held(&self) -> bool {
        self.outcome
            .as_ref()
            .is_ok_and(|value| Val::from_json(value).truthy())
    }
}

struct Recorder<'p> {
    program: &'p Program,
    seen: Vec<Option<(Option<Value>, String)>>,
}

impl<'a> Tracer<'a> for Recorder<'_> {
    const ON: bool = true;

    fn after(&mut self, pc: usize, top: Option<&Val<'a>>) {
        let pc = u32::try_from(pc).unwrap_or(u32::MAX);
        let Ok(leaf) = self.program.leaves.binary_search_by_key(&pc, |(at, _)| *at) else {
            return;
        };
        let (Some(slot), Some(top)) = (self.seen.get_mut(leaf), top) else {
            return;
        };
        if slot.is_none() {
            *slot = Some((top.to_json().ok(), short_repr(top, SHOWN_CHARS)));
        }
    }
}

impl Program {
    /// Evaluates the program with tracing: the outcome and the operand values it read.
    pub fn explain(&self, bindings: &Bindings<'_>, limits: &Limits) -> Explanation {
        let mut recorder = Recorder {
            program: self,
            seen: vec![None; self.leaves.len()],
        };
        let (result, _) = vm::run_from(self, 0, bindings, limits, &mut recorder);
        let outcome = result.and_then(|value| {
            value
                .to_json()
                .map_err(|fault| self.render(fault, self.whole()))
        });
        let mut operands: Vec<Operand> = self
            .leaves
            .iter()
            .zip(recorder.seen)
            .filter_map(|((_, span), seen)| {
                let (value, repr) = seen?;
                Some(Operand {
                    text: self.text(*span).to_owned(),
                    span: *span,
                    value,
                    repr,
                })
            })
            .collect();
        operands.sort_by_key(|operand| (operand.span.start, std::cmp::Reverse(operand.span.end)));
        let mut unique: Vec<Operand> = Vec::with_capacity(operands.len());
        for operand in operands {
            if !unique.iter().any(|seen| seen.text == operand.text) {
                unique.push(operand);
            }
        }
        Explanation {
            source: self.source.clone(),
            outcome,
            operands: unique,
        }
    }
}

impl fmt::Display for Explanation {
    /// "ensure `result.confidence > 0.7` failed: `result.confidence` was 0.42".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ensure `{}` ", self.source)?;
        match &self.outcome {
            Ok(_) if self.held() => f.write_str("held")?,
            Ok(_) => f.write_str("failed")?,
            Err(error) => write!(f, "failed: {}", error.message)?,
        }
        for (i, operand) in self.operands.iter().enumerate() {
            let lead = match (i, &self.outcome) {
                (0, Err(_)) => "; ",
                (0, Ok(_)) => ": ",
                _ => ", ",
            };
            write!(f, "{lead}`{}` was {}", operand.text, operand.repr)?;
        }
        Ok(())
    }
}
