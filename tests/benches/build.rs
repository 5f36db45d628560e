//! How long `build` takes on the generated 10,000-step spec (see
//! `stratum_tests::generated_spec`), whole and by stage, and what each optimisation of the
//! plan saves the runtime. The README's performance section quotes these figures.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a benchmark may unwrap what it built

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use stratum_compiler::lower::{self, Options};
use stratum_compiler::plan;
use stratum_grammar::{Bindings, Limits};
use stratum_tests::{check_one, generated_spec};

const STEPS: usize = 10_000;

fn build_generated(c: &mut Criterion) {
    let spec = generated_spec(STEPS);
    let mut group = c.benchmark_group("build");
    group.sample_size(10);
    group.bench_function(BenchmarkId::new("check", STEPS), |b| {
        b.iter(|| check_one("generated.stratum.yaml", spec.as_bytes()));
    });
    group.bench_function(BenchmarkId::new("check+lower+write", STEPS), |b| {
        b.iter(|| {
            let (sources, compilation) = check_one("generated.stratum.yaml", spec.as_bytes());
            let src = sources.iter().next().unwrap();
            lower::lower(&compilation, src, &Options::default())
                .unwrap()
                .to_json(false)
        });
    });
    let (sources, compilation) = check_one("generated.stratum.yaml", spec.as_bytes());
    let src = sources.iter().next().unwrap();
    group.bench_function(BenchmarkId::new("lower", STEPS), |b| {
        b.iter(|| lower::lower(&compilation, src, &Options::default()).unwrap());
    });
    let built = lower::lower(&compilation, src, &Options::default()).unwrap();
    group.bench_function(BenchmarkId::new("write", STEPS), |b| {
        b.iter(|| built.to_json(false));
    });
    let json = built.to_json(false);
    group.bench_function(BenchmarkId::new("load", STEPS), |b| {
        b.iter(|| plan::load(json.as_bytes()).unwrap());
    });
    group.finish();
}

/// What the runtime would pay without each optimisation, per use.
fn optimisations(c: &mut Criterion) {
    let mut group = c.benchmark_group("optimisation");

    // Constant folding: an `ensure` with constant arithmetic, evaluated per result.
    let text = "result.elapsed_s <= 60 * 60 * 2 and len(result.items) < 10 * 10 - 1";
    let expr = stratum_grammar::parse(text).expr.unwrap();
    let folded = stratum_grammar::compile(&expr, text);
    let unfolded = stratum_grammar::compile::compile_unfolded(&expr, text);
    let result = json!({"elapsed_s": 1200, "items": [1, 2, 3]});
    let limits = Limits::default();
    for (name, program) in [("ensure folded", &folded), ("ensure unfolded", &unfolded)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let bindings = Bindings::new().name("result", &result);
                program
                    .evaluate_bool(black_box(&bindings), &limits)
                    .unwrap()
            });
        });
    }

    // Removing a `skip_if` that is always false: one evaluation per dispatch saved.
    let never = stratum_grammar::parse("False").expr.unwrap();
    let never = stratum_grammar::compile(&never, "False");
    group.bench_function("skip_if constant false, kept", |b| {
        b.iter(|| {
            never
                .evaluate_bool(black_box(&Bindings::new()), &limits)
                .unwrap()
        });
    });

    // Interned paths: a binding resolved by walking field names already split, against
    // splitting and interpreting the `$`-reference text at dispatch, as the reference does.
    let steps: Value = json!({"scan": {"summary": "ok", "details": {"files": 3}}});
    let reference = "$.steps.scan.output.details.files";
    let interned: Vec<String> = vec!["details".into(), "files".into()];
    group.bench_function("input binding, interned path", |b| {
        b.iter(|| {
            let mut value = &steps["scan"];
            for field in black_box(&interned) {
                value = value.get(field.as_str()).unwrap();
            }
            value.clone()
        });
    });
    group.bench_function("input binding, parsed at dispatch", |b| {
        b.iter(|| {
            let text = black_box(reference);
            let rest = text.strip_prefix("$.steps.").unwrap();
            let mut parts = rest.split('.');
            let step = parts.next().unwrap();
            assert_eq!(parts.next(), Some("output"));
            let mut value = steps.get(step).unwrap();
            for field in parts {
                value = value.get(field).unwrap();
            }
            value.clone()
        });
    });

    // Precomputed levels: what a runtime would otherwise compute from the dependencies of a
    // 10,000-step flow before it could dispatch a level.
    let spec = generated_spec(STEPS);
    let (sources, compilation) = check_one("generated.stratum.yaml", spec.as_bytes());
    let built = lower::lower(
        &compilation,
        sources.iter().next().unwrap(),
        &Options::default(),
    )
    .unwrap();
    let flow = &built.flows[0];
    group.bench_function("levels of 10,000 steps, computed", |b| {
        b.iter(|| {
            let mut level = vec![0u32; flow.steps.len()];
            for (index, step) in flow.steps.iter().enumerate() {
                level[index] = step
                    .depends_on
                    .iter()
                    .map(|&d| level[d as usize] + 1)
                    .max()
                    .unwrap_or(0);
            }
            let mut levels: Vec<Vec<u32>> = Vec::new();
            for (index, &l) in level.iter().enumerate() {
                if levels.len() <= l as usize {
                    levels.resize_with(l as usize + 1, Vec::new);
                }
                levels[l as usize].push(index as u32);
            }
            levels
        });
    });
    group.finish();
}

criterion_group!(benches, build_generated, optimisations);
criterion_main!(benches);
