//! The parser: tree shapes (as S-expressions), spans, and the problems of bad expressions.

#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

use stratum_grammar::ast::{Expr, ExprKind, RefRoot};
use stratum_grammar::{Problem, Span, parse};

/// The tree as an S-expression, spans left out.
fn sexpr(expr: &Expr) -> String {
    let list = |items: &[Expr]| items.iter().map(sexpr).collect::<Vec<_>>().join(" ");
    match &expr.kind {
        ExprKind::None => "None".into(),
        ExprKind::Bool(value) => format!("{value}"),
        ExprKind::Int(value) => format!("{value}"),
        ExprKind::Float(value) => format!("{value:?}"),
        ExprKind::Str(value) => format!("{value:?}"),
        ExprKind::List(items) => format!("(list {})", list(items)),
        ExprKind::Tuple(items) => format!("(tuple {})", list(items)),
        ExprKind::Name(ident) => ident.name.clone(),
        ExprKind::Ref(reference) => {
            let root = match &reference.root {
                RefRoot::Input => "input".to_owned(),
                RefRoot::StepOutput { step } => format!("step {}", step.name),
            };
            let path: Vec<_> = reference.path.iter().map(|f| f.name.as_str()).collect();
            format!("($ {root} [{}])", path.join(" "))
        }
        ExprKind::Attr { base, name } => format!("(. {} {})", sexpr(base), name.name),
        ExprKind::Index { base, index } => format!("([] {} {})", sexpr(base), sexpr(index)),
        ExprKind::Call { func, args } => format!("(call {} {})", func.name, list(args)),
        ExprKind::Method {
            receiver,
            name,
            args,
        } => format!("(method {} {} {})", sexpr(receiver), name.name, list(args)),
        ExprKind::Generator(generator) | ExprKind::ListComp(generator) => {
            let kind = match &expr.kind {
                ExprKind::Generator(_) => "gen",
                _ => "listcomp",
            };
            let conditions: Vec<_> = generator.conditions.iter().map(sexpr).collect();
            format!(
                "({kind} {} for {} in {} if [{}])",
                sexpr(&generator.element),
                generator.var.name,
                sexpr(&generator.iter),
                conditions.join(" ")
            )
        }
        ExprKind::Unary { op, operand } => format!("({} {})", op.as_str(), sexpr(operand)),
        ExprKind::Binary { op, lhs, rhs } => {
            format!("({} {} {})", op.as_str(), sexpr(lhs), sexpr(rhs))
        }
        ExprKind::Logical { op, lhs, rhs } => {
            format!("({} {} {})", op.as_str(), sexpr(lhs), sexpr(rhs))
        }
        ExprKind::Compare { first, rest } => {
            let mut out = format!("(compare {}", sexpr(first));
            for comparison in rest {
                out.push_str(&format!(
                    " {} {}",
                    comparison.op.as_str(),
                    sexpr(&comparison.rhs)
                ));
            }
            out + ")"
        }
        ExprKind::Conditional {
            then,
            condition,
            otherwise,
        } => format!(
            "(if {} {} {})",
            sexpr(condition),
            sexpr(then),
            sexpr(otherwise)
        ),
        ExprKind::Error => "<error>".into(),
    }
}

/// Parses text that must be valid, and returns its tree as an S-expression.
fn shape(src: &str) -> String {
    let parsed = parse(src);
    assert!(
        parsed.problems.is_empty(),
        "{src:?} has problems: {:#?}",
        parsed.problems
    );
    sexpr(&parsed.expr.unwrap())
}

