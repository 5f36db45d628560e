//! Any text through the whole expression pipeline: parse, print, check, compile, evaluate and
//! explain. No panic, no hang (the instruction budget bounds evaluation), spans inside the text,
//! and printing a parsed expression gives text that parses to the same tree. Run with
//! `cargo fuzz run expression` from this directory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use stratum_grammar::{Bindings, Env, Limits, Type};

fuzz_target!(|bytes: &[u8]| {
    let Ok(source) = std::str::from_utf8(bytes) else { return };
    let parsed = stratum_grammar::parse(source);
    for problem in &parsed.problems {
        assert!(problem.span.end as usize <= source.len());
    }
    let Some(expr) = parsed.expr else { return };
    if parsed.problems.is_empty() {
        let printed = stratum_grammar::print(&expr);
        let reparsed = stratum_grammar::parse(&printed);
        assert!(reparsed.problems.is_empty(), "{printed:?} does not parse");
        assert_eq!(reparsed.expr.map(|e| e.without_spans()), Some(expr.without_spans()));
    }
    let env = Env::new()
        .with("result", "{a: int, b: list<string>, c: any, d: float?}".parse().unwrap_or(Type::Any))
        .with("item", Type::Any);
    let checked = stratum_grammar::check(&expr, &env);
    for problem in &checked.problems {
        assert!(problem.span.end as usize <= source.len());
    }
    let program = stratum_grammar::compile(&expr, source);
    let result = json!({"a": 3, "b": ["x", "yy"], "c": {"k": [1, 2.5, null]}, "d": null});
    let item = json!({"id": 1});
    let bindings = Bindings::new().name("result", &result).name("item", &item);
    let limits = Limits { instructions: 10_000, ..Limits::default() };
    if let Err(error) = program.evaluate(&bindings, &limits) {
        assert!(error.span.end as usize <= source.len());
    }
    let _ = program.explain(&bindings, &limits).to_string();
});
