//! What an agent is asked for one step: the dispatch's intent and resolved inputs, the output
//! contract as a JSON Schema, the previous attempt's violations, and which connector and
//! model run it.

use serde_json::{Map, Value, json};
use stratum_agents::{Agent, Prompt};
use stratum_compiler::plan::{Flow, Plan};
use stratum_runtime::response::StepDispatch;

/// The connector a step names (`claude`, `claude:profile::tier`, `codex`, …): only the base
/// counts, as in the reference.
pub fn agent_named(name: &str) -> Option<Agent> {
    let base = name.split(':').next().unwrap_or(name).trim();
    match base {
        "claude" => Some(Agent::Claude),
        "codex" => Some(Agent::Codex),
        "opencode" => Some(Agent::OpenCode),
        _ => None,
    }
}

/// What a decompose step's answer must be: the reference's task graph convention, with the
/// rules the runtime checks.
const TASK_GRAPH: &str = "Answer with a task graph: {\"tasks\": [{\"id\", \"description\", \"depends_on\": [ids], \"files_owned\": [paths], \"files_read\": [paths]}]}. Each id is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit, and unique; depends_on names other tasks, without cycles; tasks that do not depend on each other must not own the same file.";

/// The prompt of `step`, a step of `flow` in `plan`.
pub fn prompt(step: &StepDispatch, plan: &Plan, flow: &Flow) -> Prompt {
    let intent = step
        .intent
        .clone()
        .or_else(|| {
            step.function
                .clone()
                .map(|name| format!("Carry out `{name}`."))
        })
        .unwrap_or_else(|| format!("Carry out step `{}`.", step.step_id));
    let intent = if step.step_mode == "decompose" {
        format!("{intent}\n\n{TASK_GRAPH}")
    } else {
        intent
    };
    Prompt {
        intent,
        inputs: Value::Object(step.inputs.clone().into_iter().collect()),
        schema: Some(schema(step, plan, flow)),
        violations: step.violations.clone().unwrap_or_default(),
    }
}

/// The result's JSON Schema: the step's contract (or `output_schema`) as compiled, else an
/// object of its output fields, all required.
fn schema(step: &StepDispatch, plan: &Plan, flow: &Flow) -> Value {
    let compiled = flow
        .steps
        .iter()
        .find(|candidate| candidate.id == step.step_id)
        .and_then(|found| {
            found
                .output
                .contract
                .and_then(|index| plan.contracts.get(index as usize))
                .map(|contract| contract.schema.clone())
                .or_else(|| found.output.schema.clone())
        });
    if let Some(schema) = compiled {
        return schema;
    }
    let properties: Map<String, Value> = step
        .output_fields
        .iter()
        .map(|(name, ty)| (name.clone(), json!({ "type": json_type(ty) })))
        .collect();
    let required: Vec<&String> = step.output_fields.keys().collect();
    json!({"type": "object", "properties": properties, "required": required})
}

fn json_type(ty: &str) -> &str {
    match ty {
        "string" | "integer" | "number" | "boolean" | "array" | "object" => ty,
        "int" => "integer",
        "float" => "number",
        "bool" => "boolean",
        _ => "string",
    }
}
