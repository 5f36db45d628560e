//! The printer: Python's `repr` for strings and floats, canonical source, and the round trip
//! `parse(print(e)) == e` over generated trees.

#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

use proptest::prelude::*;
use stratum_grammar::ast::{
    BinaryOp, CompareOp, Comparison, Expr, ExprKind, Generator, Ident, LogicalOp, RefRoot,
    Reference, UnaryOp,
};
use stratum_grammar::print::{float_literal, string_literal};
use stratum_grammar::{Span, parse, print};

/// Python 3.11's `repr` of each value.
const FLOATS: &[(f64, &str)] = &[
    (0.0, "0.0"),
    (-0.0, "-0.0"),
    (0.1, "0.1"),
    (0.7, "0.7"),
    (1.0, "1.0"),
    (100.0, "100.0"),
    (0.0001, "0.0001"),
    (1e-05, "1e-05"),
    (1.5e-07, "1.5e-07"),
    (1e+16, "1e+16"),
    (1000000000000000.0, "1000000000000000.0"),
    (1.2345678901234568e+17, "1.2345678901234568e+17"),
    (9999999999999998.0, "9999999999999998.0"),
    (1e+22, "1e+22"),
    (1e-300, "1e-300"),
    (5e-324, "5e-324"),
    (1.7976931348623157e+308, "1.7976931348623157e+308"),
    (2.5, "2.5"),
    (0.3333333333333333, "0.3333333333333333"),
    (0.6666666666666666, "0.6666666666666666"),
    (12345.678, "12345.678"),
    (12.3456, "12.3456"),
    (1e+100, "1e+100"),
    (123.0, "123.0"),
    (1234567890123456.0, "1234567890123456.0"),
    (0.001, "0.001"),
    (-1.5, "-1.5"),
    (-1e-07, "-1e-07"),
    (0.30000000000000004, "0.30000000000000004"),
    (0.00030000000000000003, "0.00030000000000000003"),
    (4.35, "4.35"),
    (1.152921504606847e+18, "1.152921504606847e+18"),
];
const STRINGS: &[(&str, &str)] = &[
    ("", "''"),
    ("a", "'a'"),
    ("it's", "\"it's\""),
    ("say \"hi\"", "'say \"hi\"'"),
    ("both ' and \"", "'both \\' and \"'"),
    ("back\\slash", "'back\\\\slash'"),
    ("tab\u{9} nl\u{a} cr\u{d}", "'tab\\t nl\\n cr\\r'"),
    ("\u{0}\u{7}\u{1f}\u{7f}", "'\\x00\\x07\\x1f\\x7f'"),
    (
        "\u{e9} \u{fc} \u{65e5}\u{672c}",
        "'\u{e9} \u{fc} \u{65e5}\u{672c}'",
    ),
    ("\u{a0}", "'\\xa0'"),
    ("\u{ad}", "'\\xad'"),
    ("\u{2028}", "'\\u2028'"),
    ("\u{1f600}", "'\u{1f600}'"),
    ("\u{e0001}", "'\\U000e0001'"),
    ("\u{feff}", "'\\ufeff'"),
    ("\u{d7ff}", "'\\ud7ff'"),
    ("\u{85}", "'\\x85'"),
    (" ", "' '"),
    ("\u{378}", "'\\u0378'"),
    ("\u{10ffff}", "'\\U0010ffff'"),
    ("\u{3000}", "'\\u3000'"),
    ("\u{200b}", "'\\u200b'"),
    ("\u{1b}[0m", "'\\x1b[0m'"),
];

#[test]
fn float_literal_is_python_repr() {
    for &(value, python) in FLOATS {
        assert_eq!(float_literal(value), python, "{value:e}");
    }
    assert_eq!(float_literal(f64::INFINITY), "inf");
    assert_eq!(float_literal(f64::NEG_INFINITY), "-inf");
    assert_eq!(float_literal(f64::NAN), "nan");
}

#[test]
fn string_literal_is_python_repr() {
    for &(value, python) in STRINGS {
        assert_eq!(string_literal(value), python, "{value:?}");
    }
}

