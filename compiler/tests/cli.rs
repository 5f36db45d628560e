//! End-to-end tests of the `stratumc` binary: exit codes, inputs (files, directories, stdin),
//! every output format, `explain`, and the checks that need more than one file.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)] // tests may index and unwrap what they built

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use support::{stderr, stdout, stratumc_in};

fn stratumc(args: &[&str]) -> Output {
    run(args, None)
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    stratumc_in(&workspace(), args, stdin)
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A fresh directory under the target directory, for files a test writes.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the scratch directory can be made");
    dir
}

const MISTAKES: &str = "tests/corpus/invalid/multi_five_mistakes.stratum.yaml";

#[test]
fn the_examples_check_clean() {
    let output = stratumc(&["check", "examples"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "checked 8 specs: no problems\n"
    );
}

#[test]
fn a_spec_with_errors_exits_1_and_reports_each() {
    let output = stratumc(&["check", MISTAKES, "--format", "short"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output).lines().count(), 5);
}

#[test]
fn short_format() {
    let output = stratumc(&["check", MISTAKES, "--format", "short"]);
    insta::assert_snapshot!(stdout(&output));
}

#[test]
fn github_format() {
    let output = stratumc(&["check", MISTAKES, "--format", "github"]);
    insta::assert_snapshot!(stdout(&output));
}

#[test]
fn sarif_format() {
    let output = stratumc(&["check", MISTAKES, "--format", "sarif"]);
    let log: serde_json::Value = serde_json::from_slice(&output.stdout).expect("SARIF is JSON");
    assert_eq!(log["version"], "2.1.0");
    insta::assert_snapshot!(stdout(&output));
}

#[test]
fn json_format_follows_its_published_schema() {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../schemas/check-output.schema.json"))
            .expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema");
    let output = stratumc(&[
        "check",
        MISTAKES,
        "examples/sentiment.stratum.yaml",
        "tests/corpus/invalid/W0001_unknown_contract_field_key.stratum.yaml",
        "--format",
        "json",
    ]);
    let document: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the output is JSON");
    let errors: Vec<String> = validator
        .iter_errors(&document)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "the output does not follow the schema: {errors:#?}"
    );
    assert_eq!(
        document["summary"],
        serde_json::json!({"files": 3, "errors": 5, "warnings": 1})
    );
    insta::assert_snapshot!(stdout(&output));
}

#[test]
fn human_format_is_plain_off_a_terminal_and_coloured_on_request() {
    let plain = stratumc(&["check", MISTAKES]);
    assert!(
        !stdout(&plain).contains('\u{1b}'),
        "no colour when stdout is not a terminal"
    );
    insta::assert_snapshot!(stdout(&plain));
    let coloured = stratumc(&["check", MISTAKES, "--color", "always"]);
    assert!(stdout(&coloured).contains('\u{1b}'));
}

#[test]
fn stdin_is_read_for_a_dash() {
    let spec = std::fs::read(workspace().join("examples/sentiment.stratum.yaml"))
        .expect("the example exists");
    let clean = run(&["check", "-"], Some(&spec));
    assert_eq!(clean.status.code(), Some(0));
    let broken = run(
        &["check", "-", "--format", "short"],
        Some(b"version: \"0.2\"\nflows: 3\n"),
    );
    assert_eq!(broken.status.code(), Some(1));
    assert_eq!(
        stdout(&broken),
        "<stdin>:2:8: error[E0012]: expected a mapping of flows, found an integer\n"
    );
}

