//! How long `check` takes on generated specs of 1,000 to 50,000 steps (about 300 bytes a step;
//! see `stratum_tests::generated_spec`), from bytes to sorted diagnostics. The README's
//! performance section quotes these figures.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use stratum_tests::{check_one, generated_spec};

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
}

criterion_group!(benches, check_generated);
criterion_main!(benches);