#[test]
fn precedence_and_associativity() {
    let cases = [
        (
            "0 <= result.score <= 1",
            "(compare 0 <= (. result score) <= 1)",
        ),
        ("(a < b) < c", "(compare (compare a < b) < c)"),
        ("not a == b", "(not (compare a == b))"),
        ("a or b and c", "(or a (and b c))"),
        ("a and b or c", "(or (and a b) c)"),
        ("a or b or c", "(or (or a b) c)"),
        ("a or (b or c)", "(or a (or b c))"),
        ("-x.y", "(- (. x y))"),
        ("- -1", "(- (- 1))"),
        ("a - b - c", "(- (- a b) c)"),
        ("a - (b - c)", "(- a (- b c))"),
        ("a + b * c % d // e / f", "(+ a (/ (// (% (* b c) d) e) f))"),
        ("-a * +b", "(* (- a) (+ b))"),
        ("not not a", "(not (not a))"),
        ("not a and not b", "(and (not a) (not b))"),
        ("a + b == c * d", "(compare (+ a b) == (* c d))"),
        ("x if c else y", "(if c x y)"),
        ("a if b else c if d else e", "(if b a (if d c e))"),
        ("(a if b else c) if d else e", "(if d (if b a c) e)"),
        (
            "a or b if c or d else e and f",
            "(if (or c d) (or a b) (and e f))",
        ),
        ("a in b", "(compare a in b)"),
        ("a not in b", "(compare a not in b)"),
        ("a is not None", "(compare a is not None)"),
        ("a is b", "(compare a is b)"),
        ("a != b > c", "(compare a != b > c)"),
        ("not a in b", "(not (compare a in b))"),
    ];
    for (src, expected) in cases {
        assert_eq!(shape(src), expected, "{src}");
    }
}

#[test]
fn primaries_and_postfix() {
    let cases = [
        (
            "$.steps.s1.output.items[0].name",
            "(. ([] ($ step s1 [items]) 0) name)",
        ),
        ("$.input", "($ input [])"),
        ("$.input.a.b", "($ input [a b])"),
        ("$.input.name.lower()", "(method ($ input [name]) lower )"),
        ("$.steps.x.output.true", "($ step x [true])"),
        ("result.label.lower()", "(method (. result label) lower )"),
        (
            "len(result.items) > 0",
            "(compare (call len (. result items)) > 0)",
        ),
        ("f()", "(call f )"),
        ("f(a, b,)", "(call f a b)"),
        ("x[0][1]", "([] ([] x 0) 1)"),
        ("x.true.null.false", "(. (. (. x true) null) false)"),
        ("[1, 2,]", "(list 1 2)"),
        ("[]", "(list )"),
        ("()", "(tuple )"),
        ("(1,)", "(tuple 1)"),
        ("(1, 2)", "(tuple 1 2)"),
        ("(1)", "1"),
        ("True", "true"),
        ("true", "true"),
        ("null", "None"),
        ("None", "None"),
        ("0.7", "0.7"),
        ("1e3", "1000.0"),
        ("1.5E-3", "0.0015"),
        (".5", "0.5"),
        ("5.", "5.0"),
        ("1_000_000", "1000000"),
        ("'a' 'b' \"c\"", "\"abc\""),
        (
            r"'\n\t\\\'\x41\u00e9\U0001F600\101\0'",
            "\"\\n\\t\\\\'Aé😀A\\0\"",
        ),
        (r"'\d'", "\"\\\\d\""),
        (r"r'\d\n'", "\"\\\\d\\\\n\""),
        ("'''a'b'''", "\"a'b\""),
        ("'a\\\nb'", "\"ab\""),
        ("a # comment\n + b", "(+ a b)"),
        ("a\n  and\n  b", "(and a b)"),
    ];
    for (src, expected) in cases {
        assert_eq!(shape(src), expected, "{src}");
    }
}

#[test]
fn comprehensions() {
    let cases = [
        (
            "all(t.passed for t in result.tests)",
            "(call all (gen (. t passed) for t in (. result tests) if []))",
        ),
        (
            "any(f.severity == 'high' for f in result.findings if f.open if x)",
            "(call any (gen (compare (. f severity) == \"high\") for f in (. result findings) \
             if [(. f open) x]))",
        ),
        ("[x for x in y if c]", "(listcomp x for x in y if [c])"),
        ("sum((x for x in y))", "(call sum (gen x for x in y if []))"),
        (
            "result.items.count(x for x in y)",
            "(method (. result items) count (gen x for x in y if []))",
        ),
        (
            "[a if b else c for x in y or z if p or q]",
            "(listcomp (if b a c) for x in (or y z) if [(or p q)])",
        ),
    ];
    for (src, expected) in cases {
        assert_eq!(shape(src), expected, "{src}");
    }
}

