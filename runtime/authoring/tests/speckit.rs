//! The spec-kit task compiler: task files → a v0.1 spec that checks clean, its steps' ensures,
//! judgments and dependencies, the reference's bugs 30–32 fixed, and every error it gives.

use std::path::Path;

use serde_json::{Value, json};
use stratum_authoring::speckit::{
    self, CompiledTasks, MAX_TASK_FILE_BYTES, MAX_TASK_FILES, SpeckitError, compile_tasks,
    compile_tasks_dir, step_id,
};
use stratum_compiler::plan::{Action, Plan};
use stratum_compiler::source::SourceMap;
use stratum_grammar::{Bindings, Limits};
use stratum_runtime::compile::plan_from_spec;

const README_TASK: &str = r#"# Task: [P] Implement authentication

Add JWT-based authentication to the API.

## Acceptance Criteria

- [ ] file src/auth/middleware.ts exists
- [ ] file src/auth/middleware.ts contains "verifyToken"
- [ ] tests pass
- [ ] no lint errors
- [ ] Error messages are user-friendly
"#;

/// Compiles `(file name, text)` pairs into the flow `tasks`, asserting that the spec checks
/// with no diagnostic at all.
fn compile(files: &[(&str, &str)]) -> CompiledTasks {
    let files: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(name, text)| ((*name).to_owned(), text.as_bytes().to_vec()))
        .collect();
    let compiled = compile_tasks(&files, "tasks").expect("the task files compile");
    assert_checks_clean(&compiled);
    compiled
}

fn compile_err(files: &[(&str, &[u8])]) -> SpeckitError {
    let files: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(name, bytes)| ((*name).to_owned(), bytes.to_vec()))
        .collect();
    compile_tasks(&files, "tasks").expect_err("the task files do not compile")
}

fn assert_checks_clean(compiled: &CompiledTasks) {
    let compilation = stratum_compiler::check_bytes(
        &mut SourceMap::new(),
        "tasks.stratum.yaml",
        compiled.yaml.as_bytes(),
    );
    assert!(
        compilation.diagnostics.is_empty(),
        "{:#?}\n{}",
        compilation.diagnostics,
        compiled.yaml
    );
}

fn plan(compiled: &CompiledTasks) -> Plan {
    plan_from_spec("tasks.stratum.yaml", &compiled.yaml).expect("the spec lowers")
}

/// Each step's id and the ids it depends on, in the flow's order.
fn edges(compiled: &CompiledTasks) -> Vec<(String, Vec<String>)> {
    let plan = plan(compiled);
    let flow = plan.flows.first().expect("one flow");
    let id = |index: &u32| {
        flow.steps
            .get(*index as usize)
            .expect("a dependency is a step")
            .id
            .clone()
    };
    flow.steps
        .iter()
        .map(|step| (step.id.clone(), step.depends_on.iter().map(id).collect()))
        .collect()
}

fn edge(id: &str, depends_on: &[&str]) -> (String, Vec<String>) {
    (
        id.to_owned(),
        depends_on.iter().map(|&d| d.to_owned()).collect(),
    )
}

/// The function intent the plan carries for step `id`.
fn intent(compiled: &CompiledTasks, id: &str) -> String {
    let plan = plan(compiled);
    let step = plan
        .flows
        .iter()
        .flat_map(|flow| &flow.steps)
        .find(|step| step.id == id)
        .expect("the step exists");
    match &step.action {
        Action::Function { intent, .. } => intent.clone().expect("the function has an intent"),
        other => panic!("not a function step: {other:?}"),
    }
}

fn only_step(compiled: &CompiledTasks) -> &speckit::TaskStep {
    assert_eq!(compiled.steps.len(), 1);
    compiled.steps.first().expect("one step")
}

fn task_with_criteria(criteria: &[&str]) -> String {
    let mut text = "# Task: Check\n\n## Acceptance Criteria\n\n".to_owned();
    for criterion in criteria {
        text.push_str("- [ ] ");
        text.push_str(criterion);
        text.push('\n');
    }
    text
}

