//! The rules of one flow's steps: what a step runs (exactly one of `function`, `intent`, `flow`
//! and `judge`), what gate, flow and function steps may carry, gate routing, `on_fail`,
//! iterations, `cache` and step guardrails.
//!
//! Takes one flow and its resolved model (each step's kind, the execution order); pushes
//! diagnostics. A step's kind is what resolution found: the key it runs by and, for
//! `function`, the function's `mode`; when that cannot be told (the function or flow does not
//! resolve, the function has no valid mode, or the step names several kinds) every rule that
//! depends on the kind is skipped.

use crate::diagnostic::{Code, Diagnostic};
use crate::diagnostic::{backticked, did_you_mean};
use crate::sema::resolve::StepKind;
use crate::sema::resolve::listing;
use crate::sema::rules::functions::invalid_guardrail;
use crate::sema::rules::{certificate, fan_out};
use crate::sema::rules::{is_v02, is_written, removal, removal_among};
use crate::sema::symbols::{Symbols, flow_steps};
use crate::sema::{FlowModel, may_suggest};
use crate::source::Span;
use crate::syntax::ast::{Ast, Field, Flow, Function, Mode, Step, Version};
use crate::syntax::keys;
use crate::syntax::tree::{Node, NodeKind};

/// What a step runs.
#[derive(Clone, Copy)]
enum Kind<'a> {
    /// A step whose function is `infer` or `compute`.
    Function(&'a Function),
    /// A step whose function is a `gate`.
    Gate(&'a Function),
    /// An `intent` step.
    Inline,
    /// A `flow` step whose flow resolves.
    Flow,
    Judge,
    /// An inline step with `type: decompose`.
    Decompose,
    /// A `parallel_dispatch` or `pipeline` step.
    FanOut,
    /// Not known: see the module documentation.
    Unknown,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn check_flow(
    ast: &Ast,
    symbols: &Symbols,
    version: Option<Version>,
    flow_index: usize,
    flow: &Flow,
    model: Option<&FlowModel>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let steps = flow_steps(flow);
    let order = model.map_or(&[][..], |model| model.dag.order.as_slice());
    for (step_index, step) in steps.iter().enumerate() {
        // A version 0.3 `type` other than function, inline and flow decides what must be
        // there; the fan-out rules report what is not.
        if !fan_out::declares_kind(step) {
            report_modes(version, step, diagnostics);
        }
        let resolved = model
            .and_then(|model| model.steps.get(step_index))
            .map_or(StepKind::Unknown, |info| info.kind);
        let kind = kind(ast, resolved);
        match kind {
            Kind::Gate(function) => {
                gate_step(
                    symbols,
                    flow_index,
                    steps,
                    order,
                    step_index,
                    step,
                    function,
                    diagnostics,
                );
            }
            Kind::Function(function) => function_step(step, function, diagnostics),
            Kind::Flow => flow_step(step, diagnostics),
            Kind::Inline | Kind::Judge | Kind::Decompose | Kind::FanOut | Kind::Unknown => {}
        }
        fan_out::check_step(step, resolved, diagnostics);
        if !matches!(kind, Kind::Gate(_) | Kind::Unknown) {
            gate_keys_on_non_gate_step(step, diagnostics);
            on_fail(step, kind, diagnostics);
        }
        if !matches!(kind, Kind::Gate(_)) {
            iteration_keys(step, diagnostics);
        }
        cache(step, kind, diagnostics);
        skip_reason_without_skip_if(step, diagnostics);
        // On a function or flow step the template is itself the mistake (E0058, E0059).
        if matches!(
            kind,
            Kind::Inline | Kind::Judge | Kind::Decompose | Kind::Unknown
        ) {
            reasoning_template(step, diagnostics);
        }
        routes_to_itself(step, kind, diagnostics);
        if let Some(agent) = &step.agent {
            unknown_agent(agent, diagnostics);
        }
        if matches!(
            kind,
            Kind::Inline | Kind::Judge | Kind::Decompose | Kind::FanOut | Kind::Unknown
        ) {
            for pattern in step.guardrails.iter().flat_map(|g| &g.value) {
                diagnostics.extend(invalid_guardrail(pattern));
            }
        }
    }
}

/// W0020 `max-rounds-without-gate`: `max_rounds` on a flow none of whose steps is a gate.
/// Why: rounds count the revise cycles of gates; without a gate the key bounds nothing. Fix:
/// remove it (to stop a loop of `next` / `on_fail` routes, the runtime's own round limit
/// applies to every step entered again).
pub(super) fn max_rounds_without_gate(
    ast: &Ast,
    flow: &Flow,
    model: Option<&FlowModel>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let (Some(max_rounds), Some(model)) = (&flow.max_rounds, model) else {
        return;
    };
    let mut has_gate = false;
    for info in &model.steps {
        match kind(ast, info.kind) {
            Kind::Gate(_) => has_gate = true,
            // A step whose kind is unknown may be a gate once its name is fixed.
            Kind::Unknown => return,
            _ => {}
        }
    }
    if has_gate {
        return;
    }
    let diagnostic = Diagnostic::new(
        Code::W0020,
        format!(
            "flow `{}` has `max_rounds` but no gate step, so it bounds nothing",
            flow.name.value
        ),
        max_rounds.key,
        "no gate to revise",
    )
    .help(
        "`max_rounds` limits how often a gate's `on_revise` sends the flow back; remove it, or \
         add the gate step it is meant for",
    );
    // The flow's keys, to remove the entry up to the next one.
    let keys: Vec<Span> = [
        flow.input.as_ref().map(|field| field.key),
        flow.output.as_ref().map(|field| field.key),
        flow.budget.as_ref().map(|field| field.key),
        Some(max_rounds.key),
        flow.steps.as_ref().map(|field| field.key),
    ]
    .into_iter()
    .flatten()
    .collect();
    diagnostics.push(
        match removal_among(&keys, flow.span, max_rounds.key, max_rounds.span) {
            Some(span) => diagnostic.fix("remove `max_rounds`", span, ""),
            None => diagnostic,
        },
    );
}

/// Reports a step that names none, or several, of `function`, `intent`, `flow` and `judge`
/// (what [`resolve`](crate::sema::resolve) then calls [`StepKind::Unknown`]).
fn report_modes(version: Option<Version>, step: &Step, diagnostics: &mut Vec<Diagnostic>) {
    let mut named: Vec<(&str, Span)> = [
        ("function", step.function.as_ref().map(|f| f.key)),
        ("intent", step.intent.as_ref().map(|f| f.key)),
        ("flow", step.flow.as_ref().map(|f| f.key)),
        (
            "judge",
            step.judge
                .as_ref()
                .filter(|judge| judge.value.written.is_truthy())
                .map(|f| f.key),
        ),
    ]
    .into_iter()
    .filter_map(|(key, span)| Some((key, span?)))
    .collect();
    named.sort_by_key(|&(_, span)| span.start);
    match named.as_slice() {
        [] => {
            let written = ["function", "intent", "flow", "judge"]
                .iter()
                .any(|key| is_written(&step.keys, key, &keys::STEP));
            // Version 0.1 steps require `function`, which the front end reports when absent.
            if !written && is_v02(version) {
                diagnostics.push(missing_step_kind(step));
            }
        }
        [(first, first_span), rest @ ..] => {
            for &(key, span) in rest {
                diagnostics.push(conflicting_step_kinds(step, first, *first_span, key, span));
            }
        }
    }
}

/// The step's kind as the rules need it, from what resolution found.
fn kind(ast: &Ast, resolved: StepKind) -> Kind<'_> {
    let function = |index: usize| ast.functions.get(index);
    match resolved {
        StepKind::Function(index) => function(index).map_or(Kind::Unknown, Kind::Function),
        StepKind::Gate(index) => function(index).map_or(Kind::Unknown, Kind::Gate),
        StepKind::Inline => Kind::Inline,
        StepKind::Flow(_) => Kind::Flow,
        StepKind::Judge => Kind::Judge,
        StepKind::Decompose => Kind::Decompose,
        StepKind::Parallel | StepKind::Pipeline => Kind::FanOut,
        StepKind::Unknown => Kind::Unknown,
    }
}

/// How a step is named in messages.
pub(super) fn step_name(step: &Step) -> String {
    match &step.id {
        Some(id) => format!("step `{}`", id.value),
        None => "this step".to_owned(),
    }
}

/// Where a diagnostic about the whole step points: its id, else its first key.
pub(super) fn step_anchor(step: &Step) -> Span {
    match (&step.id, step.keys.first()) {
        (Some(id), _) => id.span,
        (None, Some(key)) => key.span,
        (None, None) => step.span,
    }
}

/// E0050 `missing-step-kind`: none of `function`, `intent` and `flow`. Why: nothing says what
/// the step runs. Fix: add one.
fn missing_step_kind(step: &Step) -> Diagnostic {
    Diagnostic::new(
        Code::E0050,
        format!("{} has none of `function`, `intent` and `flow`", step_name(step)),
        step_anchor(step),
        "runs nothing",
    )
    .help("add `function: <name>` to run a function, `intent: \"…\"` to give an agent an inline task, or `flow: <name>` to run a sub-flow")
}

/// E0051 `conflicting-step-kinds`: more than one of `function`, `intent`, `flow` and `judge`.
/// Why: each makes the step a different kind of step; the server cannot run two. Fix: keep one,
/// or split the step in two.
fn conflicting_step_kinds(
    step: &Step,
    first: &str,
    first_span: Span,
    key: &str,
    span: Span,
) -> Diagnostic {
    Diagnostic::new(
        Code::E0051,
        format!("{} has both `{first}` and `{key}`", step_name(step)),
        span,
        format!("`{key}` makes it a second kind of step"),
    )
    .secondary(first_span, format!("`{first}` is set here"))
    .help(format!(
        "keep one of `{first}` and `{key}`; to do both, split the step into two steps"
    ))
}

// ----- gate steps ------------------------------------------------------------------------------

#[allow(clippy::too_many_arguments)]
fn gate_step(
    symbols: &Symbols,
    flow_index: usize,
    steps: &[Step],
    order: &[usize],
    step_index: usize,
    step: &Step,
    function: &Function,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let forbidden: [(&str, Option<Span>); 15] = [
        ("output_schema", key_of(&step.output_schema)),
        ("max_iterations", key_of(&step.max_iterations)),
        ("exit_criterion", key_of(&step.exit_criterion)),
        ("score_expr", key_of(&step.score_expr)),
        ("accumulate", key_of(&step.accumulate)),
        ("accumulate_key", key_of(&step.accumulate_key)),
        ("on_fail", key_of(&step.on_fail)),
        ("next", key_of(&step.next)),
        ("ensure", key_of(&step.ensure)),
        ("retries", key_of(&step.retries)),
        ("output_contract", key_of(&step.output_contract)),
        ("model", key_of(&step.model)),
        ("budget", key_of(&step.budget)),
        ("guardrails", key_of(&step.guardrails)),
        ("reasoning_template", key_of(&step.reasoning_template)),
    ];
    for (key, span) in forbidden {
        if let Some(span) = span {
            diagnostics.push(not_on_gate_step(step, function, key, span));
        }
    }
    for route in ["on_approve", "on_kill"] {
        if !is_written(&step.keys, route, &keys::STEP) {
            diagnostics.push(missing_gate_route(step, route));
        }
    }
    match &step.on_revise {
        None if !is_written(&step.keys, "on_revise", &keys::STEP) => {
            diagnostics.push(missing_gate_route(step, "on_revise"));
        }
        None => {}
        Some(Field {
            value: None, span, ..
        }) => diagnostics.push(null_revise_target(step, *span)),
        Some(Field {
            value: Some(target),
            span,
            ..
        }) => {
            let target_index = symbols.steps.get(flow_index).and_then(|t| t.get(target));
            let position = |index: usize| order.iter().position(|&at| at == index);
            if step.id.as_ref().is_some_and(|id| &id.value == target) {
                diagnostics.push(revise_targets_itself(step, *span));
            } else if let Some(target_index) = target_index
                && let (Some(target_at), Some(gate_at)) =
                    (position(target_index), position(step_index))
                && target_at > gate_at
                && let Some(target_step) = steps.get(target_index)
            {
                diagnostics.push(revise_target_not_earlier(step, target, *span, target_step));
            }
        }
    }
    if let Some(fallback) = &step.policy_fallback
        && !is_written(&step.keys, "policy", &keys::STEP)
    {
        diagnostics.push(policy_fallback_without_policy(step, fallback.key));
    }
}

/// Where the step names its function.
fn function_use(step: &Step, function: &Function) -> Span {
    step.function
        .as_ref()
        .map_or(function.name.span, |name| name.span)
}

pub(super) fn key_of<T>(field: &Option<Field<T>>) -> Option<Span> {
    field.as_ref().map(|field| field.key)
}

/// E0053 `not-on-gate-step`: a gate step with a key of steps that produce output (a schema,
/// iterations, `on_fail`, `next`, ensures, retries, a contract, a model, a budget, guardrails,
/// a reasoning template). Why: a gate waits for a decision and produces no output; its routes
/// are `on_approve`, `on_revise` and `on_kill`. Fix: remove the key, or use the gate's route.
fn not_on_gate_step(step: &Step, function: &Function, key: &str, span: Span) -> Diagnostic {
    let help = match key {
        "on_fail" => "use `on_revise` to send the work back to an earlier step, or `on_kill` to route a rejection".to_owned(),
        "next" => "use `on_approve` to name the step that runs after an approval".to_owned(),
        "max_iterations" | "exit_criterion" | "score_expr" | "accumulate" | "accumulate_key" => format!(
            "remove `{key}`: a gate repeats work through `on_revise`, bounded by the flow's `max_rounds`, not through iterations"
        ),
        "model" | "budget" => format!("remove `{key}`: a gate waits for a decision and runs no agent"),
        _ => format!("remove `{key}`: a gate produces no output to validate, retry or describe"),
    };
    Diagnostic::new(
        Code::E0053,
        format!("gate {} cannot have `{key}`", step_name(step)),
        span,
        "not allowed on a gate step",
    )
    .secondary(
        function_use(step, function),
        format!("`{}` is a gate function", function.name.value),
    )
    .help(help)
}

/// E0054 `missing-gate-route`: a gate step without `on_approve`, `on_kill` or `on_revise`. Why:
/// the format makes every gate say where each decision goes; `~` is allowed for approve and
/// kill (end the flow) but a revision must go somewhere. Fix: add the route.
fn missing_gate_route(step: &Step, route: &str) -> Diagnostic {
    let help = match route {
        "on_approve" => {
            "add `on_approve: <step id>` to continue there once approved, or `on_approve: ~` to complete the flow"
        }
        "on_kill" => {
            "add `on_kill: ~` to end the flow when the gate is killed, or `on_kill: <step id>` to run a cleanup step"
        }
        _ => "add `on_revise: <step id>` naming an earlier step that redoes the work",
    };
    Diagnostic::new(
        Code::E0054,
        format!("gate {} does not declare `{route}`", step_name(step)),
        step_anchor(step),
        format!("`{route}` is missing"),
    )
    .help(help)
}

/// E0054 `missing-gate-route`, for `on_revise: ~`: a revision must go to a step.
fn null_revise_target(step: &Step, span: Span) -> Diagnostic {
    Diagnostic::new(
        Code::E0054,
        format!("gate {} has no `on_revise` target", step_name(step)),
        span,
        "a revision needs a step to go back to",
    )
    .help("set `on_revise` to the id of an earlier step that redoes the work")
}

/// E0055 `revise-target-not-earlier`: `on_revise` names the gate itself. Why: revising reruns
/// the target and then reaches the gate again; a gate that revises to itself asks the same
/// question forever. Fix: name the step that produced the work under review.
fn revise_targets_itself(step: &Step, span: Span) -> Diagnostic {
    Diagnostic::new(
        Code::E0055,
        format!("gate {} sends revisions to itself", step_name(step)),
        span,
        "the gate itself",
    )
    .help("name the earlier step that produced the work under review")
}

/// E0055 `revise-target-not-earlier`: `on_revise` names a step that runs after the gate.
fn revise_target_not_earlier(
    step: &Step,
    target: &str,
    span: Span,
    target_step: &Step,
) -> Diagnostic {
    let diagnostic = Diagnostic::new(
        Code::E0055,
        format!(
            "gate {} sends revisions to `{target}`, which runs after it",
            step_name(step)
        ),
        span,
        "not an earlier step",
    );
    let diagnostic = match &target_step.id {
        Some(id) => diagnostic.secondary(id.span, format!("`{target}` runs after the gate")),
        None => diagnostic,
    };
    diagnostic.help("`on_revise` must name a step that runs before the gate, such as the step that produced the work under review")
}

/// E0057 `policy-fallback-without-policy`. Why: the fallback says what to do when the policy
/// cannot resolve the gate; without a policy there is nothing to fall back from. Fix: add
/// `policy`, or remove `policy_fallback`.
fn policy_fallback_without_policy(step: &Step, span: Span) -> Diagnostic {
    Diagnostic::new(
        Code::E0057,
        format!(
            "gate {} has `policy_fallback` but no `policy`",
            step_name(step)
        ),
        span,
        "nothing to fall back from",
    )
    .help("add `policy: flag` or `policy: skip`, or remove `policy_fallback`")
}

// ----- function and flow steps ----------------------------------------------------------------

fn function_step(step: &Step, function: &Function, diagnostics: &mut Vec<Diagnostic>) {
    let on_function = [
        ("ensure", key_of(&step.ensure)),
        ("retries", key_of(&step.retries)),
        ("output_contract", key_of(&step.output_contract)),
        ("model", key_of(&step.model)),
        ("budget", key_of(&step.budget)),
        ("guardrails", key_of(&step.guardrails)),
    ];
    for (key, span) in on_function {
        if let Some(span) = span {
            diagnostics.push(not_on_function_step(step, function, key, span));
        }
    }
    undeclared_inputs(step, function, diagnostics);
    if let Some(template) = &step.reasoning_template {
        diagnostics.push(reasoning_template_on_function_step(
            step,
            function,
            template.key,
        ));
    }
}

/// W0021 `unknown-function-input`: a function step passes an input its function's `input` does
/// not declare. Why: the agent is told the function's inputs; an extra one is passed along
/// unannounced, and is usually a misspelt name of a declared one. Fix: the closest declared
/// name, or declare the input on the function.
fn undeclared_inputs(step: &Step, function: &Function, diagnostics: &mut Vec<Diagnostic>) {
    // A function without `input` (valid in version 0.2) declares nothing to compare with.
    let Some(declared) = &function.input else {
        return;
    };
    let names: Vec<&str> = declared
        .value
        .iter()
        .map(|field| field.name.value.as_str())
        .collect();
    for input in step.inputs.iter().flat_map(|inputs| &inputs.value) {
        let name = input.name.value.as_str();
        if names.contains(&name) {
            continue;
        }
        let diagnostic = Diagnostic::new(
            Code::W0021,
            format!("function `{}` has no input `{name}`", function.name.value),
            input.name.span,
            "not an input of the function",
        );
        let suggestion = may_suggest(diagnostics, names.len())
            .then(|| did_you_mean(name, names.iter().copied()))
            .flatten();
        let diagnostic = match suggestion {
            Some(best) => {
                let declared_at = declared
                    .value
                    .iter()
                    .find(|field| field.name.value == best)
                    .map(|field| field.name.span);
                let diagnostic = match declared_at {
                    Some(span) => diagnostic.secondary(span, format!("`{best}` is declared here")),
                    None => diagnostic,
                };
                diagnostic.help(format!("did you mean `{best}`?")).fix(
                    format!("replace `{name}` with `{best}`"),
                    input.name.span,
                    best,
                )
            }
            None if names.is_empty() => diagnostic.help(format!(
                "function `{}` declares no input; remove this one, or declare it in the function's `input`",
                function.name.value
            )),
            None => diagnostic.help(format!(
                "function `{}` takes {}; remove this input, or declare it in the function's `input`",
                function.name.value,
                listing(&names)
            )),
        };
        diagnostics.push(diagnostic);
    }
}

/// E0059 `not-on-function-step`: a function step sets `ensure`, `retries`, `output_contract`,
/// `model`, `budget` or `guardrails`. Why: a function step runs its function as defined; the
/// reference rejects step-level copies rather than guess which one wins. Fix: move the key to
/// the function (`output_contract` becomes the function's `output`).
fn not_on_function_step(step: &Step, function: &Function, key: &str, span: Span) -> Diagnostic {
    let name = &function.name.value;
    let help = match key {
        "output_contract" => {
            format!("set `output: <Contract>` on function `{name}` instead, and remove it here")
        }
        _ => format!(
            "move `{key}` to function `{name}`; to vary it per step, use an inline step (`intent`)"
        ),
    };
    Diagnostic::new(
        Code::E0059,
        format!(
            "`{key}` must be on function `{name}`, not on {}",
            step_name(step)
        ),
        span,
        "not allowed on a function step",
    )
    .secondary(
        function_use(step, function),
        format!("`{key}` belongs on this function"),
    )
    .help(help)
}

/// E0059 `not-on-function-step`, for `reasoning_template`. Why: the reference reads reasoning
/// certificates only on inline steps. Fix: make it an inline step, or remove the template.
fn reasoning_template_on_function_step(step: &Step, function: &Function, span: Span) -> Diagnostic {
    Diagnostic::new(
        Code::E0059,
        format!(
            "function {} cannot have `reasoning_template`",
            step_name(step)
        ),
        span,
        "not allowed on a function step",
    )
    .secondary(
        function_use(step, function),
        format!("`{}` makes this a function step", function.name.value),
    )
    .help("use an inline step (`intent: \"…\"`) to ask for a reasoning certificate, or remove `reasoning_template`")
}

fn flow_step(step: &Step, diagnostics: &mut Vec<Diagnostic>) {
    let forbidden = [
        ("agent", key_of(&step.agent)),
        ("retries", key_of(&step.retries)),
        ("model", key_of(&step.model)),
        ("budget", key_of(&step.budget)),
        ("guardrails", key_of(&step.guardrails)),
        ("reasoning_template", key_of(&step.reasoning_template)),
    ];
    for (key, span) in forbidden {
        if let Some(span) = span {
            diagnostics.push(not_on_flow_step(step, key, span));
        }
    }
}

/// E0058 `not-on-flow-step`: a flow step with `agent`, `retries`, `model`, `budget`,
/// `guardrails` or `reasoning_template`. Why: a flow step runs a whole sub-flow whose own steps
/// choose their agents and limits; there is no single dispatch for these keys to apply to. Fix:
/// set them on the sub-flow's steps (a run budget on the sub-flow), or remove them.
fn not_on_flow_step(step: &Step, key: &str, span: Span) -> Diagnostic {
    let flow = step
        .flow
        .as_ref()
        .map_or("the sub-flow".to_owned(), |flow| {
            format!("flow `{}`", flow.value)
        });
    let help = match key {
        "agent" => format!("remove `agent`: the steps of {flow} choose their own agents"),
        "budget" => format!("remove `budget` here and give {flow} a `budget` instead"),
        "reasoning_template" => {
            format!("remove `reasoning_template`, or put it on an inline step of {flow}")
        }
        _ => format!("remove `{key}` here and set it on the steps of {flow} that need it"),
    };
    Diagnostic::new(
        Code::E0058,
        format!("flow {} cannot have `{key}`", step_name(step)),
        span,
        "not allowed on a flow step",
    )
    .help(help)
}

// ----- rules of every step --------------------------------------------------------------------

/// The connector of an `agent` value: `claude` for `claude` and `claude:reviewer`.
fn connector(agent: &str) -> &str {
    agent
        .split_once(':')
        .map_or(agent, |(connector, _)| connector)
}

/// The agent connectors the runtime dispatches to (the reference's two, and OpenCode, which
/// `stratum-mcp run` and the workers launch too).
const CONNECTORS: [&str; 3] = ["claude", "codex", "opencode"];

/// W0022 `unknown-agent`: an `agent` that is not `claude`, `codex` or `opencode` (with an optional
/// `:profile`) nor a `$`-reference. Why: the agent that runs the step is picked by its
/// connector; any other name reaches no agent (the reference passes it on as text). Fix: the
/// closest connector.
pub(super) fn unknown_agent(agent: &Field<String>, diagnostics: &mut Vec<Diagnostic>) {
    let written = agent.value.as_str();
    let name = connector(written);
    if written.starts_with('$') || CONNECTORS.contains(&name) {
        return;
    }
    // The connector's own span when the scalar is written as its value (plain, or quoted
    // without escapes): the profile after `:` is not what is wrong.
    let span = agent.span;
    let width = (span.end - span.start) as usize;
    let span = match width.checked_sub(written.len()) {
        Some(0) => Span::new(
            span.file,
            span.start as usize..span.start as usize + name.len(),
        ),
        Some(2) => Span::new(
            span.file,
            span.start as usize + 1..span.start as usize + 1 + name.len(),
        ),
        _ => span,
    };
    let diagnostic = Diagnostic::new(
        Code::W0022,
        format!("`{name}` is not a known agent connector"),
        span,
        "no such connector",
    );
    let diagnostic =
        match did_you_mean(name, CONNECTORS) {
            Some(best) if span != agent.span => diagnostic
                .help(format!("did you mean `{best}`?"))
                .fix(format!("replace `{name}` with `{best}`"), span, best),
            Some(best) => {
                let replacement = written.replacen(name, best, 1);
                diagnostic.help(format!("did you mean `{best}`?")).fix(
                    format!("replace `{written}` with `{replacement}`"),
                    agent.span,
                    replacement,
                )
            }
            None => diagnostic.help(
                "the connectors are `claude`, `codex` and `opencode`, each with an optional \
                 profile (`claude:reviewer`); a `$`-reference chooses one at run time",
            ),
        };
    diagnostics.push(diagnostic);
}

/// The keys every section of a reasoning template must have, as the reference requires them.
const SECTION_KEYS: [&str; 3] = ["id", "label", "description"];

/// E0069 `invalid-reasoning-template`: a `reasoning_template` whose `sections` the reference
/// rejects when it builds the spec: an empty or null list ("must have at least one section"),
/// something other than a list, an item that is not a mapping, a section without `id`,
/// `label` or `description`. A template without `sections` is valid: the reference gives it
/// its default sections (premises, trace, conclusion). Fix: write the sections out, or remove
/// `sections` for the defaults.
fn reasoning_template(step: &Step, diagnostics: &mut Vec<Diagnostic>) {
    if let Some(template) = &step.reasoning_template {
        let what = format!("the reasoning template of {}", step_name(step));
        reasoning_sections(&what, template, diagnostics);
    }
}

/// The checks of [`reasoning_template`] on one template; `what` names it in messages ("the
/// reasoning template of step `review`"). Task templates of version 0.3 steps and stages are
/// checked alike.
pub(super) fn reasoning_sections(
    what: &str,
    template: &Field<Node>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let NodeKind::Map(entries) = &template.value.kind else {
        return;
    };
    certificate::check(what, entries, diagnostics);
    let Some(sections) = entries
        .iter()
        .find(|entry| entry.key.as_str() == Some("sections"))
    else {
        return;
    };
    let invalid = |message: String, span: Span, label: &str, help: &str| {
        Diagnostic::new(Code::E0069, message, span, label).help(help.to_owned())
    };
    let defaults = "list at least one section (`{id: …, label: …, description: …}`), or remove \
                    `sections` to get the default ones: premises, trace and conclusion";
    match &sections.value.kind {
        NodeKind::Invalid => {}
        NodeKind::Seq(items) if items.is_empty() => diagnostics.push(invalid(
            format!("{what} has no sections"),
            sections.value.span,
            "empty list",
            defaults,
        )),
        NodeKind::Null => diagnostics.push(invalid(
            format!("{what} has no sections"),
            sections.key.span,
            "no sections",
            defaults,
        )),
        NodeKind::Seq(items) => {
            for (index, item) in items.iter().enumerate() {
                match &item.kind {
                    NodeKind::Map(fields) => {
                        let missing: Vec<&str> = SECTION_KEYS
                            .iter()
                            .copied()
                            .filter(|key| {
                                !fields.iter().any(|field| field.key.as_str() == Some(key))
                            })
                            .collect();
                        certificate::unknown_keys(
                            &format!("section {index} of {what}"),
                            fields,
                            &keys::SECTION,
                            &missing,
                            diagnostics,
                        );
                        if missing.is_empty() {
                            continue;
                        }
                        let (noun, them) = if missing.len() == 1 {
                            ("key", "it")
                        } else {
                            ("keys", "them")
                        };
                        let message = format!(
                            "section {index} of {what} lacks the {noun} {}",
                            backticked(&missing)
                        );
                        // A key the section has that is a misspelling of a missing one.
                        let misspelt = fields.iter().find_map(|field| {
                            let written = field.key.as_str()?;
                            if SECTION_KEYS.contains(&written) {
                                return None;
                            }
                            let best = did_you_mean(written, missing.iter().copied())?;
                            Some((field.key.span, written, best))
                        });
                        diagnostics.push(match misspelt {
                            Some((span, written, best)) => {
                                Diagnostic::new(Code::E0069, message, span, "misspelt key")
                                    .help(format!(
                                        "did you mean `{best}`? A section's keys are `id`, \
                                         `label` and `description`"
                                    ))
                                    .fix(format!("replace `{written}` with `{best}`"), span, best)
                            }
                            None => Diagnostic::new(
                                Code::E0069,
                                message,
                                item.span,
                                format!("no {}", backticked(&missing)),
                            )
                            .help(format!(
                                "every section has an `id`, a `label` and a `description` (what \
                                 the agent must write in it); add {them}"
                            )),
                        });
                    }
                    NodeKind::Invalid => {}
                    _ => {
                        // A bare name is the usual slip: show it as the section it names.
                        let example = match item.as_str().map(str::trim) {
                            Some(name) if !name.is_empty() && !name.contains(['{', '}', '`']) => {
                                let mut label = name.replace(['_', '-'], " ");
                                if let Some(first) = label.get(..1) {
                                    label = first.to_uppercase() + label.get(1..).unwrap_or("");
                                }
                                format!(
                                    "write the section as a mapping: `{{id: {name}, label: \
                                     {label}, description: \"<what the agent writes in it>\"}}`"
                                )
                            }
                            _ => "write each section as a mapping: `{id: premises, label: \
                                  Premises, description: \"State every fact you use\"}`"
                                .to_owned(),
                        };
                        diagnostics.push(invalid(
                            format!(
                                "section {index} of {what} is not a \
                                 mapping"
                            ),
                            item.span,
                            "not a mapping",
                            &example,
                        ));
                    }
                }
            }
        }
        _ => diagnostics.push(invalid(
            format!("the `sections` of {what} are not a list"),
            sections.value.span,
            "not a list",
            defaults,
        )),
    }
}

/// W0008 `skip-reason-without-skip-if`: `skip_reason` on a step without `skip_if`. Why: the
/// reason is reported only when `skip_if` skips the step, so it is never shown. Fix: add the
/// `skip_if` it explains, or remove it.
fn skip_reason_without_skip_if(step: &Step, diagnostics: &mut Vec<Diagnostic>) {
    let Some(reason) = &step.skip_reason else {
        return;
    };
    if is_written(&step.keys, "skip_if", &keys::STEP) {
        return;
    }
    let diagnostic = Diagnostic::new(
        Code::W0008,
        format!("{} has `skip_reason` but no `skip_if`", step_name(step)),
        reason.key,
        "never shown",
    )
    .help("add the `skip_if` condition this reason explains, or remove `skip_reason`");
    diagnostics.push(
        match removal(&step.keys, step.span, reason.key, reason.span) {
            Some(span) => diagnostic.fix("remove `skip_reason`", span, ""),
            None => diagnostic,
        },
    );
}

/// W0009 `routes-to-itself`: `on_fail` or `next` naming the step itself, or a gate's
/// `on_approve` naming the gate. Why: each sends the flow straight back into the same step on
/// every outcome it routes, so the flow never moves on (until the round limit stops it). Fix:
/// route to another step, or remove the key to go on in order.
fn routes_to_itself(step: &Step, kind: Kind<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let Some(id) = &step.id else {
        return;
    };
    let mut routes: Vec<(&str, Span, Span)> = Vec::new();
    if !matches!(kind, Kind::Gate(_)) {
        for (key, field) in [("on_fail", &step.on_fail), ("next", &step.next)] {
            if let Some(field) = field.as_ref().filter(|field| field.value == id.value) {
                routes.push((key, field.key, field.span));
            }
        }
    } else if let Some(field) = step
        .on_approve
        .as_ref()
        .filter(|field| field.value.as_deref() == Some(id.value.as_str()))
    {
        routes.push(("on_approve", field.key, field.span));
    }
    for (key, key_span, span) in routes {
        let (when, instead) = match key {
            "on_fail" => (
                "when its retries run out",
                "route to a recovery step, or remove `on_fail` to stop the flow with the failure",
            ),
            "next" => (
                "every time it succeeds",
                "route to the step that should follow, or remove `next` to go on in order",
            ),
            _ => (
                "every time it is approved",
                "route to the step that follows approval, or write `on_approve: ~` to complete the flow",
            ),
        };
        let diagnostic = Diagnostic::new(
            Code::W0009,
            format!(
                "{} routes `{key}` to itself, so it runs again {when}, forever",
                step_name(step)
            ),
            span,
            "the step itself",
        )
        .secondary(id.span, "this step")
        .help(instead);
        // Removing `next` goes on in order, removing `on_fail` ends the flow with the failure:
        // each what the step does without a route. A gate must keep its `on_approve`.
        let diagnostic = match (key, removal(&step.keys, step.span, key_span, span)) {
            ("next" | "on_fail", Some(remove)) => {
                diagnostic.fix(format!("remove `{key}`"), remove, "")
            }
            _ => diagnostic,
        };
        diagnostics.push(diagnostic);
    }
}

fn gate_keys_on_non_gate_step(step: &Step, diagnostics: &mut Vec<Diagnostic>) {
    let gate_keys = [
        ("on_approve", key_of(&step.on_approve)),
        ("on_revise", key_of(&step.on_revise)),
        ("on_kill", key_of(&step.on_kill)),
        ("policy", key_of(&step.policy)),
        ("policy_fallback", key_of(&step.policy_fallback)),
    ];
    for (key, span) in gate_keys {
        let Some(span) = span else {
            continue;
        };
        // A null route says "the default", which is what a step that is not a gate does
        // anyway: the reference ignores it, so it is only a key with no effect.
        let null = match key {
            "on_approve" => step.on_approve.as_ref(),
            "on_revise" => step.on_revise.as_ref(),
            "on_kill" => step.on_kill.as_ref(),
            _ => None,
        }
        .filter(|field| field.value.is_none());
        match null {
            Some(field) => diagnostics.push(null_gate_route(step, key, field)),
            None => diagnostics.push(gate_key_on_non_gate_step(step, key, span)),
        }
    }
}

/// W0007 `null-gate-route-on-non-gate-step`: `on_approve: ~`, `on_revise: ~` or `on_kill: ~` on
/// a step that is not a gate. Why: only a gate reads these keys; the reference ignores them
/// elsewhere, so the spec works, but the keys suggest a gate that is not there. Fix: remove
/// them.
fn null_gate_route(step: &Step, key: &str, field: &Field<Option<String>>) -> Diagnostic {
    let diagnostic = Diagnostic::new(
        Code::W0007,
        format!(
            "{} is not a gate step, so `{key}: ~` has no effect",
            step_name(step)
        ),
        field.key,
        "ignored",
    )
    .help(format!(
        "remove `{key}`: only a gate routes on approve, revise and kill; make this step a gate \
         (`function: <a gate function>`) if it is meant to wait for a decision"
    ));
    match removal(&step.keys, step.span, field.key, field.span) {
        Some(span) => diagnostic.fix(format!("remove `{key}`"), span, ""),
        None => diagnostic,
    }
}

/// E0056 `gate-key-on-non-gate-step`: `on_approve`, `on_revise`, `on_kill`, `policy` or
/// `policy_fallback` on a step that is not a gate. Why: only a gate waits for a decision to
/// route or resolve automatically; elsewhere the server never reads these keys. Fix: use the
/// routing of ordinary steps (`next`, `on_fail`), or make the step a gate.
fn gate_key_on_non_gate_step(step: &Step, key: &str, span: Span) -> Diagnostic {
    let help = match key {
        "on_approve" => "use `next` to choose the step that runs after this one succeeds",
        "on_revise" | "on_kill" => {
            "use `on_fail` (with an `ensure`) to route a failure, or make this step a gate: `function: <a gate function>`"
        }
        _ => "remove it, or make this step a gate: `function: <a gate function>`",
    };
    Diagnostic::new(
        Code::E0056,
        format!("{} is not a gate step but has `{key}`", step_name(step)),
        span,
        "only gate steps have this",
    )
    .help(help)
}

fn on_fail(step: &Step, kind: Kind<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let Some(on_fail) = &step.on_fail else {
        return;
    };
    let written = |key: &str| is_written(&step.keys, key, &keys::STEP);
    let listed = |list: Option<usize>, key: &str| match list {
        Some(len) => len > 0,
        // Rejected by the front end: it may have been a validation; say nothing more.
        None => written(key),
    };
    let function = match kind {
        Kind::Function(function) => Some(function),
        _ => None,
    };
    // A fan-out step fails when fewer tasks complete than it `require`s (all, by default).
    let can_fail = matches!(kind, Kind::FanOut)
        || listed(step.ensure.as_ref().map(|e| e.value.len()), "ensure")
        || listed(
            step.guardrails.as_ref().map(|g| g.value.len()),
            "guardrails",
        )
        || function.is_some_and(|f| {
            f.ensure.as_ref().is_some_and(|e| !e.value.is_empty())
                || f.guardrails.as_ref().is_some_and(|g| !g.value.is_empty())
                || is_written(&f.keys, "ensure", &keys::FUNCTION) && f.ensure.is_none()
        })
        || step
            .output_schema
            .as_ref()
            .map_or(written("output_schema"), |s| s.value.is_truthy())
        || step.reasoning_template.as_ref().is_some_and(|template| {
            // The reference fills in default sections before it tests the template, so even
            // `{}` counts; only `~` does not.
            (template.value.is_truthy() || matches!(template.value.kind, NodeKind::Map(_)))
                && step.agent.as_ref().is_none_or(|agent| {
                    connector(&agent.value) == "claude" || agent.value.starts_with('$')
                })
        });
    if !can_fail {
        diagnostics.push(on_fail_never_triggers(step, function, on_fail.key));
    }
}

/// E0060 `on-fail-never-triggers`: `on_fail` on a step with nothing that can fail: no
/// `ensure` or `guardrails` (on the step or its function), no `output_schema`, no reasoning
/// certificate. Why: `on_fail` routes when the step's checks fail after its retries; without a
/// check it is dead routing, and the reference rejects it. Fix: add the check that should
/// trigger it, or remove `on_fail`.
fn on_fail_never_triggers(step: &Step, function: Option<&Function>, span: Span) -> Diagnostic {
    let diagnostic = Diagnostic::new(
        Code::E0060,
        format!(
            "{} has `on_fail` but nothing that can fail",
            step_name(step)
        ),
        span,
        "can never trigger",
    );
    match function {
        Some(function) => diagnostic
            .secondary(
                function.name.span,
                format!("function `{}` has no `ensure` or `guardrails`", function.name.value),
            )
            .help(format!(
                "add `ensure` to function `{}` or `output_schema` to the step, or remove `on_fail`",
                function.name.value
            )),
        None => diagnostic.help("add the `ensure` (or `output_schema`) whose failure should route there, or remove `on_fail`"),
    }
}

fn iteration_keys(step: &Step, diagnostics: &mut Vec<Diagnostic>) {
    let written = |key: &str| is_written(&step.keys, key, &keys::STEP);
    if !written("max_iterations") {
        let loop_keys = [
            ("exit_criterion", key_of(&step.exit_criterion)),
            ("score_expr", key_of(&step.score_expr)),
            ("accumulate", key_of(&step.accumulate)),
        ];
        for (key, span) in loop_keys {
            if let Some(span) = span {
                diagnostics.push(iteration_key_without_max_iterations(step, key, span));
            }
        }
    }
    if let Some(key) = &step.accumulate_key
        && !written("accumulate")
    {
        diagnostics.push(accumulate_key_without_accumulate(step, key.key));
    }
}

/// E0061 `iteration-key-without-max-iterations`: `exit_criterion`, `score_expr` or `accumulate`
/// without `max_iterations`. Why: they steer a counted loop; without `max_iterations` the step
/// runs once and they are never read. Fix: add `max_iterations`, or remove the key.
fn iteration_key_without_max_iterations(step: &Step, key: &str, span: Span) -> Diagnostic {
    Diagnostic::new(
        Code::E0061,
        format!("{} has `{key}` but no `max_iterations`", step_name(step)),
        span,
        "only read by an iterating step",
    )
    .help(format!(
        "add `max_iterations: <n>` to make the step iterate, or remove `{key}`"
    ))
}

/// E0062 `accumulate-key-without-accumulate`. Why: `accumulate_key` is the dedup key of the
/// items that `accumulate` extracts; alone it is never read. Fix: add `accumulate`, or remove it.
fn accumulate_key_without_accumulate(step: &Step, span: Span) -> Diagnostic {
    Diagnostic::new(
        Code::E0062,
        format!("{} has `accumulate_key` but no `accumulate`", step_name(step)),
        span,
        "nothing to deduplicate",
    )
    .help("add `accumulate: \"result.<list field>\"` to collect items across iterations, or remove `accumulate_key`")
}

fn cache(step: &Step, kind: Kind<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let step_cache = step
        .cache
        .as_ref()
        .filter(|cache| cache.value)
        .map(|cache| cache.key);
    let cached_by = match kind {
        Kind::Unknown => return,
        Kind::Function(function)
            if function
                .mode
                .as_ref()
                .is_some_and(|mode| mode.value == Mode::Compute) =>
        {
            step_cache.or_else(|| {
                function
                    .cache
                    .as_ref()
                    .filter(|cache| cache.value)
                    .map(|cache| cache.key)
            })
        }
        // A non-compute function with `cache: true` is reported once, at the function.
        _ => {
            if let Some(span) = step_cache {
                diagnostics.push(cache_on_non_compute_step(step, span));
            }
            return;
        }
    };
    let Some(cache) = cached_by else {
        return;
    };
    let conflicts = [
        ("max_iterations", key_of(&step.max_iterations)),
        ("accumulate", key_of(&step.accumulate)),
        ("next", key_of(&step.next)),
    ];
    for (key, span) in conflicts {
        if let Some(span) = span {
            diagnostics.push(cache_with_routing_or_iterations(step, key, span, cache));
        }
    }
}

/// E0063 `cache-not-allowed`, on a step: `cache: true` on a step that is not a compute function
/// step. Why: only a compute function is deterministic, so only its result may be reused for
/// the same inputs. Fix: remove `cache`.
fn cache_on_non_compute_step(step: &Step, span: Span) -> Diagnostic {
    Diagnostic::new(
        Code::E0063,
        format!(
            "{} has `cache: true` but is not a compute function step",
            step_name(step)
        ),
        span,
        "cannot be cached",
    )
    .help("remove `cache: true`: only the result of a `mode: compute` function is reusable for the same inputs")
}

/// E0063 `cache-not-allowed`: a cached step that iterates, accumulates or routes with `next`.
/// Why: a cached result would stand in for every iteration, or skip the loop `next` closes.
/// Fix: remove `cache`, or the key.
fn cache_with_routing_or_iterations(step: &Step, key: &str, span: Span, cache: Span) -> Diagnostic {
    let why = match key {
        "next" => "a cached result would short-circuit the loop that `next` routes through",
        _ => "a cached result would replay the first iteration every time",
    };
    Diagnostic::new(
        Code::E0063,
        format!("{} is cached but has `{key}`", step_name(step)),
        span,
        format!("`{key}` on a cached step"),
    )
    .secondary(cache, "`cache: true` is set here")
    .help(format!("remove `cache: true` or `{key}`: {why}"))
}