#[test]
fn missing_files_and_bad_arguments_exit_2() {
    let missing = stratumc(&["check", "no/such/file.stratum.yaml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("cannot read no/such/file.stratum.yaml")
    );
    assert_eq!(
        stratumc(&["check", "--format", "xml"]).status.code(),
        Some(2)
    );
    let empty = scratch("no-specs");
    let nothing = stratumc(&["check", empty.to_str().unwrap_or_default()]);
    assert_eq!(nothing.status.code(), Some(2));
}

#[test]
fn warnings_fail_only_when_denied() {
    let spec = "tests/corpus/invalid/W0001_unknown_contract_field_key.stratum.yaml";
    assert_eq!(stratumc(&["check", spec]).status.code(), Some(0));
    assert_eq!(
        stratumc(&["check", spec, "--deny-warnings"]).status.code(),
        Some(1)
    );
}

#[test]
fn single_warnings_can_be_denied_or_allowed() {
    let spec = "tests/corpus/invalid/W0010_unused_contract.stratum.yaml";
    let denied = stratumc(&["check", "--format", "short", "--deny", "W0010", spec]);
    assert_eq!(denied.status.code(), Some(1));
    assert!(
        stdout(&denied).contains("error[W0010]"),
        "{}",
        stdout(&denied)
    );
    let by_name = stratumc(&[
        "check",
        "--format",
        "short",
        "--deny",
        "unused-contract",
        spec,
    ]);
    assert_eq!(by_name.status.code(), Some(1));
    let other = stratumc(&["check", "--format", "short", "--deny", "W0012", spec]);
    assert_eq!(other.status.code(), Some(0));
    assert!(stdout(&other).contains("warning[W0010]"));
    let allowed = stratumc(&["check", "--format", "short", "--allow", "W0010", spec]);
    assert_eq!(allowed.status.code(), Some(0));
    assert_eq!(stdout(&allowed), "");
    let error_code = stratumc(&["check", "--allow", "E0035", spec]);
    assert_eq!(error_code.status.code(), Some(2));
    assert!(stderr(&error_code).contains("E0035 is an error, not a warning"));
}

#[test]
fn an_ensure_typo_fails_with_the_exact_field_underlined() {
    let spec = "tests/corpus/invalid/E0029_ensure_unknown_field.stratum.yaml";
    let output = stratumc(&["check", "--format", "json", spec]);
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let diagnostics = report["files"][0]["diagnostics"].as_array().unwrap();
    assert_eq!(diagnostics.len(), 1, "{report:#}");
    let primary = &diagnostics[0]["primary"];
    let (start, end) = (
        primary["start"]["offset"].as_u64().unwrap() as usize,
        primary["end"]["offset"].as_u64().unwrap() as usize,
    );
    let text = std::fs::read_to_string(workspace().join(spec)).unwrap();
    assert_eq!(&text[start..end], "confdence");
    assert_eq!(diagnostics[0]["code"], "E0029");
    assert_eq!(
        diagnostics[0]["fix"]["edits"][0]["replacement"],
        "confidence"
    );
}

#[test]
fn directories_are_searched_recursively_for_specs() {
    let dir = scratch("tree");
    std::fs::create_dir_all(dir.join("a/b")).expect("nested directories");
    std::fs::create_dir_all(dir.join(".hidden")).expect("a hidden directory");
    let spec = std::fs::read(workspace().join("examples/sentiment.stratum.yaml"))
        .expect("the example exists");
    for path in [
        "one.stratum.yaml",
        "a/b/two.stratum.yaml",
        "a/notes.yaml",
        ".hidden/three.stratum.yaml",
    ] {
        std::fs::write(dir.join(path), &spec).expect("the spec is written");
    }
    let output = stratumc(&[
        "check",
        dir.to_str().unwrap_or_default(),
        "--format",
        "json",
    ]);
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let paths: Vec<String> = document["files"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            f["path"]
                .as_str()
                .unwrap_or_default()
                .replace(dir.to_str().unwrap_or_default(), "DIR")
        })
        .collect();
    assert_eq!(paths, ["DIR/a/b/two.stratum.yaml", "DIR/one.stratum.yaml"]);
}

