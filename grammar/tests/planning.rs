//! The reference's planning built-ins, `no_file_conflicts` and `plan_completion`, case by case.
//! Every expected value and message was produced by the reference's own functions (stratum-mcp,
//! `executor._no_file_conflicts` and `spec.plan_completion`) on the same input.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use serde_json::{Value, json};
use stratum_grammar::{Bindings, EvalError, EvalErrorKind, Limits, compile};

fn eval(source: &str, result: &Value) -> Result<Value, EvalError> {
    eval_with(source, result, &Limits::default())
}

fn eval_with(source: &str, result: &Value, limits: &Limits) -> Result<Value, EvalError> {
    let parsed = stratum_grammar::parse(source);
    let expr = parsed.expr.expect("the expression parses");
    compile(&expr, source).evaluate(&Bindings::new().name("result", result), limits)
}

fn conflicts(tasks: Value) -> Result<Value, EvalError> {
    eval(
        "no_file_conflicts(result.tasks)",
        &json!({ "tasks": tasks }),
    )
}

/// The reference's `ValueError` message for a conflict.
fn conflict(tasks: Value) -> String {
    let error = conflicts(tasks).expect_err("a conflict");
    assert_eq!(error.kind, EvalErrorKind::Value, "{}", error.message);
    error.message
}

fn type_error(result: Result<Value, EvalError>) -> String {
    let error = result.expect_err("a type error");
    assert_eq!(error.kind, EvalErrorKind::Type, "{}", error.message);
    error.message
}

#[test]
fn independent_tasks_owning_a_file_conflict() {
    assert_eq!(
        conflict(json!([
            {"id": "t1", "files_owned": ["shared.py", "a.py"], "depends_on": []},
            {"id": "t2", "files_owned": ["shared.py", "b.py"], "depends_on": []},
        ])),
        "File ownership conflict between independent tasks 't1' and 't2': ['shared.py']"
    );
    // Every shared file, sorted.
    assert_eq!(
        conflict(json!([
            {"id": "t1", "files_owned": ["b.py", "a.py", "c.py"]},
            {"id": "t2", "files_owned": ["c.py", "a.py", "b.py"]},
        ])),
        "File ownership conflict between independent tasks 't1' and 't2': ['a.py', 'b.py', 'c.py']"
    );
    // The first conflicting pair, in order: `a` with `c`, before `b` with `d`.
    assert_eq!(
        conflict(json!([
            {"id": "a", "files_owned": ["x"]},
            {"id": "b", "files_owned": ["y"]},
            {"id": "c", "files_owned": ["x"]},
            {"id": "d", "files_owned": ["y"]},
        ])),
        "File ownership conflict between independent tasks 'a' and 'c': ['x']"
    );
    // Ids are written as Python's `str` writes them, files as its `repr`.
    assert_eq!(
        conflict(json!([
            {"id": 1, "files_owned": ["it's", "q\"x"]},
            {"id": 2, "files_owned": ["it's", "q\"x"]},
        ])),
        r#"File ownership conflict between independent tasks '1' and '2': ["it's", 'q"x']"#
    );
    // A file is a path as written: `./x` and `x` are two files.
    assert_eq!(
        conflicts(json!([{"id": "a", "files_owned": ["./x"]}, {"id": "b", "files_owned": ["x"]}])),
        Ok(json!(true))
    );
}

#[test]
fn tasks_ordered_by_depends_on_may_share_files() {
    for tasks in [
        // Directly, either way.
        json!([
            {"id": "t1", "files_owned": ["shared.py"], "depends_on": []},
            {"id": "t2", "files_owned": ["shared.py"], "depends_on": ["t1"]},
        ]),
        json!([
            {"id": "t1", "files_owned": ["shared.py"], "depends_on": ["t2"]},
            {"id": "t2", "files_owned": ["shared.py"]},
        ]),
        // Through another task.
        json!([
            {"id": "t1", "files_owned": ["shared.py"], "depends_on": []},
            {"id": "t2", "files_owned": ["other.py"], "depends_on": ["t1"]},
            {"id": "t3", "files_owned": ["shared.py"], "depends_on": ["t2"]},
        ]),
        // A cycle orders its tasks both ways.
        json!([
            {"id": "a", "files_owned": ["x"], "depends_on": ["b"]},
            {"id": "b", "files_owned": ["x"], "depends_on": ["a"]},
        ]),
        // Files read (`files_read`) are not owned.
        json!([
            {"id": "t1", "files_owned": ["a.py"], "files_read": ["config.py"]},
            {"id": "t2", "files_owned": ["b.py"], "files_read": ["config.py"]},
        ]),
    ] {
        assert_eq!(conflicts(tasks.clone()), Ok(json!(true)), "{tasks}");
    }
    assert_eq!(conflicts(json!([])), Ok(json!(true)));
    // One task with nothing to compare: its `files_owned` is never read.
    assert_eq!(
        conflicts(json!([{"id": "a", "files_owned": null}])),
        Ok(json!(true))
    );
}

