//! The output of a version 0.3 fan-out step: what `$.steps.<id>.output` and its `ensure`'s
//! `result` are once every task has reported.
//!
//! The runtime builds these records from the tasks' results (the reference's shapes, closed so
//! that a misspelt field is an error here rather than `None` at run time): a parallel step
//! gives `{tasks, merge_status, completed, failed, outcome}`, a pipeline
//! `{items, require_satisfied, merge_status, tasks, outcome}`.
//!
//! Beside them, the output of a gate whose function declares `output`: the person's typed
//! decision, the seed's `HumanDecision[T]`.

use stratum_grammar::types::{Literal, Record, RecordField, Type};

/// The values of `outcome`: whether `require` was met and nothing conflicted.
const OUTCOMES: [&str; 2] = ["complete", "failed"];

/// One task's report: `{task_id, status, result}`.
fn task() -> Type {
    record(&[
        ("task_id", Type::String),
        ("status", Type::String),
        ("result", Type::Any),
    ])
}

fn outcome() -> Type {
    Type::enumeration(
        OUTCOMES
            .iter()
            .map(|word| Literal::Str((*word).to_owned()))
            .collect(),
    )
}

/// The output of a `parallel_dispatch` step.
pub fn parallel() -> Type {
    record(&[
        ("tasks", Type::list(task())),
        ("merge_status", Type::Any),
        ("completed", Type::list(task())),
        ("failed", Type::list(task())),
        ("outcome", outcome()),
    ])
}

/// The output of a `pipeline` step.
pub fn pipeline() -> Type {
    let item = record(&[
        ("item", Type::Any),
        ("status", Type::String),
        ("result", Type::Any),
        ("stages", Type::Any),
    ]);
    record(&[
        ("items", Type::list(item)),
        ("require_satisfied", Type::Bool),
        ("merge_status", Type::Any),
        ("tasks", Type::list(task())),
        ("outcome", outcome()),
    ])
}

/// The output of a gate step whose function declares `output: T`, once a person approved it:
/// `{value: T, outcome, reviewer, rationale, decided_at, review_id}` (the seed's
/// `HumanDecision[T]`). `reviewer` is who the server knows decided (a token's name, the
/// operator's), or null.
pub fn human_decision(value: Type) -> Type {
    record(&[
        ("value", value),
        ("outcome", Type::String),
        ("reviewer", Type::Any),
        ("rationale", Type::String),
        ("decided_at", Type::String),
        ("review_id", Type::String),
    ])
}

fn record(fields: &[(&str, Type)]) -> Type {
    Type::record(Record {
        fields: fields
            .iter()
            .map(|(name, ty)| RecordField {
                name: (*name).to_owned(),
                ty: ty.clone(),
            })
            .collect(),
        open: false,
    })
}