fn span_of(src: &str, needle: &str) -> Span {
    let start = src.find(needle).unwrap();
    Span::new(start, start + needle.len())
}

#[test]
fn spans() {
    let src = "len($.steps.s1.output.items) > 0 and x not in y";
    let expr = parse(src).expr.unwrap();
    assert_eq!(expr.span, Span::new(0, src.len()));
    let ExprKind::Logical { lhs, rhs, .. } = &expr.kind else {
        panic!("{expr:?}");
    };
    let ExprKind::Compare { first, rest } = &lhs.kind else {
        panic!("{lhs:?}");
    };
    assert_eq!(first.span, span_of(src, "len($.steps.s1.output.items)"));
    let ExprKind::Call { func, args } = &first.kind else {
        panic!("{first:?}");
    };
    assert_eq!(func.span, span_of(src, "len"));
    assert_eq!(args[0].span, span_of(src, "$.steps.s1.output.items"));
    let ExprKind::Ref(reference) = &args[0].kind else {
        panic!("{:?}", args[0]);
    };
    let RefRoot::StepOutput { step } = &reference.root else {
        panic!("{reference:?}");
    };
    assert_eq!(step.span, span_of(src, "s1"));
    assert_eq!(reference.path[0].span, span_of(src, "items"));
    assert_eq!(rest[0].op_span, span_of(src, ">"));
    let ExprKind::Compare { first, rest } = &rhs.kind else {
        panic!("{rhs:?}");
    };
    assert_eq!(first.span, span_of(src, "x"));
    assert_eq!(rest[0].op_span, span_of(src, "not in"));
    assert_eq!(rest[0].rhs.span, Span::new(src.len() - 1, src.len()));

    // Parentheses make no node: the inner expression keeps its own span, the outer one
    // covers them.
    let src = "(a + b) * c";
    let expr = parse(src).expr.unwrap();
    assert_eq!(expr.span, Span::new(0, src.len()));
    let ExprKind::Binary { lhs, .. } = &expr.kind else {
        panic!("{expr:?}");
    };
    assert_eq!(lhs.span, span_of(src, "a + b"));

    let src = "x.name.lower()";
    let expr = parse(src).expr.unwrap();
    let ExprKind::Method { name, receiver, .. } = &expr.kind else {
        panic!("{expr:?}");
    };
    assert_eq!(name.span, span_of(src, "lower"));
    assert_eq!(receiver.span, span_of(src, "x.name"));
}

#[test]
fn problems_are_sorted_and_error_nodes_are_reported() {
    let parsed = parse("(1 +) or result.x and (2 *) == 3");
    assert_eq!(parsed.problems.len(), 2, "{:#?}", parsed.problems);
    assert!(parsed.expr.is_some());
    let starts: Vec<u32> = parsed.problems.iter().map(|p| p.span.start).collect();
    let mut sorted = starts.clone();
    sorted.sort();
    assert_eq!(starts, sorted);
}

/// One line per problem, for the snapshot.
fn describe(src: &str, problems: &[Problem]) -> String {
    let mut out = format!("{src}\n");
    for problem in problems {
        let text = src.get(problem.span.range()).unwrap_or("?");
        out.push_str(&format!(
            "  {:?} {}..{} `{}`: {}\n    label: {}\n",
            problem.kind,
            problem.span.start,
            problem.span.end,
            text,
            problem.message,
            problem.label
        ));
        for (span, label) in &problem.secondary {
            out.push_str(&format!(
                "    secondary {}..{}: {label}\n",
                span.start, span.end
            ));
        }
        if let Some(help) = &problem.help {
            out.push_str(&format!("    help: {help}\n"));
        }
        if let Some(replacement) = &problem.replacement {
            out.push_str(&format!(
                "    replace {}..{} with `{}`\n",
                replacement.span.start, replacement.span.end, replacement.text
            ));
        }
    }
    out
}

