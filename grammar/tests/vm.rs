//! The VM through the public API: errors and their spans, the limits, the file built-ins
//! confined to a root, explanations, and programs as JSON.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::{Value, json};
use stratum_grammar::{Bindings, EvalError, EvalErrorKind, Limits, Program, compile};

fn program(source: &str) -> Program {
    let parsed = stratum_grammar::parse(source);
    assert!(
        parsed.is_ok(),
        "`{source}` does not parse: {:?}",
        parsed.problems
    );
    compile(&parsed.expr.expect("a tree"), source)
}

fn eval(source: &str, result: &Value) -> Result<Value, EvalError> {
    program(source).evaluate(&Bindings::new().name("result", result), &Limits::default())
}

fn fail(source: &str, result: &Value) -> (EvalError, String) {
    let program = program(source);
    let error = program
        .evaluate(&Bindings::new().name("result", result), &Limits::default())
        .expect_err("an error");
    let text = program.text(error.span).to_owned();
    (error, text)
}

#[test]
fn missing_field_names_the_expression_and_the_fields() {
    let result = json!({"score": 0.5, "label": "x"});
    let (error, text) = fail("result.confidence > 0.7", &result);
    assert_eq!(error.kind, EvalErrorKind::MissingField);
    assert_eq!(
        error.message,
        "`result.confidence` is missing: the object has no field `confidence` (its fields: `label`, `score`)"
    );
    assert_eq!(text, "result.confidence");

    let result = json!({"a": {"b": {}}});
    let (error, text) = fail("result.a['b'].c == 1", &result);
    assert_eq!(
        error.message,
        "`result.a['b'].c` is missing: the object has no field `c` (it has no fields)"
    );
    assert_eq!(text, "result.a['b'].c");
}

#[test]
fn errors_carry_the_span_of_the_failing_sub_expression() {
    let result = json!({"a": 1, "b": 0, "s": "x", "items": [1, 2], "none": null});
    let cases = [
        (
            "result.a / result.b > 1",
            "result.a / result.b",
            "division by zero in `result.a / result.b`",
        ),
        (
            "1 + (result.a % result.b)",
            "result.a % result.b",
            "modulo by zero in `result.a % result.b`",
        ),
        (
            "result.a > 0 and result.s > 1",
            "result.s > 1",
            "cannot compare `str` with `int` using `>`",
        ),
        (
            "len(result.a) == 1",
            "len(result.a)",
            "`len` of `int` is not defined",
        ),
        (
            "result.items[5] == 1",
            "result.items[5]",
            "`result.items[5]`: index 5 is out of range for a `list` of length 2",
        ),
        (
            "result.none.x",
            "result.none.x",
            "`result.none.x` cannot be read: `result.none` is None, not an object",
        ),
        (
            "result.a.x",
            "result.a.x",
            "`result.a.x` cannot be read: `result.a` is a `int`, not an object",
        ),
        (
            "missing_name == 1",
            "missing_name",
            "`missing_name` is not bound: the evaluation has no value for it",
        ),
        (
            "int(result.s)",
            "int(result.s)",
            "`int` cannot read 'x' as a base-10 integer",
        ),
        (
            "0 < result.a < 's'",
            "result.a < 's'",
            "cannot compare `int` with `str` using `<`",
        ),
    ];
    for (source, span_text, message) in cases {
        let (error, text) = fail(source, &result);
        assert_eq!(error.message, message, "{source}");
        assert_eq!(text, span_text, "{source}");
    }
}

#[test]
fn refs_report_the_missing_prefix() {
    let program = program("$.steps.s1.output.a.b == 1");
    let output = json!({"a": {"c": 1}});
    let error = program
        .evaluate(&Bindings::new().step("s1", &output), &Limits::default())
        .unwrap_err();
    assert_eq!(error.kind, EvalErrorKind::MissingField);
    assert_eq!(program.text(error.span), "$.steps.s1.output.a.b");
    assert!(error.message.contains("no field `b`"), "{}", error.message);

    let error = program
        .evaluate(&Bindings::new(), &Limits::default())
        .unwrap_err();
    assert_eq!(error.kind, EvalErrorKind::UnboundName);

    // A skipped step's output is None: so is every field of it, as in the reference.
    let skipped = Value::Null;
    assert_eq!(
        program.evaluate(&Bindings::new().step("s1", &skipped), &Limits::default()),
        Ok(json!(false))
    );
    let program = self::program("$.steps.s1.output.a.b == None");
    assert_eq!(
        program.evaluate(&Bindings::new().step("s1", &skipped), &Limits::default()),
        Ok(json!(true))
    );

    let program = self::program("$.input.x");
    let input = json!({"x": 2});
    assert_eq!(
        program.evaluate(&Bindings::new().input(&input), &Limits::default()),
        Ok(json!(2))
    );
    assert!(program.reads_input());
}

