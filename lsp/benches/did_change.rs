//! What a `didChange` costs on a 1,000-step spec (`stratum_tests::generated_spec`), from the
//! changed text to the protocol diagnostics ready to publish: the change applied, the whole
//! document checked, its diagnostics converted. The debounce delay is not included. A second
//! benchmark adds what the first request after a change pays for navigation: building the
//! occurrence index. The README quotes the median and the p95 from `target/criterion`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use stratum_lsp::analysis::Analysis;
use stratum_lsp::diagnostics::{ExplanationLinks, to_lsp};
use stratum_tests::generated_spec;
use tower_lsp_server::ls_types::Uri;

fn did_change(c: &mut Criterion) {
    let spec = generated_spec(1_000);
    let uri: Uri = "file:///bench/generated.stratum.yaml"
        .parse()
        .expect("a valid URI");
    let links = ExplanationLinks::default();
    // Each iteration types one character into a step's intent, as an editor would send it.
    let at = spec
        .find("Review part 501")
        .expect("the generated spec has step 501");
    let mut group = c.benchmark_group("lsp");
    group.sample_size(100);
    let mut typed = 0u32;
    group.bench_function("did_change/1000 steps", |b| {
        b.iter(|| {
            typed += 1;
            let mut text = spec.clone();
            text.insert_str(at, if typed.is_multiple_of(2) { "x" } else { "y" });
            let analysis = Analysis::new("generated.stratum.yaml", &text);
            black_box(to_lsp(&analysis, &uri, &links))
        });
    });
    let analysis = Analysis::new("generated.stratum.yaml", &spec);
    group.bench_function("index/1000 steps", |b| {
        b.iter(|| black_box(stratum_lsp::index::Index::new(&analysis)));
    });
    group.finish();
}

criterion_group!(benches, did_change);
criterion_main!(benches);
