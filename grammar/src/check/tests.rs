//! Unit tests over hand-built trees (the tests over parsed text are in `tests/check.rs`).

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;
use crate::ast::{BinaryOp, CompareOp, Comparison, Generator, Ident, LogicalOp, UnaryOp};
use crate::types::{Literal, Record, RecordField};

fn e(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::default())
}

fn id(name: &str) -> Ident {
    Ident {
        name: name.to_owned(),
        span: Span::default(),
    }
}

fn name(n: &str) -> Expr {
    e(ExprKind::Name(id(n)))
}

fn attr(base: Expr, n: &str) -> Expr {
    e(ExprKind::Attr {
        base: Box::new(base),
        name: id(n),
    })
}

fn path(text: &str) -> Expr {
    let mut parts = text.split('.');
    let first = name(parts.next().unwrap());
    parts.fold(first, attr)
}

fn int(n: i64) -> Expr {
    e(ExprKind::Int(n))
}

fn s(text: &str) -> Expr {
    e(ExprKind::Str(text.to_owned()))
}

fn none() -> Expr {
    e(ExprKind::None)
}

fn call(f: &str, args: Vec<Expr>) -> Expr {
    e(ExprKind::Call { func: id(f), args })
}

fn method(receiver: Expr, n: &str, args: Vec<Expr>) -> Expr {
    e(ExprKind::Method {
        receiver: Box::new(receiver),
        name: id(n),
        args,
    })
}

fn cmp(lhs: Expr, op: CompareOp, rhs: Expr) -> Expr {
    e(ExprKind::Compare {
        first: Box::new(lhs),
        rest: vec![Comparison {
            op,
            op_span: Span::default(),
            rhs,
        }],
    })
}

fn bin(lhs: Expr, op: BinaryOp, rhs: Expr) -> Expr {
    e(ExprKind::Binary {
        op,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs),
    })
}

fn generator(element: Expr, var: &str, iter: Expr) -> Expr {
    e(ExprKind::Generator(Box::new(Generator {
        element,
        var: id(var),
        iter,
        conditions: Vec::new(),
    })))
}

fn record(fields: &[(&str, Type)]) -> Type {
    Type::record(Record {
        fields: fields
            .iter()
            .map(|(name, ty)| RecordField {
                name: (*name).to_owned(),
                ty: ty.clone(),
            })
            .collect(),
        open: false,
    })
}

fn labels() -> Type {
    Type::enumeration(vec![
        Literal::Str("positive".into()),
        Literal::Str("negative".into()),
    ])
}

fn env() -> Env {
    Env::new().with(
        "result",
        record(&[
            ("confidence", Type::Float),
            ("count", Type::Int),
            ("items", Type::list(Type::String)),
            ("label", labels()),
            ("note", Type::String.optional()),
            ("meta", Type::Any),
            (
                "tests",
                Type::list(record(&[("passed", Type::Bool), ("name", Type::String)])),
            ),
        ]),
    )
}

fn kinds(expr: &Expr) -> Vec<ProblemKind> {
    check(expr, &env())
        .problems
        .iter()
        .map(|p| p.kind)
        .collect()
}

fn only(expr: &Expr) -> Problem {
    let checked = check(expr, &env());
    assert_eq!(checked.problems.len(), 1, "{:#?}", checked.problems);
    checked.problems.into_iter().next().unwrap()
}

#[test]
fn clean_expressions_type_as_expected() {
    let checked = check(
        &e(ExprKind::Logical {
            op: LogicalOp::And,
            lhs: Box::new(cmp(
                path("result.confidence"),
                CompareOp::Gt,
                e(ExprKind::Float(0.7)),
            )),
            rhs: Box::new(cmp(
                call("len", vec![path("result.items")]),
                CompareOp::Gt,
                int(0),
            )),
        }),
        &env(),
    );
    assert_eq!(checked.problems, vec![]);
    assert_eq!(checked.ty, Type::Bool);

    let all = call(
        "all",
        vec![generator(path("t.passed"), "t", path("result.tests"))],
    );
    let checked = check(&all, &env());
    assert_eq!(checked.problems, vec![]);
    assert!(checked.types.contains(&(Span::default(), Type::Bool)));

    let meta = e(ExprKind::Index {
        base: Box::new(path("result.meta")),
        index: Box::new(s("k")),
    });
    assert_eq!(check(&meta, &env()).ty, Type::Any);
    assert_eq!(kinds(&meta), vec![]);
}

