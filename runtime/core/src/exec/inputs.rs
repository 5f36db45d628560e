//! Where a step's values come from: its inputs (`$.input…`, `$.steps.<id>.output…`, constants,
//! through the plan's interned paths), the outputs its `skip_if` and `ensure`s may read (the
//! steps it depends on, as compiled), and `$`-references written as text (`agent:`).
//!
//! Every read goes through [`Work`], one step row at a time: resolving a step's inputs costs
//! what the step names, not what the flow holds.

use std::collections::BTreeMap;

use serde_json::Value;
use stratum_compiler::plan::{Binding, Step};

use super::Run;
use crate::state::FlowHeader;
use crate::store::StoreError;

use super::work::Work;

/// The outputs of the steps `step` depends on, by id (null for a step without one): what
/// `$.steps.<id>.output` reads in its `skip_if` and `ensure`s.
pub(crate) fn dependency_outputs(
    work: &mut Work<'_>,
    run: &Run<'_>,
    step: &Step,
) -> Result<Vec<(String, Value)>, StoreError> {
    let mut outputs = Vec::with_capacity(step.depends_on.len());
    for &dependency in &step.depends_on {
        let id = run.step(dependency)?.id.clone();
        let output = work.output(&run.id, dependency)?.unwrap_or(Value::Null);
        outputs.push((id, output));
    }
    Ok(outputs)
}

/// A step's inputs, resolved: `$.input…` from the flow's inputs, `$.steps.<id>.output…` from
/// that step's output (null where the step was skipped or the field is absent).
pub(crate) fn resolve_inputs(
    work: &mut Work<'_>,
    run: &Run<'_>,
    header: &FlowHeader,
    step: &Step,
) -> Result<BTreeMap<String, Value>, StoreError> {
    let mut inputs = BTreeMap::new();
    for input in &step.inputs {
        let value = resolve_binding(work, run, header, &input.value)?;
        inputs.insert(input.name.clone(), value);
    }
    Ok(inputs)
}

/// One binding's value: `$.input…`, `$.steps.<id>.output…` or a constant.
pub(crate) fn resolve_binding(
    work: &mut Work<'_>,
    run: &Run<'_>,
    header: &FlowHeader,
    binding: &Binding,
) -> Result<Value, StoreError> {
    Ok(match binding {
        Binding::Input { path } => walk(&header.inputs, path_of(run, *path)),
        Binding::Step { step, path } => {
            let output = work.output(&run.id, *step)?.unwrap_or(Value::Null);
            walk(&output, path_of(run, *path))
        }
        Binding::Const(value) => value.clone(),
    })
}

fn path_of<'p>(run: &'p Run<'_>, path: u32) -> &'p [String] {
    run.plan
        .paths
        .get(path as usize)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Follows `path` into `value`: object fields, and list indices written as numbers.
pub(crate) fn walk(value: &Value, path: &[String]) -> Value {
    let mut at = value;
    for segment in path {
        let next = match at {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        match next {
            Some(value) => at = value,
            None => return Value::Null,
        }
    }
    at.clone()
}

/// Resolves a `$`-reference written as text (an `agent: $.input.who`).
pub(crate) fn resolve_reference(
    work: &mut Work<'_>,
    run: &Run<'_>,
    header: &FlowHeader,
    text: &str,
) -> Result<Option<Value>, StoreError> {
    let parts: Vec<String> = text
        .trim_start_matches("$.")
        .split('.')
        .map(str::to_owned)
        .collect();
    match parts.as_slice() {
        [root, rest @ ..] if root == "input" => Ok(Some(walk(&header.inputs, rest))),
        [root, id, output, rest @ ..] if root == "steps" && output == "output" => {
            let Some(index) = run.steps().iter().position(|step| step.id == *id) else {
                return Ok(None);
            };
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            let value = work.output(&run.id, index)?.unwrap_or(Value::Null);
            Ok(Some(walk(&value, rest)))
        }
        _ => Ok(None),
    }
}
