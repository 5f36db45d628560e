//! The checker over parsed text: every problem kind, clean expressions, and a snapshot of the
//! problems (kind, span, message, labels, help, replacement) for a range of mistakes.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::fmt::Write as _;

use proptest::prelude::*;

use stratum_grammar::{Checked, Env, ProblemKind, Type, check, parse};

fn ty(text: &str) -> Type {
    text.parse()
        .unwrap_or_else(|error| panic!("{text:?}: {error}"))
}

/// The environment of an `ensure` on a step with a contract, inside a workflow with an input
/// and two earlier steps.
fn env() -> Env {
    let mut env = Env::new()
        .with(
            "result",
            ty(
                "{confidence: float, score: float, count: int, items: list<string>, \
                label: 'positive' | 'negative', note: string?, meta: any, \
                tests: list<{name: string, passed: bool}>, files: list<string>}",
            ),
        )
        .with("dry_streak", Type::Int)
        .with("accumulated_count", Type::Int)
        .with("item", ty("{id: string, ...}"));
    env.input = Some(ty("{topic: string, depth: int}"));
    env.steps
        .insert("research".into(), ty("{summary: string, skip: bool}"));
    env.steps
        .insert("review".into(), ty("{approved: bool, ...}"));
    env
}

fn check_in(text: &str, env: &Env) -> Checked {
    let parsed = parse(text);
    assert!(parsed.problems.is_empty(), "{text}: {:#?}", parsed.problems);
    check(&parsed.expr.unwrap(), env)
}

fn run(text: &str) -> Checked {
    check_in(text, &env())
}

fn kinds(text: &str) -> Vec<ProblemKind> {
    run(text)
        .problems
        .iter()
        .map(|problem| problem.kind)
        .collect()
}

#[test]
fn clean_expressions() {
    for (text, expected) in [
        ("result.confidence > 0.7 and len(result.items) > 0", "bool"),
        ("all(t.passed for t in result.tests)", "bool"),
        ("0 <= result.score <= 1", "bool"),
        ("result.meta['k']", "any"),
        ("result.meta.anything.at.lower()", "string"),
        ("dry_streak >= 2 or accumulated_count >= 50", "bool"),
        ("$.steps.research.output.skip == True", "bool"),
        ("$.steps.review.output.comments", "any"),
        ("$.input.depth * 2", "int"),
        ("result.items", "list<string>"),
        ("item.id", "string"),
        (
            "[t.name for t in result.tests if not t.passed]",
            "list<string>",
        ),
        ("result.label == 'positive'", "bool"),
        ("result.label in ('positive', 'negative')", "bool"),
        ("result.note is None or result.note.strip() == ''", "bool"),
        ("result.note.lower()", "string?"),
        ("result.count / 2", "float"),
        ("result.count // 2 + True", "int"),
        ("result.score if result.score > 0 else None", "float?"),
        ("max(result.count, result.score)", "float"),
        ("min(len(t.name) for t in result.tests)", "int"),
        ("', '.join(result.items)", "string"),
        ("result.label.startswith(('pos', 'neg'))", "bool"),
        ("result.get('count', 0)", "int"),
        ("'k' in result.meta and 'x' not in result.items", "bool"),
        ("file_exists($.input.topic + '.md')", "bool"),
        ("any(f.endswith('.rs') for f in result.files)", "bool"),
        ("result.items[0].upper()", "string"),
        ("int(result.score * 100) % 7", "int"),
        ("str(result.count) + ' items'", "string"),
        ("result.items + ['x']", "list<string>"),
        ("$.steps.review.output.approved == 1", "bool"),
        ("$.steps.review.output.approved >= False", "bool"),
        ("result.count == result.score", "bool"),
        ("result.items == []", "bool"),
        ("no_file_conflicts(result.meta.tasks)", "bool"),
        ("plan_completion(result.meta, None, 80.5)", "bool"),
    ] {
        let checked = run(text);
        assert!(
            checked.problems.is_empty(),
            "{text}: {:#?}",
            checked.problems
        );
        assert_eq!(checked.ty.to_string(), expected, "{text}");
    }
}