#[test]
fn bad_expressions() {
    let cases = [
        // Missing operands and brackets.
        "",
        "result.a >",
        "a and )",
        "a and or b",
        "f(",
        "f(a,,b)",
        "result.x => 1",
        "x is not",
        "(1 +) or result.x and (2 *) == 3",
        "len(result.items",
        "len(result.items]",
        "a)",
        "a b",
        "f(a b)",
        "a if b",
        "a if b c",
        "a not b",
        "x.",
        "x.if",
        "x.1",
        "[x for in y]",
        "[x for x y]",
        "a : b",
        // Lexical problems.
        "'abc",
        "f('abc)",
        "a ? b",
        "résultat > 1",
        "x\u{a0}> 1",
        "99999999999999999999",
        "1e999",
        "007",
        "0x1F",
        "1j",
        r"'\x4'",
        r"'\N{DASH}'",
        "f'{x}'",
        "b'abc'",
        // References.
        "$",
        "$input.x",
        "$.foo",
        "$.inputs.x",
        "$.steps",
        "$.steps.x",
        "$.steps.x.result",
        // Outside the subset.
        "lambda x: x",
        "x = 1",
        "(y := 1)",
        "x ** 2",
        "a | b",
        "a & b",
        "a ^ b << c",
        "~a",
        "a @ b",
        "a[1:2]",
        "a[::2]",
        "a[1, 2]",
        "{'a': 1}",
        "{1, 2}",
        "f(x=1)",
        "f(*args)",
        "f(**kwargs)",
        "yield x",
        "await x",
        "a && !b || c",
        "a <> b",
        "if x: y",
        "for x in y: pass",
        "import os",
        "return x > 1",
        "a; b",
        "x += 1",
        "x[0](1)",
        "[x for a in b for x in a]",
        "[x for a, b in c]",
        "all(x for (a, b) in c)",
        "(x for x in y)",
        "f(x for x in y, 1)",
        "[x for x in y, 1]",
        // Dunder.
        "__import__('os')",
        "x.__class__",
        "'__'",
        "$.steps.__s.output",
        "x # __comment",
    ];
    let report: String = cases
        .iter()
        .map(|src| {
            let parsed = parse(src);
            assert!(
                !parsed.problems.is_empty(),
                "{src:?} parsed without problems"
            );
            describe(src, &parsed.problems)
        })
        .collect();
    insta::assert_snapshot!(report);
}

/// Every tree holds a problem for each of its error nodes, and problems are sorted.
fn check_invariants(src: &str) {
    let parsed = parse(src);
    let starts: Vec<u32> = parsed.problems.iter().map(|p| p.span.start).collect();
    assert!(starts.is_sorted(), "{src:?}: {:#?}", parsed.problems);
    for problem in &parsed.problems {
        assert!(
            problem.span.end as usize <= src.len()
                && src.is_char_boundary(problem.span.start as usize),
            "{src:?}: {problem:#?}"
        );
    }
    if parsed.expr.is_none() || print_contains_error(&parsed) {
        assert!(!parsed.problems.is_empty(), "{src:?}");
    }
    // Whatever parses cleanly prints to text that parses to the same tree.
    if let (Some(expr), true) = (&parsed.expr, parsed.problems.is_empty()) {
        let printed = stratum_grammar::print(expr);
        let again = parse(&printed);
        assert!(
            again.problems.is_empty(),
            "{src:?} → {printed:?}: {:#?}",
            again.problems
        );
        assert_eq!(
            again.expr.unwrap().without_spans(),
            expr.without_spans(),
            "{src:?}"
        );
    }
}

fn print_contains_error(parsed: &stratum_grammar::Parsed) -> bool {
    parsed
        .expr
        .as_ref()
        .is_some_and(|expr| stratum_grammar::print(expr).contains("<error>"))
}

