//! How long each output format takes to render the diagnostics of the generated 10,000-step
//! spec with a warning in every step (see `stratum_tests::generated_spec_with_warnings`), the
//! check itself excluded. The README's performance section quotes these figures; the human
//! format stays within twice the time of JSON.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use stratum_compiler::render::{self, github, human, json, sarif, short};
use stratum_tests::{check_one, generated_spec_with_warnings};

const STEPS: usize = 10_000;

fn render_formats(c: &mut Criterion) {
    let spec = generated_spec_with_warnings(STEPS);
    let (sources, compilation) = check_one("generated.stratum.yaml", spec.as_bytes());
    let compilations = [compilation];
    let reports = render::reports(&sources, &compilations);
    let mut group = c.benchmark_group("render");
    group.sample_size(10);
    group.bench_function(BenchmarkId::new("human", STEPS), |b| {
        b.iter(|| human::render(&sources, &reports, human::Style::PLAIN));
    });
    group.bench_function(BenchmarkId::new("short", STEPS), |b| {
        b.iter(|| short::render(&sources, &reports));
    });
    group.bench_function(BenchmarkId::new("json", STEPS), |b| {
        b.iter(|| json::render(&sources, &reports));
    });
    group.bench_function(BenchmarkId::new("github", STEPS), |b| {
        b.iter(|| github::render(&sources, &reports));
    });
    group.bench_function(BenchmarkId::new("sarif", STEPS), |b| {
        b.iter(|| sarif::render(&sources, &reports));
    });
    group.finish();
}

criterion_group!(benches, render_formats);
criterion_main!(benches);