#[test]
fn every_kind_has_cases() {
    use ProblemKind::*;
    let cases = [
        ("reslt.confidence > 0.7", UnknownName),
        ("len(itms) > 0", UnknownName),
        ("$.steps.reserch.output.summary", UnknownName),
        ("result.confidense > 0.7", UnknownField),
        ("result['confidance'] > 0.7", UnknownField),
        ("$.steps.research.output.sumary", UnknownField),
        ("result.tests[0].pased", UnknownField),
        ("result.count + 'x'", OperandTypes),
        ("result.count > 'high'", OperandTypes),
        ("result.score.value > 1", OperandTypes),
        ("result.count in result.items", OperandTypes),
        ("result.label is 'positive'", OperandTypes),
        ("all(x for x in result.count)", OperandTypes),
        ("lenn(result.items) > 0", UnknownFunction),
        ("abs(result.score) < 0.1", UnknownFunction),
        (
            "vocabulary_compliance('vocabulary.yaml', result.files, 'yes')",
            CallArguments,
        ),
        ("no_file_conflicts(result.items)", CallArguments),
        ("plan_completion(result.meta, result.label)", CallArguments),
        (
            "plan_completion(result.meta, result.files, 'high')",
            CallArguments,
        ),
        ("len(result.score) > 0", CallArguments),
        ("len(result.items, 1)", CallArguments),
        ("max(result.count, 'a')", CallArguments),
        ("result.label.lowr() == 'x'", UnknownMethod),
        ("result.count.lower()", UnknownMethod),
        ("result.label.split(',', 'x')", UnknownMethod),
        ("result.label == 'positve'", EnumLiteral),
        ("result.label in ['positive', 'neutral']", EnumLiteral),
        ("result.count == 'three'", OperandTypes),
        ("$.steps.research.output.skip != 'yes'", OperandTypes),
        ("result.items == 'a'", OperandTypes),
        ("$.steps.research.output == 'done'", OperandTypes),
        ("$.steps.research.output.skip < 1", OperandTypes),
        ("$.input.depth in ['a', 'b']", OperandTypes),
        ("$.input == 'x'", InputWithoutField),
        ("result.score is None", NoneComparison),
        ("result.count != None", NoneComparison),
        ("1 > 0", ConstantExpression),
        ("all(x > 0 for x in [1, 2])", ConstantExpression),
    ];
    for (text, kind) in cases {
        assert_eq!(kinds(text), vec![kind], "{text}");
    }
}

#[test]
fn planning_builtins_take_tasks_and_plan_items() {
    let env = Env::new().with(
        "result",
        ty(
            "{tasks: list<{id: string, files_owned: list<string>, depends_on: list<string>}>, \
            plan: list<{text: string, file: string?, critical: bool}>, files: list<string>, \
            notes: list<{text: string, path: string}>, graph: {tasks: list<{id: string, ...}>}}",
        ),
    );
    for text in [
        "no_file_conflicts(result.tasks)",
        "no_file_conflicts(result.graph.tasks)",
        "no_file_conflicts([t for t in result.tasks if t.id != 'x'])",
        "plan_completion(result.plan, result.files)",
        "plan_completion(result.plan, result.files, 80)",
        "plan_completion(result.plan, [f.lower() for f in result.files], 75.5)",
        "plan_completion(result.plan, None)",
        "vocabulary_compliance('contracts/vocabulary.yaml', result.files)",
        "vocabulary_compliance('contracts/vocabulary.yaml', result.files, True, 'main')",
        "vocabulary_compliance('contracts/vocabulary.yaml', None, True)",
    ] {
        let checked = check_in(text, &env);
        assert!(
            checked.problems.is_empty(),
            "{text}: {:#?}",
            checked.problems
        );
        assert_eq!(checked.ty, Type::Bool, "{text}");
    }
    for (text, message) in [
        (
            "no_file_conflicts(result.plan)",
            "the items of `tasks` have no field `files_owned`, so no two tasks can conflict",
        ),
        (
            "plan_completion(result.notes, result.files)",
            "the items of `plan_items` have no field `file`, so every item counts as done",
        ),
        (
            "plan_completion(result.plan, result.files[0])",
            "`plan_completion` needs a list of strings for `files_changed`, found `string`",
        ),
        (
            "plan_completion(result.plan, result.files, '80')",
            "`plan_completion` needs a number for `threshold`, found `string`",
        ),
        (
            "vocabulary_compliance('v.yaml', result.files[0])",
            "`vocabulary_compliance` needs a list of strings for `files_changed`, found `string`",
        ),
        (
            "vocabulary_compliance('v.yaml', result.files, 1)",
            "`vocabulary_compliance` needs a bool for `git_fallback`, found `int`",
        ),
        (
            "vocabulary_compliance(result.files, result.files)",
            "`vocabulary_compliance` needs a `string` for `path`, found `list<string>`",
        ),
    ] {
        let checked = check_in(text, &env);
        let messages: Vec<&str> = checked
            .problems
            .iter()
            .map(|p| p.message.as_str())
            .collect();
        assert_eq!(messages, [message], "{text}");
        assert_eq!(
            checked.problems[0].kind,
            ProblemKind::CallArguments,
            "{text}"
        );
    }
}