#[test]
fn hostile_input_is_bounded() {
    let cases: Vec<(String, &str)> = vec![
        ("(".repeat(65) + "1" + &")".repeat(65), "nested too deeply"),
        ("[".repeat(10_000), "too long"),
        ("-".repeat(100) + "1", "nested too deeply"),
        ("not ".repeat(100) + "x", "nested too deeply"),
        ("1+".repeat(2_047) + "1", "nested too deeply"),
        ("1+".repeat(30_000) + "1", "too long"),
        ("a if b else ".repeat(1_000) + "c", "nested too deeply"),
        ("x".to_owned() + &".y".repeat(1_000), "nested too deeply"),
        ("x".to_owned() + &"[0]".repeat(1_000), "nested too deeply"),
        ("'".repeat(10_000), "unterminated"),
        ("a".repeat(70_000), "too long"),
        ("$.".repeat(3_000), "too long"),
    ];
    for (src, message) in cases {
        let parsed = parse(&src);
        assert!(
            parsed.expr.is_none() || message == "unterminated",
            "{message}"
        );
        assert!(
            parsed.problems.iter().any(|p| p.message.contains(message)),
            "{message}: {:#?}",
            parsed.problems
        );
    }
    // Deep but within the limits: parsed, and walked by the recursive printer.
    let fine = [
        "(".repeat(64) + "1" + &")".repeat(64),
        "f(".repeat(64) + &")".repeat(64),
        "- ".repeat(64) + "1",
        "a if b else ".repeat(60) + "c",
        "[1, ".repeat(60) + &"]".repeat(60),
    ];
    for src in fine {
        let parsed = parse(&src);
        assert!(parsed.problems.is_empty(), "{:#?}", parsed.problems);
        let printed = stratum_grammar::print(&parsed.expr.unwrap());
        assert!(parse(&printed).problems.is_empty());
    }
    // Unclosed and mismatched nests recover without blowing up.
    for src in [
        "f(1 +".repeat(60),
        "[(".repeat(32) + "1 +" + &"])".repeat(32),
        "(".repeat(60) + "1 +",
        "{".repeat(60),
    ] {
        check_invariants(&src);
    }
}

const SOUP: &[&str] = &[
    "a",
    "x.y",
    "1",
    "0.5",
    "'s'",
    "\"t\"",
    "True",
    "null",
    "$",
    "$.input",
    "$.steps.s.output",
    ".",
    ",",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ":",
    ";",
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "**",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "=",
    "<>",
    "!",
    "&&",
    "||",
    "|",
    "&",
    "^",
    "~",
    "<<",
    "@",
    ":=",
    "and",
    "or",
    "not",
    "in",
    "is",
    "if",
    "else",
    "for",
    "lambda",
    "yield",
    "import",
    "return",
    "__x",
    "'__'",
    "#c\n",
    "'open",
    "f'x'",
    "0x1",
    "007",
    "\\",
    "?",
    "é",
    "len(",
    "all(",
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

    #[test]
    fn parse_never_panics_on_text(src in "\\PC{0,80}") {
        check_invariants(&src);
    }

    #[test]
    fn parse_never_panics_on_token_soup(
        words in proptest::collection::vec(proptest::sample::select(SOUP), 0..40),
        glue in proptest::sample::select(vec!["", " ", "\n"]),
    ) {
        check_invariants(&words.join(glue));
    }
}

/// A replacement is a fix: applying it leaves a valid expression.
#[test]
fn replacements_fix_the_problem() {
    let cases = [
        "a&&b",
        "a && !b || c",
        "(!x)",
        "x = 1",
        "a <> b",
        "result.x => 1",
        "result.x =< 1",
        "0x1F",
        "007",
        "return x > 1",
        "$input.x",
        "$.inputs.x",
        "$.steps.x",
        "$.steps.x.result",
        "f(x=1)",
        "f(a,,b)",
        "len(x",
        "a)",
        "(x for x in y)",
        "b'abc'",
        "x\u{a0}> 1",
    ];
    for src in cases {
        let parsed = parse(src);
        assert!(!parsed.problems.is_empty(), "{src:?}");
        let mut fixed = src.to_owned();
        // From the end, so that earlier spans stay valid.
        for problem in parsed.problems.iter().rev() {
            let replacement = problem
                .replacement
                .as_ref()
                .unwrap_or_else(|| panic!("{src:?}: no replacement in {problem:#?}"));
            fixed.replace_range(replacement.span.range(), &replacement.text);
        }
        let again = parse(&fixed);
        assert!(
            again.problems.is_empty(),
            "{src:?} → {fixed:?}: {:#?}",
            again.problems
        );
    }
}
