//! The conformance table: expressions with their bindings and expected values, evaluated by our
//! pipeline (parse → compile → evaluate, folded and unfolded) and, when `python3` is on PATH, by
//! Python's `eval` in one subprocess, which must agree on every row.
//!
//! Bindings are JSON objects: each key is a free name, except `$input` (the value of
//! `$.input`) and `$steps` (step id → output). An empty bindings text means [`DEFAULT`]. The
//! expected value is JSON text, or `error` when evaluation must fail (Python must raise too).
//! Objects in bindings list their keys in sorted order: Python keeps insertion order, our
//! objects iterate sorted, and the table compares the two.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use stratum_grammar::compile::compile_unfolded;
use stratum_grammar::{Bindings, Limits, compile};

const DEFAULT: &str = r#"{
  "result": {
    "confidence": 0.92,
    "empty": "",
    "f": 2.5,
    "flag": true,
    "items": ["a", "b", "c"],
    "label": "positive",
    "neg": -7,
    "nested": {"a": {"b": 3}, "list": [1, 2, 3]},
    "none": null,
    "score": 7,
    "summary": "  Hello World  ",
    "tests": [{"name": "t1", "passed": true}, {"name": "t2", "passed": false}],
    "words": "a b  c",
    "zero": 0
  },
  "item": {"id": 1},
  "x": 5,
  "$input": {"name": "bob", "x": 3},
  "$steps": {"s1": {"n": 2, "skip": true}}
}"#;