#[test]
fn unknown_names_suggest() {
    let problem = only(&path("reslt.confidence"));
    assert_eq!(problem.kind, ProblemKind::UnknownName);
    assert_eq!(problem.message, "unknown name `reslt`");
    assert_eq!(problem.replacement.unwrap().text, "result");

    let problem = only(&name("output"));
    assert_eq!(
        problem.help.as_deref(),
        Some("the only name available here is `result`")
    );
}

#[test]
fn generator_variables_are_scoped() {
    let gen_expr = call(
        "any",
        vec![generator(path("t.passed"), "t", path("result.tests"))],
    );
    assert_eq!(kinds(&gen_expr), vec![]);
    // `t` outside its generator is unknown.
    let outside = e(ExprKind::Logical {
        op: LogicalOp::And,
        lhs: Box::new(gen_expr),
        rhs: Box::new(path("t.passed")),
    });
    assert_eq!(kinds(&outside), vec![ProblemKind::UnknownName]);
}

#[test]
fn fields_are_checked() {
    let problem = only(&path("result.confidense"));
    assert_eq!(problem.kind, ProblemKind::UnknownField);
    assert_eq!(problem.message, "unknown field `confidense` on `result`");
    assert_eq!(problem.replacement.unwrap().text, "confidence");

    let problem = only(&path("result.score.value"));
    assert_eq!(problem.kind, ProblemKind::UnknownField);

    let problem = only(&path("result.confidence.value"));
    assert_eq!(problem.kind, ProblemKind::OperandTypes);
    assert_eq!(
        problem.message,
        "`result.confidence` is `float`, which has no fields"
    );

    // An optional record's fields are optional.
    let env = Env::new().with("r", record(&[("a", Type::Int)]).optional());
    assert_eq!(check(&path("r.a"), &env).ty, Type::Int.optional());
}

#[test]
fn operators_check_their_operands() {
    let problem = only(&bin(path("result.count"), BinaryOp::Add, s("x")));
    assert_eq!(problem.kind, ProblemKind::OperandTypes);
    assert_eq!(problem.message, "cannot use `+` on `int` and `string`");

    let problem = only(&cmp(path("result.count"), CompareOp::Gt, s("high")));
    assert_eq!(
        problem.message,
        "cannot compare `int` with `string` using `>`"
    );

    assert_eq!(
        check(&bin(path("result.count"), BinaryOp::Div, int(2)), &env()).ty,
        Type::Float
    );
    assert_eq!(
        check(
            &bin(path("result.count"), BinaryOp::FloorDiv, int(2)),
            &env()
        )
        .ty,
        Type::Int
    );
    assert_eq!(
        check(&bin(s("ab"), BinaryOp::Mul, path("result.count")), &env()).ty,
        Type::String
    );
    assert_eq!(
        kinds(&bin(none(), BinaryOp::Add, int(1))),
        vec![ProblemKind::OperandTypes, ProblemKind::ConstantExpression]
    );
    let neg = e(ExprKind::Unary {
        op: UnaryOp::Neg,
        operand: Box::new(path("result.items")),
    });
    assert_eq!(kinds(&neg), vec![ProblemKind::OperandTypes]);
}

