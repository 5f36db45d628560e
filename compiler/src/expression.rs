//! Expressions inside a spec.
//!
//! Every `ensure`, `skip_if`, `exit_criterion`, `score_expr`, `accumulate`, `accumulate_key`,
//! and pipeline stage `when` and `exit_when`
//! string is parsed by `stratum-grammar`. Its problems carry spans relative to the expression's
//! decoded text; [`diagnostic`] turns each into one of our diagnostics, with every span moved
//! into the file through the scalar's offset map, so that an error inside a double-quoted
//! scalar with escapes still underlines the exact characters written in the spec.

use crate::diagnostic::{Code, Diagnostic};
use crate::source::Span;
use crate::syntax::ast::{Ast, PredicateKind, Text};
use stratum_grammar::{Problem, ProblemKind};

/// The diagnostic code of each kind of expression problem.
pub fn code(kind: ProblemKind) -> Code {
    match kind {
        ProblemKind::Syntax => Code::E0025,
        ProblemKind::Unsupported => Code::E0026,
        ProblemKind::Dunder => Code::E0027,
        ProblemKind::UnknownName => Code::E0028,
        ProblemKind::UnknownField => Code::E0029,
        ProblemKind::OperandTypes => Code::E0030,
        ProblemKind::UnknownFunction => Code::E0031,
        ProblemKind::UnsupportedBuiltin => Code::E0049,
        ProblemKind::CallArguments => Code::E0032,
        ProblemKind::UnknownMethod => Code::E0033,
        ProblemKind::EnumLiteral => Code::E0047,
        ProblemKind::InputWithoutField => Code::E0048,
        ProblemKind::NoneComparison => Code::W0003,
        ProblemKind::ConstantExpression => Code::W0004,
    }
}

/// `problem` as a diagnostic. `source` is the expression's text and `locate` maps a span in it
/// to a span in the file.
pub fn diagnostic(
    problem: &Problem,
    source: &str,
    locate: impl Fn(stratum_grammar::Span) -> Span,
) -> Diagnostic {
    let mut diagnostic = Diagnostic::new(
        code(problem.kind),
        problem.message.clone(),
        locate(problem.span),
        problem.label.clone(),
    );
    for (span, label) in &problem.secondary {
        diagnostic = diagnostic.secondary(locate(*span), label.clone());
    }
    if let Some(help) = &problem.help {
        diagnostic = diagnostic.help(help.clone());
    }
    if let Some(replacement) = &problem.replacement {
        let message = match source.get(replacement.span.range()) {
            Some(old) if !old.is_empty() && replacement.text.is_empty() => {
                format!("remove `{}`", old.trim())
            }
            Some(old) if !old.is_empty() => {
                format!("replace `{old}` with `{}`", replacement.text)
            }
            _ => format!("insert `{}`", replacement.text),
        };
        diagnostic = diagnostic.fix(message, locate(replacement.span), replacement.text.clone());
    }
    diagnostic
}

/// Where an expression stands in a spec, which decides the names it may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Ensure,
    SkipIf,
    ExitCriterion,
    ScoreExpr,
    Accumulate,
    AccumulateKey,
    /// A pipeline stage's `when`.
    When,
    /// A pipeline stage's `exit_when`.
    ExitWhen,
    /// The `statement` of a judge's deterministic predicate.
    Statement,
}

impl Role {
    /// The key the expression is written under.
    pub fn key(self) -> &'static str {
        match self {
            Role::Ensure => "ensure",
            Role::SkipIf => "skip_if",
            Role::ExitCriterion => "exit_criterion",
            Role::ScoreExpr => "score_expr",
            Role::Accumulate => "accumulate",
            Role::AccumulateKey => "accumulate_key",
            Role::When => "when",
            Role::ExitWhen => "exit_when",
            Role::Statement => "statement",
        }
    }
}

/// Every expression string of the spec with its role, in source order.
pub fn expressions(ast: &Ast) -> Vec<(Role, &Text)> {
    let mut found = Vec::new();
    for function in &ast.functions {
        if let Some(ensure) = &function.ensure {
            found.extend(ensure.value.iter().map(|text| (Role::Ensure, text)));
        }
    }
    for flow in &ast.flows {
        for step in flow.steps.iter().flat_map(|steps| &steps.value) {
            if let Some(ensure) = &step.ensure {
                found.extend(ensure.value.iter().map(|text| (Role::Ensure, text)));
            }
            let single = [
                (Role::SkipIf, &step.skip_if),
                (Role::ExitCriterion, &step.exit_criterion),
                (Role::ScoreExpr, &step.score_expr),
                (Role::Accumulate, &step.accumulate),
                (Role::AccumulateKey, &step.accumulate_key),
            ];
            for (role, field) in single {
                if let Some(field) = field {
                    found.push((role, &field.value));
                }
            }
            let predicates = step
                .judge
                .iter()
                .flat_map(|judge| &judge.value.predicates)
                .flat_map(|predicates| &predicates.value);
            for predicate in predicates {
                if let (Some(kind), Some(statement)) = (&predicate.kind, &predicate.statement)
                    && kind.value == PredicateKind::Deterministic
                {
                    found.push((Role::Statement, &statement.value));
                }
            }
            for stage in step.stages.iter().flat_map(|stages| &stages.value) {
                for (role, field) in [
                    (Role::When, &stage.when),
                    (Role::ExitWhen, &stage.exit_when),
                ] {
                    if let Some(field) = field {
                        found.push((role, &field.value));
                    }
                }
            }
        }
    }
    found.sort_by_key(|(_, text)| text.span);
    found
}

/// The parsed expressions of a spec, by the span of the scalar they were written in: every
/// expression field and every step input that is a `$`-reference. Only expressions without
/// syntax errors are kept, so that later stages type-check nothing that was already reported.
#[derive(Clone, Debug, Default)]
pub struct Expressions {
    parsed: std::collections::HashMap<Span, stratum_grammar::ast::Expr>,
}

impl Expressions {
    /// The expression written in `text`, when it parsed cleanly.
    pub fn get(&self, text: &Text) -> Option<&stratum_grammar::ast::Expr> {
        self.parsed.get(&text.span)
    }

    pub(crate) fn insert(&mut self, text: &Text, expr: stratum_grammar::ast::Expr) {
        self.parsed.insert(text.span, expr);
    }
}

/// Parses every expression of the spec, reports its syntax problems and keeps what parsed.
/// Type checks against contracts need the resolved spec and belong to the middle end.
pub fn parse_all(ast: &Ast, diagnostics: &mut Vec<Diagnostic>) -> Expressions {
    let mut expressions = Expressions::default();
    for (_, text) in self::expressions(ast) {
        let parsed = stratum_grammar::parse(&text.value);
        diagnostics.extend(
            parsed
                .problems
                .iter()
                .map(|problem| diagnostic(problem, &text.value, |span| text.span_of(span.range()))),
        );
        if let (Some(expr), true) = (parsed.expr, parsed.problems.is_empty()) {
            expressions.insert(text, expr);
        }
    }
    expressions
}