#[test]
fn overflow_and_non_finite_results_are_errors() {
    let result = json!({"big": i64::MAX, "f": 1e308});
    let (error, text) = fail("result.big + 1", &result);
    assert_eq!(error.kind, EvalErrorKind::Overflow);
    assert_eq!(text, "result.big + 1");
    let (error, _) = fail("result.f * 10 > 0", &result);
    assert_eq!(error.kind, EvalErrorKind::NotFinite);
    assert_eq!(error.message, "`result.f * 10` is not a finite number");
    // u64 beyond i64 is a float.
    let result = json!({"u": u64::MAX});
    assert_eq!(eval("result.u > 1", &result), Ok(json!(true)));
}

#[test]
fn instruction_budget_bounds_every_evaluation() {
    let result = json!({"items": (0..10_000).collect::<Vec<_>>()});
    let limits = Limits {
        instructions: 1_000,
        ..Limits::default()
    };
    let program = program("all(x >= 0 for x in result.items)");
    let error = program
        .evaluate(&Bindings::new().name("result", &result), &limits)
        .unwrap_err();
    assert_eq!(error.kind, EvalErrorKind::Budget);
    assert_eq!(error.message, "instruction budget of 1000 exhausted");
    // Built-ins charge per element too.
    let program = self::program("result.items.count(5) + len(str(result.items))");
    let error = program
        .evaluate(&Bindings::new().name("result", &result), &limits)
        .unwrap_err();
    assert_eq!(error.kind, EvalErrorKind::Budget);
    // Within the default budget it succeeds.
    assert_eq!(
        self::program("all(x >= 0 for x in result.items)")
            .evaluate(&Bindings::new().name("result", &result), &Limits::default()),
        Ok(json!(true))
    );
}

#[test]
fn value_size_limit_fails_fast() {
    let result = json!({"s": "ab", "n": 1_000_000_000});
    let started = std::time::Instant::now();
    let (error, text) = fail("len(result.s * result.n) > 0", &result);
    assert_eq!(error.kind, EvalErrorKind::ValueSize);
    assert_eq!(text, "result.s * result.n");
    let (error, _) = fail("len([result.s] * result.n)", &result);
    assert_eq!(error.kind, EvalErrorKind::ValueSize);
    let small = Limits {
        max_value_bytes: 1000,
        ..Limits::default()
    };
    let program = program("','.join([result.s * 100 for x in [1] * 20])");
    let error = program
        .evaluate(&Bindings::new().name("result", &result), &small)
        .unwrap_err();
    assert_eq!(error.kind, EvalErrorKind::ValueSize);
    assert!(started.elapsed().as_secs() < 2);
}

#[test]
fn constant_folding() {
    let folded = program("2 * 3 + 1");
    assert_eq!(folded.is_constant(), Some(&json!(7)));
    assert_eq!(
        program("('a', 'b')").is_constant(),
        Some(&json!(["a", "b"]))
    );
    assert_eq!(program("len('abc') == 3").is_constant(), Some(&json!(true)));
    assert_eq!(
        program("[x * 2 for x in [1, 2]]").is_constant(),
        Some(&json!([2, 4]))
    );
    // Failing constants are left to run time, with their span.
    let failing = program("result.ok or 1 / 0");
    assert_eq!(failing.is_constant(), None);
    let result = json!({"ok": false});
    let error = failing
        .evaluate(&Bindings::new().name("result", &result), &Limits::default())
        .unwrap_err();
    assert_eq!(failing.text(error.span), "1 / 0");
    // Names and file built-ins are never folded.
    assert_eq!(program("file_exists('x')").is_constant(), None);
    // A folded tuple is still a tuple.
    assert_eq!(
        eval("'abc'.startswith(('x', 'a'))", &json!({})),
        Ok(json!(true))
    );
    // Sub-expressions fold inside larger ones.
    let partly = program("result.a > 60 * 60");
    assert!(partly.constants().contains(&json!(3600)));
    assert_eq!(partly.names(), vec!["result"]);
}