/// `(expression, bindings, expected)`, checked against Python too.
const ROWS: &[(&str, &str, &str)] = &[
    // Arithmetic, int/float mixing, precedence.
    ("1 + 2", "", "3"),
    ("1 + 2.0", "", "3.0"),
    ("7 / 2", "", "3.5"),
    ("6 / 3", "", "2.0"),
    ("7 // 2", "", "3"),
    ("-7 // 2", "", "-4"),
    ("7 // -2", "", "-4"),
    ("-7 % 3", "", "2"),
    ("7 % -3", "", "-2"),
    ("7.5 // 2", "", "3.0"),
    ("-7.5 // 2", "", "-4.0"),
    ("-7.5 % 2", "", "0.5"),
    ("7.5 % -2", "", "-0.5"),
    ("5 % 2.5", "", "0.0"),
    ("2 * 3", "", "6"),
    ("2 * 0.5", "", "1.0"),
    ("3 * 1.0", "", "3.0"),
    ("2 - 0.5", "", "1.5"),
    ("10 - 3 - 2", "", "5"),
    ("2 + 3 * 4", "", "14"),
    ("(2 + 3) * 4", "", "20"),
    ("2 * 3 % 4", "", "2"),
    ("-2 * 3", "", "-6"),
    ("-3 + 1", "", "-2"),
    ("- -3", "", "3"),
    ("+True", "", "1"),
    ("-True", "", "-1"),
    ("True + True", "", "2"),
    ("True * 2.5", "", "2.5"),
    ("0.1 + 0.2", "", "0.30000000000000004"),
    ("1e3", "", "1000.0"),
    (".5 + 1", "", "1.5"),
    ("10 / 4", "", "2.5"),
    ("1 / 0", "", "error"),
    ("1 // 0", "", "error"),
    ("1 % 0", "", "error"),
    ("1.0 / 0", "", "error"),
    ("2.5 % 0.0", "", "error"),
    ("result.score * 2 + result.f", "", "16.5"),
    ("result.neg // 2", "", "-4"),
    ("result.neg % 3", "", "2"),
    ("-result.score", "", "-7"),
    ("10 - result.score * 2", "", "-4"),
    ("result.confidence * 100 // 1", "", "92.0"),
    ("x * 2", "", "10"),
    ("x / 2", "", "2.5"),
    // Strings and lists with + and *.
    ("'a' + 'b'", "", "\"ab\""),
    ("'ab' * 3", "", "\"ababab\""),
    ("3 * 'ab'", "", "\"ababab\""),
    ("'ab' * 0", "", "\"\""),
    ("'ab' * -1", "", "\"\""),
    ("'ab' * True", "", "\"ab\""),
    ("[1, 2] + [3]", "", "[1, 2, 3]"),
    ("[0] * 3", "", "[0, 0, 0]"),
    ("(1, 2) + (3,)", "", "[1, 2, 3]"),
    ("result.items + ['d']", "", "[\"a\", \"b\", \"c\", \"d\"]"),
    ("'a' + 1", "", "error"),
    ("1 + 'a'", "", "error"),
    ("[1] + (2,)", "", "error"),
    ("'a' - 'b'", "", "error"),
    ("None + 1", "", "error"),
    ("'a' * 'b'", "", "error"),
    ("'ab' * 1.5", "", "error"),
    ("-'a'", "", "error"),
    // Comparisons and chains.
    ("1 < 2 < 3", "", "true"),
    ("1 < 3 < 2", "", "false"),
    ("3 > 2 > 1", "", "true"),
    ("1 < 2 > 1.5", "", "true"),
    ("1 < 2 == 2", "", "true"),
    ("2 < 1 < 'a'", "", "false"),
    ("1 < 2 < 'a'", "", "error"),
    ("0 <= result.confidence <= 1", "", "true"),
    ("result.zero < result.score < 10", "", "true"),
    ("2.5 >= 2", "", "true"),
    ("2 <= 2.0", "", "true"),
    ("1 == 1.0", "", "true"),
    ("1 != 1.0", "", "false"),
    ("True == 1", "", "true"),
    ("False == 0.0", "", "true"),
    ("'1' == 1", "", "false"),
    ("None == None", "", "true"),
    ("None == 0", "", "false"),
    ("None != None", "", "false"),
    ("'abc' < 'abd'", "", "true"),
    ("'B' < 'a'", "", "true"),
    ("'' < 'a'", "", "true"),
    ("'é' > 'z'", "", "true"),
    ("[1, 2] < [1, 3]", "", "true"),
    ("[1, 2] < [1, 2, 0]", "", "true"),
    ("[2] > [1, 5]", "", "true"),
    ("(1, 2) == (1, 2)", "", "true"),
    ("(1, 'a') < (1, 'b')", "", "true"),
    ("[1, 2] == (1, 2)", "", "false"),
    ("[1, 2] == [1, 2]", "", "true"),
    ("[1, [2, 3]] == [1, [2, 3.0]]", "", "true"),
    ("result.items == ['a', 'b', 'c']", "", "true"),
    ("result.nested.a == result.nested.a", "", "true"),
    ("result.nested == result.nested.a", "", "false"),
    ("1 < 'a'", "", "error"),
    ("None < 1", "", "error"),
    ("[1] < (1,)", "", "error"),
    ("[1] < ['a']", "", "error"),
    ("result.nested < result.nested", "", "error"),
    // in / not in.
    ("'ell' in 'hello'", "", "true"),
    ("'' in 'abc'", "", "true"),
    ("'x' not in 'abc'", "", "true"),
    ("'a' in result.items", "", "true"),
    ("'z' not in result.items", "", "true"),
    ("1 in [1.0, 2]", "", "true"),
    ("[1] in [[1], [2]]", "", "true"),
    ("'a' in ('a', 'b')", "", "true"),
    ("result.label in ('positive', 'negative')", "", "true"),
    ("'label' in result", "", "true"),
    ("'nope' in result", "", "false"),
    ("1 in result", "", "false"),
    ("1 in 'abc'", "", "error"),
    ("1 in 5", "", "error"),
    ("'a' in None", "", "error"),
    // is.
    ("result.none is None", "", "true"),
    ("result.label is not None", "", "true"),
    ("result.flag is True", "", "true"),
    ("result.zero is False", "", "false"),
    ("None is None", "", "true"),
    ("null is None", "", "true"),
    ("True is true", "", "true"),
    // Logical operators yield the deciding operand.
    ("1 and 2", "", "2"),
    ("0 and 2", "", "0"),
    ("0 or 'x'", "", "\"x\""),
    ("'' or []", "", "[]"),
    ("None or 0", "", "0"),
    ("False or None", "", "null"),
    ("not ''", "", "true"),
    ("not [1]", "", "false"),
    ("not result.items", "", "false"),
    ("not 1 + 1 == 2", "", "false"),
    ("True and 1 / 0", "", "error"),
    ("False and 1 / 0", "", "false"),
    ("True or 1 / 0", "", "true"),
    ("1 or 2 and 0", "", "1"),
    ("not 0 and 1", "", "1"),
    ("result.none or 'default'", "", "\"default\""),
    (
        "result.confidence > 0.7 and len(result.items) > 0",
        "",
        "true",
    ),
    ("true and not false", "", "true"),
    ("null == None", "", "true"),
    // Chains of `and` / `or` whose comparisons decide the whole chain.
    (
        "result.score > 1 and result.label == 'positive' and result.zero",
        "",
        "0",
    ),
    (
        "result.score > 1 and result.label == 'x' and 1 / 0",
        "",
        "false",
    ),
    (
        "result.score < 1 or result.label == 'x' or result.items",
        "",
        "[\"a\", \"b\", \"c\"]",
    ),
    ("result.score > 1 or 1 / 0 or result.zero", "", "true"),
    ("result.none or result.zero < 0 or result.empty", "", "\"\""),
    (
        "(result.score > 1 and result.zero) or 'fallback'",
        "",
        "\"fallback\"",
    ),
    ("(result.score > 1 and result.f > 2) or 1 / 0", "", "true"),
    (
        "result.score > 1 and (result.zero or result.flag == True)",
        "",
        "true",
    ),
    ("result.score > 9 and (result.zero or 1 / 0)", "", "false"),
    ("result.score < 9 or (result.zero and 1 / 0)", "", "true"),
    (
        "not (result.score > 1 and result.label == 'x') and result.f > 2",
        "",
        "true",
    ),
    (
        "result.score > 1 and result.f < 2 or result.label == 'positive'",
        "",
        "true",
    ),
    ("result.score > 1 or result.f < 2 and 1 / 0", "", "true"),
    (
        "result.zero == 0 and result.neg < 0 and result.f > 2 and result.flag == True",
        "",
        "true",
    ),
    (
        "result.zero == 1 or result.neg > 0 or result.f < 2 or result.flag == False",
        "",
        "false",
    ),
    (
        "(result.score if result.flag else 0) > 1 and result.zero == 0",
        "",
        "true",
    ),
    // Conditional expressions.
    ("'yes' if result.score > 5 else 'no'", "", "\"yes\""),
    ("'yes' if result.zero else 'no'", "", "\"no\""),
    ("1 if True else 1 / 0", "", "1"),
    ("1 if 0 else 2 if 0 else 3", "", "3"),
    // bool and truthiness.
    ("bool(0)", "", "false"),
    ("bool(0.0)", "", "false"),
    ("bool('')", "", "false"),
    ("bool([])", "", "false"),
    ("bool(())", "", "false"),
    ("bool(None)", "", "false"),
    ("bool(result.nested)", "", "true"),
    ("bool(result.nested.a.b)", "", "true"),
    ("bool(d)", "{\"d\": {}}", "false"),
    ("bool('0')", "", "true"),
    ("bool(-1)", "", "true"),
    ("bool()", "", "false"),
    // len.
    ("len('héllo')", "", "5"),
    ("len(result.items)", "", "3"),
    ("len(result)", "", "14"),
    ("len((1, 2))", "", "2"),
    ("len('')", "", "0"),
    ("len(5)", "", "error"),
    ("len(None)", "", "error"),
    // int.
    ("int('42')", "", "42"),
    ("int(' -7 ')", "", "-7"),
    ("int('+5')", "", "5"),
    ("int('1_000')", "", "1000"),
    ("int('007')", "", "7"),
    ("int(3.9)", "", "3"),
    ("int(-3.9)", "", "-3"),
    ("int(True)", "", "1"),
    ("int(1e3)", "", "1000"),
    ("int()", "", "0"),
    ("int('3.5')", "", "error"),
    ("int('')", "", "error"),
    ("int('1_' + '_0')", "", "error"),
    ("int(None)", "", "error"),
    ("int([1])", "", "error"),
    // str.
    ("str(1)", "", "\"1\""),
    ("str(-12)", "", "\"-12\""),
    ("str(1.0)", "", "\"1.0\""),
    ("str(2.5)", "", "\"2.5\""),
    ("str(0.1 + 0.2)", "", "\"0.30000000000000004\""),
    ("str(True)", "", "\"True\""),
    ("str(None)", "", "\"None\""),
    ("str('x')", "", "\"x\""),
    ("str()", "", "\"\""),
    ("str([1, 'a', None])", "", "\"[1, 'a', None]\""),
    ("str((1,))", "", "\"(1,)\""),
    ("str((1, 2.0))", "", "\"(1, 2.0)\""),
    ("str(result.nested.a)", "", "\"{'b': 3}\""),
    (
        "str(result.tests[0])",
        "",
        "\"{'name': 't1', 'passed': True}\"",
    ),
    ("'n=' + str(result.score)", "", "\"n=7\""),
    // any / all.
    ("any([0, '', 1])", "", "true"),
    ("any([])", "", "false"),
    ("all([])", "", "true"),
    ("all([1, 'a'])", "", "true"),
    ("any('')", "", "false"),
    ("all('ab')", "", "true"),
    ("any(result.nested)", "", "true"),
    ("any(t.passed for t in result.tests)", "", "true"),
    ("all(t.passed for t in result.tests)", "", "false"),
    (
        "all(t['passed'] for t in result.tests if t.name == 't1')",
        "",
        "true",
    ),
    ("any(x > 2 for x in result.nested.list)", "", "true"),
    ("any(x > 1 for x in [0, 2, 'a'])", "", "true"),
    ("all(x < 1 for x in [0, 2, 'a'])", "", "false"),
    ("any(x > 1 for x in [0, 'a', 2])", "", "error"),
    ("any(x for x in [])", "", "false"),
    ("all(c in 'abc' for c in 'cab')", "", "true"),
    ("any(1)", "", "error"),
    // min / max.
    ("min([3, 1, 2])", "", "1"),
    ("max(3, 1, 2)", "", "3"),
    ("min('bca')", "", "\"a\""),
    ("max([1, 2.5])", "", "2.5"),
    ("min(1, 1.0)", "", "1"),
    ("max(1.0, 1)", "", "1.0"),
    ("max(['b', 'a'])", "", "\"b\""),
    ("min([[2], [1, 5]])", "", "[1, 5]"),
    ("max(result)", "", "\"zero\""),
    ("max(x * 2 for x in [1, 5, 3])", "", "10"),
    ("min(len(t.name) for t in result.tests)", "", "2"),
    ("max([])", "", "error"),
    ("min(1, 'a')", "", "error"),
    ("max()", "", "error"),
    // String methods.
    ("result.label.upper()", "", "\"POSITIVE\""),
    ("'ABC'.lower()", "", "\"abc\""),
    ("'straße'.upper()", "", "\"STRASSE\""),
    ("result.summary.strip()", "", "\"Hello World\""),
    ("'xxhixx'.strip('x')", "", "\"hi\""),
    ("'  a '.lstrip()", "", "\"a \""),
    ("'  a '.rstrip()", "", "\"  a\""),
    ("'abcba'.strip('ab')", "", "\"c\""),
    ("'abc'.startswith('ab')", "", "true"),
    ("'abc'.startswith(('x', 'a'))", "", "true"),
    ("'abc'.endswith('bc')", "", "true"),
    ("'abc'.endswith(('x', 'y'))", "", "false"),
    ("'abc'.startswith(['a'])", "", "error"),
    ("result.words.split()", "", "[\"a\", \"b\", \"c\"]"),
    ("'a,b,,c'.split(',')", "", "[\"a\", \"b\", \"\", \"c\"]"),
    ("'a,b,c'.split(',', 1)", "", "[\"a\", \"b,c\"]"),
    ("'  a  b  '.split(None, 1)", "", "[\"a\", \"b  \"]"),
    ("''.split()", "", "[]"),
    ("''.split(',')", "", "[\"\"]"),
    ("'a b'.split(' ', 0)", "", "[\"a b\"]"),
    ("'a,b'.split('')", "", "error"),
    ("'banana'.count('an')", "", "2"),
    ("'aaa'.count('')", "", "4"),
    ("'aaaa'.count('aa')", "", "2"),
    ("'héllo'.find('l')", "", "2"),
    ("'abc'.find('z')", "", "-1"),
    ("'abc'.find('')", "", "0"),
    ("'aaa'.replace('a', 'b')", "", "\"bbb\""),
    ("'abc'.replace('', '-')", "", "\"-a-b-c-\""),
    ("'a.b.c'.replace('.', '')", "", "\"abc\""),
    ("'-'.join(['a', 'b'])", "", "\"a-b\""),
    (
        "', '.join(x.upper() for x in result.items)",
        "",
        "\"A, B, C\"",
    ),
    ("''.join([])", "", "\"\""),
    ("'-'.join('abc')", "", "\"a-b-c\""),
    ("'-'.join([1, 2])", "", "error"),
    ("'123'.isdigit()", "", "true"),
    ("''.isdigit()", "", "false"),
    ("'12a'.isdigit()", "", "false"),
    ("'abc'.isalpha()", "", "true"),
    ("'ab1'.isalpha()", "", "false"),
    ("'héllo'.isalpha()", "", "true"),
    ("' \\t\\n'.isspace()", "", "true"),
    ("''.isspace()", "", "false"),
    ("'ABC1'.isupper()", "", "true"),
    ("'123'.isupper()", "", "false"),
    ("'abc'.islower()", "", "true"),
    ("'aBc'.islower()", "", "false"),
    ("result.score.lower()", "", "error"),
    ("'abc'.get('x')", "", "error"),
    // List and object methods.
    ("result.items.count('a')", "", "1"),
    ("[1, 1.0, True].count(1)", "", "3"),
    ("result.items.index('b')", "", "1"),
    ("(1, 2).index(2)", "", "1"),
    ("result.items.index('z')", "", "error"),
    ("result.get('label')", "", "\"positive\""),
    ("result.get('missing')", "", "null"),
    ("result.get('missing', 5)", "", "5"),
    ("result.nested.get('a').get('b')", "", "3"),
    ("len(result.nested.keys())", "", "2"),
    ("'a' in result.nested.keys()", "", "true"),
    ("[k for k in result.nested.keys()]", "", "[\"a\", \"list\"]"),
    ("[v for v in result.nested.a.values()]", "", "[3]"),
    ("result.items.get(0)", "", "error"),
    // Attributes and indexing at any depth.
    ("result.nested.a.b", "", "3"),
    ("result.nested['a']['b']", "", "3"),
    ("result['nested'].a['b']", "", "3"),
    ("result.tests[1].name", "", "\"t2\""),
    ("result.tests[-1]['passed']", "", "false"),
    ("result.items[0]", "", "\"a\""),
    ("result.items[-1]", "", "\"c\""),
    ("result.nested.list[True]", "", "2"),
    ("'héllo'[1]", "", "\"é\""),
    ("'abc'[-1]", "", "\"c\""),
    ("(1, 2)[0]", "", "1"),
    ("[[1, 2], [3]][0][1]", "", "2"),
    ("result.items[3]", "", "error"),
    ("result.items[-4]", "", "error"),
    ("'abc'[3]", "", "error"),
    ("result.items[1.0]", "", "error"),
    ("result.items['a']", "", "error"),
    ("result.missing", "", "error"),
    ("result['missing']", "", "error"),
    ("result.nested[0]", "", "error"),
    ("result.none.x", "", "error"),
    ("result.score.x", "", "error"),
    ("result.score[0]", "", "error"),
    // $-references and names.
    ("$.input.x + 1", "", "4"),
    ("$.input.name.upper()", "", "\"BOB\""),
    ("$.input", "", "{\"name\": \"bob\", \"x\": 3}"),
    ("$.steps.s1.output.skip == True", "", "true"),
    ("$.steps.s1.output.n * 2", "", "4"),
    ("$.steps.s1.output", "", "{\"n\": 2, \"skip\": true}"),
    ("$.input.missing", "", "error"),
    ("item.id == 1", "", "true"),
    ("item['id']", "", "1"),
    ("undefined_name", "", "error"),
    ("unknown_function(1)", "", "error"),
    ("sum([1, 2])", "", "error"),
    // Comprehensions.
    ("[x * 2 for x in [1, 2, 3]]", "", "[2, 4, 6]"),
    ("[x for x in result.nested.list if x > 1]", "", "[2, 3]"),
    ("[t.name for t in result.tests if t.passed]", "", "[\"t1\"]"),
    ("[c for c in 'abc']", "", "[\"a\", \"b\", \"c\"]"),
    ("[x for x in [1, 2, 3, 4] if x > 1 if x < 4]", "", "[2, 3]"),
    ("len([x for x in result.items if x != 'b'])", "", "2"),
    (
        "[[y * 10 for y in x] for x in [[1], [2, 3]]]",
        "",
        "[[10], [20, 30]]",
    ),
    ("[k for k in result.nested]", "", "[\"a\", \"list\"]"),
    ("[item for item in [item]]", "", "[{\"id\": 1}]"),
    ("[x for x in [1, 2] if x > result.score]", "", "[]"),
    (
        "[x + x for x in result.items]",
        "",
        "[\"aa\", \"bb\", \"cc\"]",
    ),
    ("[x for x in 5]", "", "error"),
    ("[x for x in [1, 0] if 1 / x]", "", "error"),
    // Values as results.
    ("result.nested.list", "", "[1, 2, 3]"),
    ("(1, 'a')", "", "[1, \"a\"]"),
    ("()", "", "[]"),
    ("[]", "", "[]"),
    ("result.f", "", "2.5"),
    ("result.none", "", "null"),
    ("-0.0", "", "-0.0"),
    // File built-ins (the test's root holds `notes.txt` with "hello world").
    ("file_exists('notes.txt')", "", "true"),
    ("file_exists('nope.txt')", "", "false"),
    ("file_exists('.')", "", "false"),
    ("file_contains('notes.txt', 'world')", "", "true"),
    ("file_contains('notes.txt', 'xyz')", "", "false"),
    ("file_contains('nope.txt', 'a')", "", "false"),
    ("file_exists(1)", "", "error"),
];