#[test]
fn duplicate_workflow_names_across_specs_are_reported() {
    let dir = scratch("workflows");
    let spec = |name: &str| {
        format!(
            "version: \"0.2\"\nworkflow:\n  name: {name}\n  description: \"Review a change\"\n  input: {{}}\nflows:\n  review:\n    input: {{}}\n    steps:\n      - id: read\n        intent: \"Read the change\"\n"
        )
    };
    std::fs::write(dir.join("a.stratum.yaml"), spec("review")).expect("written");
    std::fs::write(dir.join("b.stratum.yaml"), spec("review")).expect("written");
    std::fs::write(dir.join("c.stratum.yaml"), spec("other")).expect("written");
    let output = stratumc(&["check", dir.to_str().unwrap_or_default()]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output).replace(dir.to_str().unwrap_or_default(), "DIR");
    insta::assert_snapshot!(text);
}

#[test]
fn oversized_files_are_refused_unread() {
    let dir = scratch("large");
    let path = dir.join("huge.stratum.yaml");
    let line = "# padding padding padding padding padding padding padding padding\n";
    std::fs::write(&path, line.repeat(50 * 1024 * 1024 / line.len())).expect("a 50 MB file");
    let output = stratumc(&[
        "check",
        path.to_str().unwrap_or_default(),
        "--format",
        "short",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output).replace(path.to_str().unwrap_or_default(), "huge.stratum.yaml");
    assert_eq!(
        text,
        "huge.stratum.yaml:1:1: error[E0002]: the file is larger than the 16 MiB a spec may have\n"
    );
}

#[test]
fn explain_prints_every_code_and_refuses_unknown_ones() {
    let output = stratumc(&["explain", "E0007"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(stdout(&output).starts_with("# E0007: duplicate key"));
    assert_eq!(
        stdout(&stratumc(&["explain", "duplicate-key"])),
        stdout(&output)
    );
    let list = stratumc(&["explain"]);
    assert!(stdout(&list).lines().count() >= 25);
    let unknown = stratumc(&["explain", "E0907"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("did you mean E0007?"));
}

/// The command, its exit status, stdout and stderr, for a snapshot.
fn transcript(args: &[&str], output: &Output) -> String {
    format!(
        "$ stratumc {}\nexit: {:?}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        output.status.code(),
        stdout(output),
        stderr(output)
    )
}

#[test]
fn eval_prints_the_value_as_json() {
    let args = [
        "eval",
        "[result.a.b, result.a['b'], len($.steps.s1.output.items), $.input.x + 1, null]",
        "--result",
        r#"{"a": {"b": 2}}"#,
        "--steps",
        r#"{"s1": {"items": [1, 2, 3]}}"#,
        "--input",
        r#"{"x": 1.5}"#,
    ];
    let output = stratumc(&args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "[2,2,3,2.5,null]\n");
}

#[test]
fn eval_ensure_exits_by_truthiness_and_explains_a_failure() {
    let passing = [
        "eval",
        "result.confidence > 0.7 and len(result.items) > 0",
        "--ensure",
        "--result",
        r#"{"confidence": 0.9, "items": ["a"]}"#,
    ];
    let output = stratumc(&passing);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "true\n");

    let failing = [
        "eval",
        "result.confidence > 0.7 and len(result.items) > 0",
        "--ensure",
        "--result",
        r#"{"confidence": 0.42, "items": []}"#,
    ];
    let output = stratumc(&failing);
    assert_eq!(output.status.code(), Some(1));
    insta::assert_snapshot!(transcript(&failing, &output));
}

#[test]
fn eval_ensure_lists_the_violations_of_a_planning_built_in() {
    let result = r#"{"items": [{"text": "Parse", "file": "parse.py"}, {"text": "Write", "file": "write.py"}], "files": ["parse.py"]}"#;
    let failing = [
        "eval",
        "plan_completion(result.items, result.files)",
        "--ensure",
        "--result",
        result,
    ];
    let output = stratumc(&failing);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        "ensure `plan_completion(result.items, result.files)` failed with 2 violations:\n  \
         Plan completion 50% is below threshold 90%\n  \
         Missing item: Write (expected in write.py)\n"
    );
    let lowered = [
        "eval",
        "plan_completion(result.items, result.files, 50)",
        "--ensure",
        "--result",
        result,
    ];
    let output = stratumc(&lowered);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "true\n");
}

#[test]
fn eval_reports_syntax_type_and_evaluation_errors_on_the_expression() {
    let cases: &[&[&str]] = &[
        &["eval", "result.score >", "--result", "{}"],
        &["eval", "reslt.score > 1", "--result", r#"{"score": 2}"#],
        &["eval", "len(3)"],
        &[
            "eval",
            "result.passed / result.total > 0.9",
            "--result",
            r#"{"passed": 0, "total": 0}"#,
        ],
        &["eval", "result.missing == 1", "--result", r#"{"score": 2}"#],
    ];
    let mut transcripts = String::new();
    for args in cases {
        let output = stratumc(args);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        assert_eq!(stdout(&output), "");
        transcripts.push_str(&transcript(args, &output));
        transcripts.push('\n');
    }
    insta::assert_snapshot!(transcripts);
}

#[test]
fn eval_file_built_ins_stay_inside_the_root() {
    let dir = scratch("eval-root");
    std::fs::write(dir.join("notes.txt"), "all tests pass\n").unwrap();
    let root = dir.to_string_lossy().into_owned();
    let inside = [
        "eval",
        "file_exists('notes.txt') and file_contains('notes.txt', 'pass')",
        "--root",
        &root,
    ];
    let output = stratumc(&inside);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "true\n");

    let escaping = [
        "eval",
        "file_exists('../eval-root/notes.txt')",
        "--root",
        &root,
    ];
    let output = stratumc(&escaping);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(stderr(&output).contains("E0034"), "{}", stderr(&output));
}

#[test]
fn eval_rejects_bad_bindings() {
    for args in [
        &["eval", "1", "--result", "{not json"][..],
        &["eval", "1", "--var", "no-equals-sign"],
        &["eval", "1", "--steps", "[1]"],
    ] {
        let output = stratumc(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&output).starts_with("error: "),
            "{}",
            stderr(&output)
        );
    }
}

const DEPLOY: &str = "examples/deploy.stratum.yaml";

#[test]
fn build_writes_the_same_plan_every_time_wherever_it_goes() {
    let dir = scratch("build-deterministic");
    let first = dir.join("first.plan.json");
    let second = dir.join("second.plan.json");
    for path in [&first, &second] {
        let output = stratumc(&["build", DEPLOY, "-o", path.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(stdout(&output), "");
        assert_eq!(stderr(&output), "", "a clean spec builds silently");
    }
    let written = std::fs::read(&first).unwrap();
    assert_eq!(written, std::fs::read(&second).unwrap());
    assert_eq!(stratumc(&["build", DEPLOY]).stdout, written);
    assert_eq!(stratumc(&["build", DEPLOY, "-o", "-"]).stdout, written);
    let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(leftovers.len(), 2, "no temporary file is left behind");

    let pretty = stratumc(&["build", DEPLOY, "--pretty"]).stdout;
    assert!(pretty.len() > written.len());
    let plan = stratum_compiler::plan::load(&pretty).expect("a pretty plan loads");
    assert_eq!(
        plan,
        stratum_compiler::plan::load(&written).expect("a compact plan loads")
    );
    assert!(plan.is_built_from(&std::fs::read(workspace().join(DEPLOY)).unwrap()));
}

#[test]
fn build_refuses_a_spec_with_errors_and_writes_nothing() {
    let dir = scratch("build-refused");
    let plan = dir.join("plan.json");
    let args = ["build", MISTAKES, "-o", plan.to_str().unwrap()];
    let output = stratumc(&args);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    assert!(!plan.exists());
    let checked = stratumc(&["check", MISTAKES, "--format", "short"]);
    let built = stratumc(&["build", MISTAKES, "--message-format", "short"]);
    assert_eq!(
        stderr(&built),
        format!(
            "{}error: no plan written: the spec has errors\n",
            stdout(&checked)
        ),
        "the same diagnostics as check, on stderr"
    );

    let warned = "tests/corpus/invalid/W0010_unused_contract.stratum.yaml";
    let output = stratumc(&["build", warned]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "warnings do not stop a build"
    );
    assert!(stderr(&output).contains("W0010"));
    let denied = stratumc(&["build", warned, "--deny-warnings"]);
    assert_eq!(denied.status.code(), Some(1));
    assert_eq!(stdout(&denied), "");
}

#[test]
fn build_selects_a_flow_by_name() {
    let output = stratumc(&["build", DEPLOY, "--flow", "integration_tests"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let plan = stratum_compiler::plan::load(&output.stdout).unwrap();
    assert_eq!(plan.flows.len(), 1);
    assert_eq!(plan.entry, Some(0));

    let args = ["build", DEPLOY, "--flow", "integration_test"];
    let output = stratumc(&args);
    assert_eq!(output.status.code(), Some(2));
    insta::assert_snapshot!(transcript(&args, &output));
}

#[test]
fn completions_are_generated_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let output = stratumc(&["completions", shell]);
        assert_eq!(output.status.code(), Some(0), "{shell}");
        let script = stdout(&output);
        for word in [
            "check",
            "build",
            "graph",
            "explain",
            "schema",
            "deny-warnings",
            "pretty",
            "mermaid",
        ] {
            assert!(script.contains(word), "{shell} completes `{word}`");
        }
    }
    assert_eq!(stratumc(&["completions", "tcsh"]).status.code(), Some(2));
}

#[test]
fn every_command_explains_itself_with_examples_and_exit_codes() {
    for command in [
        "check",
        "build",
        "graph",
        "migrate",
        "eval",
        "explain",
        "schema",
        "completions",
    ] {
        let output = stratumc(&[command, "--help"]);
        assert_eq!(output.status.code(), Some(0), "{command}");
        let help = stdout(&output);
        assert!(help.contains("Examples:"), "{command} --help has examples");
        if command != "completions" {
            assert!(
                help.contains("Exit status"),
                "{command} --help has exit codes"
            );
        }
    }
}

#[test]
fn schema_prints_the_published_spec_schema() {
    let output = stratumc(&["schema"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(
        stdout(&output) == include_str!("../schemas/stratum-spec.schema.json"),
        "compiler/schemas/stratum-spec.schema.json is out of date; regenerate it with\n  \
         cargo run -p stratum-compiler --bin stratumc -- schema > compiler/schemas/stratum-spec.schema.json"
    );
    assert_eq!(stratumc(&["schema", "--pretty"]).status.code(), Some(2));
}

#[test]
fn output_closed_early_ends_quietly() {
    let example = workspace().join("examples/code-review.stratum.yaml");
    let example = example.to_str().unwrap_or_default();
    let commands: [&[&str]; 8] = [
        &["explain"],
        &["explain", "E0029"],
        &["schema"],
        &["completions", "bash"],
        &["eval", "result.n + 1", "--result", r#"{"n": 1}"#],
        &["build", example],
        &["graph", example],
        &["check", example, "--format", "json"],
    ];
    for args in commands {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stratumc"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("stratumc runs");
        // Close the reading end at once, as `| head -0` would.
        drop(child.stdout.take());
        let output = child.wait_with_output().expect("stratumc ends");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && stderr.is_empty(),
            "{args:?}: {:?}\n{stderr}",
            output.status
        );
    }
}

#[test]
fn an_expression_may_start_with_a_minus() {
    let output = stratumc(&["eval", "-7 % 3"]);
    assert_eq!(stdout(&output), "2\n");
    let output = stratumc(&["eval", "-result.count", "--result", r#"{"count": 4}"#]);
    assert_eq!(stdout(&output), "-4\n");
    assert_eq!(output.status.code(), Some(0));
}
