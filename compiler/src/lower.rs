//! Lowering: a checked spec → the [`Plan`] the runtime executes.
//!
//! Takes a [`Compilation`] without errors and its source file. Each flow becomes a linear
//! program: its steps in the DAG's topological order (ties broken by declaration order), every
//! routing name turned into a step index or the end or kill of the flow, every input into a
//! binding to an interned path or a constant, every expression into bytecode with constants
//! folded; function settings are merged into the steps that call them, with the defaults the
//! reference applies written out. `skip_if`s that are always false and `ensure`s that always
//! hold are left out (checking warned about both, `W0004`).
//!
//! Invariant: lowering never reports a problem of the spec. Checking reported every one, and a
//! spec with errors is refused whole ([`LowerError::SpecHasErrors`]); what lowering cannot find
//! in a spec that checked clean is a bug, reported as [`LowerError::Internal`].

mod fan_out;
mod judge;
mod steps;

use std::collections::HashMap;

use stratum_grammar::ast::{Expr, ExprKind, RefRoot};
use stratum_grammar::{Bindings, Limits};
use thiserror::Error;

use crate::plan::{self, Plan};
use crate::sema::FlowModel;
use crate::sema::symbols::flow_steps;
use crate::source::{SourceFile, Span};
use crate::syntax::ast::{self, Ast, Text};
use crate::{Compilation, UnknownFlow};

/// What to build.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Build only this flow and the flows it runs, and make it the entry flow.
    pub flow: Option<String>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LowerError {
    #[error("the spec has errors; fix them first (`stratumc check` lists them)")]
    SpecHasErrors,
    #[error(transparent)]
    UnknownFlow(#[from] UnknownFlow),
    #[error("internal compiler error while lowering: {0}; please report it")]
    Internal(String),
}

/// Lowers a checked spec. `src` must be the file `compilation` was checked from.
pub fn lower(
    compilation: &Compilation,
    src: &SourceFile,
    options: &Options,
) -> Result<Plan, LowerError> {
    if compilation.has_errors() {
        return Err(LowerError::SpecHasErrors);
    }
    let ast = &compilation.ast;
    let model = &compilation.model;
    let selected = select_flows(compilation, options)?;
    let flow_index: HashMap<usize, u32> = selected
        .iter()
        .enumerate()
        .map(|(at, &index)| (index, index_u32(at)))
        .collect();
    let contracts = used_contracts(ast, model, &selected);
    let contract_index: HashMap<String, u32> = contracts
        .iter()
        .enumerate()
        .map(|(at, contract)| (contract.name.clone(), index_u32(at)))
        .collect();

    let mut lowering = Lowering {
        ast,
        model,
        src,
        flow_index: &flow_index,
        contract_index: &contract_index,
        paths: Paths::default(),
    };
    let mut flows = Vec::with_capacity(selected.len());
    for &index in &selected {
        flows.push(lowering.flow(index)?);
    }
    let entry = match &options.flow {
        Some(_) => Some(0),
        None => entry_flow(ast).and_then(|index| flow_index.get(&index).copied()),
    };
    let mut plan = Plan {
        format: plan::FORMAT,
        compiler: plan::CompilerInfo {
            name: plan::COMPILER_NAME.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        },
        spec: plan::SpecInfo {
            path: src.name().to_owned(),
            hash: plan::sha256(src.text().as_bytes()),
            version: ast
                .version
                .as_ref()
                .map_or("0.1", |version| version.value.as_str())
                .to_owned(),
        },
        checksum: String::new(),
        workflow: workflow(ast),
        entry,
        contracts,
        paths: lowering.paths.table,
        flows,
    };
    plan.seal();
    Ok(plan)
}

/// The flows to build: all, in declaration order, or the one `--flow` names first (it is the
/// entry, index 0) and the flows it runs after it, in declaration order.
fn select_flows(compilation: &Compilation, options: &Options) -> Result<Vec<usize>, LowerError> {
    let mut selected = compilation.select_flows(options.flow.as_deref())?;
    if let Some(root) = options
        .flow
        .as_deref()
        .and_then(|name| compilation.model.symbols.flows.get(name))
        && let Some(at) = selected.iter().position(|&index| index == root)
    {
        selected.remove(at);
        selected.insert(0, root);
    }
    Ok(selected)
}

/// The flow a workflow runs: the one named like it, else the spec's only flow.
fn entry_flow(ast: &Ast) -> Option<usize> {
    let named = ast
        .workflow
        .as_ref()
        .and_then(|workflow| workflow.value.name.as_ref())
        .and_then(|name| {
            ast.flows
                .iter()
                .position(|flow| flow.name.value == name.value)
        });
    match (named, ast.flows.len()) {
        (Some(index), _) => Some(index),
        (None, 1) => Some(0),
        (None, _) => None,
    }
}

/// The contracts the selected flows name (as outputs of steps and flows, and as the contract
/// of a parallel step's tasks), in declaration order.
fn used_contracts(
    ast: &Ast,
    model: &crate::sema::Model,
    selected: &[usize],
) -> Vec<plan::Contract> {
    let mut used = std::collections::HashSet::new();
    for &index in selected {
        if let Some(output) = ast.flows.get(index).and_then(|flow| flow.output.as_ref()) {
            used.insert(output.value.as_str());
        }
        for step in model.flows.get(index).into_iter().flat_map(|f| &f.steps) {
            for contract in step.contract.iter().chain(&step.decision) {
                used.insert(contract.as_str());
            }
        }
        // A parallel step's `output_contract` is its tasks' contract, not its own.
        let flow_steps = ast.flows.get(index).and_then(|flow| flow.steps.as_ref());
        for step in flow_steps.into_iter().flat_map(|steps| &steps.value) {
            if let Some(contract) = &step.output_contract {
                used.insert(contract.value.as_str());
            }
        }
    }
    ast.contracts
        .iter()
        .filter(|contract| used.contains(contract.name.value.as_str()))
        .filter_map(|contract| {
            let name = contract.name.value.as_str();
            Some(plan::Contract {
                name: name.to_owned(),
                hash: model.contracts.hash(name)?.to_owned(),
                schema: model.contracts.schema(name)?.clone(),
            })
        })
        .collect()
}

fn workflow(ast: &Ast) -> Option<plan::WorkflowInfo> {
    let workflow = &ast.workflow.as_ref()?.value;
    Some(plan::WorkflowInfo {
        name: workflow.name.as_ref()?.value.clone(),
        description: workflow.description.as_ref().map(|d| d.value.clone()),
        input: workflow
            .input
            .iter()
            .flat_map(|input| &input.value)
            .map(|param| plan::WorkflowParam {
                name: param.name.value.clone(),
                ty: param.ty.as_ref().map(|ty| param_type(ty.value).to_owned()),
                required: param.required.as_ref().is_none_or(|r| r.value),
                default: param
                    .default
                    .as_ref()
                    .and_then(|default| crate::sema::schema::to_json(&default.value)),
            })
            .collect(),
    })
}

fn param_type(ty: ast::ParamType) -> &'static str {
    match ty {
        ast::ParamType::String => "string",
        ast::ParamType::Boolean => "boolean",
        ast::ParamType::Integer => "integer",
        ast::ParamType::Number => "number",
        ast::ParamType::Array => "array",
        ast::ParamType::Object => "object",
    }
}