/// Canonical text: the parse of the first text prints as the second.
#[test]
fn canonical_text() {
    let cases = [
        ("true  and  null", "True and None"),
        ("a or (b or c)", "a or (b or c)"),
        ("(a or b) or c", "a or b or c"),
        ("(a and b) or c", "a and b or c"),
        ("a and (b or c)", "a and (b or c)"),
        ("not (a and b)", "not (a and b)"),
        ("(not a) == b", "(not a) == b"),
        ("(a < b) < c", "(a < b) < c"),
        ("a < (b < c)", "a < (b < c)"),
        ("a - (b - c)", "a - (b - c)"),
        ("(a - b) - c", "a - b - c"),
        ("-(-1)", "- -1"),
        ("-(+x)", "- +x"),
        ("-(a + b)", "-(a + b)"),
        ("(-a).b", "(-a).b"),
        ("(1).real", "(1).real"),
        ("1.5 .hex()", "1.5.hex()"),
        ("(a if b else c) if d else e", "(a if b else c) if d else e"),
        ("a if b else (c if d else e)", "a if b else c if d else e"),
        ("(a if b else c) or d", "(a if b else c) or d"),
        ("f(a if b else c, d)", "f(a if b else c, d)"),
        ("f((x for x in y))", "f(x for x in y)"),
        (
            "[x for x in (a if b else c) if (p if q else r)]",
            "[x for x in (a if b else c) if (p if q else r)]",
        ),
        ("( 1 , )", "(1,)"),
        ("[ ]", "[]"),
        ("'it\\'s'", "\"it's\""),
        ("1e16", "1e+16"),
        ("1_0.0_1", "10.01"),
        ("$.steps.a.output . x", "$.steps.a.output.x"),
        ("x [0] . y", "x[0].y"),
        ("a not in b is not c", "a not in b is not c"),
        ("(a, b)[0]", "(a, b)[0]"),
        ("x[(1, 2)]", "x[(1, 2)]"),
        ("(a + b) * c", "(a + b) * c"),
        ("a * (b * c)", "a * (b * c)"),
        ("a // b % c", "a // b % c"),
    ];
    for (src, expected) in cases {
        let parsed = parse(src);
        assert!(parsed.problems.is_empty(), "{src}: {:#?}", parsed.problems);
        assert_eq!(print(&parsed.expr.unwrap()), expected, "{src}");
    }
}

fn ident(name: String) -> Ident {
    Ident {
        name,
        span: Span::default(),
    }
}

fn expr(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::default())
}

const KEYWORDS: &[&str] = &[
    "and", "or", "not", "in", "is", "if", "else", "for", "lambda", "yield", "await", "return",
    "assert", "as", "async", "break", "class", "continue", "def", "del", "elif", "except",
    "finally", "from", "global", "import", "nonlocal", "pass", "raise", "try", "while", "with",
    "true", "false", "null",
];

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,6}".prop_filter("a keyword or a dunder", |name| {
        !KEYWORDS.contains(&name.as_str()) && !name.contains("__")
    })
}

fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => name(),
        1 => prop::sample::select(vec!["true".to_owned(), "false".into(), "null".into()]),
    ]
}

fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        Just(expr(ExprKind::None)),
        any::<bool>().prop_map(|b| expr(ExprKind::Bool(b))),
        (0..=i64::MAX).prop_map(|i| expr(ExprKind::Int(i))),
        (0.0..f64::MAX).prop_map(|f| expr(ExprKind::Float(f))),
        prop::sample::select(vec![0.0, 0.5, 1e16, 1e-5, 123.0, 5e-324])
            .prop_map(|f| expr(ExprKind::Float(f))),
        any::<String>()
            .prop_filter("contains `__`", |s| !s.contains("__"))
            .prop_map(|s| expr(ExprKind::Str(s))),
        name().prop_map(|n| expr(ExprKind::Name(ident(n)))),
        (
            prop::option::of(name()),
            prop::collection::vec(field(), 0..3)
        )
            .prop_map(|(step, path)| {
                let root = match step {
                    Some(step) => RefRoot::StepOutput { step: ident(step) },
                    None => RefRoot::Input,
                };
                let path = path.into_iter().map(ident).collect();
                expr(ExprKind::Ref(Reference { root, path }))
            }),
    ]
}