#[test]
fn names_lists_free_names_only() {
    let program = program("all(t.ok for t in result.tests) and item.id in accumulator");
    assert_eq!(program.names(), vec!["accumulator", "item", "result"]);
    let program = self::program("$.steps.b.output.x + $.steps.a.output.y");
    assert_eq!(program.steps(), vec!["a", "b"]);
    assert!(program.names().is_empty());
}

#[test]
fn programs_round_trip_through_json() {
    let program = program("[t.name.lower() for t in result.tests if t.ok][0] == 'a' or $.input.x");
    let text = serde_json::to_string(&program).unwrap();
    let back: Program = serde_json::from_str(&text).unwrap();
    assert_eq!(back, program);
    let result = json!({"tests": [{"name": "A", "ok": true}]});
    let input = json!({"x": 0});
    let bindings = Bindings::new().name("result", &result).input(&input);
    assert_eq!(
        back.evaluate(&bindings, &Limits::default()),
        Ok(json!(true))
    );
}

#[test]
fn malformed_programs_fail_without_panicking() {
    let program = program("result.a + 1");
    let mut json = serde_json::to_value(&program).unwrap();
    json["constants"] = json!([]);
    json["strings"] = json!([]);
    let broken: Program = serde_json::from_value(json).unwrap();
    let result = json!({"a": 1});
    let error = broken
        .evaluate(&Bindings::new().name("result", &result), &Limits::default())
        .unwrap_err();
    assert_eq!(error.kind, EvalErrorKind::Invalid);
    let mut json = serde_json::to_value(&program).unwrap();
    json["ops"] = json!([{"Jump": -100}, {"Binary": "Add"}, "SwapPop"]);
    json["spans"] = json!([]);
    let broken: Program = serde_json::from_value(json).unwrap();
    assert!(
        broken
            .evaluate(&Bindings::new(), &Limits::default())
            .is_err()
    );
}

#[test]
fn explanations_show_the_operands_that_decided() {
    let program = program("result.confidence > 0.7 and len(result.items) > 0");
    let result = json!({"confidence": 0.42, "items": []});
    let explanation = program.explain(&Bindings::new().name("result", &result), &Limits::default());
    assert!(!explanation.held());
    assert_eq!(
        explanation.to_string(),
        "ensure `result.confidence > 0.7 and len(result.items) > 0` failed: `result.confidence` was 0.42"
    );
    let result = json!({"confidence": 0.9, "items": []});
    let explanation = program.explain(&Bindings::new().name("result", &result), &Limits::default());
    assert_eq!(
        explanation.to_string(),
        "ensure `result.confidence > 0.7 and len(result.items) > 0` failed: `result.confidence` was 0.9, `len(result.items)` was 0, `result.items` was []"
    );
    let operands: Vec<&str> = explanation
        .operands
        .iter()
        .map(|o| o.text.as_str())
        .collect();
    assert_eq!(
        operands,
        ["result.confidence", "len(result.items)", "result.items"]
    );
    assert_eq!(explanation.operands[1].value, Some(json!(0)));

    // Each operand once, strings as Python shows them, long values cut.
    let program = self::program("result.label == 'x' or result.label == 'y' or result.text == ''");
    let result = json!({"label": "pos", "text": "a".repeat(200)});
    let explanation = program.explain(&Bindings::new().name("result", &result), &Limits::default());
    assert_eq!(explanation.operands.len(), 2);
    let shown = &explanation.operands[1].repr;
    assert!(
        shown.chars().count() <= 80 && shown.ends_with('…'),
        "{shown}"
    );

    // Generator insides are not shown, their iterable is.
    let program = self::program("all(t.passed for t in result.tests)");
    let result = json!({"tests": [{"passed": false}]});
    let explanation = program.explain(&Bindings::new().name("result", &result), &Limits::default());
    let operands: Vec<&str> = explanation
        .operands
        .iter()
        .map(|o| o.text.as_str())
        .collect();
    assert_eq!(operands, ["result.tests"]);

    // A method's receiver is shown, even where the call is the whole expression.
    let program = self::program("result.artifact.endswith('.tar.gz')");
    let result = json!({"artifact": "build.zip"});
    let explanation = program.explain(&Bindings::new().name("result", &result), &Limits::default());
    assert_eq!(
        explanation.to_string(),
        "ensure `result.artifact.endswith('.tar.gz')` failed: `result.artifact` was 'build.zip'"
    );

    // An error is explained too.
    let program = self::program("result.a / result.b > 1");
    let result = json!({"a": 1, "b": 0});
    let explanation = program.explain(&Bindings::new().name("result", &result), &Limits::default());
    assert_eq!(
        explanation.to_string(),
        "ensure `result.a / result.b > 1` failed: division by zero in `result.a / result.b`; `result.a` was 1, `result.b` was 0"
    );
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "stratum-vm-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn file_call(source: &str, root: Option<&PathBuf>) -> Result<Value, EvalError> {
    let limits = Limits {
        root: root.cloned(),
        ..Limits::default()
    };
    program(source).evaluate(&Bindings::new(), &limits)
}

