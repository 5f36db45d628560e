//! The spec corpus: every valid spec and example checks clean; every invalid spec reports
//! exactly the diagnostics its markers state, and its rendering is snapshot-tested.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests may index and unwrap what they built

use std::collections::BTreeSet;
use std::path::Path;

use stratum_compiler::diagnostic::Code;
use stratum_tests::{
    CODES_TESTED_ELSEWHERE, actual_diagnostics, check_one, expected_diagnostics, render_snapshot,
};

fn corpus_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[test]
fn valid_specs_and_examples_check_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for dir in [root.join("corpus/valid"), root.join("../examples")] {
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .expect("the corpus directory exists")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        paths.sort();
        for path in paths
            .into_iter()
            .filter(|p| p.to_string_lossy().ends_with(".stratum.yaml"))
        {
            let bytes = std::fs::read(&path).expect("corpus files are readable");
            let (sources, compilation) = check_one(&corpus_name(&path), &bytes);
            assert!(
                compilation.diagnostics.is_empty(),
                "{} must check clean:\n{}",
                path.display(),
                render_snapshot(&sources, std::slice::from_ref(&compilation))
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 10,
        "expected the examples and the valid corpus, found {checked} specs"
    );
}

#[test]
fn invalid_specs_report_what_their_markers_say() {
    insta::glob!("../corpus", "invalid/*.stratum.yaml", |path| {
        let bytes = std::fs::read(path).expect("corpus files are readable");
        let name = format!("invalid/{}", corpus_name(path));
        let (sources, compilation) = check_one(&name, &bytes);
        let expected = expected_diagnostics(&String::from_utf8_lossy(&bytes));
        let actual = actual_diagnostics(&sources, &compilation.diagnostics);
        let rendered = render_snapshot(&sources, std::slice::from_ref(&compilation));
        assert_eq!(
            actual, expected,
            "{name}: the diagnostics differ from the markers:\n{rendered}"
        );
        insta::assert_snapshot!(rendered);
    });
}

#[test]
fn every_code_has_a_fixture_named_after_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let names: BTreeSet<String> = ["invalid", "expressions"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).expect("the corpus directory exists"))
        .filter_map(Result::ok)
        .map(|e| corpus_name(&e.path()))
        .collect();
    for code in Code::ALL {
        let elsewhere = CODES_TESTED_ELSEWHERE.iter().any(|(c, _)| c == code);
        let has_fixture = names
            .iter()
            .any(|name| name.starts_with(&format!("{code}_")));
        assert!(
            has_fixture || elsewhere,
            "{code} has no fixture tests/corpus/invalid/{code}_<name>.stratum.yaml \
             or tests/corpus/expressions/{code}_<name>.expr"
        );
    }
}
