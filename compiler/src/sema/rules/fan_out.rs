//! The format rules of version 0.3 steps: `decompose`, `parallel_dispatch` and `pipeline`.
//!
//! Takes one step and the kind resolution gave it; pushes diagnostics. The rules every step
//! follows (routing, gate keys, `on_fail`, guardrails, `skip_if`, …) are checked for these
//! steps in `steps.rs` like for any other — the reference skips them here, we do not. This
//! module adds what is particular to the new kinds: a `type` that agrees with the step's other
//! keys (E0080), the keys each kind requires (E0013) and the ones it does not read (E0081),
//! `isolation: branch` (E0089), the pipeline's fan-out region (E0088), a fan-out `require`
//! that exceeds its `max` (E0087), keys made useless by `isolation: none` (W0030), stage
//! agents (W0022) and task reasoning templates (E0069). What needs types — `source`,
//! templates, `when` and `exit_when` — is `sema::fan_out`'s.

use crate::diagnostic::{Code, Diagnostic};
use crate::sema::resolve::StepKind;
use crate::sema::rules::steps::{
    key_of, reasoning_sections, step_anchor, step_name, unknown_agent,
};
use crate::sema::rules::{is_written, removal};
use crate::source::Span;
use crate::syntax::ast::{Field, Isolation, Merge, Require, Stage, Step, StepType};
use crate::syntax::keys;

/// Whether the step's `type` names a version 0.3 kind, which decides the keys it must have.
pub(super) fn declares_kind(step: &Step) -> bool {
    matches!(
        step.step_type.as_ref().map(|ty| ty.value),
        Some(StepType::Decompose | StepType::ParallelDispatch | StepType::Pipeline)
    )
}

/// What a step is for these rules: what its `type` says, else what resolution found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Decompose,
    Parallel,
    Pipeline,
    /// Another kind, named for messages ("an inline step").
    Other(&'static str),
}

fn shape(step: &Step, resolved: StepKind) -> Option<Shape> {
    match step.step_type.as_ref().map(|ty| ty.value) {
        Some(StepType::Decompose) => Some(Shape::Decompose),
        Some(StepType::ParallelDispatch) => Some(Shape::Parallel),
        Some(StepType::Pipeline) => Some(Shape::Pipeline),
        _ => match resolved {
            StepKind::Unknown => None,
            StepKind::Decompose => Some(Shape::Decompose),
            StepKind::Parallel => Some(Shape::Parallel),
            StepKind::Pipeline => Some(Shape::Pipeline),
            kind => Some(Shape::Other(kind.noun())),
        },
    }
}

pub(super) fn check_step(step: &Step, resolved: StepKind, diagnostics: &mut Vec<Diagnostic>) {
    type_agrees(step, diagnostics);
    let Some(shape) = shape(step, resolved) else {
        return;
    };
    required_keys(step, shape, diagnostics);
    keys_of_other_kinds(step, shape, diagnostics);
    if let Some(isolation) = &step.isolation
        && isolation.value == Isolation::Branch
    {
        diagnostics.push(branch_isolation(isolation));
    }
    if matches!(shape, Shape::Parallel | Shape::Pipeline) {
        without_worktrees(step, diagnostics);
        deferred_advance(step, diagnostics);
        if let Some(template) = &step.task_reasoning_template {
            let what = format!("the task reasoning template of {}", step_name(step));
            reasoning_sections(&what, template, diagnostics);
        }
    }
    if shape == Shape::Pipeline
        && let Some(stages) = &step.stages
    {
        fan_out_region(step, &stages.value, diagnostics);
        for (index, stage) in stages.value.iter().enumerate() {
            if let Some(agent) = &stage.agent {
                unknown_agent(agent, diagnostics);
            }
            if let Some(template) = &stage.task_reasoning_template {
                let what = format!(
                    "the task reasoning template of stage {index} of {}",
                    step_name(step)
                );
                reasoning_sections(&what, template, diagnostics);
            }
        }
    }
}

// ----- type ------------------------------------------------------------------------------------