#[test]
fn file_builtins_stay_inside_the_root() {
    let outside = TempDir::new("outside");
    std::fs::write(outside.0.join("secret.txt"), "password").unwrap();
    let project = TempDir::new("project");
    let root = project.0.join("root");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("docs/readme.md"), "# Title\nhello").unwrap();
    let root_ok = Some(&root);

    assert_eq!(
        file_call("file_exists('docs/readme.md')", root_ok),
        Ok(json!(true))
    );
    assert_eq!(
        file_call("file_exists('./docs/../docs/readme.md')", root_ok),
        Ok(json!(true))
    );
    assert_eq!(file_call("file_exists('docs')", root_ok), Ok(json!(false)));
    assert_eq!(file_call("file_exists('nope')", root_ok), Ok(json!(false)));
    assert_eq!(
        file_call("file_contains('docs/readme.md', 'hello')", root_ok),
        Ok(json!(true))
    );
    assert_eq!(
        file_call("file_contains('docs/readme.md', 'bye')", root_ok),
        Ok(json!(false))
    );
    let absolute = root.join("docs/readme.md");
    let source = format!("file_exists('{}')", absolute.display());
    assert_eq!(file_call(&source, root_ok), Ok(json!(true)));

    // `..` above the root.
    let error = file_call("file_exists('../outside.txt')", root_ok).unwrap_err();
    assert_eq!(error.kind, EvalErrorKind::File);
    assert_eq!(
        error.message,
        "path `../outside.txt` escapes the project root"
    );
    let error = file_call("file_contains('docs/../../x', 'a')", root_ok).unwrap_err();
    assert_eq!(error.kind, EvalErrorKind::File);

    // An absolute path outside.
    let secret = outside.0.join("secret.txt");
    let source = format!("file_contains('{}', 'password')", secret.display());
    let error = file_call(&source, root_ok).unwrap_err();
    assert_eq!(error.kind, EvalErrorKind::File);
    assert!(
        error.message.contains("is outside the project root"),
        "{}",
        error.message
    );
    assert!(error.message.contains("secret.txt"), "{}", error.message);

    // Symbolic links out, to a file, to a directory, and dangling.
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&secret, root.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(&outside.0, root.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.0.join("none"), root.join("dangling")).unwrap();
        std::os::unix::fs::symlink(root.join("docs/readme.md"), root.join("inside.md")).unwrap();
        for source in [
            "file_contains('link.txt', 'password')",
            "file_exists('out/secret.txt')",
            "file_exists('out/missing.txt')",
        ] {
            let error = file_call(source, root_ok).unwrap_err();
            assert_eq!(error.kind, EvalErrorKind::File, "{source}");
            assert!(error.message.contains("symbolic link"), "{}", error.message);
        }
        assert_eq!(
            file_call("file_exists('dangling')", root_ok),
            Ok(json!(false))
        );
        assert_eq!(
            file_call("file_contains('inside.md', 'hello')", root_ok),
            Ok(json!(true))
        );
    }

    // No root.
    let error = file_call("file_exists('docs/readme.md')", None).unwrap_err();
    assert_eq!(error.kind, EvalErrorKind::File);
    assert!(
        error
            .message
            .starts_with("file built-ins need a project root"),
        "{}",
        error.message
    );
}