#[test]
fn the_reference_quirks_are_kept() {
    // Tasks without an id are `task-<i>`, and the second of a pair `task-<i+1>`, whatever its
    // place; they depend on nothing (their dependencies are filed under the id "").
    assert_eq!(
        conflict(json!([
            {"files_owned": ["x"]},
            {"id": "t1", "files_owned": ["y"]},
            {"files_owned": ["x"]},
        ])),
        "File ownership conflict between independent tasks 'task-0' and 'task-1': ['x']"
    );
    // A string is iterated by characters, as Python's `set` does.
    assert_eq!(
        conflict(json!([
            {"id": "a", "files_owned": "ab.py"},
            {"id": "b", "files_owned": "ba.txt"},
        ])),
        "File ownership conflict between independent tasks 'a' and 'b': ['.', 'a', 'b']"
    );
    // `1`, `1.0` and `True` are one member of a set, as the smaller set holds it.
    assert_eq!(
        conflict(json!([
            {"id": "a", "files_owned": [1, "x"]},
            {"id": "b", "files_owned": [1.0, true]},
        ])),
        "File ownership conflict between independent tasks 'a' and 'b': [1.0]"
    );
}

#[test]
fn what_the_reference_cannot_read_is_an_error() {
    let message = type_error(conflicts(json!(3)));
    assert!(message.contains("iterable"), "{message}");
    let message = type_error(conflicts(json!([{"id": "a"}, "b"])));
    assert_eq!(
        message,
        "`no_file_conflicts` needs task records (with `id`, `files_owned` and `depends_on`): task 1 is a `str`"
    );
    let message = type_error(conflicts(json!([{"id": "a", "depends_on": null}])));
    assert_eq!(
        message,
        "the `depends_on` of task 0 must be a list, not `None`"
    );
    let message = type_error(conflicts(json!([{"id": ["a"]}])));
    assert_eq!(
        message,
        "the `id` of task 0 is a `list`, which cannot name a task"
    );
    let message = type_error(conflicts(json!([
        {"id": "a", "files_owned": null},
        {"id": "b", "files_owned": []},
    ])));
    assert_eq!(
        message,
        "the `files_owned` of task 0 must be a list, not `None`"
    );
    let message = type_error(conflicts(json!([
        {"id": "a", "files_owned": [["x"]]},
        {"id": "b", "files_owned": []},
    ])));
    assert_eq!(
        message,
        "the `files_owned` of task 0 holds a `list`, which cannot be a member of a set"
    );
    // Shared files of kinds that do not sort together.
    let message = type_error(conflicts(json!([
        {"id": "a", "files_owned": [1, "x"]},
        {"id": "b", "files_owned": ["x", 1]},
    ])));
    assert!(message.contains("cannot compare"), "{message}");
}

#[test]
fn many_tasks_stay_within_the_instruction_budget() {
    let tasks: Vec<Value> = (0..2_000)
        .map(|i| json!({"id": format!("t{i}"), "files_owned": [format!("f{i}")]}))
        .collect();
    let limits = Limits {
        instructions: 100_000,
        ..Limits::default()
    };
    let error = eval_with(
        "no_file_conflicts(result.tasks)",
        &json!({ "tasks": tasks }),
        &limits,
    )
    .expect_err("the pairs of 2,000 tasks cost more than 100,000 instructions");
    assert_eq!(error.kind, EvalErrorKind::Budget);
}

fn completion(items: Value, files: Value) -> Result<Value, EvalError> {
    eval(
        "plan_completion(result.items, result.files)",
        &json!({"items": items, "files": files}),
    )
}

fn completion_at(items: Value, files: Value, threshold: Value) -> Result<Value, EvalError> {
    eval(
        "plan_completion(result.items, result.files, result.threshold)",
        &json!({"items": items, "files": files, "threshold": threshold}),
    )
}

/// The violations of a failed `plan_completion`, each on its own.
fn violations(result: Result<Value, EvalError>) -> Vec<String> {
    let error = result.expect_err("violations");
    assert_eq!(error.kind, EvalErrorKind::Violations, "{}", error.message);
    assert_eq!(error.message, error.violations.join("; "));
    error.violations
}

fn item(text: &str, file: &str) -> Value {
    json!({"text": text, "file": file})
}

#[test]
fn a_missing_critical_item_is_a_violation_whatever_the_completion() {
    let items = json!([
        item("A", "a.py"),
        item("B", "b.py"),
        {"text": "C", "file": "c.py", "critical": true},
        {"text": "D", "file": "d.py", "critical": 1},
    ]);
    assert_eq!(
        violations(completion(items, json!(["a.py"]))),
        [
            "Missing critical item: C (expected in c.py)",
            "Missing critical item: D (expected in d.py)",
        ]
    );
}

