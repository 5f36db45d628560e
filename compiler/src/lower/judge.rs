//! Lowering judge steps: every predicate with the reference's defaults written out, and each
//! deterministic statement compiled for the VM, so the runtime's first tier evaluates bytecode
//! (never the text) with its file built-ins rooted at the judge's staging directory.

use super::{LowerError, Lowering};
use crate::plan::{self, Action};
use crate::syntax::ast::{PredicateKind, Stakes, Step};

impl Lowering<'_> {
    /// A judge step's action.
    pub(super) fn judge(&self, step: &Step) -> Result<Action, LowerError> {
        let judge = step
            .judge
            .as_ref()
            .ok_or_else(|| LowerError::Internal("a judge step without `judge`".to_owned()))?;
        let judge = &judge.value;
        let mut predicates = Vec::new();
        for predicate in judge.predicates.iter().flat_map(|list| &list.value) {
            let (Some(id), Some(kind), Some(statement)) =
                (&predicate.id, &predicate.kind, &predicate.statement)
            else {
                return Err(LowerError::Internal(
                    "a judge predicate without `id`, `type` or `statement`".to_owned(),
                ));
            };
            let check = match kind.value {
                PredicateKind::Deterministic => Some(self.expression(&statement.value)?),
                PredicateKind::Verified | PredicateKind::Judged => None,
            };
            predicates.push(plan::JudgePredicate {
                id: id.value.clone(),
                kind: match kind.value {
                    PredicateKind::Deterministic => plan::PredicateKind::Deterministic,
                    PredicateKind::Verified => plan::PredicateKind::Verified,
                    PredicateKind::Judged => plan::PredicateKind::Judged,
                },
                statement: statement.value.value.clone(),
                applied_gate: predicate
                    .applied_gate
                    .as_ref()
                    .map_or(plan::DEFAULT_APPLIED_GATE, |gate| gate.value),
                check,
            });
        }
        if predicates.is_empty() {
            return Err(LowerError::Internal(
                "a judge without predicates".to_owned(),
            ));
        }
        let budget = judge.budget.as_ref().map(|budget| &budget.value);
        Ok(Action::Judge {
            predicates,
            stakes: match judge.stakes.as_ref().map(|stakes| stakes.value) {
                Some(Stakes::Cheap) => plan::Stakes::Cheap,
                Some(Stakes::Default) | None => plan::Stakes::Default,
                Some(Stakes::Paranoid) => plan::Stakes::Paranoid,
            },
            budget: plan::JudgeBudget {
                max_turns: budget.and_then(|b| b.max_turns.as_ref()).map(|f| f.value),
                max_dollars: budget.and_then(|b| b.max_dollars.as_ref()).map(|f| f.value),
                max_wall_clock_s: budget
                    .and_then(|b| b.max_wall_clock_s.as_ref())
                    .map(|f| f.value),
            },
        })
    }
}