#[test]
fn input_is_only_available_where_declared() {
    let mut env = env();
    env.input = None;
    let checked = check_in("$.input.topic == 'x'", &env);
    assert_eq!(checked.problems.len(), 1);
    assert_eq!(
        checked.problems[0].message,
        "`$.input` is not available here"
    );
    assert_eq!(checked.problems[0].span.range(), 0..7);
}

#[test]
fn problems_are_sorted_and_typed_nodes_recorded() {
    let checked = run("reslt.x + result.count.lower() + lenn(1)");
    let starts: Vec<u32> = checked.problems.iter().map(|p| p.span.start).collect();
    let mut sorted = starts.clone();
    sorted.sort_unstable();
    assert_eq!(starts, sorted);
    let checked = run("all(t.passed for t in result.tests)");
    let var = checked
        .types
        .iter()
        .find(|(span, _)| span.range() == (17..18))
        .unwrap();
    assert_eq!(var.1.to_string(), "{name: string, passed: bool}");
}

/// Every case's problems, written out: the snapshot is the reference for the messages.
#[test]
fn problem_snapshot() {
    let cases = [
        "reslt.confidence > 0.7",
        "Result.count > 1",
        "input.topic == 'x'",
        "$.steps.reserch.output.summary",
        "$.steps.nothing.output",
        "result.confidense > 0.7",
        "result['confidance'] > 0.7",
        "result.colour == 'red'",
        "result.tests[0].pased",
        "result.tests.passed",
        "result.label.lower",
        "result.count + 'x'",
        "None + 1",
        "result.items - result.items",
        "result.count > 'high'",
        "result.count >= '5'",
        "result.count in result.items",
        "'a' in result.count",
        "result.label is 'positive'",
        "all(x for x in result.count)",
        "result.items['a']",
        "lenn(result.items) > 0",
        "abs(result.score) < 0.1",
        "lower(result.label) == 'x'",
        "len(result.score) > 0",
        "len(t for t in result.tests)",
        "max(result.count, 'a')",
        "file_contains('a.txt', 3)",
        "result.label.lowr() == 'x'",
        "result.count.lower()",
        "result.items.lower()",
        "result.label.startswith(['a', 'b'])",
        "', '.join(t.passed for t in result.tests)",
        "result.tests()",
        "result.label == 'positve'",
        "'Positive' == result.label",
        "result.label in ['positive', 'neutral']",
        "result.score is None",
        "result.count != None",
        "1 > 0",
        "bool(t.passed for t in result.tests)",
        "str(t.name for t in result.tests)",
        "result.label is not 'x'",
        "-result.items",
        "result.items.count",
        "result.get('confidance', 0)",
        "int(result.items)",
        "min(result.score)",
        "result.label.split(',', 'x')",
        "$.steps.research.output.sumary",
        "result.items.append('x')",
        "result.label.endswith(result.items)",
        "'neutral' in [result.label]",
        "result.count == '3'",
        "result.count == 'three'",
        "$.steps.research.output.skip == 'true'",
        "$.steps.research.output.skip != 'yes'",
        "result.items == 'a'",
        "result.items != 'a'",
        "$.steps.research.output == 'done'",
        "$.steps.research.output > 3",
        "$.steps.review.output.approved >= 1",
        "result.label == 3",
        "$.input",
        "$.input.depth in ['a', 'b']",
        "no_file_conflicts(result.items)",
        "no_file_conflicts(result.count)",
        "no_file_conflicts(t for t in result.tests)",
        "plan_completion(result.meta, result.items[0])",
        "plan_completion(result.meta, result.tests)",
        "plan_completion(result.tests, result.files)",
        "plan_completion(result.meta, result.files, '90')",
        "vocabulary_compliance(result.items, result.count, 'yes', 1)",
    ];
    let mut out = String::new();
    for text in cases {
        writeln!(out, "── {text}").unwrap();
        for problem in run(text).problems {
            let at = |span: stratum_grammar::Span| {
                format!("{}..{} `{}`", span.start, span.end, &text[span.range()])
            };
            writeln!(out, "{:?} at {}", problem.kind, at(problem.span)).unwrap();
            writeln!(out, "  message: {}", problem.message).unwrap();
            writeln!(out, "  label: {}", problem.label).unwrap();
            for (span, label) in &problem.secondary {
                writeln!(out, "  secondary at {}: {label}", at(*span)).unwrap();
            }
            if let Some(help) = &problem.help {
                writeln!(out, "  help: {help}").unwrap();
            }
            if let Some(replacement) = &problem.replacement {
                writeln!(
                    out,
                    "  replace {} with `{}`",
                    at(replacement.span),
                    replacement.text
                )
                .unwrap();
            }
        }
    }
    insta::assert_snapshot!(out);
}