#[test]
fn membership_and_identity() {
    assert_eq!(
        kinds(&cmp(s("a"), CompareOp::In, path("result.items"))),
        vec![]
    );
    assert_eq!(
        kinds(&cmp(
            path("result.count"),
            CompareOp::In,
            path("result.items")
        )),
        vec![ProblemKind::OperandTypes]
    );
    let problem = only(&cmp(s("a"), CompareOp::In, path("result.count")));
    assert_eq!(
        problem.message,
        "`in` needs a string, list or record on its right, found `int`"
    );
    let problem = only(&cmp(path("result.count"), CompareOp::Is, int(3)));
    assert_eq!(problem.replacement.unwrap().text, "==");
}

#[test]
fn builtins_are_checked() {
    let problem = only(&call("len", vec![path("result.confidence")]));
    assert_eq!(problem.kind, ProblemKind::CallArguments);
    assert_eq!(
        problem.message,
        "`len` needs a string, list or record, found `float`"
    );
    let problem = only(&call("lenn", vec![path("result.items")]));
    assert_eq!(problem.kind, ProblemKind::UnknownFunction);
    assert_eq!(problem.replacement.unwrap().text, "len");
    let problem = only(&call("abs", vec![path("result.count")]));
    assert_eq!(problem.message, "`abs` is not provided");
    let problem = only(&call("len", vec![path("result.items"), int(1)]));
    assert_eq!(problem.message, "`len` takes 1 argument, found 2");
    assert_eq!(
        check(
            &call("max", vec![path("result.count"), e(ExprKind::Float(1.5))]),
            &env()
        )
        .ty,
        Type::Float
    );
    assert_eq!(
        check(&call("min", vec![path("result.items")]), &env()).ty,
        Type::String
    );
}

#[test]
fn methods_are_checked() {
    let problem = only(&method(path("result.note"), "lowr", vec![]));
    assert_eq!(problem.kind, ProblemKind::UnknownMethod);
    assert_eq!(problem.replacement.unwrap().text, "lower");
    assert_eq!(
        check(&method(path("result.note"), "lower", vec![]), &env()).ty,
        Type::String.optional()
    );
    assert_eq!(
        check(&method(path("result.meta"), "split", vec![s(",")]), &env()).ty,
        Type::list(Type::String)
    );
    let problem = only(&method(path("result.meta"), "lowr", vec![]));
    assert_eq!(problem.kind, ProblemKind::UnknownMethod);
    let problem = only(&method(path("result.label"), "split", vec![s(","), s("x")]));
    assert_eq!(
        problem.message,
        "`string.split` needs an `int` for `maxsplit`, found `string`"
    );
    let problem = only(&method(path("result"), "get", vec![s("confidance")]));
    assert_eq!(problem.kind, ProblemKind::UnknownField);
    assert_eq!(
        check(
            &method(path("result"), "get", vec![s("count"), int(0)]),
            &env()
        )
        .ty,
        Type::Int
    );
}

#[test]
fn warnings() {
    let problem = only(&cmp(path("result.label"), CompareOp::Eq, s("positve")));
    assert_eq!(problem.kind, ProblemKind::EnumLiteral);
    assert_eq!(
        problem.message,
        "`result.label` is never `\"positve\"`: its values are `\"positive\"`, `\"negative\"`"
            .replace('"', &crate::print::string_literal("")[..1])
    );
    let problem = only(&cmp(path("result.confidence"), CompareOp::Is, none()));
    assert_eq!(problem.kind, ProblemKind::NoneComparison);
    assert_eq!(
        problem.message,
        "`result.confidence` is never `None`: its type is `float`"
    );
    assert_eq!(
        kinds(&cmp(path("result.note"), CompareOp::Is, none())),
        vec![]
    );
    let problem = only(&cmp(int(1), CompareOp::Lt, int(2)));
    assert_eq!(problem.kind, ProblemKind::ConstantExpression);
    assert_eq!(kinds(&call("file_exists", vec![s("a.txt")])), vec![]);
}

#[test]
fn errors_are_silent() {
    assert_eq!(kinds(&e(ExprKind::Error)), vec![]);
    assert_eq!(
        kinds(&bin(e(ExprKind::Error), BinaryOp::Add, int(1))),
        vec![]
    );
}