/// E0080 `step-type-mismatch`: a `type` that contradicts the key that says what the step runs
/// (`type: inline` with `function:`, `type: parallel_dispatch` with `intent:`, …). Why: the
/// reference ignores `type` for function, inline and flow steps and lets the key decide, so
/// the spec says two things and one of them is silently dropped. Fix: the `type` the key
/// means, or, on a fan-out step, the key it meant (`intent` → `intent_template`).
fn type_agrees(step: &Step, diagnostics: &mut Vec<Diagnostic>) {
    let Some(ty) = &step.step_type else {
        return;
    };
    let written: Vec<(&str, Span)> = [
        ("function", key_of(&step.function)),
        ("intent", key_of(&step.intent)),
        ("flow", key_of(&step.flow)),
        (
            "judge",
            step.judge
                .as_ref()
                .filter(|judge| judge.value.written.is_truthy())
                .map(|judge| judge.key),
        ),
    ]
    .into_iter()
    .filter_map(|(key, span)| Some((key, span?)))
    .collect();
    let expects: &[&str] = match ty.value {
        StepType::Function => &["function"],
        StepType::Inline | StepType::Decompose => &["intent"],
        StepType::Flow => &["flow"],
        StepType::ParallelDispatch | StepType::Pipeline => &[],
    };
    for &(key, span) in &written {
        if expects.contains(&key) {
            continue;
        }
        let diagnostic = Diagnostic::new(
            Code::E0080,
            format!(
                "{} has `type: {}` and `{key}`",
                step_name(step),
                ty.value.as_str()
            ),
            span,
            format!("`{key}` makes it another kind of step"),
        )
        .secondary(
            ty.span,
            format!("`type: {}` is set here", ty.value.as_str()),
        );
        let matching = match key {
            "function" => Some(StepType::Function),
            "intent" => Some(StepType::Inline),
            "flow" => Some(StepType::Flow),
            _ => None,
        };
        diagnostics.push(match (ty.value, key, matching) {
            (StepType::ParallelDispatch, "intent", _) => diagnostic
                .help("a parallel_dispatch step gives each task `intent_template`, filled from the task's element; rename `intent`")
                .fix("rename `intent` to `intent_template`", span, "intent_template"),
            (StepType::ParallelDispatch | StepType::Pipeline, _, _) => diagnostic.help(format!(
                "a {} step runs agents over its `source`; remove `{key}`, or drop `type` and keep the {key} step",
                ty.value.as_str()
            )),
            (StepType::Decompose, _, _) => diagnostic.help(
                "a decompose step is an agent step: it takes `intent`, `agent` and `output_contract`, not a function, flow or judge",
            ),
            (_, _, Some(matching)) => diagnostic
                .help(format!(
                    "`{key}` makes it a {} step; write `type: {}`, or remove `type`, which the key already says",
                    matching.as_str(),
                    matching.as_str()
                ))
                .fix(
                    format!("change the type to `{}`", matching.as_str()),
                    ty.span,
                    matching.as_str(),
                ),
            (_, _, None) => diagnostic.help("remove `type`, or the key that contradicts it"),
        });
    }
}

// ----- required keys ---------------------------------------------------------------------------

/// E0013 `missing-field` for the version 0.3 kinds: a decompose step needs `intent`, `agent`
/// and `output_contract` (the task graph's contract); a parallel_dispatch step `source` and
/// `intent_template`; a pipeline `source` and `stages`.
fn required_keys(step: &Step, shape: Shape, diagnostics: &mut Vec<Diagnostic>) {
    let (noun, required): (&str, &[(&str, &str)]) = match shape {
        Shape::Decompose => (
            "decompose",
            &[
                ("intent", "\"split the work into independent tasks\""),
                ("agent", "claude"),
                ("output_contract", "TaskGraph"),
            ],
        ),
        Shape::Parallel => (
            "parallel_dispatch",
            &[
                ("source", "\"$.steps.plan.output.tasks\""),
                ("intent_template", "\"{description}\""),
            ],
        ),
        Shape::Pipeline => (
            "pipeline",
            &[
                ("source", "\"$.input.items\""),
                ("stages", "[{intent_template: \"…{item}…\"}]"),
            ],
        ),
        Shape::Other(_) => return,
    };
    for &(key, placeholder) in required {
        // `intent` on a parallel step is reported (E0080) as the `intent_template` it means.
        let meant = key == "intent_template" && step.intent.is_some();
        if meant || is_written(&step.keys, key, &keys::STEP) {
            continue;
        }
        diagnostics.push(
            Diagnostic::new(
                Code::E0013,
                format!("{} is a {noun} step without `{key}`", step_name(step)),
                step_anchor(step),
                format!("`{key}` is missing"),
            )
            .help(format!("add `{key}: {placeholder}`")),
        );
    }
}