/// Rows where we deliberately differ from Python (not compared with it).
const RUST_ONLY: &[(&str, &str, &str)] = &[
    // 64-bit integers: overflow is an error (Python has big ints).
    ("9223372036854775807 + 1", "", "error"),
    ("-9223372036854775807 - 2", "", "error"),
    ("int('99999999999999999999')", "", "error"),
    // The value-size limit (10 MiB by default).
    ("'ab' * 100000000", "", "error"),
    ("[1, 2] * 10000000", "", "error"),
    // Non-finite floats have no JSON form.
    ("1e308 * 10", "", "error"),
    // `is` only between singletons (Python's answer depends on object identity).
    ("1 is 1", "", "error"),
    ("'a' is 'a'", "", "error"),
    // Objects iterate in key order; `keys()` / `values()` are lists.
    ("result.nested.keys()", "", "[\"a\", \"list\"]"),
    ("result.nested.a.values() == [3]", "", "true"),
    // `%` formatting is not supported.
    ("'%s' % 1", "", "error"),
];

struct Case {
    expr: &'static str,
    bindings: Value,
    expected: Option<Value>,
}

fn cases(rows: &[(&'static str, &'static str, &'static str)]) -> Vec<Case> {
    rows.iter()
        .map(|(expr, bindings, expected)| Case {
            expr,
            bindings: serde_json::from_str(if bindings.is_empty() {
                DEFAULT
            } else {
                bindings
            })
            .unwrap_or_else(|e| panic!("bindings of `{expr}`: {e}")),
            expected: (*expected != "error").then(|| {
                serde_json::from_str(expected)
                    .unwrap_or_else(|e| panic!("expected value of `{expr}`: {e}"))
            }),
        })
        .collect()
}

fn parse(source: &str) -> stratum_grammar::ast::Expr {
    let parsed = stratum_grammar::parse(source);
    assert!(
        parsed.is_ok(),
        "`{source}` does not parse: {:?}",
        parsed.problems
    );
    parsed.expr.expect("a tree")
}

fn bindings(value: &Value) -> Bindings<'_> {
    let mut bindings = Bindings::new();
    for (key, value) in value.as_object().expect("bindings are an object") {
        match key.as_str() {
            "$input" => bindings = bindings.input(value),
            "$steps" => {
                for (id, output) in value.as_object().expect("steps are an object") {
                    bindings = bindings.step(id.as_str(), output);
                }
            }
            name => bindings = bindings.name(name, value),
        }
    }
    bindings
}

/// A root with `notes.txt` for the file built-ins.
fn root() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stratum-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "hello world").unwrap();
    dir
}