/// What every problem promises, whatever the text: a lowercase message, a label, spans inside
/// the text, a help line on every error, problems sorted.
fn assert_well_formed(text: &str, checked: &Checked) {
    let len = u32::try_from(text.len()).unwrap();
    let mut previous = None;
    for problem in &checked.problems {
        assert!(
            !problem.message.starts_with(|c: char| c.is_uppercase()),
            "{text}: {}",
            problem.message
        );
        assert!(!problem.label.is_empty(), "{text}: {problem:?}");
        assert!(problem.help.is_some(), "{text}: {problem:?}");
        assert!(problem.span.end <= len, "{text}: {problem:?}");
        for (span, label) in &problem.secondary {
            assert!(span.end <= len && !label.is_empty(), "{text}: {problem:?}");
        }
        if let Some(replacement) = &problem.replacement {
            assert!(replacement.span.end <= len, "{text}: {problem:?}");
        }
        assert!(previous <= Some(problem.span), "{text}: unsorted");
        previous = Some(problem.span);
    }
}

fn fragment() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "result",
        "result.",
        "confidence",
        "items",
        "label",
        "tests",
        "note",
        "meta",
        "t",
        "x",
        "$.input.",
        "$.steps.research.output.",
        "topic",
        "summary",
        "(",
        ")",
        "[",
        "]",
        ",",
        " for t in ",
        " if ",
        " else ",
        " and ",
        " or ",
        " not ",
        " in ",
        " is ",
        " None",
        "True",
        "0",
        "1.5",
        "'positive'",
        "'x'",
        " + ",
        " - ",
        " * ",
        " / ",
        " // ",
        " % ",
        " == ",
        " != ",
        " < ",
        " >= ",
        "len(",
        "all(",
        "max(",
        "min(",
        "str(",
        "int(",
        "abs(",
        ".lower()",
        ".split(',')",
        ".get('count')",
        ".join(",
        ".startswith(",
        "file_exists(",
        "dry_streak",
        "[0]",
        "['k']",
    ])
    .prop_map(str::to_owned)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Any text the parser accepts (even with recovered errors) checks without panicking, and
    /// the problems keep their promises.
    #[test]
    fn checking_never_panics(parts in prop::collection::vec(fragment(), 1..12)) {
        let text = parts.concat();
        if let Some(expr) = parse(&text).expr {
            let checked = check(&expr, &env());
            assert_well_formed(&text, &checked);
        }
    }
}

#[test]
fn snapshot_cases_are_well_formed() {
    for text in [
        "result.count + 'x' + lenn(1) + result.items.lower()",
        "max(result.count, 'a', [1], None)",
        "$.steps.x.output.y.z + $.input.q",
    ] {
        assert_well_formed(text, &run(text));
    }
}
