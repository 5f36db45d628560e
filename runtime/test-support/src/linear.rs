//! A linear spec of any length, for the store's tests and benchmarks: `n` inline steps, each
//! with an `ensure`, each reading the previous step's output, so that a `step_done` does what a
//! real one does (a contract, an ensure, a binding) and nothing more.

#![allow(dead_code)]

use std::fmt::Write;

use serde_json::{Value, json};

/// The spec text of a flow `main` of `steps` inline steps `s0`, `s1`, ….
pub fn linear_spec(steps: usize) -> String {
    let mut spec = String::from(
        "version: \"0.2\"\n\
         contracts:\n\
         \x20 Part:\n\
         \x20   n: {type: integer}\n\
         \x20   note: {type: string}\n\
         flows:\n\
         \x20 main:\n\
         \x20   input: {text: {type: string}}\n\
         \x20   output: Part\n\
         \x20   steps:\n",
    );
    for index in 0..steps {
        let _ = writeln!(spec, "      - id: {}", step_id(index));
        let _ = writeln!(spec, "        intent: \"Do part {index} of the work\"");
        match index {
            0 => {
                let _ = writeln!(spec, "        inputs: {{text: \"$.input.text\"}}");
            }
            _ => {
                let previous = step_id(index - 1);
                let _ = writeln!(
                    spec,
                    "        inputs: {{previous: \"$.steps.{previous}.output.note\"}}"
                );
                let _ = writeln!(spec, "        depends_on: [{previous}]");
            }
        }
        let _ = writeln!(spec, "        output_contract: Part");
        let _ = writeln!(spec, "        ensure: [\"result.n >= 0\"]");
    }
    spec
}

/// The id of step `index`.
pub fn step_id(index: usize) -> String {
    format!("s{index}")
}

/// The result the tests submit for step `index`: it passes the step's contract and ensure.
pub fn result(index: usize) -> Value {
    json!({"n": index, "note": format!("part {index} done")})
}

/// The flow's inputs.
pub fn inputs() -> Value {
    json!({"text": "the work"})
}