/// Our value for every case (`None` for an error), checked against the expectations.
fn evaluate_all(cases: &[Case], root: &Path) -> Vec<Option<Value>> {
    let limits = Limits::default().with_root(root);
    let mut failures = Vec::new();
    let mut values = Vec::new();
    for case in cases {
        let expr = parse(case.expr);
        let bindings = bindings(&case.bindings);
        let folded = compile(&expr, case.expr).evaluate(&bindings, &limits);
        let unfolded = compile_unfolded(&expr, case.expr).evaluate(&bindings, &limits);
        let got = folded.as_ref().ok().cloned();
        if got != case.expected {
            failures.push(format!(
                "`{}`: expected {}, got {:?}",
                case.expr,
                show(&case.expected),
                folded
            ));
        }
        let same = match (&folded, &unfolded) {
            (Ok(a), Ok(b)) => a == b,
            (Err(a), Err(b)) => a.kind == b.kind && a.span == b.span,
            _ => false,
        };
        if !same {
            failures.push(format!(
                "`{}`: folded {:?} but unfolded {:?}",
                case.expr, folded, unfolded
            ));
        }
        if let Err(error) = &folded {
            let message = &error.message;
            if message.is_empty() || message.starts_with(char::is_uppercase) {
                failures.push(format!("`{}`: message `{message}`", case.expr));
            }
        }
        values.push(got);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    values
}

fn show(value: &Option<Value>) -> String {
    match value {
        Some(value) => value.to_string(),
        None => "an error".to_owned(),
    }
}

/// `evaluate` and `evaluate_bool` take a fast path for programs that only read and compare,
/// falling back to the general VM; `explain` always runs the general VM. They must agree on
/// every row, folded and unfolded, with the default budget and with every budget small
/// enough to run out part-way (the same error, at the same op).
#[test]
fn fast_path_agrees_with_the_general_vm() {
    let root = root();
    let mut failures = Vec::new();
    for case in cases(ROWS).iter().chain(&cases(RUST_ONLY)) {
        let expr = parse(case.expr);
        let bindings = bindings(&case.bindings);
        for program in [
            compile(&expr, case.expr),
            compile_unfolded(&expr, case.expr),
        ] {
            let budgets = (0..=24).chain([Limits::default().instructions]);
            for budget in budgets {
                let limits = Limits {
                    instructions: budget,
                    ..Limits::default().with_root(&root)
                };
                let general = program.explain(&bindings, &limits);
                let value = program.evaluate(&bindings, &limits);
                if value != general.outcome {
                    failures.push(format!(
                        "`{}` (budget {budget}): evaluate gave {value:?}, the general VM {:?}",
                        case.expr, general.outcome
                    ));
                }
                let truth = program.evaluate_bool(&bindings, &limits);
                let same = match (&truth, &general.outcome) {
                    (Ok(truth), Ok(_)) => *truth == general.held(),
                    (Err(a), Err(b)) => a == b,
                    _ => false,
                };
                if !same {
                    failures.push(format!(
                        "`{}` (budget {budget}): evaluate_bool gave {truth:?}, the general VM {:?}",
                        case.expr, general.outcome
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn table_has_enough_rows() {
    assert!(ROWS.len() >= 160, "{} rows", ROWS.len());
}

#[test]
fn rows_evaluate_as_expected() {
    let root = root();
    evaluate_all(&cases(ROWS), &root);
    evaluate_all(&cases(RUST_ONLY), &root);
}

const HARNESS: &str = r#"
import json, os, re, sys

payload = json.load(sys.stdin)
ROOT = payload["root"]

class Obj(dict):
    """A JSON object that also allows attribute access, at any depth (a field wins over a
    dict method of the same name: `result.items`)."""
    def __getattribute__(self, name):
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        return dict.__getattribute__(self, name)

    def __getattr__(self, name):
        raise AttributeError(name)

def unwrap(value):
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in dict.items(value)}
    if isinstance(value, (list, tuple)):
        return [unwrap(v) for v in value]
    return value

def wrap(value):
    if isinstance(value, dict):
        return Obj({k: wrap(v) for k, v in value.items()})
    if isinstance(value, list):
        return [wrap(v) for v in value]
    return value

def file_exists(path):
    return os.path.isfile(os.path.join(ROOT, path))

def file_contains(path, substring):
    full = os.path.join(ROOT, path)
    if not os.path.isfile(full) or os.path.getsize(full) > 10 * 1024 * 1024:
        return False
    with open(full, encoding="utf-8", errors="replace") as f:
        return substring in f.read()

BUILTINS = {
    "len": len, "bool": bool, "int": int, "str": str, "any": any, "all": all,
    "min": min, "max": max, "file_exists": file_exists, "file_contains": file_contains,
    "true": True, "false": False, "null": None,
}

def step_name(match):
    return "_step_" + re.sub(r"[^A-Za-z0-9_]", "_", match.group(1))

out = []
for row in payload["rows"]:
    expr = re.sub(r"\$\.steps\.([A-Za-z0-9_-]+)\.output", step_name, row["expr"])
    expr = expr.replace("$.input", "_input")
    env = {"__builtins__": {}}
    env.update(BUILTINS)
    for key, value in row["bindings"].items():
        if key == "$input":
            env["_input"] = wrap(value)
        elif key == "$steps":
            for step, output in value.items():
                env["_step_" + re.sub(r"[^A-Za-z0-9_]", "_", step)] = wrap(output)
        else:
            env[key] = wrap(value)
    try:
        value = eval(expr, env)
    except Exception as e:
        out.append({"error": type(e).__name__ + ": " + str(e)})
        continue
    try:
        out.append({"ok": json.loads(json.dumps(unwrap(value)))})
    except Exception as e:
        out.append({"error": "not JSON: " + type(e).__name__ + ": " + str(e)})
print(json.dumps(out))
"#;

#[test]
fn python_agrees_on_every_row() {
    let python = Command::new("python3")
        .arg("-c")
        .arg("import sys; sys.exit(0)")
        .status();
    if !python.is_ok_and(|status| status.success()) {
        eprintln!("note: python3 is not on PATH; the comparison with Python is skipped");
        return;
    }
    let root = root();
    let cases = cases(ROWS);
    let ours = evaluate_all(&cases, &root);
    let rows: Vec<Value> = cases
        .iter()
        .map(|case| json!({"expr": case.expr, "bindings": case.bindings}))
        .collect();
    let payload = json!({"root": root.to_string_lossy(), "rows": rows});
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(HARNESS)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(payload.to_string().as_bytes())
        .expect("rows written");
    let output = child.wait_with_output().expect("python3 finishes");
    assert!(
        output.status.success(),
        "the harness failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Python's JSON text parsed by serde_json: `1` and `1.0` stay apart.
    let theirs: Vec<Value> = serde_json::from_slice(&output.stdout).expect("harness output");
    assert_eq!(theirs.len(), cases.len());
    let mut disagreements = Vec::new();
    for ((case, ours), theirs) in cases.iter().zip(&ours).zip(&theirs) {
        let python = theirs.get("ok");
        let agree = match (ours, python) {
            (Some(ours), Some(python)) => ours == python,
            (None, None) => true,
            _ => false,
        };
        if !agree {
            disagreements.push(format!(
                "`{}`: ours {}, python {}",
                case.expr,
                show(ours),
                theirs
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {} rows disagree with Python:\n{}",
        disagreements.len(),
        cases.len(),
        disagreements.join("\n")
    );
    eprintln!("python agrees on all {} rows", cases.len());
}

mod random_bindings {
    use proptest::prelude::*;
    use serde_json::json;
    use stratum_grammar::compile::compile_unfolded;
    use stratum_grammar::{Bindings, Limits, compile};

    fn value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(json!(null)),
            any::<bool>().prop_map(|b| json!(b)),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            ".{0,5}".prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(3, 20, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::from),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("a".to_owned()),
                        Just("items".to_owned()),
                        Just("name".to_owned()),
                        Just("passed".to_owned())
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| json!(m)),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Every expression of the table over arbitrary values: no panic, folding does not
        /// change the outcome, and the fast path of `evaluate` agrees with the general VM
        /// (`explain`), also when a small budget runs out.
        #[test]
        fn table_expressions_over_random_values(
            row in 0..super::ROWS.len(),
            result in value(),
            x in value(),
            budget in prop_oneof![0u64..24, Just(100_000u64)],
        ) {
            let source = super::ROWS[row].0;
            let expr = super::parse(source);
            let bindings = Bindings::new().name("result", &result).name("x", &x).name("item", &x).input(&x).step("s1", &result);
            let limits = Limits { instructions: 100_000, ..Limits::default() };
            let program = compile(&expr, source);
            let folded = program.evaluate(&bindings, &limits);
            let unfolded = compile_unfolded(&expr, source).evaluate(&bindings, &limits);
            match (&folded, &unfolded) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
                (Err(a), Err(b)) => prop_assert_eq!(a.kind, b.kind),
                _ => prop_assert!(false, "`{}`: {:?} vs {:?}", source, folded, unfolded),
            }
            let limits = Limits { instructions: budget, ..Limits::default() };
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
