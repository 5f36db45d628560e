//! One line of documentation per spec key, from the format reference's field reference.
//!
//! The keys are those of `stratum_compiler::syntax::keys`; a test checks that every key of
//! every shape has its line here.

/// The mapping a key stands in: the same key means different things in different places.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyPlace {
    Root,
    ContractField,
    /// A parameter of a function's or flow's `input`.
    InputParam,
    Function,
    Budget,
    Flow,
    Step,
    /// A stage of a pipeline step (version 0.3).
    Stage,
    /// A pipeline stage's `fanout`.
    Fanout,
    /// A judge step's `judge:` block.
    Judge,
    /// One of a judge's `predicates`.
    Predicate,
    /// A judge's `budget`.
    JudgeBudget,
    /// A reasoning template (`reasoning_template`, `task_reasoning_template`).
    Certificate,
    /// One of a reasoning template's `sections`.
    Section,
    Workflow,
    WorkflowParam,
}

/// The documentation of `key` written in a mapping of `place`.
pub fn doc(place: KeyPlace, key: &str) -> Option<&'static str> {
    use KeyPlace::*;
    Some(match (place, key) {
        (Root, "version") => {
            "Required. The spec version: `\"0.1\"`, `\"0.2\"` or `\"0.3\"`; 0.2 adds gates, inline steps, flow composition, policies, iterations, `skip_if`, routing and workflows; 0.3 adds decompose, parallel_dispatch and pipeline steps."
        }
        (Root, "contracts") => {
            "Named output schemas: each contract maps field names to `{type: <type>}` definitions."
        }
        (Root, "functions") => "Reusable step definitions, referenced by function steps.",
        (Root, "flows") => {
            "Flow definitions: an input schema, an output contract and ordered steps."
        }
        (Root, "workflow") => {
            "(v0.2) Self-registering workflow declaration, so that `stratum_list_workflows` can discover the spec."
        }

        (ContractField | InputParam, "type") => {
            if place == ContractField {
                "Required. The field's type: `string`, `number`, `integer`, `boolean`, `array`, `object`, a contract name, or a typed form such as `float[0.0..1.0]`, `Address[]`, `string?` or `'a' | 'b'`."
            } else {
                "The parameter's type: `string`, `number`, `integer`, `boolean`, `array`, `object`, a contract name, or a typed form such as `string?` or `Address[]`."
            }
        }
        (ContractField | InputParam, "values") => "The fixed values the field may take (an enum).",
        (ContractField | InputParam, "items") => {
            "The type of an array's items, as a field definition."
        }
        (ContractField | InputParam, "optional") => {
            "`true` when the field may be left out of the object."
        }
        (ContractField | InputParam, "required") => {
            "`false` when the field may be left out of the object."
        }
        (ContractField | InputParam, "description") => {
            "What the field holds, for people and agents."
        }
        (ContractField | InputParam, "default") => "The value used when the field is left out.",
        (ContractField | InputParam, "minimum") => "The smallest number the field accepts.",
        (ContractField | InputParam, "maximum") => "The largest number the field accepts.",
        (ContractField | InputParam, "min_length") => "The fewest characters the string accepts.",
        (ContractField | InputParam, "max_length") => "The most characters the string accepts.",

        (Function, "mode") => "Required. `infer`, `compute` or `gate`.",
        (Function, "intent") => "What the function does; required for `infer` and `compute`.",
        (Function, "input") => {
            "The function's parameters, `name: {type: …}`; required for `infer` and `compute`."
        }
        (Function, "output") => {
            "The contract the function's result must satisfy; required for `infer` and `compute`."
        }
        (Function, "ensure") => {
            "Expressions over `result` that must all hold, else the step is retried (forbidden on gates)."
        }
        (Function, "retries") => {
            "Attempts allowed when an `ensure` fails; default 3 (forbidden on gates)."
        }
        (Function, "budget") => "Time and cost limits: `ms`, `usd` (forbidden on gates).",
        (Function, "model") => "The model to run the function with, such as `\"gpt-4o\"`.",
        (Function, "timeout") => "(v0.2, gates only) Seconds before a pending gate is killed.",
        (Function, "guardrails") => {
            "(v0.2) Regular expressions the output must not match (forbidden on gates)."
        }
        (Function, "cache") => "(v0.2) `true` to reuse a result for the same inputs.",

        (Budget, "ms") => "Time limit in milliseconds.",
        (Budget, "usd") => "Cost limit in US dollars.",
        (Budget, "max_agent_dispatches") => "The most agent dispatches a whole run may make.",
        (Budget, "max_tokens") => "The most tokens a whole run may use.",

        (Flow, "input") => {
            "Required. The flow's input schema, `name: {type: …}`, read as `$.input.<name>`."
        }
        (Flow, "output") => "The flow's output contract; optional for gate-only flows.",
        (Flow, "budget") => "Time and cost limits of the whole flow: `ms`, `usd`.",
        (Flow, "max_rounds") => "(v0.2) The most gate revise cycles.",
        (Flow, "steps") => "Required. The flow's ordered steps.",

        (Step, "id") => "Required. The step's id, unique within the flow.",
        (Step, "function") => {
            "Runs a function definition (function step); exactly one of `function`, `intent` and `flow`."
        }
        (Step, "intent") => {
            "(v0.2) What an inline step does; exactly one of `function`, `intent` and `flow`."
        }
        (Step, "flow") => {
            "(v0.2) Runs another flow (sub-flow step); exactly one of `function`, `intent` and `flow`."
        }
        (Step, "judge") => {
            "(v0.2) Makes the step a judge step: the `predicates` the server decides, with `stakes` and a `budget`."
        }
        (Step, "agent") => "(v0.2, inline steps) The agent the step is assigned to.",
        (Step, "inputs") => {
            "The step's inputs: literals, `$.input.<field>` or `$.steps.<id>.output[.<field>]`; references add dependencies."
        }
        (Step, "depends_on") => "Explicit dependencies: steps that must finish first.",
        (Step, "output_schema") => "A JSON Schema the step's result is validated against.",
        (Step, "ensure") => "(v0.2, inline steps) Expressions over `result` that must all hold.",
        (Step, "retries") => {
            "(v0.2, inline steps) Attempts allowed when an `ensure` fails; default 1."
        }
        (Step, "output_contract") => {
            "(v0.2, inline steps) The contract the step's result must satisfy."
        }
        (Step, "model") => "(v0.2, inline steps) The model to run the step with.",
        (Step, "budget") => "(v0.2, inline steps) Time and cost limits: `ms`, `usd`.",
        (Step, "on_approve") => {
            "(v0.2, gate steps) Required. The step to route to on approval, or `~` to complete the flow."
        }
        (Step, "on_revise") => {
            "(v0.2, gate steps) Required. The step to route back to on revision; must run before the gate."
        }
        (Step, "on_kill") => {
            "(v0.2, gate steps) Required. The step to route to when killed, or `~` to terminate the flow."
        }
        (Step, "policy") => "(v0.2, gate steps) Auto-resolution policy: `gate`, `flag` or `skip`.",
        (Step, "policy_fallback") => {
            "(v0.2, gate steps) The policy to fall back to; requires `policy`."
        }
        (Step, "on_fail") => {
            "(v0.2) The step to route to when retries are exhausted; requires an `ensure`."
        }
        (Step, "next") => "(v0.2) The step to go to on success instead of the next one.",
        (Step, "skip_if") => {
            "(v0.2) An expression: when true, the step is skipped (forbidden on gates)."
        }
        (Step, "skip_reason") => "(v0.2) Why the step was skipped, recorded in the trace.",
        (Step, "max_iterations") => {
            "(v0.2) The most times the step is run in a loop (forbidden on gates)."
        }
        (Step, "exit_criterion") => {
            "(v0.2) An expression over `result` that ends the iterations when true; requires `max_iterations`."
        }
        (Step, "score_expr") => {
            "(v0.2) A number expression scoring each iteration (`best_score` in `exit_criterion`); requires `max_iterations`."
        }
        (Step, "accumulate") => {
            "(v0.2) A list expression whose items are collected across iterations, deduplicated; requires `max_iterations`."
        }
        (Step, "accumulate_key") => {
            "(v0.2) An expression over `item` that deduplicates accumulated items; requires `accumulate`."
        }
        (Step, "guardrails") => "(v0.2) Regular expressions the output must not match.",
        (Step, "cache") => "(v0.2) `true` to reuse a result for the same inputs.",
        (Step, "reasoning_template") => "(v0.2) A reasoning certificate template for the step.",
        (Step, "type") => {
            "(v0.3) What the step is: `function`, `inline` or `flow` (which must agree with its `function`, `intent` or `flow`), or `decompose`, `parallel_dispatch` or `pipeline`."
        }
        (Step, "source") => {
            "(v0.3, parallel_dispatch and pipeline steps) Required there. The list that fans out: `$.input.<field>` or `$.steps.<id>.output.<field>`; one task (or pipeline item) per element."
        }
        (Step, "intent_template") => {
            "(v0.3, parallel_dispatch steps) Required there. Each task's intent, with `{field}` placeholders filled from the task's element (`{task.field}` too); `{{` and `}}` for braces."
        }
        (Step, "max_concurrent") => {
            "(v0.3, parallel_dispatch and pipeline steps) The most tasks that run at once; default 3."
        }
        (Step, "isolation") => {
            "(v0.3, parallel_dispatch and pipeline steps) `worktree` (the default: each task in its own git worktree) or `none` (tasks share the project root)."
        }
        (Step, "require") => {
            "(v0.3, parallel_dispatch and pipeline steps) How many tasks (pipeline: items) must complete: `all` (the default), `any` or a number."
        }
        (Step, "merge") => {
            "(v0.3, parallel_dispatch and pipeline steps) How the tasks' changes are merged: `sequential_apply` (the default: in task order) or `manual`."
        }
        (Step, "task_timeout") => {
            "(v0.3, parallel_dispatch and pipeline steps) Seconds each task may run; default 1800."
        }
        (Step, "task_reasoning_template") => {
            "(v0.3, parallel_dispatch and pipeline steps) A reasoning certificate template each task's answer must follow."
        }
        (Step, "capture_diff") => {
            "(v0.3, parallel_dispatch and pipeline steps) `true` to record each task's changes as a diff."
        }
        (Step, "defer_advance") => {
            "(v0.3, parallel_dispatch and pipeline steps) `true` to wait, once every task has finished, for the client to advance the flow (after its own merge)."
        }
        (Step, "pre_merge_verify") => {
            "(v0.3, parallel_dispatch and pipeline steps) Commands each task's worktree must pass before its changes are merged, or a `$.input` reference to such a list."
        }
        (Step, "stages") => {
            "(v0.3, pipeline steps) Required there. The stages every item of `source` goes through, in order."
        }
        (Stage, "intent_template") => {
            "Required. The stage's intent for one item: `{item}`, `{item.field}`, `{prev}` (the previous stage's result), in a join `{prevs}`; `{{` and `}}` for braces."
        }
        (Stage, "agent") => "The agent that runs the stage; default the step's.",
        (Stage, "task_reasoning_template") => {
            "A reasoning certificate template the stage's answer must follow."
        }
        (Stage, "task_timeout") => "Seconds the stage may run for one item; default the step's.",
        (Stage, "when") => {
            "An expression over `item` (and `prev`, `prev_raw` after the first stage): when false, the stage is skipped for the item and passes the previous result on."
        }
        (Stage, "exit_when") => {
            "An expression over `item`, `result` (the answer as JSON text) and `result_raw`: when true, the item's later stages are skipped."
        }
        (Stage, "fanout") => {
            "Splits the item: the stage answers a list, and the stages up to the `join` run once per element (lanes)."
        }
        (Stage, "join") => {
            "`true` on the stage that gathers the lanes of the `fanout` before it (`{prevs}`)."
        }
        (Fanout, "max") => "Required. The most lanes the split may produce.",
        (Fanout, "require") => {
            "How many lanes must complete for the join: `all` (the default), `any` or a number."
        }

        (Judge, "predicates") => {
            "Required. What must hold, one predicate each; the step is met when every predicate is."
        }
        (Judge, "stakes") => {
            "How hard the judge looks: `cheap` (deterministic predicates only), `default` (an agent reads the evidence) or `paranoid` (a second, cold read)."
        }
        (Judge, "budget") => "The judge's limits: `max_turns`, `max_dollars`, `max_wall_clock_s`.",
        (Predicate, "id") => "Required. The predicate's id, unique within the judge.",
        (Predicate, "type") => {
            "Required. `deterministic` (an expression over the staged files), `verified` (an agent quotes the evidence) or `judged` (an agent weighs it)."
        }
        (Predicate, "statement") => {
            "Required. What must hold: for `deterministic`, an expression using `file_exists`, `file_contains`, `len`, `min`, `max`, `bool`, `int` and `str` on paths under `artifacts/` or `modified/`; otherwise a sentence."
        }
        (Predicate, "applied_gate") => "The confidence, 1 to 10, a `met` verdict needs; default 7.",
        (JudgeBudget, "max_turns") => "The most turns the judge may take.",
        (JudgeBudget, "max_dollars") => {
            "The most the judge's agents may cost, in US dollars; more than 0."
        }
        (JudgeBudget, "max_wall_clock_s") => {
            "The most seconds the judge may take, all tiers together; more than 0."
        }
        (Certificate, "sections") => {
            "The sections the answer must have, in order; default premises, trace and conclusion."
        }
        (Certificate, "require_citations") => {
            "`true` to require premises numbered `[P1]`, `[P2]`… and a conclusion that cites them."
        }
        (Section, "id") => "Required. The section's id, unique within the template.",
        (Section, "label") => {
            "Required. The heading the answer writes as `## <label>`; unique within the template."
        }
        (Section, "description") => "Required. What the agent writes in the section.",

        (Workflow, "name") => {
            "Required. The workflow's name: lowercase words joined by hyphens; a flow of that name is the entry flow."
        }
        (Workflow, "description") => "Required. What the workflow does.",
        (Workflow, "input") => {
            "Required. The workflow's inputs; keys must match the entry flow's input keys."
        }

        (WorkflowParam, "type") => {
            "Required. `string`, `boolean`, `integer`, `number`, `array` or `object`."
        }
        (WorkflowParam, "required") => "Whether the input must be given.",
        (WorkflowParam, "default") => "The value used when the input is not given.",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratum_compiler::syntax::keys;

    #[test]
    fn every_key_of_the_format_is_documented() {
        let shapes = [
            (KeyPlace::Root, &keys::ROOT),
            (KeyPlace::ContractField, &keys::CONTRACT_FIELD),
            (KeyPlace::InputParam, &keys::INPUT_PARAM),
            (KeyPlace::Function, &keys::FUNCTION),
            (KeyPlace::Budget, &keys::BUDGET),
            (KeyPlace::Flow, &keys::FLOW),
            (KeyPlace::Step, &keys::STEP),
            (KeyPlace::Stage, &keys::STAGE),
            (KeyPlace::Fanout, &keys::FANOUT),
            (KeyPlace::Judge, &keys::JUDGE),
            (KeyPlace::Predicate, &keys::PREDICATE),
            (KeyPlace::JudgeBudget, &keys::JUDGE_BUDGET),
            (KeyPlace::Certificate, &keys::CERTIFICATE),
            (KeyPlace::Section, &keys::SECTION),
            (KeyPlace::Workflow, &keys::WORKFLOW),
            (KeyPlace::WorkflowParam, &keys::WORKFLOW_PARAM),
        ];
        for (place, shape) in shapes {
            for key in shape.keys {
                assert!(doc(place, key.name).is_some(), "{place:?} {}", key.name);
            }
        }
        assert_eq!(doc(KeyPlace::Step, "mode"), None);
    }
}
