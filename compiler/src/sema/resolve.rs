//! Name resolution: every name a spec uses to point at a definition.
//!
//! Takes the AST and the symbol tables; reports each name that does not resolve — a function's
//! or flow's `output`, a step's `function`, `flow`, `output_contract`, `depends_on` and routing
//! targets (`on_fail`, `next`, `on_approve`, `on_revise`, `on_kill`) — once, at its use, with a
//! did-you-mean and a secondary label at the closest definition when one is close. Returns what
//! each step is ([`StepKind`]) and the types of its result and of `$.steps.<id>.output`.
//!
//! Invariant: a name that does not resolve makes what depends on it unknown (`any`, or
//! [`StepKind::Unknown`]), never a second error.

use stratum_grammar::types::Type;

use crate::diagnostic::{Code, Diagnostic, backticked};
use crate::sema::aggregate;
use crate::sema::may_suggest;
use crate::sema::symbols::{SymbolKind, Symbols, Table, flow_steps};
use crate::sema::types::ContractTypes;
use crate::source::Span;
use crate::syntax::ast::{Ast, Field, Flow, Mode, Step, StepType};

/// What a step is, once its `function`, `intent`, `flow` or `judge` is resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Calls an `infer` or `compute` function (the index into `Ast::functions`).
    Function(usize),
    /// Calls a `gate` function: waits for approval, revision or a kill.
    Gate(usize),
    /// An inline step: `intent` on the step itself.
    Inline,
    /// Runs another flow (the index into `Ast::flows`).
    Flow(usize),
    /// A judge step (accepted as the reference implementation accepts it, otherwise unchecked).
    Judge,
    /// An inline step with `type: decompose`: an agent splits the work into a task graph.
    Decompose,
    /// `type: parallel_dispatch`: one task per element of its `source`.
    Parallel,
    /// `type: pipeline`: every element of its `source` through its `stages`.
    Pipeline,
    /// The step's kind could not be determined; an error says why.
    Unknown,
}

impl StepKind {
    pub fn noun(self) -> &'static str {
        match self {
            StepKind::Function(_) => "function step",
            StepKind::Gate(_) => "gate step",
            StepKind::Inline => "inline step",
            StepKind::Flow(_) => "flow step",
            StepKind::Judge => "judge step",
            StepKind::Decompose => "decompose step",
            StepKind::Parallel => "parallel_dispatch step",
            StepKind::Pipeline => "pipeline step",
            StepKind::Unknown => "step",
        }
    }
}

/// One step, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct StepInfo {
    pub kind: StepKind,
    /// The contract its result must satisfy, when it names one that exists.
    pub contract: Option<String>,
    /// A gate step whose function declares `output`: the contract of the value the person
    /// decides (its output is then a `HumanDecision` of it, [`aggregate::human_decision`]).
    pub decision: Option<String>,
    /// The type of `result` in its `ensure`, `exit_criterion`, `score_expr` and `accumulate`.
    pub result: Type,
    /// The type of `$.steps.<id>.output` in later steps: `result`, or `None` as well when the
    /// step has a `skip_if` (a skipped step's output is `None`).
    pub output: Type,
}

