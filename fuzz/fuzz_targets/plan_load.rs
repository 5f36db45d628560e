//! Any bytes through the plan loader, and every expression of a plan it accepts through the VM:
//! no panic, no hang. The loader is what the runtime trusts, so what it accepts must be safe to
//! index and to run. Run with `cargo fuzz run plan_load` from this directory; seed the corpus
//! with plans from `stratumc build`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use stratum_grammar::{Bindings, Limits};

fuzz_target!(|bytes: &[u8]| {
    let Ok(plan) = stratum_compiler::plan::load(bytes) else { return };
    let result = json!({"ok": true, "n": 1, "items": [1, 2]});
    let input = json!({"text": "x"});
    let bindings = Bindings::new().name("result", &result).input(&input);
    let limits = Limits { instructions: 10_000, ..Limits::default() };
    for flow in &plan.flows {
        for step in &flow.steps {
            let skip = step.skip.as_ref().map(|skip| &skip.condition);
            for expression in step.ensure.iter().chain(skip) {
                let _ = expression.program.evaluate(&bindings, &limits);
            }
        }
    }
});
