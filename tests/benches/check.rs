//! How long `check` takes on generated specs of 1,000 to 50,000 steps (about 300 bytes a step;
//! see `stratum_tests::generated_spec`), and on generated version 0.3 specs of 1,000 and 10,000
//! steps (decompose, parallel_dispatch and pipeline steps with typed templates; see
//! `stratum_tests::generated_v03_spec`), from bytes to sorted diagnostics. The README's
//! performance section quotes these figures.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use stratum_tests::{check_one, generated_spec, generated_v03_spec};

fn check_generated(c: &mut Criterion) {
    let mut group = c.benchmark_group("check");
    group.sample_size(10);
    for steps in [1_000, 10_000, 50_000] {
        let spec = generated_spec(steps);
        group.throughput(Throughput::Bytes(spec.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(steps), &spec, |b, spec| {
            b.iter(|| check_one("generated.stratum.yaml", spec.as_bytes()));
        });
    }
    group.finish();
    let mut group = c.benchmark_group("check_v03");
    group.sample_size(10);
    for steps in [1_000, 10_000] {
        let spec = generated_v03_spec(steps);
        group.throughput(Throughput::Bytes(spec.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(steps), &spec, |b, spec| {
            b.iter(|| check_one("generated-v03.stratum.yaml", spec.as_bytes()));
        });
    }
    group.finish();
}

criterion_group!(benches, check_generated);
criterion_main!(benches);