// ----- keys of other kinds ---------------------------------------------------------------------

/// The keys only parallel_dispatch and pipeline steps read.
fn fan_out_keys(step: &Step) -> [(&'static str, Option<Span>); 10] {
    [
        ("source", key_of(&step.source)),
        ("max_concurrent", key_of(&step.max_concurrent)),
        ("isolation", key_of(&step.isolation)),
        ("require", key_of(&step.require)),
        ("merge", key_of(&step.merge)),
        ("task_timeout", key_of(&step.task_timeout)),
        (
            "task_reasoning_template",
            key_of(&step.task_reasoning_template),
        ),
        ("capture_diff", key_of(&step.capture_diff)),
        ("defer_advance", key_of(&step.defer_advance)),
        ("pre_merge_verify", key_of(&step.pre_merge_verify)),
    ]
}

/// E0081 `not-on-step-kind`: a key the step's kind does not read. Fan-out keys on a step that
/// does not fan out; `intent_template` anywhere but a parallel_dispatch step (a pipeline's
/// stages carry their own); `stages` anywhere but a pipeline; and on a fan-out step, the keys
/// of a single agent run (`reasoning_template`, which is `task_reasoning_template` there) and
/// of iterations. Why: the reference accepts most of them and does nothing with them, so the
/// spec promises what no run does. Fix: remove the key (or rename it, where one is meant).
fn keys_of_other_kinds(step: &Step, shape: Shape, diagnostics: &mut Vec<Diagnostic>) {
    let noun = match shape {
        Shape::Decompose => "a decompose step".to_owned(),
        Shape::Parallel => "a parallel_dispatch step".to_owned(),
        Shape::Pipeline => "a pipeline step".to_owned(),
        Shape::Other(noun) if noun.starts_with(['a', 'e', 'i', 'o', 'u']) => format!("an {noun}"),
        Shape::Other(noun) => format!("a {noun}"),
    };
    let noun = noun.as_str();
    if !matches!(shape, Shape::Parallel | Shape::Pipeline) {
        other_kinds(step, noun, diagnostics);
        return;
    }
    let misplaced: [(&str, Option<Span>, &str); 7] = [
        (
            "intent_template",
            key_of(&step.intent_template).filter(|_| shape == Shape::Pipeline),
            "a pipeline's stages each have their own `intent_template`; move it into the stages",
        ),
        (
            "stages",
            key_of(&step.stages).filter(|_| shape == Shape::Parallel),
            "only a pipeline has stages; write `type: pipeline` to run each element through them",
        ),
        (
            "max_iterations",
            key_of(&step.max_iterations),
            "a fan-out step is not iterated; iterate inside the tasks' own flow, or retry with `retries`",
        ),
        ("exit_criterion", key_of(&step.exit_criterion), NOT_ITERATED),
        ("score_expr", key_of(&step.score_expr), NOT_ITERATED),
        ("accumulate", key_of(&step.accumulate), NOT_ITERATED),
        ("accumulate_key", key_of(&step.accumulate_key), NOT_ITERATED),
    ];
    for (key, span, help) in misplaced {
        if let Some(span) = span {
            diagnostics.push(not_on_kind(step, key, span, noun, help.to_owned()));
        }
    }
    if let Some(template) = &step.reasoning_template {
        diagnostics.push(
            Diagnostic::new(
                Code::E0081,
                format!(
                    "`reasoning_template` is not read on {noun}: each task's answer follows `task_reasoning_template`"
                ),
                template.key,
                "not read here",
            )
            .help("rename it to `task_reasoning_template`")
            .fix(
                "rename to `task_reasoning_template`",
                template.key,
                "task_reasoning_template",
            ),
        );
    }
}

/// Why the iteration keys are not read on a fan-out step.
const NOT_ITERATED: &str = "a fan-out step is not iterated";

/// Fan-out keys, `intent_template` and `stages` on a step that does not fan out.
fn other_kinds(step: &Step, noun: &str, diagnostics: &mut Vec<Diagnostic>) {
    let keys = fan_out_keys(step).into_iter().chain([
        ("intent_template", key_of(&step.intent_template)),
        ("stages", key_of(&step.stages)),
    ]);
    for (key, span) in keys {
        if let Some(span) = span {
            let help = format!(
                "`{key}` is read by parallel_dispatch and pipeline steps, which fan out over a \
                 `source`; remove it, or make the step one with `type: parallel_dispatch`"
            );
            diagnostics.push(not_on_kind(step, key, span, noun, help));
        }
    }
}

fn not_on_kind(step: &Step, key: &str, span: Span, noun: &str, help: String) -> Diagnostic {
    let diagnostic = Diagnostic::new(
        Code::E0081,
        format!("`{key}` is not read on {noun} ({})", step_name(step)),
        span,
        "not read here",
    )
    .help(help);
    // A pipeline's `intent_template` belongs in its stages: removing it would lose the text.
    if key == "intent_template" {
        return diagnostic;
    }
    let value = step_value_span(step, key);
    match value.and_then(|value| removal(&step.keys, step.span, span, value)) {
        Some(removal) => diagnostic.fix(format!("remove `{key}`"), removal, ""),
        None => diagnostic,
    }
}

/// The value span of one of the keys this module reports.
fn step_value_span(step: &Step, key: &str) -> Option<Span> {
    fn value<T>(field: &Option<Field<T>>) -> Option<Span> {
        field.as_ref().map(|field| field.span)
    }
    match key {
        "source" => value(&step.source),
        "max_concurrent" => value(&step.max_concurrent),
        "isolation" => value(&step.isolation),
        "require" => value(&step.require),
        "merge" => value(&step.merge),
        "task_timeout" => value(&step.task_timeout),
        "task_reasoning_template" => value(&step.task_reasoning_template),
        "capture_diff" => value(&step.capture_diff),
        "defer_advance" => value(&step.defer_advance),
        "pre_merge_verify" => value(&step.pre_merge_verify),
        "intent_template" => value(&step.intent_template),
        "stages" => value(&step.stages),
        "max_iterations" => value(&step.max_iterations),
        "exit_criterion" => value(&step.exit_criterion),
        "score_expr" => value(&step.score_expr),
        "accumulate" => value(&step.accumulate),
        "accumulate_key" => value(&step.accumulate_key),
        _ => None,
    }
}

// ----- isolation -------------------------------------------------------------------------------

/// E0089 `unsupported-isolation`: `isolation: branch`. Why: the reference lists it and then
/// refuses every such step when it starts ("branch-mode isolation is not yet supported"); we
/// say so before the run. Fix: `worktree`, which gives each task its own checkout too.
fn branch_isolation(isolation: &Field<Isolation>) -> Diagnostic {
    Diagnostic::new(
        Code::E0089,
        "`isolation: branch` is not supported",
        isolation.span,
        "no runtime runs this",
    )
    .help("`worktree` gives each task its own checkout on a branch of its own; `none` runs the tasks in the project root")
    .fix("use `worktree`", isolation.span, "worktree")
}

/// W0030 `key-without-effect`: `pre_merge_verify` or `capture_diff` with `isolation: none`.
/// Why: both work on a task's own worktree (the gate runs there before its changes are
/// merged; the diff is that worktree's); with every task in the project root there is none.
/// Fix: remove the key, or isolate the tasks in worktrees.
fn without_worktrees(step: &Step, diagnostics: &mut Vec<Diagnostic>) {
    let Some(isolation) = step
        .isolation
        .as_ref()
        .filter(|isolation| isolation.value == Isolation::None)
    else {
        return;
    };
    let keys = [
        ("pre_merge_verify", key_of(&step.pre_merge_verify)),
        (
            "capture_diff",
            key_of(&step.capture_diff)
                .filter(|_| step.capture_diff.as_ref().is_some_and(|c| c.value)),
        ),
    ];
    for (key, span) in keys {
        let Some(span) = span else {
            continue;
        };
        let diagnostic = Diagnostic::new(
            Code::W0030,
            format!("`{key}` has no effect with `isolation: none`"),
            span,
            "no worktree to work on",
        )
        .secondary(isolation.span, "the tasks share the project root")
        .help(format!(
            "`{key}` works on each task's own worktree; remove it, or write `isolation: worktree`"
        ));
        let value = step_value_span(step, key);
        diagnostics.push(
            match value.and_then(|value| removal(&step.keys, step.span, span, value)) {
                Some(removal) => diagnostic.fix(format!("remove `{key}`"), removal, ""),
                None => diagnostic,
            },
        );
    }
}

/// W0031 `defer-advance-without-client-merge`: `defer_advance: true` where the client has
/// nothing to merge before it advances: the server merges (`merge: sequential_apply`, the
/// default), the tasks share the project root (`isolation: none`), or no diff is recorded
/// (the worktrees are removed when the tasks end). Why: the flow would wait for nothing, and
/// an unattended flow forever. Fix: `merge: manual` with `capture_diff: true`, or remove the
/// key.
fn deferred_advance(step: &Step, diagnostics: &mut Vec<Diagnostic>) {
    let Some(defer) = step.defer_advance.as_ref().filter(|defer| defer.value) else {
        return;
    };
    let manual = step
        .merge
        .as_ref()
        .is_some_and(|merge| merge.value == Merge::Manual);
    let captured = step
        .capture_diff
        .as_ref()
        .is_some_and(|capture| capture.value);
    let (why, secondary) = if let Some(isolation) = step
        .isolation
        .as_ref()
        .filter(|isolation| isolation.value == Isolation::None)
    {
        (
            "the tasks change the project root itself: there is nothing to merge",
            Some((isolation.span, "the tasks share the project root")),
        )
    } else if !manual {
        (
            "the server merges the tasks' changes itself (`merge: sequential_apply`)",
            step.merge
                .as_ref()
                .map(|merge| (merge.span, "the server merges")),
        )
    } else if !captured {
        (
            "no diff is recorded for the client to apply, and the worktrees are removed when \
             the tasks end",
            None,
        )
    } else {
        return;
    };
    let mut diagnostic = Diagnostic::new(
        Code::W0031,
        format!(
            "{} waits for the client to merge and advance, but {why}",
            step_name(step)
        ),
        defer.key,
        "waits for nothing",
    )
    .help(
        "for a client that merges, write `merge: manual` and `capture_diff: true`; otherwise \
         remove `defer_advance`, or add a gate step after this one for a person to look at the \
         result",
    );
    if let Some((span, label)) = secondary {
        diagnostic = diagnostic.secondary(span, label);
    }
    diagnostics.push(
        match removal(&step.keys, step.span, defer.key, defer.span) {
            Some(removal) => diagnostic.fix("remove `defer_advance`", removal, ""),
            None => diagnostic,
        },
    );
}

// ----- the fan-out region ------------------------------------------------------------------------

/// E0088 `fanout-shape` and E0087 `impossible-require` on a pipeline's stages: at most one
/// `fanout`, followed (after at least one lane stage) by exactly one `join`; no `exit_when`
/// before the `fanout` (an item that exits there would leave the join waiting for lanes
/// that never start); a `fanout` whose `require` is more than its `max`.
fn fan_out_region(step: &Step, stages: &[Stage], diagnostics: &mut Vec<Diagnostic>) {
    let fanouts: Vec<(usize, Span)> = stages
        .iter()
        .enumerate()
        .filter_map(|(index, stage)| Some((index, stage.fanout.as_ref()?.key)))
        .collect();
    let joins: Vec<(usize, Span)> = stages
        .iter()
        .enumerate()
        .filter_map(|(index, stage)| {
            stage
                .join
                .as_ref()
                .filter(|join| join.value)
                .map(|join| (index, join.key))
        })
        .collect();
    let shape = |message: String, span: Span, label: &str, help: &str| {
        Diagnostic::new(Code::E0088, message, span, label.to_owned()).help(help.to_owned())
    };
    let who = step_name(step);
    for &(index, span) in fanouts.iter().skip(1) {
        diagnostics.push(
            shape(
                format!("{who} has a second `fanout` (stage {index})"),
                span,
                "second fan-out",
                "a pipeline has one fan-out region: split once, then join; run a second split in another step",
            )
            .secondary(fanouts.first().map_or(span, |first| first.1), "the first `fanout`"),
        );
    }
    for &(index, span) in joins.iter().skip(1) {
        diagnostics.push(shape(
            format!("{who} has a second `join` (stage {index})"),
            span,
            "second join",
            "one `join` gathers the lanes of the one `fanout`; remove this one",
        ));
    }
    match (fanouts.first(), joins.first()) {
        (Some(&(_, span)), None) => diagnostics.push(shape(
            format!("{who} has a `fanout` but no `join`"),
            span,
            "lanes never gathered",
            "add `join: true` to the stage that gathers the lanes, after at least one lane stage",
        )),
        (None, Some(&(_, span))) => diagnostics.push(shape(
            format!("{who} has a `join` but no `fanout`"),
            span,
            "nothing to gather",
            "add `fanout: {max: …}` to an earlier stage, whose answer is the list to split, or remove `join`",
        )),
        (Some(&(fanout, fanout_span)), Some(&(join, join_span))) => {
            if join <= fanout {
                diagnostics.push(
                    shape(
                        format!("the `join` of {who} (stage {join}) is not after its `fanout` (stage {fanout})"),
                        join_span,
                        "join before the split",
                        "the join gathers lanes, which start after the `fanout` stage; move `join: true` to a later stage",
                    )
                    .secondary(fanout_span, "the `fanout`"),
                );
            } else if join == fanout + 1 {
                diagnostics.push(
                    shape(
                        format!("{who} has no lane stage between its `fanout` and its `join`"),
                        join_span,
                        "no lanes",
                        "put the stage that works on each element between the two",
                    )
                    .secondary(fanout_span, "the `fanout`"),
                );
            }
        }
        (None, None) => {}
    }
    if let Some(&(fanout, fanout_span)) = fanouts.first() {
        for (index, stage) in stages.iter().enumerate().take(fanout) {
            if let Some(exit) = &stage.exit_when {
                diagnostics.push(
                    shape(
                        format!("stage {index} of {who} has `exit_when` before the `fanout`"),
                        exit.key,
                        "before the fan-out",
                        "an item that exits before the split leaves the join without lanes; move the check after the `join`",
                    )
                    .secondary(fanout_span, "the `fanout`"),
                );
            }
        }
    }
    for stage in stages {
        let Some(fanout) = &stage.fanout else {
            continue;
        };
        if let (Some(max), Some(require)) = (&fanout.value.max, &fanout.value.require)
            && let Require::AtLeast(count) = require.value
            && count > max.value
        {
            diagnostics.push(
                Diagnostic::new(
                    Code::E0087,
                    format!(
                        "the `fanout` requires {count} lanes but makes at most {}",
                        max.value
                    ),
                    require.span,
                    "can never be met",
                )
                .secondary(max.span, format!("at most {} lanes", max.value))
                .help(format!(
                    "require at most {} lanes, raise `max`, or write `require: all`",
                    max.value
                )),
            );
        }
    }
}
