//! `stratumc graph`'s pictures of the examples, in both formats: any change to what is drawn
//! shows in review.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests may index and unwrap what they built

use std::path::Path;

use stratum_compiler::Compilation;
use stratum_compiler::graph::{self, Format};
use stratum_tests::{check_one, render_snapshot};

fn checked(path: &Path) -> Compilation {
    let bytes = std::fs::read(path).expect("the examples are readable");
    let name = path.file_name().unwrap().to_string_lossy();
    let (sources, compilation) = check_one(&name, &bytes);
    assert!(
        !compilation.has_errors(),
        "{}",
        render_snapshot(&sources, std::slice::from_ref(&compilation))
    );
    compilation
}

#[test]
fn examples_as_dot() {
    insta::glob!("../../examples", "*.stratum.yaml", |path| {
        let picture = graph::draw(&checked(path), None, Format::Dot).unwrap();
        insta::assert_snapshot!(picture);
    });
}

#[test]
fn examples_as_mermaid() {
    insta::glob!("../../examples", "*.stratum.yaml", |path| {
        let picture = graph::draw(&checked(path), None, Format::Mermaid).unwrap();
        insta::assert_snapshot!(picture);
    });
}

#[test]
fn one_flow_of_an_example_leaves_out_the_flow_that_runs_it() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/deploy.stratum.yaml");
    let compilation = checked(&path);
    let sub_flow = graph::draw(&compilation, Some("integration_tests"), Format::Mermaid).unwrap();
    insta::assert_snapshot!(sub_flow);
    let whole = graph::draw(&compilation, Some("deploy"), Format::Dot).unwrap();
    assert_eq!(whole, graph::draw(&compilation, None, Format::Dot).unwrap());
}
