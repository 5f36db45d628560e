//! Checking a submitted result, in the order the issue fixes: the step's `output_schema`
//! (for every kind of step), its output contract's JSON Schema, guardrails, then `ensure`s.
//! Every problem is collected; none hides the next.

use serde_json::Value;
use stratum_compiler::plan::{Plan, Step};
use stratum_grammar::{Bindings, EvalErrorKind, Limits};

use super::work::Work;
use super::{Run, inputs};
use crate::state::FlowHeader;
use crate::store::StoreError;

/// How a result failed, by the first kind of check that refused it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    Schema,
    Guardrail,
    Ensure,
    /// No result to check at all (an unattended agent that gave none).
    NoResult,
}

impl Failure {
    pub(crate) fn status(self) -> &'static str {
        match self {
            Failure::Schema => "schema_failed",
            Failure::Guardrail => "guardrail_blocked",
            Failure::Ensure => "ensure_failed",
            Failure::NoResult => "no_result",
        }
    }
}

/// The violations of one result, and the kind of check that failed first.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    pub(crate) failure: Option<Failure>,
    pub(crate) violations: Vec<String>,
}

impl Verdict {
    fn add(&mut self, failure: Failure, violation: String) {
        self.failure.get_or_insert(failure);
        self.violations.push(violation);
    }

    pub(crate) fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The values a step's `ensure`s may read besides `result`: `$.input` and the outputs of the
/// steps it depends on.
pub(crate) struct Scope<'a> {
    pub(crate) input: &'a Value,
    pub(crate) steps: &'a [(String, Value)],
}

impl Scope<'_> {
    pub(crate) fn bindings<'b>(&'b self, result: &'b Value) -> Bindings<'b> {
        let mut bindings = Bindings::new().name("result", result).input(self.input);
        for (id, output) in self.steps {
            bindings = bindings.step(id.as_str(), output);
        }
        bindings
    }
}

/// Checks `result` against everything `step` requires.
pub(crate) fn check_result(
    plan: &Plan,
    step: &Step,
    result: &Value,
    scope: &Scope<'_>,
    limits: &Limits,
    backtrack_limit: usize,
) -> Verdict {
    let mut verdict = Verdict::default();
    if let Some(schema) = &step.output.schema {
        for violation in schema_violations(schema, result) {
            verdict.add(
                Failure::Schema,
                format!("output_schema violation: {violation}"),
            );
        }
    }
    if let Some(contract) = step
        .output
        .contract
        .and_then(|index| plan.contracts.get(index as usize))
    {
        for violation in schema_violations(&contract.schema, result) {
            verdict.add(
                Failure::Schema,
                format!("contract '{}' violation: {violation}", contract.name),
            );
        }
    }
    if !step.guardrails.is_empty() {
        let serialized = canonical_json(result);
        for pattern in &step.guardrails {
            if let Some(violation) = guardrail_violation(pattern, &serialized, backtrack_limit) {
                verdict.add(Failure::Guardrail, violation);
            }
        }
    }
    // The certificate, after the guardrails and before the ensures, which a result that
    // breaks it skips (as the reference orders them).
    if let Some(certificate) = super::certificate::Certificate::of(step.reasoning_template.as_ref())
    {
        let problems = certificate.violations(result);
        if !problems.is_empty() {
            for problem in problems {
                verdict.add(Failure::Ensure, problem);
            }
            return verdict;
        }
    }
    if !step.ensure.is_empty() {
        let bindings = scope.bindings(result);
        for ensure in &step.ensure {
            let explanation = ensure.program.explain(&bindings, limits);
            match &explanation.outcome {
                // A built-in that found several violations (`plan_completion`): each is a
                // violation of its own, in its words, as the reference passes them through.
                Err(error)
                    if error.kind == EvalErrorKind::Violations && !error.violations.is_empty() =>
                {
                    for violation in &error.violations {
                        verdict.add(Failure::Ensure, violation.clone());
                    }
                }
                _ if !explanation.held() => {
                    verdict.add(Failure::Ensure, ensure_violation(&explanation));
                }
                _ => {}
            }
        }
    }
    verdict
}

/// Checks `result` for the current step of `run`, with the values its `ensure`s may read
/// (the flow's inputs, the outputs of the steps it depends on) and the run's limits.
pub(crate) fn check_step_result(
    work: &mut Work<'_>,
    run: &Run<'_>,
    header: &FlowHeader,
    step: &Step,
    result: &Value,
) -> Result<Verdict, StoreError> {
    let outputs = inputs::dependency_outputs(work, run, step)?;
    let scope = Scope {
        input: &header.inputs,
        steps: &outputs,
    };
    Ok(check_result(
        &run.plan,
        step,
        result,
        &scope,
        &run.ctx.config.limits,
        run.ctx.config.guardrail_backtrack_limit,
    ))
}

/// "ensure 'result.confidence > 0.7' failed: `result.confidence` was 0.42": the reference's
/// words, then the operands that decided it.
fn ensure_violation(explanation: &stratum_grammar::Explanation) -> String {
    let mut text = format!("ensure '{}' failed", explanation.source);
    if let Err(error) = &explanation.outcome {
        text.push_str(": ");
        text.push_str(&error.message);
    }
    for (at, operand) in explanation.operands.iter().enumerate() {
        let lead = match (at, &explanation.outcome) {
            (0, Err(_)) => "; ",
            (0, Ok(_)) => ": ",
            _ => ", ",
        };
        text.push_str(&format!("{lead}`{}` was {}", operand.text, operand.repr));
    }
    text
}

/// Every way `instance` breaks `schema`, each with where (a JSON pointer) when not the root.
pub(crate) fn schema_violations(schema: &Value, instance: &Value) -> Vec<String> {
    let validator = match jsonschema::validator_for(schema) {
        Ok(validator) => validator,
        Err(error) => return vec![format!("the schema itself is invalid: {error}")],
    };
    validator
        .iter_errors(instance)
        .map(|error| {
            let path = error.instance_path().to_string();
            if path.is_empty() {
                error.to_string()
            } else {
                format!("{error} (at {path})")
            }
        })
        .collect()
}

/// A guardrail that matches the serialised result (or whose match exceeds its bounds: a
/// pattern that cannot be decided blocks, as the reference's timeout does).
fn guardrail_violation(pattern: &str, serialized: &str, backtrack_limit: usize) -> Option<String> {
    let regex = fancy_regex::RegexBuilder::new(pattern)
        .backtrack_limit(backtrack_limit)
        .build();
    match regex {
        Ok(regex) => match regex.is_match(serialized) {
            Ok(false) => None,
            Ok(true) => Some(format!("guardrail matched: '{pattern}'")),
            Err(_) => Some(format!(
                "guardrail '{pattern}' could not be decided within its bounds; treated as a match"
            )),
        },
        Err(error) => Some(format!(
            "guardrail '{pattern}' is not a valid pattern: {error}"
        )),
    }
}

/// JSON with sorted keys and no whitespace: what guardrails read, what fingerprints and cache
/// keys hash. `serde_json` maps are sorted already.
pub(crate) fn canonical_json(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