#[test]
fn file_contains_respects_the_size_limit() {
    let project = TempDir::new("size");
    std::fs::write(project.0.join("exact.txt"), "x".repeat(100)).unwrap();
    std::fs::write(project.0.join("big.txt"), "x".repeat(101)).unwrap();
    let limits = Limits {
        root: Some(project.0.clone()),
        max_file_bytes: 100,
        ..Limits::default()
    };
    let run = |source: &str| program(source).evaluate(&Bindings::new(), &limits);
    assert_eq!(run("file_contains('exact.txt', 'x')"), Ok(json!(true)));
    assert_eq!(run("file_contains('big.txt', 'x')"), Ok(json!(false)));
    assert_eq!(run("file_exists('big.txt')"), Ok(json!(true)));
    // Invalid UTF-8 is replaced, not an error.
    std::fs::write(project.0.join("bin.dat"), b"ab\xffcd").unwrap();
    assert_eq!(run("file_contains('bin.dat', 'cd')"), Ok(json!(true)));
    // The default limit is the reference's 10 MiB.
    assert_eq!(Limits::default().max_file_bytes, 10 * 1024 * 1024);
}

mod hostile {
    use proptest::prelude::*;
    use serde_json::json;
    use stratum_grammar::{Bindings, Limits, compile, compile::compile_unfolded};

    const TOKENS: &[&str] = &[
        "result",
        "item",
        "x",
        ".",
        "a",
        "b",
        "items",
        "[",
        "]",
        "(",
        ")",
        ",",
        "0",
        "1",
        "-1",
        "2.5",
        "'s'",
        "''",
        "+",
        "-",
        "*",
        "/",
        "//",
        "%",
        "<",
        "<=",
        "==",
        "!=",
        ">",
        "in",
        "not",
        "and",
        "or",
        "is",
        "None",
        "True",
        "if",
        "else",
        "for",
        "len",
        "str",
        "int",
        "min",
        "max",
        "any",
        "all",
        "bool",
        ".lower()",
        ".split()",
        ".get",
        ".keys()",
        ".count",
        ".index",
        ".join",
        "file_exists",
        "$.input",
        "$.steps.s1.output",
        "9223372036854775807",
        "1e308",
    ];

    fn value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(json!(null)),
            any::<bool>().prop_map(|b| json!(b)),
            any::<i64>().prop_map(|i| json!(i)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
            "[a-z ]{0,6}".prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map("[a-c]|items", inner, 0..4).prop_map(|m| json!(m)),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn never_panics(tokens in prop::collection::vec(0..TOKENS.len(), 1..14), result in value(), x in value()) {
            let source: Vec<&str> = tokens.iter().map(|&i| TOKENS[i]).collect();
            let source = source.join(" ");
            let parsed = stratum_grammar::parse(&source);
            if let Some(expr) = parsed.expr {
                let limits = Limits { instructions: 10_000, max_value_bytes: 4096, ..Limits::default() };
                let bindings = Bindings::new().name("result", &result).name("item", &x).name("x", &x).input(&x).step("s1", &result);
                let folded = compile(&expr, &source);
                let a = folded.evaluate(&bindings, &limits);
                let b = compile_unfolded(&expr, &source).evaluate(&bindings, &limits);
                // `explain` runs the general VM; `evaluate` may take the fast path.
                let explained = folded.explain(&bindings, &limits);
                prop_assert_eq!(&a, &explained.outcome, "{}", source);
                let _ = explained.to_string();
                if parsed.problems.is_empty() {
                    prop_assert_eq!(a.is_ok(), b.is_ok(), "{}", source);
                    if let (Err(a), Err(b)) = (&a, &b) {
                        prop_assert!(a.span.end as usize <= source.len());
                        prop_assert_eq!(a.kind, b.kind, "{}", source);
                    }
                }
            }
        }
    }
}

