//! What the fuzz targets found: each input under `fuzz_findings/<target>/`, named as cargo-fuzz
//! named its artifact, goes through its target's checks again, and the test beside it asserts
//! what the input gives now.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests may index and unwrap what they built

use std::path::Path;

use serde_json::json;
use stratum_grammar::{Bindings, Env, Limits, ProblemKind, Type};

/// The `expression` target's checks (`fuzz/fuzz_targets/expression.rs`): parse, print, check,
/// compile, evaluate and explain, with every span inside the text.
fn expression_target(source: &str) {
    let parsed = stratum_grammar::parse(source);
    for problem in &parsed.problems {
        assert!(problem.span.end as usize <= source.len());
    }
    let Some(expr) = parsed.expr else { return };
    if parsed.problems.is_empty() {
        let printed = stratum_grammar::print(&expr);
        let reparsed = stratum_grammar::parse(&printed);
        assert!(reparsed.problems.is_empty(), "{printed:?} does not parse");
        assert_eq!(
            reparsed.expr.map(|e| e.without_spans()),
            Some(expr.without_spans())
        );
    }
    let result_type: Type = "{a: int, b: list<string>, c: any, d: float?}"
        .parse()
        .unwrap();
    let env = Env::new()
        .with("result", result_type)
        .with("item", Type::Any);
    let checked = stratum_grammar::check(&expr, &env);
    for problem in &checked.problems {
        assert!(problem.span.end as usize <= source.len());
    }
    let program = stratum_grammar::compile(&expr, source);
    let result = json!({"a": 3, "b": ["x", "yy"], "c": {"k": [1, 2.5, null]}, "d": null});
    let item = json!({"id": 1});
    let bindings = Bindings::new().name("result", &result).name("item", &item);
    let limits = Limits {
        instructions: 10_000,
        ..Limits::default()
    };
    if let Err(error) = program.evaluate(&bindings, &limits) {
        assert!(error.span.end as usize <= source.len());
    }
    let _ = program.explain(&bindings, &limits).to_string();
}

fn finding(target: &str, name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz_findings")
        .join(target);
    std::fs::read_to_string(path.join(name)).unwrap()
}

#[test]
fn every_expression_finding_passes_the_target_checks() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz_findings/expression");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert!(!names.is_empty());
    for name in names {
        expression_target(&finding("expression", &name));
    }
}

/// 339 bytes of names, `.` and 63 `(` and `[` never closed took 0.9 s to parse, twice as long
/// for every few more: each `.name(` read its arguments twice, once as a method call's and once,
/// after the call failed, as a plain call's. Now the parse finishes at once and reports the
/// first real mistake, `..`, and the lexer's `|`.
#[test]
fn unclosed_calls_after_names_and_dots_timeout_0f19b47f() {
    let source = finding(
        "expression",
        "timeout-0f19b47fe427c8d98a1c04de3e0a547eccfac19c",
    );
    let parsed = stratum_grammar::parse(&source);
    let problems: Vec<_> = parsed
        .problems
        .iter()
        .map(|p| (p.kind, &source[p.span.range()], p.message.as_str()))
        .collect();
    assert_eq!(
        problems,
        [
            (
                ProblemKind::Syntax,
                ".",
                "expected a field name after `.`, found `.`"
            ),
            (
                ProblemKind::Unsupported,
                "|",
                "the bitwise operator `|` is not supported"
            ),
        ]
    );
}

/// The finding's shape and its relatives at the parser's limits: 64 brackets open at once,
/// and 4,000 tokens. Each took time exponential in the number of open brackets (hours from
/// about 30 of them); a bound on the parser's work is tested in `stratum-grammar`.
#[test]
fn unclosed_brackets_at_the_limits_are_reported() {
    let names = |n: usize| vec!["x.y"; n].join(" + ");
    let cases = [
        "a.b(c[".repeat(32) + "z",
        "a.b(c[".repeat(32) + &names(950),
        "rgsu.be[bIalu(ulz.bIal.".repeat(32) + "z",
        "f(x=(".repeat(32) + "z",
        "lambda: x if (".repeat(64) + "z",
        "a if b else c := (".repeat(64) + "z",
        "all(x for x in y.z(".repeat(32) + "z",
        "{".repeat(64) + "z",
    ];
    for source in cases {
        let parsed = stratum_grammar::parse(&source);
        assert!(
            parsed
                .problems
                .iter()
                .any(|p| p.message.contains("to close")),
            "{source:?}: {:#?}",
            parsed.problems
        );
        expression_target(&source);
    }
}