// ---------------------------------------------------------------------------------------------
// The format

#[test]
fn readme_example() {
    let compiled = compile(&[("01-auth.md", README_TASK)]);
    insta::assert_snapshot!(compiled.yaml);
    assert_eq!(
        serde_json::to_value(&compiled).expect("serializes"),
        json!({
            "status": "ok",
            "yaml": compiled.yaml,
            "flow_name": "tasks",
            "steps": [{
                "id": "t01_auth",
                "title": "Implement authentication",
                "parallel": true,
                "ensures": [
                    "file_exists(\"src/auth/middleware.ts\")",
                    "file_contains(\"src/auth/middleware.ts\", \"verifyToken\")",
                    "result.tests_pass == True",
                    "result.lint_clean == True",
                ],
                "judgment": ["Error messages are user-friendly"],
            }],
        })
    );
    assert_eq!(
        intent(&compiled, "t01_auth"),
        "Implement authentication\nAdd JWT-based authentication to the API.\n\
         Also verify: Error messages are user-friendly"
    );
}

#[test]
fn reference_example_step_summary() {
    let task = "# Task: Research the codebase\n\n## Acceptance Criteria\n\n\
                - [ ] file docs/notes.md exists\n\
                - [ ] file src/a.py contains \"def main\"\n\
                - [ ] tests pass\n\
                - [ ] Findings are clear\n";
    let compiled = compile(&[("01-research.md", task)]);
    assert_eq!(
        serde_json::to_value(only_step(&compiled)).expect("serializes"),
        json!({
            "id": "t01_research",
            "title": "Research the codebase",
            "parallel": false,
            "ensures": [
                "file_exists(\"docs/notes.md\")",
                "file_contains(\"src/a.py\", \"def main\")",
                "result.tests_pass == True",
            ],
            "judgment": ["Findings are clear"],
        })
    );
}

#[test]
fn sequential_tasks_depend_on_the_one_before() {
    let compiled = compile(&[
        ("01-a.md", "# Task: A\n"),
        ("02-b.md", "# Task: B\n"),
        ("03-c.md", "# Task: C\n"),
    ]);
    assert_eq!(
        edges(&compiled),
        [
            edge("t01_a", &[]),
            edge("t02_b", &["t01_a"]),
            edge("t03_c", &["t02_b"]),
        ]
    );
    assert!(!compiled.yaml.contains("depends_on: []"));
}