#[test]
fn a_completion_below_the_threshold_lists_every_missing_item() {
    let mut items = vec![item("A", "a.py"); 7];
    items.push(item("B", "b.py"));
    assert_eq!(
        violations(completion(json!(items), json!(["a.py"]))),
        [
            "Plan completion 88% is below threshold 90%",
            "Missing item: B (expected in b.py)",
        ]
    );
    // Rounded half to even, as Python's `{:.0f}`: 37.5 is 38, 62.5 is 62.
    let mut items = vec![item("A", "a.py"); 3];
    items.extend(vec![item("B", "b.py"); 5]);
    assert_eq!(
        violations(completion(json!(items), json!(["a.py"])))[0],
        "Plan completion 38% is below threshold 90%"
    );
    let mut items = vec![item("A", "a.py"); 5];
    items.extend(vec![item("B", "b.py"); 3]);
    assert_eq!(
        violations(completion_at(json!(items), json!(["a.py"]), json!(70)))[0],
        "Plan completion 62% is below threshold 70%"
    );
    // Exactly the threshold is enough.
    let mut items = vec![item("A", "a.py"); 9];
    items.push(item("B", "b.py"));
    assert_eq!(completion(json!(items), json!(["a.py"])), Ok(json!(true)));
}

#[test]
fn the_threshold_is_the_third_argument() {
    let items = json!([item("A", "a.py"), item("B", "b.py")]);
    assert_eq!(
        completion_at(items.clone(), json!(["a.py"]), json!(50)),
        Ok(json!(true))
    );
    assert_eq!(
        violations(completion_at(items.clone(), json!(["a.py"]), json!(66.5))),
        [
            "Plan completion 50% is below threshold 66%",
            "Missing item: B (expected in b.py)",
        ]
    );
    assert_eq!(
        violations(completion_at(
            json!([item("A", "a.py")]),
            json!(["a.py"]),
            json!(150)
        )),
        ["Plan completion 100% is below threshold 150%"]
    );
    assert_eq!(
        eval(
            "plan_completion(result.items, ['a.py'], 50)",
            &json!({ "items": items })
        ),
        Ok(json!(true))
    );
    let message = type_error(completion_at(items, json!(["b.py"]), json!("x")));
    assert_eq!(
        message,
        "the `threshold` of `plan_completion` must be a number, not `str`"
    );
}

#[test]
fn items_without_a_file_are_done() {
    // No `file`, an empty one, an item that is not a record: done (nothing to check).
    assert_eq!(
        violations(completion(
            json!([
                {"file": "b.py"},
                {"text": null, "file": "c.py"},
                "plain text",
                {"text": "no file"},
                {"text": "empty", "file": ""},
            ]),
            json!(["a.py"])
        )),
        [
            "Plan completion 60% is below threshold 90%",
            "Missing item:  (expected in b.py)",
            "Missing item: None (expected in c.py)",
        ]
    );
    // No items: nothing to check, whatever the files.
    assert_eq!(completion(json!([]), json!(5)), Ok(json!(true)));
    assert_eq!(completion(json!(null), json!(null)), Ok(json!(true)));
    // No files changed.
    assert_eq!(
        violations(completion(json!([item("A", "a.py")]), json!(null))),
        [
            "Plan completion 0% is below threshold 90%",
            "Missing item: A (expected in a.py)",
        ]
    );
}

#[test]
fn plan_items_the_reference_cannot_read_are_errors() {
    let message = type_error(completion(json!([item("A", "a.py")]), json!(3)));
    assert_eq!(message, "`files_changed` must be a list, not `int`");
    let message = type_error(completion(json!([{"file": ["a.py"]}]), json!([])));
    assert_eq!(
        message,
        "the `file` of a plan item is a `list`, which cannot name a file"
    );
}

#[test]
fn violations_survive_explanations_and_json() {
    let source = "plan_completion(result.items, result.files)";
    let expr = stratum_grammar::parse(source).expr.unwrap();
    let program = compile(&expr, source);
    let result = json!({"items": [item("A", "a.py")], "files": []});
    let explanation = program.explain(&Bindings::new().name("result", &result), &Limits::default());
    assert!(!explanation.held());
    let error = explanation.outcome.expect_err("violations");
    assert_eq!(
        error.violations,
        [
            "Plan completion 0% is below threshold 90%",
            "Missing item: A (expected in a.py)",
        ]
    );
    let json = serde_json::to_value(&error).unwrap();
    assert_eq!(json["kind"], "Violations");
    assert_eq!(json["violations"][1], "Missing item: A (expected in a.py)");
    let back: EvalError = serde_json::from_value(json).unwrap();
    assert_eq!(back, error);
    // Other errors carry no list.
    let error = conflicts(json!(3)).unwrap_err();
    assert!(
        serde_json::to_value(&error)
            .unwrap()
            .get("violations")
            .is_none()
    );
}