/// Resolves every name of the spec; per flow (in `Ast::flows` order), per step, what it is.
pub fn resolve(
    ast: &Ast,
    symbols: &Symbols,
    contracts: &ContractTypes,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Vec<StepInfo>> {
    for function in &ast.functions {
        if let Some(output) = &function.output {
            resolve_name(
                SymbolKind::Contract,
                output,
                &symbols.contracts,
                diagnostics,
            );
        }
    }
    for flow in &ast.flows {
        if let Some(output) = &flow.output {
            resolve_name(
                SymbolKind::Contract,
                output,
                &symbols.contracts,
                diagnostics,
            );
        }
    }
    ast.flows
        .iter()
        .enumerate()
        .map(|(flow_index, flow)| {
            let steps = symbols.steps.get(flow_index).cloned().unwrap_or_default();
            flow_steps(flow)
                .iter()
                .map(|step| resolve_step(ast, flow, step, symbols, &steps, contracts, diagnostics))
                .collect()
        })
        .collect()
}

fn resolve_step(
    ast: &Ast,
    flow: &Flow,
    step: &Step,
    symbols: &Symbols,
    steps: &Table,
    contracts: &ContractTypes,
    diagnostics: &mut Vec<Diagnostic>,
) -> StepInfo {
    let function = step
        .function
        .as_ref()
        .and_then(|name| resolve_name(SymbolKind::Function, name, &symbols.functions, diagnostics));
    let called_flow = step
        .flow
        .as_ref()
        .and_then(|name| resolve_name(SymbolKind::Flow, name, &symbols.flows, diagnostics));
    let output_contract = step.output_contract.as_ref().and_then(|name| {
        resolve_name(SymbolKind::Contract, name, &symbols.contracts, diagnostics)
            .map(|_| name.value.clone())
    });
    for name in step.depends_on.iter().flat_map(|names| &names.value) {
        if steps.get(&name.value).is_none() {
            let suggest = may_suggest(diagnostics, steps.len());
            diagnostics.push(unknown_step(
                &name.value,
                name_span(&name.value, name.span),
                steps,
                flow,
                suggest,
            ));
        }
    }
    let targets = [&step.on_fail, &step.next]
        .into_iter()
        .flatten()
        .map(|field| (field.value.as_str(), field.span));
    let gate_targets = [&step.on_approve, &step.on_revise, &step.on_kill]
        .into_iter()
        .flatten()
        .filter_map(|field| field.value.as_deref().map(|target| (target, field.span)));
    for (target, span) in targets.chain(gate_targets) {
        if steps.get(target).is_none() {
            let suggest = may_suggest(diagnostics, steps.len());
            diagnostics.push(unknown_step(
                target,
                name_span(target, span),
                steps,
                flow,
                suggest,
            ));
        }
    }

    let kind = step_kind(ast, step, function, called_flow);
    let contract = match kind {
        StepKind::Function(index) => ast
            .functions
            .get(index)
            .and_then(|function| function.output.as_ref())
            .map(|output| output.value.clone()),
        StepKind::Inline | StepKind::Decompose => output_contract,
        StepKind::Flow(index) => ast
            .flows
            .get(index)
            .and_then(|flow| flow.output.as_ref())
            .map(|output| output.value.clone()),
        StepKind::Gate(_)
        | StepKind::Judge
        | StepKind::Parallel
        | StepKind::Pipeline
        | StepKind::Unknown => None,
    }
    .filter(|name| symbols.contracts.get(name).is_some());
    let decision = match kind {
        StepKind::Gate(index) => ast
            .functions
            .get(index)
            .and_then(|function| function.output.as_ref())
            .map(|output| output.value.clone())
            .filter(|name| symbols.contracts.get(name).is_some()),
        _ => None,
    };
    let decided = decision
        .as_deref()
        .map(|name| contracts.contract(name).cloned().unwrap_or(Type::Any));
    let result = match kind {
        StepKind::Parallel => aggregate::parallel(),
        StepKind::Pipeline => aggregate::pipeline(),
        StepKind::Gate(_) if decided.is_some() => {
            aggregate::human_decision(decided.unwrap_or(Type::Any))
        }
        _ => contract
            .as_deref()
            .and_then(|name| contracts.contract(name))
            .cloned()
            .unwrap_or(Type::Any),
    };
    let output = if step.skip_if.is_some() && result != Type::Any {
        result.clone().optional()
    } else {
        result.clone()
    };
    StepInfo {
        kind,
        contract,
        decision,
        result,
        output,
    }
}

/// The step's kind when exactly one of `function`, `intent`, `flow` and `judge` is written and
/// what it names exists, or, in version 0.3, when `type` says `decompose` (with an `intent`),
/// `parallel_dispatch` or `pipeline` (with none of the four); otherwise `Unknown` (the format
/// rules or resolution report why). The format rules take each step's kind from here and
/// report the steps that name none or several. A `judge` counts when it is truthy (as the
/// reference tests it), a function when its `mode` is known. A `type` of `function`, `inline`
/// or `flow` that contradicts the key is reported by the rules; the key decides the kind.
fn step_kind(
    ast: &Ast,
    step: &Step,
    function: Option<usize>,
    called_flow: Option<usize>,
) -> StepKind {
    let judge = step
        .judge
        .as_ref()
        .is_some_and(|judge| judge.value.written.is_truthy());
    let modes = [
        step.function.is_some(),
        step.intent.is_some(),
        step.flow.is_some(),
        judge,
    ];
    let named = modes.iter().filter(|&&set| set).count();
    match step.step_type.as_ref().map(|ty| ty.value) {
        Some(StepType::ParallelDispatch) if named == 0 => return StepKind::Parallel,
        Some(StepType::Pipeline) if named == 0 => return StepKind::Pipeline,
        Some(StepType::ParallelDispatch | StepType::Pipeline) => return StepKind::Unknown,
        Some(StepType::Decompose) if named == 1 && step.intent.is_some() => {
            return StepKind::Decompose;
        }
        Some(StepType::Decompose) => return StepKind::Unknown,
        Some(StepType::Function | StepType::Inline | StepType::Flow) | None => {}
    }
    if named != 1 {
        return StepKind::Unknown;
    }
    if step.function.is_some() {
        let mode = function
            .and_then(|index| ast.functions.get(index))
            .and_then(|function| function.mode.as_ref());
        return match (function, mode) {
            (Some(index), Some(mode)) if mode.value == Mode::Gate => StepKind::Gate(index),
            (Some(index), Some(_)) => StepKind::Function(index),
            _ => StepKind::Unknown,
        };
    }
    if step.intent.is_some() {
        return StepKind::Inline;
    }
    if step.flow.is_some() {
        return called_flow.map_or(StepKind::Unknown, StepKind::Flow);
    }
    StepKind::Judge
}

/// Looks `name` up in `table`, reporting it when it is not there.
fn resolve_name(
    kind: SymbolKind,
    name: &Field<String>,
    table: &Table,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<usize> {
    let found = table.get(&name.value);
    if found.is_none() && !name.value.is_empty() {
        let suggest = may_suggest(diagnostics, table.len());
        diagnostics.push(unknown_definition(
            kind,
            &name.value,
            name_span(&name.value, name.span),
            table,
            suggest,
        ));
    }
    found
}

/// The span of a name without the quotes it may be written in: a quoted scalar's span is two
/// bytes longer than its value when nothing in it was escaped.
pub(crate) fn name_span(name: &str, span: Span) -> Span {
    if span.len() == name.len() + 2 {
        Span {
            start: span.start + 1,
            end: span.end - 1,
            ..span
        }
    } else {
        span
    }
}

fn code_of(kind: SymbolKind) -> Code {
    match kind {
        SymbolKind::Contract => Code::E0035,
        SymbolKind::Function => Code::E0036,
        SymbolKind::Flow => Code::E0037,
        SymbolKind::Step => Code::E0038,
    }
}

/// E0035–E0037: a contract, function or flow name that the spec does not declare.
fn unknown_definition(
    kind: SymbolKind,
    name: &str,
    span: Span,
    table: &Table,
    suggest: bool,
) -> Diagnostic {
    let noun = kind.noun();
    let diagnostic = Diagnostic::new(
        code_of(kind),
        format!("no {noun} named `{name}`"),
        span,
        format!("unknown {noun}"),
    );
    let section = match kind {
        SymbolKind::Contract => "contracts",
        SymbolKind::Function => "functions",
        SymbolKind::Flow | SymbolKind::Step => "flows",
    };
    suggestion(
        diagnostic,
        name,
        span,
        table,
        suggest,
        noun,
        |declared| match declared {
            None => format!("the spec declares no {section}; declare `{name}` under `{section}:`"),
            Some(declared) => {
                format!(
                    "declare `{name}` under `{section}:`, or name one of the {section} declared: {declared}"
                )
            }
        },
    )
}

/// E0038: a step id in `depends_on` or a routing field that the flow does not have.
fn unknown_step(name: &str, span: Span, steps: &Table, flow: &Flow, suggest: bool) -> Diagnostic {
    let diagnostic = Diagnostic::new(
        Code::E0038,
        format!("no step `{name}` in flow `{}`", flow.name.value),
        span,
        "unknown step",
    );
    suggestion(diagnostic, name, span, steps, suggest, "step", |declared| {
        let flow = &flow.name.value;
        match declared {
            None => format!("flow `{flow}` has no steps with an `id`"),
            Some(declared) => {
                format!("a step is named by its `id`; the steps of flow `{flow}` are {declared}")
            }
        }
    })
}

/// Adds the did-you-mean (help, fix and a label at the suggestion's definition) or, when no
/// name is close (or `suggest` is off), a help built by `otherwise` from the declared names
/// (`None` when there are none).
fn suggestion(
    diagnostic: Diagnostic,
    name: &str,
    span: Span,
    table: &Table,
    suggest: bool,
    noun: &str,
    otherwise: impl FnOnce(Option<String>) -> String,
) -> Diagnostic {
    if let Some((best, declared)) = suggest.then(|| table.closest(name)).flatten() {
        return diagnostic
            .secondary(declared, format!("the {noun} `{best}` is declared here"))
            .help(format!("did you mean `{best}`?"))
            .fix(format!("replace `{name}` with `{best}`"), span, best);
    }
    if table.is_empty() {
        return diagnostic.help(otherwise(None));
    }
    let names: Vec<&str> = table.names().take(LISTED + 1).collect();
    diagnostic.help(otherwise(Some(listing_of(&names, table.len()))))
}

/// How many names a help line lists.
const LISTED: usize = 8;

/// Names in backticks for a help line, at most eight of them.
pub(crate) fn listing(names: &[&str]) -> String {
    listing_of(names, names.len())
}

/// [`listing`] of the first of `count` names.
fn listing_of(names: &[&str], count: usize) -> String {
    match names.get(..LISTED) {
        Some(shown) if count > LISTED => {
            format!("{} and {} more", backticked(shown), count - LISTED)
        }
        _ => backticked(names),
    }
}