/// A count or index as the plan stores it. Specs are bounded far below `u32::MAX` steps.
fn index_u32(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}

/// The interned field paths of a plan.
#[derive(Default)]
struct Paths {
    table: Vec<Vec<String>>,
    index: HashMap<Vec<String>, u32>,
}

impl Paths {
    fn intern(&mut self, path: Vec<String>) -> u32 {
        if let Some(&index) = self.index.get(&path) {
            return index;
        }
        let index = index_u32(self.table.len());
        self.table.push(path.clone());
        self.index.insert(path, index);
        index
    }
}

/// What lowering one flow needs to see.
struct Lowering<'a> {
    ast: &'a Ast,
    model: &'a crate::sema::Model,
    src: &'a SourceFile,
    /// Declaration index → plan index of the flows built.
    flow_index: &'a HashMap<usize, u32>,
    contract_index: &'a HashMap<String, u32>,
    paths: Paths,
}

impl<'a> Lowering<'a> {
    fn flow(&mut self, index: usize) -> Result<plan::Flow, LowerError> {
        let flow = self
            .ast
            .flows
            .get(index)
            .ok_or_else(|| LowerError::Internal(format!("flow {index} does not exist")))?;
        let model: &FlowModel = self.model.flows.get(index).ok_or_else(|| {
            LowerError::Internal(format!("flow `{}` was not analysed", flow.name.value))
        })?;
        let steps = flow_steps(flow);
        let order = &model.dag.order;
        if order.len() != steps.len() {
            return Err(LowerError::Internal(format!(
                "flow `{}` orders {} of its {} steps",
                flow.name.value,
                order.len(),
                steps.len()
            )));
        }
        // Declaration index → plan index.
        let mut position = vec![0u32; steps.len()];
        for (at, &step) in order.iter().enumerate() {
            if let Some(slot) = position.get_mut(step) {
                *slot = index_u32(at);
            }
        }
        let table = self
            .model
            .symbols
            .steps
            .get(index)
            .ok_or_else(|| LowerError::Internal("a flow without a step table".to_owned()))?;
        let context = steps::FlowContext {
            flow,
            model,
            table,
            position: &position,
        };
        let mut lowered = Vec::with_capacity(steps.len());
        for (at, &step_index) in order.iter().enumerate() {
            let step = steps.get(step_index).ok_or_else(|| {
                LowerError::Internal(format!("step {step_index} is out of its flow"))
            })?;
            lowered.push(self.step(&context, step, step_index, at)?);
        }
        let mut levels: Vec<Vec<u32>> = Vec::new();
        for (at, step) in lowered.iter().enumerate() {
            let level = step.level as usize;
            if levels.len() <= level {
                levels.resize_with(level + 1, Vec::new);
            }
            if let Some(members) = levels.get_mut(level) {
                members.push(index_u32(at));
            }
        }
        Ok(plan::Flow {
            name: flow.name.value.clone(),
            input: self
                .model
                .contracts
                .input_schema(flow.input.as_ref().map_or(&[], |input| &input.value)),
            output: flow
                .output
                .as_ref()
                .and_then(|output| self.contract_index.get(output.value.as_str()).copied()),
            budget: flow
                .budget
                .as_ref()
                .map(|budget| lower_budget(&budget.value)),
            max_rounds: flow.max_rounds.as_ref().map(|rounds| rounds.value),
            start: if lowered.is_empty() {
                plan::Target::End
            } else {
                plan::Target::Step(0)
            },
            levels,
            steps: lowered,
            source: self.source(flow.span),
        })
    }