/// The fast path of `evaluate` / `evaluate_bool` (programs that read and compare) against the
/// general VM (`explain`), on generated comparisons joined by `and` / `or`, over random values
/// and budgets.
mod fast_path {
    use proptest::prelude::*;
    use serde_json::json;
    use stratum_grammar::{Bindings, Limits, compile, compile::compile_unfolded};

    const OPERANDS: &[&str] = &[
        "result.a",
        "result.a.b",
        "result.items",
        "result.name",
        "len(result.items)",
        "len(result.name)",
        "len(result.a)",
        "result.items[0]",
        "result.items[-1]",
        "result['a']",
        "result.a + 1",
        "-result.a",
        "x",
        "item.a",
        "$.input",
        "$.input.a",
        "$.steps.s1.output.items",
        "0",
        "1",
        "-1",
        "2.5",
        "9223372036854775807",
        "'s'",
        "''",
        "None",
        "True",
        "False",
        "[1, 's']",
        "(1, 2)",
        "result.name.lower()",
        "min(result.a, 1)",
    ];
    const OPS: &[&str] = &[
        "<", "<=", ">", ">=", "==", "!=", "in", "not in", "is", "is not",
    ];

    fn value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(json!(null)),
            any::<bool>().prop_map(|b| json!(b)),
            prop_oneof![Just(0i64), Just(1), Just(-1), Just(i64::MAX), any::<i64>()]
                .prop_map(|i| json!(i)),
            prop_oneof![Just(0.5f64), Just(1.0), Just(2.5), -1e6f64..1e6].prop_map(|f| json!(f)),
            "[a-c]{0,3}".prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map("a|b|items|name", inner, 0..4).prop_map(|m| json!(m)),
            ]
        })
    }

    /// `operand [op operand [op operand]]`, maybe negated.
    fn clause() -> impl Strategy<Value = String> {
        let operand = prop::sample::select(OPERANDS);
        let op = prop::sample::select(OPS);
        (
            any::<bool>(),
            operand.clone(),
            prop::collection::vec((op, operand), 0..3),
        )
            .prop_map(|(not, first, rest)| {
                let mut text = String::new();
                if not {
                    text.push_str("not ");
                }
                text.push_str(first);
                for (op, operand) in rest {
                    text.push_str(&format!(" {op} {operand}"));
                }
                text
            })
    }

    fn expression() -> impl Strategy<Value = String> {
        (
            clause(),
            prop::collection::vec((prop::sample::select(&["and", "or"][..]), clause()), 0..4),
        )
            .prop_map(|(first, rest)| {
                let mut text = first;
                for (joint, clause) in rest {
                    text.push_str(&format!(" {joint} {clause}"));
                }
                text
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        #[test]
        fn agrees_with_the_general_vm(
            source in expression(),
            result in value(),
            x in value(),
            budget in prop_oneof![0u64..16, Just(1_000_000u64)],
        ) {
            let parsed = stratum_grammar::parse(&source);
            prop_assert!(parsed.is_ok(), "`{}`: {:?}", source, parsed.problems);
            let expr = parsed.expr.expect("a tree");
            let bindings = Bindings::new()
                .name("result", &result)
                .name("x", &x)
                .name("item", &x)
                .input(&x)
                .step("s1", &result);
            let limits = Limits { instructions: budget, ..Limits::default() };
            for program in [compile(&expr, &source), compile_unfolded(&expr, &source)] {
                let general = program.explain(&bindings, &limits);
                prop_assert_eq!(&program.evaluate(&bindings, &limits), &general.outcome, "`{}`", source);
                match (program.evaluate_bool(&bindings, &limits), &general.outcome) {
                    (Ok(truth), Ok(_)) => prop_assert_eq!(truth, general.held(), "`{}`", source),
                    (Err(a), Err(b)) => prop_assert_eq!(&a, b, "`{}`", source),
                    (a, b) => prop_assert!(false, "`{}`: {:?} vs {:?}", source, a, b),
                }
            }
        }
    }
}