/// Bug 32: the reference ran everything in sequence; a parallel group shares its
/// predecessor, and the task after it waits for the whole group.
#[test]
fn parallel_groups_share_a_predecessor_and_join() {
    let compiled = compile(&[
        ("05-e.md", "# Task: [P] E\n"),
        ("01-a.md", "# Task: [P] A\n"),
        ("02-b.md", "# Task: [P] B\n"),
        ("03-c.md", "# Task: C\n"),
        ("04-d.md", "# Task: D\n"),
        ("06-f.md", "# Task: [P] F\n"),
        ("07-g.md", "# Task: G [P]\n"),
        ("08-h.md", "# Task: H\n"),
        ("09-i.md", "# Task: [P] I\n"),
        ("10-j.md", "# Task: J\n"),
    ]);
    assert_eq!(
        edges(&compiled),
        [
            edge("t01_a", &[]),
            edge("t02_b", &[]),
            edge("t03_c", &["t01_a", "t02_b"]),
            edge("t04_d", &["t03_c"]),
            edge("t05_e", &["t04_d"]),
            edge("t06_f", &["t04_d"]),
            edge("t07_g", &["t04_d"]),
            edge("t08_h", &["t05_e", "t06_f", "t07_g"]),
            edge("t09_i", &["t08_h"]),
            edge("t10_j", &["t09_i"]),
        ]
    );
    let parallel: Vec<bool> = compiled.steps.iter().map(|step| step.parallel).collect();
    assert_eq!(
        parallel,
        [
            true, true, false, false, true, true, true, false, true, false
        ]
    );
    let titles: Vec<&str> = compiled.steps.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(titles, ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"]);
    // The runtime dispatches the group together.
    let plan = plan(&compiled);
    let levels = &plan.flows.first().expect("one flow").levels;
    assert_eq!(levels.len(), 7, "{levels:?}");
}

#[test]
fn a_parallel_group_at_the_end_has_no_join() {
    let compiled = compile(&[
        ("1.md", "# Task: One\n"),
        ("2.md", "# Task: [P] Two\n"),
        ("3.md", "# Task: [P] Three\n"),
    ]);
    assert_eq!(
        edges(&compiled),
        [edge("t1", &[]), edge("t2", &["t1"]), edge("t3", &["t1"])]
    );
}

#[test]
fn every_criterion_kind() {
    let task = task_with_criteria(&[
        "file a.txt exists",
        "File `docs/My Notes.md` exists.",
        "file \"with space/x.md\" exists",
        "file src/lib.rs contains \"pub fn\"",
        "file src/lib.rs contains 'single quoted'",
        "file `src/lib.rs` contains `backticked`",
        "file src/lib.rs contains unquoted words here",
        "file src/lib.rs contains \"period after the quote\".",
        "file \"a b.txt\" contains x",
        "All tests pass",
        "Tests passing",
        "the test suite passes",
        "unit tests pass.",
        "No lint errors",
        "Lint passes",
        "linter is clean",
        "Docs read well",
    ]);
    let compiled = compile(&[("check.md", &task)]);
    let step = only_step(&compiled);
    assert_eq!(
        step.ensures,
        [
            r#"file_exists("a.txt")"#,
            r#"file_exists("docs/My Notes.md")"#,
            r#"file_exists("with space/x.md")"#,
            r#"file_contains("src/lib.rs", "pub fn")"#,
            r#"file_contains("src/lib.rs", "single quoted")"#,
            r#"file_contains("src/lib.rs", "backticked")"#,
            r#"file_contains("src/lib.rs", "unquoted words here")"#,
            r#"file_contains("src/lib.rs", "period after the quote")"#,
            r#"file_contains("a b.txt", "x")"#,
            "result.tests_pass == True",
            "result.tests_pass == True",
            "result.tests_pass == True",
            "result.tests_pass == True",
            "result.lint_clean == True",
            "result.lint_clean == True",
            "result.lint_clean == True",
        ]
    );
    assert_eq!(step.judgment, ["Docs read well"]);
    assert!(
        compiled
            .yaml
            .contains("required: [done, tests_pass, lint_clean]")
    );
    assert!(
        compiled
            .yaml
            .contains("tests_pass: {type: boolean, optional: true}")
    );
    assert!(
        compiled
            .yaml
            .contains("lint_clean: {type: boolean, optional: true}")
    );
}

#[test]
fn flags_are_declared_only_when_used_and_required_only_where_checked() {
    let compiled = compile(&[
        ("a.md", &task_with_criteria(&["tests pass"])),
        ("b.md", &task_with_criteria(&["no lint errors"])),
        ("c.md", &task_with_criteria(&["Looks good"])),
    ]);
    let required: Vec<&str> = compiled
        .yaml
        .lines()
        .filter_map(|line| line.trim().strip_prefix("required: "))
        .collect();
    assert_eq!(
        required,
        ["[done, tests_pass]", "[done, lint_clean]", "[done]"]
    );

    let plain = compile(&[("a.md", "# Task: Just do it\n")]);
    assert!(!plain.yaml.contains("tests_pass"));
    assert!(!plain.yaml.contains("lint_clean"));
    assert!(plain.yaml.contains("      - \"result.done == True\"\n"));
}

#[test]
fn the_ensures_run_against_results() {
    let compiled = compile(&[(
        "a.md",
        &task_with_criteria(&["tests pass", "no lint errors"]),
    )]);
    let plan = plan(&compiled);
    let step = plan
        .flows
        .first()
        .and_then(|flow| flow.steps.first())
        .expect("one step");
    let holds = |result: Value| {
        step.ensure
            .iter()
            .map(|ensure| {
                ensure
                    .program
                    .evaluate_bool(&Bindings::new().name("result", &result), &Limits::default())
                    .expect("evaluates")
            })
            .collect::<Vec<bool>>()
    };
    assert_eq!(
        holds(json!({"done": true, "tests_pass": true, "lint_clean": true})),
        [true, true, true]
    );
    assert_eq!(
        holds(json!({"done": true, "tests_pass": false, "lint_clean": true})),
        [false, true, true]
    );
}

#[test]
fn judgment_criteria_go_into_the_intent() {
    let task = "# Task: Write docs\n\nDocument the API.\n\nSecond paragraph.\n\n\
                ## Acceptance Criteria\n\n- [ ] Docs are clear\n- [x] Examples compile\n\n\
                ## Notes\n\nKeep it short.\n";
    let compiled = compile(&[("docs.md", task)]);
    assert_eq!(
        only_step(&compiled).judgment,
        ["Docs are clear", "Examples compile"]
    );
    assert_eq!(
        intent(&compiled, "docs"),
        "Write docs\nDocument the API.\n\nSecond paragraph.\n\n## Notes\n\nKeep it short.\n\
         Also verify: Docs are clear; Examples compile"
    );
}

/// Bug 30: the reference's `\btests?\b.*\bpass` took these for `tests pass`.
#[test]
fn tests_pass_is_a_whole_phrase() {
    let freeform = [
        "test passwords are hashed",
        "Tests for the password reset pass review",
        "tests pass through the proxy",
        "contests pass",
        "tests passed to the helper are sorted",
        "no tests",
        "the test passport is valid",
        "existing tests still pass",
    ];
    let positive = [
        "tests pass",
        "all tests pass",
        "Tests passing",
        "ALL THE TESTS PASS!",
        "test suite passes",
        "tests are passing",
        "existing tests pass",
    ];
    let mut criteria: Vec<&str> = freeform.to_vec();
    criteria.extend(positive);
    let compiled = compile(&[("t.md", &task_with_criteria(&criteria))]);
    let step = only_step(&compiled);
    assert_eq!(step.judgment, freeform);
    assert_eq!(
        step.ensures,
        vec!["result.tests_pass == True"; positive.len()]
    );
}

/// Bug 31: the reference escaped only `"`, so backslashes gave ensures that did not compile.
/// Each literal round-trips: the ensure is true exactly on a file with that name and text.
#[test]
fn paths_and_needles_are_escaped_and_round_trip() {
    let cases: [(&str, &str); 8] = [
        (r"C:\x\y.txt", r"a\b"),
        (r#"quote"d.txt"#, r#"say "hi""#),
        ("trailing-backslash.txt", "ends with \\"),
        ("__init__.py", "__all__ = ['x']"),
        ("hash#colon: - dash.txt", "# not a comment: - [x]"),
        ("tab.txt", "a\tb"),
        ("unicode-é-日本.txt", "🚀 \u{2028} \u{feff} done"),
        ("dollar.txt", "${HOME} {{x}} $.input.x"),
    ];
    let criteria: Vec<String> = cases
        .iter()
        .map(|(path, needle)| {
            let path = if path.contains(' ') {
                format!("`{path}`")
            } else {
                (*path).to_owned()
            };
            format!("file {path} contains \"{needle}\"")
        })
        .collect();
    let criteria: Vec<&str> = criteria.iter().map(String::as_str).collect();
    let compiled = compile(&[("escapes.md", &task_with_criteria(&criteria))]);
    let step = only_step(&compiled);
    assert_eq!(
        step.ensures,
        [
            r#"file_contains("C:\\x\\y.txt", "a\\b")"#,
            r#"file_contains("quote\"d.txt", "say \"hi\"")"#,
            r#"file_contains("trailing-backslash.txt", "ends with \\")"#,
            r#"file_contains("_\x5finit_\x5f.py", "_\x5fall_\x5f = ['x']")"#,
            r##"file_contains("hash#colon: - dash.txt", "# not a comment: - [x]")"##,
            r#"file_contains("tab.txt", "a\tb")"#,
            "file_contains(\"unicode-é-日本.txt\", \"🚀 \\u2028 \\ufeff done\")",
            r#"file_contains("dollar.txt", "${HOME} {{x}} $.input.x")"#,
        ]
    );
    assert!(step.judgment.is_empty());

    let plan = plan(&compiled);
    let planned = plan
        .flows
        .first()
        .and_then(|flow| flow.steps.first())
        .expect("one step");
    // The plan holds the ensures as written, then `result.done == True`.
    let sources: Vec<&str> = planned
        .ensure
        .iter()
        .map(|ensure| ensure.program.source())
        .collect();
    let mut expected: Vec<&str> = step.ensures.iter().map(String::as_str).collect();
    expected.push("result.done == True");
    assert_eq!(sources, expected);

    let root = tempfile::tempdir().expect("a temporary directory");
    let result = json!({"done": true});
    let evaluate = |index: usize| {
        planned
            .ensure
            .get(index)
            .expect("an ensure per case")
            .program
            .evaluate_bool(
                &Bindings::new().name("result", &result),
                &Limits::default().with_root(root.path()),
            )
            .expect("evaluates")
    };
    for (index, (path, needle)) in cases.iter().enumerate() {
        assert!(!evaluate(index), "{path}: no file yet");
        std::fs::write(root.path().join(path), format!("before {needle} after"))
            .expect("writes the file");
        assert!(evaluate(index), "{path} contains {needle:?}");
        std::fs::write(root.path().join(path), "something else").expect("writes the file");
        assert!(!evaluate(index), "{path} no longer contains {needle:?}");
    }
}

#[test]
fn paths_with_quotes_and_backslashes_in_file_exists() {
    let compiled = compile(&[(
        "a.md",
        &task_with_criteria(&[
            r#"file a"b.txt exists"#,
            r"file dir\sub\x.txt exists",
            r#"file "C:\Program Files\x" exists"#,
        ]),
    )]);
    assert_eq!(
        only_step(&compiled).ensures,
        [
            r#"file_exists("a\"b.txt")"#,
            r#"file_exists("dir\\sub\\x.txt")"#,
            r#"file_exists("C:\\Program Files\\x")"#,
        ]
    );
    let plan = plan(&compiled);
    let planned = plan
        .flows
        .first()
        .and_then(|flow| flow.steps.first())
        .expect("one step");
    let root = tempfile::tempdir().expect("a temporary directory");
    let result = json!({"done": true});
    for (ensure, path) in
        planned
            .ensure
            .iter()
            .zip([r#"a"b.txt"#, r"dir\sub\x.txt", r"C:\Program Files\x"])
    {
        let holds = || {
            ensure
                .program
                .evaluate_bool(
                    &Bindings::new().name("result", &result),
                    &Limits::default().with_root(root.path()),
                )
                .expect("evaluates")
        };
        assert!(!holds(), "{path}");
        std::fs::write(root.path().join(path), "").expect("writes the file");
        assert!(holds(), "{path}");
    }
}

/// Titles, bodies and judgments with every YAML hazard reach the plan's intent unchanged.
#[test]
fn yaml_hazards_in_text_round_trip() {
    let body = "- starts with a dash\n# not: a comment\n  indented: \"quoted\" 'single' \\back\\slash\n\
                key: value # trailing\n{flow: mapping} [seq] & * ! % @ ` | > ? ,\n\
                tab\there, bell \u{7} escape \u{1b} nel \u{85} ls \u{2028} bom \u{feff} del \u{7f}\n\
                ${HOME} {{ template }} __dunder__ 🚀 é";
    let task = format!(
        "# Task: - \"Quoted\": 'title' # with #hash & *star\n\n{body}\n\n\
         ## Acceptance Criteria\n\n- [ ] yes: no # really\n- [ ] \"quoted\" judgment\n"
    );
    let compiled = compile(&[("hazard.md", &task)]);
    assert_eq!(
        only_step(&compiled).title,
        "- \"Quoted\": 'title' # with #hash & *star"
    );
    assert_eq!(
        intent(&compiled, "hazard"),
        format!(
            "- \"Quoted\": 'title' # with #hash & *star\n{body}\n\
             Also verify: yes: no # really; \"quoted\" judgment"
        )
    );
}

#[test]
fn crlf_bom_and_fenced_code() {
    let task = "\u{feff}# Task: [P] Windows\r\n\r\nBody line.\r\n\r\n```sh\r\n# a shell comment\r\n```\r\n\r\n\
                ## Acceptance Criteria\r\n\r\n- [ ] tests pass\r\n```\r\n- [ ] file in/fence.txt exists\r\n```\r\n\
                * [X] lint passes\r\n";
    let compiled = compile(&[("win.md", task)]);
    let step = only_step(&compiled);
    assert_eq!(step.title, "Windows");
    assert!(step.parallel);
    assert_eq!(
        step.ensures,
        ["result.tests_pass == True", "result.lint_clean == True"]
    );
    assert_eq!(
        intent(&compiled, "win"),
        "Windows\nBody line.\n\n```sh\n# a shell comment\n```"
    );
}

#[test]
fn titles_fall_back_to_the_first_heading_then_the_stem() {
    let compiled = compile(&[
        ("a.md", "Preamble\n\n# Plain heading\n\nBody.\n"),
        (
            "b.md",
            "No heading at all.\n\n## Acceptance Criteria\n- [ ] ok\n",
        ),
        ("c.md", "# Task: [P]\n\nOnly a marker.\n"),
        ("d.md", "## Sub heading\n\n# Task:   Spaced   out  \n"),
        ("e.md", "# task: lower case keyword\n"),
        ("f.md", "# [P] Heading marked parallel\n"),
    ]);
    let summary: Vec<(&str, bool)> = compiled
        .steps
        .iter()
        .map(|step| (step.title.as_str(), step.parallel))
        .collect();
    assert_eq!(
        summary,
        [
            ("Plain heading", false),
            ("b", false),
            ("c", true),
            ("Spaced out", false),
            ("lower case keyword", false),
            ("Heading marked parallel", true),
        ]
    );
    assert_eq!(intent(&compiled, "a"), "Plain heading\nBody.");
    assert_eq!(
        intent(&compiled, "b"),
        "b\nNo heading at all.\nAlso verify: ok"
    );
}

#[test]
fn criteria_that_are_not_quite_file_criteria_stay_judgments() {
    let compiled = compile(&[(
        "a.md",
        &task_with_criteria(&[
            "file exists",
            "file x contains",
            "files a.txt exists",
            "profile x exists",
            "file \"\" exists",
            "file x contains \"\"",
        ]),
    )]);
    let step = only_step(&compiled);
    assert!(step.ensures.is_empty(), "{:?}", step.ensures);
    assert_eq!(step.judgment.len(), 6);
}

#[test]
fn step_ids() {
    for (stem, id) in [
        ("01-Research", "t01_research"),
        ("Hello World", "hello_world"),
        ("__x__", "x"),
        ("a__b", "a__b"),
        ("", "task"),
        ("---", "task"),
        ("9", "t9"),
        ("Ärger", "rger"),
        ("_1x", "t1x"),
        ("tasks.v2", "tasks_v2"),
        ("yes", "yes"),
    ] {
        assert_eq!(step_id(stem), id, "{stem:?}");
    }
    // Ids that YAML 1.1 reads as booleans or null, a `__` id, and an id equal to the flow's
    // name still check clean.
    let compiled = compile(&[
        ("yes.md", "# Task: Y\n"),
        ("null.md", "# Task: N\n"),
        ("a__b.md", "# Task: D\n"),
        ("tasks.md", "# Task: T\n"),
        ("01-Research.md", "# Task: R\n"),
    ]);
    let ids: Vec<&str> = compiled.steps.iter().map(|step| step.id.as_str()).collect();
    assert_eq!(ids, ["t01_research", "a__b", "null", "tasks", "yes"]);
}

#[test]
fn flow_names() {
    for name in ["tasks", "_private", "Build2", "a_b"] {
        let files = vec![("a.md".to_owned(), b"# Task: A\n".to_vec())];
        let compiled = compile_tasks(&files, name).expect("a valid flow name");
        assert_eq!(compiled.flow_name, name);
        assert_checks_clean(&compiled);
        assert_eq!(
            plan(&compiled).flows.first().map(|f| f.name.as_str()),
            Some(name)
        );
    }
    for name in ["", "1abc", "my-flow", "tâche", "a b", "x:y"] {
        let files = vec![("a.md".to_owned(), b"# Task: A\n".to_vec())];
        let error = compile_tasks(&files, name).expect_err("an invalid flow name");
        assert!(
            matches!(error, SpeckitError::InvalidFlowName(_)),
            "{error:?}"
        );
        assert_eq!(error.error_type(), "compile_error");
        assert!(error.to_string().contains(&format!("`{name}`")), "{error}");
    }
}

// ---------------------------------------------------------------------------------------------
// Errors

#[test]
fn non_utf8_file_is_a_compile_error_naming_it() {
    let error = compile_err(&[
        ("01-ok.md", b"# Task: Fine\n"),
        ("02-latin1.md", b"# Task: caf\xe9\n"),
    ]);
    assert!(
        matches!(error, SpeckitError::InvalidUtf8 { offset: 11, .. }),
        "{error:?}"
    );
    let failure = serde_json::to_value(error.failure()).expect("serializes");
    assert_eq!(
        failure,
        json!({
            "status": "error",
            "error_type": "compile_error",
            "message": "task file `02-latin1.md` is not valid UTF-8 (invalid byte at offset 11); save it as UTF-8",
        })
    );
}

#[test]
fn colliding_step_ids() {
    let error = compile_err(&[("a_b.md", b"# Task: Two\n"), ("a-b.md", b"# Task: One\n")]);
    assert_eq!(error.error_type(), "step_id_collision");
    assert_eq!(
        error.to_string(),
        "task files `a-b.md` and `a_b.md` both give the step id `a_b`; rename one of them"
    );
    let error = compile_err(&[("task.md", b""), ("___.md", b"")]);
    assert_eq!(error.error_type(), "step_id_collision");
    assert!(
        error.to_string().contains("`___.md` and `task.md`"),
        "{error}"
    );
}

#[test]
fn no_tasks() {
    let error = compile_err(&[]);
    assert_eq!(error.error_type(), "no_tasks");

    let dir = tempfile::tempdir().expect("a temporary directory");
    let error = compile_tasks_dir(dir.path(), "tasks").expect_err("an empty directory");
    assert_eq!(error.error_type(), "no_tasks");
    assert!(
        error
            .to_string()
            .contains(&dir.path().display().to_string())
    );

    // Nothing here is a task file.
    std::fs::write(dir.path().join("notes.txt"), "# Task: no\n").expect("writes");
    std::fs::write(dir.path().join("README.MD"), "# Task: no\n").expect("writes");
    std::fs::write(dir.path().join(".hidden.md"), "# Task: no\n").expect("writes");
    std::fs::create_dir(dir.path().join("folder.md")).expect("creates");
    std::fs::create_dir(dir.path().join("sub")).expect("creates");
    std::fs::write(dir.path().join("sub/nested.md"), "# Task: no\n").expect("writes");
    let error = compile_tasks_dir(dir.path(), "tasks").expect_err("no task files");
    assert_eq!(error.error_type(), "no_tasks");
}

#[test]
fn missing_directory() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let missing = dir.path().join("missing");
    let error = compile_tasks_dir(&missing, "tasks").expect_err("no directory");
    assert_eq!(error.error_type(), "directory_not_found");
    assert!(error.to_string().contains("missing"));

    let file = dir.path().join("file.md");
    std::fs::write(&file, "# Task: A\n").expect("writes");
    let error = compile_tasks_dir(&file, "tasks").expect_err("a file, not a directory");
    assert_eq!(error.error_type(), "directory_not_found");
}

#[test]
fn compiles_a_directory_in_file_name_order() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let write = |name: &str, text: &str| {
        std::fs::write(dir.path().join(name), text).expect("writes the task file");
    };
    write("02-second.md", "# Task: [P] Second\n");
    write("01-first.md", README_TASK);
    write("03-third.md", "# Task: [P] Third\n");
    write("10-last.md", "# Task: Last\n");
    write("ignored.txt", "# Task: not a task\n");
    let compiled = compile_tasks_dir(dir.path(), "build").expect("compiles");
    assert_checks_clean(&compiled);
    assert_eq!(compiled.flow_name, "build");
    assert_eq!(
        edges(&compiled),
        [
            edge("t01_first", &[]),
            edge("t02_second", &[]),
            edge("t03_third", &[]),
            edge("t10_last", &["t01_first", "t02_second", "t03_third"]),
        ]
    );
    // The same as compiling the contents.
    let same = compile(&[
        ("01-first.md", README_TASK),
        ("02-second.md", "# Task: [P] Second\n"),
        ("03-third.md", "# Task: [P] Third\n"),
        ("10-last.md", "# Task: Last\n"),
    ]);
    assert_eq!(compiled.steps, same.steps);
}

#[test]
fn a_task_file_over_the_size_limit() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut text = "# Task: Big\n\n".to_owned();
    text.push_str(&"x".repeat(MAX_TASK_FILE_BYTES - text.len()));
    assert_eq!(text.len(), MAX_TASK_FILE_BYTES);
    std::fs::write(dir.path().join("big.md"), &text).expect("writes");
    let compiled = compile_tasks_dir(dir.path(), "tasks").expect("exactly the limit compiles");
    assert_checks_clean(&compiled);

    text.push('x');
    std::fs::write(dir.path().join("big.md"), &text).expect("writes");
    let error = compile_tasks_dir(dir.path(), "tasks").expect_err("over the limit");
    assert_eq!(error.error_type(), "compile_error");
    assert_eq!(
        error.to_string(),
        "task file `big.md` is larger than 1 MiB; shorten it"
    );

    let error = compile_err(&[("big.md", text.as_bytes())]);
    assert!(
        matches!(error, SpeckitError::TaskTooLarge { .. }),
        "{error:?}"
    );
}

#[test]
fn too_many_task_files() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for index in 0..MAX_TASK_FILES {
        let name = format!("{index:04}.md");
        std::fs::write(dir.path().join(name), "# Task: T\n").expect("writes");
    }
    let compiled = compile_tasks_dir(dir.path(), "tasks").expect("exactly the limit compiles");
    assert_eq!(compiled.steps.len(), MAX_TASK_FILES);
    assert_checks_clean(&compiled);

    std::fs::write(dir.path().join("extra.md"), "# Task: T\n").expect("writes");
    let error = compile_tasks_dir(dir.path(), "tasks").expect_err("over the limit");
    assert_eq!(error.error_type(), "compile_error");
    assert_eq!(
        error.to_string(),
        "more than 1000 task files; split the tasks into several directories"
    );

    let files: Vec<(String, Vec<u8>)> = (0..=MAX_TASK_FILES)
        .map(|index| (format!("{index}.md"), Vec::new()))
        .collect();
    let error = compile_tasks(&files, "tasks").expect_err("over the limit");
    assert!(matches!(error, SpeckitError::TooManyTasks), "{error:?}");
}

#[test]
fn error_types() {
    let cases: [(SpeckitError, &str); 4] = [
        (
            SpeckitError::DirectoryNotFound(Path::new("x").to_owned()),
            "directory_not_found",
        ),
        (SpeckitError::NoTasks(None), "no_tasks"),
        (
            SpeckitError::StepIdCollision {
                id: "a".to_owned(),
                first: "a.md".to_owned(),
                second: "A.md".to_owned(),
            },
            "step_id_collision",
        ),
        (
            SpeckitError::Compile("E0000: x".to_owned()),
            "compile_error",
        ),
    ];
    for (error, error_type) in cases {
        let failure = error.failure();
        assert_eq!(failure.status, "error");
        assert_eq!(failure.error_type, error_type);
        assert_eq!(failure.message, error.to_string());
    }
}