fn generator(inner: impl Strategy<Value = Expr> + Clone) -> impl Strategy<Value = Generator> {
    (
        inner.clone(),
        name(),
        inner.clone(),
        prop::collection::vec(inner, 0..3),
    )
        .prop_map(|(element, var, iter, conditions)| Generator {
            element,
            var: ident(var),
            iter,
            conditions,
        })
}

fn tree() -> impl Strategy<Value = Expr> {
    leaf().prop_recursive(5, 64, 4, |inner| {
        let boxed = |e: Expr| Box::new(e);
        let args = prop::collection::vec(inner.clone(), 0..4);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4)
                .prop_map(|items| expr(ExprKind::List(items))),
            prop::collection::vec(inner.clone(), 0..4)
                .prop_map(|items| expr(ExprKind::Tuple(items))),
            (inner.clone(), field()).prop_map(move |(base, name)| expr(ExprKind::Attr {
                base: boxed(base),
                name: ident(name)
            })),
            (inner.clone(), inner.clone()).prop_map(move |(base, index)| expr(ExprKind::Index {
                base: boxed(base),
                index: boxed(index)
            })),
            (name(), args.clone()).prop_map(|(func, args)| expr(ExprKind::Call {
                func: ident(func),
                args
            })),
            (inner.clone(), field(), args).prop_map(move |(receiver, name, args)| {
                expr(ExprKind::Method {
                    receiver: boxed(receiver),
                    name: ident(name),
                    args,
                })
            }),
            (name(), generator(inner.clone())).prop_map(|(func, generator)| {
                expr(ExprKind::Call {
                    func: ident(func),
                    args: vec![expr(ExprKind::Generator(Box::new(generator)))],
                })
            }),
            generator(inner.clone()).prop_map(|g| expr(ExprKind::ListComp(Box::new(g)))),
            (
                prop::sample::select(vec![UnaryOp::Not, UnaryOp::Neg, UnaryOp::Pos]),
                inner.clone()
            )
                .prop_map(move |(op, operand)| expr(ExprKind::Unary {
                    op,
                    operand: boxed(operand)
                })),
            (
                prop::sample::select(vec![
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Div,
                    BinaryOp::FloorDiv,
                    BinaryOp::Mod
                ]),
                inner.clone(),
                inner.clone()
            )
                .prop_map(move |(op, lhs, rhs)| expr(ExprKind::Binary {
                    op,
                    lhs: boxed(lhs),
                    rhs: boxed(rhs)
                })),
            (
                prop::sample::select(vec![LogicalOp::And, LogicalOp::Or]),
                inner.clone(),
                inner.clone()
            )
                .prop_map(move |(op, lhs, rhs)| expr(ExprKind::Logical {
                    op,
                    lhs: boxed(lhs),
                    rhs: boxed(rhs)
                })),
            (
                inner.clone(),
                prop::collection::vec(
                    (
                        prop::sample::select(vec![
                            CompareOp::Eq,
                            CompareOp::Ne,
                            CompareOp::Lt,
                            CompareOp::Le,
                            CompareOp::Gt,
                            CompareOp::Ge,
                            CompareOp::In,
                            CompareOp::NotIn,
                            CompareOp::Is,
                            CompareOp::IsNot
                        ]),
                        inner.clone()
                    ),
                    1..3
                )
            )
                .prop_map(move |(first, rest)| expr(ExprKind::Compare {
                    first: boxed(first),
                    rest: rest
                        .into_iter()
                        .map(|(op, rhs)| Comparison {
                            op,
                            op_span: Span::default(),
                            rhs
                        })
                        .collect()
                })),
            (inner.clone(), inner.clone(), inner).prop_map(move |(then, condition, otherwise)| {
                expr(ExprKind::Conditional {
                    then: boxed(then),
                    condition: boxed(condition),
                    otherwise: boxed(otherwise),
                })
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn print_then_parse_gives_the_tree_back(tree in tree()) {
        let text = print(&tree);
        let parsed = parse(&text);
        prop_assert!(parsed.problems.is_empty(), "{text}: {:#?}", parsed.problems);
        prop_assert_eq!(parsed.expr.unwrap().without_spans(), tree.without_spans(), "{}", text);
    }
}
