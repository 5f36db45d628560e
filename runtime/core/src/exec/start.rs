//! Starting a flow: the plan stored once by checksum, the flow chosen, the inputs checked
//! against the flow's input schema (every problem at once), the header written, and the
//! first dispatch.

use std::sync::Arc;

use serde_json::Value;
use stratum_compiler::plan::{Plan, Target};

use super::dispatch::{self, Note};
use super::{Run, budget, validate};
use crate::command::Context;
use crate::response::{ErrorResponse, Response};
use crate::state::{Cursor, FlowHeader, FlowStatus};
use crate::store::StoreError;

use super::work::Work;

pub(crate) fn start(
    work: &mut Work<'_>,
    plan: Arc<Plan>,
    flow: Option<&str>,
    inputs: &Value,
    started_by: Option<&str>,
    ctx: &Context,
) -> Result<Response, StoreError> {
    let index = match flow {
        Some(name) => plan.flows.iter().position(|flow| flow.name == name),
        None => plan.entry.map(|entry| entry as usize),
    };
    let Some((index, chosen)) =
        index.and_then(|index| plan.flows.get(index).map(|flow| (index, flow)))
    else {
        let names: Vec<&str> = plan.flows.iter().map(|flow| flow.name.as_str()).collect();
        let message = match flow {
            Some(name) => {
                let hint = stratum_compiler::diagnostic::did_you_mean(name, names.iter().copied())
                    .map(|best| format!("; did you mean '{best}'?"))
                    .unwrap_or_else(|| format!("; the spec declares {}", quoted(&names)));
                format!("Flow '{name}' not found in spec{hint}")
            }
            None => format!(
                "the spec declares several flows and no workflow entry; name one of {}",
                quoted(&names)
            ),
        };
        return Ok(ErrorResponse::new("execution_error", message).into_response());
    };
    let mut inputs = match inputs {
        Value::Null => Value::Object(Default::default()),
        other => other.clone(),
    };
    if plan.entry == u32::try_from(index).ok() {
        apply_workflow_defaults(&plan, &mut inputs);
    }
    let mut problems = unknown_inputs(&chosen.input, &inputs);
    problems.extend(validate::schema_violations(&chosen.input, &inputs));
    if !problems.is_empty() {
        let mut error = ErrorResponse::new(
            "invalid_inputs",
            format!(
                "the inputs do not match the input of flow '{}': {}",
                chosen.name,
                problems.join("; ")
            ),
        );
        error.violations = Some(problems);
        return Ok(error.into_response());
    }
    work.add_plan(plan.clone())?;
    let id = work.mint(ctx.seed);
    let flow_index = u32::try_from(index).unwrap_or(u32::MAX);
    work.create_flow(FlowHeader {
        id: id.clone(),
        plan: plan.checksum.clone(),
        flow: flow_index,
        flow_name: chosen.name.clone(),
        inputs,
        cursor: match chosen.start {
            Target::Step(at) => Cursor::Step(at),
            Target::End | Target::Kill => Cursor::End,
        },
        status: FlowStatus::Running,
        error_type: None,
        killing: false,
        round: 0,
        round_start: None,
        started_ms: ctx.now_ms,
        updated_ms: ctx.now_ms,
        finished_ms: None,
        dispatched_ms: None,
        active_iteration: None,
        budget: budget::ledger(chosen.budget.as_ref()),
        output: None,
        parent: None,
        started_by: started_by.map(str::to_owned),
        events: 0,
        children: 0,
        version: 0,
    });
    let run = Run {
        plan,
        flow: flow_index,
        id,
        ctx,
    };
    dispatch::advance(work, &run, Note::default())
}

/// The workflow block's `default`s, for the inputs of its entry flow that were not given.
fn apply_workflow_defaults(plan: &Plan, inputs: &mut Value) {
    let (Some(workflow), Value::Object(given)) = (&plan.workflow, inputs) else {
        return;
    };
    for param in &workflow.input {
        if let Some(default) = &param.default
            && !given.contains_key(&param.name)
        {
            given.insert(param.name.clone(), default.clone());
        }
    }
}

/// Inputs the flow does not declare: most often a misspelt name, which would otherwise be
/// dropped silently and read as missing by every step.
fn unknown_inputs(schema: &Value, inputs: &Value) -> Vec<String> {
    let (Some(declared), Value::Object(given)) =
        (schema.get("properties").and_then(Value::as_object), inputs)
    else {
        return Vec::new();
    };
    given
        .keys()
        .filter(|key| !declared.contains_key(*key))
        .map(|key| {
            let hint = match stratum_compiler::diagnostic::did_you_mean(
                key,
                declared.keys().map(String::as_str),
            ) {
                Some(best) => format!("; did you mean '{best}'?"),
                None if declared.is_empty() => "; the flow declares no inputs".to_owned(),
                None => format!(
                    "; the flow declares {}",
                    quoted(&declared.keys().map(String::as_str).collect::<Vec<_>>())
                ),
            };
            format!("unknown input '{key}'{hint}")
        })
        .collect()
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("'{name}'"))
        .collect::<Vec<_>>()
        .join(", ")
}
