//! Evaluations per second of a compiled `ensure` over a typical result.
//!
//! `cargo bench -p stratum-grammar --bench eval`; compare with `python3
//! grammar/benches/python-eval.py` (Python's `eval` of the same pre-compiled expression).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use stratum_grammar::{Bindings, Limits, compile};

const ENSURE: &str = "result.confidence > 0.7 and len(result.items) > 0";

fn eval(c: &mut Criterion) {
    let expr = stratum_grammar::parse(ENSURE).expr.expect("parses");
    let program = compile(&expr, ENSURE);
    let result = json!({
        "confidence": 0.92,
        "items": ["a", "b", "c"],
        "label": "positive",
        "summary": "The change is small, tested and documented; the reviewer agrees with it."
    });
    let limits = Limits::default();
    let mut group = c.benchmark_group("eval");
    group.throughput(Throughput::Elements(1));
    group.bench_function("ensure", |b| {
        b.iter(|| {
            let bindings = Bindings::new().name("result", black_box(&result));
            program.evaluate(&bindings, &limits).expect("evaluates")
        })
    });
    group.bench_function("ensure_bool", |b| {
        b.iter(|| {
            let bindings = Bindings::new().name("result", black_box(&result));
            program
                .evaluate_bool(&bindings, &limits)
                .expect("evaluates")
        })
    });
    group.bench_function("compile", |b| b.iter(|| compile(black_box(&expr), ENSURE)));
    group.finish();
}

criterion_group!(benches, eval);
criterion_main!(benches);
