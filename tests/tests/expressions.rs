//! Expression fixtures: each `corpus/expressions/*.expr` reports exactly the codes its
//! `# expect:` line lists, checked against the names its `# let` lines declare, and its
//! rendering is snapshot-tested.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests may index and unwrap what they built

use stratum_tests::{ExpressionFixture, render_expression_snapshot};

#[test]
fn expression_fixtures_report_what_they_expect() {
    insta::glob!("../corpus", "expressions/*.expr", |path| {
        let text = std::fs::read_to_string(path).unwrap();
        let fixture = ExpressionFixture::parse(&text).unwrap();
        let name = format!(
            "expressions/{}",
            path.file_name().unwrap().to_string_lossy()
        );
        let (sources, diagnostics) = fixture.diagnose(&name);
        let rendered = render_expression_snapshot(&sources, &diagnostics);
        let mut actual: Vec<&str> = diagnostics.iter().map(|d| d.code.as_str()).collect();
        let mut expected: Vec<&str> = fixture.expect.iter().map(String::as_str).collect();
        actual.sort_unstable();
        expected.sort_unstable();
        assert_eq!(actual, expected, "{name}:\n{rendered}");
        insta::assert_snapshot!(rendered);
    });
}