    /// Where a span stands, for the plan's source map.
    fn source(&self, span: Span) -> plan::Source {
        let start = self.src.line_col(span.start as usize);
        plan::Source {
            start: span.start,
            end: span.end,
            line: index_u32(start.line),
            column: index_u32(start.column),
        }
    }

    /// An expression, compiled; `None` when it did not parse (checking reported it).
    fn expression(&self, text: &Text) -> Result<plan::Expression, LowerError> {
        let expr = self.model.expressions.get(text).ok_or_else(|| {
            LowerError::Internal(format!("the expression `{}` was not parsed", text.value))
        })?;
        Ok(plan::Expression {
            program: stratum_grammar::compile(expr, &text.value),
            source: self.source(text.span),
        })
    }

    /// A step input written as a string: a `$`-reference's binding, or the string itself.
    fn binding(
        &mut self,
        text: &Text,
        position: &[u32],
        table: &crate::sema::symbols::Table,
    ) -> Result<plan::Binding, LowerError> {
        if !text.value.starts_with('$') {
            return Ok(plan::Binding::Const(text.value.clone().into()));
        }
        let reference = match self
            .model
            .expressions
            .get(text)
            .map(|expr: &Expr| &expr.kind)
        {
            Some(ExprKind::Ref(reference)) => reference,
            _ => {
                return Err(LowerError::Internal(format!(
                    "the input `{}` is not a resolved reference",
                    text.value
                )));
            }
        };
        let path = self.paths.intern(
            reference
                .path
                .iter()
                .map(|field| field.name.clone())
                .collect(),
        );
        match &reference.root {
            RefRoot::Input => Ok(plan::Binding::Input { path }),
            RefRoot::StepOutput { step } => {
                let index = table
                    .get(&step.name)
                    .and_then(|index| position.get(index).copied())
                    .ok_or_else(|| {
                        LowerError::Internal(format!("the step `{}` does not resolve", step.name))
                    })?;
                Ok(plan::Binding::Step { step: index, path })
            }
        }
    }
}

pub(crate) fn lower_budget(budget: &ast::Budget) -> plan::Budget {
    plan::Budget {
        ms: budget.ms.as_ref().map(|f| f.value),
        usd: budget.usd.as_ref().map(|f| f.value),
        max_agent_dispatches: budget.max_agent_dispatches.as_ref().map(|f| f.value),
        max_tokens: budget.max_tokens.as_ref().map(|f| f.value),
    }
}

/// Python's truthiness of a constant: what `ensure` and `skip_if` test.
fn truthy(program: &stratum_grammar::Program) -> Option<bool> {
    program.is_constant()?;
    program
        .evaluate_bool(&Bindings::new(), &Limits::default())
        .ok()
}
